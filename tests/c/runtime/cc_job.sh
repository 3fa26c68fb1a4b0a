#!/bin/sh
# Runs a collective job across processes, one cc_client per rank, rendezvous over TCP on this host.
#
#   cc_job.sh CLIENT NEFF WORLD STARTED [EXPECTED_LOAD_STATUS]
#
# Starts ranks 0 .. STARTED-1 of a WORLD-rank job (STARTED < WORLD: the missing ranks never
# come, so the others must fail with EXPECTED_LOAD_STATUS), each on its own core
# (NEURON_RT_VISIBLE_CORES=rank), and fails unless every client exits 0.
set -u
client=$1 neff=$2 world=$3 started=$4 expect=${5:-0}
# A port that is free now (the kernel picks it); rank 0 binds it a moment later.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export NEURON_RT_ROOT_COMM_ID="127.0.0.1:$port" NEURONSIM_JOB_TOKEN="cc-job-$$"
: "${NEURON_RT_EXEC_TIMEOUT:=60}"
export NEURON_RT_EXEC_TIMEOUT
pids=""
r=0
while [ "$r" -lt "$started" ]; do
  NEURON_RT_VISIBLE_CORES=$r "$client" "$neff" "$r" "$world" "$expect" &
  pids="$pids $!"
  r=$((r + 1))
done
rc=0
for p in $pids; do
  wait "$p" || rc=1
done
exit $rc

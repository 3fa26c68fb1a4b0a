#!/usr/bin/env bash
# Sets up, builds, and runs the main job: an example NEFF (a bf16 matmul that the
# build made with KernelBuilder) on the simulated trn2, with a Perfetto trace.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
neff=build/examples/matmul_bf16.neff
echo
echo "== neuron-sim info $neff"
build/bin/neuron-sim info "$neff"
echo
echo "== neuron-sim run $neff --random-inputs --trace build/matmul_bf16.trace.json"
build/bin/neuron-sim run "$neff" --random-inputs --outputs-dir build/matmul_bf16.out \
  --trace build/matmul_bf16.trace.json --metrics build/matmul_bf16.metrics.json

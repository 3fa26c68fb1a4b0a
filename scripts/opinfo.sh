#!/usr/bin/env bash
# The labelled job of PyTorch's whole OpInfo database on "neuron" (neuronsim.tools.opinfo):
# every op x dtype the device claims, contiguous and non-contiguous, against the CPU, checked
# against the expected-failure list. CI's test run (scripts/test.sh) covers a slice of it.
#
#   scripts/opinfo.sh [JOBS]
#
# Writes every entry's result to build/opinfo/results.csv and prints the tally and the
# fallback ops ranked by entries. Exits 1 on a crash, a timeout, an unlisted failure or a
# listed entry that now passes. Expects the set-up of scripts/test.sh (.venv); about 25
# minutes on one core.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mkdir -p build/opinfo
HF_HUB_OFFLINE=1 NEURONSIM_MODE=functional-only .venv/bin/python -m neuronsim.tools.opinfo \
  --jobs "${1:-$(nproc)}" --quiet --csv build/opinfo/results.csv \
  --expected tests/python/tools/opinfo_expected_failures.csv

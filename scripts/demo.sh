#!/usr/bin/env bash
# Sets up, builds, and runs the main job: inspect and disassemble an example NEFF
# that this build assembled.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo
echo "== neuron-sim info build/examples/add.neff"
build/bin/neuron-sim info build/examples/add.neff
echo
echo "== neuron-sim disasm build/examples/add.neff"
build/bin/neuron-sim disasm build/examples/add.neff

#!/usr/bin/env bash
# Sets up (which also builds the neuronsim Python package into .venv), checks the
# formatting, builds, and runs every test: the GoogleTest suites through ctest, then the
# Python tests (pytest, in the fast functional-only mode and offline).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
scripts/check-format.sh
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release -j "$(nproc)"
HF_HUB_OFFLINE=1 NEURONSIM_MODE=functional-only .venv/bin/python -m pytest tests/python -q -p no:cacheprovider

#!/usr/bin/env bash
# The CI hook of the performance dashboard: runs the benchmark suite (bench/suite.json) on this
# checkout, appends its figures to a history and writes the dashboard page from it.
#
#   scripts/dashboard.sh [HISTORY [SITE]]
#
# HISTORY defaults to $NEURONSIM_HISTORY, else build/dashboard/history.db: point it at a file
# the CI keeps between runs (a cache) so the page shows every commit. SITE defaults to
# build/dashboard/site: publish it as the run's artifact (it opens from disk, no network).
# Expects the build of scripts/test.sh (build/bin, .venv); takes about 2 minutes on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
history="${1:-${NEURONSIM_HISTORY:-build/dashboard/history.db}}"
site="${2:-build/dashboard/site}"
mkdir -p "$(dirname "$history")"
export HF_HUB_OFFLINE=1
build/bin/neuron-sim bench --suite bench/suite.json --record "$history"
build/bin/neuron-sim report "$history" -o "$site"

#!/usr/bin/env bash
# Installs everything neuronsim needs, idempotently: Debian packages and a
# Python virtual environment at .venv with pinned packages.
# Usage: scripts/setup.sh [--no-python]   (--no-python: Debian packages only)
# Then it builds the neuronsim Python package (the PyTorch device "neuron") from this
# tree into .venv, against the torch installed there (no build isolation, so pip never
# fetches another torch); its CMake build lives in build/python and is incremental.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

debian_packages=(
  build-essential cmake ninja-build pkg-config git
  libsystemc-dev libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libarchive-dev libssl-dev libopenblas-dev libsqlite3-dev libgtest-dev libgmock-dev
  python3-venv python3-dev valgrind clang-format ccache
  libjs-chart.js chromium  # the dashboard's plots (neuron-sim report) and its browser test
)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--no-python" ] && exit 0

venv="$root/.venv"
requirements="$root/python/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages into .venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$want" >"$stamp"
fi

echo "setup: building the neuronsim package into .venv (build/python)"
# The compiler CMake picks for build/ (c++), so that ccache serves both builds alike.
export CXX="${CXX:-c++}" CC="${CC:-cc}"
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$root"

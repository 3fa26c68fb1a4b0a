#!/bin/sh
# Installs the build into a fresh prefix, moves the prefix elsewhere (the tree must be
# relocatable), then builds and runs clients against the installed tree only:
#   - run_neff.c with -lnrt through libnrt.pc (pkg-config), on add.neff;
#   - a CMake project with find_package(neuronsim) that runs a kernel through sim::Device;
#   - the installed neuron-sim on add.neff (its specs are built in).
# Usage: check_installed_tree.sh BUILD_DIR SOURCE_DIR WORK_DIR ADD_FILES_TOOL
set -eu
build=$1 source=$2 work=$3 add_files=$4
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/staging" >/dev/null
mv "$work/staging" "$work/prefix"
prefix=$work/prefix
test -e "$prefix/lib/libnrt.so.1" && test -e "$prefix/include/nrt/nrt.h"
test -e "$prefix/lib/cmake/neuronsim/neuronsimConfig.cmake"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c99 -I"$source/tests/c/runtime" "$source/tests/c/runtime/run_neff.c" \
   $(pkg-config --cflags --libs libnrt) -Wl,-rpath,"$prefix/lib" -o "$work/run_neff"
if ldd "$work/run_neff" | grep -q "$build/lib/"; then
  echo "run_neff resolves libraries from the build tree" >&2
  exit 1
fi
(cd "$work" && "$add_files" make . && ./run_neff "$build/examples/add.neff" a a.bin b b.bin \
   && "$add_files" check .)

cmake -S "$source/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"

"$prefix/bin/neuron-sim" run "$build/examples/add.neff" --random-inputs --quiet
echo "installed tree: libnrt client, CMake consumer and neuron-sim all ran"

// NKI kernels on the simulator: the _C.nki submodule that neuronsim.nki builds and runs
// kernels through (kernel.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace neuronsim::nki {

void register_nki(pybind11::module_& parent);

}  // namespace neuronsim::nki

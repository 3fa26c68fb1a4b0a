// The compiled graphs of torch.compile's "neuron" backend: building and running them.
#pragma once

#include <pybind11/pybind11.h>

namespace neuronsim::pytorch {

// compile_graph(plan, name, path) and run_graph(name, path, tensors) on module m.
void register_graph_functions(pybind11::module_& m);

}  // namespace neuronsim::pytorch

// Ops without a neuron kernel run on the CPU, on the same bytes (device memory is
// host-mapped), and are counted: neuronsim.fallback_counts() lists them, a warning
// names each op the first time, and strict mode (NEURONSIM_STRICT=1 or
// neuronsim.set_strict(True)) turns a fallback into an error naming the op.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <ATen/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace neuronsim::pytorch {

// The boxed CPU fallback; the ops_*.cpp call it for the cases its kernels do not cover.
void neuron_cpu_fallback(const c10::OperatorHandle& handle, torch::jit::Stack* stack);

// Counts one CPU run of `op`; throws c10::Error naming it in strict mode.
void count_fallback(const std::string& op);
std::map<std::string, uint64_t> fallback_counts();
void reset_fallback_counts();
bool strict();
void set_strict(bool on);
// A new tensor on `device` with the bytes, sizes and strides of the CPU tensor `cpu`.
at::Tensor to_neuron(const at::Tensor& cpu, c10::Device device);

// Between begin and end on a thread, fallbacks are neither counted nor refused: the
// host is inspecting tensors (printing them), not running a model's ops. Nests.
void begin_host_inspection();
void end_host_inspection();

}  // namespace neuronsim::pytorch

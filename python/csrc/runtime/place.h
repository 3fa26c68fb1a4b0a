// Where a neuron tensor's bytes are: its place in the simulated HBM, the range a kernel
// binds, and the host's view of the same bytes (device memory is host-mapped, so the
// host reaches a tensor without a copy).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "runtime/backend.h"

namespace neuronsim::pytorch {

// Where a tensor's first element lives on the device: its chip and HBM address.
struct DevicePlace {
  uint32_t chip = 0;
  uint64_t address = 0;
};
DevicePlace device_place(const at::Tensor& tensor);
// Bytes from the first to one past the last element the view reaches (0 when empty).
uint64_t extent_bytes(const at::Tensor& tensor);
// The device memory a kernel binds for `tensor`: from its first element to its extent.
sim::TensorBinding binding_of(const at::Tensor& tensor);
// Each named tensor's binding, for Backend::run_kernel.
std::vector<NamedBinding> bindings_of(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors);
// A CPU tensor over the same bytes, sizes and strides (no copy): the host's view of a
// neuron tensor. A CPU tensor is returned as it is.
at::Tensor host_alias(const at::Tensor& tensor);

}  // namespace neuronsim::pytorch

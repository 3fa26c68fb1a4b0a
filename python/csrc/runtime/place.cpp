// Where a neuron tensor's bytes are (see place.h).
#include "runtime/place.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "runtime/allocator.h"

namespace neuronsim::pytorch {

DevicePlace device_place(const at::Tensor& tensor) {
  const Block& block = block_of(tensor.storage().data_ptr());
  const auto* data = static_cast<const uint8_t*>(tensor.const_data_ptr());
  return {block.chip, block.address + static_cast<uint64_t>(data - block.host)};
}

uint64_t extent_bytes(const at::Tensor& tensor) {
  if (tensor.numel() == 0) return 0;
  uint64_t last = 0;
  for (int64_t d = 0; d < tensor.dim(); ++d)
    last += static_cast<uint64_t>((tensor.size(d) - 1) * tensor.stride(d));
  return (last + 1) * tensor.element_size();
}

sim::TensorBinding binding_of(const at::Tensor& tensor) {
  return {device_place(tensor).address, extent_bytes(tensor)};
}

std::vector<NamedBinding> bindings_of(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<NamedBinding> bindings;
  bindings.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) bindings.emplace_back(name, binding_of(tensor));
  return bindings;
}

namespace {

void release_alias(void* context) {
  delete static_cast<c10::Storage*>(context);
}

}  // namespace

at::Tensor host_alias(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.device().is_cpu()) return tensor;
  TORCH_CHECK(tensor.device().is_privateuseone(), "neuron: cannot reach ", tensor.device(),
              " memory from the host");
  // The CPU storage spans the whole device storage (same base), so views keep their
  // storage offsets and a view made on the host maps back to the same device storage.
  const c10::Storage& storage = tensor.storage();
  void* base = storage.mutable_data();
  c10::Storage cpu(
      c10::Storage::use_byte_size_t(), storage.nbytes(),
      c10::DataPtr(base, new c10::Storage(storage), &release_alias, at::Device(at::kCPU)),
      c10::GetCPUAllocator(), /*resizable=*/true);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu), c10::DispatchKeySet(c10::DispatchKey::CPU), tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(tensor.sizes(), tensor.strides(),
                                                     tensor.storage_offset());
  // A lazy conjugate or negation (x.conj(), a complex tensor's views) stays one: the host's
  // ops resolve it as they would on their own tensors.
  alias._set_conj(tensor.is_conj());
  alias._set_neg(tensor.is_neg());
  return alias;
}

}  // namespace neuronsim::pytorch

// The tensor basics of "neuron": creation, views, resizing, copies and scalars. With
// these, tensors can be made, viewed, moved between the host and the device and
// printed; every other op is a kernel (ops_*.cpp) or the counted CPU fallback.
#include <typeinfo>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/fallback.h"
#include "aten/kernel_call.h"
#include "aten/timing_only.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/device.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

constexpr auto kNeuronKey = c10::DispatchKey::PrivateUse1;

// Every dtype can be stored, float64, int64 and complex included (printing converts to
// float64, token ids are int64, some rotary embeddings are complex); the kernels claim
// none of those, so their ops run on the CPU, counted, never computed wrongly.
c10::DeviceIndex device_index(std::optional<c10::Device> device) {
  if (!device || !device->has_index()) return current_device();
  return device->index();
}

// Runs with the device current, so the allocator places the tensor on it.
template <typename F>
at::Tensor on_device(std::optional<c10::Device> device, F make) {
  const c10::DeviceIndex index = device_index(device);
  Backend::get().check_index(index);
  const c10::DeviceIndex old = current_device();
  set_current_device(index);
  at::Tensor t = make();
  set_current_device(old);
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> /*layout*/,
                               std::optional<c10::Device> device, std::optional<bool> /*pin*/,
                               std::optional<c10::MemoryFormat> memory_format) {
  const auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  return on_device(device, [&] {
    return at::detail::empty_generic(size, &hbm_allocator(), c10::DispatchKeySet(kNeuronKey), type,
                                     memory_format);
  });
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
                         std::optional<bool> /*pin*/) {
  const auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  return on_device(device, [&] {
    return at::detail::empty_strided_generic(size, stride, &hbm_allocator(),
                                             c10::DispatchKeySet(kNeuronKey), type);
  });
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  // Device bytes are host bytes: the CPU's resize (allocate through the storage's
  // allocator on the tensor's device, copy the old bytes) is right for them.
  DeviceScope scope(self.device().index());
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), C10_AS_INTARRAYREF_SLOW(size),
                               std::nullopt);
  if (memory_format) self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  return self;
}

// dst <- src where at least one is a neuron tensor. A lazy conjugate or negation of either
// (the Conjugate and Negative keys fall through to here) is resolved by the host's copy.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool /*non_blocking*/) {
  if (src.numel() == 0) return dst;
  const bool lazy = src.is_conj() || dst.is_conj() || src.is_neg() || dst.is_neg();
  const bool both_neuron =
      !lazy && src.device().is_privateuseone() && dst.device().is_privateuseone();
  const bool same_layout = src.dtype() == dst.dtype() && src.sizes() == dst.sizes() &&
                           src.strides() == dst.strides() && src.is_non_overlapping_and_dense();
  if (both_neuron && same_layout) {
    // A DMA on the destination's queue, timed by the simulator.
    const DevicePlace s = device_place(src), d = device_place(dst);
    Backend::get().copy(dst.device().index(), d.address, src.device().index(), s.address,
                        extent_bytes(src));
    return dst;
  }
  if (both_neuron && copy_on_device(src, dst)) return dst;
  // Strided views of one tensor whose spans interleave (a circular pad copies one part of its
  // output into another): through a temporary on the device, all of src read before dst is
  // written. Views whose overlap torch can tell (Partial) get the CPU's error.
  if (both_neuron && at::get_overlap_status(src, dst) == at::MemOverlapStatus::TooHard) {
    const at::Tensor staged = at::empty(src.sizes(), src.options());
    if (copy_on_device(src, staged) && copy_on_device(staged, dst)) return dst;
  }
  if (both_neuron || (lazy && src.device() == dst.device()))
    count_fallback("aten::copy_ (between devices, of int64/float64, or conjugated)");
  if (src.device().is_privateuseone() && !dst.device().is_privateuseone() && values_unspecified())
    refuse_host_read(fmt::format("aten::copy_ of a neuron tensor to {}", dst.device().str()));
  // To or from the host, or a conversion: the host's copy on the same bytes, once the device's
  // work is done (as a synchronous copy waits).
  Backend::get().host_reads();
  host_alias(dst).copy_(host_alias(src));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  dst.resize_(src.sizes());
  return copy_from(src, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  if (values_unspecified()) refuse_host_read("aten::_local_scalar_dense (Tensor.item())");
  Backend::get().host_reads();
  return host_alias(self).item();
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset.guard_int(__FILE__, __LINE__),
                                      C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &hbm_allocator(), true);
  return at::native::set_(self, std::move(storage));
}

// The gradient of x.unfold(dim, size, step): each window position j adds its column of
// the windows' gradient into the strided slice of x it came from, one add per position on
// the device (windows overlap when step < size).
at::Tensor unfold_backward(const at::Tensor& grad, c10::IntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  constexpr int64_t kMaxWindowAdds = 256;
  if (grad.device().is_privateuseone() && engine_dtype(grad.scalar_type()) &&
      !input_sizes.empty() && size <= kMaxWindowAdds) {
    const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
    at::Tensor out = at::zeros(input_sizes, grad.options());
    const int64_t windows = grad.size(d);
    for (int64_t j = 0; j < size && windows > 0; ++j)
      out.slice(d, j, j + step * (windows - 1) + 1, step).add_(grad.select(-1, j));
    return out;
  }
  return Fallback<ATEN_OP(unfold_backward)>::call(grad, input_sizes, dim, size, step);
}

// Whether `from`'s data can replace `self`'s in place (`self.data = from`). c10's rule
// (TensorImpl::has_compatible_shallow_copy_type) allows it between dense tensors of the
// backends it lists, so that `module.to("cuda")` keeps each Parameter object and swaps its
// data; PrivateUse1 is not among them. A plain dense tensor of the host or of the device is
// allowed here too, so that `module.to("neuron")` keeps its Parameters as CUDA's does (an
// optimizer or hook made before the move still holds them). Anything else keeps c10's rule.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto plain_dense = [](const at::Tensor& t) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    return typeid(*impl) == typeid(c10::TensorImpl) && t.layout() == at::kStrided &&
           !t.is_quantized() && (t.is_cpu() || t.device().is_privateuseone());
  };
  if (plain_dense(self) && plain_dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("unfold", at::native::unfold);  // a view: sizes and strides only
  m.impl("unfold_backward", unfold_backward);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
}

// Copies see the conjugate and negative bits themselves: the math fallback would resolve
// them with a clone, whose copy comes back here with the bits still set, without end.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace neuronsim::pytorch

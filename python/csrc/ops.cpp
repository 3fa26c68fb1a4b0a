// aten kernels that run on the simulated NeuronCores. Each op becomes a kernel program
// from kernels/, built for the op's shapes and dtypes, loaded once per device and run
// on the device's core (Backend::run_kernel). A case a kernel does not cover (a dtype,
// a layout, a size the kernel refuses) runs through the counted CPU fallback under the
// op's own name, so fallback_counts() shows what is missing.
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "backend.h"
#include "fallback.h"
#include "guard.h"
#include "neuronsim/kernels/kernels.h"

namespace neuronsim::pytorch {

namespace {

template <class Op>
using Fallback = at::native::call_fallback_fn<&neuron_cpu_fallback, Op>;

// The engines' type for a torch float dtype the kernels take.
std::optional<isa::DType> float_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return isa::DType::fp32;
    case at::kBFloat16: return isa::DType::bf16;
    case at::kHalf: return isa::DType::fp16;
    default: return std::nullopt;
  }
}

std::string shape_key(const at::Tensor& t) {
  return fmt::format("{}{}", c10::toString(t.scalar_type()), t.sizes());
}

// The device of an op on `tensors`, which must all be on one neuron device.
int op_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (!device) device = t->device();
    if (t->device() != *device)
      fail(fmt::format("{}: expected all tensors on one device, but found {} and {}", op,
                       device->str(), t->device().str()));
  }
  return device->index();
}

// Loads (once) and runs a kernel; returns false when the kernel refuses the shape, so
// the caller falls back.
bool run(const char* op, int index, const std::string& key,
         const std::function<isa::Program()>& build,
         const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  Backend& b = Backend::get();
  const sim::ProgramRef program = b.program(index, key, build);
  if (!program) return false;
  b.run_kernel(op, program, tensors);
  return true;
}

at::Tensor new_like(const at::Tensor& t, at::IntArrayRef sizes) {
  return at::empty(sizes, t.options());
}

// ---- matmul -------------------------------------------------------------------

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  const int index = op_device("aten::mm", {&a, &b});
  const auto dtype = float_dtype(a.scalar_type());
  if (dtype && a.scalar_type() == b.scalar_type() && a.dim() == 2 && b.dim() == 2 &&
      a.size(1) == b.size(0) && a.numel() > 0 && b.numel() > 0 && a.is_contiguous() &&
      b.is_contiguous()) {
    at::Tensor c = new_like(a, {a.size(0), b.size(1)});
    const std::string key = fmt::format("aten::mm {} {}", shape_key(a), shape_key(b));
    const std::string target = Backend::get().target();
    if (run("aten::mm", index, key,
            [&] { return kernels::matmul(target, a.size(0), a.size(1), b.size(1), *dtype, *dtype); },
            {{"a", a}, {"b", b}, {"c", c}}))
      return c;
  }
  return Fallback<ATEN_OP(mm)>::call(a, b);
}

// ---- elementwise --------------------------------------------------------------

std::optional<at::Tensor> same_shape_binary(const char* op, kernels::ElementwiseOp kind,
                                            const at::Tensor& x, const at::Tensor& y) {
  const auto dtype = float_dtype(x.scalar_type());
  if (!dtype || x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes() ||
      !x.is_contiguous() || !y.is_contiguous() || x.numel() == 0 || !y.device().is_privateuseone())
    return std::nullopt;
  const int index = op_device(op, {&x, &y});
  at::Tensor out = new_like(x, x.sizes());
  const int64_t cols = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = x.numel() / cols;
  if (rows > 65535 || cols > 65535) return std::nullopt;
  const std::string key = fmt::format("{} {}", op, shape_key(x));
  const std::string target = Backend::get().target();
  if (!run(op, index, key,
           [&] { return kernels::elementwise(target, kind, rows, cols, *dtype); },
           {{"x", x}, {"y", y}, {"out", out}}))
    return std::nullopt;
  return out;
}

at::Tensor add(const at::Tensor& x, const at::Tensor& y, const at::Scalar& alpha) {
  if (alpha.equal(1))
    if (auto out = same_shape_binary("aten::add", kernels::ElementwiseOp::add, x, y)) return *out;
  return Fallback<ATEN_OP2(add, Tensor)>::call(x, y, alpha);
}

at::Tensor mul(const at::Tensor& x, const at::Tensor& y) {
  if (auto out = same_shape_binary("aten::mul", kernels::ElementwiseOp::multiply, x, y))
    return *out;
  return Fallback<ATEN_OP2(mul, Tensor)>::call(x, y);
}

// ---- softmax ------------------------------------------------------------------

at::Tensor softmax(const at::Tensor& x, int64_t dim, bool half_to_float) {
  const auto dtype = float_dtype(x.scalar_type());
  const int64_t last = x.dim() - 1;
  if (dtype && !half_to_float && x.dim() >= 1 && (dim == last || dim == -1) && x.is_contiguous() &&
      x.numel() > 0) {
    const int index = op_device("aten::_softmax", {&x});
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    at::Tensor out = new_like(x, x.sizes());
    const std::string key = fmt::format("aten::_softmax {}", shape_key(x));
    const std::string target = Backend::get().target();
    if (rows <= 65535 && cols <= 65535 &&
        run("aten::_softmax", index, key,
            [&] { return kernels::softmax(target, rows, cols, *dtype); },
            {{"x", x}, {"out", out}}))
      return out;
  }
  return Fallback<ATEN_OP(_softmax)>::call(x, dim, half_to_float);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("add.Tensor", add);
  m.impl("mul.Tensor", mul);
  m.impl("_softmax", softmax);
}

}  // namespace neuronsim::pytorch

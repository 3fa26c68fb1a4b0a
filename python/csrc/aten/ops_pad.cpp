// Reflection and replication padding of the last 1-3 dims, forward and backward, on the device:
// each padded dim is one index_select whose indices (made by the host from the sizes alone, as
// a compiler places constants) say which input position every output position repeats; the
// gradient adds each output position's gradient back at its index (index_add), dim by dim in
// reverse. What torch's kernels refuse (a reflection pad as large as its dim, a wrong padding
// length) goes to the CPU for its error.
#include <algorithm>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {

namespace {

enum class PadMode { reflect, replicate };

// The input position output position o (from -left) repeats along a dim of n.
int64_t source(PadMode mode, int64_t o, int64_t n) {
  if (mode == PadMode::replicate) return std::clamp<int64_t>(o, 0, n - 1);
  return o < 0 ? -o : o >= n ? 2 * (n - 1) - o : o;
}

// The indices of one padded dim (left and right may be negative: a crop), on `device`.
at::Tensor pad_indices(PadMode mode, int64_t n, int64_t left, int64_t right,
                       const c10::Device& device) {
  at::Tensor host = at::empty({n + left + right}, at::TensorOptions().dtype(at::kLong));
  int64_t* v = host.data_ptr<int64_t>();
  for (int64_t o = -left; o < n + right; ++o) *v++ = source(mode, o, n);
  return host.to(device);
}

// (dim, indices) of each padded dim of x; padding lists the last dim's pair first.
std::vector<std::pair<int64_t, at::Tensor>> padded_dims(PadMode mode, const at::Tensor& x,
                                                        at::IntArrayRef padding) {
  std::vector<std::pair<int64_t, at::Tensor>> dims;
  for (size_t i = 0; i + 1 < padding.size(); i += 2) {
    const int64_t d = x.dim() - 1 - static_cast<int64_t>(i / 2);
    dims.emplace_back(d, pad_indices(mode, x.size(d), padding[i], padding[i + 1], x.device()));
  }
  return dims;
}

bool pad_covers(const at::Tensor& x) {
  return x.device().is_privateuseone() &&
         (engine_dtype(x.scalar_type()) || is_limb_integer(x.scalar_type()));
}

// The output's sizes when x and padding are what torch's kernels take (a [C, ...] or [N, C, ...]
// input whose dims but the batch are not empty; a reflection pad smaller than its dim; no
// empty output dim); otherwise none, and the CPU gives its error.
std::optional<std::vector<int64_t>> padded_sizes(PadMode mode, const at::Tensor& x,
                                                 at::IntArrayRef padding, int64_t rank) {
  if (static_cast<int64_t>(padding.size()) != 2 * rank ||
      (x.dim() != rank + 1 && x.dim() != rank + 2))
    return std::nullopt;
  std::vector<int64_t> sizes = x.sizes().vec();
  for (int64_t d = x.dim() - rank - 1; d < x.dim(); ++d)
    if (x.size(d) == 0) return std::nullopt;
  for (int64_t i = 0; i < rank; ++i) {
    const auto d = static_cast<size_t>(x.dim() - 1 - i);
    const int64_t left = padding[2 * i], right = padding[2 * i + 1];
    if (mode == PadMode::reflect && (left >= sizes[d] || right >= sizes[d])) return std::nullopt;
    sizes[d] += left + right;
    if (sizes[d] < 1) return std::nullopt;
  }
  return sizes;
}

bool pad_into(PadMode mode, const at::Tensor& x, at::IntArrayRef padding, int64_t rank,
              at::Tensor& out) {
  const auto sizes = padded_sizes(mode, x, padding, rank);
  if (!sizes || !pad_covers(x) || out.device() != x.device() ||
      out.scalar_type() != x.scalar_type())
    return false;
  at::native::resize_output(out, *sizes);
  if (out.numel() == 0) return true;
  at::Tensor y = x;
  for (const auto& [d, indices] : padded_dims(mode, x, padding)) y = y.index_select(d, indices);
  out.copy_(y);
  return true;
}

bool pad_backward_into(PadMode mode, const at::Tensor& grad, const at::Tensor& x,
                       at::IntArrayRef padding, int64_t rank, at::Tensor& grad_input) {
  const auto sizes = padded_sizes(mode, x, padding, rank);
  if (!sizes || !pad_covers(x) || !is_engine_float(grad.scalar_type()) ||
      grad.device() != x.device() || grad_input.device() != x.device() ||
      grad_input.scalar_type() != grad.scalar_type() || grad.sizes() != at::IntArrayRef(*sizes))
    return false;
  at::native::resize_output(grad_input, x.sizes());
  if (x.numel() == 0) return true;
  auto dims = padded_dims(mode, x, padding);
  at::Tensor g = grad.to(at::kFloat);  // sums of repeated positions in FP32, rounded once
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    std::vector<int64_t> shape = g.sizes().vec();
    shape[static_cast<size_t>(it->first)] = x.size(it->first);
    g = at::zeros(shape, g.options()).index_add_(it->first, it->second, g);
  }
  grad_input.copy_(g);
  return true;
}

// The registrations of one mode and rank: forward (functional and out) and backward.
#define NEURON_PAD(name, MODE, RANK)                                                          \
  at::Tensor& name##_out(const at::Tensor& x, c10::SymIntArrayRef padding, at::Tensor& out) { \
    const at::IntArrayRef pad = C10_AS_INTARRAYREF_SLOW(padding);                             \
    if (pad_into(MODE, x, pad, RANK, out)) return out;                                        \
    return FallbackSymInt<ATEN_OP2(name, out)>::call(x, padding, out);                        \
  }                                                                                           \
  at::Tensor name(const at::Tensor& x, c10::SymIntArrayRef padding) {                         \
    at::Tensor out = at::empty({0}, x.options());                                             \
    return name##_out(x, padding, out);                                                       \
  }                                                                                           \
  at::Tensor& name##_backward_out(const at::Tensor& grad, const at::Tensor& x,                \
                                  c10::SymIntArrayRef padding, at::Tensor& grad_input) {      \
    const at::IntArrayRef pad = C10_AS_INTARRAYREF_SLOW(padding);                             \
    if (pad_backward_into(MODE, grad, x, pad, RANK, grad_input)) return grad_input;           \
    return FallbackSymInt<ATEN_OP2(name##_backward, grad_input)>::call(grad, x, padding,      \
                                                                       grad_input);           \
  }                                                                                           \
  at::Tensor name##_backward(const at::Tensor& grad, const at::Tensor& x,                     \
                             c10::SymIntArrayRef padding) {                                   \
    at::Tensor grad_input = at::empty({0}, grad.options());                                   \
    return name##_backward_out(grad, x, padding, grad_input);                                 \
  }

NEURON_PAD(reflection_pad1d, PadMode::reflect, 1)
NEURON_PAD(reflection_pad2d, PadMode::reflect, 2)
NEURON_PAD(reflection_pad3d, PadMode::reflect, 3)
NEURON_PAD(replication_pad1d, PadMode::replicate, 1)
NEURON_PAD(replication_pad2d, PadMode::replicate, 2)
NEURON_PAD(replication_pad3d, PadMode::replicate, 3)

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define NEURON_REGISTER_PAD(name)             \
  m.impl(#name, name);                        \
  m.impl(#name ".out", name##_out);           \
  m.impl(#name "_backward", name##_backward); \
  m.impl(#name "_backward.grad_input", name##_backward_out);
  NEURON_REGISTER_PAD(reflection_pad1d)
  NEURON_REGISTER_PAD(reflection_pad2d)
  NEURON_REGISTER_PAD(reflection_pad3d)
  NEURON_REGISTER_PAD(replication_pad1d)
  NEURON_REGISTER_PAD(replication_pad2d)
  NEURON_REGISTER_PAD(replication_pad3d)
#undef NEURON_REGISTER_PAD
}

}  // namespace neuronsim::pytorch

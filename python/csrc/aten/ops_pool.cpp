// Pooling over the last two dims of [N, C, H, W] (or [C, H, W]), forward and backward, from ops
// that have device kernels. As ops_conv.cpp does for a convolution, the windows are unfold's
// views of the padded input, laid out as rows of kh * kw values:
// - max pooling: each row's maximum and the input index of its first maximum (the last NaN where
//   a window holds NaN, as the CPU's kernel picks it); its gradient adds each output's gradient
//   at that index (scatter_add);
// - average pooling: each row's sum in FP32 over a divisor that depends on the geometry alone
//   (the CPU's rules for padding, ceil_mode and divisor_override); its gradient spreads each
//   output's share back over the window (unfold_backward).
// What depends on the geometry alone (the divisors, each window position's input index and
// whether it lies inside the input) is computed by the host and copied to the device, as a
// compiler would place constants. torch's meta kernels give the output sizes and every error.
#include <algorithm>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {

namespace {

// One pooling's geometry on an input of H x W, with output positions oh x ow.
struct Pool2d {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, H, W, oh, ow;

  int64_t taps() const { return kh * kw; }
  int64_t span_h() const { return (kh - 1) * dh + 1; }
  int64_t span_w() const { return (kw - 1) * dw + 1; }
  // Input row and column of window (i, j)'s tap k.
  int64_t row(int64_t i, int64_t k) const { return i * sh - ph + (k / kw) * dh; }
  int64_t col(int64_t j, int64_t k) const { return j * sw - pw + (k % kw) * dw; }
};

// A size argument of one or two values (an empty stride is the kernel's).
int64_t pick(at::IntArrayRef v, size_t i, int64_t otherwise) {
  if (v.empty()) return otherwise;
  return v.size() == 1 ? v[0] : v[i];
}

Pool2d geometry(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                at::IntArrayRef padding, at::IntArrayRef dilation, at::IntArrayRef out_sizes) {
  Pool2d p{};
  p.kh = pick(kernel, 0, 1);
  p.kw = pick(kernel, 1, 1);
  p.sh = pick(stride, 0, p.kh);
  p.sw = pick(stride, 1, p.kw);
  p.ph = pick(padding, 0, 0);
  p.pw = pick(padding, 1, 0);
  p.dh = pick(dilation, 0, 1);
  p.dw = pick(dilation, 1, 1);
  p.H = x.size(-2);
  p.W = x.size(-1);
  p.oh = out_sizes[out_sizes.size() - 2];
  p.ow = out_sizes[out_sizes.size() - 1];
  return p;
}

bool pool_covers(const at::Tensor& x) {
  return x.device().is_privateuseone() && (x.dim() == 3 || x.dim() == 4);
}

at::Tensor as_batch(const at::Tensor& x) {
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}

// The windows of x4 [N, C, H, W] padded with `fill`, as rows [N, C, oh, ow, kh * kw]. The pads
// on the bottom and right give exactly oh x ow windows (ceil_mode's last windows may reach past
// the padding; a negative pad crops what no window reads).
at::Tensor window_rows(const at::Tensor& x4, const Pool2d& p, const at::Scalar& fill) {
  const int64_t bottom = (p.oh - 1) * p.sh + p.span_h() - p.H - p.ph;
  const int64_t right = (p.ow - 1) * p.sw + p.span_w() - p.W - p.pw;
  at::Tensor w = at::constant_pad_nd(x4, {p.pw, right, p.ph, bottom}, fill);
  w = w.unfold(2, p.span_h(), p.sh);
  if (p.dh > 1) w = w.slice(-1, 0, p.span_h(), p.dh);
  w = w.unfold(3, p.span_w(), p.sw);
  if (p.dw > 1) w = w.slice(-1, 0, p.span_w(), p.dw);
  return w.reshape({x4.size(0), x4.size(1), p.oh, p.ow, p.taps()});
}

// A [oh, ow, taps] table of f(i, j, k), made by the host and copied to `device`.
template <typename T, typename F>
at::Tensor window_table(const Pool2d& p, c10::ScalarType type, const c10::Device& device, F f) {
  at::Tensor host = at::empty({p.oh, p.ow, p.taps()}, at::TensorOptions().dtype(type));
  T* v = host.data_ptr<T>();
  for (int64_t i = 0; i < p.oh; ++i)
    for (int64_t j = 0; j < p.ow; ++j)
      for (int64_t k = 0; k < p.taps(); ++k) *v++ = f(i, j, k);
  return host.to(device);
}

// ---- max pooling ------------------------------------------------------------------------

// The smallest value of x's dtype: the padding that never wins a window.
at::Scalar lowest(c10::ScalarType type) {
  if (type == at::kLong) return std::numeric_limits<int64_t>::min();
  if (type == at::kInt) return std::numeric_limits<int32_t>::min();
  return -std::numeric_limits<double>::infinity();
}

bool max_pool2d_into(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                     at::Tensor& out, at::Tensor& indices) {
  const c10::ScalarType type = x.scalar_type();
  if (!pool_covers(x) || !(is_engine_float(type) || type == at::kInt || type == at::kLong) ||
      out.device() != x.device() || indices.device() != x.device() || out.scalar_type() != type ||
      indices.scalar_type() != at::kLong)
    return false;
  const auto sized =
      at::max_pool2d_with_indices(meta_twin(x), kernel, stride, padding, dilation, ceil_mode);
  at::native::resize_output(out, std::get<0>(sized).sizes());
  at::native::resize_output(indices, std::get<1>(sized).sizes());
  if (x.numel() == 0) return true;
  const Pool2d p = geometry(x, kernel, stride, padding, dilation, out.sizes());
  const at::Tensor rows = window_rows(as_batch(x), p, lowest(type));
  const at::Tensor inside =
      window_table<bool>(p, at::kBool, x.device(), [&](auto i, auto j, auto k) {
        const int64_t r = p.row(i, k), c = p.col(j, k);
        return r >= 0 && r < p.H && c >= 0 && c < p.W;
      });
  const at::Tensor index = window_table<int64_t>(
      p, at::kLong, x.device(),
      [&](auto i, auto j, auto k) { return p.row(i, k) * p.W + p.col(j, k); });
  // The first tap inside the input that holds the window's maximum (a window of -inf alone
  // takes its first tap inside, as the CPU's does).
  const at::Tensor hit = rows.eq(rows.amax(-1, true)).logical_and(inside);
  at::Tensor tap = hit.to(at::kFloat).argmax(-1, true);
  if (at::isFloatingType(type)) {  // the last NaN of a window that holds one
    const at::Tensor nan = rows.isnan();
    const at::Tensor last_nan = (p.taps() - 1) - nan.flip(-1).to(at::kFloat).argmax(-1, true);
    tap = at::where(nan.any(-1, true), last_nan, tap);
  }
  const auto shape = rows.sizes();
  out.copy_(rows.gather(-1, tap).view(out.sizes()));
  indices.copy_(index.expand(shape).gather(-1, tap).view(indices.sizes()));
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(
    const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  if (max_pool2d_into(x, kernel, stride, padding, dilation, ceil_mode, out, indices))
    return {out, indices};
  return Fallback<ATEN_OP2(max_pool2d_with_indices, out)>::call(x, kernel, stride, padding,
                                                                dilation, ceil_mode, out, indices);
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, x.options()),
             indices = at::empty({0}, x.options().dtype(at::kLong));
  max_pool2d_with_indices_out(x, kernel, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}

// Each output's gradient added at the input index its maximum came from, per (N, C) plane.
at::Tensor& max_pool2d_backward_out(const at::Tensor& grad, const at::Tensor& x,
                                    at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices,
                                    at::Tensor& grad_input) {
  if (pool_covers(x) && is_engine_float(grad.scalar_type()) && grad.device() == x.device() &&
      indices.device() == x.device() && grad_input.device() == x.device() &&
      grad.sizes() == indices.sizes() && grad_input.scalar_type() == grad.scalar_type()) {
    at::native::resize_output(grad_input, x.sizes());
    if (x.numel() == 0) return grad_input;
    const at::Tensor g = as_batch(grad), idx = as_batch(indices);
    const int64_t n = g.size(0), c = g.size(1);
    at::Tensor planes = at::zeros({n, c, x.size(-2) * x.size(-1)}, grad.options());
    planes.scatter_add_(2, idx.reshape({n, c, -1}), g.reshape({n, c, -1}));
    grad_input.copy_(planes.view(x.sizes()));
    return grad_input;
  }
  return Fallback<ATEN_OP2(max_pool2d_with_indices_backward, grad_input)>::call(
      grad, x, kernel, stride, padding, dilation, ceil_mode, indices, grad_input);
}

at::Tensor max_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding,
                               at::IntArrayRef dilation, bool ceil_mode,
                               const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, grad.options());
  return max_pool2d_backward_out(grad, x, kernel, stride, padding, dilation, ceil_mode, indices,
                                 grad_input);
}

// ---- average pooling --------------------------------------------------------------------

// Each window's divisor [oh, ow] (FP32) by the CPU's rules: the window clipped to the padded
// input counts when count_include_pad, else only its part inside the input; divisor_override
// replaces both. A window with nothing inside sums to 0 and divides by 1.
at::Tensor divisors(const Pool2d& p, bool count_include_pad, std::optional<int64_t> override_by,
                    const c10::Device& device) {
  at::Tensor host = at::empty({p.oh, p.ow}, at::TensorOptions().dtype(at::kFloat));
  float* v = host.data_ptr<float>();
  for (int64_t i = 0; i < p.oh; ++i)
    for (int64_t j = 0; j < p.ow; ++j) {
      int64_t r0 = i * p.sh - p.ph, c0 = j * p.sw - p.pw;
      int64_t r1 = std::min(r0 + p.kh, p.H + p.ph), c1 = std::min(c0 + p.kw, p.W + p.pw);
      const int64_t padded = (r1 - r0) * (c1 - c0);
      r0 = std::max<int64_t>(r0, 0);
      c0 = std::max<int64_t>(c0, 0);
      r1 = std::min(r1, p.H);
      c1 = std::min(c1, p.W);
      const int64_t inside = r0 < r1 && c0 < c1 ? (r1 - r0) * (c1 - c0) : 0;
      const int64_t d = override_by ? *override_by : count_include_pad ? padded : inside;
      *v++ = inside > 0 ? static_cast<float>(d) : 1.0f;
    }
  return host.to(device);
}

// Floats sum in FP32 and divide once; integers sum exactly (on limbs) and divide as the CPU's
// integer division does, truncating.
bool avg_pool2d_into(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                     at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override, at::Tensor& out) {
  const c10::ScalarType type = x.scalar_type();
  const bool integer = type == at::kInt || type == at::kLong;
  if (!pool_covers(x) || !(is_engine_float(type) || integer) || out.device() != x.device() ||
      out.scalar_type() != type)
    return false;
  const at::Tensor sized = at::avg_pool2d(meta_twin(x), kernel, stride, padding, ceil_mode,
                                          count_include_pad, divisor_override);
  at::native::resize_output(out, sized.sizes());
  if (x.numel() == 0) return true;
  const Pool2d p = geometry(x, kernel, stride, padding, {}, sized.sizes());
  const at::Tensor rows = window_rows(as_batch(x), p, 0);
  const at::Tensor by = divisors(p, count_include_pad, divisor_override, x.device());
  const at::Tensor mean = integer ? at::div(rows.sum(-1), by.to(type), "trunc")
                                  : rows.sum(-1, false, at::kFloat).div(by);
  out.copy_(mean.view(out.sizes()));
  return true;
}

at::Tensor& avg_pool2d_out(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  if (avg_pool2d_into(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                      out))
    return out;
  return Fallback<ATEN_OP2(avg_pool2d, out)>::call(x, kernel, stride, padding, ceil_mode,
                                                   count_include_pad, divisor_override, out);
}

at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  at::Tensor out = at::empty({0}, x.options());
  return avg_pool2d_out(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        out);
}

// Each output's gradient over its divisor, added into every position its window read: the
// two unfolds of the forward undone on the padded input (unfold_backward), then the padding
// cut away.
at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad, const at::Tensor& x,
                                    at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  if (pool_covers(x) && is_engine_float(grad.scalar_type()) && grad.device() == x.device() &&
      grad_input.device() == x.device() && grad_input.scalar_type() == grad.scalar_type() &&
      grad.dim() == x.dim()) {
    at::native::resize_output(grad_input, x.sizes());
    if (x.numel() == 0) return grad_input;
    const Pool2d p = geometry(x, kernel, stride, padding, {}, grad.sizes());
    const at::Tensor g4 = as_batch(grad);
    const int64_t n = g4.size(0), c = g4.size(1);
    const int64_t rows = (p.oh - 1) * p.sh + p.kh, cols = (p.ow - 1) * p.sw + p.kw;
    const at::Tensor share =
        g4.to(at::kFloat).div(divisors(p, count_include_pad, divisor_override, x.device()));
    const at::Tensor taps =
        share.unsqueeze(-1).unsqueeze(-1).expand({n, c, p.oh, p.ow, p.kh, p.kw});
    const at::Tensor by_rows = at::unfold_backward(taps, {n, c, p.oh, cols, p.kh}, 3, p.kw, p.sw);
    const at::Tensor padded = at::unfold_backward(by_rows, {n, c, rows, cols}, 2, p.kh, p.sh);
    at::Tensor full = at::zeros({n, c, p.H, p.W}, grad.options());
    const int64_t h = std::min(p.H, rows - p.ph), w = std::min(p.W, cols - p.pw);
    if (h > 0 && w > 0)
      full.narrow(2, 0, h).narrow(3, 0, w).copy_(padded.narrow(2, p.ph, h).narrow(3, p.pw, w));
    grad_input.copy_(full.view(x.sizes()));
    return grad_input;
  }
  return Fallback<ATEN_OP2(avg_pool2d_backward, grad_input)>::call(
      grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, grad_input);
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef kernel,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  at::Tensor grad_input = at::empty({0}, grad.options());
  return avg_pool2d_backward_out(grad, x, kernel, stride, padding, ceil_mode, count_include_pad,
                                 divisor_override, grad_input);
}

// ---- adaptive average pooling ----------------------------------------------------------

// The [out, in] matrix of ones that sums adaptive pooling's windows along one dim: window i
// covers [floor(i * in / out), ceil((i + 1) * in / out)), as torch's kernels take it.
at::Tensor window_ones(int64_t out, int64_t in, const c10::Device& device) {
  at::Tensor host = at::zeros({out, in}, at::TensorOptions().dtype(at::kFloat));
  float* v = host.data_ptr<float>();
  for (int64_t i = 0; i < out; ++i)
    for (int64_t k = i * in / out; k < ((i + 1) * in + out - 1) / out; ++k) v[i * in + k] = 1.0f;
  return host.to(device);
}

bool adaptive_covers(const at::Tensor& t) {
  return pool_covers(t) && is_engine_float(t.scalar_type()) && t.numel() > 0;
}

// out = (rows @ x @ cols^T) / counts in FP32, rounded once: products with ones are exact and
// PSUM accumulates in FP32, as the CPU's kernel sums before it divides.
at::Tensor adaptive_avg_pool2d(const at::Tensor& x, c10::SymIntArrayRef sym_size) {
  const at::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(sym_size);
  if (adaptive_covers(x) && size.size() == 2 && size[0] > 0 && size[1] > 0) {
    const at::Tensor rows = window_ones(size[0], x.size(-2), x.device());
    const at::Tensor cols = window_ones(size[1], x.size(-1), x.device());
    const at::Tensor counts = at::outer(rows.sum(1), cols.sum(1));
    const at::Tensor sums = at::matmul(rows, at::matmul(x.to(at::kFloat), cols.t()));
    return sums.div(counts).to(x.scalar_type());
  }
  return FallbackSymInt<ATEN_OP(_adaptive_avg_pool2d)>::call(x, sym_size);
}

// Each output's gradient over its count, spread over its window: rows^T @ (g / counts) @ cols.
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x) {
  if (adaptive_covers(x) && grad.device() == x.device() && grad.dim() == x.dim() &&
      is_engine_float(grad.scalar_type()) && grad.numel() > 0) {
    const at::Tensor rows = window_ones(grad.size(-2), x.size(-2), x.device());
    const at::Tensor cols = window_ones(grad.size(-1), x.size(-1), x.device());
    const at::Tensor share = grad.to(at::kFloat).div(at::outer(rows.sum(1), cols.sum(1)));
    return at::matmul(rows.t(), at::matmul(share, cols)).to(grad.scalar_type());
  }
  return Fallback<ATEN_OP(_adaptive_avg_pool2d_backward)>::call(grad, x);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices.out", max_pool2d_with_indices_out);
  m.impl("max_pool2d_with_indices_backward", max_pool2d_backward);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool2d_backward_out);
  m.impl("avg_pool2d", avg_pool2d);
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool2d_backward", avg_pool2d_backward);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
}

}  // namespace neuronsim::pytorch

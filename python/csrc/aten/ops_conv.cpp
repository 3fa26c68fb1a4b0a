// Convolutions, forward and backward, plain and transposed, as products of windows.
//
// A device's convolution is dispatched to convolution_overrideable and its gradient to
// convolution_backward_overrideable. Both run on the device, built from ops that have
// device kernels:
// - the windows of the padded input along each spatial dim (unfold, a view), laid out per
//   group as rows of C/groups * prod(kernel) values, times the weights as a matrix;
// - the input's gradient is the rows' gradient (the output's gradient times the weights)
//   folded back onto the input, each window adding into the positions it read
//   (unfold_backward);
// - the weights' gradient is the output's gradient times the rows, summed over the batch;
// - a transposed convolution is the input's gradient of the convolution it transposes,
//   and its gradients are that convolution forward and its weights' gradient.
// Mamba's causal conv1d, a ViT's patch embedding and a VAE's upsampling are such
// convolutions. float64, integer dtypes and symbolic sizes run on the CPU, counted.
#include <algorithm>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/fallback.h"
#include "aten/kernel_call.h"
#include "runtime/backend.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

// A convolution's geometry (of the non-transposed convolution, for a transposed one).
struct Conv {
  at::IntArrayRef stride, padding, dilation;
  int64_t groups = 1;

  int64_t span(int64_t i, int64_t taps) const { return (taps - 1) * dilation[i] + 1; }
};

int64_t product(at::IntArrayRef v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// The padded input's windows, [B, C, O..., K...]: dim i's output positions O_i, and the
// kernel's taps K_i last (unfold appends them). With `positions`, only the first of each
// dim: a transposed convolution's output_padding can leave room for more windows than its
// input has positions.
at::Tensor windows(const at::Tensor& input, at::IntArrayRef kernel, const Conv& c,
                   std::optional<at::IntArrayRef> positions = std::nullopt) {
  const auto spatial = static_cast<int64_t>(kernel.size());
  std::vector<int64_t> pads;  // constant_pad_nd takes the last dim's pair first
  for (int64_t i = spatial - 1; i >= 0; --i) pads.insert(pads.end(), {c.padding[i], c.padding[i]});
  at::Tensor x = input;
  if (std::any_of(c.padding.begin(), c.padding.end(), [](int64_t p) { return p != 0; }))
    x = at::constant_pad_nd(input, pads, 0);
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t span = c.span(i, kernel[i]);
    x = x.unfold(2 + i, span, c.stride[i]);
    if (c.dilation[i] > 1) x = x.slice(-1, 0, span, c.dilation[i]);
    if (positions) x = x.narrow(2 + i, 0, (*positions)[i]);
  }
  return x;
}

// The windows as rows: [B, C, O..., K...] -> [B, groups, O, C/groups * K].
at::Tensor rows_of(const at::Tensor& windows, int64_t spatial, int64_t groups) {
  const at::IntArrayRef s = windows.sizes();
  const int64_t positions = product(s.slice(2, spatial)), taps = product(s.slice(2 + spatial));
  return windows.reshape({s[0], groups, s[1] / groups, positions, taps})
      .permute({0, 1, 3, 2, 4})
      .reshape({s[0], groups, positions, s[1] / groups * taps});
}

// The input's gradient from the windows' gradient [B, C, O..., K...]: undo each dim's
// windowing, last dim first, then the padding.
at::Tensor fold(at::Tensor grad, at::IntArrayRef input_sizes, at::IntArrayRef kernel,
                const Conv& c) {
  const auto spatial = static_cast<int64_t>(kernel.size());
  // The sizes before dim i's unfold: [B, C, O_0..O_i-1, P_i..P_n-1, K_0..K_i-1].
  std::vector<std::vector<int64_t>> before;
  std::vector<int64_t> sizes(input_sizes.begin(), input_sizes.end());
  for (int64_t i = 0; i < spatial; ++i) sizes[2 + i] += 2 * c.padding[i];
  for (int64_t i = 0; i < spatial; ++i) {
    before.push_back(sizes);
    sizes[2 + i] = grad.size(2 + i);
    sizes.push_back(kernel[i]);
  }
  for (int64_t i = spatial - 1; i >= 0; --i) {
    const int64_t span = c.span(i, kernel[i]);
    if (c.dilation[i] > 1) {  // the taps back among the span's positions
      std::vector<int64_t> spread(grad.sizes().begin(), grad.sizes().end());
      spread.back() = span;
      at::Tensor z = at::zeros(spread, grad.options());
      z.slice(-1, 0, span, c.dilation[i]).copy_(grad);
      grad = z;
    }
    grad = at::unfold_backward(grad, before[static_cast<size_t>(i)], 2 + i, span, c.stride[i]);
  }
  for (int64_t i = 0; i < spatial; ++i)
    if (c.padding[i] != 0) grad = grad.narrow(2 + i, c.padding[i], input_sizes[2 + i]);
  return grad.contiguous();
}

// A folded result sums overlapping windows after the product: in FP32 for 16-bit dtypes,
// rounded once at the end as the CPU's convolutions round.
at::Tensor wide(const at::Tensor& t) {
  const bool narrow = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return narrow ? t.to(at::kFloat) : t;
}

// The output's gradient [B, C_out, O...] as [B, groups, C_out / groups, O].
at::Tensor grouped(const at::Tensor& grad_out, int64_t groups) {
  return grad_out.reshape({grad_out.size(0), groups, grad_out.size(1) / groups, -1});
}

at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const Conv& c,
                   std::optional<at::IntArrayRef> positions = std::nullopt) {
  const int64_t spatial = input.dim() - 2, out_channels = weight.size(0);
  const at::Tensor win = windows(input, weight.sizes().slice(2), c, positions);
  const at::Tensor w = weight.reshape({c.groups, out_channels / c.groups, -1}).transpose(1, 2);
  std::vector<int64_t> out_sizes{input.size(0), out_channels};
  for (int64_t i = 0; i < spatial; ++i) out_sizes.push_back(win.size(2 + i));
  return at::matmul(rows_of(win, spatial, c.groups), w)  // [B, groups, O, C_out / groups]
      .permute({0, 1, 3, 2})
      .reshape(out_sizes);
}

at::Tensor input_grad(const at::Tensor& grad_out, const at::Tensor& weight,
                      at::IntArrayRef input_sizes, const Conv& c) {
  const int64_t spatial = grad_out.dim() - 2, batch = grad_out.size(0);
  const at::IntArrayRef kernel = weight.sizes().slice(2);
  const at::Tensor w = weight.reshape({c.groups, weight.size(0) / c.groups, -1});
  const at::Tensor rows =  // [B, groups, O, C/groups * K]
      at::matmul(grouped(grad_out, c.groups).transpose(2, 3), w);
  std::vector<int64_t> win_sizes{batch, input_sizes[1]};
  for (int64_t i = 0; i < spatial; ++i) win_sizes.push_back(grad_out.size(2 + i));
  win_sizes.insert(win_sizes.end(), kernel.begin(), kernel.end());
  const at::Tensor win = rows.reshape({batch, c.groups, rows.size(2), weight.size(1), -1})
                             .permute({0, 1, 3, 2, 4})
                             .reshape(win_sizes);
  return fold(win, input_sizes, kernel, c);
}

at::Tensor weight_grad(const at::Tensor& grad_out, const at::Tensor& input,
                       at::IntArrayRef weight_sizes, const Conv& c) {
  const int64_t spatial = input.dim() - 2;
  const at::Tensor rows = rows_of(
      windows(input, weight_sizes.slice(2), c, grad_out.sizes().slice(2)), spatial, c.groups);
  const at::Tensor g = grouped(grad_out, c.groups);  // [B, groups, C_out / groups, O]
  // Summed over the batch: [groups, C_out / groups, B * O] x [groups, B * O, C/groups * K].
  return at::matmul(g.permute({1, 2, 0, 3}).reshape({c.groups, g.size(2), -1}),
                    rows.permute({1, 0, 2, 3}).reshape({c.groups, -1, rows.size(3)}))
      .reshape(weight_sizes);
}

at::Tensor bias_grad(const at::Tensor& grad_out) {
  std::vector<int64_t> dims{0};
  for (int64_t i = 2; i < grad_out.dim(); ++i) dims.push_back(i);
  return grad_out.sum(dims);
}

at::Tensor with_bias(at::Tensor out, const std::optional<at::Tensor>& bias) {
  if (!bias || !bias->defined()) return out;
  std::vector<int64_t> sizes(static_cast<size_t>(out.dim()), 1);
  sizes[1] = out.size(1);
  return out + bias->view(sizes);
}

// The sizes of a transposed convolution's output: its input's sizes in the convolution
// it transposes.
std::vector<int64_t> transposed_sizes(const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef output_padding, const Conv& c) {
  std::vector<int64_t> sizes{input.size(0), weight.size(1) * c.groups};
  for (int64_t i = 0; i + 2 < input.dim(); ++i)
    sizes.push_back((input.size(2 + i) - 1) * c.stride[i] - 2 * c.padding[i] +
                    c.span(i, weight.size(2 + i)) + output_padding[i]);
  return sizes;
}

// Whether the device takes this convolution: concrete sizes, 1-3 spatial dims, one
// engine float dtype, consistent groups, nothing empty.
std::optional<Conv> on_device(const at::Tensor& input, const at::Tensor& weight, bool transposed,
                              const std::optional<at::IntArrayRef>& stride,
                              const std::optional<at::IntArrayRef>& padding,
                              const std::optional<at::IntArrayRef>& dilation,
                              std::optional<int64_t> groups) {
  if (!stride || !padding || !dilation || !groups || *groups <= 0) return std::nullopt;
  const int64_t g = *groups, spatial = input.dim() - 2;
  const int64_t conv_out = weight.size(0), conv_in = transposed ? weight.size(1) * g : 0;
  const bool ok = input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim() &&
                  static_cast<int64_t>(stride->size()) == spatial &&
                  static_cast<int64_t>(padding->size()) == spatial &&
                  static_cast<int64_t>(dilation->size()) == spatial &&
                  input.device().is_privateuseone() && weight.device() == input.device() &&
                  input.scalar_type() == weight.scalar_type() &&
                  engine_dtype(input.scalar_type()) && at::isFloatingType(input.scalar_type()) &&
                  input.numel() > 0 && weight.numel() > 0 && conv_out % g == 0 &&
                  (transposed ? input.size(1) == conv_out && conv_in > 0
                              : input.size(1) % g == 0 && weight.size(1) * g == input.size(1));
  if (!ok) return std::nullopt;
  return Conv{*stride, *padding, *dilation, g};
}

std::optional<at::IntArrayRef> concrete(c10::SymIntArrayRef v) {
  return c10::asIntArrayRefSlowOpt(v);
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                       c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const auto op = concrete(output_padding);
  if (const auto c = on_device(input, weight, transposed, concrete(stride), concrete(padding),
                               concrete(dilation), groups.maybe_as_int());
      c && op) {
    if (!transposed) return with_bias(forward(input, weight, *c), bias);
    const std::vector<int64_t> sizes = transposed_sizes(input, weight, *op, *c);
    const std::optional<at::Tensor> b =
        bias && bias->defined() ? std::optional<at::Tensor>(wide(*bias)) : std::nullopt;
    if (std::all_of(sizes.begin() + 2, sizes.end(), [](int64_t s) { return s > 0; }))
      return with_bias(input_grad(wide(input), wide(weight), sizes, *c), b).to(input.scalar_type());
  }
  count_fallback("aten::convolution_overrideable");
  const auto host = [](const std::optional<at::Tensor>& t) -> std::optional<at::Tensor> {
    if (!t || !t->defined()) return std::nullopt;
    return host_alias(*t);
  };
  const at::Tensor out =
      at::convolution_symint(host_alias(input), host_alias(weight), host(bias), stride, padding,
                             dilation, transposed, output_padding, std::move(groups));
  return to_neuron(out, input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> mask) {
  if (const auto c = on_device(input, weight, transposed, concrete(stride), concrete(padding),
                               concrete(dilation), groups.maybe_as_int());
      c && grad.device() == input.device() && grad.scalar_type() == input.scalar_type() &&
      grad.numel() > 0) {
    at::Tensor gi, gw, gb;
    if (mask[0])
      gi = transposed
               ? forward(grad, weight, *c, input.sizes().slice(2))
               : input_grad(wide(grad), wide(weight), input.sizes(), *c).to(input.scalar_type());
    if (mask[1])
      gw = transposed ? weight_grad(input, grad, weight.sizes(), *c)
                      : weight_grad(grad, input, weight.sizes(), *c);
    if (mask[2]) gb = bias_grad(grad);
    return {gi, gw, gb};
  }
  count_fallback("aten::convolution_backward_overrideable");
  // The bias has one element per output channel.
  const c10::SymInt channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  const std::vector<c10::SymInt> bias_sizes{channels};
  auto [gi, gw, gb] = at::convolution_backward_symint(
      host_alias(grad), host_alias(input), host_alias(weight),
      mask[2] ? std::optional<c10::SymIntArrayRef>(bias_sizes) : std::nullopt, stride, padding,
      dilation, transposed, output_padding, std::move(groups), mask);
  const auto back = [&](const at::Tensor& t) {
    return t.defined() ? to_neuron(t, input.device()) : at::Tensor();
  };
  return {back(gi), back(gw), back(gb)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

}  // namespace neuronsim::pytorch

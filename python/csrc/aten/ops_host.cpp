// Ops that run on the CPU, counted like any fallback, but that the boxed fallback alone
// cannot run: the CPU has no kernel for their device-side form, or none for the dtype
// a device backend is given.
// - convolution_overrideable (and its backward) is what a device's convolution is
//   dispatched to: a non-transposed one runs on the device as a product of windows; a
//   transposed one, and the backward, run on the CPU's convolution, counted.
#include <algorithm>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/fallback.h"
#include "runtime/backend.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

std::optional<at::Tensor> host(const std::optional<at::Tensor>& t) {
  if (!t || !t->defined()) return std::nullopt;
  return host_alias(*t);
}

// A (non-transposed) convolution on the device as a product of windows: the padded input's
// windows along each spatial dim (unfold, a view), laid out per group as rows of
// C/groups * prod(kernel) values, times the weights as a matrix, plus the bias. Mamba's
// depthwise causal conv1d and a ViT's patch embedding are such convolutions.
at::Tensor convolution_by_windows(const at::Tensor& input, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                  at::IntArrayRef padding, at::IntArrayRef dilation,
                                  int64_t groups) {
  const int64_t spatial = input.dim() - 2, batch = input.size(0), channels = input.size(1);
  const int64_t out_channels = weight.size(0), per_group = channels / groups;
  std::vector<int64_t> pads;  // constant_pad_nd takes the last dim's pair first
  for (int64_t i = spatial - 1; i >= 0; --i) pads.insert(pads.end(), {padding[i], padding[i]});
  at::Tensor x = input;
  if (std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p != 0; }))
    x = at::constant_pad_nd(input, pads, 0);
  int64_t positions = 1, taps = 1;
  std::vector<int64_t> out_sizes{batch, out_channels};
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t k = weight.size(2 + i), span = (k - 1) * dilation[i] + 1;
    x = x.unfold(2 + i, span, stride[i]);
    if (dilation[i] > 1) x = x.slice(-1, 0, span, dilation[i]);
    out_sizes.push_back(x.size(2 + i));
    positions *= x.size(2 + i);
    taps *= k;
  }
  // [B, C, O..., K...] -> [B, groups, O, C/groups * K]
  const at::Tensor rows = x.reshape({batch, groups, per_group, positions, taps})
                              .permute({0, 1, 3, 2, 4})
                              .reshape({batch, groups, positions, per_group * taps});
  const at::Tensor w =
      weight.reshape({groups, out_channels / groups, per_group * taps}).transpose(1, 2);
  at::Tensor out = at::matmul(rows, w)  // [B, groups, O, Cout / groups]
                       .permute({0, 1, 3, 2})
                       .reshape(out_sizes);
  if (bias && bias->defined()) {
    std::vector<int64_t> bias_sizes(static_cast<size_t>(out.dim()), 1);
    bias_sizes[1] = out_channels;
    out = out + bias->view(bias_sizes);
  }
  return out;
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                       c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const auto concrete = [](c10::SymIntArrayRef v) { return c10::asIntArrayRefSlowOpt(v); };
  const auto s = concrete(stride), p = concrete(padding), d = concrete(dilation);
  const auto g = groups.maybe_as_int();
  if (!transposed && s && p && d && g && input.dim() >= 3 && input.dim() <= 5 &&
      weight.dim() == input.dim() && input.device().is_privateuseone() &&
      weight.device() == input.device() && input.scalar_type() == weight.scalar_type() &&
      at::isFloatingType(input.scalar_type()) && input.scalar_type() != at::kDouble && *g > 0 &&
      input.size(1) % *g == 0 && weight.size(0) % *g == 0 && weight.size(1) * *g == input.size(1) &&
      input.numel() > 0)
    return convolution_by_windows(input, weight, bias, *s, *p, *d, *g);
  count_fallback("aten::convolution_overrideable");
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

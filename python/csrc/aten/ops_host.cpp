// Ops that run on the CPU, counted like any fallback, but that the boxed fallback alone
// cannot run: the CPU has no kernel for their device-side form, or none for the dtype
// a device backend is given.
// - convolution_overrideable (and its backward) is what a device's convolution is
//   dispatched to; the CPU's convolution computes it.
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

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                       c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
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

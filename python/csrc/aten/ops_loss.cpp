// The negative log-likelihood loss, forward and backward, on the device: what
// cross_entropy becomes after log_softmax. Targets are int64 class indices, read as
// limbs (integers.h), so a target of 2^32 + 5 is an error as on the CPU, not class 5.
//
// Forward, for log-probabilities x [N, C] and targets t [N], in four kernels:
//   1. per row: w = t is a class and not ignore_index; bad = t is neither
//   2. picked[i, j] = x[i, j] where j == t[i] (a one-hot select, [N, C])
//   3. rows: the sum of each picked row, beside w and bad in one [3, N] buffer
//   4. the sums of the three rows: the loss sum, the total weight, the bad targets
// and one pointwise kernel for -sum (/ total weight for the mean). The one-hot select
// reads x once more, as the log_softmax before it did; a gather of one element per
// row would read less, but its index (row * C + t) leaves FP32's exact range for a
// real vocabulary. Class weights w [C] (an input broadcast over the rows) weigh each picked
// element and replace each kept row's weight of 1 by w[t], so the mean divides by the sum of
// the targets' weights, as torch's does.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "aten/timing_only.h"
#include "runtime/backend.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

using isa::AluOp;

constexpr int64_t kMean = 1, kSum = 2;  // at::Reduction: None = 0, Mean = 1, Sum = 2

bool covered(const at::Tensor& self, const at::Tensor& target,
             const std::optional<at::Tensor>& weight) {
  const bool weighted = weight && weight->defined();
  if (weighted && (weight->device() != self.device() || weight->dim() != 1 || self.dim() != 2 ||
                   weight->numel() != self.size(1) || weight->scalar_type() != self.scalar_type()))
    return false;  // the CPU's checks and errors
  return self.device().is_privateuseone() && target.device() == self.device() &&
         is_engine_float(self.scalar_type()) && self.dim() == 2 && target.dim() == 1 &&
         target.scalar_type() == at::kLong && target.size(0) == self.size(0) && self.size(0) > 0 &&
         self.size(1) > 0 && self.size(1) < (int64_t{1} << 24);
}

// 1 where column j of [N, C] is row i's target (and the target is not ignore_index).
Limb hits(IntExpr& x, const at::Tensor& target, int64_t classes, int64_t ignore_index) {
  const Limb t = x.to_float(x.operand(target.unsqueeze(1)));  // exact for every class
  Limb hit = x.op(AluOp::is_equal, x.position({0, 1}), t);
  if (ignore_index >= 0 && ignore_index < classes)
    hit =
        x.op(AluOp::logical_and, hit, x.imm(AluOp::not_equal, t, static_cast<float>(ignore_index)));
  return hit;
}

// The first target that is neither a class nor ignore_index, named as torch does.
[[noreturn]] void bad_target(const at::Tensor& target, int64_t classes, int64_t ignore_index) {
  const at::Tensor t = host_alias(target);
  const auto* v = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    TORCH_CHECK_INDEX(v[i * t.stride(0)] == ignore_index ||
                          (v[i * t.stride(0)] >= 0 && v[i * t.stride(0)] < classes),
                      "Target ", v[i * t.stride(0)], " is out of bounds.");
  fail("aten::nll_loss_forward: the device counted a bad target that the host does not find");
}

bool forward(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
             int64_t reduction, int64_t ignore_index, at::Tensor& output,
             at::Tensor& total_weight) {
  const char* op = "aten::nll_loss_forward";
  const int64_t n = self.size(0), classes = self.size(1);
  op_device(op, {&self, &target, &output, &total_weight});
  at::native::resize_output(output, reduction == 0 ? at::IntArrayRef{n} : at::IntArrayRef{});
  at::native::resize_output(total_weight, {});
  const at::Tensor rows = at::empty({3, n}, self.options().dtype(at::kFloat));

  IntExpr check(*layout_of(at::kLong));
  const Limbs t = check.operand(target);
  const Limb ignored = check.compare(AluOp::is_equal, t, check.constant(ignore_index));
  const Limb is_class =
      check.op(AluOp::logical_and, check.compare(AluOp::is_ge, t, check.constant(0)),
               check.compare(AluOp::is_lt, t, check.constant(classes)));
  const Limb kept = check.imm(AluOp::is_equal, ignored, 0);
  if (!check.run_values(
          op, {rows[1], rows[2]},
          {check.op(AluOp::logical_and, is_class, kept),
           check.op(AluOp::logical_and, check.imm(AluOp::is_equal, is_class, 0), kept)}))
    return false;

  IntExpr pick(*layout_of(at::kLong));
  const Limb hit = hits(pick, target, classes, ignore_index);
  const at::Tensor picked = at::empty({n, classes}, rows.options());
  if (!weight.defined()) {
    if (!pick.run_values(op, {picked}, {pick.select(hit, pick.load(self), Limb{-1, 0})}))
      return false;
  } else {  // each kept row's weight is its target's: the sum of its picked weights
    const at::Tensor picked_weights = at::empty({n, classes}, rows.options());
    const Limb w = pick.load(weight.unsqueeze(0));
    if (!pick.run_values(
            op, {picked, picked_weights},
            {pick.select(hit, pick.op(AluOp::multiply, pick.load(self), w), Limb{-1, 0}),
             pick.select(hit, w, Limb{-1, 0})}) ||
        !run_reduce(op, kernels::ReduceOp::sum, picked_weights, 1, rows[1]))
      return false;
  }
  const at::Tensor sums = at::empty({3}, rows.options());
  if (!run_reduce(op, kernels::ReduceOp::sum, picked, 1, rows[0]) ||
      !run_reduce(op, kernels::ReduceOp::sum, rows, 1, sums))
    return false;
  if (host_can_check() && sums[2].item<float>() > 0) bad_target(target, classes, ignore_index);

  kernels::PointwiseExpr e;
  if (reduction == 0) {
    e.alu_imm(AluOp::multiply, e.load(0), -1.0f);
    total_weight.zero_();  // as torch's: no total weight without a reduction
    return run_pointwise(op, "-loss", e, {rows[0]}, output);
  }
  const auto sum = e.load(0), total = e.load(1);
  const auto loss = reduction == kMean ? e.alu(AluOp::divide, sum, total) : sum;
  e.set_outputs({e.alu_imm(AluOp::multiply, loss, -1.0f), total});
  return run_pointwise_outputs(op, reduction == kMean ? "-mean" : "-sum", e, {sums[0], sums[1]},
                               {output, total_weight});
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(
    const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    int64_t reduction, c10::SymInt ignore_index, at::Tensor& output, at::Tensor& total_weight) {
  if (covered(self, target, weight) &&
      (reduction == 0 || reduction == kMean || reduction == kSum) &&
      output.scalar_type() == self.scalar_type() &&
      total_weight.scalar_type() == self.scalar_type() &&
      forward(self, target, weight ? *weight : at::Tensor(), reduction,
              ignore_index.guard_int(__FILE__, __LINE__), output, total_weight))
    return {output, total_weight};
  return FallbackSymInt<ATEN_OP2(nll_loss_forward, output)>::call(
      self, target, weight, reduction, ignore_index, output, total_weight);
}

// grad_input[i, j] = -grad (/ total weight for the mean) where j is row i's target.
at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                  int64_t reduction, c10::SymInt ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  if (covered(self, target, weight) && grad_input.device() == self.device() &&
      grad_output.device() == self.device() && total_weight.device() == self.device() &&
      grad_input.scalar_type() == self.scalar_type() &&
      (reduction == 0 ? grad_output.dim() == 1 : grad_output.dim() == 0)) {
    at::native::resize_output(grad_input, self.sizes());
    IntExpr x(*layout_of(at::kLong));
    const Limb hit = hits(x, target, self.size(1), ignore);
    Limb g = x.load(reduction == 0 ? grad_output.unsqueeze(1) : grad_output);
    if (reduction == kMean) g = x.op(AluOp::divide, g, x.load(total_weight));
    if (weight && weight->defined()) g = x.op(AluOp::multiply, g, x.load(weight->unsqueeze(0)));
    if (x.run_values("aten::nll_loss_backward", {grad_input},
                     {x.select(hit, x.imm(AluOp::multiply, g, -1.0f), Limb{-1, 0})}))
      return grad_input;
  }
  return FallbackSymInt<ATEN_OP2(nll_loss_backward, grad_input)>::call(
      grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

// The mean squared error, as Trainer's regression heads and distillation losses call it:
// (self - target)^2, reduced by the device's sum or mean.
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out) {
  if (self.device().is_privateuseone() && target.device() == self.device() &&
      is_engine_float(at::result_type(self, target)) && out.device() == self.device()) {
    const at::Tensor diff = self - target;
    const at::Tensor squared = diff * diff;
    at::Tensor loss = reduction == kMean  ? squared.mean()
                      : reduction == kSum ? squared.sum()
                                          : squared;
    at::native::resize_output(out, loss.sizes());
    out.copy_(loss);
    return out;
  }
  return Fallback<ATEN_OP2(mse_loss, out)>::call(self, target, reduction, out);
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, int64_t reduction,
                                  at::Tensor& grad_input) {
  if (self.device().is_privateuseone() && target.device() == self.device() &&
      grad_output.device() == self.device() && is_engine_float(self.scalar_type())) {
    const double norm = reduction == kMean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
    const at::Tensor grad = (self - target) * grad_output * norm;
    at::native::resize_output(grad_input, self.sizes());
    grad_input.copy_(grad.expand(self.sizes()));
    return grad_input;
  }
  return Fallback<ATEN_OP2(mse_loss_backward, grad_input)>::call(grad_output, self, target,
                                                                 reduction, grad_input);
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction) {
  at::Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  return mse_loss_backward_out(grad_output, self, target, reduction, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("mse_loss_backward", mse_loss_backward);
}

}  // namespace neuronsim::pytorch

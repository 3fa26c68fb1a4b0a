// The fused Adam and AdamW steps (torch.optim.Adam/AdamW(fused=True), the Hugging Face
// Trainer's default "adamw_torch_fused"): one pointwise kernel per parameter that
// reads the parameter, its gradient, both moments and the step count, and writes the
// parameter and the moments in place (several outputs of one expression). The step
// count and the learning rate are inputs, not immediates, so a learning-rate schedule
// reuses one kernel instead of building one per step. Gradient scaling (AMP's
// grad_scale and found_inf) runs on the CPU, counted.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/kernel_call.h"
#include "runtime/backend.h"

namespace neuronsim::pytorch {

namespace {

using isa::ActFunc;
using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

struct Hyper {
  double beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, decoupled;  // decoupled: AdamW's weight decay
};

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.device() == b.device() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         is_engine_float(b.scalar_type());
}

bool covered(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
             const at::Tensor& exp_avg_sq, const at::Tensor* max_exp_avg_sq,
             const at::Tensor& step) {
  return param.device().is_privateuseone() && is_engine_float(param.scalar_type()) &&
         same_layout(param, grad) && same_layout(param, exp_avg) &&
         same_layout(param, exp_avg_sq) &&
         (!max_exp_avg_sq || same_layout(param, *max_exp_avg_sq)) &&
         step.device() == param.device() && step.numel() == 1 &&
         is_engine_float(step.scalar_type());
}

// One parameter's step (covered); false when the kernel refuses it (nothing written).
bool adam_step(const char* op, const Hyper& h, const at::Tensor& lr, const at::Tensor& param,
               const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
               const at::Tensor* max_exp_avg_sq, const at::Tensor& step) {
  Expr e;
  std::vector<at::Tensor> inputs{param, grad, exp_avg, exp_avg_sq, step.reshape({}), lr};
  const Reg p = e.load(0), m = e.load(2), v = e.load(3), s = e.load(4), rate = e.load(5);
  Reg g = e.load(1);
  if (h.maximize) g = e.alu_imm(AluOp::multiply, g, -1.0f);
  const auto f = [](double x) { return static_cast<float>(x); };
  Reg decayed = p;
  if (h.weight_decay != 0 && h.decoupled)  // p - lr * wd * p
    decayed = e.alu(AluOp::subtract, p,
                    e.alu(AluOp::multiply, e.alu_imm(AluOp::multiply, p, f(h.weight_decay)), rate));
  if (h.weight_decay != 0 && !h.decoupled)  // L2: g + wd * p
    g = e.alu(AluOp::add, g, e.alu_imm(AluOp::multiply, p, f(h.weight_decay)));
  const Reg m1 = e.alu(AluOp::add, e.alu_imm(AluOp::multiply, m, f(h.beta1)),
                       e.alu_imm(AluOp::multiply, g, f(1 - h.beta1)));
  const Reg v1 = e.alu(AluOp::add, e.alu_imm(AluOp::multiply, v, f(h.beta2)),
                       e.alu_imm(AluOp::multiply, e.alu(AluOp::multiply, g, g), f(1 - h.beta2)));
  Reg second = v1, vmax1 = -1;
  if (max_exp_avg_sq) {
    inputs.push_back(*max_exp_avg_sq);
    second = vmax1 = e.alu(AluOp::max, e.load(6), v1);
  }
  // 1 - beta^step: the bias corrections, from the step count on the device
  const Reg bc1 = e.alu_imm(AluOp::subtract, e.alu_imm(AluOp::pow, s, f(h.beta1), true), 1, true);
  const Reg bc2 = e.alu_imm(AluOp::subtract, e.alu_imm(AluOp::pow, s, f(h.beta2), true), 1, true);
  const Reg denom = e.alu_imm(
      AluOp::add,
      e.alu(AluOp::divide, e.activation(ActFunc::sqrt, second), e.activation(ActFunc::sqrt, bc2)),
      f(h.eps));
  const Reg update =
      e.alu(AluOp::divide, e.alu(AluOp::multiply, e.alu(AluOp::divide, rate, bc1), m1), denom);
  std::vector<Reg> results{e.alu(AluOp::subtract, decayed, update), m1, v1};
  std::vector<at::Tensor> outs{param, exp_avg, exp_avg_sq};
  if (max_exp_avg_sq) {
    results.push_back(vmax1);
    outs.push_back(*max_exp_avg_sq);
  }
  e.set_outputs(results);
  const std::string name =
      fmt::format("adam b1={} b2={} wd={} eps={} ams={} max={} decoupled={}", h.beta1, h.beta2,
                  h.weight_decay, h.eps, h.amsgrad, h.maximize, h.decoupled);
  return run_pointwise_outputs(op, name, e, inputs, outs);
}

// Every parameter's step on the device, or (when one is not covered) all on the CPU.
bool fused_adam(const char* op, const Hyper& h, const at::Tensor& lr, at::TensorList params,
                at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps,
                const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  if ((grad_scale && grad_scale->defined()) || (found_inf && found_inf->defined())) return false;
  const size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      (h.amsgrad && max_exp_avg_sqs.size() != n))
    return false;
  for (size_t i = 0; i < n; ++i)  // all covered first, so that none is stepped twice
    if (!covered(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                 h.amsgrad ? &max_exp_avg_sqs[i] : nullptr, steps[i]))
      return false;
  for (size_t i = 0; i < n; ++i) {
    if (params[i].numel() == 0) continue;
    const at::Tensor rate = lr.device() == params[i].device()
                                ? lr.reshape({}).to(at::kFloat)
                                : lr.reshape({}).to(params[i].device(), at::kFloat);
    const bool stepped = adam_step(op, h, rate, params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                                   h.amsgrad ? &max_exp_avg_sqs[i] : nullptr, steps[i]);
    if (!stepped && i == 0) return false;  // nothing written yet: the CPU steps them all
    if (!stepped)
      fail(
          fmt::format("{}: parameter {} of {} could not be stepped on the device after the "
                      "others were",
                      op, i, n));
  }
  return true;
}

// A host learning rate as a device input: written by the host, no kernel per value.
at::Tensor rate_on(at::TensorList params, double lr) {
  if (params.empty()) return at::scalar_tensor(lr, at::TensorOptions().dtype(at::kFloat));
  return device_scalar(static_cast<float>(lr), params[0].device());
}

const char* name_of(bool decoupled) {
  return decoupled ? "aten::_fused_adamw_" : "aten::_fused_adam_";
}

// _fused_adam_ / _fused_adamw_ with a host learning rate (Op: the aten op, for the
// CPU fallback).
template <class Op, bool Decoupled>
void fused_host_lr(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                   at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                   double lr, double beta1, double beta2, double weight_decay, double eps,
                   bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                   const std::optional<at::Tensor>& found_inf) {
  const Hyper h{beta1, beta2, weight_decay, eps, amsgrad, maximize, Decoupled};
  if (fused_adam(name_of(Decoupled), h, rate_on(self, lr), self, grads, exp_avgs, exp_avg_sqs,
                 max_exp_avg_sqs, steps, grad_scale, found_inf))
    return;
  Fallback<Op>::call(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

// The same with the learning rate in a tensor (the .tensor_lr overloads).
template <class Op, bool Decoupled>
void fused_tensor_lr(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                     at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                     at::TensorList steps, const at::Tensor& lr, double beta1, double beta2,
                     double weight_decay, double eps, bool amsgrad, bool maximize,
                     const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  const Hyper h{beta1, beta2, weight_decay, eps, amsgrad, maximize, Decoupled};
  if (lr.numel() == 1 && fused_adam(name_of(Decoupled), h, lr, self, grads, exp_avgs, exp_avg_sqs,
                                    max_exp_avg_sqs, steps, grad_scale, found_inf))
    return;
  Fallback<Op>::call(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", fused_host_lr<ATEN_OP(_fused_adam_), false>);
  m.impl("_fused_adamw_", fused_host_lr<ATEN_OP(_fused_adamw_), true>);
  m.impl("_fused_adam_.tensor_lr", fused_tensor_lr<ATEN_OP2(_fused_adam_, tensor_lr), false>);
  m.impl("_fused_adamw_.tensor_lr", fused_tensor_lr<ATEN_OP2(_fused_adamw_, tensor_lr), true>);
}

}  // namespace neuronsim::pytorch

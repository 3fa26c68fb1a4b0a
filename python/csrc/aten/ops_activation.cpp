// The activations' backward formulas on the simulator, as aten's Activation.cpp has them:
// silu, sigmoid, tanh, threshold (ReLU's), gelu (exact and tanh), hardtanh and log-sigmoid,
// each one pointwise kernel of the gradient and the saved input or output.
#include "aten/pointwise.h"

namespace neuronsim::pytorch {

namespace {

using namespace pointwise;  // the shared helpers (pointwise.h)

// hardtanh's gradient stops at and past its bounds.
at::Tensor& hardtanh_backward_out(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                                  const at::Scalar& hi, at::Tensor& out) {
  const float l = static_cast<float>(lo.toDouble()), h = static_cast<float>(hi.toDouble());
  if (prepare_out(out, at::infer_size(grad.sizes(), x.sizes()), grad.scalar_type()) &&
      grad_unless_into(
          "aten::hardtanh_backward", fmt::format("hardtanh' {} {}", l, h), grad, x,
          [&](Expr& e, Reg v) {
            return e.alu(AluOp::max, e.alu_imm(AluOp::is_le, v, l), e.alu_imm(AluOp::is_ge, v, h));
          },
          out))
    return out;
  return Fallback<ATEN_OP2(hardtanh_backward, grad_input)>::call(grad, x, lo, hi, out);
}

at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& x, const at::Scalar& lo,
                             const at::Scalar& hi) {
  at::Tensor out = at::empty({0}, grad.options());
  return hardtanh_backward_out(grad, x, lo, hi, out);
}

// d/dx log(sigmoid(x)) = sigmoid(-x).
at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& x,
                                const at::Tensor& buffer) {
  if (x.device().is_privateuseone() && grad.device() == x.device() &&
      is_engine_float(x.scalar_type()) && grad.scalar_type() == x.scalar_type() &&
      grad.sizes() == x.sizes() && x.numel() > 0) {
    at::Tensor out = at::empty(x.sizes(), grad.options());
    Expr e;
    e.alu(AluOp::multiply, e.load(0), e.activation(ActFunc::sigmoid, e.load(1), -1.0f));
    if (run_pointwise("aten::log_sigmoid_backward", "log_sigmoid'", e, {grad, x}, out)) return out;
  }
  return Fallback<ATEN_OP(log_sigmoid_backward)>::call(grad, x, buffer);
}

at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& x) {
  // d/dx x*s(x) = s * (1 + x * (1 - s))
  if (at::Tensor out = grad_times("aten::silu_backward", "silu'", grad, x,
                                  [](Expr& e, Reg v) {
                                    const Reg s = e.activation(ActFunc::sigmoid, v);
                                    const Reg one_minus = e.alu_imm(AluOp::subtract, s, 1.0f, true);
                                    const Reg t = e.alu_imm(
                                        AluOp::add, e.alu(AluOp::multiply, v, one_minus), 1.0f);
                                    return e.alu(AluOp::multiply, s, t);
                                  });
      out.defined())
    return out;
  return Fallback<ATEN_OP(silu_backward)>::call(grad, x);
}

at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& y) {
  // y * (1 - y), y the forward output
  if (at::Tensor out = grad_times("aten::sigmoid_backward", "sigmoid'", grad, y,
                                  [](Expr& e, Reg v) {
                                    return e.alu(AluOp::multiply, v,
                                                 e.alu_imm(AluOp::subtract, v, 1.0f, true));
                                  });
      out.defined())
    return out;
  return Fallback<ATEN_OP(sigmoid_backward)>::call(grad, y);
}

at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& y) {
  // 1 - y^2, y the forward output
  if (at::Tensor out = grad_times("aten::tanh_backward", "tanh'", grad, y,
                                  [](Expr& e, Reg v) {
                                    return e.alu_imm(AluOp::subtract, e.alu(AluOp::multiply, v, v),
                                                     1.0f, true);
                                  });
      out.defined())
    return out;
  return Fallback<ATEN_OP(tanh_backward)>::call(grad, y);
}

at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& x,
                              const at::Scalar& threshold) {
  // relu's backward as the CPU's: 0 where x <= threshold, else grad.
  const float t = static_cast<float>(threshold.toDouble());
  if (grad.sizes() == x.sizes()) {
    at::Tensor out = at::empty(x.sizes(), x.options());
    if (grad_unless_into(
            "aten::threshold_backward", fmt::format("threshold' {}", t), grad, x,
            [t](Expr& e, Reg v) { return e.alu_imm(AluOp::is_le, v, t); }, out))
      return out;
  }
  return Fallback<ATEN_OP(threshold_backward)>::call(grad, x, threshold);
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                         c10::string_view approximate) {
  // exact gelu: Phi(x) + x * phi(x) = 0.5 * (1 + erf(x / sqrt 2)) + x * exp(-x^2 / 2) / sqrt(2 pi)
  if (approximate == "none")
    if (at::Tensor out = grad_times(
            "aten::gelu_backward", "gelu'", grad, x,
            [](Expr& e, Reg v) {
              const Reg cdf = e.alu_imm(
                  AluOp::add,
                  e.alu_imm(AluOp::multiply, e.activation(ActFunc::erf, v, float(M_SQRT1_2)), 0.5f),
                  0.5f);
              const Reg pdf = e.alu_imm(
                  AluOp::multiply, e.activation(ActFunc::exp, e.alu(AluOp::multiply, v, v), -0.5f),
                  float(0.5 * M_2_SQRTPI * M_SQRT1_2));
              return e.alu(AluOp::add, cdf, e.alu(AluOp::multiply, v, pdf));
            });
        out.defined())
      return out;
  // tanh approximation: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2), t = tanh(k (x + c x^3))
  if (approximate == "tanh")
    if (at::Tensor out = grad_times(
            "aten::gelu_backward", "gelu_tanh'", grad, x,
            [](Expr& e, Reg v) {
              constexpr float k = 0.7978845608028654f, c = 0.044715f;
              const Reg v2 = e.alu(AluOp::multiply, v, v);
              const Reg inner =
                  e.alu(AluOp::multiply, v,
                        e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, v2, c), 1.0f));
              const Reg t = e.activation(ActFunc::tanh, inner, k);
              const Reg left = e.alu_imm(AluOp::multiply, e.alu_imm(AluOp::add, t, 1.0f), 0.5f);
              const Reg sech2 =
                  e.alu_imm(AluOp::subtract, e.alu(AluOp::multiply, t, t), 1.0f, true);
              const Reg slope = e.alu_imm(
                  AluOp::multiply,
                  e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, v2, 3 * c), 1.0f), 0.5f * k);
              return e.alu(AluOp::add, left,
                           e.alu(AluOp::multiply, e.alu(AluOp::multiply, v, sech2), slope));
            });
        out.defined())
      return out;
  return Fallback<ATEN_OP(gelu_backward)>::call(grad, x, approximate);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("silu_backward", silu_backward);
  m.impl("sigmoid_backward", sigmoid_backward);
  m.impl("tanh_backward", tanh_backward);
  m.impl("threshold_backward", threshold_backward);
  m.impl("gelu_backward", gelu_backward);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
}

}  // namespace neuronsim::pytorch

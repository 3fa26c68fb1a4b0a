// Unary elementwise aten ops on the simulator: the activations on ScalarE (functional, in place
// and out=), the signed ones on integers' limbs too, powers by a number, erfinv, log1p, expm1,
// clamps and hardtanh, softplus and log-sigmoid, infinities and NaN, rounding, sign,
// threshold, and the logical and bitwise nots.
#include "aten/pointwise.h"

namespace neuronsim::pytorch {

namespace {

using namespace pointwise;  // the shared helpers (pointwise.h)

// The functional, in-place (fn_) and .out forms of an activation.
#define NEURON_ACTIVATION(fn, OP, FUNC)                                                           \
  at::Tensor fn(const at::Tensor& x) {                                                            \
    if (at::Tensor out =                                                                          \
            unary("aten::" #fn, #FUNC, x, [](Expr& e, Reg r) { e.activation(FUNC, r); });         \
        out.defined())                                                                            \
      return out;                                                                                 \
    return Fallback<OP>::call(x);                                                                 \
  }                                                                                               \
  at::Tensor& fn##_inplace(at::Tensor& x) {                                                       \
    if (unary_inplace("aten::" #fn "_", #FUNC, x, [](Expr& e, Reg r) { e.activation(FUNC, r); })) \
      return x;                                                                                   \
    return Fallback<ATEN_OP(fn##_)>::call(x);                                                     \
  }                                                                                               \
  at::Tensor& fn##_out(const at::Tensor& x, at::Tensor& out) {                                    \
    if (unary_out("aten::" #fn, #FUNC, x, out, [](Expr& e, Reg r) { e.activation(FUNC, r); }))    \
      return out;                                                                                 \
    return Fallback<ATEN_OP2(fn, out)>::call(x, out);                                             \
  }

NEURON_ACTIVATION(exp, ATEN_OP(exp), ActFunc::exp)
NEURON_ACTIVATION(log, ATEN_OP(log), ActFunc::log)
NEURON_ACTIVATION(sqrt, ATEN_OP(sqrt), ActFunc::sqrt)
NEURON_ACTIVATION(rsqrt, ATEN_OP(rsqrt), ActFunc::rsqrt)
NEURON_ACTIVATION(reciprocal, ATEN_OP(reciprocal), ActFunc::reciprocal)
NEURON_ACTIVATION(sigmoid, ATEN_OP(sigmoid), ActFunc::sigmoid)
NEURON_ACTIVATION(tanh, ATEN_OP(tanh), ActFunc::tanh)
NEURON_ACTIVATION(silu, ATEN_OP(silu), ActFunc::silu)
NEURON_ACTIVATION(sin, ATEN_OP(sin), ActFunc::sin)
NEURON_ACTIVATION(cos, ATEN_OP(cos), ActFunc::cos)
NEURON_ACTIVATION(erf, ATEN_OP(erf), ActFunc::erf)

// Activations that integers have too (computed on their limbs).
#define NEURON_SIGNED(fn, OP, FUNC, INT)                                                         \
  at::Tensor fn(const at::Tensor& x) {                                                           \
    if (is_limb_integer(x.scalar_type()) && x.device().is_privateuseone()) {                     \
      at::Tensor out = at::empty(x.sizes(), x.options());                                        \
      if (integer_unary_into(INT, x, out)) return out;                                           \
    } else if (at::Tensor out =                                                                  \
                   unary("aten::" #fn, #FUNC, x, [](Expr& e, Reg r) { e.activation(FUNC, r); }); \
               out.defined()) {                                                                  \
      return out;                                                                                \
    }                                                                                            \
    return Fallback<OP>::call(x);                                                                \
  }

NEURON_SIGNED(relu, ATEN_OP(relu), ActFunc::relu, IntUnary::relu)
NEURON_SIGNED(neg, ATEN_OP(neg), ActFunc::negate, IntUnary::neg)
NEURON_SIGNED(abs, ATEN_OP(abs), ActFunc::abs, IntUnary::abs)

// In place: floats on ScalarE, integers on their limbs (an input may be its output).
#define NEURON_SIGNED_INPLACE(fn, FUNC, INT)                                                      \
  at::Tensor& fn##_inplace(at::Tensor& x) {                                                       \
    if (is_limb_integer(x.scalar_type()) && x.device().is_privateuseone() &&                      \
        integer_unary_into(INT, x, x))                                                            \
      return x;                                                                                   \
    if (unary_inplace("aten::" #fn "_", #FUNC, x, [](Expr& e, Reg r) { e.activation(FUNC, r); })) \
      return x;                                                                                   \
    return Fallback<ATEN_OP(fn##_)>::call(x);                                                     \
  }

NEURON_SIGNED_INPLACE(relu, ActFunc::relu, IntUnary::relu)
NEURON_SIGNED_INPLACE(neg, ActFunc::negate, IntUnary::neg)
NEURON_SIGNED_INPLACE(abs, ActFunc::abs, IntUnary::abs)

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const bool tanh = approximate == "tanh";
  if (at::Tensor out = unary(
          "aten::gelu", tanh ? "gelu_tanh" : "gelu", x,
          [&](Expr& e, Reg r) { e.activation(tanh ? ActFunc::gelu_tanh : ActFunc::gelu, r); });
      out.defined())
    return out;
  return Fallback<ATEN_OP(gelu)>::call(x, approximate);
}

// x ** p: the common exponents as the operations torch uses for them.
at::Tensor pow_scalar(const at::Tensor& x, const at::Scalar& exponent) {
  const double p = exponent.toDouble();
  const auto make = [p](Expr& e, Reg r) {
    if (p == 2.0)
      e.alu(AluOp::multiply, r, r);
    else if (p == 1.0)
      e.alu_imm(AluOp::multiply, r, 1.0f);
    else if (p == 0.5)
      e.activation(ActFunc::sqrt, r);
    else if (p == -0.5)
      e.activation(ActFunc::rsqrt, r);
    else if (p == -1.0)
      e.activation(ActFunc::reciprocal, r);
    else if (p == 3.0)
      e.alu(AluOp::multiply, e.alu(AluOp::multiply, r, r), r);
    else
      e.alu_imm(AluOp::pow, r, static_cast<float>(p));
  };
  if (exponent.isFloatingPoint() || exponent.isIntegral(false))
    if (at::Tensor out = unary("aten::pow", fmt::format("pow {}", p), x, make); out.defined())
      return out;
  return Fallback<ATEN_OP2(pow, Tensor_Scalar)>::call(x, exponent);
}

// erfinv by Giles' single-precision approximation ("Approximating the erfinv function",
// GPU Gems / arXiv:1005.0055): w = -log((1 - x)(1 + x)), then a degree-8 polynomial in
// w - 2.5 (w < 5) or sqrt(w) - 3 (the tails), times x. |x| = 1 gives +-inf, |x| > 1 NaN.
at::Tensor& erfinv_out(const at::Tensor& x, at::Tensor& out) {
  static constexpr float kCentral[] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                       -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                       -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kTail[] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                    0.00943887047f,   1.00167406f,     2.83297682f};
  // Integers and bools take the float result's dtype first, as torch promotes them.
  if (x.device().is_privateuseone() && at::isIntegralType(x.scalar_type(), true) &&
      is_engine_float(out.scalar_type()))
    return erfinv_out(x.to(out.scalar_type()), out);
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) &&
      prepare_out(out, x.sizes(), x.scalar_type())) {
    Expr e;
    const Reg v = e.load(0);
    const Reg one_minus_sq = e.alu(AluOp::multiply, e.alu_imm(AluOp::subtract, v, 1.0f, true),
                                   e.alu_imm(AluOp::add, v, 1.0f));
    const Reg w = e.alu_imm(AluOp::multiply, e.activation(ActFunc::log, one_minus_sq), -1.0f);
    auto horner = [&](const float* c, Reg t) {
      Reg p = e.constant(c[0]);
      for (int i = 1; i < 9; ++i) p = e.alu_imm(AluOp::add, e.alu(AluOp::multiply, p, t), c[i]);
      return p;
    };
    const Reg central = horner(kCentral, e.alu_imm(AluOp::subtract, w, 2.5f));
    const Reg tail =
        horner(kTail, e.alu_imm(AluOp::subtract, e.activation(ActFunc::sqrt, w), 3.0f));
    const Reg p = e.select(e.alu_imm(AluOp::is_lt, w, 5.0f), central, tail);
    const Reg r = e.alu(AluOp::multiply, p, v);
    // At |x| = 1 the tail polynomial is inf * inf terms of either sign: the limit is x * inf.
    const Reg edge = e.alu_imm(AluOp::is_equal, e.activation(ActFunc::abs, v), 1.0f);
    e.select(edge, e.alu_imm(AluOp::multiply, v, std::numeric_limits<float>::infinity()), r);
    if (run_pointwise("aten::erfinv", "erfinv giles", e, {x}, out)) return out;
  }
  return Fallback<ATEN_OP2(erfinv, out)>::call(x, out);
}

// log1p and expm1 without the cancellation of log(1 + x) and exp(x) - 1 near 0 (the
// classic corrections: log(u) * x / (u - 1) with u = 1 + x, and (u - 1) * x / log(u) with
// u = exp(x), exact where u rounds to 1); |x| >= 1/2 takes the plain forms.
at::Tensor& log1p_out(const at::Tensor& x, at::Tensor& out) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) &&
      prepare_out(out, x.sizes(), x.scalar_type())) {
    Expr e;
    const Reg v = e.load(0), u = e.alu_imm(AluOp::add, v, 1.0f),
              log_u = e.activation(ActFunc::log, u);
    const Reg corrected =
        e.alu(AluOp::multiply, log_u, e.alu(AluOp::divide, v, e.alu_imm(AluOp::subtract, u, 1.0f)));
    const Reg small = e.select(e.alu_imm(AluOp::is_equal, u, 1.0f), v, corrected);
    e.select(e.alu_imm(AluOp::is_lt, e.activation(ActFunc::abs, v), 0.5f), small, log_u);
    if (run_pointwise("aten::log1p", "log1p", e, {x}, out)) return out;
  }
  return Fallback<ATEN_OP2(log1p, out)>::call(x, out);
}

at::Tensor& expm1_out(const at::Tensor& x, at::Tensor& out) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) &&
      prepare_out(out, x.sizes(), x.scalar_type())) {
    Expr e;
    const Reg v = e.load(0), u = e.activation(ActFunc::exp, v);
    const Reg minus_one = e.alu_imm(AluOp::subtract, u, 1.0f);
    const Reg corrected =
        e.alu(AluOp::multiply, minus_one, e.alu(AluOp::divide, v, e.activation(ActFunc::log, u)));
    const Reg small = e.select(e.alu_imm(AluOp::is_equal, u, 1.0f), v, corrected);
    e.select(e.alu_imm(AluOp::is_lt, e.activation(ActFunc::abs, v), 0.5f), small, minus_one);
    if (run_pointwise("aten::expm1", "expm1", e, {x}, out)) return out;
  }
  return Fallback<ATEN_OP2(expm1, out)>::call(x, out);
}

// min(max(x, lo), hi) for a float x, the bounds read at run time (NaN stays NaN).
bool clamp_into(const char* op, const at::Tensor& x, const std::optional<at::Scalar>& lo,
                const std::optional<at::Scalar>& hi, at::Tensor& out) {
  if (!x.device().is_privateuseone() || !is_engine_float(x.scalar_type()) || (!lo && !hi) ||
      !prepare_out(out, x.sizes(), x.scalar_type()))
    return false;
  Expr e;
  std::vector<at::Tensor> inputs{x};
  Reg r = e.load(0);
  for (const auto& [bound, alu] : {std::pair{lo, AluOp::max}, std::pair{hi, AluOp::min}}) {
    if (!bound) continue;
    inputs.push_back(device_scalar(static_cast<float>(bound->toDouble()), x.device()));
    r = e.alu_scalar(alu, r, static_cast<int32_t>(inputs.size() - 1));
  }
  return run_pointwise(op, fmt::format("clamp lo={} hi={}", lo.has_value(), hi.has_value()), e,
                       inputs, out);
}

// Integer bounds on an integer tensor: max then min on limbs, exact (labels.clamp(min=0)).
bool integer_clamp_into(const char* op, const at::Tensor& x, const std::optional<at::Scalar>& lo,
                        const std::optional<at::Scalar>& hi, at::Tensor& out) {
  if (!x.device().is_privateuseone() || !is_limb_integer(x.scalar_type()) ||
      out.scalar_type() != x.scalar_type() || (!lo && !hi) || (lo && !lo->isIntegral(false)) ||
      (hi && !hi->isIntegral(false)) || !prepare_out(out, x.sizes(), x.scalar_type()))
    return false;
  at::Tensor from = x;
  for (const auto& [bound, alu] : {std::pair{lo, AluOp::max}, std::pair{hi, AluOp::min}}) {
    if (!bound) continue;
    const at::Tensor target = from.is_same(out) || !overlaps(from, out) ? out : at::empty_like(out);
    if (!integer_binary_into(op, alu, from, wrapped_number(*bound), 1.0, target)) return false;
    if (!target.is_same(out)) out.copy_(target);
    from = out;
  }
  return true;
}

at::Tensor& clamp_out(const at::Tensor& x, const std::optional<at::Scalar>& lo,
                      const std::optional<at::Scalar>& hi, at::Tensor& out) {
  if (clamp_into("aten::clamp", x, lo, hi, out)) return out;
  if (integer_clamp_into("aten::clamp", x, lo, hi, out)) return out;
  return Fallback<ATEN_OP2(clamp, out)>::call(x, lo, hi, out);
}

at::Tensor& clamp_min_out(const at::Tensor& x, const at::Scalar& lo, at::Tensor& out) {
  if (clamp_into("aten::clamp_min", x, lo, std::nullopt, out)) return out;
  if (integer_clamp_into("aten::clamp_min", x, lo, std::nullopt, out)) return out;
  return Fallback<ATEN_OP2(clamp_min, out)>::call(x, lo, out);
}

at::Tensor& clamp_max_out(const at::Tensor& x, const at::Scalar& hi, at::Tensor& out) {
  if (clamp_into("aten::clamp_max", x, std::nullopt, hi, out)) return out;
  if (integer_clamp_into("aten::clamp_max", x, std::nullopt, hi, out)) return out;
  return Fallback<ATEN_OP2(clamp_max, out)>::call(x, hi, out);
}

// hardtanh (relu6 is hardtanh(x, 0, 6)) is the CPU's clamp, bool refused as the CPU refuses it.
at::Tensor& hardtanh_out(const at::Tensor& x, const at::Scalar& lo, const at::Scalar& hi,
                         at::Tensor& out) {
  if (x.scalar_type() != at::kBool && (clamp_into("aten::hardtanh", x, lo, hi, out) ||
                                       integer_clamp_into("aten::hardtanh", x, lo, hi, out)))
    return out;
  return Fallback<ATEN_OP2(hardtanh, out)>::call(x, lo, hi, out);
}

at::Tensor hardtanh(const at::Tensor& x, const at::Scalar& lo, const at::Scalar& hi) {
  at::Tensor out = at::empty({0}, x.options());
  return hardtanh_out(x, lo, hi, out);
}

at::Tensor& hardtanh_inplace(at::Tensor& x, const at::Scalar& lo, const at::Scalar& hi) {
  return hardtanh_out(x, lo, hi, x);
}

// log(sigmoid(x)) = -softplus(-x): DPO's and other preference losses' log-probabilities.
// Softplus gives its argument back past 20, so large |x| stays exact; torch's CPU buffer
// (used by its own backward) is returned empty, as CUDA's is.
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& x) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) && x.numel() > 0) {
    at::Tensor out = at::empty(x.sizes(), x.options());
    Expr e;
    e.alu_imm(AluOp::multiply, e.activation(ActFunc::softplus, e.load(0), -1.0f), -1.0f);
    if (run_pointwise("aten::log_sigmoid_forward", "log_sigmoid", e, {x}, out))
      return {out, at::empty({0}, x.options())};
  }
  return Fallback<ATEN_OP(log_sigmoid_forward)>::call(x);
}

// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's rule).
at::Tensor& softplus_out(const at::Tensor& x, const at::Scalar& beta, const at::Scalar& threshold,
                         at::Tensor& out) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) &&
      prepare_out(out, x.sizes(), x.scalar_type())) {
    const float b = static_cast<float>(beta.toDouble()),
                t = static_cast<float>(threshold.toDouble());
    Expr e;
    const Reg v = e.load(0);
    Reg soft = e.activation(ActFunc::softplus, v, b);
    if (b != 1.0f) soft = e.alu_imm(AluOp::divide, soft, b);
    e.select(e.alu_imm(AluOp::is_gt, e.alu_imm(AluOp::multiply, v, b), t), v, soft);
    if (run_pointwise("aten::softplus", fmt::format("softplus {} {}", b, t), e, {x}, out))
      return out;
  }
  return Fallback<ATEN_OP2(softplus, out)>::call(x, beta, threshold, out);
}

// ---- masks and predicates ------------------------------------------------------

// out (bool) <- x == value, for the infinities torch asks about.
bool equals_into(const char* op, const at::Tensor& x, float value, const at::Tensor& out) {
  if (!x.device().is_privateuseone() || !is_engine_float(x.scalar_type()) ||
      !prepare_out(out, x.sizes(), at::kBool))
    return false;
  Expr e;
  e.alu_imm(AluOp::is_equal, e.load(0), value);
  return run_pointwise(op, fmt::format("=={}", value), e, {x}, out);
}

at::Tensor& isneginf_out(const at::Tensor& x, at::Tensor& out) {
  if (equals_into("aten::isneginf", x, -INFINITY, out)) return out;
  return Fallback<ATEN_OP2(isneginf, out)>::call(x, out);
}

at::Tensor& isposinf_out(const at::Tensor& x, at::Tensor& out) {
  if (equals_into("aten::isposinf", x, INFINITY, out)) return out;
  return Fallback<ATEN_OP2(isposinf, out)>::call(x, out);
}

#define NEURON_ROUNDING(fn, BODY)                                                       \
  at::Tensor& fn##_out(const at::Tensor& x, at::Tensor& out) {                          \
    if (unary_out("aten::" #fn, #fn, x, out, [](Expr& e, Reg x) { BODY; })) return out; \
    return Fallback<ATEN_OP2(fn, out)>::call(x, out);                                   \
  }

NEURON_ROUNDING(floor, floor_of(e, x))
NEURON_ROUNDING(ceil, ceil_of(e, x))
NEURON_ROUNDING(trunc, trunc_of(e, x))
// sign: (x > 0) - (x < 0), which is 0 for NaN, as on the CPU.
NEURON_ROUNDING(sign, e.alu(AluOp::subtract, e.alu_imm(AluOp::is_gt, x, 0.0f),
                            e.alu_imm(AluOp::is_lt, x, 0.0f)))
#undef NEURON_ROUNDING

// threshold(x, t, v) = x <= t ? v : x (ReLU's form; NaN stays NaN).
at::Tensor& threshold_out(const at::Tensor& x, const at::Scalar& threshold, const at::Scalar& value,
                          at::Tensor& out) {
  const auto t = static_cast<float>(threshold.toDouble());
  const auto v = static_cast<float>(value.toDouble());
  if (unary_out(
          "aten::threshold", fmt::format("threshold {} {}", t, v), x, out,
          [t, v](Expr& e, Reg r) { e.select(e.alu_imm(AluOp::is_le, r, t), e.constant(v), r); }))
    return out;
  return Fallback<ATEN_OP2(threshold, out)>::call(x, threshold, value, out);
}

// logical_not(x) = (x == 0), for any dtype FP32 tells zero from not (every engine dtype).
at::Tensor& logical_not_out(const at::Tensor& x, at::Tensor& out) {
  if (x.device().is_privateuseone() && out.device() == x.device() &&
      engine_dtype(x.scalar_type()) && engine_dtype(out.scalar_type())) {
    at::native::resize_output(out, x.sizes());
    Expr e;
    e.alu_imm(AluOp::is_equal, e.load(0), 0.0f);
    if (run_pointwise("aten::logical_not", "== 0", e, {x}, out)) return out;
  }
  return Fallback<ATEN_OP2(logical_not, out)>::call(x, out);
}

// NaN is the one value not equal to itself; integers and bools have none.
at::Tensor isnan(const at::Tensor& x) {
  if (x.device().is_privateuseone() && at::isIntegralType(x.scalar_type(), /*includeBool=*/true))
    return at::zeros(x.sizes(), x.options().dtype(at::kBool));
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type())) {
    Expr e;
    const Reg v = e.load(0);
    e.alu(AluOp::not_equal, v, v);
    at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kBool));
    if (run_pointwise("aten::isnan", "x!=x", e, {x}, out)) return out;
  }
  return Fallback<ATEN_OP(isnan)>::call(x);
}

// ~x: on integers bit by bit (on limbs), on bool the logical not.
at::Tensor& bitwise_not_out(const at::Tensor& x, at::Tensor& out) {
  if (prepare_out(out, x.sizes(), x.scalar_type()) && integer_not_into(x, out)) return out;
  return Fallback<ATEN_OP2(bitwise_not, out)>::call(x, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define NEURON_REGISTER_ACTIVATION(fn) \
  m.impl(#fn, fn);                     \
  m.impl(#fn "_", fn##_inplace);       \
  m.impl(#fn ".out", fn##_out);
  NEURON_REGISTER_ACTIVATION(exp)
  NEURON_REGISTER_ACTIVATION(log)
  NEURON_REGISTER_ACTIVATION(sqrt)
  NEURON_REGISTER_ACTIVATION(rsqrt)
  NEURON_REGISTER_ACTIVATION(reciprocal)
  NEURON_REGISTER_ACTIVATION(sigmoid)
  NEURON_REGISTER_ACTIVATION(tanh)
  NEURON_REGISTER_ACTIVATION(silu)
  NEURON_REGISTER_ACTIVATION(sin)
  NEURON_REGISTER_ACTIVATION(cos)
  NEURON_REGISTER_ACTIVATION(erf)
#undef NEURON_REGISTER_ACTIVATION
  m.impl("relu", relu);
  m.impl("neg", neg);
  m.impl("abs", abs);
  m.impl("relu_", relu_inplace);
  m.impl("neg_", neg_inplace);
  m.impl("abs_", abs_inplace);
  m.impl("gelu", gelu);
  m.impl("pow.Tensor_Scalar", pow_scalar);
  m.impl("erfinv.out", erfinv_out);
  m.impl("log1p.out", log1p_out);
  m.impl("expm1.out", expm1_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("floor.out", floor_out);
  m.impl("ceil.out", ceil_out);
  m.impl("trunc.out", trunc_out);
  m.impl("sign.out", sign_out);
  m.impl("threshold.out", threshold_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isnan", isnan);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_", hardtanh_inplace);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("softplus.out", softplus_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
}

}  // namespace neuronsim::pytorch

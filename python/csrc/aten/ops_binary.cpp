// Binary elementwise aten ops on the simulator: arithmetic (with alpha, in place and out=, and
// the optimizers' fused addcmul, addcdiv, lerp), comparisons, logical and bitwise ops, powers
// of a tensor, remainders, clamps by tensors and torch.equal. Type promotion is torch's
// (at::result_type); integers go to the exact limb kernels of ops_integer.cpp, and integer
// multiplication and division run on the CPU, counted.
#include "aten/pointwise.h"

namespace neuronsim::pytorch {

namespace {

using namespace pointwise;  // the shared helpers (pointwise.h)

// ---- arithmetic -----------------------------------------------------------------

// a <alu> alpha * b into a new tensor, or undefined when not covered.
at::Tensor binary(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b, double alpha,
                  Kind kind = Kind::arithmetic) {
  const c10::ScalarType dtype = kind == Kind::arithmetic ? at::result_type(a, b) : at::kBool;
  if (at::Tensor out = new_output(a, b, dtype); binary_into(op, alu, kind, a, b, alpha, out))
    return out;
  return {};
}

// In place: self <- self <alu> alpha * other, when the result type casts to self's.
bool binary_inplace(const char* op, AluOp alu, const at::Tensor& self, const at::Tensor& other,
                    double alpha, Kind kind = Kind::arithmetic) {
  const c10::ScalarType result =
      kind == Kind::arithmetic ? at::result_type(self, other) : at::kBool;
  if (!c10::canCast(result, self.scalar_type())) return false;
  if (other.dim() > self.dim() || at::infer_size(self.sizes(), other.sizes()) != self.sizes())
    return false;
  return binary_into(op, alu, kind, self, other, alpha, self);
}

#define NEURON_BINARY(fn, OP, ALU, KIND)                                                        \
  at::Tensor fn(const at::Tensor& a, const at::Tensor& b) {                                     \
    if (at::Tensor out = binary("aten::" #fn, ALU, a, b, 1.0, KIND); out.defined()) return out; \
    return Fallback<OP>::call(a, b);                                                            \
  }

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (at::Tensor out = binary("aten::add", AluOp::add, a, b, alpha.toDouble()); out.defined())
    return out;
  return Fallback<ATEN_OP2(add, Tensor)>::call(a, b, alpha);
}

at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (at::Tensor out = binary("aten::sub", AluOp::subtract, a, b, alpha.toDouble()); out.defined())
    return out;
  return Fallback<ATEN_OP2(sub, Tensor)>::call(a, b, alpha);
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (binary_inplace("aten::add_", AluOp::add, self, other, alpha.toDouble())) return self;
  return Fallback<ATEN_OP2(add_, Tensor)>::call(self, other, alpha);
}

at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (binary_inplace("aten::sub_", AluOp::subtract, self, other, alpha.toDouble())) return self;
  return Fallback<ATEN_OP2(sub_, Tensor)>::call(self, other, alpha);
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  if (binary_inplace("aten::mul_", AluOp::multiply, self, other, 1.0)) return self;
  return Fallback<ATEN_OP2(mul_, Tensor)>::call(self, other);
}

at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  if (is_engine_float(self.scalar_type()) &&
      binary_inplace("aten::div_", AluOp::divide, self, other, 1.0))
    return self;
  return Fallback<ATEN_OP2(div_, Tensor)>::call(self, other);
}

NEURON_BINARY(mul, ATEN_OP2(mul, Tensor), AluOp::multiply, Kind::arithmetic)
NEURON_BINARY(maximum, ATEN_OP(maximum), AluOp::max, Kind::arithmetic)
NEURON_BINARY(minimum, ATEN_OP(minimum), AluOp::min, Kind::arithmetic)
NEURON_BINARY(eq, ATEN_OP2(eq, Tensor), AluOp::is_equal, Kind::comparison)
NEURON_BINARY(ne, ATEN_OP2(ne, Tensor), AluOp::not_equal, Kind::comparison)
NEURON_BINARY(gt, ATEN_OP2(gt, Tensor), AluOp::is_gt, Kind::comparison)
NEURON_BINARY(ge, ATEN_OP2(ge, Tensor), AluOp::is_ge, Kind::comparison)
NEURON_BINARY(lt, ATEN_OP2(lt, Tensor), AluOp::is_lt, Kind::comparison)
NEURON_BINARY(le, ATEN_OP2(le, Tensor), AluOp::is_le, Kind::comparison)
NEURON_BINARY(logical_and, ATEN_OP(logical_and), AluOp::logical_and, Kind::logical)
NEURON_BINARY(logical_or, ATEN_OP(logical_or), AluOp::logical_or, Kind::logical)
NEURON_BINARY(logical_xor, ATEN_OP(logical_xor), AluOp::logical_xor, Kind::logical)

// The out= forms of the logical ops: straight into a bool out, else (a float out takes 1 and
// 0) the bool result copied in.
#define NEURON_LOGICAL_OUT(fn, ALU)                                                          \
  at::Tensor& fn##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {          \
    if (a.device().is_privateuseone() && out.device() == a.device()) {                       \
      at::native::resize_output(out, at::infer_size(a.sizes(), b.sizes()));                  \
      if (out.scalar_type() == at::kBool &&                                                  \
          binary_into("aten::" #fn, ALU, Kind::logical, a, b, 1.0, out))                     \
        return out;                                                                          \
      if (at::Tensor r = binary("aten::" #fn, ALU, a, b, 1.0, Kind::logical); r.defined()) { \
        out.copy_(r);                                                                        \
        return out;                                                                          \
      }                                                                                      \
    }                                                                                        \
    return Fallback<ATEN_OP2(fn, out)>::call(a, b, out);                                     \
  }

NEURON_LOGICAL_OUT(logical_and, AluOp::logical_and)
NEURON_LOGICAL_OUT(logical_or, AluOp::logical_or)
NEURON_LOGICAL_OUT(logical_xor, AluOp::logical_xor)

// True division: integers divide as floats (torch's rule), so the result is float:
// integer operands are converted on the device first, as torch converts them, then divided.
at::Tensor div(const at::Tensor& a, const at::Tensor& b) {
  const c10::ScalarType result = at::result_type(a, b);
  if (is_engine_float(result)) {
    at::Tensor out = new_output(a, b, result);
    if (binary_into("aten::div", AluOp::divide, Kind::arithmetic, a, b, 1.0, out)) return out;
  } else if (at::isIntegralType(result, /*includeBool=*/true)) {
    const c10::ScalarType as = c10::typeMetaToScalarType(at::get_default_dtype());
    auto to_float = [&](const at::Tensor& t) {
      return t.device().is_privateuseone() ? t.to(as) : t;  // a CPU scalar stays a number
    };
    if (is_engine_float(as) && (a.device().is_privateuseone() || b.device().is_privateuseone()))
      return pytorch::div(to_float(a), to_float(b));
  }
  return Fallback<ATEN_OP2(div, Tensor)>::call(a, b);
}

#define NEURON_COMPARE_SCALAR(fn, OP, ALU)                                                       \
  at::Tensor fn(const at::Tensor& a, const at::Scalar& b) {                                      \
    if (at::Tensor out = binary("aten::" #fn, ALU, a, wrapped_number(b), 1.0, Kind::comparison); \
        out.defined())                                                                           \
      return out;                                                                                \
    return Fallback<OP>::call(a, b);                                                             \
  }

NEURON_COMPARE_SCALAR(eq_scalar, ATEN_OP2(eq, Scalar), AluOp::is_equal)
NEURON_COMPARE_SCALAR(ne_scalar, ATEN_OP2(ne, Scalar), AluOp::not_equal)
NEURON_COMPARE_SCALAR(gt_scalar, ATEN_OP2(gt, Scalar), AluOp::is_gt)
NEURON_COMPARE_SCALAR(ge_scalar, ATEN_OP2(ge, Scalar), AluOp::is_ge)
NEURON_COMPARE_SCALAR(lt_scalar, ATEN_OP2(lt, Scalar), AluOp::is_lt)
NEURON_COMPARE_SCALAR(le_scalar, ATEN_OP2(le, Scalar), AluOp::is_le)

// other - alpha * self
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (at::Tensor out = binary("aten::rsub", AluOp::subtract, other, self, alpha.toDouble());
      out.defined())
    return out;
  return Fallback<ATEN_OP2(rsub, Tensor)>::call(self, other, alpha);
}

at::Tensor rsub_scalar(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  if (at::Tensor out =
          binary("aten::rsub", AluOp::subtract, wrapped_number(other), self, alpha.toDouble());
      out.defined())
    return out;
  return Fallback<ATEN_OP2(rsub, Scalar)>::call(self, other, alpha);
}

at::Tensor& mul_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (prepare_out(out, at::infer_size(a.sizes(), b.sizes()), at::result_type(a, b)) &&
      binary_into("aten::mul", AluOp::multiply, Kind::arithmetic, a, b, 1.0, out))
    return out;
  return Fallback<ATEN_OP2(mul, out)>::call(a, b, out);
}

at::Tensor& add_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (prepare_out(out, at::infer_size(a.sizes(), b.sizes()), at::result_type(a, b)) &&
      binary_into("aten::add", AluOp::add, Kind::arithmetic, a, b, alpha.toDouble(), out))
    return out;
  return Fallback<ATEN_OP2(add, out)>::call(a, b, alpha, out);
}

at::Tensor& sub_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (prepare_out(out, at::infer_size(a.sizes(), b.sizes()), at::result_type(a, b)) &&
      binary_into("aten::sub", AluOp::subtract, Kind::arithmetic, a, b, alpha.toDouble(), out))
    return out;
  return Fallback<ATEN_OP2(sub, out)>::call(a, b, alpha, out);
}

at::Tensor& div_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (float_binary_into("aten::div", AluOp::divide, a, b, out)) return out;
  return Fallback<ATEN_OP2(div, out)>::call(a, b, out);
}

// self + value * (t1 <op> t2): addcmul (op = multiply) and addcdiv (op = divide), as
// Adam's moment and step updates use them; all float, on one device.
bool addc_into(const char* op, AluOp alu, const at::Tensor& self, const at::Tensor& t1,
               const at::Tensor& t2, double value, const at::Tensor& out) {
  for (const at::Tensor* t : {&self, &t1, &t2})
    if (!t->device().is_privateuseone() || !is_engine_float(t->scalar_type())) return false;
  const auto sizes = at::infer_size(self.sizes(), at::infer_size(t1.sizes(), t2.sizes()));
  if (!prepare_out(out, sizes, at::result_type(self, t1))) return false;
  Expr e;
  const Reg s = e.load(0);
  Reg t = e.alu(alu, e.load(1), e.load(2));
  std::vector<at::Tensor> inputs{self, t1, t2};
  if (value != 1.0) {
    inputs.push_back(device_scalar(static_cast<float>(value), self.device()));
    t = e.alu_scalar(AluOp::multiply, t, 3);
  }
  e.alu(AluOp::add, s, t);
  return run_pointwise(op, fmt::format("{} value={}", op, value == 1.0 ? "1" : "scalar"), e, inputs,
                       out);
}

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                        const at::Scalar& value, at::Tensor& out) {
  if (addc_into("aten::addcmul", AluOp::multiply, self, t1, t2, value.toDouble(), out)) return out;
  return Fallback<ATEN_OP2(addcmul, out)>::call(self, t1, t2, value, out);
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                        const at::Scalar& value, at::Tensor& out) {
  if (addc_into("aten::addcdiv", AluOp::divide, self, t1, t2, value.toDouble(), out)) return out;
  return Fallback<ATEN_OP2(addcdiv, out)>::call(self, t1, t2, value, out);
}

// self + weight * (end - self)
at::Tensor& lerp_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight,
                     at::Tensor& out) {
  if (self.device().is_privateuseone() && end.device().is_privateuseone() &&
      is_engine_float(self.scalar_type()) && self.scalar_type() == end.scalar_type() &&
      prepare_out(out, at::infer_size(self.sizes(), end.sizes()), self.scalar_type())) {
    const float w = static_cast<float>(weight.toDouble());
    Expr e;
    const Reg s = e.load(0);
    e.alu(AluOp::add, s, e.alu_scalar(AluOp::multiply, e.alu(AluOp::subtract, e.load(1), s), 2));
    if (run_pointwise("aten::lerp", "lerp scalar", e, {self, end, device_scalar(w, self.device())},
                      out))
      return out;
  }
  return Fallback<ATEN_OP2(lerp, Scalar_out)>::call(self, end, weight, out);
}

// base ** exponent for float results on VectorE's pow (C's powf: a negative base to a
// non-integer power is NaN, anything to the power 0 is 1), tensor or Python number on
// either side (pow.Scalar: a number to a tensor's powers, as rotary embeddings' base **
// (arange / dim)). Integer powers fall back.
at::Tensor& pow_tensor_out(const at::Tensor& base, const at::Tensor& exponent, at::Tensor& out) {
  if (float_binary_into("aten::pow", AluOp::pow, base, exponent, out)) return out;
  return Fallback<ATEN_OP2(pow, Tensor_Tensor_out)>::call(base, exponent, out);
}

at::Tensor& pow_scalar_base_out(const at::Scalar& base, const at::Tensor& exponent,
                                at::Tensor& out) {
  const at::Tensor b = wrapped_number(base);
  const c10::ScalarType result = at::result_type(base, exponent);
  if (is_engine_float(result) && prepare_out(out, exponent.sizes(), result) &&
      binary_into("aten::pow", AluOp::pow, Kind::arithmetic, b, exponent, 1.0, out))
    return out;
  return Fallback<ATEN_OP2(pow, Scalar_out)>::call(base, exponent, out);
}

// a % b with the divisor's sign (torch.remainder, Python's %) for float results: VectorE's mod
// is C's fmod, exact, then the divisor added where the signs differ (docs/isa.md), in FP32 and
// rounded once to the dtype, as torch's CPU kernel computes it. Integers: integer_remainder_into.
at::Tensor& remainder_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (float_binary_into("aten::remainder", AluOp::mod, a, b, out)) return out;
  if (integer_remainder_into(a, b, out)) return out;
  return Fallback<ATEN_OP2(remainder, Tensor_out)>::call(a, b, out);
}

// torch.equal: the same sizes and every element equal after type promotion (NaN equals
// nothing), by the device's ne and any; the host reads the one answer. Both on one device, as
// CUDA's requires.
bool equal(const at::Tensor& a, const at::Tensor& b) {
  op_device("aten::equal", {&a, &b});
  if (!a.sizes().equals(b.sizes())) return false;
  if (a.numel() == 0) return true;
  return !at::ne(a, b).any().item<bool>();
}

// clamp with tensor bounds: max with the lower, then min with the upper, broadcast.
at::Tensor& clamp_tensor_out(const at::Tensor& x, const std::optional<at::Tensor>& lo,
                             const std::optional<at::Tensor>& hi, at::Tensor& out) {
  const bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
  if (x.device().is_privateuseone() && out.device() == x.device() && (has_lo || has_hi)) {
    at::Tensor r = x;
    if (has_lo) r = at::maximum(r, *lo);
    if (has_hi) r = at::minimum(r, *hi);
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
    return out;
  }
  return Fallback<ATEN_OP2(clamp, Tensor_out)>::call(x, lo, hi, out);
}

at::Tensor& clamp_min_tensor_out(const at::Tensor& x, const at::Tensor& lo, at::Tensor& out) {
  return clamp_tensor_out(x, lo, std::nullopt, out);
}

at::Tensor& clamp_max_tensor_out(const at::Tensor& x, const at::Tensor& hi, at::Tensor& out) {
  return clamp_tensor_out(x, std::nullopt, hi, out);
}

// a & b, a | b, a ^ b of integers or bools (on limbs: bool is a one-byte integer).
bool bitwise_into(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b,
                  at::Tensor& out) {
  const c10::ScalarType type = at::result_type(a, b);
  return is_limb_integer(type) && prepare_out(out, at::infer_size(a.sizes(), b.sizes()), type) &&
         integer_binary_into(op, alu, a, b, 1.0, out);
}

at::Tensor& bitwise_and_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (bitwise_into("aten::bitwise_and", AluOp::bitwise_and, a, b, out)) return out;
  return Fallback<ATEN_OP2(bitwise_and, Tensor_out)>::call(a, b, out);
}

at::Tensor& bitwise_or_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (bitwise_into("aten::bitwise_or", AluOp::bitwise_or, a, b, out)) return out;
  return Fallback<ATEN_OP2(bitwise_or, Tensor_out)>::call(a, b, out);
}

at::Tensor& bitwise_xor_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (bitwise_into("aten::bitwise_xor", AluOp::bitwise_xor, a, b, out)) return out;
  return Fallback<ATEN_OP2(bitwise_xor, Tensor_out)>::call(a, b, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("rsub.Tensor", rsub);
  m.impl("rsub.Scalar", rsub_scalar);
  m.impl("maximum", maximum);
  m.impl("minimum", minimum);
  m.impl("eq.Tensor", eq);
  m.impl("ne.Tensor", ne);
  m.impl("gt.Tensor", gt);
  m.impl("ge.Tensor", ge);
  m.impl("lt.Tensor", lt);
  m.impl("le.Tensor", le);
  m.impl("eq.Scalar", eq_scalar);
  m.impl("ne.Scalar", ne_scalar);
  m.impl("gt.Scalar", gt_scalar);
  m.impl("ge.Scalar", ge_scalar);
  m.impl("lt.Scalar", lt_scalar);
  m.impl("le.Scalar", le_scalar);
  m.impl("logical_and", logical_and);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("logical_or", logical_or);
  m.impl("logical_xor", logical_xor);
  m.impl("pow.Tensor_Tensor_out", pow_tensor_out);
  m.impl("pow.Scalar_out", pow_scalar_base_out);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("equal", equal);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  m.impl("mul.out", mul_out);
  m.impl("add.out", add_out);
  m.impl("sub.out", sub_out);
  m.impl("div.out", div_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_out);
}

}  // namespace neuronsim::pytorch

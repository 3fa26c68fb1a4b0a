// Elementwise aten ops on the simulator: arithmetic, comparisons, logical ops, where,
// activations and their backward formulas, casts and copies on the device, fill.
// Each builds one kernels::PointwiseExpr (FP32 inside, rounded once into the output
// dtype, as torch's CPU kernels compute reduced-precision floats) and runs it with
// broadcasting. Type promotion is torch's (at::result_type). Integer arithmetic and
// comparisons of types FP32 does not hold (int32, int64) go to the exact limb kernels
// of ops_integer.cpp; integer multiplication and division run on the CPU, counted.
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/complex.h"
#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {

namespace {

using isa::ActFunc;
using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

// An operand of a binary op: a neuron tensor, or a CPU scalar (Python numbers arrive as
// 0-dim CPU tensors), which the kernel takes as an immediate.
struct Operand {
  std::optional<at::Tensor> tensor;
  float value = 0;
};

std::optional<Operand> operand(const at::Tensor& t) {
  if (t.device().is_privateuseone()) return Operand{t, 0};
  if (t.device().is_cpu() && t.dim() == 0 && !at::isComplexType(t.scalar_type()))
    return Operand{std::nullopt, static_cast<float>(t.item<double>())};
  return std::nullopt;
}

// Which results the engines compute exactly as torch does.
enum class Kind { arithmetic, comparison, logical };

bool computable(Kind kind, c10::ScalarType compute) {
  switch (kind) {
    case Kind::arithmetic:
      return is_engine_float(compute);
    case Kind::comparison:
      return exact_in_fp32(compute);
    case Kind::logical:
      return engine_dtype(compute).has_value();
  }
  return false;
}

// out <- a <alu> (alpha * b). False when not covered.
bool binary_into(const char* op, AluOp alu, Kind kind, const at::Tensor& a_in,
                 const at::Tensor& b_in, double alpha, const at::Tensor& out) {
  const c10::ScalarType compute = at::result_type(a_in, b_in);
  if (at::isComplexType(compute)) return complex_binary_into(op, alu, a_in, b_in, alpha, out);
  // An int64 tensor against a float (positions * 0.5, a count / a float total): converted
  // on the device to the float type first, as torch computes it.
  auto widen = [&](const at::Tensor& t) {
    return is_engine_float(compute) && t.device().is_privateuseone() &&
                   at::isIntegralType(t.scalar_type(), true) && !engine_dtype(t.scalar_type())
               ? t.to(compute)
               : t;
  };
  const at::Tensor a = widen(a_in), b = widen(b_in);
  // bool * bool and bool + bool are torch's logical and and or (masks multiplied).
  if (compute == at::kBool && alpha == 1.0 && (alu == AluOp::multiply || alu == AluOp::add)) {
    alu = alu == AluOp::multiply ? AluOp::logical_and : AluOp::logical_or;
    kind = Kind::logical;
  }
  // Integers, which FP32 ALUs would round and not wrap (nor wrap a Python number into
  // the type, as torch does for comparisons too): computed exactly on limbs.
  if (is_limb_integer(compute) && (kind != Kind::logical || !exact_in_fp32(compute)))
    return integer_binary_into(op, alu, a, b, alpha, out);
  const auto x = operand(a), y = operand(b);
  if (!x || !y || (!x->tensor && !y->tensor)) return false;
  if (!computable(kind, compute)) return false;
  const float scale = static_cast<float>(alpha);
  Expr e;
  std::vector<at::Tensor> inputs;
  std::string name = fmt::format("{}", isa::alu_op_name(alu));
  auto load = [&](const Operand& o) {
    inputs.push_back(*o.tensor);
    return e.load(static_cast<int32_t>(inputs.size() - 1));
  };
  if (x->tensor && y->tensor) {
    const Reg ra = load(*x);
    Reg rb = load(*y);
    if (scale != 1.0f) rb = e.alu_imm(AluOp::multiply, rb, scale);
    e.alu(alu, ra, rb);
    name += fmt::format(" alpha={}", scale);
  } else {
    const at::Tensor& t = x->tensor ? *x->tensor : *y->tensor;
    Reg r = load(x->tensor ? *x : *y);
    if (!x->tensor && scale != 1.0f) r = e.alu_imm(AluOp::multiply, r, scale);
    inputs.push_back(device_scalar(x->tensor ? y->value * scale : x->value, t.device()));
    e.alu_scalar(alu, r, static_cast<int32_t>(inputs.size() - 1), /*reverse=*/!x->tensor);
    name += x->tensor ? " b=scalar" : fmt::format(" a=scalar alpha={}", scale);
  }
  return run_pointwise(op, name, e, inputs, out);
}

// The result takes the layout of the first operand of its sizes that is dense, as
// TensorIterator lays it out on the CPU: a transposed view times a scalar stays
// transposed (its kernel moves contiguous runs, not a transpose element by element).
at::Tensor new_output(const at::Tensor& a, const at::Tensor& b, c10::ScalarType dtype) {
  const at::Tensor& like = a.device().is_privateuseone() ? a : b;
  const std::vector<int64_t> sizes = at::infer_size(a.sizes(), b.sizes());
  for (const at::Tensor* t : {&a, &b})
    if (t->sizes() == c10::IntArrayRef(sizes) && t->is_non_overlapping_and_dense())
      return at::empty_strided(sizes, t->strides(), like.options().dtype(dtype));
  return at::empty(sizes, like.options().dtype(dtype));
}

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

// ---- out= variants and the optimizers' fused pointwise ops ------------------------

// Resizes `out` to the broadcast size (as torch's out= ops do) when the result type
// casts to out's dtype; false when the op should fall back.
bool prepare_out(const at::Tensor& out, at::IntArrayRef sizes, c10::ScalarType result) {
  if (!out.device().is_privateuseone() || !c10::canCast(result, out.scalar_type())) return false;
  if (out.sizes() != sizes) at::native::resize_output(out, sizes);
  return true;
}

// out <- a <alu> b, broadcast, for ops whose kernel covers float results only (an integer
// result is not covered: false).
bool float_binary_into(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b,
                       const at::Tensor& out) {
  const c10::ScalarType result = at::result_type(a, b);
  return is_engine_float(result) &&
         prepare_out(out, at::infer_size(a.sizes(), b.sizes()), result) &&
         binary_into(op, alu, Kind::arithmetic, a, b, 1.0, out);
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

// ---- unary ---------------------------------------------------------------------

// out <- expr(x) for a float x; the expression is built by `make` on register load(0).
template <class F>
at::Tensor unary(const char* op, const std::string& name, const at::Tensor& x, F make) {
  if (!is_engine_float(x.scalar_type()) || !x.device().is_privateuseone()) return {};
  Expr e;
  make(e, e.load(0));
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Preserve);
  if (!out.is_non_overlapping_and_dense()) out = at::empty(x.sizes(), x.options());
  if (!run_pointwise(op, name, e, {x}, out)) return {};
  return out;
}

template <class F>
bool unary_inplace(const char* op, const std::string& name, const at::Tensor& x, F make) {
  if (!is_engine_float(x.scalar_type()) || !x.device().is_privateuseone()) return false;
  Expr e;
  make(e, e.load(0));
  return run_pointwise(op, name, e, {x}, x);
}

// out <- expr(x) into a given out (an op's .out form), resized as torch resizes it.
template <class F>
bool unary_out(const char* op, const std::string& name, const at::Tensor& x, at::Tensor& out,
               F make) {
  if (!is_engine_float(x.scalar_type()) || !is_engine_float(out.scalar_type()) ||
      !x.device().is_privateuseone() || out.device() != x.device())
    return false;
  at::native::resize_output(out, x.sizes());
  Expr e;
  make(e, e.load(0));
  return run_pointwise(op, name, e, {x}, out);
}

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

// torch.linspace into a float tensor: start + i * step in the first half and
// end - (steps - 1 - i) * step in the second, as torch computes it (so both ends are exact).
at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.device().is_privateuseone() && is_engine_float(out.scalar_type()) &&
      steps < (int64_t{1} << 24) && !start.isComplex() && !end.isComplex()) {
    if (out.numel() != steps) at::native::resize_output(out, {steps});
    const double a = start.toDouble(), b = end.toDouble();
    const double step = steps > 1 ? (b - a) / static_cast<double>(steps - 1) : 0.0;
    const at::Tensor target = out.is_contiguous() ? out : at::empty({steps}, out.options());
    Expr e;
    const Reg i = e.position({1});
    const Reg low = e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, i, static_cast<float>(step)),
                              static_cast<float>(a));
    const Reg from_end = e.alu_imm(AluOp::subtract, i, static_cast<float>(steps - 1), true);
    const Reg high =
        e.alu_imm(AluOp::subtract, e.alu_imm(AluOp::multiply, from_end, static_cast<float>(step)),
                  static_cast<float>(b), true);
    e.select(e.alu_imm(AluOp::is_lt, i, static_cast<float>(steps / 2)), low, high);
    if (steps == 0 || run_pointwise("aten::linspace", fmt::format("linspace {} {} {}", a, b, steps),
                                    e, {}, target)) {
      if (!target.is_same(out)) out.copy_(target);
      return out;
    }
  }
  return Fallback<ATEN_OP2(linspace, out)>::call(start, end, steps, out);
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

// An identity matrix: 1 where the row equals the column.
at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0 && m >= 0, "n and m must be greater or equal to 0, got ", n, " and ", m);
  if (out.device().is_privateuseone() && n * m < (int64_t{1} << 24)) {
    at::native::resize_output(out, {n, m});
    const at::Tensor target = engine_dtype(out.scalar_type()) && out.is_contiguous()
                                  ? out
                                  : at::empty({n, m}, out.options().dtype(at::kFloat));
    Expr e;
    e.alu(AluOp::is_equal, e.position({1, 0}), e.position({0, 1}));
    if (n * m == 0 || run_pointwise("aten::eye", "eye", e, {}, target)) {
      if (!target.is_same(out)) out.copy_(target);
      return out;
    }
  }
  return Fallback<ATEN_OP2(eye, m_out)>::call(n, m, out);
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) {
  return eye_m_out(n, n, out);
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

// grad where the activation passes it, else 0, chosen rather than multiplied so that a NaN or
// infinite grad where it stops gives 0 as the CPU's does (a NaN x, never "stopped", keeps its
// grad, as there). `stops(e, x)` is 1 where the gradient stops.
template <class F>
bool grad_unless_into(const char* op, const std::string& name, const at::Tensor& grad,
                      const at::Tensor& x, F stops, const at::Tensor& out) {
  if (!is_engine_float(grad.scalar_type()) || grad.scalar_type() != x.scalar_type() ||
      !grad.device().is_privateuseone() || x.device() != grad.device())
    return false;
  Expr e;
  e.select(stops(e, e.load(1)), e.constant(0.0f), e.load(0));
  return run_pointwise(op, name, e, {grad, x}, out);
}

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

// ---- backward formulas ------------------------------------------------------------

// grad * f(x): the derivative formulas of the activations, from torch's definitions.
template <class F>
at::Tensor grad_times(const char* op, const char* name, const at::Tensor& grad, const at::Tensor& x,
                      F derivative) {
  if (!is_engine_float(grad.scalar_type()) || grad.scalar_type() != x.scalar_type() ||
      !grad.device().is_privateuseone() || grad.sizes() != x.sizes())
    return {};
  Expr e;
  const Reg g = e.load(0), v = e.load(1);
  e.alu(AluOp::multiply, g, derivative(e, v));
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (!run_pointwise(op, name, e, {grad, x}, out)) return {};
  return out;
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

// ---- where, fill, copies ---------------------------------------------------------

bool where_into(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                const at::Tensor& out) {
  if (is_limb_integer(out.scalar_type())) return integer_where_into(cond, a, b, out);
  // float64, which the engines do not hold: a choice between bit patterns, moved as int64.
  if (out.scalar_type() == at::kDouble && a.scalar_type() == at::kDouble &&
      b.scalar_type() == at::kDouble)
    return integer_where_into(cond, a.view(at::kLong), b.view(at::kLong), out.view(at::kLong));
  const auto x = operand(a), y = operand(b);
  if (!x || !y || !cond.device().is_privateuseone() || cond.scalar_type() != at::kBool ||
      !exact_in_fp32(at::result_type(a, b)))
    return false;
  Expr e;
  std::vector<at::Tensor> inputs{cond};
  const Reg p = e.load(0);
  std::string name = "where";
  auto reg = [&](const Operand& o) {
    if (!o.tensor) {
      name += fmt::format(" {}", o.value);
      return e.constant(o.value);
    }
    inputs.push_back(*o.tensor);
    name += " t";
    return e.load(static_cast<int32_t>(inputs.size() - 1));
  };
  const Reg rt = reg(*x), rf = reg(*y);
  e.select(p, rt, rf);
  return run_pointwise("aten::where", name, e, inputs, out);
}

std::vector<int64_t> where_sizes(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size(cond.sizes(), at::infer_size(a.sizes(), b.sizes()));
}

at::Tensor where(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b) {
  if (cond.device().is_privateuseone()) {
    at::Tensor out =
        at::empty(where_sizes(cond, a, b), cond.options().dtype(at::result_type(a, b)));
    if (where_into(cond, a, b, out)) return out;
  }
  return Fallback<ATEN_OP2(where, self)>::call(cond, a, b);
}

at::Tensor& where_out(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                      at::Tensor& out) {
  if (prepare_out(out, where_sizes(cond, a, b), at::result_type(a, b)) &&
      where_into(cond, a, b, out))
    return out;
  return Fallback<ATEN_OP2(where, self_out)>::call(cond, a, b, out);
}

// self <- value on the device: integers on their limbs (any value, wrapped into the type as
// torch wraps it), engine floats by the fill kernel, float64 and the complex types as bit
// patterns (wide_fill). False when not covered (a complex value into a real tensor is the
// CPU's error to give).
bool fill_into(const at::Tensor& self, const at::Scalar& value);

// float64 and the complex types, which the engines do not hold: a double's bit pattern written
// as an int64 on limbs, a complex value as a fill of each part (the real view of self), so that
// every element is the CPU's value bit for bit (a complex<float> or complex<Half> part is the
// double rounded to float first, as c10's conversions round it).
bool wide_fill(const at::Tensor& self, const at::Scalar& value) {
  if (self.scalar_type() == at::kDouble)
    return integer_fill(self.view(at::kLong), std::bit_cast<int64_t>(value.toDouble()));
  if (!at::isComplexType(self.scalar_type())) return false;
  const c10::complex<double> v = value.toComplexDouble();
  const at::Tensor parts = at::view_as_real(self);
  return fill_into(parts.select(-1, 0), v.real()) && fill_into(parts.select(-1, 1), v.imag());
}

bool fill_into(const at::Tensor& self, const at::Scalar& value) {
  if (!self.device().is_privateuseone()) return false;
  const c10::ScalarType type = self.scalar_type();
  if (is_limb_integer(type)) return self.numel() == 0 || integer_fill(self, value);
  if (value.isComplex() && !at::isComplexType(type)) return false;
  if (self.numel() == 0) return true;
  if (!is_engine_float(type)) return wide_fill(self, value);
  const kernels::View out = view_of(self);
  const std::string chip = target();
  const float f = static_cast<float>(value.toDouble());
  return run_kernel("aten::fill_", self.device().index(),
                    fmt::format("aten::fill_ {} {}", f, layout_key(self)),
                    [&] { return kernels::fill(chip, out, f); }, {{"out", self}});
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (fill_into(self, value)) return self;
  return Fallback<ATEN_OP2(fill_, Scalar)>::call(self, value);
}

// fill_ with a 0-dim tensor's value: a host number filled as fill_.Scalar, a device one
// broadcast by a copy on the device (no host read).
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  if (value.dim() == 0 && self.device().is_privateuseone()) {
    if (value.is_cpu() && fill_into(self, value.item())) return self;
    if (value.device() == self.device() &&
        (self.numel() == 0 || copy_on_device(value.expand(self.sizes()), self)))
      return self;
  }
  return Fallback<ATEN_OP2(fill_, Tensor)>::call(self, value);
}

at::Tensor& zero(at::Tensor& self) {
  return fill_scalar(self, at::Scalar(0));
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

// ---- rounding, sign, threshold, logical not --------------------------------------------

// floor(x) = x - (x mod 1), Python's mod (in [0, 1)); |x| >= 2^23 is whole already (and
// keeps +-inf, which mod would make NaN).
Reg floor_of(Expr& e, Reg x) {
  const Reg whole = e.alu_imm(AluOp::is_ge, e.alu_imm(AluOp::abs_max, x, 0.0f), 8388608.0f);
  return e.select(whole, x, e.alu(AluOp::subtract, x, e.alu_imm(AluOp::mod, x, 1.0f)));
}
// ceil(x) = x + (-x mod 1).
Reg ceil_of(Expr& e, Reg x) {
  const Reg whole = e.alu_imm(AluOp::is_ge, e.alu_imm(AluOp::abs_max, x, 0.0f), 8388608.0f);
  const Reg up = e.alu_imm(AluOp::mod, e.alu_imm(AluOp::multiply, x, -1.0f), 1.0f);
  return e.select(whole, x, e.alu(AluOp::add, x, up));
}

Reg trunc_of(Expr& e, Reg x) {
  return e.select(e.alu_imm(AluOp::is_ge, x, 0.0f), floor_of(e, x), ceil_of(e, x));
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

// value as the CPU's masked_fill converts it to self's dtype: a float into an integer tensor
// truncates (within the type's range; beyond it the CPU raises), rather than promoting as where
// would.
at::Scalar fill_value_for(const at::Tensor& self, const at::Scalar& value) {
  const c10::ScalarType type = self.scalar_type();
  if (!value.isFloatingPoint() || !(type == at::kInt || type == at::kLong)) return value;
  const double v = std::trunc(value.toDouble()), limit = type == at::kInt ? 0x1p31 : 0x1p63;
  return std::isfinite(v) && v >= -limit && v < limit ? at::Scalar(static_cast<int64_t>(v)) : value;
}

// self <- mask ? value : self
at::Tensor& masked_fill_scalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  const at::Tensor v = wrapped_number(fill_value_for(self, value));
  if (mask.dim() <= self.dim() && at::infer_size(self.sizes(), mask.sizes()) == self.sizes() &&
      c10::canCast(at::result_type(self, v), self.scalar_type()) && where_into(mask, v, self, self))
    return self;
  // A mask of a mask: self and not mask, or self or mask.
  if (self.scalar_type() == at::kBool && mask.scalar_type() == at::kBool &&
      self.device().is_privateuseone() && mask.device() == self.device() &&
      at::infer_size(self.sizes(), mask.sizes()) == self.sizes()) {
    self.copy_(value.toBool() ? at::logical_or(self, mask)
                              : at::logical_and(self, at::logical_not(mask)));
    return self;
  }
  return Fallback<ATEN_OP2(masked_fill_, Scalar)>::call(self, mask, value);
}

at::Tensor& masked_fill_tensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  if (value.dim() == 0 && value.device().is_cpu())
    return masked_fill_scalar(self, mask, value.item());
  if (value.dim() == 0 && mask.dim() <= self.dim() &&
      at::infer_size(self.sizes(), mask.sizes()) == self.sizes() &&
      c10::canCast(value.scalar_type(), self.scalar_type()) &&
      where_into(mask, value.to(self.scalar_type()), self, self))
    return self;
  return Fallback<ATEN_OP2(masked_fill_, Tensor)>::call(self, mask, value);
}

// ~x: on integers bit by bit (on limbs), on bool the logical not.
at::Tensor& bitwise_not_out(const at::Tensor& x, at::Tensor& out) {
  if (prepare_out(out, x.sizes(), x.scalar_type()) && integer_not_into(x, out)) return out;
  return Fallback<ATEN_OP2(bitwise_not, out)>::call(x, out);
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

// floor: torch's floor division of floats. With m = a mod b (Python's, b's sign),
// d = (a - m) / b is the quotient, whole up to rounding: floor(d), one up where d is past
// its half; a zero keeps the sign of a / b; b = 0 gives a / b (+-inf or NaN).
// trunc: a / b rounded toward zero.
bool float_divide_rounded_into(const at::Tensor& a_in, const at::Tensor& b_in, bool floor,
                               const at::Tensor& out) {
  const c10::ScalarType type = at::result_type(a_in, b_in);
  if (!is_engine_float(type) || out.scalar_type() != type || !out.device().is_privateuseone() ||
      !prepare_out(out, at::infer_size(a_in.sizes(), b_in.sizes()), type))
    return false;
  if (!floor && (type == at::kHalf || type == at::kBFloat16)) {
    // torch rounds the quotient to the 16-bit type before truncating it.
    const at::Tensor q = at::div(a_in, b_in);
    Expr e;
    trunc_of(e, e.load(0));
    return q.scalar_type() == type && run_pointwise("aten::div", "trunc", e, {q}, out);
  }
  std::vector<at::Tensor> inputs;
  for (const at::Tensor* t : {&a_in, &b_in}) {
    const auto o = operand(*t);
    if (!o) return false;
    if (!o->tensor)
      inputs.push_back(device_scalar(o->value, out.device()));
    else  // an integer tensor against a float: converted first, as torch computes it
      inputs.push_back(t->scalar_type() == type ? *o->tensor : o->tensor->to(type));
  }
  Expr e;
  const Reg a = e.load(0), b = e.load(1), q = e.alu(AluOp::divide, a, b);
  if (!floor) {
    trunc_of(e, q);
    return run_pointwise("aten::div", "div trunc", e, inputs, out);
  }
  const Reg d = e.alu(AluOp::divide, e.alu(AluOp::subtract, a, e.alu(AluOp::mod, a, b)), b);
  const Reg f = floor_of(e, d);
  const Reg rounded =
      e.alu(AluOp::add, f, e.alu_imm(AluOp::is_gt, e.alu(AluOp::subtract, d, f), 0.5f));
  const Reg signed_zero = e.alu_imm(AluOp::multiply, q, 0.0f);
  const Reg r = e.select(e.alu_imm(AluOp::is_equal, d, 0.0f), signed_zero, rounded);
  e.select(e.alu_imm(AluOp::is_equal, b, 0.0f), q, r);
  return run_pointwise("aten::div", "div floor", e, inputs, out);
}

// dst <- src on the device (a cast, or a copy between layouts): one pointwise copy.
bool copy_on_device(const at::Tensor& src, const at::Tensor& dst) {
  if (src.device() != dst.device()) return false;
  const c10::ScalarType from = src.scalar_type(), to = dst.scalar_type();
  // Same-type copies of what the engines do not hold exactly (int64, int32, float64,
  // complex) move their bytes by DMA; integer casts, and floats cast to integers
  // (truncated), run on limbs; the rest is one pointwise copy.
  if (from == to && !exact_in_fp32(from) && copy_by_runs(src, dst)) return true;
  for (const c10::ScalarType t : {from, to})
    if (t == at::kDouble || t == at::kComplexDouble) return float64_copy(src, dst);
  if (at::isComplexType(to)) return complex_copy(src, dst);
  const bool wide = (is_limb_integer(from) && !exact_in_fp32(from)) ||
                    (is_limb_integer(to) && !exact_in_fp32(to));
  const bool to_integer = is_limb_integer(to) && to != at::kBool &&  // wraps or truncates
                          (is_limb_integer(from) || is_engine_float(from));
  if (wide || to_integer) return integer_copy(src, dst);
  if (engine_dtype(from) && engine_dtype(to))
    return run_pointwise("aten::copy_", "copy", Expr::copy(), {src}, dst);
  return false;
}

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
  m.impl("pow.Tensor_Tensor_out", pow_tensor_out);
  m.impl("pow.Scalar_out", pow_scalar_base_out);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("equal", equal);
  m.impl("erfinv.out", erfinv_out);
  m.impl("linspace.out", linspace_out);
  m.impl("log1p.out", log1p_out);
  m.impl("expm1.out", expm1_out);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("eye.out", eye_out);
  m.impl("silu_backward", silu_backward);
  m.impl("sigmoid_backward", sigmoid_backward);
  m.impl("tanh_backward", tanh_backward);
  m.impl("threshold_backward", threshold_backward);
  m.impl("gelu_backward", gelu_backward);
  m.impl("where.self", where);
  m.impl("where.self_out", where_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("floor.out", floor_out);
  m.impl("ceil.out", ceil_out);
  m.impl("trunc.out", trunc_out);
  m.impl("sign.out", sign_out);
  m.impl("threshold.out", threshold_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isnan", isnan);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("bitwise_not.out", bitwise_not_out);
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
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_", hardtanh_inplace);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("softplus.out", softplus_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("zero_", zero);
}

}  // namespace neuronsim::pytorch

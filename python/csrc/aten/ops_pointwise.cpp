// Elementwise aten ops on the simulator that are neither binary nor unary arithmetic: where,
// fill and masked fill, and the range factories linspace and eye; and what the elementwise files
// share (pointwise.h), defined here: operands, the binary kernel with torch's type promotion,
// out= preparation and the rounding expressions, with casts and copies on the device.
#include "aten/pointwise.h"

namespace neuronsim::pytorch {

namespace pointwise {

std::optional<Operand> operand(const at::Tensor& t) {
  if (t.device().is_privateuseone()) return Operand{t, 0};
  if (t.device().is_cpu() && t.dim() == 0 && !at::isComplexType(t.scalar_type()))
    return Operand{std::nullopt, static_cast<float>(t.item<double>())};
  return std::nullopt;
}

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

}  // namespace pointwise

using namespace pointwise;  // the shared helpers (pointwise.h)

namespace {

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
  m.impl("linspace.out", linspace_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("eye.out", eye_out);
  m.impl("where.self", where);
  m.impl("where.self_out", where_out);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero);
}

}  // namespace neuronsim::pytorch

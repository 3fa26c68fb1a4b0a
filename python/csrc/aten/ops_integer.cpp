// Integers on the device, exactly (integers.h), and arange.
//
// A value of an integer type is its limbs, least significant first: int64 has four of
// 16 bits, int32 two, int16 one, and the one-byte types one of 8 bits. Limb k of a
// tensor is an alias of its bytes typed uint16 (or uint8), with the tensor's strides
// times the limb count, so the pointwise kernel's DMAs read and write limbs directly
// and no kernel knows about int64. Every limb value is exact in FP32, and so is every
// intermediate below (sums of two limbs and a carry, comparisons, bitwise ops of
// values below 2^16), so the engines' FP32 ALUs compute the exact result:
//   a + b    s = a_k + b_k + carry; carry = s >= 2^16; r_k = s mod 2^16
//   a - b    the same with a borrow
//   a < b    compared limb by limb from the top, whose sign bit is flipped (a bias of
//            2^15) so that signed order is unsigned order
//   casts    extension by the sign (or zero), truncation to the low limbs, FP32 from
//            the limbs (rounded once per limb beyond 2^24), limbs from a truncated float
// Wider types need more limbs, not other kernels. What is left out (multiplication,
// division, reductions of int64) runs on the CPU, counted.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "neuronsim/isa/alu.h"
#include "runtime/backend.h"

namespace neuronsim::pytorch {

std::optional<Layout> layout_of(c10::ScalarType t) {
  switch (t) {
    case at::kLong:
      return Layout{4, 16, true};
    case at::kInt:
      return Layout{2, 16, true};
    case at::kShort:
      return Layout{1, 16, true};
    case at::kChar:
      return Layout{1, 8, true};
    case at::kByte:
    case at::kBool:
      return Layout{1, 8, false};
    default:
      return std::nullopt;
  }
}

namespace {

using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

}  // namespace

at::Tensor limb_view(const at::Tensor& t, int k, bool as_signed) {
  const Layout l = *layout_of(t.scalar_type());
  const c10::ScalarType type =
      l.bits == 16 ? (as_signed ? at::kShort : at::kUInt16) : (as_signed ? at::kChar : at::kByte);
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  for (int64_t& s : strides) s *= l.limbs;
  at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(t.storage()), t.key_set(),
                                                          c10::scalarTypeToTypeMeta(type));
  v.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), strides,
                                                 t.storage_offset() * l.limbs + k);
  return v;
}

namespace {

bool is_cpu_scalar(const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0;
}

}  // namespace

Limb IntExpr::op(AluOp alu, Limb a, Limb b) {
  if (a.known() && b.known()) return {-1, isa::apply_alu_op(alu, a.value, b.value)};  // folded
  if (b.is_scalar() && !a.is_scalar()) return {e_.alu_scalar(alu, reg(a), b.scalar), 0};
  if (a.is_scalar() && !b.is_scalar()) return {e_.alu_scalar(alu, reg(b), a.scalar, true), 0};
  if (a.is_scalar() || b.is_scalar()) return {e_.alu(alu, reg(a), reg(b)), 0};
  // x + 0, x - 0 and x * 1 are x: no instruction for the zero limbs of a number.
  if ((alu == AluOp::add || alu == AluOp::subtract || alu == AluOp::multiply) && b.known() &&
      b.value == (alu == AluOp::multiply ? 1.0f : 0.0f))
    return a;
  if ((alu == AluOp::add || alu == AluOp::multiply) && a.known() &&
      a.value == (alu == AluOp::multiply ? 1.0f : 0.0f))
    return b;
  if (b.known()) return {e_.alu_imm(alu, a.reg, b.value), 0};
  if (a.known()) return {e_.alu_imm(alu, b.reg, a.value, /*reverse=*/true), 0};
  return {e_.alu(alu, a.reg, b.reg), 0};
}

Limb IntExpr::select(Limb p, Limb t, Limb f) {
  if (p.known()) return p.value != 0 ? t : f;
  return {e_.select(p.reg, reg(t), reg(f)), 0};
}

Limbs IntExpr::select(Limb p, const Limbs& a, const Limbs& b) {
  Limbs r;
  for (size_t k = 0; k < a.size(); ++k) r.push_back(select(p, a[k], b[k]));
  return r;
}

Limbs IntExpr::each(AluOp alu, const Limbs& a, const Limbs& b) {
  Limbs r;
  for (size_t k = 0; k < a.size(); ++k) r.push_back(op(alu, a[k], b[k]));
  return r;
}

Reg IntExpr::reg(Limb x) {
  if (x.is_scalar()) {  // a register holding the scalar: 0 + s
    auto [it, added] = scalar_regs_.try_emplace(x.scalar, -1);
    if (added) it->second = e_.alu_scalar(AluOp::add, reg(Limb{-1, 0}), x.scalar);
    return it->second;
  }
  if (!x.known()) return x.reg;
  auto [it, added] = constants_.try_emplace(x.value, -1);
  if (added) it->second = e_.constant(x.value);
  return it->second;
}

Limb IntExpr::load(const at::Tensor& t) {
  return input(t, t, -1);
}

Limbs IntExpr::operand(const at::Tensor& t) {
  if (is_cpu_scalar(t))
    return device_.is_cpu() ? constant(t.item<int64_t>()) : number(t.item<int64_t>(), device_);
  const Layout lt = *layout_of(t.scalar_type());
  Limbs out(static_cast<size_t>(l_.limbs), Limb{-1, 0});
  if (lt.bits == 16 && l_.bits == 8) {  // to a one-byte type: the low byte
    out[0] = imm(AluOp::mod, limb(t, 0, false), 256);
    return out;
  }
  const int own = std::min(lt.limbs, l_.limbs);
  const bool extend = l_.limbs > lt.limbs || lt.bits < l_.bits;
  for (int k = 0; k < own; ++k) {
    const bool top_signed = k == lt.limbs - 1 && lt.is_signed && extend;
    const Limb x = limb(t, k, top_signed);
    if (!top_signed) {
      out[static_cast<size_t>(k)] = x;
      continue;
    }
    // x is signed: its limb in this layout, and the limbs above it all ones if negative.
    out[static_cast<size_t>(k)] = imm(AluOp::mod, x, l_.base());
    const Limb ones = imm(AluOp::multiply, imm(AluOp::is_lt, x, 0), l_.base() - 1);
    for (int j = k + 1; j < l_.limbs; ++j) out[static_cast<size_t>(j)] = ones;
  }
  return out;
}

Limbs IntExpr::raw(const at::Tensor& t) {
  Limbs out;
  for (int k = 0; k < layout_of(t.scalar_type())->limbs; ++k) out.push_back(limb(t, k, false));
  return out;
}

Limbs IntExpr::constant(int64_t v) const {
  Limbs out;
  const auto bits = static_cast<uint64_t>(v);
  for (int k = 0; k < l_.limbs; ++k)
    out.push_back(
        {-1, static_cast<float>((bits >> (l_.bits * k)) & static_cast<uint64_t>(l_.base() - 1))});
  return out;
}

Limbs IntExpr::number(int64_t v, const c10::Device& device) {
  Limbs out;
  for (const Limb& l : constant(v)) out.push_back(number(l.value, device));
  return out;
}

Limb IntExpr::number(float v, const c10::Device& device) {
  inputs_.push_back(device_scalar(v, device));
  held_.push_back(inputs_.back());
  Limb l;
  l.scalar = static_cast<int32_t>(inputs_.size() - 1);
  return l;
}

Limbs IntExpr::add(const Limbs& a, const Limbs& b) {
  Limbs r;
  std::optional<Limb> carry;
  for (size_t k = 0; k < a.size(); ++k) {
    Limb s = op(AluOp::add, a[k], b[k]);
    if (carry) s = op(AluOp::add, s, *carry);
    if (k + 1 < a.size()) carry = imm(AluOp::is_ge, s, l_.base());
    r.push_back(imm(AluOp::mod, s, l_.base()));
  }
  return r;
}

Limbs IntExpr::mul(const Limbs& a, const Limbs& b) {
  const Limbs x = bytes(a), y = bytes(b);
  Limbs columns;
  for (size_t c = 0; c < x.size(); ++c) {
    Limb sum{-1, 0};
    for (size_t i = 0; i <= c; ++i) {
      const Limb& p = x[i];
      const Limb& q = y[c - i];
      if ((p.known() && p.value == 0) || (q.known() && q.value == 0)) continue;
      sum = op(AluOp::add, sum, op(AluOp::multiply, p, q));
    }
    columns.push_back(sum);
  }
  return carried(columns);
}

Limbs IntExpr::sub(const Limbs& a, const Limbs& b) {
  Limbs r;
  std::optional<Limb> borrow;
  for (size_t k = 0; k < a.size(); ++k) {
    Limb d = op(AluOp::subtract, a[k], b[k]);
    if (borrow) d = op(AluOp::subtract, d, *borrow);
    if (k + 1 < a.size()) borrow = imm(AluOp::is_lt, d, 0);
    r.push_back(imm(AluOp::mod, d, l_.base()));
  }
  return r;
}

Limb IntExpr::compare(AluOp cmp, Limbs a, Limbs b) {
  if (cmp == AluOp::is_equal || cmp == AluOp::not_equal) {
    Limb r = op(AluOp::is_equal, a[0], b[0]);
    for (size_t k = 1; k < a.size(); ++k)
      r = op(AluOp::logical_and, r, op(AluOp::is_equal, a[k], b[k]));
    return cmp == AluOp::is_equal ? r : imm(AluOp::is_equal, r, 0);
  }
  a = ordered(std::move(a));
  b = ordered(std::move(b));
  const AluOp strict = cmp == AluOp::is_lt || cmp == AluOp::is_le ? AluOp::is_lt : AluOp::is_gt;
  Limb r = op(cmp, a[0], b[0]);
  for (size_t k = 1; k < a.size(); ++k)
    r = select(op(AluOp::is_equal, a[k], b[k]), r, op(strict, a[k], b[k]));
  return r;
}

Limbs IntExpr::ordered(Limbs a) {
  if (l_.is_signed) a.back() = biased(a.back());
  return a;
}

std::pair<Limb, Limbs> IntExpr::sign_and_magnitude(const Limbs& a) {
  const Limb negative = l_.is_signed ? imm(AluOp::is_ge, a.back(), l_.base() / 2) : Limb{-1, 0};
  return {negative, select(negative, sub(constant(0), a), a)};
}

Limbs IntExpr::bytes(const Limbs& a) {
  if (l_.bits == 8) return a;
  Limbs b;
  for (const Limb& l : a) {
    const Limb low = imm(AluOp::mod, l, 256);
    b.push_back(low);
    b.push_back(imm(AluOp::multiply, op(AluOp::subtract, l, low), 1.0f / 256));
  }
  return b;
}

Limbs IntExpr::from_bytes(const Limbs& b) {
  if (l_.bits == 8) return b;
  Limbs a;
  for (size_t k = 0; k + 1 < b.size(); k += 2)
    a.push_back(op(AluOp::add, b[k], imm(AluOp::multiply, b[k + 1], 256)));
  return a;
}

Limbs IntExpr::carried(const Limbs& sums) {
  Limbs bytes;
  std::optional<Limb> carry;
  for (size_t k = 0; k < sums.size(); ++k) {
    Limb t = sums[k];
    if (carry) t = op(AluOp::add, t, *carry);
    bytes.push_back(imm(AluOp::mod, t, 256));
    if (k + 1 < sums.size())
      carry = imm(AluOp::multiply, op(AluOp::subtract, t, bytes.back()), 1.0f / 256);
  }
  return from_bytes(bytes);
}

Limb IntExpr::to_float(const Limbs& a) {
  Limb acc = a.back();
  if (l_.is_signed) acc = imm(AluOp::subtract, biased(acc), l_.base() / 2);
  for (size_t k = a.size() - 1; k-- > 0;)
    acc = op(AluOp::add, imm(AluOp::multiply, acc, l_.base()), a[k]);
  return acc;
}

Limb IntExpr::rounded_to_float(const Limbs& a) {
  if (a.size() < 4) return to_float(a);  // one rounding already: hi * 2^16 is exact, + lo rounds
  // Of the magnitude, t (its top 32 bits) times 2^32 plus y (the low 32): one FP32 addition of
  // two exact operands rounds once. Where t is large, what lies under half a unit of the
  // result is kept only as a sticky bit, which does not move the rounding:
  //   t >= 2^24          (a3 2^16) + (a2 + 1/2 if y != 0), times 2^32
  //   2^8 <= t < 2^24    t 2^32 + (a1 2^16 + 2^15 if a0 != 0)
  //   t < 2^8            (t 2^16 + a1) 2^16 + a0
  const auto [negative, m] = sign_and_magnitude(a);
  const Limb t = op(AluOp::add, imm(AluOp::multiply, m[3], 65536.0f), m[2]);  // exact below 2^24
  const Limb y_sticky =
      imm(AluOp::multiply, imm(AluOp::is_gt, op(AluOp::add, m[1], m[0]), 0.0f), 0.5f);
  const Limb huge =
      imm(AluOp::multiply,
          op(AluOp::add, imm(AluOp::multiply, m[3], 65536.0f), op(AluOp::add, m[2], y_sticky)),
          0x1p32f);
  const Limb low_sticky = imm(AluOp::multiply, imm(AluOp::is_gt, m[0], 0.0f), 32768.0f);
  const Limb large = op(AluOp::add, imm(AluOp::multiply, t, 0x1p32f),
                        op(AluOp::add, imm(AluOp::multiply, m[1], 65536.0f), low_sticky));
  const Limb small =
      op(AluOp::add,
         imm(AluOp::multiply, op(AluOp::add, imm(AluOp::multiply, t, 65536.0f), m[1]), 65536.0f),
         m[0]);
  const Limb magnitude = select(imm(AluOp::is_ge, t, 0x1p24f), huge,
                                select(imm(AluOp::is_ge, t, 256.0f), large, small));
  return select(negative, imm(AluOp::multiply, magnitude, -1.0f), magnitude);
}

bool small_floats_to_integers(const at::Tensor& src, const at::Tensor& dst) {
  const auto layout = layout_of(dst.scalar_type());
  if (!layout || !src.device().is_privateuseone() || overlaps(src, dst)) return false;
  IntExpr x(*layout);
  return x.run("aten::copy_", dst, x.from_float(x.load(src)));
}

at::Tensor small_integers_to_float(const at::Tensor& t) {
  const auto layout = layout_of(t.scalar_type());
  if (!layout || !t.device().is_privateuseone()) return t.to(at::kFloat);
  at::Tensor out = at::empty(t.sizes(), t.options().dtype(at::kFloat));
  IntExpr x(*layout);
  if (x.run_values("aten::copy_", {out}, {x.to_float(x.operand(t))})) return out;
  return t.to(at::kFloat);
}

Limbs IntExpr::from_float(Limb v) {
  const Limb magnitude = imm(AluOp::abs_max, v, 0);
  const Limb whole = op(AluOp::subtract, magnitude, imm(AluOp::mod, magnitude, 1));
  return from_integral(select(imm(AluOp::is_lt, v, 0), imm(AluOp::multiply, whole, -1), whole));
}

Limbs IntExpr::from_integral(Limb v) {
  Limbs r;
  for (int k = 0; k < l_.limbs; ++k) {
    r.push_back(imm(AluOp::mod, v, l_.base()));
    if (k + 1 < l_.limbs)
      v = imm(AluOp::multiply, op(AluOp::subtract, v, r.back()), 1.0f / l_.base());
  }
  return r;
}

Limb IntExpr::nonzero(const Limbs& a) {
  Limb sum = a[0];
  for (size_t k = 1; k < a.size(); ++k) sum = op(AluOp::add, sum, a[k]);
  return imm(AluOp::is_gt, sum, 0);
}

bool IntExpr::run(const char* op_name, const at::Tensor& out, const Limbs& limbs) {
  std::vector<at::Tensor> outs;
  for (int k = 0; k < l_.limbs; ++k) outs.push_back(limb_view(out, k, false));
  return run_values(op_name, outs, limbs);
}

bool IntExpr::run_values(const char* op_name, const std::vector<at::Tensor>& outs,
                         const Limbs& values) {
  std::vector<Reg> results;
  for (const Limb& v : values) results.push_back(reg(v));
  e_.set_outputs(results);
  return run_pointwise_outputs(op_name, "limbs", e_, inputs_, outs);  // keyed by e_
}

// The sign bit flipped: signed order as unsigned order (one two-op instruction).
Limb IntExpr::biased(Limb top) {
  return imm(AluOp::mod, imm(AluOp::add, top, l_.base() / 2), l_.base());
}

Limb IntExpr::limb(const at::Tensor& t, int k, bool as_signed) {
  return input(limb_view(t, k, as_signed), t, k * 2 + (as_signed ? 1 : 0));
}

// One load per (tensor, part): the same limb read twice is read once.
Limb IntExpr::input(const at::Tensor& view, const at::Tensor& of, int part) {
  auto [it, added] = loads_.try_emplace({of.unsafeGetTensorImpl(), part}, -1);
  if (added) {
    it->second = e_.load(static_cast<int32_t>(inputs_.size()));
    inputs_.push_back(view);
    held_.push_back(of);
  }
  return {it->second, 0};
}

namespace {

// Neuron integer tensors, or Python numbers; at least one tensor; none overlapping out
// other than as out itself.
bool integer_operands(std::initializer_list<const at::Tensor*> operands, const at::Tensor& out) {
  bool any_tensor = false;
  for (const at::Tensor* t : operands) {
    if (is_cpu_scalar(*t)) {
      if (!at::isIntegralType(t->scalar_type(), /*includeBool=*/true)) return false;
      continue;
    }
    if (!t->device().is_privateuseone() || !layout_of(t->scalar_type()) || overlaps(*t, out))
      return false;
    any_tensor = true;
  }
  return any_tensor && out.device().is_privateuseone();
}

bool is_comparison(AluOp alu) {
  return alu == AluOp::is_equal || alu == AluOp::not_equal || alu == AluOp::is_lt ||
         alu == AluOp::is_le || alu == AluOp::is_gt || alu == AluOp::is_ge;
}

bool is_logical(AluOp alu) {
  return alu == AluOp::logical_and || alu == AluOp::logical_or || alu == AluOp::logical_xor;
}

}  // namespace

bool integer_binary_into(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b,
                         double alpha, const at::Tensor& out) {
  const c10::ScalarType type = at::result_type(a, b);
  const auto layout = layout_of(type);
  if (!layout || !integer_operands({&a, &b}, out) || alpha != std::trunc(alpha) ||
      std::fabs(alpha) > 9.2e18)
    return false;
  const bool gives_bool = is_comparison(alu) || is_logical(alu);
  if (out.scalar_type() != (gives_bool ? at::kBool : type)) return false;
  const bool bitwise =
      alu == AluOp::bitwise_and || alu == AluOp::bitwise_or || alu == AluOp::bitwise_xor;
  if (type == at::kBool && !bitwise && !gives_bool) return false;
  IntExpr x(*layout, out.device());
  const Limbs la = x.operand(a);
  Limbs lb = x.operand(b);
  if (alpha != 1.0 && alpha != -1.0)  // a + alpha * b
    lb = x.mul(lb, x.constant(static_cast<int64_t>(std::fabs(alpha))));
  if (is_logical(alu)) {
    const Limb p = x.nonzero(la), q = x.nonzero(lb);
    return x.run_values(
        op, {out}, {alu == AluOp::logical_xor ? x.op(AluOp::not_equal, p, q) : x.op(alu, p, q)});
  }
  switch (alu) {
    case AluOp::add:
      return x.run(op, out, alpha > 0 ? x.add(la, lb) : x.sub(la, lb));
    case AluOp::subtract:
      return x.run(op, out, alpha > 0 ? x.sub(la, lb) : x.add(la, lb));
    case AluOp::multiply:
      return alpha == 1.0 && type != at::kBool && x.run(op, out, x.mul(la, lb));
    case AluOp::max:
    case AluOp::min: {
      const Limb a_less = x.compare(AluOp::is_lt, la, lb);
      return x.run(op, out,
                   alu == AluOp::max ? x.select(a_less, lb, la) : x.select(a_less, la, lb));
    }
    case AluOp::bitwise_and:
    case AluOp::bitwise_or:
    case AluOp::bitwise_xor:
      return x.run(op, out, x.each(alu, la, lb));
    default:
      if (is_comparison(alu)) return x.run_values(op, {out}, {x.compare(alu, la, lb)});
      return false;
  }
}

bool integer_not_into(const at::Tensor& a, const at::Tensor& out) {
  const auto layout = layout_of(a.scalar_type());
  if (!layout || out.scalar_type() != a.scalar_type() || !integer_operands({&a}, out)) return false;
  IntExpr x(*layout);
  const Limbs la = x.operand(a);
  Limbs r;
  const float top = a.scalar_type() == at::kBool ? 1.0f : layout->base() - 1;
  for (const Limb& l : la) r.push_back(x.op(AluOp::subtract, {-1, top}, l));
  return x.run("aten::bitwise_not", out, r);
}

bool integer_unary_into(IntUnary f, const at::Tensor& a, const at::Tensor& out) {
  const auto layout = layout_of(a.scalar_type());
  if (!layout || a.scalar_type() == at::kBool || out.scalar_type() != a.scalar_type() ||
      !integer_operands({&a}, out))
    return false;
  IntExpr x(*layout);
  const Limbs v = x.operand(a), zero = x.constant(0);
  const Limb negative =
      layout->is_signed ? x.compare(AluOp::is_lt, v, zero) : Limb{-1, 0};  // unsigned: never
  switch (f) {
    case IntUnary::neg:
      return x.run("aten::neg", out, x.sub(zero, v));
    case IntUnary::abs:
      return x.run("aten::abs", out, x.select(negative, x.sub(zero, v), v));
    case IntUnary::relu:
      return x.run("aten::relu", out, x.select(negative, zero, v));
  }
  return false;
}

bool integer_triangle_into(const char* op, const at::Tensor& self, int64_t diagonal, bool upper,
                           const at::Tensor& out) {
  const auto layout = layout_of(self.scalar_type());
  if (!layout || !integer_operands({&self}, out)) return false;
  IntExpr x(*layout);
  std::vector<int64_t> row(static_cast<size_t>(self.dim()), 0), col = row;
  row[row.size() - 2] = 1;
  col[col.size() - 1] = 1;
  // j - i <= diagonal (lower) or >= diagonal (upper), exact while both are below 2^24
  if (self.size(-1) >= (int64_t{1} << 24) || self.size(-2) >= (int64_t{1} << 24)) return false;
  const Limb offset = x.op(AluOp::subtract, x.position(col), x.position(row));
  const Limb keep =
      x.imm(upper ? AluOp::is_ge : AluOp::is_le, offset, static_cast<float>(diagonal));
  return x.run(op, out, x.select(keep, x.operand(self), x.constant(0)));
}

bool integer_where_into(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                        const at::Tensor& out) {
  const auto layout = layout_of(out.scalar_type());
  if (!layout || cond.scalar_type() != at::kBool || !cond.device().is_privateuseone() ||
      overlaps(cond, out) || !integer_operands({&a, &b}, out))
    return false;
  IntExpr x(*layout, out.device());
  const Limb p = x.load(cond);
  return x.run("aten::where", out, x.select(p, x.operand(a), x.operand(b)));
}

bool integer_cumsum_into(const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  const auto layout = layout_of(out.scalar_type());
  if (!layout || out.scalar_type() == at::kBool || self.dim() == 0 ||
      !integer_operands({&self}, out))
    return false;
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (self.size(d) >= 65536) return false;  // 255 * size + carries must stay below 2^24
  const char* op = "aten::cumsum";
  // The 8-bit pieces of every value, one plane each, scanned along dim in FP32 (sums of
  // pieces are exact), then carried from the lowest piece up.
  const int64_t pieces = layout->limbs * layout->bits / 8;
  std::vector<int64_t> sizes{pieces};
  sizes.insert(sizes.end(), self.sizes().begin(), self.sizes().end());
  const at::Tensor planes = at::empty(sizes, out.options().dtype(at::kFloat));
  const at::Tensor sums = at::empty_like(planes);
  IntExpr split(*layout);
  std::vector<at::Tensor> plane_views;
  for (int64_t k = 0; k < pieces; ++k) plane_views.push_back(planes[k]);
  if (!split.run_values(op, plane_views, split.bytes(split.operand(self))) ||
      !run_cumsum(op, planes, d + 1, sums))
    return false;
  IntExpr join(*layout);
  Limbs piece_sums;
  for (int64_t k = 0; k < pieces; ++k) piece_sums.push_back(join.load(sums[k]));
  return join.run(op, out, join.carried(piece_sums));
}

namespace {

// A sum of more elements than a byte plane sums exactly: the summed dims moved last and
// flattened (copied where no view can), summed in chunks of 32,768, and the chunks' sums
// summed in turn. Integer addition wraps alike in any order, so the result is the CPU's.
bool integer_sum_chunked(
    const char* op, const at::Tensor& x, const std::vector<int64_t>& dims,
    const at::Tensor& out_keepdim,
    const std::function<at::Tensor(const at::Tensor&, const std::vector<int64_t>&)>& reduce) {
  constexpr int64_t kChunk = 32768;
  std::vector<int64_t> order, kept_sizes;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      order.push_back(d);
      kept_sizes.push_back(x.size(d));
    }
  order.insert(order.end(), dims.begin(), dims.end());
  std::vector<int64_t> flat_sizes = kept_sizes;
  flat_sizes.push_back(-1);
  const at::Tensor flat = x.permute(order).reshape(flat_sizes);
  const int64_t count = flat.size(-1), whole = count / kChunk * kChunk, last = flat.dim() - 1;
  const auto sum_last = [&](const at::Tensor& t) {
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    sizes.back() = 1;
    const at::Tensor s = at::empty(sizes, out_keepdim.options());
    return integer_sum_into(op, t, {t.dim() - 1}, s, reduce) ? s : at::Tensor();
  };
  std::vector<int64_t> chunked = kept_sizes;
  chunked.push_back(whole / kChunk);
  chunked.push_back(kChunk);
  const at::Tensor chunk_sums = sum_last(flat.narrow(last, 0, whole).reshape(chunked));
  if (!chunk_sums.defined()) return false;
  at::Tensor total = sum_last(chunk_sums.squeeze(-1));
  if (!total.defined()) return false;
  if (whole < count) {
    const at::Tensor tail = sum_last(flat.narrow(last, whole, count - whole));
    if (!tail.defined()) return false;
    total = total + tail;
  }
  out_keepdim.copy_(total.reshape(out_keepdim.sizes()));
  return true;
}

}  // namespace

bool integer_sum_into(
    const char* op, const at::Tensor& x, const std::vector<int64_t>& dims,
    const at::Tensor& out_keepdim,
    const std::function<at::Tensor(const at::Tensor&, const std::vector<int64_t>&)>& reduce) {
  const auto layout = layout_of(out_keepdim.scalar_type());
  if (!layout || out_keepdim.scalar_type() == at::kBool || x.dim() == 0 || dims.empty() ||
      !integer_operands({&x}, out_keepdim))
    return false;
  int64_t count = 1;
  for (int64_t d : dims) count *= x.size(d);
  // Each byte plane's sum must stay exact in FP32: 255 * count, or count for a mask.
  if (count >= (x.scalar_type() == at::kBool ? (int64_t{1} << 24) : int64_t{65536}))
    return integer_sum_chunked(op, x, dims, out_keepdim, reduce);
  const int64_t pieces = layout->limbs * layout->bits / 8;
  std::vector<int64_t> sizes{pieces};
  sizes.insert(sizes.end(), x.sizes().begin(), x.sizes().end());
  const at::Tensor planes = at::empty(sizes, out_keepdim.options().dtype(at::kFloat));
  IntExpr split(*layout);
  std::vector<at::Tensor> plane_views;
  for (int64_t k = 0; k < pieces; ++k) plane_views.push_back(planes[k]);
  if (!split.run_values(op, plane_views, split.bytes(split.operand(x)))) return false;
  std::vector<int64_t> plane_dims;
  for (int64_t d : dims) plane_dims.push_back(d + 1);
  const at::Tensor sums = reduce(planes, plane_dims);
  if (!sums.defined()) return false;
  IntExpr join(*layout);
  Limbs piece_sums;
  for (int64_t k = 0; k < pieces; ++k) piece_sums.push_back(join.load(sums[k]));
  return join.run(op, out_keepdim, join.carried(piece_sums));
}

bool integer_extreme_into(const char* op, bool is_max, const at::Tensor& x, int64_t dim,
                          const at::Tensor& out_keepdim) {
  const auto layout = layout_of(x.scalar_type());
  if (!layout || x.dim() == 0 || out_keepdim.scalar_type() != x.scalar_type() ||
      !integer_operands({&x}, out_keepdim))
    return false;
  const int64_t d = at::maybe_wrap_dim(dim, x.dim());
  const float none = is_max ? -1.0f : layout->base();  // below (above) every limb
  std::vector<at::Tensor> best(static_cast<size_t>(layout->limbs));
  for (int k = layout->limbs; k-- > 0;) {
    IntExpr pass(*layout);
    const Limbs v = pass.ordered(pass.operand(x));
    Limb ties{-1, 1};
    for (int j = layout->limbs - 1; j > k; --j)
      ties = pass.op(AluOp::logical_and, ties,
                     pass.op(AluOp::is_equal, v[static_cast<size_t>(j)],
                             pass.load(best[static_cast<size_t>(j)])));
    const at::Tensor candidates = at::empty(x.sizes(), x.options().dtype(at::kFloat));
    best[static_cast<size_t>(k)] = at::empty(out_keepdim.sizes(), candidates.options());
    if (!pass.run_values(op, {candidates},
                         {pass.select(ties, v[static_cast<size_t>(k)], Limb{-1, none})}) ||
        !run_reduce(op, is_max ? kernels::ReduceOp::max : kernels::ReduceOp::min, candidates, d,
                    best[static_cast<size_t>(k)]))
      return false;
  }
  IntExpr result(*layout);
  Limbs limbs;
  for (const at::Tensor& b : best) limbs.push_back(result.load(b));
  return result.run(op, out_keepdim, result.ordered(limbs));  // flipping twice restores
}

bool integer_fill(const at::Tensor& self, const at::Scalar& value) {
  const auto layout = layout_of(self.scalar_type());
  if (!layout || !self.device().is_privateuseone() || value.isComplex()) return false;
  IntExpr x(*layout);
  const int64_t v = self.scalar_type() == at::kBool ? value.toBool() : value.to<int64_t>();
  return x.run("aten::fill_", self, x.constant(v));
}

bool integer_copy(const at::Tensor& src, const at::Tensor& dst) {
  const auto from = layout_of(src.scalar_type()), to = layout_of(dst.scalar_type());
  if (!src.device().is_privateuseone() || overlaps(src, dst)) return false;
  if (!from && dst.scalar_type() == at::kBool) return false;  // v != 0: the float copy's
  if (from && dst.scalar_type() == at::kBool) {
    IntExpr x(*from);
    return x.run_values("aten::copy_", {dst}, {x.nonzero(x.operand(src))});
  }
  if (from && to) {
    IntExpr x(*to);
    return x.run("aten::copy_", dst, x.operand(src));
  }
  if (from && is_engine_float(dst.scalar_type())) {
    IntExpr x(*from);
    return x.run_values("aten::copy_", {dst}, {x.rounded_to_float(x.operand(src))});
  }
  if (to && is_engine_float(src.scalar_type())) {
    // Out of range (NaN included) the CPU's cast gives the "integer indefinite" (the lowest
    // value) of the type it converts through: int64 for int64 and uint8, int32 for the others.
    const bool through_int64 = dst.scalar_type() == at::kLong || dst.scalar_type() == at::kByte;
    const float limit = through_int64 ? 0x1p63f : 0x1p31f;
    IntExpr x(*to);
    const Limb v = x.load(src);
    const Limb fits =
        x.op(AluOp::logical_and, x.imm(AluOp::is_ge, v, -limit), x.imm(AluOp::is_lt, v, limit));
    const int64_t indefinite =
        through_int64 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
    return x.run("aten::copy_", dst, x.select(fits, x.from_float(v), x.constant(indefinite)));
  }
  return false;
}

namespace {

// A scale 2^k (k <= 16) that makes start and step integers and keeps every value of
// the range below 2^24 in magnitude: then FP32 computes start + i * step exactly.
bool exact_range(double start, double step, int64_t count) {
  const double last = start + step * static_cast<double>(count - 1);
  for (double scale = 1; scale <= 65536; scale *= 2) {
    const double s = start * scale, d = step * scale;
    if (s == std::floor(s) && d == std::floor(d))
      return (std::fabs(start) + std::fabs(last)) * scale < double(1 << 24);
  }
  return false;
}

// out <- start, start + step, ... below end (torch's count); computed from each
// element's position, exactly.
at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out) {
  const double x0 = start.toDouble(), x1 = end.toDouble(), dx = step.toDouble();
  const bool valid = dx != 0 && std::isfinite(x0) && std::isfinite(x1) &&
                     ((dx > 0 && x1 >= x0) || (dx < 0 && x1 <= x0));
  const auto count = valid ? static_cast<int64_t>(std::ceil((x1 - x0) / dx)) : 0;
  const c10::ScalarType type = out.scalar_type();
  if (valid && out.device().is_privateuseone() && type != at::kBool &&
      (is_engine_float(type) || layout_of(type)) && (count == 0 || exact_range(x0, dx, count))) {
    if (out.numel() != count) out.resize_({count});
    IntExpr x(layout_of(type).value_or(Layout{}), out.device());
    Limb v = x.position({1});  // start and step are inputs: one kernel for every range
    v = x.op(AluOp::multiply, v, x.number(static_cast<float>(dx), out.device()));
    v = x.op(AluOp::add, v, x.number(static_cast<float>(x0), out.device()));
    if (count == 0 || (layout_of(type) ? x.run("aten::arange", out, x.from_integral(v))
                                       : x.run_values("aten::arange", {out}, {v})))
      return out;
  }
  return Fallback<ATEN_OP2(arange, start_out)>::call(start, end, step, out);
}

// What integer_divide gives: the quotient rounded toward -inf (torch.floor_divide, //) or
// toward zero (trunc), or the floor's remainder (torch.remainder, %: the divisor's sign).
enum class IntDivision { floor, trunc, remainder };

// Integer division of a tensor by a tensor or a Python integer, through FP32: q = floor(a / b),
// corrected by the remainder r = a - q * b (which has b's sign and |r| < |b|), exact while
// |a| and |b| stay below 2^23; toward zero, q + 1 where r != 0 and the signs differ. The
// kernel also flags a divisor of zero and every |a| or |b| of 2^23 or more; the host reads
// the flag (not in timing-only mode) and, if any is set, the op falls back (where the CPU
// raises its ZeroDivisionError).
at::Tensor integer_divide(const char* op, const at::Tensor& self, const at::Tensor& other,
                          IntDivision what) {
  constexpr float kExact = 8388608.0f;  // 2^23
  const c10::ScalarType type = at::result_type(self, other);
  const std::optional<Layout> layout = layout_of(type);
  if (!layout || type == at::kBool || !self.device().is_privateuseone() ||
      (!other.device().is_privateuseone() && !is_cpu_scalar(other)) ||
      (other.device().is_privateuseone() && other.device() != self.device()) ||
      !at::isIntegralType(other.scalar_type(), /*includeBool=*/false) || self.numel() == 0)
    return {};
  const std::vector<int64_t> sizes = at::infer_size(self.sizes(), other.sizes());
  at::Tensor out = at::empty(sizes, self.options().dtype(type));
  const at::Tensor beyond = at::empty(sizes, self.options().dtype(at::kFloat));
  IntExpr x(*layout, self.device());
  const Limb a = x.to_float(x.operand(self)), b = x.to_float(x.operand(other));
  const Limb ratio = x.op(AluOp::divide, a, b);
  Limb q = x.op(AluOp::subtract, ratio, x.imm(AluOp::mod, ratio, 1.0f));
  const Limb r = x.op(AluOp::subtract, a, x.op(AluOp::multiply, q, b));
  const Limb b_positive = x.imm(AluOp::is_gt, b, 0.0f);
  // One step back or forth where FP32's rounding of a / b crossed a whole number.
  q = x.op(AluOp::add, q, x.select(b_positive, x.op(AluOp::is_ge, r, b), x.op(AluOp::is_le, r, b)));
  q = x.op(AluOp::subtract, q,
           x.select(b_positive, x.imm(AluOp::is_lt, r, 0.0f), x.imm(AluOp::is_gt, r, 0.0f)));
  // The floor's remainder, after the steps: exact, with b's sign, nonzero where a / b is not
  // whole.
  const Limb rest = x.op(AluOp::subtract, a, x.op(AluOp::multiply, q, b));
  if (what == IntDivision::trunc) {
    const Limb signs_differ =
        x.op(AluOp::not_equal, x.imm(AluOp::is_lt, a, 0.0f), x.imm(AluOp::is_lt, b, 0.0f));
    q = x.op(AluOp::add, q,
             x.op(AluOp::logical_and, signs_differ, x.imm(AluOp::not_equal, rest, 0.0f)));
  }
  const Limb magnitude =
      x.op(AluOp::max, x.imm(AluOp::abs_max, a, 0.0f), x.imm(AluOp::abs_max, b, 0.0f));
  Limbs values = x.from_integral(what == IntDivision::remainder ? rest : q);
  values.push_back(x.op(AluOp::logical_or, x.imm(AluOp::is_ge, magnitude, kExact),
                        x.imm(AluOp::is_equal, b, 0.0f)));
  std::vector<at::Tensor> outs;
  for (int k = 0; k < layout->limbs; ++k) outs.push_back(limb_view(out, k, false));
  outs.push_back(beyond);
  at::Tensor any_beyond = at::empty({1}, beyond.options());
  if (x.run_values(op, outs, values) &&
      run_reduce(op, kernels::ReduceOp::max, beyond.reshape({-1}), 0, any_beyond)) {
    if (!host_can_check() || any_beyond.item<float>() == 0.0f) return out;
    note_refusal(op,
                 "a divisor is zero, or an operand is 2^23 or more in magnitude, beyond "
                 "exact FP32 division");
  }
  return {};
}

// a << s and a >> s (arithmetic for signed types) on limbs, s a tensor or a Python integer.
// With s = q * bits + r (bits per limb), each limb times 2^r splits exactly into its low
// part (mod 2^bits) and the carry into the next limb; limb k of the result is the split
// limb k - q (k + q for >>). Counts below 0 or of the type's width or more give what the
// CPU gives: 0 for <<, the sign's fill for >>.
bool integer_shift_into(const char* op, bool left, const at::Tensor& a, const at::Tensor& s,
                        const at::Tensor& out) {
  const c10::ScalarType type = at::result_type(a, s);
  const auto layout = layout_of(type);
  if (!layout || type == at::kBool || out.scalar_type() != type || !integer_operands({&a, &s}, out))
    return false;
  IntExpr x(*layout);  // a Python count folds into the kernel
  const Limbs v = x.operand(a);
  const Limb count = x.to_float(x.operand(s));
  const int limbs = layout->limbs;
  const float base = layout->base(), width = static_cast<float>(limbs * layout->bits);
  const Limb valid =
      x.op(AluOp::logical_and, x.imm(AluOp::is_ge, count, 0.0f), x.imm(AluOp::is_lt, count, width));
  const Limb r = x.imm(AluOp::mod, count, static_cast<float>(layout->bits));
  const Limb q =
      x.imm(AluOp::divide, x.op(AluOp::subtract, count, r), static_cast<float>(layout->bits));
  const Limb m = x.op(AluOp::pow, {-1, 2.0f}, r);  // 2^r, exact
  const Limb fill = layout->is_signed
                        ? x.imm(AluOp::multiply, x.imm(AluOp::is_ge, v.back(), base / 2), base - 1)
                        : Limb{-1, 0};
  const auto at = [&](int i) { return i < 0 ? Limb{-1, 0} : i >= limbs ? fill : v[i]; };
  // The split limbs: t_k is limb k shifted by r within the type.
  Limbs t;
  for (int k = 0; k < limbs; ++k) {
    if (left) {  // low part of a_k * m plus the carry of a_(k-1) * m
      const Limb p = x.op(AluOp::multiply, at(k), m), below = x.op(AluOp::multiply, at(k - 1), m);
      const Limb below_low = x.imm(AluOp::mod, below, base);
      t.push_back(x.op(AluOp::add, x.imm(AluOp::mod, p, base),
                       x.imm(AluOp::divide, x.op(AluOp::subtract, below, below_low), base)));
    } else {  // a_k / m rounded down, plus the low r bits of a_(k+1) moved to the top
      const Limb own =
          x.op(AluOp::divide, x.op(AluOp::subtract, at(k), x.op(AluOp::mod, at(k), m)), m);
      const Limb above =
          x.op(AluOp::multiply, x.op(AluOp::mod, at(k + 1), m), x.op(AluOp::divide, {-1, base}, m));
      t.push_back(x.op(AluOp::add, own, above));
    }
  }
  const auto split = [&](int i) { return i < 0 ? Limb{-1, 0} : i >= limbs ? fill : t[i]; };
  Limbs result;
  for (int k = 0; k < limbs; ++k) {
    Limb limb = left ? Limb{-1, 0} : fill;  // what a count past the width gives
    for (int j = limbs - 1; j >= 0; --j)
      limb = x.select(x.imm(AluOp::is_equal, q, static_cast<float>(j)), split(left ? k - j : k + j),
                      limb);
    result.push_back(x.select(valid, limb, left ? Limb{-1, 0} : fill));
  }
  return x.run(op, out, result);
}

// self / other rounded toward -inf (floor) or zero into out, on the device: integers here,
// floats in ops_pointwise.cpp (float_divide_rounded_into). False when not covered.
bool divide_rounded_into(const char* op, const at::Tensor& self, const at::Tensor& other,
                         bool floor, const at::Tensor& out) {
  const c10::ScalarType type = at::result_type(self, other);
  if (out.scalar_type() != type || out.device() != self.device()) return false;
  if (!at::isIntegralType(type, /*includeBool=*/false))
    return float_divide_rounded_into(self, other, floor, out);
  const at::Tensor q =
      integer_divide(op, self, other, floor ? IntDivision::floor : IntDivision::trunc);
  if (!q.defined()) return false;
  at::native::resize_output(out, q.sizes());
  out.copy_(q);
  return true;
}

bool floor_divide_into(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  return divide_rounded_into("aten::floor_divide", self, other, /*floor=*/true, out);
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  const c10::ScalarType type = at::result_type(self, other);
  if (!at::isIntegralType(type, /*includeBool=*/false)) {
    at::Tensor out = at::empty({0}, self.options().dtype(type));
    if (floor_divide_into(self, other, out)) return out;
  } else if (at::Tensor q = integer_divide("aten::floor_divide", self, other, IntDivision::floor);
             q.defined()) {
    return q;
  }
  return Fallback<ATEN_OP(floor_divide)>::call(self, other);
}

at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (floor_divide_into(self, other, out)) return out;
  return Fallback<ATEN_OP2(floor_divide, out)>::call(self, other, out);
}

at::Tensor shift(const char* op, bool left, const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty(at::infer_size(self.sizes(), other.sizes()),
                             self.options().dtype(at::result_type(self, other)));
  if (integer_shift_into(op, left, self, other, out)) return out;
  return {};
}

#define NEURON_SHIFT(name, left, aten_op)                                                        \
  at::Tensor name##_tensor(const at::Tensor& self, const at::Tensor& other) {                    \
    if (at::Tensor out = shift("aten::" #aten_op, left, self, other); out.defined()) return out; \
    return Fallback<ATEN_OP2(aten_op, Tensor)>::call(self, other);                               \
  }                                                                                              \
  at::Tensor name##_scalar(const at::Tensor& self, const at::Scalar& other) {                    \
    if (at::Tensor out = shift("aten::" #aten_op, left, self, wrapped_number(other));            \
        out.defined())                                                                           \
      return out;                                                                                \
    return Fallback<ATEN_OP2(aten_op, Scalar)>::call(self, other);                               \
  }
NEURON_SHIFT(lshift, true, __lshift__)
NEURON_SHIFT(rshift, false, __rshift__)
#undef NEURON_SHIFT

at::Tensor& shift_out(bool left, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const char* op = left ? "aten::bitwise_left_shift" : "aten::bitwise_right_shift";
  const auto sizes = at::infer_size(self.sizes(), other.sizes());
  if (out.device() == self.device() && !overlaps(self, out) && !overlaps(other, out)) {
    if (out.sizes() != c10::IntArrayRef(sizes)) at::native::resize_output(out, sizes);
    if (integer_shift_into(op, left, self, other, out)) return out;
  }
  if (left) return Fallback<ATEN_OP2(bitwise_left_shift, Tensor_out)>::call(self, other, out);
  return Fallback<ATEN_OP2(bitwise_right_shift, Tensor_out)>::call(self, other, out);
}

at::Tensor& left_shift_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return shift_out(true, self, other, out);
}

at::Tensor& right_shift_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return shift_out(false, self, other, out);
}

// In place: the result made apart, then copied (a shift reads limbs it would overwrite).
at::Tensor& shift_in_place(bool left, at::Tensor& self, const at::Tensor& other) {
  if (at::Tensor out = shift(left ? "aten::__ilshift__" : "aten::__irshift__", left, self, other);
      out.defined() && out.sizes() == self.sizes() && out.scalar_type() == self.scalar_type())
    return self.copy_(out);
  if (left) return Fallback<ATEN_OP2(__ilshift__, Tensor)>::call(self, other);
  return Fallback<ATEN_OP2(__irshift__, Tensor)>::call(self, other);
}

at::Tensor& ilshift_tensor(at::Tensor& self, const at::Tensor& other) {
  return shift_in_place(true, self, other);
}
at::Tensor& irshift_tensor(at::Tensor& self, const at::Tensor& other) {
  return shift_in_place(false, self, other);
}
at::Tensor& ilshift_scalar(at::Tensor& self, const at::Scalar& other) {
  return shift_in_place(true, self, wrapped_number(other));
}
at::Tensor& irshift_scalar(at::Tensor& self, const at::Scalar& other) {
  return shift_in_place(false, self, wrapped_number(other));
}

at::Tensor& floor_divide_(at::Tensor& self, const at::Tensor& other) {
  // A copy of the quotient, not in place: an integer quotient is made apart first.
  if (!overlaps(other, self) && floor_divide_into(self, other, self)) return self;
  return Fallback<ATEN_OP2(floor_divide_, Tensor)>::call(self, other);
}

// div(a, b, rounding_mode="floor" or "trunc"); integer a // b in compiled graphs is this.
at::Tensor& div_out_mode(const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> rounding_mode, at::Tensor& out) {
  if ((rounding_mode == "floor" || rounding_mode == "trunc") &&
      divide_rounded_into("aten::div", self, other, rounding_mode == "floor", out))
    return out;
  return Fallback<ATEN_OP2(div, out_mode)>::call(self, other, rounding_mode, out);
}

}  // namespace

// out <- self % other with the divisor's sign, for integers (floats: ops_binary.cpp).
bool integer_remainder_into(const at::Tensor& self, const at::Tensor& other,
                            const at::Tensor& out) {
  const c10::ScalarType type = at::result_type(self, other);
  if (!at::isIntegralType(type, /*includeBool=*/false) || out.scalar_type() != type ||
      out.device() != self.device())
    return false;
  const at::Tensor r = integer_divide("aten::remainder", self, other, IntDivision::remainder);
  if (!r.defined()) return false;
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return true;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", arange_out);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("floor_divide_.Tensor", floor_divide_);
  m.impl("__lshift__.Tensor", lshift_tensor);
  m.impl("__lshift__.Scalar", lshift_scalar);
  m.impl("__rshift__.Tensor", rshift_tensor);
  m.impl("__rshift__.Scalar", rshift_scalar);
  m.impl("__ilshift__.Tensor", ilshift_tensor);
  m.impl("__ilshift__.Scalar", ilshift_scalar);
  m.impl("__irshift__.Tensor", irshift_tensor);
  m.impl("__irshift__.Scalar", irshift_scalar);
  m.impl("bitwise_left_shift.Tensor_out", left_shift_out);
  m.impl("bitwise_right_shift.Tensor_out", right_shift_out);
  m.impl("div.out_mode", div_out_mode);
}

}  // namespace neuronsim::pytorch

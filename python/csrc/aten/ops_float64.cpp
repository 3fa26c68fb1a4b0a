// Conversions to and from float64 (and complex128) on the device, exactly.
//
// The engines compute in FP32 and hold no float64, so a double is taken as what it is in
// memory: an IEEE bit pattern of four 16-bit limbs (integers.h). Every field of the
// pattern (sign, exponent, the mantissa's pieces) is an integer below 2^24, exact in
// FP32, so the conversion is integer arithmetic on the engines' ALUs:
//   float64 -> float32   the 53-bit significand rounded to nearest even at the float's
//                        precision (24 bits, fewer for a subnormal result), the exponent
//                        rebiased; beyond float's range, infinity; NaN stays NaN (quieted)
//   float32 -> float64   exact: the exponent rebiased and the mantissa moved 29 bits up; a
//                        subnormal float is first scaled by 2^64 (exact), so that the
//                        engine's own normalisation finds its leading bit
//   float64 -> bool      any bit set other than the sign
//   integer -> float64   the leading bit found by bytes, the magnitude aligned under the
//                        exponent: exact below 2^53, rounded to nearest even beyond
//   float64 -> integer   the significand moved by the exponent (truncated), then negated;
//                        out of range, what the CPU's cast gives (its "integer indefinite",
//                        through int32 for int32, int16 and int8, through int64 for uint8)
// float16 and bfloat16 go through float32 both ways, as the CPU converts them (a double
// is rounded to float before it is rounded to half).

#include <limits>

#include <ATen/ATen.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {
namespace {

using isa::AluOp;

constexpr const char* kOp = "aten::copy_";

// floor(x / 2^bits) and x mod 2^bits of a non-negative integer x.
Limb high_part(IntExpr& x, Limb v, int bits) {
  const float p = static_cast<float>(1 << bits);
  return x.imm(AluOp::multiply, x.op(AluOp::subtract, v, x.imm(AluOp::mod, v, p)), 1.0f / p);
}
Limb low_part(IntExpr& x, Limb v, int bits) {
  return x.imm(AluOp::mod, v, static_cast<float>(1 << bits));
}

// The limbs of a float32 bit pattern (low 16 bits, high 16 bits) from those of a double.
Limbs float_bits_of_double(IntExpr& x, const Limbs& d) {
  const Limb top = d[3];
  const Limb sign = x.imm(AluOp::is_ge, top, 32768);
  const Limb exponent = low_part(x, high_part(x, top, 4), 11);
  // The significand's top 24 bits (the hidden bit included) and the 29 below them, as
  // their top 13 bits (r13, the first of which is the rounding bit) and the low 16 (d[0]).
  const Limb r13 = low_part(x, d[1], 13);
  const Limb sig = x.op(AluOp::add,
                        x.op(AluOp::add, x.imm(AluOp::multiply, low_part(x, top, 4), 524288.0f),
                             x.imm(AluOp::multiply, d[2], 8.0f)),
                        x.imm(AluOp::add, high_part(x, d[1], 13), 8388608.0f));
  // A subnormal float keeps 24 - shift of those bits: shift = 1 - e, e the float's biased
  // exponent (at most 26: below that every value rounds to zero, as a double's zero does).
  const Limb e = x.imm(AluOp::subtract, exponent, 896.0f);
  const Limb shift =
      x.imm(AluOp::max, x.imm(AluOp::min, x.op(AluOp::subtract, Limb{-1, 1.0f}, e), 26.0f), 0.0f);
  const Limb scaled = x.op(AluOp::multiply, sig, x.op(AluOp::pow, Limb{-1, 0.5f}, shift));
  const Limb fraction = x.imm(AluOp::mod, scaled, 1.0f);
  const Limb kept = x.op(AluOp::subtract, scaled, fraction);
  // Round to nearest, ties to even: `half` compares what is dropped with one half (at
  // 4096), `below` says whether anything lies under the bits `half` sees.
  const Limb shifted = x.imm(AluOp::is_gt, shift, 0.0f);
  const Limb rest = x.imm(AluOp::is_gt, x.op(AluOp::add, r13, d[0]), 0.0f);
  const Limb half = x.select(shifted, x.imm(AluOp::multiply, fraction, 8192.0f), r13);
  const Limb below = x.select(shifted, rest, x.imm(AluOp::is_gt, d[0], 0.0f));
  const Limb up = x.select(x.imm(AluOp::is_equal, half, 4096.0f),
                           x.op(AluOp::max, below, x.imm(AluOp::mod, kept, 2.0f)),
                           x.imm(AluOp::is_gt, half, 4096.0f));
  const Limb q = x.op(AluOp::add, kept, up);  // below 2^24 + 1
  // Bits 30..0 are (max(e - 1, 0) << 23) + q: a carry out of q moves the exponent up.
  const Limb biased =
      x.imm(AluOp::min, x.imm(AluOp::max, x.imm(AluOp::subtract, e, 1.0f), 0.0f), 255.0f);
  Limb hi = x.op(AluOp::add, x.imm(AluOp::multiply, biased, 128.0f), high_part(x, q, 16));
  Limb lo = low_part(x, q, 16);
  const Limb overflow = x.imm(AluOp::is_ge, hi, 255.0f * 128);
  hi = x.select(overflow, Limb{-1, 255.0f * 128}, hi);
  lo = x.select(overflow, Limb{-1, 0.0f}, lo);
  // Infinity and NaN: the mantissa's top 23 bits, a NaN's with its quiet bit set.
  const Limb mantissa = x.imm(AluOp::subtract, sig, 8388608.0f);
  const Limb nan =
      x.imm(AluOp::is_gt, x.op(AluOp::add, mantissa, x.op(AluOp::add, r13, d[0])), 0.0f);
  const Limb nan_hi =
      x.imm(AluOp::add, low_part(x, high_part(x, mantissa, 16), 6), 255.0f * 128 + 64);
  const Limb special = x.imm(AluOp::is_equal, exponent, 2047.0f);
  hi = x.select(special, x.select(nan, nan_hi, Limb{-1, 255.0f * 128}), hi);
  lo = x.select(special, x.select(nan, low_part(x, mantissa, 16), Limb{-1, 0.0f}), lo);
  return {lo, x.op(AluOp::add, hi, x.imm(AluOp::multiply, sign, 32768.0f))};
}

// out (float32) <- a float64 tensor.
bool double_to_float(const at::Tensor& src, const at::Tensor& out) {
  IntExpr x(*layout_of(at::kLong));
  const Limbs bits = float_bits_of_double(x, x.raw(src.view(at::kLong)));
  const at::Tensor words = out.view(at::kInt);
  return x.run_values(kOp, {limb_view(words, 0, false), limb_view(words, 1, false)}, bits);
}

// out (float64) <- an engine float tensor: the float scaled into the normal range where it
// is subnormal (one kernel), then its bit pattern widened (another).
bool float_to_double(const at::Tensor& src, const at::Tensor& out) {
  constexpr float kSmallest = 0x1p-126f, kScale = 0x1p64f;
  const at::Tensor normal = at::empty(src.sizes(), src.options().dtype(at::kFloat));
  kernels::PointwiseExpr e;
  const auto v = e.load(0);
  e.select(e.alu_imm(AluOp::is_lt, e.alu_imm(AluOp::abs_max, v, 0.0f), kSmallest),
           e.alu_imm(AluOp::multiply, v, kScale), v);
  if (!run_pointwise(kOp, "float scaled to normal", e, {src}, normal)) return false;
  IntExpr x(*layout_of(at::kLong));
  const Limbs f = x.raw(normal.view(at::kInt));
  const Limb subnormal = x.imm(AluOp::is_lt, x.imm(AluOp::abs_max, x.load(src), 0.0f), kSmallest);
  const Limb sign = x.imm(AluOp::is_ge, f[1], 32768);
  const Limb exponent = low_part(x, high_part(x, f[1], 7), 8);
  const Limb mantissa_top = low_part(x, f[1], 7);
  const Limb rebiased = x.op(AluOp::subtract, x.imm(AluOp::add, exponent, 896.0f),
                             x.imm(AluOp::multiply, subnormal, 64.0f));
  const Limb wide =
      x.select(x.imm(AluOp::is_equal, exponent, 0.0f), Limb{-1, 0.0f},
               x.select(x.imm(AluOp::is_equal, exponent, 255.0f), Limb{-1, 2047.0f}, rebiased));
  // A NaN comes out quiet, as the CPU's conversion makes it: the mantissa's top bit set.
  const Limb nan = x.op(AluOp::logical_and, x.imm(AluOp::is_equal, exponent, 255.0f),
                        x.imm(AluOp::is_gt, x.op(AluOp::add, mantissa_top, f[0]), 0.0f));
  const Limb quiet = x.op(AluOp::multiply, nan,
                          x.imm(AluOp::multiply, x.imm(AluOp::is_lt, mantissa_top, 64.0f), 8.0f));
  const Limb d3 = x.op(
      AluOp::add,
      x.op(AluOp::add, x.imm(AluOp::multiply, sign, 32768.0f), x.imm(AluOp::multiply, wide, 16.0f)),
      x.op(AluOp::add, high_part(x, mantissa_top, 3), quiet));
  const Limb d2 = x.op(AluOp::add, x.imm(AluOp::multiply, low_part(x, mantissa_top, 3), 8192.0f),
                       high_part(x, f[0], 3));
  const Limb d1 = x.imm(AluOp::multiply, low_part(x, f[0], 3), 8192.0f);
  return x.run(kOp, out.view(at::kLong), {Limb{-1, 0.0f}, d1, d2, d3});
}

// The leading set bit's position in a magnitude's bytes (0 for zero): 8 j for the leading
// nonzero byte j, plus floor(log2) of that byte by comparisons.
Limb leading_bit(IntExpr& x, const Limbs& bytes) {
  Limb lead{-1, 0}, base{-1, 0};
  for (size_t j = 0; j < bytes.size(); ++j) {
    const Limb set = x.imm(AluOp::is_gt, bytes[j], 0.0f);
    lead = x.select(set, bytes[j], lead);
    base = x.select(set, Limb{-1, 8.0f * static_cast<float>(j)}, base);
  }
  for (int t = 1; t < 8; ++t)
    base = x.op(AluOp::add, base, x.imm(AluOp::is_ge, lead, static_cast<float>(1 << t)));
  return base;
}

// The bytes of a magnitude moved up by s bits into `count` bytes (what moves beyond is
// dropped): each byte times 2^(s mod 8), split into the byte and its carry, then moved s / 8
// bytes.
Limbs shifted_up(IntExpr& x, const Limbs& bytes, Limb s, size_t count) {
  const Limb bits = x.imm(AluOp::mod, s, 8.0f);
  const Limb whole = x.imm(AluOp::multiply, x.op(AluOp::subtract, s, bits), 0.125f);
  const Limb factor = x.op(AluOp::pow, Limb{-1, 2.0f}, bits);
  Limbs moved;
  Limb carry{-1, 0};
  for (size_t i = 0; i < count; ++i) {
    const Limb scaled = i < bytes.size() ? x.op(AluOp::multiply, bytes[i], factor) : Limb{-1, 0};
    const Limb low = x.imm(AluOp::mod, scaled, 256.0f);
    moved.push_back(x.op(AluOp::add, low, carry));
    carry = x.imm(AluOp::multiply, x.op(AluOp::subtract, scaled, low), 1.0f / 256);
  }
  Limbs out;
  for (size_t i = 0; i < count; ++i) {
    Limb b{-1, 0};
    for (size_t q = 0; q <= i; ++q)
      b = x.select(x.imm(AluOp::is_equal, whole, static_cast<float>(q)), moved[i - q], b);
    out.push_back(b);
  }
  return out;
}

// The bytes of a magnitude moved down by s bits (0 <= s), what moves below dropped: moved s / 8
// bytes, then each byte's top bits joined by the next byte's low bits.
Limbs shifted_down(IntExpr& x, const Limbs& bytes, Limb s) {
  const Limb bits = x.imm(AluOp::mod, s, 8.0f);
  const Limb whole = x.imm(AluOp::multiply, x.op(AluOp::subtract, s, bits), 0.125f);
  Limbs moved;
  for (size_t i = 0; i < bytes.size(); ++i) {
    Limb b{-1, 0};
    for (size_t q = 0; i + q < bytes.size(); ++q)
      b = x.select(x.imm(AluOp::is_equal, whole, static_cast<float>(q)), bytes[i + q], b);
    moved.push_back(b);
  }
  const Limb p = x.op(AluOp::pow, Limb{-1, 2.0f}, bits);
  const Limb carry_unit = x.op(AluOp::divide, Limb{-1, 256.0f}, p);
  Limbs low, out;
  for (const Limb& b : moved) low.push_back(x.op(AluOp::mod, b, p));
  for (size_t i = 0; i < moved.size(); ++i) {
    const Limb high = x.op(AluOp::divide, x.op(AluOp::subtract, moved[i], low[i]), p);
    out.push_back(i + 1 < moved.size()
                      ? x.op(AluOp::add, high, x.op(AluOp::multiply, low[i + 1], carry_unit))
                      : high);
  }
  return out;
}

// The 16-bit limbs of a 64-bit magnitude moved down by s bits (1 <= s <= 11), rounded to
// nearest even (what int64 needs beyond 2^53).
Limbs shifted_down_rounded(IntExpr& x, const Limbs& limbs, Limb s) {
  const Limb p = x.op(AluOp::pow, Limb{-1, 2.0f}, s);
  const Limb up_unit = x.op(AluOp::divide, Limb{-1, 65536.0f}, p);
  Limbs low, high, out;
  for (const Limb& l : limbs) {
    low.push_back(x.op(AluOp::mod, l, p));
    high.push_back(x.op(AluOp::divide, x.op(AluOp::subtract, l, low.back()), p));
  }
  for (size_t i = 0; i < limbs.size(); ++i)
    out.push_back(i + 1 < limbs.size()
                      ? x.op(AluOp::add, high[i], x.op(AluOp::multiply, low[i + 1], up_unit))
                      : high[i]);
  const Limb half = x.imm(AluOp::multiply, p, 0.5f);
  const Limb up = x.select(x.op(AluOp::is_equal, low[0], half), x.imm(AluOp::mod, out[0], 2.0f),
                           x.op(AluOp::is_gt, low[0], half));
  Limbs increment(limbs.size(), Limb{-1, 0});
  increment[0] = up;
  return x.add(out, increment);
}

// out (float64) <- an integer tensor: exact below 2^53, rounded to nearest even beyond. With
// k the leading bit of |v|, the pattern is ((k + 1022) << 52) + |v| aligned so that bit k
// lands on bit 52: the hidden bit adds the last 1 to the exponent (and a rounding that
// carries out, one more).
bool integer_to_double(const at::Tensor& src, const at::Tensor& out) {
  const Layout in = *layout_of(src.scalar_type());
  IntExpr x(*layout_of(at::kLong));
  const auto [negative, magnitude] = x.sign_and_magnitude(x.operand(src));  // sign-extended
  Limbs bytes = x.bytes(magnitude);
  bytes.resize(static_cast<size_t>(in.limbs * in.bits / 8));  // |v| fits its own width
  const Limb k = leading_bit(x, bytes);
  Limbs up = shifted_up(x, bytes, x.op(AluOp::subtract, Limb{-1, 52.0f}, k), 7);
  up.push_back(Limb{-1, 0});
  Limbs aligned = x.from_bytes(up);
  if (in.limbs == 4) {  // int64: beyond 2^53, rounded
    const Limb s = x.imm(AluOp::max, x.imm(AluOp::subtract, k, 52.0f), 1.0f);
    aligned =
        x.select(x.imm(AluOp::is_ge, k, 53.0f), shifted_down_rounded(x, magnitude, s), aligned);
  }
  aligned[3] = x.op(AluOp::add, aligned[3],
                    x.op(AluOp::add, x.imm(AluOp::multiply, x.imm(AluOp::add, k, 1022.0f), 16.0f),
                         x.imm(AluOp::multiply, negative, 32768.0f)));
  return x.run(kOp, out.view(at::kLong), x.select(x.nonzero(magnitude), aligned, x.constant(0)));
}

// out (an integer type) <- a float64 tensor, truncated toward zero as the CPU's cast: the
// significand moved by the exponent, then negated. What the CPU gives where the value does not
// fit is kept too: int64's "integer indefinite" (-2^63) beyond its range, NaN and infinities
// included; for int32, int16 and int8 int32's indefinite (-2^31) beyond int32's range, and the
// low bits of the 32-bit result (wrapped) below that; for uint8 the low byte of int64's.
bool double_to_integer(const at::Tensor& src, const at::Tensor& out) {
  const Layout to = *layout_of(out.scalar_type());
  IntExpr x(*layout_of(at::kLong));
  const Limbs d = x.raw(src.view(at::kLong));
  const Limb sign = x.imm(AluOp::is_ge, d[3], 32768.0f);
  const Limb exponent = low_part(x, high_part(x, d[3], 4), 11);
  const Limb k = x.imm(AluOp::subtract, exponent, 1023.0f);  // value = sig * 2^(k - 52)
  const Limb hidden = x.imm(AluOp::multiply, x.imm(AluOp::is_gt, exponent, 0.0f), 16.0f);
  const Limbs sig = x.bytes({d[0], d[1], d[2], x.op(AluOp::add, low_part(x, d[3], 4), hidden)});
  const Limbs up = shifted_up(x, sig, x.imm(AluOp::subtract, k, 52.0f), 8);
  const Limbs down = shifted_down(x, sig, x.op(AluOp::subtract, Limb{-1, 52.0f}, k));
  const Limbs magnitude = x.select(x.imm(AluOp::is_lt, k, 0.0f), x.constant(0),
                                   x.from_bytes(x.select(x.imm(AluOp::is_ge, k, 52.0f), up, down)));
  const Limbs value = x.select(sign, x.sub(x.constant(0), magnitude), magnitude);
  const Limbs wide = x.select(x.imm(AluOp::is_ge, k, 63.0f),
                              x.constant(std::numeric_limits<int64_t>::min()), value);
  if (to.limbs == 4) return x.run(kOp, out, wide);
  if (out.scalar_type() == at::kByte)  // uint8 is cast through int64: its low byte
    return x.run_values(kOp, {out}, {x.imm(AluOp::mod, wide[0], 256.0f)});
  // int32's range: |trunc(v)| below 2^31, or -2^31 itself.
  const Limb minimum =
      x.op(AluOp::logical_and, x.op(AluOp::logical_and, sign, x.imm(AluOp::is_equal, k, 31.0f)),
           x.op(AluOp::logical_and, x.imm(AluOp::is_equal, magnitude[1], 32768.0f),
                x.imm(AluOp::is_equal, magnitude[0], 0.0f)));
  const Limb fits = x.op(AluOp::logical_or, x.imm(AluOp::is_lt, k, 31.0f), minimum);
  const Limbs word = x.select(fits, Limbs{value[0], value[1]}, Limbs{Limb{-1, 0}, Limb{-1, 32768}});
  std::vector<at::Tensor> limbs;
  Limbs values;
  for (int i = 0; i < to.limbs; ++i) {
    limbs.push_back(limb_view(out, i, false));
    values.push_back(to.bits == 8 ? x.imm(AluOp::mod, word[0], 256.0f)
                                  : word[static_cast<size_t>(i)]);
  }
  return x.run_values(kOp, limbs, values);
}

// out (bool) <- a float64 tensor != 0.
bool double_to_bool(const at::Tensor& src, const at::Tensor& out) {
  IntExpr x(*layout_of(at::kLong));
  Limbs d = x.raw(src.view(at::kLong));
  d[3] = x.imm(AluOp::mod, d[3], 32768.0f);  // -0.0 is false
  return x.run_values(kOp, {out}, {x.nonzero(d)});
}

bool real_copy(const at::Tensor& src, const at::Tensor& dst) {
  const c10::ScalarType from = src.scalar_type(), to = dst.scalar_type();
  if (from == at::kDouble && to == at::kDouble) {
    IntExpr x(*layout_of(at::kLong));
    return x.run(kOp, dst.view(at::kLong), x.raw(src.view(at::kLong)));
  }
  if (from == at::kDouble && to == at::kFloat) return double_to_float(src, dst);
  if (from == at::kDouble && to == at::kBool) return double_to_bool(src, dst);
  if (from == at::kDouble && is_limb_integer(to)) return double_to_integer(src, dst);
  if (from == at::kDouble && is_engine_float(to)) {
    const at::Tensor single = at::empty(src.sizes(), dst.options().dtype(at::kFloat));
    return double_to_float(src, single) &&
           run_pointwise(kOp, "copy", kernels::PointwiseExpr::copy(), {single}, dst);
  }
  if (to == at::kDouble && is_engine_float(from)) return float_to_double(src, dst);
  if (to == at::kDouble && is_limb_integer(from)) return integer_to_double(src, dst);
  return false;
}

bool is_wide(c10::ScalarType t) {
  return t == at::kDouble || t == at::kComplexDouble;
}

}  // namespace

bool float64_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (!src.device().is_privateuseone() || src.device() != dst.device() ||
      !(is_wide(src.scalar_type()) || is_wide(dst.scalar_type())) || src.sizes() != dst.sizes() ||
      overlaps(src, dst))
    return false;
  const bool from_complex = src.is_complex(), to_complex = dst.is_complex();
  if (from_complex && dst.scalar_type() == at::kBool) {  // either part nonzero
    const at::Tensor parts = at::view_as_real(src);
    const at::Tensor re = at::empty(dst.sizes(), dst.options()), im = at::empty_like(re);
    if (!real_copy(parts.select(-1, 0), re) || !real_copy(parts.select(-1, 1), im)) return false;
    at::Tensor out = dst;
    at::logical_or_out(out, re, im);
    return true;
  }
  if (from_complex && to_complex)  // part by part
    return real_copy(at::view_as_real(src), at::view_as_real(dst));
  if (from_complex)  // the real part, as the CPU's copy takes it
    return real_copy(at::select(at::view_as_real(src), -1, 0), dst);
  if (to_complex) {  // a real value: the imaginary part zero
    const at::Tensor parts = at::view_as_real(dst);
    if (!real_copy(src, at::select(parts, -1, 0))) return false;
    at::select(parts, -1, 1).zero_();
    return true;
  }
  return real_copy(src, dst);
}

}  // namespace neuronsim::pytorch

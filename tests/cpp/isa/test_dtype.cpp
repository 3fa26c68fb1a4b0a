// Tests of the element types and their FP32 conversions.
//
// Expected values come from hand-computed bit patterns and from a reference codec below that
// works in double precision with frexp/ldexp/nearbyint, independent of the integer bit
// manipulation in dtype.cpp.
#include "neuronsim/isa/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace neuronsim::isa {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float f32(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
uint32_t bits32(float f) {
  return std::bit_cast<uint32_t>(f);
}

// ---------------------------------------------------------------------------------------------
// Reference codec for a binary format with `ebits` exponent and `mbits` mantissa bits.
// `fn` means the all-ones exponent field holds finite values (only all-ones mantissa is NaN).
struct RefFormat {
  int ebits;
  int mbits;
  int bias;
  int top_field;  // largest exponent field holding finite values
  bool fn;

  int64_t all_ones() const { return (int64_t{1} << ebits) - 1; }
  int64_t mant_mask() const { return (int64_t{1} << mbits) - 1; }
  int64_t sign_bit() const { return int64_t{1} << (ebits + mbits); }
  int64_t max_code() const { return (int64_t{top_field} << mbits) | (mant_mask() - (fn ? 1 : 0)); }
  int64_t inf_code() const { return all_ones() << mbits; }
  int64_t num_codes() const { return sign_bit() * 2; }
};

constexpr RefFormat kRefFp16{5, 10, 15, 30, false};
constexpr RefFormat kRefBf16{8, 7, 127, 254, false};
constexpr RefFormat kRefTf32{8, 10, 127, 254, false};
constexpr RefFormat kRefE4m3{4, 3, 7, 15, true};       // OCP e4m3fn, emax 8
constexpr RefFormat kRefE4m3Ieee{4, 3, 7, 14, false};  // emax 7
constexpr RefFormat kRefE5m2{5, 2, 15, 30, false};

bool ref_is_nan(const RefFormat& f, int64_t code) {
  const int64_t field = (code >> f.mbits) & f.all_ones();
  const int64_t mant = code & f.mant_mask();
  if (field != f.all_ones()) return false;
  return f.fn ? mant == f.mant_mask() : mant != 0;
}

double ref_decode(const RefFormat& f, int64_t code) {
  const double sign = (code & f.sign_bit()) != 0 ? -1.0 : 1.0;
  const int64_t field = (code >> f.mbits) & f.all_ones();
  const auto mant = static_cast<double>(code & f.mant_mask());
  if (ref_is_nan(f, code)) return std::numeric_limits<double>::quiet_NaN();
  if (!f.fn && field == f.all_ones()) return sign * std::numeric_limits<double>::infinity();
  if (field == 0) return sign * std::ldexp(mant, 1 - f.bias - f.mbits);
  return sign * std::ldexp(1.0 + std::ldexp(mant, -f.mbits), static_cast<int>(field) - f.bias);
}

// Round-to-nearest-even encode of a non-NaN float; overflow saturates or goes to Inf/NaN.
int64_t ref_encode(const RefFormat& f, float x, bool saturate) {
  const int64_t sign = std::signbit(x) ? f.sign_bit() : 0;
  const double a = std::fabs(static_cast<double>(x));
  int64_t code = 0;
  if (std::isinf(a)) {
    code = f.max_code() + 1;
  } else if (a != 0) {
    int e = 0;
    std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
    const int emin = 1 - f.bias;
    int exp = std::max(e - 1, emin);
    // Significand in units of the last place at exponent `exp`; exact in double, then RNE.
    auto q = static_cast<int64_t>(std::nearbyint(std::ldexp(a, f.mbits - exp)));
    if (q == (int64_t{2} << f.mbits)) {
      q >>= 1;
      ++exp;
    }
    code = q < (int64_t{1} << f.mbits)
               ? q
               : (int64_t{exp + f.bias} << f.mbits) | (q - (int64_t{1} << f.mbits));
  }
  if (code > f.max_code()) {
    code = saturate ? f.max_code() : (f.fn ? f.inf_code() | f.mant_mask() : f.inf_code());
  }
  return sign | code;
}

// ---------------------------------------------------------------------------------------------
// Adapters so the same checks run over every format under test.
struct Codec {
  const char* name;
  RefFormat ref;
  DType type;
  Fp8Config cfg;
  int64_t encode(float x) const {
    switch (type) {
      case DType::bf16:
        return float_to_bf16(x);
      case DType::fp16:
        return float_to_fp16(x);
      case DType::tf32:
        return float_to_tf32(x) >> 13;
      default:
        return float_to_fp8(type, x, cfg);
    }
  }
  float decode(int64_t code) const {
    switch (type) {
      case DType::bf16:
        return bf16_to_float(static_cast<uint16_t>(code));
      case DType::fp16:
        return fp16_to_float(static_cast<uint16_t>(code));
      case DType::tf32:
        return f32(static_cast<uint32_t>(code << 13));
      default:
        return fp8_to_float(type, static_cast<uint8_t>(code), cfg);
    }
  }
};

std::vector<Codec> all_codecs() {
  Fp8Config e4_ieee;
  e4_ieee.emax_e4m3 = 7;
  Fp8Config no_sat;
  no_sat.saturate = false;
  Fp8Config e4_ieee_no_sat = e4_ieee;
  e4_ieee_no_sat.saturate = false;
  return {
      {"bf16", kRefBf16, DType::bf16, {}},
      {"fp16", kRefFp16, DType::fp16, {}},
      {"tf32", kRefTf32, DType::tf32, {}},
      {"e4m3", kRefE4m3, DType::fp8_e4m3, {}},
      {"e4m3_nosat", kRefE4m3, DType::fp8_e4m3, no_sat},
      {"e4m3_ieee", kRefE4m3Ieee, DType::fp8_e4m3, e4_ieee},
      {"e4m3_ieee_nosat", kRefE4m3Ieee, DType::fp8_e4m3, e4_ieee_no_sat},
      {"e5m2", kRefE5m2, DType::fp8_e5m2, {}},
      {"e5m2_nosat", kRefE5m2, DType::fp8_e5m2, no_sat},
  };
}

// Only FP8 has a saturating mode; bf16/fp16/tf32 always overflow to Inf.
bool saturates(const Codec& c) {
  return is_float(c.type) && dtype_size(c.type) == 1 && c.cfg.saturate;
}

// ---------------------------------------------------------------------------------------------
// Hand-computed bit patterns.

TEST(DTypeBf16, KnownPatterns) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(f32(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(f32(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(f32(0x3F808001)), 0x3F81);  // just above the tie
  EXPECT_EQ(float_to_bf16(f32(0x3F807FFF)), 0x3F80);  // just below the tie
  EXPECT_EQ(float_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds past max
  EXPECT_EQ(float_to_bf16(f32(0x00010000)), 0x0001);  // smallest bf16 subnormal, 2^-133
  EXPECT_EQ(float_to_bf16(f32(0x00008000)), 0x0000);  // half of it: tie to even zero
  EXPECT_EQ(float_to_bf16(f32(0x00018000)), 0x0002);  // 1.5 subnormal ulps: tie to even 2
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));
}

TEST(DTypeBf16, NaNStaysNaNWithSign) {
  EXPECT_EQ(float_to_bf16(kNaN) & 0x7F80, 0x7F80);
  EXPECT_NE(float_to_bf16(kNaN) & 0x007F, 0);
  EXPECT_EQ(float_to_bf16(-kNaN) & 0x8000, 0x8000);
  // A signalling NaN whose payload lies only in the dropped bits must not become Inf.
  const uint16_t snan = float_to_bf16(f32(0x7F800001));
  EXPECT_TRUE(std::isnan(bf16_to_float(snan))) << std::hex << snan;
  EXPECT_TRUE(std::isnan(bf16_to_float(0xFFC1)));
  EXPECT_TRUE(std::signbit(bf16_to_float(0xFFC1)));
}

TEST(DTypeFp16, KnownPatterns) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);  // tie past max rounds to even: Inf
  EXPECT_EQ(float_to_fp16(-1e6f), 0xFC00);
  EXPECT_EQ(float_to_fp16(kInf), 0x7C00);
  EXPECT_EQ(float_to_fp16(-kInf), 0xFC00);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to zero
  EXPECT_EQ(float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulps: tie to even 2
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);        // underflow keeps the sign
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even stays
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(float_to_fp16(f32(0x3F801001)), 0x3C01);               // just above the tie
  EXPECT_EQ(float_to_fp16(f32(0x387FE000)), 0x0400);  // largest subnormal + half ulp -> normal
  EXPECT_EQ(fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_float(0xFC00), -kInf);
}

TEST(DTypeFp16, NaNStaysNaNWithSign) {
  const uint16_t pos = float_to_fp16(kNaN);
  const uint16_t neg = float_to_fp16(-kNaN);
  EXPECT_EQ(pos & 0xFC00, 0x7C00);
  EXPECT_NE(pos & 0x03FF, 0);
  EXPECT_EQ(neg & 0xFC00, 0xFC00);
  EXPECT_NE(neg & 0x03FF, 0);
  EXPECT_NE(float_to_fp16(f32(0x7F800001)) & 0x03FF, 0);  // payload below fp16's bits
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7C01)));
  EXPECT_TRUE(std::signbit(fp16_to_float(0xFE00)));
}

TEST(DTypeTf32, KnownPatterns) {
  EXPECT_EQ(float_to_tf32(1.0f), 0x3F800000u);
  EXPECT_EQ(float_to_tf32(-0.0f), 0x80000000u);
  EXPECT_EQ(float_to_tf32(f32(0x3F801000)), 0x3F800000u);  // tie, even stays
  EXPECT_EQ(float_to_tf32(f32(0x3F803000)), 0x3F804000u);  // tie, odd rounds up
  EXPECT_EQ(float_to_tf32(f32(0x3F801001)), 0x3F802000u);
  EXPECT_EQ(float_to_tf32(f32(0x3F800FFF)), 0x3F800000u);
  EXPECT_EQ(float_to_tf32(f32(0x3F9FFFFF)), 0x3FA00000u);  // carry into the mantissa
  EXPECT_EQ(float_to_tf32(f32(0x3FFFFFFF)), 0x40000000u);  // carry into the exponent
  EXPECT_EQ(float_to_tf32(std::numeric_limits<float>::max()), 0x7F800000u);
  EXPECT_EQ(float_to_tf32(f32(0x7F7FE000)), 0x7F7FE000u);
  EXPECT_EQ(float_to_tf32(-kInf), 0xFF800000u);
  EXPECT_EQ(float_to_tf32(f32(0x00001000)), 0x00000000u);  // subnormal tie to zero
  EXPECT_EQ(float_to_tf32(f32(0x00003000)), 0x00004000u);
  const uint32_t nan = float_to_tf32(f32(0xFF800001));
  EXPECT_TRUE(std::isnan(f32(nan))) << std::hex << nan;
  EXPECT_TRUE(std::signbit(f32(nan)));
  EXPECT_EQ(nan & 0x1FFFu, 0u);
}

TEST(DTypeFp8, E4m3DefaultPatterns) {
  const DType t = DType::fp8_e4m3;
  EXPECT_EQ(float_to_fp8(t, 1.0f), 0x38);
  EXPECT_EQ(float_to_fp8(t, -1.0f), 0xB8);
  EXPECT_EQ(float_to_fp8(t, 448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8(t, -448.0f), 0xFE);
  EXPECT_EQ(float_to_fp8(t, 464.0f), 0x7E);  // tie between 448 (even) and NaN slot 480
  EXPECT_EQ(float_to_fp8(t, 500.0f), 0x7E);  // saturates
  EXPECT_EQ(float_to_fp8(t, -kInf), 0xFE);
  EXPECT_EQ(float_to_fp8(t, std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_fp8(t, std::ldexp(7.0f, -9)), 0x07);   // largest subnormal
  EXPECT_EQ(float_to_fp8(t, std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(float_to_fp8(t, std::ldexp(1.0f, -10)), 0x00);  // tie to zero
  EXPECT_EQ(float_to_fp8(t, -std::ldexp(1.0f, -12)), 0x80);
  EXPECT_EQ(float_to_fp8(t, 1.0625f), 0x38);  // tie, even stays
  EXPECT_EQ(float_to_fp8(t, 1.1875f), 0x3A);  // tie, odd rounds up
  EXPECT_EQ(float_to_fp8(t, kNaN), 0x7F);
  EXPECT_EQ(float_to_fp8(t, -kNaN), 0xFF);
  EXPECT_TRUE(std::isnan(fp8_to_float(t, 0x7F)));
  EXPECT_TRUE(std::isnan(fp8_to_float(t, 0xFF)));
  EXPECT_TRUE(std::signbit(fp8_to_float(t, 0xFF)));
  EXPECT_EQ(fp8_to_float(t, 0x78), 256.0f);  // exponent field 15 is finite
  EXPECT_EQ(fp8_to_float(t, 0x7E), 448.0f);

  Fp8Config no_sat;
  no_sat.saturate = false;
  EXPECT_EQ(float_to_fp8(t, 500.0f, no_sat), 0x7F);
  EXPECT_EQ(float_to_fp8(t, -500.0f, no_sat), 0xFF);
  EXPECT_EQ(float_to_fp8(t, kInf, no_sat), 0x7F);
  EXPECT_EQ(float_to_fp8(t, 464.0f, no_sat), 0x7E);
  EXPECT_EQ(float_to_fp8(t, 465.0f, no_sat), 0x7F);
}

TEST(DTypeFp8, E4m3Emax7Patterns) {
  const DType t = DType::fp8_e4m3;
  Fp8Config cfg;
  cfg.emax_e4m3 = 7;
  EXPECT_EQ(float_to_fp8(t, 240.0f, cfg), 0x77);
  EXPECT_EQ(float_to_fp8(t, 300.0f, cfg), 0x77);
  EXPECT_EQ(float_to_fp8(t, 1.0f, cfg), 0x38);
  EXPECT_EQ(fp8_to_float(t, 0x78, cfg), kInf);
  EXPECT_EQ(fp8_to_float(t, 0xF8, cfg), -kInf);
  for (int code = 0x79; code <= 0x7F; ++code) {
    EXPECT_TRUE(std::isnan(fp8_to_float(t, static_cast<uint8_t>(code), cfg))) << code;
  }
  cfg.saturate = false;
  EXPECT_EQ(float_to_fp8(t, 300.0f, cfg), 0x78);
  EXPECT_EQ(float_to_fp8(t, -300.0f, cfg), 0xF8);
  EXPECT_EQ(float_to_fp8(t, 247.0f, cfg), 0x77);
  EXPECT_EQ(float_to_fp8(t, 248.0f, cfg), 0x78);  // tie past max: 240's mantissa is odd
  EXPECT_EQ(float_to_fp8(t, kInf, cfg), 0x78);
  EXPECT_EQ(float_to_fp8(t, kNaN, cfg) & 0x7F, 0x7F);
  EXPECT_DOUBLE_EQ(dtype_max(t, cfg), 240.0);
}

TEST(DTypeFp8, E5m2Patterns) {
  const DType t = DType::fp8_e5m2;
  EXPECT_EQ(float_to_fp8(t, 1.0f), 0x3C);
  EXPECT_EQ(float_to_fp8(t, 57344.0f), 0x7B);
  EXPECT_EQ(float_to_fp8(t, 1e9f), 0x7B);  // saturates by default
  EXPECT_EQ(float_to_fp8(t, std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_fp8(t, std::ldexp(1.0f, -14)), 0x04);
  EXPECT_EQ(float_to_fp8(t, -0.0f), 0x80);
  EXPECT_EQ(fp8_to_float(t, 0x7C), kInf);
  EXPECT_EQ(fp8_to_float(t, 0xFC), -kInf);
  EXPECT_TRUE(std::isnan(fp8_to_float(t, 0x7D)));
  EXPECT_EQ(fp8_to_float(t, 0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_to_float(t, 0x7B), 57344.0f);
  Fp8Config no_sat;
  no_sat.saturate = false;
  EXPECT_EQ(float_to_fp8(t, 1e9f, no_sat), 0x7C);
  EXPECT_EQ(float_to_fp8(t, -kInf, no_sat), 0xFC);
  EXPECT_EQ(float_to_fp8(t, 61439.0f, no_sat), 0x7B);
  EXPECT_EQ(float_to_fp8(t, 61440.0f, no_sat), 0x7C);  // tie past max rounds to Inf
  const uint8_t nan = float_to_fp8(t, -kNaN);
  EXPECT_TRUE(std::isnan(fp8_to_float(t, nan)));
  EXPECT_EQ(nan & 0x80, 0x80);
}

// ---------------------------------------------------------------------------------------------
// Exhaustive checks over every code of every format.

TEST(DTypeExhaustive, DecodeMatchesReference) {
  for (const Codec& c : all_codecs()) {
    if (c.type == DType::tf32) continue;  // 2^19 codes; covered by the round-trip test
    for (int64_t code = 0; code < c.ref.num_codes(); ++code) {
      const float got = c.decode(code);
      const double want = ref_decode(c.ref, code);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << c.name << " code " << code;
        ASSERT_EQ(std::signbit(got), (code & c.ref.sign_bit()) != 0) << c.name << " " << code;
      } else {
        ASSERT_EQ(static_cast<double>(got), want) << c.name << " code " << code;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << c.name << " code " << code;
      }
    }
  }
}

TEST(DTypeExhaustive, RoundTripEveryCode) {
  for (const Codec& c : all_codecs()) {
    for (int64_t code = 0; code < c.ref.num_codes(); ++code) {
      const int64_t back = c.encode(c.decode(code));
      if (ref_is_nan(c.ref, code)) {
        ASSERT_TRUE(ref_is_nan(c.ref, back)) << c.name << " code " << code << " -> " << back;
        ASSERT_EQ(back & c.ref.sign_bit(), code & c.ref.sign_bit()) << c.name << " " << code;
      } else if (std::isinf(c.decode(code)) && saturates(c)) {
        // Saturation clamps every overflow, Inf included, to the largest finite value.
        ASSERT_EQ(back, (code & c.ref.sign_bit()) | c.ref.max_code()) << c.name;
      } else {
        ASSERT_EQ(back, code) << c.name;
      }
    }
  }
}

// Every midpoint between neighbouring finite values is an exact tie in FP32: it must go to the
// even code, and one FP32 ulp either side must go to the nearer neighbour.
TEST(DTypeExhaustive, TiesBetweenNeighboursRoundToEven) {
  for (const Codec& c : all_codecs()) {
    if (c.type == DType::tf32) continue;  // same algorithm as bf16; spot-checked above
    for (int64_t lo = 0; lo < c.ref.max_code(); ++lo) {
      const int64_t hi = lo + 1;
      const double mid = (ref_decode(c.ref, lo) + ref_decode(c.ref, hi)) / 2;
      const auto x = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(x), mid) << c.name << " midpoint not exact";
      for (const int64_t sign : {int64_t{0}, c.ref.sign_bit()}) {
        const float s = sign != 0 ? -1.0f : 1.0f;
        ASSERT_EQ(c.encode(s * x), sign | ((lo & 1) == 0 ? lo : hi)) << c.name << " tie " << mid;
        ASSERT_EQ(c.encode(s * std::nextafter(x, kInf)), sign | hi) << c.name << " " << mid;
        ASSERT_EQ(c.encode(s * std::nextafter(x, 0.0f)), sign | lo) << c.name << " " << mid;
      }
    }
  }
}

// Random FP32 inputs, both uniformly over bit patterns and concentrated in each format's
// range, against the double-precision reference encoder.
TEST(DTypeExhaustive, RandomInputsMatchReference) {
  std::mt19937 rng(12345);
  for (const Codec& c : all_codecs()) {
    const int emin = 1 - c.ref.bias - c.ref.mbits - 2;
    const int emax = std::min(c.ref.top_field - c.ref.bias + 2, 127);
    std::uniform_int_distribution<int> exp_dist(std::max(emin, -149), emax);
    for (int i = 0; i < 200000; ++i) {
      float x = 0;
      if (i % 2 == 0) {
        x = f32(static_cast<uint32_t>(rng()));
      } else {
        const float m = 1.0f + std::ldexp(static_cast<float>(rng() & 0x7FFFFF), -23);
        x = std::ldexp((rng() & 1) != 0 ? -m : m, exp_dist(rng));
      }
      if (std::isnan(x)) continue;
      ASSERT_EQ(c.encode(x), ref_encode(c.ref, x, saturates(c)))
          << c.name << " x=" << x << " bits=0x" << std::hex << bits32(x);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Integers and bool.

template <typename T>
T store_as(DType t, float v) {
  T out{};
  store_from_float(t, v, &out);
  return out;
}

TEST(DTypeInt, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(store_as<int8_t>(DType::int8, 2.5f), 2);
  EXPECT_EQ(store_as<int8_t>(DType::int8, 3.5f), 4);
  EXPECT_EQ(store_as<int8_t>(DType::int8, -2.5f), -2);
  EXPECT_EQ(store_as<int8_t>(DType::int8, -0.4f), 0);
  EXPECT_EQ(store_as<int8_t>(DType::int8, 2.6f), 3);
  EXPECT_EQ(store_as<int8_t>(DType::int8, -129.0f), -128);
  EXPECT_EQ(store_as<int8_t>(DType::int8, 127.5f), 127);
  EXPECT_EQ(store_as<int8_t>(DType::int8, 1e30f), 127);
  EXPECT_EQ(store_as<int8_t>(DType::int8, -kInf), -128);
  EXPECT_EQ(store_as<int8_t>(DType::int8, kNaN), 0);
  EXPECT_EQ(store_as<uint8_t>(DType::uint8, 300.0f), 255);
  EXPECT_EQ(store_as<uint8_t>(DType::uint8, -1.0f), 0);
  EXPECT_EQ(store_as<uint8_t>(DType::uint8, 254.5f), 254);
  EXPECT_EQ(store_as<uint8_t>(DType::uint8, kNaN), 0);
  EXPECT_EQ(store_as<int16_t>(DType::int16, 40000.0f), 32767);
  EXPECT_EQ(store_as<int16_t>(DType::int16, -40000.0f), -32768);
  EXPECT_EQ(store_as<int16_t>(DType::int16, -1234.5f), -1234);
  EXPECT_EQ(store_as<uint16_t>(DType::uint16, 70000.0f), 65535);
  EXPECT_EQ(store_as<uint16_t>(DType::uint16, 65534.5f), 65534);
  EXPECT_EQ(store_as<int32_t>(DType::int32, 3e9f), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(store_as<int32_t>(DType::int32, -3e9f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(store_as<int32_t>(DType::int32, 2147483648.0f), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(store_as<int32_t>(DType::int32, -2147483648.0f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(store_as<int32_t>(DType::int32, 16777216.0f), 16777216);
  EXPECT_EQ(store_as<int32_t>(DType::int32, kNaN), 0);
  EXPECT_EQ(store_as<uint32_t>(DType::uint32, 4e9f), 4000000000u);
  EXPECT_EQ(store_as<uint32_t>(DType::uint32, 5e9f), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(store_as<uint32_t>(DType::uint32, -0.5f), 0u);
  EXPECT_EQ(store_as<uint32_t>(DType::uint32, kInf), std::numeric_limits<uint32_t>::max());
}

TEST(DTypeInt, LoadsAsFloat) {
  const int8_t i8 = -128;
  const uint8_t u8 = 255;
  const int16_t i16 = -32768;
  const uint16_t u16 = 65535;
  const int32_t i32 = 16777217;  // not representable: rounds to even 2^24
  const uint32_t u32 = 4294967295u;
  EXPECT_EQ(load_as_float(DType::int8, &i8), -128.0f);
  EXPECT_EQ(load_as_float(DType::uint8, &u8), 255.0f);
  EXPECT_EQ(load_as_float(DType::int16, &i16), -32768.0f);
  EXPECT_EQ(load_as_float(DType::uint16, &u16), 65535.0f);
  EXPECT_EQ(load_as_float(DType::int32, &i32), 16777216.0f);
  EXPECT_EQ(load_as_float(DType::uint32, &u32), 4294967296.0f);
}

TEST(DTypeBool, StoresNonZeroAsOne) {
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, 0.0f), 0);
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, -0.0f), 0);
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, 0.5f), 1);
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, -7.0f), 1);
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, kNaN), 1);
  EXPECT_EQ(store_as<uint8_t>(DType::boolean, std::ldexp(1.0f, -149)), 1);
  const uint8_t zero = 0;
  const uint8_t one = 1;
  const uint8_t other = 5;
  EXPECT_EQ(load_as_float(DType::boolean, &zero), 0.0f);
  EXPECT_EQ(load_as_float(DType::boolean, &one), 1.0f);
  EXPECT_EQ(load_as_float(DType::boolean, &other), 1.0f);
}

TEST(DTypeStore, FloatTypesWriteTheirBitPatterns) {
  EXPECT_EQ(store_as<uint32_t>(DType::fp32, 1.5f), 0x3FC00000u);
  EXPECT_EQ(store_as<uint16_t>(DType::bf16, 1.0f), 0x3F80);
  EXPECT_EQ(store_as<uint16_t>(DType::fp16, 65520.0f), 0x7C00);
  EXPECT_EQ(store_as<uint32_t>(DType::tf32, f32(0x3F803000)), 0x3F804000u);
  EXPECT_EQ(store_as<uint8_t>(DType::fp8_e4m3, 448.0f), 0x7E);
  EXPECT_EQ(store_as<uint8_t>(DType::fp8_e5m2, 1.0f), 0x3C);
  Fp8Config cfg;
  cfg.emax_e4m3 = 7;
  cfg.saturate = false;
  uint8_t out = 0;
  store_from_float(DType::fp8_e4m3, 300.0f, &out, cfg);
  EXPECT_EQ(out, 0x78);
  EXPECT_EQ(load_as_float(DType::fp8_e4m3, &out, cfg), kInf);
  EXPECT_EQ(load_as_float(DType::fp8_e4m3, &out), 256.0f);  // default layout: finite
}

// ---------------------------------------------------------------------------------------------
// Bulk conversions agree with the scalar ones, for every type, from unaligned buffers.

std::vector<float> sample_values() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          2.5f,
                          3.5f,
                          -129.0f,
                          300.0f,
                          448.0f,
                          500.0f,
                          65504.0f,
                          65520.0f,
                          1e9f,
                          -1e9f,
                          4e9f,
                          kInf,
                          -kInf,
                          kNaN,
                          -kNaN,
                          std::ldexp(1.0f, -9),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -140),
                          f32(0x3F808000),
                          f32(0x3F818000),
                          f32(0x3F803000)};
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  for (int i = 0; i < 1000; ++i) v.push_back(dist(rng));
  return v;
}

TEST(DTypeBulk, MatchesScalarConversions) {
  const std::vector<float> src = sample_values();
  Fp8Config cfgs[2];
  cfgs[1].emax_e4m3 = 7;
  cfgs[1].saturate = false;
  for (const Fp8Config& cfg : cfgs) {
    for (int ti = 0; ti < kNumDTypes; ++ti) {
      const auto t = static_cast<DType>(ti);
      const size_t sz = dtype_size(t);
      const size_t n = src.size();
      std::vector<unsigned char> bulk(n * sz + 1), scalar(n * sz + 1);
      convert_from_float(t, src.data(), bulk.data() + 1, n, cfg);  // +1: unaligned
      for (size_t i = 0; i < n; ++i) store_from_float(t, src[i], scalar.data() + 1 + i * sz, cfg);
      ASSERT_EQ(bulk, scalar) << dtype_name(t);

      std::vector<float> back(n);
      convert_to_float(t, bulk.data() + 1, back.data(), n, cfg);
      for (size_t i = 0; i < n; ++i) {
        const float want = load_as_float(t, bulk.data() + 1 + i * sz, cfg);
        ASSERT_EQ(bits32(back[i]), bits32(want)) << dtype_name(t) << " element " << i;
      }
    }
  }
}

TEST(DTypeBulk, Fp32IsBitExactCopy) {
  const std::vector<float> src = sample_values();
  std::vector<float> dst(src.size());
  convert_from_float(DType::fp32, src.data(), dst.data(), src.size());
  ASSERT_EQ(std::memcmp(src.data(), dst.data(), src.size() * sizeof(float)), 0);
  std::vector<float> back(src.size());
  convert_to_float(DType::fp32, dst.data(), back.data(), dst.size());
  ASSERT_EQ(std::memcmp(src.data(), back.data(), src.size() * sizeof(float)), 0);
  convert_to_float(DType::fp32, nullptr, nullptr, 0);  // empty ranges are fine
  convert_from_float(DType::bf16, nullptr, nullptr, 0);
}

// ---------------------------------------------------------------------------------------------
// Names, sizes, categories, maxima.

TEST(DTypeNames, CanonicalNamesRoundTrip) {
  const char* names[kNumDTypes] = {"float32",     "bfloat16", "float16", "tfloat32", "float8_e4m3",
                                   "float8_e5m2", "int8",     "uint8",   "int16",    "uint16",
                                   "int32",       "uint32",   "bool"};
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(dtype_name(t), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), t) << names[i];
  }
}

TEST(DTypeNames, AliasesAndUnknown) {
  const std::pair<const char*, DType> aliases[] = {
      {"fp32", DType::fp32},       {"f32", DType::fp32},          {"bf16", DType::bf16},
      {"fp16", DType::fp16},       {"f16", DType::fp16},          {"half", DType::fp16},
      {"tf32", DType::tf32},       {"fp8_e4m3", DType::fp8_e4m3}, {"fp8e4", DType::fp8_e4m3},
      {"f8e4m3", DType::fp8_e4m3}, {"fp8_e5m2", DType::fp8_e5m2}, {"fp8e5", DType::fp8_e5m2},
      {"f8e5m2", DType::fp8_e5m2}, {"i8", DType::int8},           {"u8", DType::uint8},
      {"i16", DType::int16},       {"u16", DType::uint16},        {"i32", DType::int32},
      {"u32", DType::uint32},      {"bool_", DType::boolean},     {"boolean", DType::boolean},
  };
  for (const auto& [name, t] : aliases) EXPECT_EQ(parse_dtype(name), t) << name;
  EXPECT_EQ(parse_dtype("float64"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(parse_dtype("float3"), std::nullopt);
  EXPECT_EQ(parse_dtype("float32 "), std::nullopt);
}

TEST(DTypeInfo, SizesAndCategories) {
  const size_t sizes[kNumDTypes] = {4, 2, 2, 4, 1, 1, 1, 1, 2, 2, 4, 4, 1};
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(dtype_size(t), sizes[i]) << dtype_name(t);
    EXPECT_EQ(is_float(t), i <= static_cast<int>(DType::fp8_e5m2)) << dtype_name(t);
  }
  EXPECT_TRUE(is_signed_int(DType::int8));
  EXPECT_TRUE(is_signed_int(DType::int16));
  EXPECT_TRUE(is_signed_int(DType::int32));
  EXPECT_FALSE(is_signed_int(DType::uint8));
  EXPECT_FALSE(is_signed_int(DType::uint32));
  EXPECT_FALSE(is_signed_int(DType::fp32));
  EXPECT_FALSE(is_signed_int(DType::boolean));
  EXPECT_FALSE(is_float(DType::boolean));
}

TEST(DTypeInfo, Maxima) {
  EXPECT_EQ(dtype_max(DType::fp32), static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(dtype_max(DType::bf16), std::ldexp(255.0, 120));  // 0x7F7F = 1.9921875 * 2^127
  EXPECT_FLOAT_EQ(static_cast<float>(dtype_max(DType::bf16)), 3.3895314e38f);
  EXPECT_EQ(dtype_max(DType::fp16), 65504.0);
  EXPECT_EQ(dtype_max(DType::tf32), std::ldexp(2047.0, 117));  // (2 - 2^-10) * 2^127
  EXPECT_EQ(dtype_max(DType::fp8_e4m3), 448.0);
  EXPECT_EQ(dtype_max(DType::fp8_e5m2), 57344.0);
  Fp8Config cfg;
  cfg.emax_e4m3 = 7;
  EXPECT_EQ(dtype_max(DType::fp8_e4m3, cfg), 240.0);
  EXPECT_EQ(dtype_max(DType::int8), 127.0);
  EXPECT_EQ(dtype_max(DType::uint8), 255.0);
  EXPECT_EQ(dtype_max(DType::int16), 32767.0);
  EXPECT_EQ(dtype_max(DType::uint16), 65535.0);
  EXPECT_EQ(dtype_max(DType::int32), 2147483647.0);
  EXPECT_EQ(dtype_max(DType::uint32), 4294967295.0);
  EXPECT_EQ(dtype_max(DType::boolean), 1.0);
}

}  // namespace
}  // namespace neuronsim::isa

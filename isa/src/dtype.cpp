// Conversions between FP32 and the element types of the NeuronCore engines.
//
// Every float conversion works on FP32 bit patterns with integer arithmetic, so the result
// does not depend on the host's floating-point rounding mode or flush-to-zero settings.
#include "neuronsim/isa/dtype.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace neuronsim::isa {
namespace {

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32ExpMask = 0x7F800000u;
constexpr uint32_t kF32MantMask = 0x007FFFFFu;
constexpr uint32_t kF32QuietBit = 0x00400000u;
constexpr int kF32MantBits = 23;
constexpr int kF32Bias = 127;

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}
float float_of(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
bool is_nan_bits(uint32_t bits) {
  return (bits & kAbsMask) > kF32ExpMask;
}

// Divides x by 2^s, rounding to nearest with ties to even.
uint64_t shift_right_rne(uint64_t x, int s) {
  if (s <= 0) return x;
  if (s > 40) return 0;  // callers pass x < 2^32, which is below half of 2^s: rounds to zero
  const uint64_t q = x >> s;
  const uint64_t rem = x & ((uint64_t{1} << s) - 1);
  const uint64_t half = uint64_t{1} << (s - 1);
  return (rem > half || (rem == half && (q & 1))) ? q + 1 : q;
}

// A small binary float: sign, `ebits` exponent bits, `mbits` mantissa bits, `bias`.
// Exponent fields 1..top_field hold finite normals. When top_field is the all-ones field the
// layout is "fn" (finite + NaN, as OCP e4m3): no infinities, and only the all-ones mantissa
// there is NaN. Otherwise the all-ones field is IEEE-style: Inf (mantissa 0) or NaN.
struct MiniFloat {
  int ebits;
  int mbits;
  int bias;
  int top_field;

  uint32_t all_ones() const { return (1u << ebits) - 1; }
  uint32_t mant_mask() const { return (1u << mbits) - 1; }
  bool fn() const { return static_cast<uint32_t>(top_field) == all_ones(); }
  uint32_t sign_bit() const { return 1u << (ebits + mbits); }
  uint32_t inf_code() const { return all_ones() << mbits; }
  uint32_t nan_code() const { return inf_code() | mant_mask(); }
  // In the fn layout the all-ones mantissa of the top field is NaN, so max finite is one below.
  uint32_t max_code() const {
    return (static_cast<uint32_t>(top_field) << mbits) | (fn() ? mant_mask() - 1 : mant_mask());
  }
};

constexpr MiniFloat kFp16{5, 10, 15, 30};

// Rounds the magnitude `a` (FP32 bits, sign clear, not NaN) to `fmt` with RNE. Returns the
// magnitude code; a result above fmt.max_code() means the rounded value overflowed.
uint32_t round_magnitude(const MiniFloat& fmt, uint32_t a) {
  const int ef = static_cast<int>(a >> kF32MantBits);
  const int emin = 1 - fmt.bias;              // unbiased exponent of fmt's smallest normal
  const int drop = kF32MantBits - fmt.mbits;  // FP32 mantissa bits fmt does not keep
  if (ef != 0 && ef - kF32Bias >= emin) {
    // Normal in fmt: rebias in place. Exponent and mantissa are contiguous, so a rounding carry
    // out of the mantissa bumps the exponent, which is the correct result (also for overflow).
    const uint32_t rebiased = a - (static_cast<uint32_t>(kF32Bias - fmt.bias) << kF32MantBits);
    return static_cast<uint32_t>(shift_right_rne(rebiased, drop));
  }
  // Subnormal (or zero) in fmt: express the significand in units of fmt's smallest subnormal.
  // Rounding up to 1 << mbits yields the smallest normal's code, again correctly.
  const uint32_t sig = ef != 0 ? (a & kF32MantMask) | (kF32MantMask + 1) : a;
  const int e = ef != 0 ? ef - kF32Bias : 1 - kF32Bias;
  return static_cast<uint32_t>(shift_right_rne(sig, drop + (emin - e)));
}

// Encodes a non-NaN float; overflow saturates or becomes Inf (NaN in the fn layout).
uint32_t encode(const MiniFloat& fmt, uint32_t bits, bool saturate) {
  const uint32_t sign = (bits & kSignBit) != 0 ? fmt.sign_bit() : 0;
  uint32_t mag = round_magnitude(fmt, bits & kAbsMask);
  if (mag > fmt.max_code()) {
    mag = saturate ? fmt.max_code() : (fmt.fn() ? fmt.nan_code() : fmt.inf_code());
  }
  return sign | mag;
}

float decode(const MiniFloat& fmt, uint32_t code) {
  const uint32_t sign = (code & fmt.sign_bit()) != 0 ? kSignBit : 0;
  const uint32_t field = (code >> fmt.mbits) & fmt.all_ones();
  const uint32_t mant = code & fmt.mant_mask();
  const int drop = kF32MantBits - fmt.mbits;
  if (field == fmt.all_ones()) {
    // IEEE layout: Inf, or NaN with its payload carried into FP32's mantissa.
    if (!fmt.fn()) return float_of(sign | kF32ExpMask | (mant << drop));
    if (mant == fmt.mant_mask()) return float_of(sign | kF32ExpMask | kF32QuietBit);
  }
  if (field == 0) {
    // Subnormal: mant * 2^(emin - mbits), exact in FP32 for every format here.
    const float mag = std::ldexp(static_cast<float>(mant), 1 - fmt.bias - fmt.mbits);
    return sign != 0 ? -mag : mag;
  }
  const auto f32_field = static_cast<uint32_t>(static_cast<int>(field) - fmt.bias + kF32Bias);
  return float_of(sign | (f32_field << kF32MantBits) | (mant << drop));
}

// The e4m3 / e5m2 layout for `cfg`. emax beyond the all-ones field is clamped to the fn
// layout; emax below the IEEE maximum just lowers the largest finite value.
MiniFloat fp8_format(DType t, const Fp8Config& cfg) {
  if (t == DType::fp8_e5m2) return {5, 2, 15, std::clamp(cfg.emax_e5m2 + 15, 1, 31)};
  return {4, 3, 7, std::clamp(cfg.emax_e4m3 + 7, 1, 15)};
}

uint8_t encode_fp8(const MiniFloat& fmt, float f, bool saturate) {
  const uint32_t bits = bits_of(f);
  // Every FP8 NaN is the same canonical pattern S.1..1.1..1 (a NaN in both layouts).
  if (is_nan_bits(bits)) return static_cast<uint8_t>(((bits >> 24) & 0x80u) | 0x7Fu);
  return static_cast<uint8_t>(encode(fmt, bits, saturate));
}

// Round to nearest even (the default FP environment) and saturate; NaN becomes 0.
template <typename T>
T float_to_int(float v) {
  if (std::isnan(v)) return 0;
  constexpr auto lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr auto hi = static_cast<double>(std::numeric_limits<T>::max());
  // Doubles hold every int32/uint32 exactly, so the clamp bounds are exact.
  return static_cast<T>(std::clamp(std::nearbyint(static_cast<double>(v)), lo, hi));
}

// memcpy because tensor elements in simulated memory need not be aligned for T.
template <typename T>
T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

template <typename T, typename F>
void map_to_float(const void* src, float* dst, size_t n, F&& f) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = f(load<T>(p + i * sizeof(T)));
}

template <typename T, typename F>
void map_from_float(const float* src, void* dst, size_t n, F&& f) {
  auto* p = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n; ++i) store<T>(p + i * sizeof(T), f(src[i]));
}

template <typename T>
float int_to_float(T v) {
  return static_cast<float>(v);  // values beyond 2^24 round as the C++ conversion does
}

constexpr std::array<std::string_view, kNumDTypes> kNames = {
    "float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2", "int8",
    "uint8",   "int16",    "uint16",  "int32",    "uint32",      "bool"};

constexpr std::pair<std::string_view, DType> kAliases[] = {
    {"fp32", DType::fp32},       {"f32", DType::fp32},          {"bf16", DType::bf16},
    {"fp16", DType::fp16},       {"f16", DType::fp16},          {"half", DType::fp16},
    {"tf32", DType::tf32},       {"fp8_e4m3", DType::fp8_e4m3}, {"fp8e4", DType::fp8_e4m3},
    {"f8e4m3", DType::fp8_e4m3}, {"fp8_e5m2", DType::fp8_e5m2}, {"fp8e5", DType::fp8_e5m2},
    {"f8e5m2", DType::fp8_e5m2}, {"i8", DType::int8},           {"u8", DType::uint8},
    {"i16", DType::int16},       {"u16", DType::uint16},        {"i32", DType::int32},
    {"u32", DType::uint32},      {"bool_", DType::boolean},     {"boolean", DType::boolean},
};

}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32:
    case DType::int32:
    case DType::uint32:
      return 4;
    case DType::bf16:
    case DType::fp16:
    case DType::int16:
    case DType::uint16:
      return 2;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::int8:
    case DType::uint8:
    case DType::boolean:
      return 1;
  }
  return 0;  // not a valid DType
}

std::string_view dtype_name(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < kNames.size() ? kNames[i] : std::string_view("unknown");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  for (const auto& [alias, t] : kAliases) {
    if (alias == name) return t;
  }
  return std::nullopt;
}

bool is_float(DType t) {
  return t <= DType::fp8_e5m2;
}

bool is_signed_int(DType t) {
  return t == DType::int8 || t == DType::int16 || t == DType::int32;
}

double dtype_max(DType t, const Fp8Config& cfg) {
  switch (t) {
    case DType::fp32:
      return FLT_MAX;
    case DType::bf16:
      return bf16_to_float(0x7F7F);
    case DType::fp16:
      return 65504.0;
    case DType::tf32:
      return float_of(0x7F7FE000u);  // (2 - 2^-10) * 2^127
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: {
      const MiniFloat fmt = fp8_format(t, cfg);
      return decode(fmt, fmt.max_code());
    }
    case DType::int8:
      return std::numeric_limits<int8_t>::max();
    case DType::uint8:
      return std::numeric_limits<uint8_t>::max();
    case DType::int16:
      return std::numeric_limits<int16_t>::max();
    case DType::uint16:
      return std::numeric_limits<uint16_t>::max();
    case DType::int32:
      return std::numeric_limits<int32_t>::max();
    case DType::uint32:
      return std::numeric_limits<uint32_t>::max();
    case DType::boolean:
      return 1.0;
  }
  return 0.0;
}

uint16_t float_to_bf16(float f) {
  const uint32_t bits = bits_of(f);
  // NaN: keep sign and top payload bits, force the quiet bit so the payload cannot vanish.
  if (is_nan_bits(bits)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // bf16 shares FP32's exponent range, so RNE is adding just under half an ulp plus the kept
  // LSB; a carry into the exponent is the right answer, including overflow to Inf.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float bf16_to_float(uint16_t bits) {
  return float_of(static_cast<uint32_t>(bits) << 16);
}

uint16_t float_to_fp16(float f) {
  const uint32_t bits = bits_of(f);
  if (is_nan_bits(bits)) {
    // Quiet NaN with the sign and the top 9 payload bits.
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits >> 13) & 0x3FFu));
  }
  return static_cast<uint16_t>(encode(kFp16, bits, /*saturate=*/false));
}

float fp16_to_float(uint16_t bits) {
  return decode(kFp16, bits);
}

uint32_t float_to_tf32(float f) {
  const uint32_t bits = bits_of(f);
  // The quiet bit survives the truncation, so a NaN stays a NaN.
  if (is_nan_bits(bits)) return (bits | kF32QuietBit) & ~0x1FFFu;
  return (bits + 0x0FFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;  // RNE as in float_to_bf16
}

uint8_t float_to_fp8(DType t, float f, const Fp8Config& cfg) {
  return encode_fp8(fp8_format(t, cfg), f, cfg.saturate);
}

float fp8_to_float(DType t, uint8_t bits, const Fp8Config& cfg) {
  return decode(fp8_format(t, cfg), bits);
}

float load_as_float(DType t, const void* src, const Fp8Config& cfg) {
  switch (t) {
    case DType::fp32:
    case DType::tf32:  // stored as an FP32 bit pattern
      return load<float>(src);
    case DType::bf16:
      return bf16_to_float(load<uint16_t>(src));
    case DType::fp16:
      return fp16_to_float(load<uint16_t>(src));
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
      return fp8_to_float(t, load<uint8_t>(src), cfg);
    case DType::int8:
      return int_to_float(load<int8_t>(src));
    case DType::uint8:
      return int_to_float(load<uint8_t>(src));
    case DType::int16:
      return int_to_float(load<int16_t>(src));
    case DType::uint16:
      return int_to_float(load<uint16_t>(src));
    case DType::int32:
      return int_to_float(load<int32_t>(src));
    case DType::uint32:
      return int_to_float(load<uint32_t>(src));
    case DType::boolean:
      return load<uint8_t>(src) != 0 ? 1.0f : 0.0f;  // any non-zero byte reads as true
  }
  return 0.0f;
}

void store_from_float(DType t, float v, void* dst, const Fp8Config& cfg) {
  convert_from_float(t, &v, dst, 1, cfg);
}

void convert_to_float(DType t, const void* src, float* dst, size_t n, const Fp8Config& cfg) {
  switch (t) {
    case DType::fp32:
    case DType::tf32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::bf16:
      return map_to_float<uint16_t>(src, dst, n, bf16_to_float);
    case DType::fp16:
      return map_to_float<uint16_t>(src, dst, n, fp16_to_float);
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: {
      // 256 possible inputs: decode each once, then the conversion is a table lookup.
      const MiniFloat fmt = fp8_format(t, cfg);
      std::array<float, 256> table;
      for (uint32_t code = 0; code < table.size(); ++code) table[code] = decode(fmt, code);
      return map_to_float<uint8_t>(src, dst, n, [&](uint8_t b) { return table[b]; });
    }
    case DType::int8:
      return map_to_float<int8_t>(src, dst, n, int_to_float<int8_t>);
    case DType::uint8:
      return map_to_float<uint8_t>(src, dst, n, int_to_float<uint8_t>);
    case DType::int16:
      return map_to_float<int16_t>(src, dst, n, int_to_float<int16_t>);
    case DType::uint16:
      return map_to_float<uint16_t>(src, dst, n, int_to_float<uint16_t>);
    case DType::int32:
      return map_to_float<int32_t>(src, dst, n, int_to_float<int32_t>);
    case DType::uint32:
      return map_to_float<uint32_t>(src, dst, n, int_to_float<uint32_t>);
    case DType::boolean:
      return map_to_float<uint8_t>(src, dst, n, [](uint8_t b) { return b != 0 ? 1.0f : 0.0f; });
  }
}

void convert_from_float(DType t, const float* src, void* dst, size_t n, const Fp8Config& cfg) {
  switch (t) {
    case DType::fp32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::bf16:
      return map_from_float<uint16_t>(src, dst, n, float_to_bf16);
    case DType::fp16:
      return map_from_float<uint16_t>(src, dst, n, float_to_fp16);
    case DType::tf32:
      return map_from_float<uint32_t>(src, dst, n, float_to_tf32);
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: {
      const MiniFloat fmt = fp8_format(t, cfg);  // hoisted out of the per-element loop
      return map_from_float<uint8_t>(src, dst, n,
                                     [&](float f) { return encode_fp8(fmt, f, cfg.saturate); });
    }
    case DType::int8:
      return map_from_float<int8_t>(src, dst, n, float_to_int<int8_t>);
    case DType::uint8:
      return map_from_float<uint8_t>(src, dst, n, float_to_int<uint8_t>);
    case DType::int16:
      return map_from_float<int16_t>(src, dst, n, float_to_int<int16_t>);
    case DType::uint16:
      return map_from_float<uint16_t>(src, dst, n, float_to_int<uint16_t>);
    case DType::int32:
      return map_from_float<int32_t>(src, dst, n, float_to_int<int32_t>);
    case DType::uint32:
      return map_from_float<uint32_t>(src, dst, n, float_to_int<uint32_t>);
    case DType::boolean:
      // NaN compares unequal to 0, so it stores as true.
      return map_from_float<uint8_t>(src, dst, n, [](float v) -> uint8_t { return v != 0.0f; });
  }
}

}  // namespace neuronsim::isa

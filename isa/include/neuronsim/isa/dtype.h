// Data types of the NeuronCore engines and their conversions.
//
// Engines compute in FP32 and round to the destination type on write; these
// conversions are that rounding (round to nearest, ties to even, as the
// hardware does). FP8 follows the NEFF's fp8_conversion_config: a configurable
// maximum exponent (emax) and optional saturation of overflow to the largest
// finite value. See docs/isa.md, "Data types".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace neuronsim::isa {

enum class DType : uint8_t {
  fp32 = 0,
  bf16,
  fp16,
  tf32,      // stored in 4 bytes, 10-bit mantissa
  fp8_e4m3,  // 1 sign, 4 exponent (bias 7), 3 mantissa bits
  fp8_e5m2,  // 1 sign, 5 exponent (bias 15), 2 mantissa bits
  int8,
  uint8,
  int16,
  uint16,
  int32,
  uint32,
  boolean,  // one byte, 0 or 1
};
inline constexpr int kNumDTypes = 13;

// Bytes one element occupies in memory.
size_t dtype_size(DType t);
// Canonical name as used in NEFF metadata and assembly ("float32", "bfloat16", ...).
std::string_view dtype_name(DType t);
// Parses canonical names and the usual short aliases (fp32, bf16, f16, fp8e4, ...).
std::optional<DType> parse_dtype(std::string_view name);
bool is_float(DType t);
bool is_signed_int(DType t);

// How FP8 values overflow, per NEFF def.json "fp8_conversion_config".
struct Fp8Config {
  int emax_e4m3 = 8;     // largest unbiased exponent of a finite e4m3 value (8 -> max 448)
  int emax_e5m2 = 15;    // largest unbiased exponent of a finite e5m2 value (15 -> max 57344)
  bool saturate = true;  // overflow clamps to +-max finite (ocp_sat); otherwise becomes Inf/NaN
};

// Largest finite value representable in `t` under `cfg`.
double dtype_max(DType t, const Fp8Config& cfg = {});

// Scalar conversions between FP32 and the bit pattern of one element.
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t bits);
uint16_t float_to_fp16(float f);
float fp16_to_float(uint16_t bits);
uint32_t float_to_tf32(float f);  // FP32 bit pattern with the low 13 mantissa bits rounded off
uint8_t float_to_fp8(DType t, float f, const Fp8Config& cfg = {});
float fp8_to_float(DType t, uint8_t bits, const Fp8Config& cfg = {});

// Reads one element of type `t` at `src` as FP32 (integers convert exactly where they can).
float load_as_float(DType t, const void* src, const Fp8Config& cfg = {});
// Writes `v` as one element of type `t` at `dst`: floats round to nearest even; integers
// round to nearest even and saturate to the type's range (NaN becomes 0); bool is v != 0.
void store_from_float(DType t, float v, void* dst, const Fp8Config& cfg = {});

// Bulk forms of the above over `n` contiguous elements.
void convert_to_float(DType t, const void* src, float* dst, size_t n, const Fp8Config& cfg = {});
void convert_from_float(DType t, const float* src, void* dst, size_t n, const Fp8Config& cfg = {});

}  // namespace neuronsim::isa

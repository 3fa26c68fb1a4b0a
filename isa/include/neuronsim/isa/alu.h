// The ALU's numeric semantics: what every VectorE/GpSimd/ScalarE ALU operation gives
// on two FP32 values (docs/isa.md, numeric model). Inline, because the functional
// simulator's element loops call it per element; the PyTorch backend folds constants
// with the same function, so a folded value is the value the engines would compute.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "neuronsim/isa/instruction.h"

namespace neuronsim::isa {

inline int32_t to_int32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(std::nearbyint(v));  // the default rounding mode: ties to even
}

inline float truth(bool b) {
  return b ? 1.0f : 0.0f;
}

// max/min propagate NaN, so that a NaN input is never silently dropped.
inline float nan_max(float a, float b) {
  return (a > b || std::isnan(a)) ? a : b;
}
inline float nan_min(float a, float b) {
  return (a < b || std::isnan(a)) ? a : b;
}

// Python-style remainder: the sign of the divisor.
inline float py_mod(float a, float b) {
  float r = std::fmod(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  return r;
}

inline float apply_alu_op(AluOp op, float a, float b) {
  const auto shift = [&] { return to_int32(b) & 31; };
  switch (op) {
    case AluOp::bypass:
      return a;
    case AluOp::add:
      return a + b;
    case AluOp::subtract:
      return a - b;
    case AluOp::multiply:
      return a * b;
    case AluOp::divide:
      return a / b;
    case AluOp::max:
      return nan_max(a, b);
    case AluOp::min:
      return nan_min(a, b);
    case AluOp::pow:
      return std::pow(a, b);
    case AluOp::mod:
      return py_mod(a, b);
    case AluOp::abs_max:
      return nan_max(std::fabs(a), std::fabs(b));
    case AluOp::is_equal:
      return truth(a == b);
    case AluOp::not_equal:
      return truth(a != b);
    case AluOp::is_gt:
      return truth(a > b);
    case AluOp::is_ge:
      return truth(a >= b);
    case AluOp::is_lt:
      return truth(a < b);
    case AluOp::is_le:
      return truth(a <= b);
    case AluOp::logical_and:
      return truth(a != 0.0f && b != 0.0f);
    case AluOp::logical_or:
      return truth(a != 0.0f || b != 0.0f);
    case AluOp::logical_xor:
      return truth((a != 0.0f) != (b != 0.0f));
    case AluOp::bitwise_and:
      return static_cast<float>(to_int32(a) & to_int32(b));
    case AluOp::bitwise_or:
      return static_cast<float>(to_int32(a) | to_int32(b));
    case AluOp::bitwise_xor:
      return static_cast<float>(to_int32(a) ^ to_int32(b));
    case AluOp::left_shift:
      return static_cast<float>(
          static_cast<int32_t>(static_cast<uint32_t>(to_int32(a)) << shift()));
    case AluOp::arith_shift_right:
      return static_cast<float>(to_int32(a) >> shift());
    case AluOp::logical_shift_right:
      return static_cast<float>(
          static_cast<int32_t>(static_cast<uint32_t>(to_int32(a)) >> shift()));
  }
  return a;
}

}  // namespace neuronsim::isa

// Integer ops computed exactly on the engines, although their ALUs work in FP32: each
// integer is taken as limbs of 16 bits (8 for one-byte types), every limb exact in
// FP32, that DMA reads and writes straight from the tensor's bytes, and the
// arithmetic carries between limbs as schoolbook addition does (ops_integer.cpp).
// int64 token ids, positions and indices are computed on the device this way.
#pragma once

#include <ATen/ATen.h>

#include "neuronsim/isa/instruction.h"

namespace neuronsim::pytorch {

// int64, int32, int16, int8, uint8 and bool: the types the limb ops take.
bool is_limb_integer(c10::ScalarType t);

// out <- a <alu> alpha * b for an integer result or comparison type: add, subtract
// (alpha 1 or -1), max, min, the comparisons (bool out) and the bitwise ops. a or b
// may be a 0-dim CPU tensor (a Python number). An input may be out exactly (in
// place). False when not covered (multiplication, another alpha, float operands).
bool integer_binary_into(const char* op, isa::AluOp alu, const at::Tensor& a, const at::Tensor& b,
                         double alpha, const at::Tensor& out);
// out <- ~a (integers) or !a (bool).
bool integer_not_into(const at::Tensor& a, const at::Tensor& out);
// out <- cond ? a : b for an integer out.
bool integer_where_into(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                        const at::Tensor& out);
// self <- value, any integer value of self's type.
bool integer_fill(const at::Tensor& self, const at::Scalar& value);
// dst <- src where src or dst is int32 or int64 (the types FP32 does not hold), or a
// float becomes an integer (truncated toward zero, as torch casts).
bool integer_copy(const at::Tensor& src, const at::Tensor& dst);

}  // namespace neuronsim::pytorch

// complex64 on the device (ops_complex.cpp): each op a pointwise kernel over the real and
// imaginary parts, two strided float32 views of the same bytes.
#pragma once

#include <ATen/ATen.h>

#include "neuronsim/isa/instruction.h"

namespace neuronsim::pytorch {

// out <- a <alu> alpha * b for add, subtract and multiply, where the result is complex64:
// complex tensors, float tensors (imaginary part 0) and Python numbers, real or complex.
// False when not covered.
bool complex_binary_into(const char* op, isa::AluOp alu, const at::Tensor& a, const at::Tensor& b,
                         double alpha, const at::Tensor& out);

// dst <- src of complex64 dst, from complex64 or from an engine float (imaginary part 0),
// on one device. False when not covered.
bool complex_copy(const at::Tensor& src, const at::Tensor& dst);

}  // namespace neuronsim::pytorch

// What the elementwise ops share (ops_binary.cpp, ops_unary.cpp, ops_activation.cpp and
// ops_pointwise.cpp): an operand that may be a Python number, the binary kernel with torch's type
// promotion, the out= preparation, the unary forms, the gradient helpers and the rounding
// expressions. Each builds one kernels::PointwiseExpr (FP32 inside, rounded once into the output
// dtype, as torch's CPU kernels compute reduced-precision floats) and runs it with broadcasting.
#pragma once

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

namespace neuronsim::pytorch::pointwise {

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

// Which results the engines compute exactly as torch does.
enum class Kind { arithmetic, comparison, logical };

std::optional<Operand> operand(const at::Tensor& t);
bool computable(Kind kind, c10::ScalarType compute);
// out <- a <alu> (alpha * b). False when not covered.
bool binary_into(const char* op, AluOp alu, Kind kind, const at::Tensor& a_in,
                 const at::Tensor& b_in, double alpha, const at::Tensor& out);
// The result takes the layout of the first operand of its sizes that is dense, as
// TensorIterator lays it out on the CPU: a transposed view times a scalar stays
// transposed (its kernel moves contiguous runs, not a transpose element by element).
at::Tensor new_output(const at::Tensor& a, const at::Tensor& b, c10::ScalarType dtype);
// Resizes `out` to the broadcast size (as torch's out= ops do) when the result type
// casts to out's dtype; false when the op should fall back.
bool prepare_out(const at::Tensor& out, at::IntArrayRef sizes, c10::ScalarType result);
// out <- a <alu> b, broadcast, for ops whose kernel covers float results only (an integer
// result is not covered: false).
bool float_binary_into(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b,
                       const at::Tensor& out);
// floor(x) = x - (x mod 1), Python's mod (in [0, 1)); |x| >= 2^23 is whole already (and
// keeps +-inf, which mod would make NaN).
Reg floor_of(Expr& e, Reg x);
// ceil(x) = x + (-x mod 1).
Reg ceil_of(Expr& e, Reg x);
Reg trunc_of(Expr& e, Reg x);

// The unary forms.
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

// The gradient helpers.
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

}  // namespace neuronsim::pytorch::pointwise

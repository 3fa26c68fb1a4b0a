// Integer ops computed exactly on the engines, although their ALUs work in FP32: each
// integer is taken as limbs of 16 bits (8 for one-byte types), every limb exact in
// FP32, that DMA reads and writes straight from the tensor's bytes, and the
// arithmetic carries between limbs as schoolbook addition does (ops_integer.cpp).
// int64 token ids, positions and indices are computed on the device this way; the
// losses and index ops that read int64 targets build their kernels with IntExpr.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::pytorch {

// How a type's values split into limbs, least significant first.
struct Layout {
  int limbs = 1;
  int bits = 16;  // per limb
  bool is_signed = true;

  float base() const { return bits == 16 ? 65536.0f : 256.0f; }
};

// int64, int32, int16, int8, uint8 and bool: the types the limb ops take.
std::optional<Layout> layout_of(c10::ScalarType t);
inline bool is_limb_integer(c10::ScalarType t) {
  return layout_of(t).has_value();
}

// A limb: a register of the expression; a value known when the kernel is built (a
// structural constant), which folds into immediates; or a scalar input (the limb of a
// Python number, read at run time so that one kernel serves every value).
struct Limb {
  kernels::PointwiseExpr::Reg reg = -1;
  float value = 0;
  int32_t scalar = -1;  // the input holding the value
  bool known() const { return reg < 0 && scalar < 0; }
  bool is_scalar() const { return scalar >= 0; }
};
using Limbs = std::vector<Limb>;

// Limb k of t (a limb type): an alias of its bytes, typed as one limb (signed for a sign to
// extend), so that a pointwise kernel reads or writes that limb of every element.
at::Tensor limb_view(const at::Tensor& t, int k, bool as_signed);

// Builds one pointwise kernel whose integer values are limbs in `layout`. Values that
// are not integers (a float input, a comparison's 1 or 0) are single limbs too.
class IntExpr {
 public:
  using AluOp = isa::AluOp;
  // Python numbers among the operands become scalar inputs on `device` (on the CPU
  // default, immediates).
  explicit IntExpr(Layout layout, c10::Device device = c10::Device(c10::kCPU))
      : l_(layout), device_(device) {}

  kernels::PointwiseExpr& expr() { return e_; }

  // FP32 operations on limbs (folded when both are known).
  Limb op(AluOp alu, Limb a, Limb b);
  Limb imm(AluOp alu, Limb a, float v) { return op(alu, a, {-1, v}); }
  Limb select(Limb p, Limb t, Limb f);
  Limbs select(Limb p, const Limbs& a, const Limbs& b);
  Limbs each(AluOp alu, const Limbs& a, const Limbs& b);
  // sum over out's dims of index * weight (kernels::PointwiseExpr::position).
  Limb position(std::vector<int64_t> weights) { return {e_.position(std::move(weights)), 0}; }

  // A tensor of any engine dtype as one FP32 value.
  Limb load(const at::Tensor& t);
  // An integer tensor or a Python number (a 0-dim CPU tensor) in this layout: sign-
  // or zero-extended to more limbs, or wrapped to fewer.
  Limbs operand(const at::Tensor& t);
  // The limbs of t's bytes as they are, unsigned (t of a limb type; a float viewed as one).
  Limbs raw(const at::Tensor& t);
  Limbs constant(int64_t v) const;
  // The limbs of v as scalar inputs on `device` (not part of the kernel).
  Limbs number(int64_t v, const c10::Device& device);
  Limb number(float v, const c10::Device& device);
  // The limbs with the top one's sign bit flipped when signed: unsigned order is then
  // the type's order (what max and min compare).
  Limbs ordered(Limbs a);
  // 1 where a is negative (never in an unsigned layout), and |a|'s limbs (-2^63's its own,
  // read as unsigned).
  std::pair<Limb, Limbs> sign_and_magnitude(const Limbs& a);
  // The 8-bit pieces of 16-bit limbs, least significant first, and back.
  Limbs bytes(const Limbs& a);
  Limbs from_bytes(const Limbs& b);
  // The limbs of the value whose k-th 8-bit piece is sums[k], a sum of pieces (below
  // 2^24): each sum carried into the next piece, from the lowest up.
  Limbs carried(const Limbs& sums);

  Limbs add(const Limbs& a, const Limbs& b);
  Limbs sub(const Limbs& a, const Limbs& b);
  // a * b modulo 2^bits: products of 8-bit pieces summed by column (below 2^24), then
  // carried.
  Limbs mul(const Limbs& a, const Limbs& b);
  // a <cmp> b (1 or 0) in the layout's order, for the six comparisons.
  Limb compare(AluOp cmp, Limbs a, Limbs b);
  // The value as FP32: exact below 2^24, beyond that rounded at each limb's addition (an
  // index, an offset).
  Limb to_float(const Limbs& a);
  // The value as FP32 rounded once, to nearest even, as the CPU converts it (a cast).
  Limb rounded_to_float(const Limbs& a);
  // The limbs of trunc(v) modulo 2^bits (a float cast to an integer type).
  Limbs from_float(Limb v);
  // The limbs of an integer-valued v.
  Limbs from_integral(Limb v);
  // 1 where any limb is nonzero.
  Limb nonzero(const Limbs& a);

  // out (of this layout's type) <- limbs.
  bool run(const char* op, const at::Tensor& out, const Limbs& limbs);
  // outs[k] (engine dtypes, one shape) <- values[k].
  bool run_values(const char* op, const std::vector<at::Tensor>& outs, const Limbs& values);

 private:
  kernels::PointwiseExpr::Reg reg(Limb x);
  Limb biased(Limb top);
  Limb limb(const at::Tensor& t, int k, bool as_signed);
  Limb input(const at::Tensor& view, const at::Tensor& of, int part);

  Layout l_;
  c10::Device device_;
  kernels::PointwiseExpr e_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> held_;  // the tensors loads_ names, kept alive so no other reuses one
  std::map<float, kernels::PointwiseExpr::Reg> constants_;
  std::map<int32_t, kernels::PointwiseExpr::Reg> scalar_regs_;
  std::map<std::pair<const void*, int>, kernels::PointwiseExpr::Reg> loads_;
};

// out <- a <alu> alpha * b for an integer result or comparison type: add, subtract,
// multiply, max, min, the comparisons (bool out), the bitwise and logical ops. a or b
// may be a 0-dim CPU tensor (a Python number). An input may be out exactly (in
// place). False when not covered (division, a non-integer alpha, float operands).
bool integer_binary_into(const char* op, isa::AluOp alu, const at::Tensor& a, const at::Tensor& b,
                         double alpha, const at::Tensor& out);
// out <- ~a (integers) or !a (bool).
bool integer_not_into(const at::Tensor& a, const at::Tensor& out);
// out <- cond ? a : b for an integer out.
bool integer_where_into(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b,
                        const at::Tensor& out);
// out <- -a, |a| or max(a, 0) of an integer a.
enum class IntUnary { neg, abs, relu };
bool integer_unary_into(IntUnary f, const at::Tensor& a, const at::Tensor& out);
// out <- tril (upper: triu) of the last two dims of an integer self.
bool integer_triangle_into(const char* op, const at::Tensor& self, int64_t diagonal, bool upper,
                           const at::Tensor& out);
// out <- running sums of an integer self along dim (exact: 8-bit pieces scanned in
// FP32, carried after the scan), for a scanned dim below 65536.
bool integer_cumsum_into(const at::Tensor& self, int64_t dim, const at::Tensor& out);
// out_keepdim <- the sum of an integer x over dims, out_keepdim having x's sizes with
// those dims as 1 (8-bit pieces summed in FP32, carried), for fewer than 65536 summed
// elements. `reduce(planes, dims)` sums FP32 planes over dims with keepdim.
bool integer_sum_into(
    const char* op, const at::Tensor& x, const std::vector<int64_t>& dims,
    const at::Tensor& out_keepdim,
    const std::function<at::Tensor(const at::Tensor&, const std::vector<int64_t>&)>& reduce);
// out_keepdim <- max (or min) of an integer x over dim, out_keepdim having x's sizes
// with dim as 1: one pass per limb, from the top one down, each over the elements
// that tie on the limbs above.
bool integer_extreme_into(const char* op, bool is_max, const at::Tensor& x, int64_t dim,
                          const at::Tensor& out_keepdim);
// self <- value, any integer value of self's type (wrapped into it as torch does).
bool integer_fill(const at::Tensor& self, const at::Scalar& value);
// dst <- src where src or dst is int32 or int64 (the types FP32 does not hold), or a
// float becomes an integer (truncated toward zero, as torch casts).
bool integer_copy(const at::Tensor& src, const at::Tensor& dst);
// An integer tensor known to hold values below 2^24 in magnitude (indices, counts, keys a
// check has shown exact) as float32, by the conversion that is exact there and cheaper than
// a cast's rounding.
at::Tensor small_integers_to_float(const at::Tensor& t);
// dst (an integer type) <- float values known to be integers below 2^24 (the keys above, sorted
// or picked), without the checks of a cast's range.
bool small_floats_to_integers(const at::Tensor& src, const at::Tensor& dst);
// dst <- src where either is float64 or complex128, which the engines do not hold: the
// conversion computed on the IEEE bit patterns, as limbs, rounded as the CPU rounds
// (ops_float64.cpp). False when not covered.
bool float64_copy(const at::Tensor& src, const at::Tensor& dst);
// out <- self % other with the divisor's sign (torch.remainder) of integers, exact while both
// stay below 2^23 in magnitude; false otherwise and for a divisor of zero (the CPU raises).
bool integer_remainder_into(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out);

}  // namespace neuronsim::pytorch

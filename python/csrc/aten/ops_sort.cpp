// Order statistics on the simulator: topk and sort by VectorE's top-8 instructions
// (kernels::topk, stable: equal elements keep their order), and histc.
// - Keys are FP32 on the engines: floats and integers of up to 16 bits are exact; int32 and
//   int64 values are sorted when every one of them is below 2^24 in magnitude (a device
//   reduction read by the host says so), and fall back, counted, when one is not.
// - Indices are written as the low words of a zeroed int64 tensor.
// - histc counts, per bin, the elements whose bin index (computed on the device as torch
//   computes it) equals the bin: one comparison per element and bin, summed, in blocks of
//   bins so that no block passes 2^24 comparisons.
#include <limits>

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/fallback.h"
#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

constexpr float kExactInFp32 = 16777216.0f;  // 2^24

// values, indices <- the k largest (or smallest) of self along dim, in order: one topk
// kernel, whose keys are `self` itself (an engine dtype FP32 holds exactly).
bool run_topk(const char* op, const at::Tensor& self, int64_t k, int64_t dim, bool largest,
              const at::Tensor& values, const at::Tensor& indices) {
  const auto low = int64_low_words(indices);
  if (!low) return false;
  const kernels::View in_view = view_of(self), values_view = view_of(values),
                      index_view = view_of(*low);
  const std::string chip = target();
  return run_kernel(
      op, op_device(op, {&self, &values, &indices}),
      fmt::format("{} {} k={} dim={} largest={} -> {} {}", op, layout_key(self), k, dim, largest,
                  layout_key(values), layout_key(*low)),
      [&] { return kernels::topk(chip, in_view, dim, k, largest, values_view, index_view); },
      {{"in", self}, {"values", values}, {"indices", *low}});
}

// Whether every value of an integer tensor on the device is exact in FP32 (|v| < 2^24),
// from its FP32 copy: a reduction on the device, read by the host. Timing-only mode runs
// the reduction and takes the values as exact.
bool exact_keys(const char* op, const at::Tensor& as_float) {
  const at::Tensor magnitude = at::empty(as_float.sizes(), as_float.options());
  kernels::PointwiseExpr e;
  e.activation(isa::ActFunc::abs, e.load(0));
  at::Tensor largest = at::empty({1}, as_float.options());
  if (!run_pointwise(op, "|x|", e, {as_float}, magnitude) ||
      !run_reduce(op, kernels::ReduceOp::max, magnitude.reshape({-1}), 0, largest))
    return false;
  if (!host_can_check() || largest.item<float>() < kExactInFp32) return true;
  note_refusal(op, "an integer key is 2^24 or more in magnitude, beyond FP32's exact integers");
  return false;
}

// topk into values and indices (resized to self's sizes with k along dim). Integers that
// FP32 does not hold exactly are ordered by an FP32 copy when their values allow it.
bool topk_into(const char* op, const at::Tensor& self, int64_t k, int64_t dim, bool largest,
               at::Tensor& values, at::Tensor& indices) {
  if (!self.device().is_privateuseone() || values.device() != self.device() ||
      indices.device() != self.device() || indices.scalar_type() != at::kLong ||
      values.scalar_type() != self.scalar_type() || self.dim() == 0)
    return false;
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (k < 0 || k > self.size(dim)) return false;  // the CPU raises torch's error
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[static_cast<size_t>(dim)] = k;
  at::native::resize_output(values, sizes);
  at::native::resize_output(indices, sizes);
  if (values.numel() == 0) return true;
  if (!values.is_contiguous() || !indices.is_contiguous()) {  // outputs laid out like a view
    at::Tensor dense_values = at::empty(sizes, values.options());
    at::Tensor dense_indices = at::empty(sizes, indices.options());
    if (!topk_into(op, self, k, dim, largest, dense_values, dense_indices)) return false;
    values.copy_(dense_values);
    indices.copy_(dense_indices);
    return true;
  }
  if (exact_in_fp32(self.scalar_type()) && self.scalar_type() != at::kBool)
    return run_topk(op, self, k, dim, largest, values, indices);
  if (self.scalar_type() != at::kLong && self.scalar_type() != at::kInt) return false;
  const at::Tensor keys = small_integers_to_float(self);  // exact_keys checks
  const at::Tensor picked = at::empty(sizes, keys.options());
  if (!exact_keys(op, keys) || !run_topk(op, keys, k, dim, largest, picked, indices)) return false;
  if (!small_floats_to_integers(picked, values)) values.copy_(picked);
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                                 bool largest, bool sorted, at::Tensor& values,
                                                 at::Tensor& indices) {
  // Unsorted results may come in any order: sorted ones are one of them.
  if (topk_into("aten::topk", self, k.guard_int(__FILE__, __LINE__), dim, largest, values, indices))
    return {values, indices};
  return FallbackSymInt<ATEN_OP2(topk, values)>::call(self, std::move(k), dim, largest, sorted,
                                                      values, indices);
}

// Ascending or descending along dim, stable whether asked or not.
std::tuple<at::Tensor&, at::Tensor&> sort_values(const at::Tensor& self, std::optional<bool> stable,
                                                 int64_t dim, bool descending, at::Tensor& values,
                                                 at::Tensor& indices) {
  if (self.dim() == 0 && self.device().is_privateuseone() && values.device() == self.device() &&
      indices.device() == self.device() && values.scalar_type() == self.scalar_type() &&
      indices.scalar_type() == at::kLong) {  // one element: itself, at 0
    at::maybe_wrap_dim(dim, int64_t{0});
    at::native::resize_output(values, {});
    at::native::resize_output(indices, {});
    values.copy_(self);
    indices.zero_();
    return {values, indices};
  }
  const int64_t n = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
  if (topk_into("aten::sort", self, n, dim, descending, values, indices)) return {values, indices};
  return Fallback<ATEN_OP2(sort, values_stable)>::call(self, stable, dim, descending, values,
                                                       indices);
}

// counts[b] = the number of elements whose bin is b, as torch.histc bins them: (x - min) *
// bins / (max - min), truncated, x == max in the last bin, NaN and values outside [min,
// max] in none. One comparison per element and bin (the bin index against the bin's
// position), summed over the elements, for up to 2^24 / n bins per block.
bool histc_into(const at::Tensor& self, int64_t bins, double lo, double hi, at::Tensor& out) {
  const char* op = "aten::histc";
  const int64_t n = self.numel();
  const bool integers = self.scalar_type() == at::kInt || self.scalar_type() == at::kLong;
  if (!self.device().is_privateuseone() || out.device() != self.device() ||
      !(exact_in_fp32(self.scalar_type()) || integers) || bins <= 0 || !(lo < hi) || n == 0 ||
      n >= (int64_t{1} << 24))
    return false;
  // int32 and int64 values (expert ids) are binned from an FP32 copy when it is exact.
  const at::Tensor values = integers ? small_integers_to_float(self) : self;
  if (integers && !exact_keys(op, values)) return false;
  at::native::resize_output(out, {bins});
  const at::Tensor x = values.reshape({1, n});
  const at::Tensor bin = at::empty({1, n}, self.options().dtype(at::kFloat));
  {
    kernels::PointwiseExpr e;
    const auto v = e.load(0);
    const auto scaled = e.alu_imm(isa::AluOp::multiply, e.alu_imm(isa::AluOp::subtract, v, lo),
                                  static_cast<float>(static_cast<double>(bins) / (hi - lo)));
    // trunc of a value >= 0 is scaled - (scaled mod 1); the top edge goes to the last bin.
    auto b = e.alu(isa::AluOp::subtract, scaled, e.alu_imm(isa::AluOp::mod, scaled, 1.0f));
    b = e.alu_imm(isa::AluOp::min, b, static_cast<float>(bins - 1));
    const auto inside =
        e.alu(isa::AluOp::logical_and, e.alu_imm(isa::AluOp::is_ge, v, static_cast<float>(lo)),
              e.alu_imm(isa::AluOp::is_le, v, static_cast<float>(hi)));
    e.select(inside, b, e.constant(-1.0f));
    if (!run_pointwise(op, fmt::format("bin of [{}, {}] in {}", lo, hi, bins), e, {x}, bin))
      return false;
  }
  const int64_t block = std::min<int64_t>(bins, (int64_t{1} << 24) / n);
  const at::Tensor hits = at::empty({block, n}, bin.options());
  const at::Tensor counts = at::empty({bins}, bin.options());
  for (int64_t b0 = 0; b0 < bins; b0 += block) {
    const int64_t nb = std::min(block, bins - b0);
    kernels::PointwiseExpr e;
    auto row = e.position({1, 0});
    if (b0 > 0) row = e.alu_imm(isa::AluOp::add, row, static_cast<float>(b0));
    e.alu(isa::AluOp::is_equal, row, e.load(0));
    const at::Tensor part = hits.narrow(0, 0, nb);
    if (!run_pointwise(op, "one-hot", e, {bin}, part) ||
        !run_reduce(op, kernels::ReduceOp::sum, part, 1, counts.narrow(0, b0, nb)))
      return false;
  }
  out.copy_(counts);
  return true;
}

// What the device does not count (more than 2^24 elements, NaN bounds) runs on the CPU,
// counted. The CPU's histc takes floats only, and mixture-of-
// experts routing counts int32 expert ids with it on every device but the CPU: those are
// counted on float32 copies (exact for small integers) and given back in the input's dtype.
at::Tensor host_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                      const at::Scalar& max) {
  count_fallback("aten::histc");
  const at::Tensor values = host_alias(self);
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
  const at::Tensor counts = at::histc(integral ? values.to(at::kFloat) : values, bins, min, max);
  return to_neuron(integral ? counts.to(self.scalar_type()) : counts, self.device());
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                      const at::Scalar& max, at::Tensor& out) {
  double lo = min.toDouble(), hi = max.toDouble();
  // min == max: the bounds are the data's (one read by the host), widened by one each way
  // when the data are all one value, as torch does.
  if (lo == hi && self.numel() > 0 && self.device().is_privateuseone() && !values_unspecified()) {
    const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
    const at::Tensor values = integral ? self.to(at::kFloat) : self;
    const at::Tensor limits = at::stack({values.min(), values.max()}).to(at::kFloat).cpu();
    lo = limits.data_ptr<float>()[0];
    hi = limits.data_ptr<float>()[1];
    if (lo == hi) lo -= 1, hi += 1;
  }
  if (histc_into(self, bins, lo, hi, out)) return out;
  const at::Tensor counts = host_histc(self, bins, min, max);
  out.resize_(counts.sizes());
  out.copy_(counts);
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                 const at::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("topk.values", topk_values);
  m.impl("sort.values_stable", sort_values);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
}

}  // namespace neuronsim::pytorch

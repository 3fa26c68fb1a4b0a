// Indexing on the device: index_select over dim 0, which is also what embedding
// lookups become (aten::embedding is index_select on the weight). The rows move by
// indirect DMA (kernels::gather_rows) straight from the table to the output.
//
// Indices are int64 in PyTorch; the engines read 32-bit words, so the kernel reads the
// low word of each index. That is the index exactly when the high word is zero, which
// one pointwise kernel and one reduction check first (an index of 2^32 + 5 must be an
// error, as on the CPU, not row 5).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "kernel_call.h"

namespace neuronsim::pytorch {

namespace {

// Whether every int64 index has a zero high word (0 <= index < 2^31 or a negative
// index whose low word the kernel then refuses).
bool high_words_zero(const at::Tensor& index64) {
  const at::Tensor high = index64.view(at::kInt).slice(0, 1, std::nullopt, 2);
  at::Tensor magnitude = at::empty(high.sizes(), high.options().dtype(at::kFloat));
  kernels::PointwiseExpr e;
  e.activation(isa::ActFunc::abs, e.load(0));
  if (!run_pointwise("aten::index_select", "|high word|", e, {high}, magnitude)) return false;
  at::Tensor largest = at::empty({1}, magnitude.options());
  if (!run_reduce("aten::index_select", kernels::ReduceOp::max, magnitude, 0, largest))
    return false;
  return largest.item<float>() == 0.0f;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  const bool covered = self.dim() >= 1 && at::maybe_wrap_dim(dim, self.dim()) == 0 &&
                       self.device().is_privateuseone() && index.device() == self.device() &&
                       engine_dtype(self.scalar_type()) && self.is_contiguous() &&
                       self.numel() > 0 && index.dim() <= 1 && index.is_contiguous() &&
                       index.numel() > 0 &&
                       (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
  if (covered) {
    const bool wide = index.scalar_type() == at::kLong;
    const at::Tensor flat = index.reshape({-1});
    if (!wide || high_words_zero(flat)) {
      const int64_t rows = self.size(0), cols = self.numel() / rows, count = flat.numel();
      std::vector<int64_t> sizes{count};
      sizes.insert(sizes.end(), self.sizes().begin() + 1, self.sizes().end());
      at::Tensor out = at::empty(sizes, self.options());
      const at::Tensor words = wide ? flat.view(at::kInt) : flat;
      const isa::DType dtype = *engine_dtype(self.scalar_type());
      const std::string chip = target();
      const int64_t stride = wide ? 2 : 1;
      if (run_kernel("aten::index_select", self.device().index(),
                     fmt::format("aten::index_select {} rows={} cols={} count={} stride={}",
                                 c10::toString(self.scalar_type()), rows, cols, count, stride),
                     [&] { return kernels::gather_rows(chip, dtype, rows, cols, count, stride); },
                     {{"table", self}, {"index", words}, {"out", out}}))
        return out;
    }
  }
  return Fallback<ATEN_OP(index_select)>::call(self, dim, index);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
}

}  // namespace neuronsim::pytorch

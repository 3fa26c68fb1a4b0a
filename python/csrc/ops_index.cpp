// Indexing on the device: index_select over dim 0, which is also what embedding
// lookups become (aten::embedding is index_select on the weight). The rows move by
// indirect DMA (kernels::gather_rows) straight from the table to the output.
//
// The embedding's gradient sums the gradient rows of equal indices. The engines have
// no scatter-add, so it is a product on TensorE, as compilers for matrix machines
// lower it for modest vocabularies: one_hot(indices)^T [V, N] @ grad [N, H], the
// one-hot built from the int64 indices' limbs (integers.h) and each element's row.
// A one-hot beyond kMaxOneHot elements falls back to the CPU, counted.
//
// Indices are int64 in PyTorch; the engines read 32-bit words, so the kernel reads the
// low word of each index. That is the index exactly when the high word is zero, which
// one pointwise kernel and one reduction check first (an index of 2^32 + 5 must be an
// error, as on the CPU, not row 5).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "backend.h"
#include "integers.h"
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

// The first index of `index` outside [0, size) (the device counted one), named as torch.
[[noreturn]] void bad_index(const at::Tensor& index, int64_t dim, int64_t size) {
  const at::Tensor host = host_alias(index).to(at::kLong).reshape({-1});
  const auto* v = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i)
    TORCH_CHECK(v[i] >= 0 && v[i] < size, "index ", v[i], " is out of bounds for dimension ", dim,
                " with size ", size);
  fail("aten::gather: the device counted an index out of bounds that the host does not find");
}

// gather(self, dim, index): out[i] = self[i with index[i] at dim]. One kernel computes
// each output element's offset in self from its position and its index (limbs, exact
// while self has fewer than 2^24 elements) and flags indices out of bounds; after the
// check, one indirect DMA moves the elements (kernels::gather_rows, rows of one).
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out) {
  const char* op = "aten::gather";
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  bool covered = self.device().is_privateuseone() && index.device() == self.device() &&
                 out.device() == self.device() && engine_dtype(self.scalar_type()) &&
                 out.scalar_type() == self.scalar_type() && self.is_contiguous() &&
                 self.dim() > 0 && index.dim() == self.dim() && index.numel() > 0 &&
                 self.numel() < (int64_t{1} << 24) && is_limb_integer(index.scalar_type()) &&
                 index.scalar_type() != at::kBool;
  for (int64_t k = 0; covered && k < self.dim(); ++k)
    covered = k == d || index.size(k) <= self.size(k);
  if (covered) {
    at::native::resize_output(out, index.sizes());
    IntExpr x(*layout_of(index.scalar_type()));
    const Limbs i = x.operand(index);
    const Limb in_range =
        x.op(isa::AluOp::logical_and, x.compare(isa::AluOp::is_ge, i, x.constant(0)),
             x.compare(isa::AluOp::is_lt, i, x.constant(self.size(d))));
    std::vector<int64_t> weights(self.strides().begin(), self.strides().end());
    weights[static_cast<size_t>(d)] = 0;
    const Limb offset =
        x.op(isa::AluOp::add, x.position(weights),
             x.imm(isa::AluOp::multiply, x.to_float(i), static_cast<float>(self.stride(d))));
    const at::Tensor flat = at::empty(index.sizes(), index.options().dtype(at::kInt));
    const at::Tensor bad = at::empty(index.sizes(), index.options().dtype(at::kFloat));
    const at::Tensor any_bad = at::empty({1}, bad.options());
    const at::Tensor dst = out.is_contiguous() ? out : at::empty(index.sizes(), out.options());
    const int64_t count = index.numel();
    const isa::DType dtype = *engine_dtype(self.scalar_type());
    const std::string chip = target();
    if (x.run_values(
            op, {flat, bad},
            {x.select(in_range, offset, Limb{-1, 0}), x.imm(isa::AluOp::is_equal, in_range, 0)}) &&
        run_reduce(op, kernels::ReduceOp::max, bad.view({-1}), 0, any_bad)) {
      if (any_bad.item<float>() > 0) bad_index(index, d, self.size(d));
      if (run_kernel(op, self.device().index(),
                     fmt::format("{} {} rows={} count={}", op, c10::toString(self.scalar_type()),
                                 self.numel(), count),
                     [&] { return kernels::gather_rows(chip, dtype, self.numel(), 1, count, 1); },
                     {{"table", self}, {"index", flat}, {"out", dst}})) {
        if (!dst.is_same(out)) out.copy_(dst);
        return out;
      }
    }
  }
  return Fallback<ATEN_OP2(gather, out)>::call(self, dim, index, sparse_grad, out);
}

constexpr int64_t kMaxOneHot = int64_t{1} << 24;

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  const char* op = "aten::embedding_dense_backward";
  const int64_t rows = num_weights.guard_int(__FILE__, __LINE__);
  const int64_t padding = padding_idx.guard_int(__FILE__, __LINE__);
  const int64_t count = indices.numel(), cols = grad.dim() > 0 ? grad.size(-1) : 0;
  if (!scale_grad_by_freq && grad.device().is_privateuseone() &&
      indices.device() == grad.device() && is_engine_float(grad.scalar_type()) &&
      is_limb_integer(indices.scalar_type()) && count > 0 && cols > 0 && rows > 0 &&
      rows < (int64_t{1} << 24) && rows * count <= kMaxOneHot && grad.numel() == count * cols) {
    const at::Tensor flat = indices.reshape({1, count}), g = grad.reshape({count, cols});
    IntExpr x(*layout_of(indices.scalar_type()));
    const Limb row = x.position({1, 0});
    Limb hit = x.op(isa::AluOp::is_equal, row, x.to_float(x.operand(flat)));
    if (padding >= 0)
      hit = x.op(isa::AluOp::logical_and, hit,
                 x.imm(isa::AluOp::not_equal, row, static_cast<float>(padding)));
    const at::Tensor one_hot = at::empty({rows, count}, grad.options());
    at::Tensor out = at::empty({rows, cols}, grad.options());
    const kernels::View a = view_of(one_hot), b = view_of(g), o = view_of(out);
    const std::string chip = target();
    if (x.run_values(op, {one_hot}, {hit}) &&
        run_kernel(
            op, grad.device().index(),
            fmt::format("{} {} {} ->{}", op, layout_key(one_hot), layout_key(g), layout_key(out)),
            [&] { return kernels::matmul(chip, a, b, o); },
            {{"a", one_hot}, {"b", g}, {"out", out}}))
      return out;
  }
  return FallbackSymInt<ATEN_OP(embedding_dense_backward)>::call(grad, indices, num_weights,
                                                                 padding_idx, scale_grad_by_freq);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("gather.out", gather_out);
}

}  // namespace neuronsim::pytorch

// Indexing on the device: index_select over dim 0, which is also what embedding
// lookups become (aten::embedding is index_select on the weight). The rows move by
// indirect DMA (kernels::gather_rows) straight from the table to the output.
//
// The embedding's gradient (and index_add, index_put with accumulate) sums the gradient
// rows of equal indices into the table's rows: an indirect scatter whose DMAs read, add and
// write back (kernels::scatter_add_rows), so its traffic is the batch's rows whatever the
// vocabulary. scatter_add and scatter_reduce, which index single elements, build a one-hot
// of each line on the engines; past kMaxOneHot elements scatter_add adds each element by the
// same read-add-write DMA, and scatter_reduce falls back to the CPU, counted.
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

#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "runtime/backend.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

namespace {

constexpr int64_t kMaxOneHot = int64_t{1} << 24;
constexpr int64_t kExactInFp32 = int64_t{1} << 24;  // integers below it are exact in FP32

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
  // Timing-only mode runs the check's kernels (their time is the op's) but has no value
  // to read: the indices are taken as valid.
  return !host_can_check() || largest.item<float>() == 0.0f;
}

// self's rows named by a flat index (int32, or int64 below 2^31 as checked by
// high_words_zero) by indirect DMA, 128 rows per transfer; undefined when not covered.
at::Tensor gather_rows(const char* op, const at::Tensor& self, const at::Tensor& flat) {
  const bool wide = flat.scalar_type() == at::kLong;
  const int64_t rows = self.size(0), cols = self.numel() / rows, count = flat.numel();
  std::vector<int64_t> sizes{count};
  sizes.insert(sizes.end(), self.sizes().begin() + 1, self.sizes().end());
  at::Tensor out = at::empty(sizes, self.options());
  const at::Tensor words = wide ? flat.view(at::kInt) : flat;
  const isa::DType dtype = *engine_dtype(self.scalar_type());
  const std::string chip = target();
  const int64_t stride = wide ? 2 : 1;
  if (run_kernel(op, self.device().index(),
                 fmt::format("aten::index_select {} rows={} cols={} count={} stride={}",
                             c10::toString(self.scalar_type()), rows, cols, count, stride),
                 [&] { return kernels::gather_rows(chip, dtype, rows, cols, count, stride); },
                 {{"table", self}, {"index", words}, {"out", out}}))
    return out;
  return {};
}

// Whether rows of self can be gathered by `index` (any shape, flattened).
bool row_gather_covers(const at::Tensor& self, const at::Tensor& index) {
  return self.dim() >= 1 && self.device().is_privateuseone() && index.device() == self.device() &&
         engine_dtype(self.scalar_type()) && self.is_contiguous() && self.numel() > 0 &&
         index.numel() > 0 && (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
}

// Rows of self over dim 0 by indirect DMA; another dim is moved to the front first (a
// transposing copy), and 8-byte elements move as pairs of int32 words.
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (self.dim() == 0 && self.device().is_privateuseone() && index.numel() == 1) {  // a scalar
    const at::Tensor picked = pytorch::index_select(self.reshape({1}), 0, index.reshape({1}));
    return picked.reshape({});  // torch gives a scalar whatever the index's dims
  }
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (self.dim() > 0 && index.dim() <= 1 && self.device().is_privateuseone() &&
      self.element_size() == 8 && !self.is_complex() && self.numel() > 0) {
    const at::Tensor rows = self.movedim(d, 0).contiguous();
    const at::Tensor words = flat_dense(rows).view(at::kInt).view({rows.size(0), -1});
    at::Tensor picked = pytorch::index_select(words, 0, index);
    std::vector<int64_t> sizes = rows.sizes().vec();
    sizes[0] = index.numel();
    return picked.view(self.scalar_type()).reshape(sizes).movedim(0, d).contiguous();
  }
  if (d != 0 && index.dim() <= 1 && self.numel() > 0 &&
      row_gather_covers(self.contiguous(), index)) {
    const at::Tensor picked = pytorch::index_select(self.movedim(d, 0).contiguous(), 0, index);
    return picked.movedim(0, d).contiguous();
  }
  if (row_gather_covers(self.contiguous(), index) && d == 0 && index.dim() <= 1) {
    const at::Tensor flat = flat_dense(index);
    if (flat.scalar_type() == at::kInt || high_words_zero(flat))
      if (at::Tensor out = gather_rows("aten::index_select", self.contiguous(), flat);
          out.defined())
        return out;
  }
  return Fallback<ATEN_OP(index_select)>::call(self, dim, index);
}

// The first index of `index` outside [0, size) (or [-size, size) when negative indices
// count from the end), named as torch does: the device counted one.
[[noreturn]] void bad_index(const char* op, const at::Tensor& index, int64_t dim, int64_t size,
                            bool wraps) {
  const at::Tensor host = host_alias(index).to(at::kLong).reshape({-1});
  const auto* v = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const bool ok = v[i] < size && v[i] >= (wraps ? -size : 0);
    if (wraps)
      TORCH_CHECK_INDEX(ok, "index ", v[i], " is out of bounds for dimension ", dim, " with size ",
                        size);
    TORCH_CHECK(ok, "index ", v[i], " is out of bounds for dimension ", dim, " with size ", size);
  }
  fail(
      fmt::format("{}: the device counted an index out of bounds that the host does not find", op));
}

// Whether the low words of int64 indices with zero high words are all below `rows`; raises
// torch's error naming the first that is not. Timing-only mode takes them as in range.
bool rows_in_range(const char* op, const at::Tensor& flat, int64_t rows) {
  const at::Tensor low = flat.view(at::kInt).slice(0, 0, std::nullopt, 2);
  at::Tensor largest = at::empty({1}, flat.options().dtype(at::kFloat));
  if (!run_reduce(op, kernels::ReduceOp::max, low, 0, largest)) return false;
  if (host_can_check() && largest.item<float>() >= static_cast<float>(rows))
    bad_index(op, flat, 0, rows, true);
  return true;
}

// For every element of `index` (a neuron integer tensor, or a view of one broadcast to
// `sizes`), the flat offset in the contiguous `target` of the element that has that
// index at dim `d` and the element's own position elsewhere (exact while target has
// fewer than 2^24 elements), as int32. With `wraps`, a negative index counts from the
// end (advanced indexing). Throws torch's error for an index out of bounds; nullopt
// when not covered.
std::optional<at::Tensor> element_offsets(const char* op, const at::Tensor& index,
                                          const at::Tensor& target, int64_t d, bool wraps = false) {
  IntExpr x(*layout_of(index.scalar_type()));
  Limbs i = x.operand(index);
  if (wraps)
    i = x.select(x.compare(isa::AluOp::is_lt, i, x.constant(0)),
                 x.add(i, x.constant(target.size(d))), i);
  const Limb in_range =
      x.op(isa::AluOp::logical_and, x.compare(isa::AluOp::is_ge, i, x.constant(0)),
           x.compare(isa::AluOp::is_lt, i, x.constant(target.size(d))));
  std::vector<int64_t> weights(target.strides().begin(), target.strides().end());
  weights[static_cast<size_t>(d)] = 0;
  const Limb offset =
      x.op(isa::AluOp::add, x.position(weights),
           x.imm(isa::AluOp::multiply, x.to_float(i), static_cast<float>(target.stride(d))));
  const at::Tensor flat = at::empty(index.sizes(), index.options().dtype(at::kInt));
  const at::Tensor bad = at::empty(index.sizes(), index.options().dtype(at::kFloat));
  const at::Tensor any_bad = at::empty({1}, bad.options());
  if (!x.run_values(
          op, {flat, bad},
          {x.select(in_range, offset, Limb{-1, 0}), x.imm(isa::AluOp::is_equal, in_range, 0)}) ||
      !run_reduce(op, kernels::ReduceOp::max, bad.view({-1}), 0, any_bad))
    return std::nullopt;
  if (host_can_check() && any_bad.item<float>() > 0) bad_index(op, index, d, target.size(d), wraps);
  return flat;
}

// What gather and scatter take: tensors on one neuron device, a contiguous table of an
// engine dtype with fewer than 2^24 elements, an integer index of the same rank.
bool element_indexing(const at::Tensor& table, const at::Tensor& index, int64_t d) {
  const bool movable = engine_dtype(table.scalar_type()) || table.element_size() % 4 == 0;
  bool ok = table.device().is_privateuseone() && index.device() == table.device() && movable &&
            table.is_contiguous() && table.dim() > 0 && index.dim() == table.dim() &&
            index.numel() > 0 && table.numel() < (int64_t{1} << 24) &&
            is_limb_integer(index.scalar_type()) && index.scalar_type() != at::kBool;
  for (int64_t k = 0; ok && k < table.dim(); ++k) ok = k == d || index.size(k) <= table.size(k);
  return ok;
}

// Moves `count` single elements between `table` (rows of one element) and a packed
// tensor by indirect DMA: a gather into `packed`, or a scatter from it into `table`.
// Types the engines do not compute (int64, float64, complex) move as rows of 32-bit
// words, their bytes exactly.
bool move_elements(const char* op, bool scatter, const at::Tensor& table_in,
                   const at::Tensor& offsets, const at::Tensor& packed_in) {
  const bool words = !engine_dtype(table_in.scalar_type());
  // Both are dense in order; as 1-D, a size-1 dim's stray stride cannot refuse the view.
  const auto as_words = [](const at::Tensor& t) {
    return t.as_strided({t.numel()}, {1}).view(at::kInt);
  };
  const at::Tensor table = words ? as_words(table_in) : table_in;
  const at::Tensor packed = words ? as_words(packed_in) : packed_in;
  const isa::DType dtype = *engine_dtype(table.scalar_type());
  const int64_t cols = words ? table_in.element_size() / 4 : 1;
  const std::string chip = target();
  const int64_t rows = table_in.numel(), count = offsets.numel();
  return run_kernel(
      op, table.device().index(),
      fmt::format("{} {} rows={} cols={} count={} scatter={}", op,
                  c10::toString(table.scalar_type()), rows, cols, count, scatter),
      [&] {
        return scatter ? kernels::scatter_rows(chip, dtype, rows, cols, count, 1)
                       : kernels::gather_rows(chip, dtype, rows, cols, count, 1);
      },
      scatter ? std::vector<std::pair<std::string, at::Tensor>>{{"src", packed},
                                                                {"index", offsets},
                                                                {"out", table}}
              : std::vector<std::pair<std::string, at::Tensor>>{
                    {"table", table}, {"index", offsets}, {"out", packed}});
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out);

// A table of 2^24 elements or more (a loss's log-probabilities, tokens x vocabulary), gathered
// along a dim other than 0: slabs of its leading rows small enough that each element's offset
// stays exact in FP32, each gathered by the kernel below into the matching rows of out. False
// when not that case.
bool gather_in_slabs(const at::Tensor& self, int64_t d, const at::Tensor& index, at::Tensor& out) {
  if (d == 0 || self.dim() < 2 || !self.is_contiguous() || self.numel() < kExactInFp32 ||
      !self.device().is_privateuseone() || index.dim() != self.dim() || index.size(0) == 0 ||
      out.device() != self.device() || out.scalar_type() != self.scalar_type())
    return false;
  const int64_t slab_elems = self.numel() / self.size(0);
  if (slab_elems >= kExactInFp32 || index.size(0) > self.size(0)) return false;
  const at::Tensor probe = self.narrow(0, 0, 1);
  if (!element_indexing(probe, index.narrow(0, 0, 1), d)) return false;
  at::native::resize_output(out, index.sizes());
  const at::Tensor dst = out.is_contiguous() ? out : at::empty(index.sizes(), out.options());
  const int64_t slab = (kExactInFp32 - 1) / slab_elems;
  for (int64_t r0 = 0; r0 < index.size(0); r0 += slab) {
    const int64_t n = std::min(slab, index.size(0) - r0);
    at::Tensor part = dst.narrow(0, r0, n);
    gather_out(self.narrow(0, r0, n), d, index.narrow(0, r0, n), false, part);
  }
  if (!dst.is_same(out)) out.copy_(dst);
  return true;
}

// gather(self, dim, index): out[i] = self[i with index[i] at dim]: the element offsets,
// then one indirect DMA of single elements (kernels::gather_rows, rows of one).
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out) {
  const char* op = "aten::gather";
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (!self.is_contiguous() && self.device().is_privateuseone() &&
      element_indexing(self.contiguous(), index, d))  // a strided table: its elements in order
    return gather_out(self.contiguous(), dim, index, sparse_grad, out);
  if (gather_in_slabs(self, d, index, out)) return out;
  if (element_indexing(self, index, d) && out.device() == self.device() &&
      out.scalar_type() == self.scalar_type()) {
    at::native::resize_output(out, index.sizes());
    const at::Tensor dst = out.is_contiguous() ? out : at::empty(index.sizes(), out.options());
    if (const auto offsets = element_offsets(op, index, self, d);
        offsets && move_elements(op, false, self, *offsets, dst)) {
      if (!dst.is_same(out)) out.copy_(dst);
      return out;
    }
  }
  return Fallback<ATEN_OP2(gather, out)>::call(self, dim, index, sparse_grad, out);
}

bool index_leading(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                   at::Tensor& out);

// self[:, ..., index, ...]: advanced indexing with one integer index tensor of one dim
// (the others full slices), e.g. input_ids[:, cache_position]: a gather with the index
// broadcast along the other dims, negative indices counting from the end.
at::Tensor& index_tensor_out(const at::Tensor& self,
                             const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  const char* op = "aten::index";
  // A boolean mask stands for the positions of its true elements (nonzero: one read of
  // the count by the host, as on CUDA), one index tensor per dim it covers.
  bool masked = false;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> t = indices.get(k);
    masked = masked || (t && t->defined() && t->device() == self.device() &&
                        (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte));
  }
  if (masked && self.device().is_privateuseone() && !values_unspecified()) {
    c10::List<std::optional<at::Tensor>> positions;
    for (size_t k = 0; k < indices.size(); ++k) {
      const std::optional<at::Tensor> t = indices.get(k);
      if (t && t->defined() && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte)) {
        for (const at::Tensor& column : at::nonzero(*t).unbind(1)) positions.push_back(column);
      } else {
        positions.push_back(t);
      }
    }
    return index_tensor_out(self, positions, out);
  }
  int64_t d = -1;
  bool one = true;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> t = indices.get(k);
    if (!t || !t->defined()) continue;
    one = one && d < 0;
    d = static_cast<int64_t>(k);
  }
  if (one && d >= 0 && d < self.dim() && !self.is_contiguous() && self.device().is_privateuseone())
    return index_tensor_out(self.contiguous(), indices, out);  // a strided table, in order
  if (one && d >= 0 && d < self.dim()) {
    const at::Tensor index = *indices.get(static_cast<size_t>(d));
    // Whole rows (x[perm], a mixture of experts' token order) by indirect DMA when no index
    // is negative or past 2^31; else element by element below, which wraps negatives.
    if (d == 0 && row_gather_covers(self, index) && out.device() == self.device() &&
        out.scalar_type() == self.scalar_type()) {
      const at::Tensor flat = flat_dense(index);
      if (flat.scalar_type() == at::kLong && self.size(0) < (int64_t{1} << 24) &&
          high_words_zero(flat) && rows_in_range(op, flat, self.size(0)))
        if (at::Tensor rows = gather_rows(op, self, flat); rows.defined()) {
          std::vector<int64_t> sizes(index.sizes().begin(), index.sizes().end());
          sizes.insert(sizes.end(), self.sizes().begin() + 1, self.sizes().end());
          at::native::resize_output(out, sizes);
          out.copy_(rows.view(sizes));
          return out;
        }
    }
    std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
    if (index.dim() == 1) sizes[static_cast<size_t>(d)] = index.size(0);
    std::vector<int64_t> shape(sizes.size(), 1);
    if (index.dim() == 1) shape[static_cast<size_t>(d)] = index.size(0);
    if (index.dim() == 1 && element_indexing(self, index.view(shape), d) &&
        out.device() == self.device() && out.scalar_type() == self.scalar_type()) {
      at::native::resize_output(out, sizes);
      const at::Tensor spread = index.view(shape).expand(sizes);
      const at::Tensor dst = out.is_contiguous() ? out : at::empty(sizes, out.options());
      if (const auto offsets = element_offsets(op, spread, self, d, true);
          offsets && move_elements(op, false, self, *offsets, dst)) {
        if (!dst.is_same(out)) out.copy_(dst);
        return out;
      }
    }
  }
  if (index_leading(self, indices, out)) return out;
  return Fallback<ATEN_OP2(index, Tensor_out)>::call(self, indices, out);
}

bool scatter_add_rows_into(const char* op, const at::Tensor& table, const at::Tensor& index,
                           const at::Tensor& values);

enum class Scatter { assign, add };

// scatter(self, dim, index, src): out = self, then out[i with index[i] at dim] = src[i]
// (a repeated index keeps the last element, in index order): the element offsets, the
// index-shaped part of src packed, one indirect scatter DMA. With Scatter::add (scatter_add),
// src[i] is added there instead, by the DMA's read-add-write of rows of one element, in index
// order, in FP32 (engine float dtypes only). A table of 2^24 elements or more (a loss's gradient,
// tokens x vocabulary) scatters in slabs of its leading rows, as gather_in_slabs gathers. `values`
// is index-shaped.
bool scatter_into(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                  const at::Tensor& values, const at::Tensor& out, bool wraps = false,
                  Scatter how = Scatter::assign) {
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (how == Scatter::add && !is_engine_float(self.scalar_type())) return false;
  if (d != 0 && self.dim() >= 2 && self.numel() >= kExactInFp32 && index.dim() == self.dim() &&
      index.size(0) > 0 && index.size(0) <= self.size(0) && values.sizes() == index.sizes() &&
      self.device().is_privateuseone() && out.device() == self.device() &&
      out.scalar_type() == self.scalar_type() && self.numel() / self.size(0) < kExactInFp32) {
    at::native::resize_output(out, self.sizes());
    if (!out.is_contiguous()) return false;
    if (!out.is_same(self)) out.copy_(self);
    const int64_t slab = (kExactInFp32 - 1) / (self.numel() / self.size(0));
    for (int64_t r0 = 0; r0 < index.size(0); r0 += slab) {
      const int64_t n = std::min(slab, index.size(0) - r0);
      const at::Tensor part = out.narrow(0, r0, n);
      if (!scatter_into(op, part, d, index.narrow(0, r0, n), values.narrow(0, r0, n), part, wraps,
                        how))
        return false;
    }
    return true;
  }
  if (!element_indexing(self, index, d) || out.device() != self.device() ||
      out.scalar_type() != self.scalar_type())
    return false;
  at::native::resize_output(out, self.sizes());
  if (!out.is_contiguous()) return false;
  if (!out.is_same(self)) out.copy_(self);
  const auto offsets = element_offsets(op, index, out, d, wraps);
  if (!offsets) return false;
  if (how == Scatter::assign) return move_elements(op, true, out, *offsets, values.contiguous());
  // The CPU's scatter_add sums a 16-bit float's elements in FP32 and rounds once: so do these,
  // through an FP32 copy.
  const bool narrow = out.scalar_type() != at::kFloat;
  const at::Tensor table = narrow ? out.to(at::kFloat) : out;
  if (!scatter_add_rows_into(op, table.view({table.numel(), 1}), offsets->view({-1}),
                             values.to(at::kFloat).contiguous().view({-1, 1})))
    return false;
  if (narrow) out.copy_(table);
  return true;
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  bool fits = src.dim() == index.dim() && src.scalar_type() == self.scalar_type() &&
              src.device() == self.device();
  for (int64_t k = 0; fits && k < src.dim(); ++k) fits = index.size(k) <= src.size(k);
  if (fits && scatter_into("aten::scatter", self, dim, index,
                           src.as_strided(index.sizes(), src.strides(), src.storage_offset()), out))
    return out;
  return Fallback<ATEN_OP2(scatter, src_out)>::call(self, dim, index, src, out);
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Scalar& value, at::Tensor& out) {
  if (self.device().is_privateuseone() &&
      (engine_dtype(self.scalar_type()) || layout_of(self.scalar_type())) &&
      scatter_into("aten::scatter", self, dim, index,
                   at::full(index.sizes(), value, self.options()), out))
    return out;
  return Fallback<ATEN_OP2(scatter, value_out)>::call(self, dim, index, value, out);
}

// index_copy(self, dim, index, source): out = self, then the slice index[i] of out along
// dim = the slice i of source: a scatter with index broadcast across source's other dims.
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, at::Tensor& out) {
  if (self.dim() > 0 && index.dim() <= 1 && source.dim() == self.dim() &&
      source.scalar_type() == self.scalar_type() && source.device() == self.device() &&
      (engine_dtype(self.scalar_type()) || layout_of(self.scalar_type()))) {
    const int64_t d = at::maybe_wrap_dim(dim, self.dim());
    std::vector<int64_t> along(static_cast<size_t>(self.dim()), 1);
    along[static_cast<size_t>(d)] = -1;
    if (source.size(d) == index.numel() &&
        scatter_into("aten::index_copy", self, d, index.reshape(along).expand(source.sizes()),
                     source, out))
      return out;
  }
  return Fallback<ATEN_OP2(index_copy, out)>::call(self, dim, index, source, out);
}

// self[index] = values for one integer index over dim 0 (negative indices count from
// the end): rows by indirect scatter DMA. False when not covered.
bool index_put_rows(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                    const at::Tensor& values, bool accumulate) {
  const char* op = "aten::index_put_";
  const std::optional<at::Tensor> first = indices.size() == 1 ? indices.get(0) : std::nullopt;
  if (!accumulate && first && first->defined() && first->device() == self.device() &&
      is_limb_integer(first->scalar_type()) && first->scalar_type() != at::kBool &&
      first->scalar_type() != at::kByte && self.device().is_privateuseone() && self.dim() > 0 &&
      self.is_contiguous() && (engine_dtype(self.scalar_type()) || self.element_size() == 8) &&
      first->numel() > 0 && self.size(0) < (int64_t{1} << 24) &&
      values.scalar_type() == self.scalar_type()) {
    // The rows are moved as bytes: an 8-byte type (int64, float64) as pairs of int32 words.
    const int64_t words = engine_dtype(self.scalar_type()) ? 1 : 2;
    const int64_t rows = self.size(0), cols = self.numel() / std::max<int64_t>(rows, 1),
                  count = first->numel();
    std::vector<int64_t> sizes{count};
    sizes.insert(sizes.end(), self.sizes().begin() + 1, self.sizes().end());
    const at::Tensor flat = flat_dense(*first);
    IntExpr x(*layout_of(flat.scalar_type()));
    const Limbs i = x.operand(flat);
    const Limb negative = x.compare(isa::AluOp::is_lt, i, x.constant(0));
    const Limbs wrapped = x.select(negative, x.add(i, x.constant(rows)), i);
    const Limb in_range =
        x.op(isa::AluOp::logical_and, x.compare(isa::AluOp::is_ge, wrapped, x.constant(0)),
             x.compare(isa::AluOp::is_lt, wrapped, x.constant(rows)));
    const at::Tensor row = at::empty({count}, flat.options().dtype(at::kInt));
    const at::Tensor bad = at::empty({count}, flat.options().dtype(at::kFloat));
    const at::Tensor any_bad = at::empty({1}, bad.options());
    if (x.run_values(op, {row, bad},
                     {x.select(in_range, x.to_float(wrapped), Limb{-1, 0}),
                      x.imm(isa::AluOp::is_equal, in_range, 0)}) &&
        run_reduce(op, kernels::ReduceOp::max, bad, 0, any_bad)) {
      if (host_can_check() && any_bad.item<float>() > 0) bad_index(op, flat, 0, rows, true);
      at::Tensor packed = flat_dense(values.to(self.device()).expand(sizes));
      if (words == 2) packed = packed.view(at::kInt);
      packed = packed.view({count, cols * words});
      const at::Tensor table = words == 2 ? self.view(at::kInt) : self;
      const isa::DType dtype = words == 2 ? isa::DType::int32 : *engine_dtype(self.scalar_type());
      const std::string chip = target();
      if (run_kernel(
              op, self.device().index(),
              fmt::format("{} {} rows={} cols={} count={}", op, c10::toString(self.scalar_type()),
                          rows, cols, count),
              [&] { return kernels::scatter_rows(chip, dtype, rows, cols * words, count, 1); },
              {{"src", packed}, {"index", row}, {"out", table}}))
        return true;
    }
  }
  return false;
}

void check_in_range(const char* op, const at::Tensor& index, int64_t d, int64_t size);

// grad_weight[indices[i], :] += grad[i, :] into a zeroed table, by the DMA's read-add-write
// (scatter_add_rows_into); the padding row, which only the padding index adds to, is zeroed
// again after. Any vocabulary against any batch: the traffic is the batch's rows.
at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                    c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  const char* op = "aten::embedding_dense_backward";
  const int64_t rows = num_weights.guard_int(__FILE__, __LINE__);
  const int64_t padding = padding_idx.guard_int(__FILE__, __LINE__);
  const int64_t count = indices.numel(), cols = grad.dim() > 0 ? grad.size(-1) : 0;
  if (!scale_grad_by_freq && grad.device().is_privateuseone() &&
      indices.device() == grad.device() && is_engine_float(grad.scalar_type()) &&
      is_limb_integer(indices.scalar_type()) && indices.scalar_type() != at::kBool && count > 0 &&
      cols > 0 && rows > 0 && rows < kExactInFp32 && grad.numel() == count * cols) {
    check_in_range(op, indices, 0, rows);
    const at::Tensor out = at::zeros({rows, cols}, grad.options());
    if (scatter_add_rows_into(op, out, indices.reshape({count}),
                              flat_dense(grad).view({count, cols}))) {
      if (padding >= 0 && padding < rows) out.select(0, padding).zero_();
      return out;
    }
  }
  return FallbackSymInt<ATEN_OP(embedding_dense_backward)>::call(grad, indices, num_weights,
                                                                 padding_idx, scale_grad_by_freq);
}

// ---- flip, index_add, scatter_add: composed of the kernels above ------------------------

// Raises torch's error when an index of `index` is outside [0, size): one read of the
// device (min and max as FP32, which keeps every out-of-range value out of range).
// `as_float` is the index as FP32; with `wraps`, [-size, size) is in range (negative
// indices count from the end).
void check_in_range(const char* op, const at::Tensor& index, const at::Tensor& as_float, int64_t d,
                    int64_t size, bool wraps) {
  if (index.numel() == 0) return;
  // The reductions run in timing-only mode too, so that it takes the time the check takes.
  const at::Tensor on_device = at::stack({as_float.min(), as_float.max()});
  if (!host_can_check()) return;
  const at::Tensor limits = on_device.cpu();
  const auto* v = limits.data_ptr<float>();
  if (v[0] < static_cast<float>(wraps ? -size : 0) || v[1] >= static_cast<float>(size))
    bad_index(op, index, d, size, wraps);
}

void check_in_range(const char* op, const at::Tensor& index, int64_t d, int64_t size) {
  check_in_range(op, index, small_integers_to_float(index), d, size, false);
}

// An FP32 index with its negative values counted from the end of a dim of `size`.
at::Tensor wrapped(const at::Tensor& as_float, int64_t size) {
  return as_float + as_float.lt(0).to(at::kFloat) * static_cast<double>(size);
}

bool small_index(const at::Tensor& self, const at::Tensor& index) {
  return index.device() == self.device() && is_limb_integer(index.scalar_type()) &&
         is_engine_float(self.scalar_type());
}

// self reversed along dims: per dim, that dim moved to the front, its rows gathered in
// reverse order by indirect DMA (index_select), and moved back.
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  // 8-byte elements (int64 ids, positions) flip as pairs of int32 words.
  if (self.device().is_privateuseone() && self.numel() == 0)
    return self.clone(at::MemoryFormat::Contiguous);
  if (self.device().is_privateuseone() && self.element_size() == 8 && self.dim() > 0 &&
      !self.is_complex()) {
    const at::Tensor words = self.contiguous().view(at::kInt).unflatten(-1, {self.size(-1), 2});
    std::vector<int64_t> wrapped;
    for (const int64_t dim : dims) wrapped.push_back(at::maybe_wrap_dim(dim, self.dim()));
    return pytorch::flip(words, wrapped).flatten(-2).view(self.scalar_type());
  }
  if (self.device().is_privateuseone() && engine_dtype(self.scalar_type()) && self.dim() > 0) {
    std::vector<bool> flipped(static_cast<size_t>(self.dim()), false);
    for (const int64_t dim : dims) {
      const int64_t d = at::maybe_wrap_dim(dim, self.dim());
      TORCH_CHECK(!flipped[static_cast<size_t>(d)],
                  "dims has duplicates, original flip dims size=", dims.size(),
                  ", but unique flip dims size=", flipped.size());
      flipped[static_cast<size_t>(d)] = true;
    }
    at::Tensor x = self;
    for (int64_t d = 0; d < self.dim(); ++d) {
      const int64_t n = self.size(d);
      if (!flipped[static_cast<size_t>(d)] || n <= 1) continue;
      const at::Tensor reverse = at::arange(n - 1, -1, -1, self.options().dtype(at::kLong));
      const at::Tensor rows = x.movedim(d, 0).contiguous();
      x = pytorch::index_select(rows, 0, reverse).movedim(0, d);
    }
    return x.is_same(self) ? self.clone(at::MemoryFormat::Contiguous) : x.contiguous();
  }
  return Fallback<ATEN_OP(flip)>::call(self, dims);
}

// table[index[i], :] += values[i, :] for every i, in order: the rows summed by the DMA's
// read-add-write (kernels::scatter_add_rows), each add rounded to the table's dtype as the
// CPU's index_add rounds it. `table` [rows, cols] and `values` [count, cols] are contiguous
// of one engine float dtype; `index` holds count integers in [0, rows), checked by the
// caller. FP16 adds through an FP32 copy (the DMA adds FP32 and BF16). The traffic is the
// rows named, whatever the table's size: an LM's vocabulary against any batch.
bool scatter_add_rows_into(const char* op, const at::Tensor& table, const at::Tensor& index,
                           const at::Tensor& values) {
  const int64_t rows = table.size(0), count = values.size(0);
  const int64_t cols = rows > 0 ? table.numel() / rows : 0;
  if (count == 0 || cols == 0) return true;
  if (table.scalar_type() == at::kHalf) {
    at::Tensor wide = table.to(at::kFloat);
    if (!scatter_add_rows_into(op, wide, index, values.to(at::kFloat))) return false;
    table.copy_(wide);
    return true;
  }
  const at::Tensor row = index.reshape({count}).to(at::kInt);
  const isa::DType dtype = *engine_dtype(table.scalar_type());
  const std::string chip = target();
  return run_kernel(op, table.device().index(),
                    fmt::format("{} {} rows={} cols={} count={} add", op,
                                c10::toString(table.scalar_type()), rows, cols, count),
                    [&] { return kernels::scatter_add_rows(chip, dtype, rows, cols, count, 1); },
                    {{"src", values}, {"index", row}, {"out", table}});
}

// out = self + alpha * source's slices along dim summed by index: alpha applied to source
// first, then its slices added into out by the DMA (scatter_add_rows_into), with dim moved
// to the front when it is not.
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const at::Scalar& alpha, at::Tensor& out) {
  const char* op = "aten::index_add";
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  const int64_t rows = self.dim() > 0 ? self.size(d) : 1, count = index.numel();
  if (small_index(self, index) && self.dim() > 0 && source.dim() == self.dim() &&
      index.dim() <= 1 && source.scalar_type() == self.scalar_type() &&
      source.device() == self.device() && source.size(d) == count &&
      out.device() == self.device() && out.scalar_type() == self.scalar_type() &&
      rows < kExactInFp32) {  // the range check's FP32 is exact
    TORCH_CHECK(!out.is_same(self) || !overlaps(source, self),
                "index_add_(): source and self overlap");
    check_in_range(op, index, d, rows);
    at::native::resize_output(out, self.sizes());
    if (!out.is_same(self)) out.copy_(self);
    if (count == 0 || self.numel() == 0) return out;
    const at::Tensor scaled = alpha.equal(1) ? source : source * alpha;
    const at::Tensor values = flat_dense(scaled.movedim(d, 0)).view({count, -1});
    const bool in_place = d == 0 && out.is_contiguous();
    at::Tensor table = in_place ? out : out.movedim(d, 0).contiguous();
    if (scatter_add_rows_into(op, table.view({rows, -1}), index, values)) {
      if (!in_place) out.movedim(d, 0).copy_(table);
      return out;
    }
  }
  if (rows >= kExactInFp32)
    note_refusal(op, fmt::format("{} rows along dim {} reach {}, past which row indices are not "
                                 "exact in FP32",
                                 rows, d, kExactInFp32));
  return Fallback<ATEN_OP2(index_add, out)>::call(self, dim, index, source, alpha, out);
}

enum class LineReduce { sum, mean, amax, amin };

std::optional<LineReduce> line_reduce(c10::string_view name) {
  if (name == "sum") return LineReduce::sum;
  if (name == "mean") return LineReduce::mean;
  if (name == "amax") return LineReduce::amax;
  if (name == "amin") return LineReduce::amin;
  return std::nullopt;  // prod: no product reduction on the engines
}

// out = self, then out[..., index[i], ...] <reduce>= src[..., i, ...] along dim over
// index's extent: per line along dim, a one-hot [size, m] of its indices, the values it
// selects reduced over m on the engines (FP32, rounded once): summed (sum, mean) or their
// extreme taken (amax, amin). Without include_self, a position that receives values takes
// their reduction alone; one that receives none keeps self's. False when not covered.
bool scatter_reduce_into(const char* op, const at::Tensor& self, int64_t d, const at::Tensor& index,
                         const at::Tensor& src, LineReduce reduce, bool include_self,
                         const at::Tensor& out) {
  const int64_t size = self.dim() > 0 ? self.size(d) : 1;
  if (!small_index(self, index) || self.dim() == 0 || index.dim() != self.dim() ||
      src.dim() != self.dim() || src.scalar_type() != self.scalar_type() ||
      src.device() != self.device() || out.device() != self.device() ||
      out.scalar_type() != self.scalar_type()) {
    return false;
  }
  if (index.numel() * size > kMaxOneHot) {
    note_refusal(op, fmt::format("the one-hot tensor ({} indices x {}) exceeds {} elements",
                                 index.numel(), size, kMaxOneHot));
    return false;
  }
  for (int64_t k = 0; k < self.dim(); ++k)
    if (index.size(k) > src.size(k) || (k != d && index.size(k) > self.size(k))) return false;
  check_in_range(op, index, d, size);
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0) return true;
  at::Tensor region = out, values = src;
  for (int64_t k = 0; k < self.dim(); ++k) {
    values = values.narrow(k, 0, index.size(k));
    if (k != d) region = region.narrow(k, 0, index.size(k));
  }
  const at::Tensor position = at::arange(size, self.options().dtype(at::kFloat)).reshape({size, 1});
  const at::Tensor lines =
      small_integers_to_float(index.movedim(d, -1)).unsqueeze(-2);  // [.., 1, m]
  const at::Tensor hot = position.eq(lines);                        // [.., size, m]
  const at::Tensor each = values.movedim(d, -1).unsqueeze(-2);
  const at::Tensor line = region.movedim(d, -1);  // [.., size]
  // Selected, not multiplied by the one-hot: a NaN value reaches its own position only.
  const auto selected = [&](double none) {
    return at::where(hot, each, at::scalar_tensor(none, each.options()));
  };
  if (reduce == LineReduce::sum && include_self) {  // scatter_add
    line.add_(selected(0).sum(-1));
    return true;
  }
  const at::Tensor count = hot.sum(-1, false, at::kFloat);
  at::Tensor result;
  if (reduce == LineReduce::sum || reduce == LineReduce::mean) {
    at::Tensor sums = selected(0).sum(-1);
    if (include_self) sums = sums + line;
    result = reduce == LineReduce::sum ? sums : sums / (include_self ? count + 1 : count);
  } else {
    const bool is_max = reduce == LineReduce::amax;
    result = is_max ? selected(-INFINITY).amax(-1) : selected(INFINITY).amin(-1);
    if (include_self) result = is_max ? at::maximum(result, line) : at::minimum(result, line);
  }
  line.copy_(at::where(count > 0, result, line));
  return true;
}

// scatter_add: within the one-hot's limit, on the engines (scatter_reduce_into); past it (a
// loss's gradient over a vocabulary), each element added by the DMA (scatter_into).
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  const char* op = "aten::scatter_add";
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  const int64_t size = self.dim() > 0 ? self.size(d) : 1;
  bool fits = src.dim() == index.dim() && src.scalar_type() == self.scalar_type() &&
              src.device() == self.device() && index.numel() * size > kMaxOneHot;
  for (int64_t k = 0; fits && k < src.dim(); ++k) fits = index.size(k) <= src.size(k);
  if (fits && scatter_into(op, self, d, index,
                           src.as_strided(index.sizes(), src.strides(), src.storage_offset()), out,
                           false, Scatter::add))
    return out;
  if (scatter_reduce_into(op, self, d, index, src, LineReduce::sum, true, out)) return out;
  return Fallback<ATEN_OP2(scatter_add, out)>::call(self, dim, index, src, out);
}

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, bool include_self,
                               at::Tensor& out) {
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (const auto r = line_reduce(reduce);
      r && scatter_reduce_into("aten::scatter_reduce", self, d, index, src, *r, include_self, out))
    return out;
  return Fallback<ATEN_OP2(scatter_reduce, two_out)>::call(self, dim, index, src, reduce,
                                                           include_self, out);
}

// index_reduce: scatter_reduce with the (1-D) index broadcast across source's other dims.
at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             const at::Tensor& source, c10::string_view reduce, bool include_self,
                             at::Tensor& out) {
  const auto r = line_reduce(reduce);
  if (r && *r != LineReduce::sum && self.dim() > 0 && index.dim() <= 1 &&
      source.dim() == self.dim()) {
    const int64_t d = at::maybe_wrap_dim(dim, self.dim());
    std::vector<int64_t> along(static_cast<size_t>(self.dim()), 1);
    along[static_cast<size_t>(d)] = -1;
    if (source.size(d) == index.numel() &&
        scatter_reduce_into("aten::index_reduce", self, d,
                            index.reshape(along).expand(source.sizes()), source, *r, include_self,
                            out))
      return out;
  }
  return Fallback<ATEN_OP2(index_reduce, out)>::call(self, dim, index, source, reduce, include_self,
                                                     out);
}

// The integer index tensors of self's first dims (no slice before or between them), or
// empty when the indices are not that.
std::vector<at::Tensor> leading_indices(const at::Tensor& self,
                                        const c10::List<std::optional<at::Tensor>>& indices) {
  std::vector<at::Tensor> index;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> t = indices.get(k);
    if (!t || !t->defined() || !is_limb_integer(t->scalar_type()) ||
        t->scalar_type() == at::kBool || t->scalar_type() == at::kByte ||
        t->device() != self.device())
      return {};
    index.push_back(*t);
  }
  return static_cast<int64_t>(index.size()) <= self.dim() ? index : std::vector<at::Tensor>{};
}

// The one index into self's first k dims, flattened, of k integer indices (broadcast
// together), each wrapped from the end and checked as torch checks it: FP32 on the device,
// exact while those dims hold fewer than 2^24 rows. Undefined when not covered.
at::Tensor linear_index(const char* op, const at::Tensor& self,
                        const std::vector<at::Tensor>& index) {
  int64_t rows = 1;
  for (size_t d = 0; d < index.size(); ++d) rows *= self.size(static_cast<int64_t>(d));
  if (rows >= (int64_t{1} << 24)) return {};
  const std::vector<at::Tensor> spread = at::broadcast_tensors(index);
  at::Tensor linear;
  int64_t multiple = rows;
  for (size_t d = 0; d < spread.size(); ++d) {
    const int64_t size = self.size(static_cast<int64_t>(d));
    multiple /= size;
    at::Tensor i = small_integers_to_float(spread[d]);
    check_in_range(op, spread[d], i, static_cast<int64_t>(d), size, true);
    i = wrapped(i, size);
    linear = linear.defined() ? linear + i * static_cast<double>(multiple)
                              : i * static_cast<double>(multiple);
  }
  return linear.to(at::kInt);
}

// self[i0, ..., ik-1] = values (or += with accumulate) for k >= 1 leading integer
// indices: one linear index into the leading dims, then the row scatter above, or for
// accumulation the one-hot sum of index_add. False when not covered.
bool index_put_leading(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                       const at::Tensor& values, bool accumulate) {
  const char* op = "aten::index_put_";
  const std::vector<at::Tensor> index = leading_indices(self, indices);
  const int64_t k = static_cast<int64_t>(index.size());
  if (k == 0 || !self.device().is_privateuseone() || !self.is_contiguous() ||
      values.scalar_type() != self.scalar_type() ||
      (accumulate && !is_engine_float(self.scalar_type())))
    return false;
  const at::Tensor linear = linear_index(op, self, index);
  if (!linear.defined()) return false;
  std::vector<int64_t> rest(self.sizes().begin() + k, self.sizes().end());
  std::vector<int64_t> view_sizes{-1}, value_sizes = linear.sizes().vec();
  view_sizes.insert(view_sizes.end(), rest.begin(), rest.end());
  value_sizes.insert(value_sizes.end(), rest.begin(), rest.end());
  at::Tensor table = self.view(view_sizes);
  std::vector<int64_t> packed_sizes{linear.numel()};
  packed_sizes.insert(packed_sizes.end(), rest.begin(), rest.end());
  const at::Tensor packed = values.to(self.device()).expand(value_sizes).reshape(packed_sizes);
  const at::Tensor flat = linear.reshape({-1});
  if (flat.numel() == 0) return true;
  if (accumulate) {
    table.index_add_(0, flat, packed);
    return true;
  }
  return index_put_rows(table, c10::List<std::optional<at::Tensor>>({flat}), packed, false);
}

// out = self[i0, ..., ik-1] for k >= 2 leading integer indices: rows of self's first k
// dims flattened, gathered by one linear index.
bool index_leading(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                   at::Tensor& out) {
  const std::vector<at::Tensor> index = leading_indices(self, indices);
  if (index.size() < 2 || !self.device().is_privateuseone() || out.device() != self.device() ||
      out.scalar_type() != self.scalar_type())
    return false;
  const at::Tensor linear = linear_index("aten::index", self, index);
  if (!linear.defined()) return false;
  const int64_t k = static_cast<int64_t>(index.size());
  std::vector<int64_t> rest(self.sizes().begin() + k, self.sizes().end());
  std::vector<int64_t> table_sizes{-1}, sizes = linear.sizes().vec();
  table_sizes.insert(table_sizes.end(), rest.begin(), rest.end());
  sizes.insert(sizes.end(), rest.begin(), rest.end());
  const at::Tensor rows =
      pytorch::index_select(self.contiguous().view(table_sizes), 0, linear.reshape({-1}));
  at::native::resize_output(out, sizes);
  out.copy_(rows.view(sizes));
  return true;
}

// The dim of the one index tensor among `indices` (the others None: whole dims), or -1.
int64_t only_index_dim(const c10::List<std::optional<at::Tensor>>& indices) {
  int64_t d = -1;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> t = indices.get(k);
    if (!t || !t->defined()) continue;
    if (d >= 0) return -1;
    d = static_cast<int64_t>(k);
  }
  return d;
}

// self[:, ..., index, ...] = value for one integer index tensor at dim d and one value
// (a logits processor's scores[:, banned] = -inf): the positions along d that the index
// names, as a mask, and a where; indices are checked and wrapped as torch does.
bool index_put_one_dim_value(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                             const at::Tensor& values, bool accumulate) {
  const int64_t d = only_index_dim(indices);
  if (d < 0 || accumulate || values.numel() != 1 || !self.device().is_privateuseone() ||
      d >= self.dim())
    return false;
  const at::Tensor index = *indices.get(static_cast<size_t>(d));
  if (!is_limb_integer(index.scalar_type()) || index.scalar_type() == at::kBool ||
      index.device() != self.device() || self.size(d) >= (int64_t{1} << 24))
    return false;
  const int64_t size = self.size(d);
  at::Tensor named = small_integers_to_float(index.reshape({-1}));
  check_in_range("aten::index_put_", index, named, d, size, true);
  named = wrapped(named, size);
  const at::Tensor position = at::arange(size, named.options()).reshape({size, 1});
  std::vector<int64_t> sizes(static_cast<size_t>(self.dim()), 1);
  sizes[static_cast<size_t>(d)] = size;
  const at::Tensor mask = named.numel() == 0
                              ? at::zeros(sizes, self.options().dtype(at::kBool))
                              : position.eq(named.reshape({1, -1})).any(1).view(sizes);
  self.copy_(at::where(mask, values.reshape({}).to(self.scalar_type()), self));
  return true;
}

// self[:, ..., index, ...] = values for one 1-D integer index at dim d, the other dims whole
// (a static KV cache's update, cache[:, :, positions] = keys): a scatter along d of the index
// spread over the other dims, its negative values counted from the end (element_offsets checks
// and wraps them in the same kernel).
bool index_put_one_dim(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                       const at::Tensor& values, bool accumulate) {
  const int64_t d = only_index_dim(indices);
  if (d < 0 || accumulate || !self.device().is_privateuseone() || d >= self.dim() ||
      values.scalar_type() != self.scalar_type() || values.device() != self.device())
    return false;
  const at::Tensor index = *indices.get(static_cast<size_t>(d));
  // int64 or int32 positions; a uint8 or bool index is a mask, which torch expands later.
  if (index.dim() != 1 || (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) ||
      index.device() != self.device() || self.size(d) >= kExactInFp32)
    return false;
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[static_cast<size_t>(d)] = index.numel();
  if (!at::is_expandable_to(values.sizes(), sizes)) return false;
  std::vector<int64_t> along(static_cast<size_t>(self.dim()), 1);
  along[static_cast<size_t>(d)] = index.numel();
  return scatter_into("aten::index_put_", self, d, index.reshape(along).expand(sizes),
                      values.expand(sizes), self, /*wraps=*/true);
}

// self[mask] = value for a boolean mask of self's leading dims and one value (an
// encoder-decoder's labels[labels == -100] = pad): a where on the device, no sync.
bool index_put_mask(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                    const at::Tensor& values, bool accumulate) {
  const std::optional<at::Tensor> mask = indices.size() == 1 ? indices.get(0) : std::nullopt;
  if (accumulate || !mask || !mask->defined() || mask->scalar_type() != at::kBool ||
      mask->device() != self.device() || !self.device().is_privateuseone() || values.numel() != 1 ||
      mask->dim() > self.dim() || mask->sizes() != self.sizes().slice(0, mask->dim()))
    return false;
  std::vector<int64_t> sizes = mask->sizes().vec();
  sizes.resize(static_cast<size_t>(self.dim()), 1);
  const at::Tensor value = values.reshape({}).to(self.scalar_type());
  self.copy_(at::where(mask->view(sizes), value, self));
  return true;
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  if (index_put_mask(self, indices, values, accumulate)) return self;
  const bool one_row_index = indices.size() == 1 && !accumulate;
  if (one_row_index && index_put_rows(self, indices, values, accumulate)) return self;
  if (index_put_leading(self, indices, values, accumulate)) return self;
  if (index_put_one_dim_value(self, indices, values, accumulate)) return self;
  if (index_put_one_dim(self, indices, values, accumulate)) return self;
  return Fallback<ATEN_OP(_index_put_impl_)>::call(self, indices, values, accumulate, unsafe);
}

// Whether each element is among test_elements: every pair compared, any per element (up to
// 2^24 pairs), as Whisper's generation asks which tokens are special.
at::Tensor& isin_out(const at::Tensor& elements, const at::Tensor& test_elements,
                     bool assume_unique, bool invert, at::Tensor& out) {
  if (elements.device().is_privateuseone() && test_elements.device() == elements.device() &&
      out.device() == elements.device() && out.scalar_type() == at::kBool &&
      elements.numel() * std::max<int64_t>(test_elements.numel(), 1) < (int64_t{1} << 24)) {
    at::Tensor found = test_elements.numel() == 0
                           ? at::zeros(elements.sizes(), out.options())
                           : elements.unsqueeze(-1).eq(test_elements.reshape({-1})).any(-1);
    if (invert) found = found.logical_not();
    at::native::resize_output(out, elements.sizes());
    out.copy_(found);
    return out;
  }
  return Fallback<ATEN_OP2(isin, Tensor_Tensor_out)>::call(elements, test_elements, assume_unique,
                                                           invert, out);
}

// ---- nonzero, masked_select and masked_scatter: a mask's ranks by a cumulative sum ----

// Each element's coordinates in self, [numel, dims] int64, in row-major order.
at::Tensor coordinates(const at::Tensor& self) {
  const int64_t n = self.numel();
  const at::Tensor position = at::arange(n, self.options().dtype(at::kLong));
  std::vector<at::Tensor> columns;
  int64_t stride = n;
  for (int64_t d = 0; d < self.dim(); ++d) {
    stride /= self.size(d);
    at::Tensor c = at::floor_divide(position, stride);
    if (d > 0) c = c - at::floor_divide(c, self.size(d)) * self.size(d);
    columns.push_back(c);
  }
  return at::stack(columns, 1);
}

// The rows of `values` ([n] or [n, k]) where `hit` ([n] bool) is true, in order, as the
// first rows of `rows` rows filled with `fill`; hits beyond them are dropped. Each hit's rank
// among the hits (a cumulative sum, exact in FP32 below 2^24) is the row it is written to,
// the rest going to one spare row.
at::Tensor hit_rows(const at::Tensor& hit, const at::Tensor& values, int64_t rows,
                    const at::Scalar& fill) {
  const at::Tensor rank = hit.to(at::kFloat).cumsum(0);
  const at::Tensor slot = at::where(hit.logical_and(rank <= static_cast<double>(rows)), rank - 1,
                                    static_cast<double>(rows))
                              .to(at::kInt);
  std::vector<int64_t> sizes = values.sizes().vec();
  sizes[0] = rows + 1;
  at::Tensor out = at::full(sizes, fill, values.options());
  out.index_put_({slot}, values);
  return out.narrow(0, 0, rows).clone();
}

bool rows_on_device(const at::Tensor& self) {
  return self.device().is_privateuseone() &&
         (engine_dtype(self.scalar_type()) || is_limb_integer(self.scalar_type())) &&
         self.numel() < (int64_t{1} << 23);
}

// The positions of the nonzero elements, [count, dims] int64. The count is read by the host
// (the output's size depends on it, as CUDA's nonzero synchronises).
at::Tensor nonzero(const at::Tensor& self) {
  const int64_t n = self.numel();
  if (rows_on_device(self) && n == 0)  // nothing to find: no rows
    return at::empty({0, self.dim()}, self.options().dtype(at::kLong));
  if (rows_on_device(self) && n > 0 && !values_unspecified()) {
    const at::Tensor hit = self.reshape({-1}).ne(0);
    const auto count = static_cast<int64_t>(hit.to(at::kFloat).sum().item<float>());
    if (self.dim() == 0) return at::empty({count, 0}, self.options().dtype(at::kLong));
    return hit_rows(hit, coordinates(self), count, 0);
  }
  return Fallback<ATEN_OP(nonzero)>::call(self);
}

// The first `size` positions of the nonzero elements, rows of fill_value after them: a fixed
// output size, so nothing is read by the host (and timing-only mode runs it).
at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  if (rows_on_device(self) && size >= 0) {
    if (self.numel() == 0 || self.dim() == 0)  // no coordinates to find, or none to give
      return at::full({size, self.dim()}, fill_value, self.options().dtype(at::kLong));
    return hit_rows(self.reshape({-1}).ne(0), coordinates(self), size, fill_value);
  }
  return Fallback<ATEN_OP(nonzero_static)>::call(self, size, fill_value);
}

// self's elements where mask (broadcast together) is true, in order, 1-D: the count is read
// by the host, as for nonzero.
bool masked_select_into(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  if (!self.device().is_privateuseone() || mask.device() != self.device() ||
      out.device() != self.device() || mask.scalar_type() != at::kBool ||
      out.scalar_type() != self.scalar_type() || values_unspecified())
    return false;
  const std::vector<int64_t> sizes = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor values = self.expand(sizes).reshape({-1});
  if (!rows_on_device(values)) return false;
  at::Tensor picked;
  if (values.numel() == 0) {
    picked = at::empty({0}, self.options());
  } else {
    const at::Tensor hit = mask.expand(sizes).reshape({-1});
    const auto count = static_cast<int64_t>(hit.to(at::kFloat).sum().item<float>());
    picked = hit_rows(hit, values, count, 0);
  }
  at::native::resize_output(out, picked.sizes());
  out.copy_(picked);
  return true;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  if (masked_select_into(self, mask, out)) return out;
  return Fallback<ATEN_OP(masked_select)>::call(self, mask);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  if (masked_select_into(self, mask, out)) return out;
  return Fallback<ATEN_OP2(masked_select, out)>::call(self, mask, out);
}

// self[mask] = the first elements of source, in order: each masked element's rank (a
// cumulative sum) picks its source element, and a where keeps the others.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  const int64_t n = self.numel();
  if (self.device().is_privateuseone() && mask.device() == self.device() &&
      source.device() == self.device() && mask.scalar_type() == at::kBool &&
      source.scalar_type() == self.scalar_type() && n > 0 && n < (int64_t{1} << 24) &&
      source.numel() > 0 && at::is_expandable_to(mask.sizes(), self.sizes())) {
    const at::Tensor hit = mask.expand(self.sizes()).reshape({-1});
    const at::Tensor rank = hit.to(at::kFloat).cumsum(0) - 1;
    if (!values_unspecified()) {
      const auto needed = static_cast<int64_t>(rank[n - 1].item<float>()) + 1;
      TORCH_CHECK(needed <= source.numel(), "masked_scatter: expected source to have at least ",
                  needed, " elements (the number of ones in mask), but it has ", source.numel());
    }
    const at::Tensor pick = at::where(hit, rank, 0.0).to(at::kLong);
    const at::Tensor picked = source.reshape({-1}).index_select(0, pick).view(self.sizes());
    self.copy_(at::where(hit.view(self.sizes()), picked, self));
    return self;
  }
  return Fallback<ATEN_OP(masked_scatter_)>::call(self, mask, source);
}

// torch.roll: along each rolled dim the last `shift` positions move to the front and the rest
// follow them, two slice copies on the device per dim; with no dims the flattened tensor rolls.
at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef sym_shifts, at::IntArrayRef dims) {
  const at::IntArrayRef shifts = C10_AS_INTARRAYREF_SLOW(sym_shifts);
  const bool paired = dims.empty() ? shifts.size() == 1 : shifts.size() == dims.size();
  if (self.device().is_privateuseone() && paired && !shifts.empty() &&
      (dims.empty() || self.dim() > 0)) {
    if (self.numel() == 0) return self.clone();
    if (dims.empty())
      return roll(self.reshape({-1}), sym_shifts, at::IntArrayRef{0}).view(self.sizes());
    at::Tensor rolled = self;
    bool ok = true;
    for (size_t i = 0; i < dims.size() && ok; ++i) {
      const int64_t d = at::maybe_wrap_dim(dims[i], self.dim()), n = rolled.size(d);
      const int64_t s = ((shifts[i] % n) + n) % n;
      at::Tensor out = at::empty(rolled.sizes(), rolled.options());
      ok = s == 0 ? copy_on_device(rolled, out)
                  : copy_on_device(rolled.narrow(d, n - s, s), out.narrow(d, 0, s)) &&
                        copy_on_device(rolled.narrow(d, 0, n - s), out.narrow(d, s, n - s));
      rolled = out;
    }
    if (ok) return rolled;
  }
  return FallbackSymInt<ATEN_OP(roll)>::call(self, sym_shifts, dims);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("gather.out", gather_out);
  m.impl("index.Tensor_out", index_tensor_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("_index_put_impl_", index_put_impl);
  m.impl("flip", flip);
  m.impl("index_add.out", index_add_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_out);
  m.impl("index_reduce.out", index_reduce_out);
  m.impl("isin.Tensor_Tensor_out", isin_out);
  m.impl("nonzero", nonzero);
  m.impl("roll", roll);
  m.impl("nonzero_static", nonzero_static);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("masked_scatter_", masked_scatter_);
}

}  // namespace neuronsim::pytorch

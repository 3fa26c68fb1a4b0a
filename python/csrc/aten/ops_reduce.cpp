// Reductions on the simulator: sum, mean, amax, amin over any dims, argmax/argmin and
// max/min over one dim. The kernel reduces one dim at a time (kernels::reduce); a
// reduction over several dims chains them, with FP32 partial results, so that a bf16
// sum rounds once as torch's CPU kernel does. int64 results (sums of integers, the
// int64 of argmax) are what the engines cannot compute: sums of integers run on the
// CPU, counted; argmax indices are written as the low words of a zeroed int64 tensor.
#include <algorithm>
#include <cmath>
#include <list>
#include <mutex>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {

namespace {

using kernels::ReduceOp;

// The dims to reduce, wrapped and in descending order (all when `dims` is empty).
std::vector<int64_t> reduce_dims(const at::Tensor& x, at::OptionalIntArrayRef dims) {
  std::vector<int64_t> out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
  } else {
    for (int64_t d : *dims) out.push_back(at::maybe_wrap_dim(d, x.dim()));
  }
  std::sort(out.rbegin(), out.rend());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// S [rows, rows * R] with S[i, j] = 1 where j / R == i (a block of R ones per row), in
// `dtype` on the device: out = S @ x sums each row's R consecutive rows of x. The last
// kKept operands are kept (most recently used first), so a loop of sums over one length
// builds its operand once and sums over ever new lengths (a growing sequence) hold little.
at::Tensor segment_ones(const c10::Device& device, c10::ScalarType dtype, int64_t rows, int64_t R) {
  constexpr size_t kKept = 16;
  using Key = std::tuple<int, c10::ScalarType, int64_t, int64_t>;
  static std::mutex mu;
  static auto* kept = new std::list<std::pair<Key, at::Tensor>>;  // never freed, as the device
  const Key key{device.index(), dtype, rows, R};
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = kept->begin(); it != kept->end(); ++it)
    if (it->first == key) {
      kept->splice(kept->begin(), *kept, it);
      return kept->front().second;
    }
  at::Tensor s = at::empty({rows, rows * R}, at::TensorOptions().dtype(dtype).device(device));
  kernels::PointwiseExpr e;
  const auto j = e.position({0, 1});
  const auto first = e.alu(isa::AluOp::subtract, j, e.alu_imm(isa::AluOp::mod, j, R));
  e.alu(isa::AluOp::is_equal, first, e.alu_imm(isa::AluOp::multiply, e.position({1, 0}), R));
  if (!run_pointwise("aten::sum", fmt::format("segment ones R={}", R), e, {}, s)) return {};
  kept->emplace_front(key, s);
  if (kept->size() > kKept) kept->pop_back();
  return s;
}

// The sum over dim d of a contiguous float x whose dims after d hold C >= 64 elements (the
// [tokens, k, hidden] sum of a mixture of experts, a bias gradient's sum over tokens), as
// x [A, R, C] on TensorE: 128 rows of out at a time are S [128, 128 R] @ their 128 R rows
// of x (segment_ones), one batched product over the blocks and one for what is left. TensorE
// reads x in rows of C contiguous elements, where the reduce kernel would read each
// column's R elements one by one; products with 1 and 0 are exact and PSUM accumulates in
// FP32, rounded once into out.
bool sum_on_tensor_engine(const char* op, const at::Tensor& x, int64_t d, const at::Tensor& out) {
  constexpr int64_t kMaxK = 8192;  // rows of x per product (K), as matmul_into's blocks
  const int64_t R = x.size(d);
  int64_t C = 1;
  for (int64_t k = d + 1; k < x.dim(); ++k) C *= x.size(k);
  if (!is_engine_float(x.scalar_type()) || !x.is_contiguous() || !out.is_contiguous() || C < 64 ||
      R < 2 || R > kMaxK)
    return false;
  const int64_t A = x.numel() / (R * C);
  const int64_t block = std::min<int64_t>({A, 128, kMaxK / R});
  const int64_t full = A / block, rest = A % block;
  const at::Tensor rows = x.view({A * R, C}), sums = out.view({A, C});
  const std::string chip = target();
  const auto product = [&](const at::Tensor& s, const at::Tensor& b, const at::Tensor& o) {
    const kernels::View va = view_of(s), vb = view_of(b), vo = view_of(o);
    return run_kernel(
        op, op_device(op, {&x, &out}),
        fmt::format("{} {} @ {} ->{}", op, layout_key(s), layout_key(b), layout_key(o)),
        [&] { return kernels::matmul(chip, va, vb, vo); }, {{"a", s}, {"b", b}, {"out", o}});
  };
  const at::Tensor s = segment_ones(x.device(), x.scalar_type(), block, R);
  if (!s.defined()) return false;
  if (full > 0 && !product(s.unsqueeze(0).expand({full, block, block * R}),
                           rows.narrow(0, 0, full * block * R).view({full, block * R, C}),
                           sums.narrow(0, 0, full * block).view({full, block, C})))
    return false;
  return rest == 0 ||
         product(s.narrow(0, 0, rest).narrow(1, 0, rest * R),
                 rows.narrow(0, full * block * R, rest * R), sums.narrow(0, full * block, rest));
}

// x reduced over `dims` with keepdim, into `dtype`; undefined when not covered.
at::Tensor reduce_keepdim(const char* op, ReduceOp reduce, at::Tensor x,
                          const std::vector<int64_t>& dims, c10::ScalarType dtype) {
  // A whole contiguous tensor reduces as [128, n/128]: every partition takes a share.
  if (dims.size() == static_cast<size_t>(x.dim()) && x.dim() >= 1 && x.is_contiguous() &&
      x.numel() >= 256 && x.numel() % 128 == 0) {
    at::Tensor shares = reduce_keepdim(op, reduce, x.view({128, x.numel() / 128}), {1}, at::kFloat);
    if (!shares.defined()) return {};
    at::Tensor total = reduce_keepdim(op, reduce, shares, {0}, dtype);
    if (!total.defined()) return {};
    std::vector<int64_t> ones(static_cast<size_t>(x.dim()), 1);
    return total.view(ones);
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
    sizes[static_cast<size_t>(dims[i])] = 1;
    const bool last = i + 1 == dims.size();
    const bool exact_partials = reduce == ReduceOp::max || reduce == ReduceOp::min;
    at::Tensor out =
        at::empty(sizes, x.options().dtype(last || exact_partials ? dtype : at::kFloat));
    if (!(reduce == ReduceOp::sum && sum_on_tensor_engine(op, x, dims[i], out)) &&
        !run_reduce(op, reduce, x, dims[i], out))
      return {};
    x = out;
  }
  return x;
}

std::vector<int64_t> without_dims(const at::Tensor& x, const std::vector<int64_t>& dims,
                                  bool keepdim) {
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      sizes.push_back(x.size(d));
    else if (keepdim)
      sizes.push_back(1);
  }
  return sizes;
}

at::Tensor reduce(const char* op, ReduceOp kind, const at::Tensor& x, at::OptionalIntArrayRef dim,
                  bool keepdim, c10::ScalarType dtype) {
  if (!x.device().is_privateuseone() || x.dim() == 0 || x.numel() == 0 ||
      !engine_dtype(x.scalar_type()) || !engine_dtype(dtype))
    return {};
  const std::vector<int64_t> dims = reduce_dims(x, dim);
  if (dims.empty()) return {};
  at::Tensor r = reduce_keepdim(op, kind, x, dims, dtype);
  if (!r.defined()) return {};
  return r.view(without_dims(x, dims, keepdim));
}

// The exact sum of an integer x into `type` (int64 for torch's default), or undefined.
at::Tensor integer_sum(const char* op, const at::Tensor& x, at::OptionalIntArrayRef dim,
                       bool keepdim, c10::ScalarType type) {
  if (!x.device().is_privateuseone() || x.dim() == 0 || x.numel() == 0 ||
      !is_limb_integer(x.scalar_type()) || !is_limb_integer(type))
    return {};
  const std::vector<int64_t> dims = reduce_dims(x, dim);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  for (int64_t d : dims) sizes[static_cast<size_t>(d)] = 1;
  at::Tensor out = at::empty(sizes, x.options().dtype(type));
  const auto planes_sum = [op](const at::Tensor& planes, const std::vector<int64_t>& plane_dims) {
    std::vector<int64_t> sorted = plane_dims;
    std::sort(sorted.rbegin(), sorted.rend());
    return reduce_keepdim(op, ReduceOp::sum, planes, sorted, at::kFloat);
  };
  if (!integer_sum_into(op, x, dims, out, planes_sum)) return {};
  return out.view(without_dims(x, dims, keepdim));
}

// torch's default sum type: int64 for integers and bool, else the input's.
c10::ScalarType sum_type(const at::Tensor& x, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(x.scalar_type(), /*includeBool=*/true) ? at::kLong : x.scalar_type();
}

at::Tensor sum(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
               std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType out = sum_type(x, dtype);
  if (x.dim() == 0 && x.device().is_privateuseone())
    return x.to(out, /*non_blocking=*/false, /*copy=*/true);
  if (is_engine_float(out) && exact_in_fp32(x.scalar_type()))
    if (at::Tensor r = reduce("aten::sum", ReduceOp::sum, x, dim, keepdim, out); r.defined())
      return r;
  if (at::Tensor r = integer_sum("aten::sum", x, dim, keepdim, out); r.defined()) return r;
  return Fallback<ATEN_OP2(sum, dim_IntList)>::call(x, dim, keepdim, dtype);
}

at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType out = dtype.value_or(x.scalar_type());
  if (x.dim() == 0 && x.device().is_privateuseone() && is_engine_float(out))
    return x.to(out, /*non_blocking=*/false, /*copy=*/true);
  if (is_engine_float(out) && is_engine_float(x.scalar_type()))
    if (at::Tensor r = reduce("aten::mean", ReduceOp::mean, x, dim, keepdim, out); r.defined())
      return r;
  return Fallback<ATEN_OP2(mean, dim)>::call(x, dim, keepdim, dtype);
}

// The out= forms: the result in out's dtype (unless dtype says otherwise), then copied.
at::Tensor& sum_out(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  if (out.device() != x.device() || !x.device().is_privateuseone())
    return Fallback<ATEN_OP2(sum, IntList_out)>::call(x, dim, keepdim, dtype, out);
  const at::Tensor r = pytorch::sum(x, dim, keepdim, dtype.value_or(out.scalar_type()));
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor& mean_out(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  if (out.device() != x.device() || !x.device().is_privateuseone())
    return Fallback<ATEN_OP2(mean, out)>::call(x, dim, keepdim, dtype, out);
  const at::Tensor r = pytorch::mean(x, dim, keepdim, dtype.value_or(out.scalar_type()));
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor sum_all(const at::Tensor& x, std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType out = sum_type(x, dtype);
  if (x.dim() == 0 && x.device().is_privateuseone())  // the sum of one element is itself
    return x.to(out, /*non_blocking=*/false, /*copy=*/true);
  if (is_engine_float(out) && exact_in_fp32(x.scalar_type()))
    if (at::Tensor r = reduce("aten::sum", ReduceOp::sum, x, std::nullopt, false, out); r.defined())
      return r;
  if (at::Tensor r = integer_sum("aten::sum", x, std::nullopt, false, out); r.defined()) return r;
  return Fallback<ATEN_OP(sum)>::call(x, dtype);
}

at::Tensor mean_all(const at::Tensor& x, std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType out = dtype.value_or(x.scalar_type());
  if (x.dim() == 0 && x.device().is_privateuseone() && is_engine_float(out))
    return x.to(out, /*non_blocking=*/false, /*copy=*/true);  // the mean of one element
  if (is_engine_float(out) && is_engine_float(x.scalar_type()))
    if (at::Tensor r = reduce("aten::mean", ReduceOp::mean, x, std::nullopt, false, out);
        r.defined())
      return r;
  return Fallback<ATEN_OP(mean)>::call(x, dtype);
}

// The variance over dims with torch's correction (N - correction in the divisor), or
// its square root: the mean (FP32), the squared deviations, their sum, one scale.
at::Tensor variance(const char* op, const at::Tensor& x, at::OptionalIntArrayRef dim,
                    const std::optional<at::Scalar>& correction, bool keepdim, bool root,
                    at::Tensor* mean_of_x = nullptr) {
  if (!x.device().is_privateuseone() || !is_engine_float(x.scalar_type()) || x.dim() == 0 ||
      x.numel() == 0)
    return {};
  const std::vector<int64_t> dims = reduce_dims(x, dim);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.size(d);
  const double divisor =
      std::max(0.0, static_cast<double>(count) - (correction ? correction->toDouble() : 1.0));
  const at::Tensor mean = reduce_keepdim(op, ReduceOp::mean, x, dims, at::kFloat);
  if (!mean.defined()) return {};
  kernels::PointwiseExpr sq;
  const auto d = sq.alu(isa::AluOp::subtract, sq.load(0), sq.load(1));
  sq.alu(isa::AluOp::multiply, d, d);
  const at::Tensor squares = at::empty(x.sizes(), x.options().dtype(at::kFloat));
  if (!run_pointwise(op, "(x-m)^2", sq, {x, mean}, squares)) return {};
  const at::Tensor sum = reduce_keepdim(op, ReduceOp::sum, squares, dims, at::kFloat);
  if (!sum.defined()) return {};
  kernels::PointwiseExpr scale;  // sum / divisor (divisor 0: inf or nan, as torch)
  const auto v = scale.alu_imm(isa::AluOp::divide, scale.load(0), static_cast<float>(divisor));
  if (root) scale.activation(isa::ActFunc::sqrt, v);
  at::Tensor out = at::empty(sum.sizes(), x.options());
  if (!run_pointwise(op, fmt::format("/{} root={}", divisor, root), scale, {sum}, out)) return {};
  if (mean_of_x) *mean_of_x = mean.to(x.scalar_type()).view(without_dims(x, dims, keepdim));
  return out.view(without_dims(x, dims, keepdim));
}

// ||x||_ord over dims (torch.linalg.vector_norm, clip_grad_norm_'s per-gradient norms): the
// elements' |x|^ord (x * x for 2, x != 0 for 0), their sum (max or min of |x| for +-inf) in
// FP32, then the 1/ord power; undefined when not covered.
at::Tensor vector_norm(const char* op, const at::Tensor& x, double ord, at::OptionalIntArrayRef dim,
                       bool keepdim, c10::ScalarType dtype) {
  if (!x.device().is_privateuseone() || !is_engine_float(x.scalar_type()) || x.numel() == 0 ||
      !is_engine_float(dtype) || std::isnan(ord))
    return {};
  const at::Tensor v = x.dim() == 0 ? x.view({1}) : x;
  const std::vector<int64_t> dims = reduce_dims(v, dim);
  const bool inf = std::isinf(ord);
  kernels::PointwiseExpr pre;
  const auto a = pre.activation(isa::ActFunc::abs, pre.load(0));
  if (ord == 0.0)
    pre.alu_imm(isa::AluOp::not_equal, pre.load(0), 0.0f);
  else if (ord == 2.0)
    pre.alu(isa::AluOp::multiply, a, a);
  else if (ord != 1.0 && !inf)
    pre.alu_imm(isa::AluOp::pow, a, static_cast<float>(ord));
  const at::Tensor terms = at::empty(v.sizes(), v.options().dtype(at::kFloat));
  if (!run_pointwise(op, fmt::format("|x|^{}", ord), pre, {v}, terms)) return {};
  const ReduceOp kind = !inf ? ReduceOp::sum : ord > 0 ? ReduceOp::max : ReduceOp::min;
  const at::Tensor total = reduce_keepdim(op, kind, terms, dims, at::kFloat);
  if (!total.defined()) return {};
  kernels::PointwiseExpr root;
  if (ord == 2.0)
    root.activation(isa::ActFunc::sqrt, root.load(0));
  else if (ord == 0.0 || ord == 1.0 || inf)
    root.load(0);
  else
    root.alu_imm(isa::AluOp::pow, root.load(0), static_cast<float>(1.0 / ord));
  at::Tensor out = at::empty(total.sizes(), x.options().dtype(dtype));
  if (!run_pointwise(op, fmt::format("root {}", ord), root, {total}, out)) return {};
  return x.dim() == 0 ? out.view(at::IntArrayRef{}) : out.view(without_dims(v, dims, keepdim));
}

at::Tensor& linalg_vector_norm_out(const at::Tensor& x, const at::Scalar& ord,
                                   at::OptionalIntArrayRef dim, bool keepdim,
                                   std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  const char* op = "aten::linalg_vector_norm";
  if (at::Tensor r =
          vector_norm(op, x, ord.toDouble(), dim, keepdim, dtype.value_or(x.scalar_type()));
      r.defined() && out.device() == x.device() && out.scalar_type() == r.scalar_type()) {
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
    return out;
  }
  return Fallback<ATEN_OP2(linalg_vector_norm, out)>::call(x, ord, dim, keepdim, dtype, out);
}

at::Tensor var(const at::Tensor& x, at::OptionalIntArrayRef dim,
               const std::optional<at::Scalar>& correction, bool keepdim) {
  if (at::Tensor r = variance("aten::var", x, dim, correction, keepdim, false); r.defined())
    return r;
  return Fallback<ATEN_OP2(var, correction)>::call(x, dim, correction, keepdim);
}

// The variance and the mean in one: the mean the variance is taken about, in FP32, rounded
// once to x's dtype.
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dim,
                                            const std::optional<at::Scalar>& correction,
                                            bool keepdim) {
  at::Tensor mean;
  if (at::Tensor v = variance("aten::var_mean", x, dim, correction, keepdim, false, &mean);
      v.defined())
    return {v, mean};
  return Fallback<ATEN_OP2(var_mean, correction)>::call(x, dim, correction, keepdim);
}

at::Tensor std_dev(const at::Tensor& x, at::OptionalIntArrayRef dim,
                   const std::optional<at::Scalar>& correction, bool keepdim) {
  if (at::Tensor r = variance("aten::std", x, dim, correction, keepdim, true); r.defined())
    return r;
  return Fallback<ATEN_OP2(std, correction)>::call(x, dim, correction, keepdim);
}

// max or min over dims; int32 and int64 (which FP32 would round) limb by limb, over
// one dim or all of them. Undefined when not covered.
at::Tensor extreme(const char* op, bool is_max, const at::Tensor& x, at::OptionalIntArrayRef dim,
                   bool keepdim) {
  const ReduceOp kind = is_max ? ReduceOp::max : ReduceOp::min;
  // One element (a 0-dim tensor, as an index's bounds check reduces) is its own max and min.
  if (x.device().is_privateuseone() && x.dim() == 0) return x.clone();
  if (exact_in_fp32(x.scalar_type())) return reduce(op, kind, x, dim, keepdim, x.scalar_type());
  if (!is_limb_integer(x.scalar_type()) || !x.device().is_privateuseone() || x.numel() == 0)
    return {};
  const std::vector<int64_t> dims = reduce_dims(x, dim);
  const bool all = dims.size() == static_cast<size_t>(x.dim());
  if (!all && dims.size() != 1) {  // one dim at a time, each extreme exact
    at::Tensor r = x;
    for (const int64_t d : dims)
      if (r = extreme(op, is_max, r, at::IntArrayRef{d}, true); !r.defined()) return {};
    return r.view(without_dims(x, dims, keepdim));
  }
  const at::Tensor in = all ? x.reshape({-1}) : x;
  std::vector<int64_t> sizes(in.sizes().begin(), in.sizes().end());
  if (!sizes.empty()) sizes[all ? 0 : static_cast<size_t>(dims[0])] = 1;
  at::Tensor out = at::empty(sizes, x.options());
  if (!integer_extreme_into(op, is_max, in, all ? 0 : dims[0], out)) return {};
  return out.view(without_dims(x, dims, keepdim));
}

// amax or amin of an empty x over dims: no values to compare, an empty result of torch's sizes
// (its meta kernel gives them, and its error for a reduced dim of size 0).
at::Tensor empty_extreme(bool is_max, const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {
  const at::Tensor meta = meta_twin(x);
  const at::Tensor sizes = is_max ? at::amax(meta, dim, keepdim) : at::amin(meta, dim, keepdim);
  return at::empty(sizes.sizes(), x.options());
}

at::Tensor amax(const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {
  if (x.device().is_privateuseone() && x.numel() == 0) return empty_extreme(true, x, dim, keepdim);
  if (at::Tensor r = extreme("aten::amax", true, x, dim, keepdim); r.defined()) return r;
  return Fallback<ATEN_OP(amax)>::call(x, dim, keepdim);
}

at::Tensor amin(const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {
  if (x.device().is_privateuseone() && x.numel() == 0) return empty_extreme(false, x, dim, keepdim);
  if (at::Tensor r = extreme("aten::amin", false, x, dim, keepdim); r.defined()) return r;
  return Fallback<ATEN_OP(amin)>::call(x, dim, keepdim);
}

// The min and the max in one call, each as amin and amax compute it (over one dim or all).
std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& x, std::optional<int64_t> dim,
                                                 bool keepdim, at::Tensor& min, at::Tensor& max) {
  if (x.device().is_privateuseone() && min.device() == x.device() && max.device() == x.device() &&
      min.scalar_type() == x.scalar_type() && max.scalar_type() == x.scalar_type()) {
    if (x.numel() == 0) {  // no values: torch's sizes (and its error for an empty dim) from meta
      const auto sized = at::aminmax(meta_twin(x), dim, keepdim);
      at::native::resize_output(min, std::get<0>(sized).sizes());
      at::native::resize_output(max, std::get<1>(sized).sizes());
      return {min, max};
    }
    const std::vector<int64_t> one = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
    const at::OptionalIntArrayRef dims =
        dim ? at::OptionalIntArrayRef(one) : at::OptionalIntArrayRef();
    const at::Tensor lo = extreme("aten::aminmax", false, x, dims, keepdim);
    const at::Tensor hi = lo.defined() ? extreme("aten::aminmax", true, x, dims, keepdim) : lo;
    if (hi.defined()) {
      at::native::resize_output(min, lo.sizes());
      at::native::resize_output(max, hi.sizes());
      min.copy_(lo);
      max.copy_(hi);
      return {min, max};
    }
  }
  return Fallback<ATEN_OP2(aminmax, out)>::call(x, dim, keepdim, min, max);
}

// The sum with NaNs taken as 0 (integers have none: their plain sum).
at::Tensor nansum(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<c10::ScalarType> dtype) {
  if (x.device().is_privateuseone() &&
      (is_engine_float(x.scalar_type()) || is_limb_integer(x.scalar_type()))) {
    const at::Tensor terms = at::isFloatingType(x.scalar_type()) ? x.masked_fill(x.isnan(), 0) : x;
    return at::sum(terms, dim, keepdim, dtype);
  }
  return Fallback<ATEN_OP(nansum)>::call(x, dim, keepdim, dtype);
}

at::Tensor max_all(const at::Tensor& x) {
  if (at::Tensor r = extreme("aten::max", true, x, std::nullopt, false); r.defined()) return r;
  return Fallback<ATEN_OP(max)>::call(x);
}

at::Tensor min_all(const at::Tensor& x) {
  if (at::Tensor r = extreme("aten::min", false, x, std::nullopt, false); r.defined()) return r;
  return Fallback<ATEN_OP(min)>::call(x);
}

// Running sums along dim: floats (and integers FP32 holds) in one scan kernel into a
// float out; integer outs exactly, on limbs.
at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,
                       at::Tensor& out) {
  if (self.device().is_privateuseone() && out.device() == self.device()) {
    at::native::resize_output(out, self.sizes());
    const at::Tensor in = self.dim() == 0 ? self.view({1}) : self;
    const at::Tensor dst = self.dim() == 0 ? out.view({1}) : out;
    if (self.numel() == 0) return out;
    if (is_engine_float(out.scalar_type()) && exact_in_fp32(self.scalar_type()) &&
        run_cumsum("aten::cumsum", in, dim, dst))
      return out;
    if (is_limb_integer(out.scalar_type()) && is_limb_integer(self.scalar_type()) &&
        integer_cumsum_into(in, dim, dst))
      return out;
  }
  return Fallback<ATEN_OP2(cumsum, out)>::call(self, dim, dtype, out);
}

// Running products along dim of floats, in one scan kernel (FP32 products, each rounded to
// out's dtype; the CPU's kernel multiplies in double, so long products may differ in the last
// FP32 places). Integer products, which would overflow FP32's exact range, run on the CPU.
at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,
                        at::Tensor& out) {
  if (self.device().is_privateuseone() && out.device() == self.device() &&
      is_engine_float(self.scalar_type()) && is_engine_float(out.scalar_type())) {
    at::native::resize_output(out, self.sizes());
    const at::Tensor in = self.dim() == 0 ? self.view({1}) : self;
    const at::Tensor dst = self.dim() == 0 ? out.view({1}) : out;
    if (self.numel() == 0 || run_cumsum("aten::cumprod", in, dim, dst, /*product=*/true))
      return out;
  }
  return Fallback<ATEN_OP2(cumprod, out)>::call(self, dim, dtype, out);
}

// The product over a dim (or all of x): the last running product of cumprod's scan, in FP32,
// rounded once; of nothing, 1. Integer products run on the CPU.
at::Tensor float_prod(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim,
                      c10::ScalarType type) {
  if (!x.device().is_privateuseone() || !is_engine_float(x.scalar_type()) || !is_engine_float(type))
    return {};
  const at::Tensor meta = meta_twin(x).to(type);
  const at::Tensor sized = dim ? at::prod(meta, *dim, keepdim) : at::prod(meta);
  if (x.numel() == 0) return at::ones(sized.sizes(), x.options().dtype(type));
  const at::Tensor v = dim && x.dim() > 0 ? x : x.reshape({-1});
  const int64_t d = dim && x.dim() > 0 ? at::maybe_wrap_dim(*dim, x.dim()) : 0;
  at::Tensor running = at::empty(v.sizes(), v.options().dtype(at::kFloat));
  if (!run_cumsum("aten::prod", v, d, running, /*product=*/true)) return {};
  return running.narrow(d, v.size(d) - 1, 1).to(type).view(sized.sizes());
}

at::Tensor prod_all(const at::Tensor& x, std::optional<c10::ScalarType> dtype) {
  if (at::Tensor r = float_prod(x, std::nullopt, false, dtype.value_or(x.scalar_type()));
      r.defined())
    return r;
  return Fallback<ATEN_OP(prod)>::call(x, dtype);
}

at::Tensor& prod_dim_out(const at::Tensor& x, int64_t dim, bool keepdim,
                         std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  if (out.device() == x.device())
    if (at::Tensor r = float_prod(x, dim, keepdim, dtype.value_or(out.scalar_type()));
        r.defined()) {
      at::native::resize_output(out, r.sizes());
      out.copy_(r);
      return out;
    }
  return Fallback<ATEN_OP2(prod, int_out)>::call(x, dim, keepdim, dtype, out);
}

// The int64 index of the max (or min) over one dim, first occurrence.
at::Tensor arg_reduce(const char* op, ReduceOp kind, const at::Tensor& x, int64_t dim,
                      bool keepdim) {
  if (!x.device().is_privateuseone() || x.dim() == 0 || x.numel() == 0 ||
      !exact_in_fp32(x.scalar_type()))
    return {};
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes[static_cast<size_t>(dim)] = 1;
  at::Tensor index = at::empty(sizes, x.options().dtype(at::kLong));
  const auto low = int64_low_words(index);
  if (!low || !run_reduce(op, kind, x, dim, *low)) return {};
  return keepdim ? index : index.squeeze(dim);
}

// argmax/argmin over one dim, or over the flattened tensor when dim is none. A 0-dim tensor's
// is 0. Integers, which FP32 would round: the first position equal to the max (min) over the
// dim, found exactly on their limbs.
at::Tensor arg_reduce_any(const char* op, ReduceOp kind, const at::Tensor& x,
                          std::optional<int64_t> dim, bool keepdim) {
  if (!x.device().is_privateuseone() || x.numel() == 0) return {};
  if (x.dim() == 0) return at::zeros({}, x.options().dtype(at::kLong));
  if (!dim) return arg_reduce_any(op, kind, x.reshape({-1}), 0, false);
  const int64_t d = at::maybe_wrap_dim(*dim, x.dim());
  if (!is_limb_integer(x.scalar_type())) return arg_reduce(op, kind, x, d, keepdim);
  const at::Tensor extreme = kind == ReduceOp::argmax ? x.amax(d, true) : x.amin(d, true);
  return arg_reduce(op, ReduceOp::argmax, x.eq(extreme).to(at::kFloat), d, keepdim);
}

at::Tensor argmax(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (at::Tensor r = arg_reduce_any("aten::argmax", ReduceOp::argmax, x, dim, keepdim); r.defined())
    return r;
  return Fallback<ATEN_OP(argmax)>::call(x, dim, keepdim);
}

at::Tensor argmin(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  if (at::Tensor r = arg_reduce_any("aten::argmin", ReduceOp::argmin, x, dim, keepdim); r.defined())
    return r;
  return Fallback<ATEN_OP(argmin)>::call(x, dim, keepdim);
}

// (values, indices) of the max or min over one dim: one reduction for each.
std::optional<std::tuple<at::Tensor, at::Tensor>> extreme_dim(const char* op, ReduceOp value,
                                                              ReduceOp index, const at::Tensor& x,
                                                              int64_t dim, bool keepdim) {
  if (!x.device().is_privateuseone()) return std::nullopt;
  const bool is_max = value == ReduceOp::max;
  if (x.dim() == 0) {  // one element: itself, at index 0
    at::maybe_wrap_dim(dim, int64_t{0});
    return std::tuple{x.clone(), at::zeros({}, x.options().dtype(at::kLong))};
  }
  dim = at::maybe_wrap_dim(dim, x.dim());
  if (x.numel() == 0) {  // no values: torch's sizes (and its error for an empty dim) from meta
    const at::Tensor meta = meta_twin(x);
    const auto sized = is_max ? at::max(meta, dim, keepdim) : at::min(meta, dim, keepdim);
    return std::tuple{at::empty(std::get<0>(sized).sizes(), x.options()),
                      at::empty(std::get<1>(sized).sizes(), x.options().dtype(at::kLong))};
  }
  if (is_limb_integer(x.scalar_type()) && !exact_in_fp32(x.scalar_type())) {
    // int32 and int64, which FP32 would round: the extreme and its first index on limbs.
    at::Tensor values = extreme(op, is_max, x, at::IntArrayRef{dim}, keepdim);
    at::Tensor indices = values.defined() ? arg_reduce_any(op, index, x, dim, keepdim) : values;
    if (!indices.defined()) return std::nullopt;
    return std::tuple{values, indices};
  }
  if (!exact_in_fp32(x.scalar_type())) return std::nullopt;
  at::Tensor values = reduce(op, value, x, at::IntArrayRef{dim}, keepdim, x.scalar_type());
  if (!values.defined()) return std::nullopt;
  at::Tensor indices = arg_reduce(op, index, x, dim, keepdim);
  if (!indices.defined()) return std::nullopt;
  return std::tuple{values, indices};
}

std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& x, int64_t dim, bool keepdim) {
  if (auto r = extreme_dim("aten::max", ReduceOp::max, ReduceOp::argmax, x, dim, keepdim))
    return *r;
  return Fallback<ATEN_OP2(max, dim)>::call(x, dim, keepdim);
}

std::tuple<at::Tensor, at::Tensor> min_dim(const at::Tensor& x, int64_t dim, bool keepdim) {
  if (auto r = extreme_dim("aten::min", ReduceOp::min, ReduceOp::argmin, x, dim, keepdim))
    return *r;
  return Fallback<ATEN_OP2(min, dim)>::call(x, dim, keepdim);
}

// all/any: the min/max of (x != 0) as bool, written into `out`.
bool truth_reduce_into(const char* op, ReduceOp kind, const at::Tensor& x,
                       at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  if (!x.device().is_privateuseone() || !out.device().is_privateuseone() ||
      out.scalar_type() != at::kBool ||
      !(exact_in_fp32(x.scalar_type()) || is_limb_integer(x.scalar_type())))
    return false;
  if (x.numel() == 0) {  // all of nothing is true, any of nothing false
    const at::Tensor meta = meta_twin(x);
    const at::Tensor reduced = at::sum(meta, dim, keepdim);  // only its sizes: torch's rule
    at::native::resize_output(out, reduced.sizes());
    out.fill_(kind == ReduceOp::min);
    return true;
  }
  at::Tensor truth = x;
  if (is_limb_integer(x.scalar_type())) {
    truth = x.ne(0);  // exact on the integers' limbs
  } else if (x.scalar_type() != at::kBool) {
    truth = at::empty(x.sizes(), x.options().dtype(at::kBool));
    kernels::PointwiseExpr e;
    e.alu_imm(isa::AluOp::not_equal, e.load(0), 0.0f);
    if (!run_pointwise(op, "!=0", e, {x}, truth)) return false;
  }
  // A 0-dim tensor is its own truth (reduce takes tensors of at least one dim).
  const at::Tensor r = x.dim() == 0 ? truth : reduce(op, kind, truth, dim, keepdim, at::kBool);
  if (!r.defined()) return false;
  if (out.sizes() != r.sizes()) at::native::resize_output(out, r.sizes());
  return copy_on_device(r, out);
}

at::Tensor& all_out(const at::Tensor& x, int64_t dim, bool keepdim, at::Tensor& out) {
  if (truth_reduce_into("aten::all", ReduceOp::min, x, at::IntArrayRef{dim}, keepdim, out))
    return out;
  return Fallback<ATEN_OP2(all, out)>::call(x, dim, keepdim, out);
}

at::Tensor& all_dims_out(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out) {
  if (truth_reduce_into("aten::all", ReduceOp::min, x, dim, keepdim, out)) return out;
  return Fallback<ATEN_OP2(all, dims_out)>::call(x, dim, keepdim, out);
}

at::Tensor& all_all_out(const at::Tensor& x, at::Tensor& out) {
  if (truth_reduce_into("aten::all", ReduceOp::min, x, std::nullopt, false, out)) return out;
  return Fallback<ATEN_OP2(all, all_out)>::call(x, out);
}

at::Tensor& any_out(const at::Tensor& x, int64_t dim, bool keepdim, at::Tensor& out) {
  if (truth_reduce_into("aten::any", ReduceOp::max, x, at::IntArrayRef{dim}, keepdim, out))
    return out;
  return Fallback<ATEN_OP2(any, out)>::call(x, dim, keepdim, out);
}

at::Tensor& any_dims_out(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out) {
  if (truth_reduce_into("aten::any", ReduceOp::max, x, dim, keepdim, out)) return out;
  return Fallback<ATEN_OP2(any, dims_out)>::call(x, dim, keepdim, out);
}

at::Tensor& any_all_out(const at::Tensor& x, at::Tensor& out) {
  if (truth_reduce_into("aten::any", ReduceOp::max, x, std::nullopt, false, out)) return out;
  return Fallback<ATEN_OP2(any, all_out)>::call(x, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("all.out", all_out);
  m.impl("all.dims_out", all_dims_out);
  m.impl("all.all_out", all_all_out);
  m.impl("any.out", any_out);
  m.impl("any.dims_out", any_dims_out);
  m.impl("any.all_out", any_all_out);
  m.impl("sum.dim_IntList", sum);
  m.impl("mean.dim", mean);
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.out", mean_out);
  m.impl("sum", sum_all);
  m.impl("mean", mean_all);
  m.impl("amax", amax);
  m.impl("cumprod.out", cumprod_out);
  m.impl("prod", prod_all);
  m.impl("prod.int_out", prod_dim_out);
  m.impl("aminmax.out", aminmax_out);
  m.impl("nansum", nansum);
  m.impl("amin", amin);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("cumsum.out", cumsum_out);
  m.impl("var.correction", var);
  m.impl("var_mean.correction", var_mean);
  m.impl("linalg_vector_norm.out", linalg_vector_norm_out);
  m.impl("std.correction", std_dev);
  m.impl("argmax", argmax);
  m.impl("argmin", argmin);
  m.impl("max.dim", max_dim);
  m.impl("min.dim", min_dim);
}

}  // namespace neuronsim::pytorch

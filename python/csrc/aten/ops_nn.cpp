// The network ops a transformer needs beyond elementwise, reductions and matmuls:
// softmax and log_softmax (forward on the row kernels, backward as reductions and
// pointwise kernels), layer norm, concatenation, and the choice of attention kernel
// (the math path, which decomposes into the ops above).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "neuronsim/kernels/kernels.h"
#include "runtime/generator.h"

namespace neuronsim::pytorch {

namespace {

using isa::ActFunc;
using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

// ---- softmax --------------------------------------------------------------------

// softmax or log_softmax of a float tensor on the row kernels: over the last dim of a
// contiguous tensor; another dim, or another layout, is moved there first and back after;
// a 16-bit input with half_to_float is widened first.
at::Tensor row_softmax(const char* op, bool log, const at::Tensor& x, int64_t dim,
                       bool half_to_float) {
  if (!is_engine_float(x.scalar_type()) || !x.device().is_privateuseone() ||
      (half_to_float && x.scalar_type() == at::kFloat))  // the CPU's error to give
    return {};
  at::maybe_wrap_dim(dim, x.dim());  // torch's error for a dim out of range
  if (x.numel() == 0) {              // nothing to normalise, in torch's output dtype
    return at::empty(x.sizes(), x.options().dtype(half_to_float ? at::kFloat : x.scalar_type()));
  }
  if (x.dim() == 0) {  // one element: its own row
    const at::Tensor out = row_softmax(op, log, x.view({1}), 0, half_to_float);
    return out.defined() ? out.view(at::IntArrayRef{}) : out;
  }
  if (half_to_float) {
    if (x.scalar_type() != at::kHalf && x.scalar_type() != at::kBFloat16) return {};
    return row_softmax(op, log, x.to(at::kFloat), dim, false);
  }
  const int64_t d = at::maybe_wrap_dim(dim, x.dim());
  if (d != x.dim() - 1 || !x.is_contiguous()) {
    const at::Tensor out = row_softmax(op, log, x.movedim(d, -1).contiguous(), -1, false);
    return out.defined() ? out.movedim(-1, d).contiguous() : out;
  }
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  at::Tensor out = at::empty_like(x);
  const isa::DType dtype = *engine_dtype(x.scalar_type());
  const std::string chip = target();
  const bool ran = run_kernel(op, x.device().index(), fmt::format("{} {}", op, layout_key(x)),
                              [&] {
                                return log ? kernels::log_softmax(chip, rows, cols, dtype)
                                           : kernels::softmax(chip, rows, cols, dtype);
                              },
                              {{"x", x}, {"out", out}});
  return ran ? out : at::Tensor();
}

at::Tensor softmax(const at::Tensor& x, int64_t dim, bool half_to_float) {
  if (at::Tensor out = row_softmax("aten::_softmax", false, x, dim, half_to_float); out.defined())
    return out;
  return Fallback<ATEN_OP(_softmax)>::call(x, dim, half_to_float);
}

at::Tensor log_softmax(const at::Tensor& x, int64_t dim, bool half_to_float) {
  if (at::Tensor out = row_softmax("aten::_log_softmax", true, x, dim, half_to_float);
      out.defined())
    return out;
  return Fallback<ATEN_OP(_log_softmax)>::call(x, dim, half_to_float);
}

// sum over `dim` with keepdim, in FP32.
at::Tensor sum_keepdim(const char* op, const at::Tensor& x, int64_t dim) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes[static_cast<size_t>(dim)] = 1;
  at::Tensor out = at::empty(sizes, x.options().dtype(at::kFloat));
  return run_reduce(op, kernels::ReduceOp::sum, x, dim, out) ? out : at::Tensor();
}

bool softmax_backward_covered(const at::Tensor& grad, const at::Tensor& output,
                              c10::ScalarType input_dtype) {
  return grad.device().is_privateuseone() && grad.dim() > 0 &&
         is_engine_float(grad.scalar_type()) && grad.scalar_type() == output.scalar_type() &&
         grad.sizes() == output.sizes() && input_dtype == grad.scalar_type() && grad.numel() > 0;
}

// softmax': y * (g - sum(g * y))
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  const char* op = "aten::_softmax_backward_data";
  if (softmax_backward_covered(grad, output, input_dtype)) {
    dim = at::maybe_wrap_dim(dim, grad.dim());
    at::Tensor gy = at::empty(grad.sizes(), grad.options().dtype(at::kFloat));
    Expr prod;
    prod.alu(AluOp::multiply, prod.load(0), prod.load(1));
    if (run_pointwise(op, "g*y", prod, {grad, output}, gy)) {
      if (at::Tensor s = sum_keepdim(op, gy, dim); s.defined()) {
        Expr e;
        const Reg g = e.load(0), y = e.load(1), sum = e.load(2);
        e.alu(AluOp::multiply, y, e.alu(AluOp::subtract, g, sum));
        at::Tensor out = at::empty_like(grad);
        if (run_pointwise(op, "y*(g-s)", e, {grad, output, s}, out)) return out;
      }
    }
  }
  return Fallback<ATEN_OP(_softmax_backward_data)>::call(grad, output, dim, input_dtype);
}

// log_softmax': g - exp(y) * sum(g)
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype) {
  const char* op = "aten::_log_softmax_backward_data";
  if (softmax_backward_covered(grad, output, input_dtype)) {
    dim = at::maybe_wrap_dim(dim, grad.dim());
    if (at::Tensor s = sum_keepdim(op, grad, dim); s.defined()) {
      Expr e;
      const Reg g = e.load(0), y = e.load(1), sum = e.load(2);
      e.alu(AluOp::subtract, g, e.alu(AluOp::multiply, e.activation(ActFunc::exp, y), sum));
      at::Tensor out = at::empty_like(grad);
      if (run_pointwise(op, "g-exp(y)*s", e, {grad, output, s}, out)) return out;
    }
  }
  return Fallback<ATEN_OP(_log_softmax_backward_data)>::call(grad, output, dim, input_dtype);
}

// ---- layer norm -----------------------------------------------------------------

// Over the last dim: mean, then the mean of squared deviations (two-pass, as torch's
// CPU kernel), rstd = 1/sqrt(var + eps), out = (x - mean) * rstd * weight + bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x,
                                                          c10::SymIntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias,
                                                          double eps) {
  const char* op = "aten::native_layer_norm";
  const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  if (normalized_shape.size() == 1 && x.dim() >= 1 && x.device().is_privateuseone() &&
      is_engine_float(x.scalar_type()) && x.numel() > 0 &&
      (!has_w || weight->scalar_type() == x.scalar_type()) &&
      (!has_b || bias->scalar_type() == x.scalar_type())) {
    const int64_t last = x.dim() - 1;
    std::vector<int64_t> stat_sizes(x.sizes().begin(), x.sizes().end());
    stat_sizes.back() = 1;
    const auto f32 = x.options().dtype(at::kFloat);
    at::Tensor mean = at::empty(stat_sizes, f32), var = at::empty(stat_sizes, f32);
    at::Tensor dev2 = at::empty(x.sizes(), f32), rstd = at::empty(stat_sizes, f32);
    Expr sq;
    const Reg d = sq.alu(AluOp::subtract, sq.load(0), sq.load(1));
    sq.alu(AluOp::multiply, d, d);
    Expr inv;
    inv.activation(ActFunc::rsqrt, inv.alu_imm(AluOp::add, inv.load(0), static_cast<float>(eps)));
    Expr norm;
    Reg y = norm.alu(AluOp::multiply, norm.alu(AluOp::subtract, norm.load(0), norm.load(1)),
                     norm.load(2));
    std::vector<at::Tensor> inputs{x, mean, rstd};
    if (has_w) {
      inputs.push_back(*weight);
      y = norm.alu(AluOp::multiply, y, norm.load(static_cast<int32_t>(inputs.size() - 1)));
    }
    if (has_b) {
      inputs.push_back(*bias);
      norm.alu(AluOp::add, y, norm.load(static_cast<int32_t>(inputs.size() - 1)));
    }
    at::Tensor out = at::empty(x.sizes(), x.options());
    if (run_reduce(op, kernels::ReduceOp::mean, x, last, mean) &&
        run_pointwise(op, "(x-m)^2", sq, {x, mean}, dev2) &&
        run_reduce(op, kernels::ReduceOp::mean, dev2, last, var) &&
        run_pointwise(op, fmt::format("rsqrt(v+{})", eps), inv, {var}, rstd) &&
        run_pointwise(op, fmt::format("norm w={} b={}", has_w, has_b), norm, inputs, out)) {
      const auto stat_dtype = x.scalar_type();
      return {out, mean.to(stat_dtype), rstd.to(stat_dtype)};
    }
  }
  return FallbackSymInt<ATEN_OP(native_layer_norm)>::call(x, normalized_shape, weight, bias, eps);
}

// ---- group norm --------------------------------------------------------------------

// Each (sample, group) normalised as layer norm normalises a row, x viewed [N, group, rest] in
// FP32, then each channel's weight and bias, rounded once to x's dtype, as torch's CPU kernel
// keeps its intermediates in FP32 (PyTorch's generic decomposition would round every step
// to a 16-bit dtype).
std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm(const at::Tensor& x,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias,
                                                          int64_t n, int64_t c, int64_t hxw,
                                                          int64_t group, double eps) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type()) && group > 0 &&
      c % group == 0 && x.numel() == n * c * hxw) {
    if (x.numel() == 0)  // no sample, or none of its elements: nothing to normalise
      return {at::empty_like(x), at::empty({n, group}, x.options()),
              at::empty({n, group}, x.options())};
    const at::Tensor rows = x.reshape({n, group, -1}).to(at::kFloat);
    const std::vector<c10::SymInt> row{c10::SymInt(rows.size(2))};
    auto [y, mean, rstd] = layer_norm(rows, row, std::nullopt, std::nullopt, eps);
    at::Tensor out = y.view({n, c, hxw});
    if (weight && weight->defined()) out = out * weight->to(at::kFloat).view({1, c, 1});
    if (bias && bias->defined()) out = out + bias->to(at::kFloat).view({1, c, 1});
    const c10::ScalarType type = x.scalar_type();
    return {out.view(x.sizes()).to(type), mean.view({n, group}).to(type),
            rstd.view({n, group}).to(type)};
  }
  return Fallback<ATEN_OP(native_group_norm)>::call(x, weight, bias, n, c, hxw, group, eps);
}

// ---- SyncBatchNorm's pieces -------------------------------------------------------------

// The ops nn.SyncBatchNorm calls on a CUDA or PrivateUse1 input [N, C, ...] (no CPU kernel
// exists): per-channel statistics over every dim but the channel's, in FP32 on the device,
// combined across ranks by the caller's collectives.

bool sync_batch_norm_covers(const at::Tensor& x) {
  return x.device().is_privateuseone() && is_engine_float(x.scalar_type()) && x.dim() >= 2;
}

std::vector<int64_t> all_but_channel(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel [C] tensor as FP32 shaped [1, C, 1, ...] to broadcast over x.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return v.to(at::kFloat).view(shape);
}

// The mean and the biased variance per channel (two passes, FP32).
std::tuple<at::Tensor, at::Tensor> channel_moments(const at::Tensor& input) {
  const at::Tensor x = input.to(at::kFloat);
  const std::vector<int64_t> dims = all_but_channel(x);
  const at::Tensor mean = x.mean(dims);
  return {mean, (x - per_channel(mean, x)).square().mean(dims)};
}

// This rank's mean and 1 / sqrt(biased variance + eps) per channel.
std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps) {
  if (sync_batch_norm_covers(input) && input.numel() > 0) {
    const auto [mean, var] = channel_moments(input);
    return {mean, (var + eps).rsqrt()};
  }
  return Fallback<ATEN_OP(batch_norm_stats)>::call(input, eps);
}

// Every rank's statistics [ranks, C], weighted by their element counts, as one mean and invstd
// (each rank's variance is 1 / invstd^2 - eps); the running statistics move by momentum, the
// variance unbiased over the total count.
std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts) {
  if (sync_batch_norm_covers(input) && mean.device() == input.device() && mean.dim() == 2 &&
      counts.device() == input.device()) {
    const at::Tensor n = counts.to(at::kFloat).view({-1, 1});
    const at::Tensor total = n.sum();
    const at::Tensor m = mean.to(at::kFloat), rank_var = invstd.to(at::kFloat).pow(-2) - eps;
    const at::Tensor all_mean = (m * n).sum(0) / total;
    const at::Tensor var = ((rank_var + (m - all_mean).square()) * n).sum(0) / total;
    if (running_mean && running_mean->defined())
      running_mean->copy_(running_mean->to(at::kFloat) * (1 - momentum) + all_mean * momentum);
    if (running_var && running_var->defined())
      running_var->copy_(running_var->to(at::kFloat) * (1 - momentum) +
                         var * total / (total - 1) * momentum);
    return {all_mean.to(mean.scalar_type()), (var + eps).rsqrt().to(invstd.scalar_type())};
  }
  return Fallback<ATEN_OP(batch_norm_gather_stats_with_counts)>::call(
      input, mean, invstd, running_mean, running_var, momentum, eps, counts);
}

// (x - mean) * invstd * weight + bias, in FP32, rounded once to x's dtype.
at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                            const at::Tensor& invstd, double eps) {
  if (sync_batch_norm_covers(input)) {
    const at::Tensor x = input.to(at::kFloat);
    at::Tensor y = (x - per_channel(mean, x)) * per_channel(invstd, x);
    if (weight && weight->defined()) y = y * per_channel(*weight, x);
    if (bias && bias->defined()) y = y + per_channel(*bias, x);
    return y.to(input.scalar_type());
  }
  return Fallback<ATEN_OP(batch_norm_elemt)>::call(input, weight, bias, mean, invstd, eps);
}

// This rank's sums of grad and of grad * (x - mean) per channel (the caller all-reduces them),
// and from them the weight's and bias's gradients; a tensor not asked for is undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g, bool weight_g,
    bool bias_g) {
  if (sync_batch_norm_covers(input) && grad_out.device() == input.device()) {
    const at::Tensor x = input.to(at::kFloat), g = grad_out.to(at::kFloat);
    const std::vector<int64_t> dims = all_but_channel(x);
    const at::Tensor sum_dy = g.sum(dims);
    const at::Tensor sum_dy_xmu = (g * (x - per_channel(mean, x))).sum(dims);
    const c10::ScalarType type =
        weight && weight->defined() ? weight->scalar_type() : input.scalar_type();
    return {input_g ? sum_dy : at::Tensor(), input_g ? sum_dy_xmu : at::Tensor(),
            weight_g ? (sum_dy_xmu * invstd.to(at::kFloat)).to(type) : at::Tensor(),
            bias_g ? sum_dy.to(type) : at::Tensor()};
  }
  return Fallback<ATEN_OP(batch_norm_backward_reduce)>::call(grad_out, input, mean, invstd, weight,
                                                             input_g, weight_g, bias_g);
}

// The input's gradient from every rank's sums (count: each rank's elements per channel):
// (grad - mean_dy - (x - mean) * invstd^2 * mean_dy_xmu) * invstd * weight.
at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input,
                                     const at::Tensor& mean, const at::Tensor& invstd,
                                     const std::optional<at::Tensor>& weight,
                                     const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu,
                                     const at::Tensor& count) {
  if (sync_batch_norm_covers(input) && grad_out.device() == input.device() &&
      count.device() == input.device()) {
    const at::Tensor x = input.to(at::kFloat), g = grad_out.to(at::kFloat);
    const at::Tensor total = count.to(at::kFloat).sum();
    const at::Tensor is = invstd.to(at::kFloat);
    const at::Tensor mean_dy = sum_dy.to(at::kFloat) / total;
    const at::Tensor mean_dy_xmu = sum_dy_xmu.to(at::kFloat) / total;
    at::Tensor scale = is;
    if (weight && weight->defined()) scale = scale * weight->to(at::kFloat);
    const at::Tensor grad = (g - per_channel(mean_dy, x) -
                             (x - per_channel(mean, x)) * per_channel(is * is * mean_dy_xmu, x)) *
                            per_channel(scale, x);
    return grad.to(input.scalar_type());
  }
  return Fallback<ATEN_OP(batch_norm_backward_elemt)>::call(grad_out, input, mean, invstd, weight,
                                                            sum_dy, sum_dy_xmu, count);
}

// ---- batch norm ---------------------------------------------------------------------

// nn.BatchNorm's forward and backward from the same FP32 pieces as SyncBatchNorm's, with the
// CPU's conventions: the variance that normalises is biased, the running variance moves by the
// unbiased one; save_mean and save_invstd are the batch's statistics in training and empty in
// evaluation; statistics are FP32 when FP32 parameters sit beside a 16-bit input ("mixed
// type"), else in the input's dtype.

bool has(const std::optional<at::Tensor>& t) {
  return t && t->defined();
}

// Whether the device covers a batch norm of `input` with these per-channel tensors, and the
// dtype its statistics take.
std::optional<c10::ScalarType> batch_norm_stats_type(
    const at::Tensor& input, std::initializer_list<const std::optional<at::Tensor>*> params) {
  if (!sync_batch_norm_covers(input) || input.numel() == 0) return std::nullopt;
  bool mixed = false;
  for (const std::optional<at::Tensor>* p : params) {
    if (!has(*p)) continue;
    const at::Tensor& t = **p;
    if (t.device() != input.device() || t.dim() != 1 || t.numel() != input.size(1) ||
        (t.scalar_type() != input.scalar_type() && t.scalar_type() != at::kFloat))
      return std::nullopt;  // the CPU's checks and errors
    mixed = mixed || t.scalar_type() != input.scalar_type();
  }
  return mixed ? at::kFloat : input.scalar_type();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  const auto type = batch_norm_stats_type(input, {&weight, &bias, &running_mean, &running_var});
  if (type && training) {
    const auto [mean, var] = channel_moments(input);
    const at::Tensor invstd = (var + eps).rsqrt();
    const double n = static_cast<double>(input.numel() / input.size(1));
    if (has(running_mean))
      running_mean->copy_(running_mean->to(at::kFloat) * (1 - momentum) + mean * momentum);
    if (has(running_var))
      running_var->copy_(running_var->to(at::kFloat) * (1 - momentum) +
                         var * (n / (n - 1) * momentum));
    return {pytorch::batch_norm_elemt(input, weight, bias, mean, invstd, eps), mean.to(*type),
            invstd.to(*type)};
  }
  if (type && has(running_mean) && has(running_var)) {
    const at::Tensor invstd = (running_var->to(at::kFloat) + eps).rsqrt();
    const at::Tensor none = at::empty({0}, input.options().dtype(*type));
    return {pytorch::batch_norm_elemt(input, weight, bias, *running_mean, invstd, eps), none,
            none.clone()};
  }
  return Fallback<ATEN_OP(native_batch_norm)>::call(input, weight, bias, running_mean, running_var,
                                                    training, momentum, eps);
}

// SyncBatchNorm's two backward pieces on one rank: the per-channel sums (and from them the
// weight's and bias's gradients), then in training the input's gradient from the batch's
// statistics; in evaluation the statistics are constants, so dx = g * invstd * weight.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> mask) {
  const auto& mean_from = train ? save_mean : running_mean;
  const auto& spread_from = train ? save_invstd : running_var;
  const auto type = batch_norm_stats_type(input, {&weight, &mean_from, &spread_from});
  if (type && has(mean_from) && has(spread_from) && grad_out.device() == input.device() &&
      grad_out.sizes() == input.sizes()) {
    const at::Tensor invstd =
        train ? spread_from->to(at::kFloat) : (spread_from->to(at::kFloat) + eps).rsqrt();
    auto [sum_dy, sum_dy_xmu, dw, db] = pytorch::batch_norm_backward_reduce(
        grad_out, input, *mean_from, invstd, weight, mask[0] && train, mask[1], mask[2]);
    at::Tensor dx;
    if (mask[0] && train) {
      const at::Tensor count =
          at::full({1}, input.numel() / input.size(1), input.options().dtype(at::kFloat));
      dx = pytorch::batch_norm_backward_elemt(grad_out, input, *mean_from, invstd, weight, sum_dy,
                                              sum_dy_xmu, count);
    } else if (mask[0]) {
      const at::Tensor scale = has(weight) ? invstd * weight->to(at::kFloat) : invstd;
      dx = (grad_out.to(at::kFloat) * per_channel(scale, input)).to(input.scalar_type());
    }
    return {dx, dw, db};
  }
  return Fallback<ATEN_OP(native_batch_norm_backward)>::call(
      grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask);
}

// The gradients of layer norm over the last dim, with x^ = (x - mean) * rstd and
// gw = grad * weight: dx = rstd * (gw - mean(gw) - x^ * mean(gw * x^)) per row,
// dweight = the column sums of grad * x^, dbias = the column sums of grad. One
// pointwise kernel writes gw, gw * x^, grad * x^ and grad (FP32) into two [2, M, N]
// buffers, one reduction per buffer gives the row means and the column sums, one
// pointwise kernel dx and one the parameter gradients in their dtypes.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad, const at::Tensor& x, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  const char* op = "aten::native_layer_norm_backward";
  const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  const int64_t n = x.dim() > 0 ? x.size(-1) : 0, m = n > 0 ? x.numel() / n : 0;
  if (normalized_shape.size() == 1 && x.dim() >= 1 && m > 0 && x.device().is_privateuseone() &&
      is_engine_float(x.scalar_type()) && grad.sizes() == x.sizes() &&
      grad.scalar_type() == x.scalar_type() && engine_dtype(mean.scalar_type()) &&
      mean.numel() == m && rstd.numel() == m && (!has_w || weight->numel() == n)) {
    const at::Tensor g = grad.reshape({m, n}), xs = x.reshape({m, n});
    const at::Tensor mu = mean.reshape({m, 1}), r = rstd.reshape({m, 1});
    const auto f32 = x.options().dtype(at::kFloat);
    const at::Tensor rows = at::empty({2, m, n}, f32), cols = at::empty({2, m, n}, f32);
    Expr parts;
    std::vector<at::Tensor> inputs{g, xs, mu, r};
    const Reg gr = parts.load(0);
    const Reg xhat = parts.alu(
        AluOp::multiply, parts.alu(AluOp::subtract, parts.load(1), parts.load(2)), parts.load(3));
    Reg gw = gr;
    if (has_w) {
      inputs.push_back(weight->reshape({1, n}));
      gw = parts.alu(AluOp::multiply, gr, parts.load(4));
    }
    parts.set_outputs({parts.alu_imm(AluOp::add, gw, 0.0f), parts.alu(AluOp::multiply, gw, xhat),
                       parts.alu(AluOp::multiply, gr, xhat), parts.alu_imm(AluOp::add, gr, 0.0f)});
    const at::Tensor row_means = at::empty({2, m, 1}, f32), col_sums = at::empty({2, 1, n}, f32);
    Expr dx_expr;
    const Reg dxhat =
        dx_expr.alu(AluOp::multiply, dx_expr.alu(AluOp::subtract, dx_expr.load(1), dx_expr.load(2)),
                    dx_expr.load(3));
    const Reg centered =
        dx_expr.alu(AluOp::subtract, dx_expr.alu(AluOp::subtract, dx_expr.load(0), dx_expr.load(4)),
                    dx_expr.alu(AluOp::multiply, dxhat, dx_expr.load(5)));
    dx_expr.alu(AluOp::multiply, centered, dx_expr.load(3));
    at::Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : at::Tensor();
    at::Tensor dw = mask[1] && has_w ? at::empty(weight->sizes(), weight->options()) : at::Tensor();
    at::Tensor db = mask[2] && has_b ? at::empty(bias->sizes(), bias->options()) : at::Tensor();
    bool ok = run_pointwise_outputs(op, fmt::format("parts w={}", has_w), parts, inputs,
                                    {rows[0], rows[1], cols[0], cols[1]});
    if (ok && dx.defined())
      ok = run_reduce(op, kernels::ReduceOp::mean, rows, 2, row_means) &&
           run_pointwise(op, "dx", dx_expr, {rows[0], xs, mu, r, row_means[0], row_means[1]},
                         dx.view({m, n}));
    if (ok && (dw.defined() || db.defined())) {
      ok = run_reduce(op, kernels::ReduceOp::sum, cols, 1, col_sums);
      if (ok && dw.defined()) ok = copy_on_device(col_sums[0].view(dw.sizes()), dw);
      if (ok && db.defined()) ok = copy_on_device(col_sums[1].view(db.sizes()), db);
    }
    if (ok) return {dx, dw, db};
  }
  return FallbackSymInt<ATEN_OP(native_layer_norm_backward)>::call(grad, x, normalized_shape, mean,
                                                                   rstd, weight, bias, mask);
}

// ---- cat ------------------------------------------------------------------------

// One pointwise copy per input, into its slice of the output.
// The tensors of a cat that the device covers (neuron tensors of one rank; engine dtypes, or
// one dtype throughout), torch's legacy empties left out; empty when not covered.
std::vector<at::Tensor> cat_inputs(const at::ITensorListRef& list) {
  std::vector<at::Tensor> tensors;
  for (const at::Tensor& t : list)
    if (!(t.dim() == 1 && t.size(0) == 0)) tensors.push_back(t);  // torch skips legacy empties
  bool covered = !tensors.empty() && tensors.front().dim() > 0;
  for (const at::Tensor& t : tensors)
    covered = covered && t.device().is_privateuseone() &&
              (engine_dtype(t.scalar_type()) || t.scalar_type() == tensors.front().scalar_type()) &&
              t.dim() == tensors.front().dim();
  return covered ? tensors : std::vector<at::Tensor>{};
}

// out = the tensors one after another along dim, each copied into its slice on the device;
// `out` (resized) of their promoted dtype. False when a copy is not covered.
bool cat_into(const std::vector<at::Tensor>& tensors, int64_t dim, at::Tensor& out) {
  std::vector<int64_t> sizes(tensors.front().sizes().begin(), tensors.front().sizes().end());
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += t.size(dim);
  sizes[static_cast<size_t>(dim)] = total;
  at::native::resize_output(out, sizes);
  int64_t at_offset = 0;
  for (const at::Tensor& t : tensors) {
    const at::Tensor slice = out.narrow(dim, at_offset, t.size(dim));
    at_offset += t.size(dim);
    if (t.numel() == 0) continue;
    if (t.sizes() != slice.sizes() || !copy_on_device(t, slice)) return false;
  }
  return true;
}

c10::ScalarType cat_dtype(const std::vector<at::Tensor>& tensors) {
  at::native::ResultTypeState promotion{};
  for (const at::Tensor& t : tensors)
    promotion = at::native::update_result_type_state(t, promotion);
  return at::native::result_type(promotion);
}

at::Tensor cat(const at::ITensorListRef& list, int64_t dim) {
  if (const std::vector<at::Tensor> tensors = cat_inputs(list); !tensors.empty()) {
    dim = at::maybe_wrap_dim(dim, tensors.front().dim());
    at::Tensor out = at::empty({0}, tensors.front().options().dtype(cat_dtype(tensors)));
    if (cat_into(tensors, dim, out)) return out;
  }
  // Only legacy empties ([0] tensors) on one device: torch's result is one more, of their
  // promoted dtype.
  std::vector<at::Tensor> all;
  bool empties = true;
  for (const at::Tensor& t : list) {
    empties = empties && t.dim() == 1 && t.size(0) == 0 && t.device().is_privateuseone() &&
              (all.empty() || t.device() == all.front().device());
    all.push_back(t);
  }
  if (empties && !all.empty()) return at::empty({0}, all.front().options().dtype(cat_dtype(all)));
  return Fallback<ATEN_OP(cat)>::call(list, dim);
}

// cat into a given tensor (FSDP2's reduce-scatter packs the gradients with it).
at::Tensor& cat_out(const at::ITensorListRef& list, int64_t dim, at::Tensor& out) {
  if (const std::vector<at::Tensor> tensors = cat_inputs(list);
      !tensors.empty() && out.device() == tensors.front().device() &&
      out.scalar_type() == cat_dtype(tensors)) {
    for (const at::Tensor& t : tensors)
      TORCH_CHECK(!overlaps(t, out), "torch.cat(): the out tensor overlaps an input");
    if (cat_into(tensors, at::maybe_wrap_dim(dim, tensors.front().dim()), out)) return out;
  }
  return Fallback<ATEN_OP2(cat, out)>::call(list, dim, out);
}

// ---- dropout --------------------------------------------------------------------

// One kernel draws the mask and applies it: keep = bits < (1 - p) * 2^16 for 16 random
// bits per element from the engines' generators, seeded from the device's generator
// (so torch.neuron.manual_seed repeats it); out = x * keep / (1 - p). An element is kept
// with probability ceil((1 - p) * 2^16) / 2^16, within 2^-16 of 1 - p. With
// NEURONSIM_RNG=cpu the mask is the CPU's (runtime/generator.h).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& x, double p,
                                                  std::optional<bool> train) {
  if (x.device().is_privateuseone() && is_engine_float(x.scalar_type())) {
    if (train.has_value() && !*train)
      return {x.clone(), at::ones_like(x, x.options().dtype(at::kBool))};
    TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
    if (rng_source() == RngSource::cpu && x.numel() > 0) {
      // The CPU's mask, drawn by the host (bernoulli_ draws there), then the CPU's two
      // products on the device: the values a seeded CPU run gives.
      at::Tensor keep = at::empty_like(x, at::MemoryFormat::Contiguous).bernoulli_(1.0 - p);
      return {x.mul(keep).mul_(p < 1.0 ? 1.0 / (1.0 - p) : 0.0), keep.to(at::kBool)};
    }
    const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
    Expr e;
    const Expr::Reg keep =
        e.alu_imm(AluOp::is_lt, e.random(), static_cast<float>((1.0 - p) * 65536.0));
    const Expr::Reg out_reg =
        e.alu_imm(AluOp::multiply, e.alu(AluOp::multiply, e.load(0), keep), scale);
    e.set_outputs({out_reg, keep});
    at::Tensor out = at::empty_like(x);
    at::Tensor mask = at::empty_like(x, x.options().dtype(at::kBool));
    if (run_pointwise_outputs("aten::native_dropout", fmt::format("dropout {}", p), e, {x},
                              {out, mask}))
      return {out, mask};
  }
  return Fallback<ATEN_OP(native_dropout)>::call(x, p, train);
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  if (grad.device().is_privateuseone() && is_engine_float(grad.scalar_type())) {
    Expr e;
    e.alu_imm(AluOp::multiply, e.alu(AluOp::multiply, e.load(0), e.load(1)),
              static_cast<float>(scale));
    at::Tensor out = at::empty_like(grad);
    if (run_pointwise("aten::native_dropout_backward", fmt::format("dropout' {}", scale), e,
                      {grad, mask}, out))
      return out;
  }
  return Fallback<ATEN_OP(native_dropout_backward)>::call(grad, mask, scale);
}

// ---- triangles ------------------------------------------------------------------

// tril/triu of views (a transposed factor in Cholesky's gradient): each element kept or
// zeroed by its column less its row, from its position, in one pointwise kernel.
bool strided_triangle_into(const char* op, const at::Tensor& self, int64_t diagonal, bool upper,
                           const at::Tensor& out) {
  if (overlaps(self, out) || self.size(-1) >= (int64_t{1} << 24) ||
      self.size(-2) >= (int64_t{1} << 24))
    return false;
  std::vector<int64_t> row(static_cast<size_t>(self.dim()), 0), col = row;
  row[row.size() - 2] = 1;
  col[col.size() - 1] = 1;
  kernels::PointwiseExpr e;
  const auto offset = e.alu(isa::AluOp::subtract, e.position(col), e.position(row));
  const auto keep = e.alu_imm(upper ? isa::AluOp::is_ge : isa::AluOp::is_le, offset,
                              static_cast<float>(diagonal));
  e.select(keep, e.load(0), e.constant(0.0f));
  return run_pointwise(op, upper ? "triu" : "tril", e, {self}, out);
}

// tril/triu of the last two dims (causal masks), by position on GpSimd; int32 and
// int64, which affine_select would round through FP32, as a select of their limbs.
bool triangle_into(const char* op, const at::Tensor& self, int64_t diagonal, bool upper,
                   at::Tensor& out) {
  if (!self.device().is_privateuseone() || !out.device().is_privateuseone() || self.dim() < 2 ||
      out.scalar_type() != self.scalar_type())
    return false;
  if (out.sizes() != self.sizes()) at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return true;
  if (is_limb_integer(self.scalar_type()) && !exact_in_fp32(self.scalar_type()))
    return integer_triangle_into(op, self, diagonal, upper, out);
  if (!engine_dtype(self.scalar_type())) return false;
  if (!self.is_contiguous() || !out.is_contiguous())
    return strided_triangle_into(op, self, diagonal, upper, out);
  const int64_t rows = self.size(-2), cols = self.size(-1), batch = self.numel() / (rows * cols);
  const isa::DType dtype = *engine_dtype(self.scalar_type());
  const std::string chip = target();
  return run_kernel(
      op, self.device().index(),
      fmt::format("{} {} diagonal={} {}", op, c10::toString(self.scalar_type()), diagonal,
                  layout_key(self)),
      [&] { return kernels::triangle(chip, dtype, batch, rows, cols, diagonal, upper); },
      {{"in", self}, {"out", out}});
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (triangle_into("aten::tril", self, diagonal, false, out)) return out;
  return Fallback<ATEN_OP2(tril, out)>::call(self, diagonal, out);
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (triangle_into("aten::triu", self, diagonal, true, out)) return out;
  return Fallback<ATEN_OP2(triu, out)>::call(self, diagonal, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", softmax);
  m.impl("_log_softmax", log_softmax);
  m.impl("_softmax_backward_data", softmax_backward);
  m.impl("_log_softmax_backward_data", log_softmax_backward);
  m.impl("native_layer_norm", layer_norm);
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  m.impl("tril.out", tril_out);
  m.impl("triu.out", triu_out);
  m.impl("native_layer_norm_backward", layer_norm_backward);
  m.impl("native_dropout", native_dropout);
  m.impl("native_group_norm", group_norm);
  m.impl("batch_norm_stats", batch_norm_stats);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("batch_norm_gather_stats_with_counts", batch_norm_gather_stats_with_counts);
  m.impl("batch_norm_elemt", batch_norm_elemt);
  m.impl("batch_norm_backward_reduce", batch_norm_backward_reduce);
  m.impl("batch_norm_backward_elemt", batch_norm_backward_elemt);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace neuronsim::pytorch

// scaled_dot_product_attention on the device. PyTorch asks a PrivateUse1 device which
// fused kernel to use (the _fused_sdp_choice dispatch stub, which also answers under
// torch.compile's fake tensors: it reads only devices, dtypes and sizes); for every case the flash
// kernel covers (kernels::attention: float q, k, v with head dims up to 256, no dropout,
// grouped-query heads, causal and/or an additive or boolean mask) the answer is "overrideable", and
// SDPA calls _scaled_dot_product_fused_attention_overrideable, one kernel that never
// writes the [Tq, Tk] scores to HBM. Everything else takes PyTorch's math path, made of
// this backend's other kernels.
//
// The backward is kernels::attention_backward, which recomputes the probabilities on chip
// from the logsumexp the forward saved. Where it refuses (head dims past 128, more queries
// per KV head than SBUF holds) or a mask's gradient is asked for, the same math runs on the
// device's matmul, pointwise and reduction kernels, a few heads at a time so that the
// scores of 4 k tokens never need more than 256 MiB.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <fmt/format.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/kernel_call.h"
#include "aten/refusal.h"

namespace neuronsim::pytorch {

namespace {

constexpr const char* kForward = "aten::_scaled_dot_product_fused_attention_overrideable";
constexpr int64_t kMaxHeadDim = 256;                // kernels::attention's limit
constexpr int64_t kChunkScores = int64_t{1} << 26;  // scores per backward chunk (FP32)

// `mask` broadcasts to [B, H, Tq, Tk] by numpy rules.
bool mask_broadcasts(const at::Tensor& mask, at::IntArrayRef target) {
  if (mask.dim() > 4) return false;
  for (int64_t d = 1; d <= mask.dim(); ++d) {
    const int64_t m = mask.size(-d), t = target[target.size() - d];
    if (m != t && m != 1) return false;
  }
  return true;
}

// The cases kernels::attention computes. Anything else takes the math path.
bool flash_covers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->device().is_privateuseone() || t->numel() == 0 || t->dim() != q.dim() ||
        t->scalar_type() != q.scalar_type())
      return false;
  if ((q.dim() != 3 && q.dim() != 4) || !is_engine_float(q.scalar_type()) || dropout_p != 0.0)
    return false;
  if (q.dim() == 4 && (k.size(0) != q.size(0) || v.size(0) != q.size(0))) return false;
  const int64_t hq = q.size(-3), hkv = k.size(-3);
  if (v.size(-3) != hkv || v.size(-2) != k.size(-2) || q.size(-1) != k.size(-1)) return false;
  if (hq % hkv != 0 || (hq != hkv && !enable_gqa)) return false;
  if (q.size(-1) > kMaxHeadDim || v.size(-1) > kMaxHeadDim) return false;
  if (mask && mask->defined()) {
    const at::Tensor& m = *mask;
    if (!m.device().is_privateuseone() || m.numel() == 0 ||
        (m.scalar_type() != at::kBool && !at::isFloatingType(m.scalar_type())))
      return false;
    const int64_t batch = q.dim() == 4 ? q.size(0) : 1;
    if (!mask_broadcasts(m, {batch, hq, q.size(-2), k.size(-2)})) return false;
  }
  return true;
}

}  // namespace

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool,
                         std::optional<double>, bool enable_gqa) {
  const at::SDPBackend choice = flash_covers(q, k, v, mask, dropout_p, enable_gqa)
                                    ? at::SDPBackend::overrideable
                                    : at::SDPBackend::math;
  return static_cast<int64_t>(choice);
}

namespace {

double softmax_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

// A tensor of `sizes` whose memory order is t's (PyTorch's alloc_with_matching_layout):
// attention's output then has the layout of q, and the transpose back to [B, T, H, D]
// that models do next is a view.
at::Tensor empty_like_layout(const at::Tensor& t, at::IntArrayRef sizes) {
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) order[static_cast<size_t>(d)] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  std::vector<int64_t> permuted;
  for (int64_t d : order) permuted.push_back(sizes[static_cast<size_t>(d)]);
  at::Tensor dense = at::empty(permuted, t.options());
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return dense.permute(inverse);
}

at::Tensor head_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

// A boolean mask as the additive one it means (0 where kept, -inf where not), and any
// other mask in a dtype the engines read, with its key dim contiguous or broadcast.
at::Tensor additive_mask(const at::Tensor& mask, c10::ScalarType dtype) {
  at::Tensor m = mask;
  if (m.scalar_type() == at::kBool)
    m = at::zeros(m.sizes(), m.options().dtype(dtype))
            .masked_fill_(m.logical_not(), -std::numeric_limits<float>::infinity());
  else if (!is_engine_float(m.scalar_type()))
    m = m.to(at::kFloat);
  if (m.stride(-1) != 1 && m.stride(-1) != 0 && m.size(-1) != 1) m = m.contiguous();
  return m;
}

// The scores of one chunk in FP32: q k^T * scale, plus the mask, -inf above the diagonal
// when causal. q [B, h, Tq, D], k [B, h, Tk, D] (KV heads already repeated).
at::Tensor scores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& mask, bool causal,
                  double scale) {
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)).to(at::kFloat).mul_(scale);
  if (mask.defined()) s.add_(mask);
  if (causal)
    s.add_(at::full({q.size(-2), k.size(-2)}, -std::numeric_limits<float>::infinity(), s.options())
               .triu(1));
  return s;
}

// K or V heads repeated for the query heads that share them (grouped-query attention).
at::Tensor repeat_kv(const at::Tensor& t, int64_t group) {
  return group == 1 ? t : t.repeat_interleave(group, 1);
}

// The mask for query heads [h0, h0 + n) of batch b, broadcast: [1 or 1, n or 1, Tq, Tk].
at::Tensor mask_slice(const at::Tensor& mask, int64_t b, int64_t h0, int64_t n) {
  if (!mask.defined()) return mask;
  at::Tensor m = mask;
  while (m.dim() < 4) m = m.unsqueeze(0);
  if (m.size(0) > 1) m = m.narrow(0, b, 1);
  if (m.size(1) > 1) m = m.narrow(1, h0, n);
  return m;
}

// The forward by the math of the backward: what runs if the kernel refuses a case that
// fused_sdp_choice let through. q, k, v 4-D; writes out and lse.
void attention_math(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& mask, bool causal, double scale, const at::Tensor& out,
                    const at::Tensor& lse) {
  const int64_t group = q.size(1) / k.size(1);
  for (int64_t b = 0; b < q.size(0); ++b)
    for (int64_t h = 0; h < k.size(1); ++h) {
      const at::Tensor qc = q.narrow(0, b, 1).narrow(1, h * group, group);
      const at::Tensor s = scores(qc, repeat_kv(k.narrow(0, b, 1).narrow(1, h, 1), group),
                                  mask_slice(mask, b, h * group, group), causal, scale);
      lse.narrow(0, b, 1).narrow(1, h * group, group).copy_(at::logsumexp(s, -1));
      const at::Tensor p = at::softmax(s, -1).to(q.scalar_type());
      out.narrow(0, b, 1)
          .narrow(1, h * group, group)
          .copy_(at::matmul(p, repeat_kv(v.narrow(0, b, 1).narrow(1, h, 1), group)));
    }
}

at::Tensor four_d(const at::Tensor& t) {
  return t.dim() == 3 ? t.unsqueeze(0) : t;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, kForward,
              ": the neuron kernel has no dropout (dropout_p=", dropout_p,
              "); scaled_dot_product_attention takes the math path for it");
  TORCH_CHECK(!return_debug_mask, kForward, ": the neuron kernel returns no debug mask");
  TORCH_CHECK(flash_covers(query, key, value, attn_bias, 0.0, true), kForward, ": q ",
              query.sizes(), ", k ", key.sizes(), ", v ", value.sizes(), " (", query.scalar_type(),
              ") are not a case of the neuron attention kernel");
  const int device = op_device(kForward, {&query, &key, &value});
  const at::Tensor q = head_dim_contiguous(query), k = head_dim_contiguous(key),
                   v = head_dim_contiguous(value);
  std::vector<int64_t> out_sizes = q.sizes().vec();
  out_sizes.back() = v.size(-1);
  const at::Tensor out = empty_like_layout(q, out_sizes);
  const int64_t batch = q.dim() == 4 ? q.size(0) : 1, hq = q.size(-3), tq = q.size(-2);
  const at::Tensor lse = at::empty({batch, hq, tq}, q.options().dtype(at::kFloat));
  const at::Tensor mask =
      attn_bias && attn_bias->defined() ? additive_mask(*attn_bias, q.scalar_type()) : at::Tensor();
  const double sm_scale = softmax_scale(q, scale);

  const at::Tensor lse_view = q.dim() == 3 ? lse[0] : lse;
  std::vector<std::pair<std::string, at::Tensor>> tensors{
      {"q", q}, {"k", k}, {"v", v}, {"out", out}, {"lse", lse_view}};
  if (mask.defined()) tensors.emplace_back("bias", mask);
  const kernels::View vq = view_of(q), vk = view_of(k), vv = view_of(v), vo = view_of(out),
                      vl = view_of(lse_view);
  const std::optional<kernels::View> vm =
      mask.defined() ? std::optional(view_of(mask)) : std::nullopt;
  const std::string chip = target();
  const bool ran = run_kernel(
      kForward, device,
      fmt::format("{} q {} k {} v {} out {} mask {} causal={} scale={}", kForward, layout_key(q),
                  layout_key(k), layout_key(v), layout_key(out),
                  mask.defined() ? layout_key(mask) : "none", is_causal, sm_scale),
      [&] {
        return kernels::attention(chip, {vq, vk, vv, vo, vl, vm ? &*vm : nullptr},
                                  static_cast<float>(sm_scale), is_causal);
      },
      tensors);
  if (!ran) {
    take_refusal(kForward);
    attention_math(four_d(q), four_d(k), four_d(v), mask, is_causal, sm_scale, four_d(out), lse);
  }
  // No dropout: the random state is unused (the meta function's empty scalars; no kernel).
  const at::TensorOptions index = q.options().dtype(at::kLong);
  return {out,
          lse,
          at::Tensor(),
          at::Tensor(),
          c10::SymInt(tq),
          c10::SymInt(k.size(-2)),
          at::empty({}, index),
          at::empty({}, index),
          at::Tensor()};
}

constexpr const char* kBackward = "aten::_scaled_dot_product_fused_attention_overrideable_backward";

// The gradients on kernels::attention_backward (probabilities recomputed on chip); false,
// running nothing, where it refuses (head dims past 128, too many queries per KV head).
bool backward_kernel(const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
                     const at::Tensor& value, const at::Tensor& mask, const at::Tensor& out,
                     const at::Tensor& logsumexp, bool is_causal, double sm_scale,
                     const at::Tensor& gq, const at::Tensor& gk, const at::Tensor& gv) {
  const int device = op_device(kBackward, {&grad_out, &query, &key, &value, &out});
  const at::Tensor q = head_dim_contiguous(query), k = head_dim_contiguous(key),
                   v = head_dim_contiguous(value), o = head_dim_contiguous(out),
                   go = head_dim_contiguous(grad_out);
  const at::Tensor lse = query.dim() == 3 ? logsumexp[0] : logsumexp;
  std::vector<std::pair<std::string, at::Tensor>> tensors{{"q", q},   {"k", k},     {"v", v},
                                                          {"out", o}, {"dout", go}, {"lse", lse},
                                                          {"dq", gq}, {"dk", gk},   {"dv", gv}};
  if (mask.defined()) tensors.emplace_back("bias", mask);
  const std::optional<kernels::View> vm =
      mask.defined() ? std::optional(view_of(mask)) : std::nullopt;
  const kernels::AttentionGradOperands ops{
      view_of(q),   view_of(k),  view_of(v),  view_of(o),  view_of(go),
      view_of(lse), view_of(gq), view_of(gk), view_of(gv), vm ? &*vm : nullptr};
  std::string key_text = fmt::format("{} causal={} scale={} mask {}", kBackward, is_causal,
                                     sm_scale, mask.defined() ? layout_key(mask) : "none");
  for (const auto& [name, t] : tensors) key_text += " " + name + " " + layout_key(t);
  const std::string chip = target();
  return run_kernel(
      kBackward, device, key_text,
      [&] {
        return kernels::attention_backward(chip, ops, static_cast<float>(sm_scale), is_causal);
      },
      tensors);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor&, const at::Tensor&,
    c10::SymInt, c10::SymInt, double dropout_p, bool is_causal, const at::Tensor&,
    const at::Tensor&, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, kForward, "_backward: no dropout on the neuron kernel");
  if (!(grad_input_mask[3] && attn_bias.defined())) {
    const at::Tensor gq = empty_like_layout(query, query.sizes()),
                     gk = empty_like_layout(key, key.sizes()),
                     gv = empty_like_layout(value, value.sizes());
    const at::Tensor mask =
        attn_bias.defined() ? additive_mask(attn_bias, query.scalar_type()) : at::Tensor();
    if (backward_kernel(grad_out, query, key, value, mask, out, logsumexp, is_causal,
                        softmax_scale(query, scale), gq, gk, gv))
      return {grad_input_mask[0] ? gq : at::Tensor(), grad_input_mask[1] ? gk : at::Tensor(),
              grad_input_mask[2] ? gv : at::Tensor(), at::Tensor()};
    take_refusal(kBackward);  // the math below runs on the device too
  }
  const at::Tensor q = four_d(query), k = four_d(key), v = four_d(value), o = four_d(out),
                   go = four_d(grad_out);
  const at::Tensor lse = logsumexp.unsqueeze(-1).clamp_min(std::numeric_limits<float>::lowest());
  const at::Tensor mask =
      attn_bias.defined() ? additive_mask(attn_bias, q.scalar_type()) : at::Tensor();
  const double sm_scale = softmax_scale(q, scale);
  const int64_t batch = q.size(0), hkv = k.size(1), group = q.size(1) / hkv;
  const int64_t tq = q.size(2), tk = k.size(2);
  const c10::ScalarType dtype = q.scalar_type();

  at::Tensor gq = at::empty_like(q), gk = at::empty_like(k), gv = at::empty_like(v);
  const bool bias_grad = grad_input_mask[3] && attn_bias.defined();
  at::Tensor gbias = bias_grad
                         ? at::empty({batch, q.size(1), tq, tk}, q.options().dtype(at::kFloat))
                         : at::Tensor();
  // KV heads per chunk: their query heads' scores within kChunkScores.
  const int64_t per_chunk = std::max<int64_t>(1, kChunkScores / (group * tq * tk));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h0 = 0; h0 < hkv; h0 += per_chunk) {
      const int64_t n = std::min(per_chunk, hkv - h0);
      const auto heads = [&](const at::Tensor& t, int64_t first, int64_t count) {
        return t.narrow(0, b, 1).narrow(1, first, count);
      };
      const at::Tensor qc = heads(q, h0 * group, n * group), goc = heads(go, h0 * group, n * group);
      const at::Tensor ke = repeat_kv(heads(k, h0, n), group),
                       ve = repeat_kv(heads(v, h0, n), group);
      // P = exp(S - lse): the forward's probabilities, from its logsumexp.
      const at::Tensor p =
          at::exp(scores(qc, ke, mask_slice(mask, b, h0 * group, n * group), is_causal, sm_scale)
                      .sub_(heads(lse, h0 * group, n * group)));
      const at::Tensor dv = at::matmul(p.to(dtype).transpose(-2, -1), goc);
      // dS = P * (dP - rowsum(dO * O)), dP = dO V^T.
      const at::Tensor row = (goc.to(at::kFloat) * heads(o, h0 * group, n * group).to(at::kFloat))
                                 .sum(-1, /*keepdim=*/true);
      const at::Tensor ds = p.mul_(at::matmul(goc, ve.transpose(-2, -1)).to(at::kFloat).sub_(row));
      if (bias_grad) heads(gbias, h0 * group, n * group).copy_(ds);
      const at::Tensor ds_scaled = (ds * sm_scale).to(dtype);
      heads(gq, h0 * group, n * group).copy_(at::matmul(ds_scaled, ke));
      at::Tensor dk = at::matmul(ds_scaled.transpose(-2, -1), qc);
      at::Tensor dvv = dv;
      if (group > 1) {  // the query heads sharing a KV head add their gradients
        dk = dk.view({1, n, group, tk, k.size(3)}).sum(2);
        dvv = dvv.view({1, n, group, tk, v.size(3)}).sum(2);
      }
      heads(gk, h0, n).copy_(dk);
      heads(gv, h0, n).copy_(dvv);
    }
  const auto back = [&](const at::Tensor& g) { return query.dim() == 3 ? g[0] : g; };
  at::Tensor grad_bias;
  if (bias_grad) grad_bias = gbias.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  return {grad_input_mask[0] ? back(gq) : at::Tensor(),
          grad_input_mask[1] ? back(gk) : at::Tensor(),
          grad_input_mask[2] ? back(gv) : at::Tensor(), grad_bias};
}

}  // namespace

}  // namespace neuronsim::pytorch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuronsim::pytorch::fused_sdp_choice)
}  // namespace at::native

namespace neuronsim::pytorch {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
}

}  // namespace neuronsim::pytorch

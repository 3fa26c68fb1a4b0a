"""Decompositions the compiler adds to the core aten ones: ops whose eager kernel has no
graph stage, written as ops that lower."""

from __future__ import annotations

import math
import threading

import torch

from .ops import backward_lowers

aten = torch.ops.aten
_retracing = threading.local()


def attention_backward(
    grad_out,
    query,
    key,
    value,
    attn_bias,
    grad_input_mask,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    """The backward of the flash attention op: left to the graph's attention_backward stage
    where its kernel covers the case, else recomputing the probabilities from the forward's
    logsumexp in ops that lower (what the eager op does, without its chunking over heads)."""
    if dropout_p != 0.0:
        raise NotImplementedError("attention backward with dropout")
    args = {"dropout_p": dropout_p, "attn_bias": attn_bias, "grad_input_mask": grad_input_mask}
    if backward_lowers(query, key, value, out, grad_out, logsumexp, args):
        if getattr(_retracing, "active", False):
            return NotImplemented  # the call below: traced as the op itself
        # The op again, with the logsumexp standing in for the random state it does not read
        # without dropout: the forward graph then need not return its int64 seed and offset,
        # which no engine holds.
        _retracing.active = True
        try:
            return aten._scaled_dot_product_fused_attention_overrideable_backward.default(
                grad_out,
                query,
                key,
                value,
                attn_bias,
                grad_input_mask,
                out,
                logsumexp,
                cum_seq_q,
                cum_seq_k,
                max_q,
                max_k,
                dropout_p,
                is_causal,
                logsumexp,
                logsumexp,
                scale=scale,
            )
        finally:
            _retracing.active = False
    squeeze = query.dim() == 3
    if squeeze:
        grad_out, query, key, value, out = (
            t.unsqueeze(0) for t in (grad_out, query, key, value, out)
        )
    sm_scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    group = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(group, 1) if group > 1 else key
    v = value.repeat_interleave(group, 1) if group > 1 else value
    dtype = query.dtype
    s = torch.matmul(query, k.transpose(-2, -1)).float() * sm_scale
    if attn_bias is not None:
        s = s + attn_bias
    if is_causal:
        tq, tk = query.shape[-2], key.shape[-2]
        causal = torch.ones(tq, tk, dtype=torch.bool, device=query.device).triu(1)
        s = s.masked_fill(causal, float("-inf"))
    lse = logsumexp.reshape(s.shape[:-1] + (1,)).clamp_min(torch.finfo(torch.float32).min)
    p = torch.exp(s - lse)
    dv = torch.matmul(p.to(dtype).transpose(-2, -1), grad_out)
    row = (grad_out.float() * out.float()).sum(-1, keepdim=True)
    ds = p * (torch.matmul(grad_out, v.transpose(-2, -1)).float() - row)
    ds_scaled = (ds * sm_scale).to(dtype)
    dq = torch.matmul(ds_scaled, k)
    dk = torch.matmul(ds_scaled.transpose(-2, -1), query)
    if group > 1:
        b, _, tk, d = dk.shape
        dk = dk.view(b, key.shape[1], group, tk, d).sum(2)
        dv = dv.view(b, key.shape[1], group, tk, value.shape[-1]).sum(2)
    grad_bias = None
    if grad_input_mask[3] and attn_bias is not None:
        grad_bias = ds.sum_to_size(attn_bias.shape).to(attn_bias.dtype)
    if squeeze:
        dq, dk, dv = dq[0], dk[0], dv[0]
    return (
        dq if grad_input_mask[0] else None,
        dk if grad_input_mask[1] else None,
        dv if grad_input_mask[2] else None,
        grad_bias,
    )


DECOMPOSITIONS = {
    aten._scaled_dot_product_fused_attention_overrideable_backward.default: attention_backward,
}

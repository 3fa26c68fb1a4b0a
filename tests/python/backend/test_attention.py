"""scaled_dot_product_attention on "neuron": the cases the flash kernel covers run as one
kernel (PyTorch's "overrideable" fused backend) in strict mode, with the values, the
layout and the gradients of the CPU's math path; the rest take the math path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

import neuronsim

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def heads(b, h, t, d, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, t, d, generator=g).to(dtype)


def tolerance(dtype):
    return {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}


def choice(q, k, v, mask=None, dropout_p=0.0, enable_gqa=False):
    return SDPBackend(aten._fused_sdp_choice(q, k, v, mask, dropout_p, enable_gqa=enable_gqa))


def on_device(*tensors):
    return [t.to("neuron") for t in tensors]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_the_fused_kernel_gives_the_cpu_values(dtype, causal):
    q, k, v = (
        heads(2, 3, 150, 32, 0, dtype),
        heads(2, 3, 150, 32, 1, dtype),
        heads(2, 3, 150, 32, 2, dtype),
    )
    dq, dk, dv = on_device(q, k, v)
    assert choice(dq, dk, dv) == SDPBackend.OVERRIDEABLE
    got = F.scaled_dot_product_attention(dq, dk, dv, is_causal=causal)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(got.cpu().float(), want, **tolerance(dtype))


def test_grouped_query_heads_and_a_models_layout():
    # Models project to [B, T, H, D] and transpose to heads: the fused op's output keeps
    # that layout (the meta function's alloc_with_matching_layout).
    q = heads(1, 40, 8, 16, 0).transpose(1, 2)  # [1, 8, 40, 16] over [1, 40, 8, 16] memory
    k, v = heads(1, 40, 2, 16, 1).transpose(1, 2), heads(1, 40, 2, 16, 2).transpose(1, 2)
    dq, dk, dv = on_device(q, k, v)
    dq, dk, dv = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (dq, dk, dv))
    assert choice(dq, dk, dv, enable_gqa=True) == SDPBackend.OVERRIDEABLE
    got = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True, enable_gqa=True)
    fused = aten._scaled_dot_product_fused_attention_overrideable(dq, dk, dv, None, 0.0, True)
    assert fused[0].stride() == dq.stride() and fused[1].shape == (1, 8, 40)
    torch.testing.assert_close(fused[0].cpu(), got.cpu())
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_and_a_row_masked_out_entirely(kind):
    q, k, v = heads(2, 2, 20, 16, 0), heads(2, 2, 30, 16, 1), heads(2, 2, 30, 8, 2)
    keep = torch.rand(2, 1, 20, 30, generator=torch.Generator().manual_seed(3)) > 0.3
    keep[0, 0, 5] = False  # torch's math path gives such a row zeros
    mask = keep if kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    got = F.scaled_dot_product_attention(*on_device(q, k, v), attn_mask=mask.to("neuron"))
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)
    assert torch.equal(got[0, :, 5].cpu(), torch.zeros(2, 8))


def test_three_d_inputs_and_a_scale():
    q, k, v = heads(1, 4, 50, 24, 0)[0], heads(1, 4, 70, 24, 1)[0], heads(1, 4, 70, 24, 2)[0]
    got = F.scaled_dot_product_attention(*on_device(q, k, v), scale=0.3)
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v, scale=0.3))


def test_gradients_match_the_cpu():
    q, k, v = heads(2, 4, 70, 16, 0), heads(2, 2, 70, 16, 1), heads(2, 2, 70, 16, 2)
    mask = torch.randn(1, 1, 70, 70, generator=torch.Generator().manual_seed(4))
    grads = []
    for device in ("cpu", "neuron"):
        leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(
            *leaves, attn_mask=mask.to(device), is_causal=False, enable_gqa=True
        )
        (out * torch.linspace(-1, 1, 16).to(device)).sum().backward()
        grads.append([t.grad.cpu() for t in leaves])
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_causal_gradients_in_bfloat16():
    q, k, v = (heads(1, 2, 130, 32, s, torch.bfloat16) for s in range(3))
    grads = []
    for device in ("cpu", "neuron"):
        leaves = [
            t.to(device).float().requires_grad_()
            if device == "cpu"
            else t.to(device).requires_grad_()
            for t in (q, k, v)
        ]
        F.scaled_dot_product_attention(*leaves, is_causal=True).sum().backward()
        grads.append([t.grad.cpu().float() for t in leaves])
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, atol=0.1, rtol=0.05)


def test_what_the_kernel_does_not_cover_takes_the_math_path():
    q, k, v = on_device(heads(1, 2, 8, 16, 0), heads(1, 2, 8, 16, 1), heads(1, 2, 8, 16, 2))
    assert choice(q, k, v, dropout_p=0.1) == SDPBackend.MATH
    wide = on_device(*(heads(1, 1, 8, 512, s) for s in range(3)))
    assert choice(*wide) == SDPBackend.MATH
    # Different head counts without enable_gqa: the math path's error, as on the CPU.
    assert choice(q, k[:, :1], v[:, :1]) == SDPBackend.MATH
    out = F.scaled_dot_product_attention(*wide)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(*(t.cpu() for t in wide)))


def test_the_op_called_directly_refuses_dropout_naming_itself():
    q = heads(1, 1, 8, 16, 0).to("neuron")
    with pytest.raises(
        RuntimeError, match="_scaled_dot_product_fused_attention_overrideable.*dropout"
    ):
        aten._scaled_dot_product_fused_attention_overrideable(q, q, q, None, 0.5)


def test_the_backward_is_one_kernel_that_recomputes_the_probabilities():
    q, k, v = heads(1, 4, 300, 64, 0), heads(1, 2, 300, 64, 1), heads(1, 2, 300, 32, 2)
    g = heads(1, 4, 300, 32, 3)
    grads = []
    for device in ("cpu", "neuron"):
        leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, is_causal=True, enable_gqa=True)
        start = neuronsim.kernels_run()
        out.backward(g.to(device))
        if device == "neuron":
            assert neuronsim.kernels_run() - start == 1  # dq, dk and dv from one kernel
        grads.append([t.grad.cpu() for t in leaves])
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_backward_with_keys_no_query_sees():
    # Causal with more keys than queries: keys past the last query get zero gradients, whatever
    # PSUM held from earlier kernels.
    for tq, tk in ((3, 6), (100, 300)):
        q, k, v = heads(2, 2, tq, 8, 0), heads(2, 2, tk, 8, 1), heads(2, 2, tk, 8, 2)
        grads = []
        for device in ("cpu", "neuron"):
            leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
            F.scaled_dot_product_attention(*leaves, is_causal=True).sum().backward()
            grads.append([t.grad.cpu() for t in leaves])
        for got, want in zip(grads[1], grads[0]):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)

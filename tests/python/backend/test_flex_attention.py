"""Flex attention on "neuron": block masks built on the device, score_mod and masks against
the CPU, its gradient (which the CPU refuses), torch.compile's default backend handing
neuron graphs to "neuron", and a Transformers model with attn_implementation
"flex_attention" in strict mode."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import neuronsim
from neuronsim.testing import tiny_qwen3


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex attention's "called without torch.compile"
        yield


def _causal(b, h, q, k):
    return q >= k


def _bias(score, b, h, q, k):
    return score + (q - k) * 0.01


def _qkv(seed=0, length=128):
    torch.manual_seed(seed)
    return [torch.randn(1, 2, length, 16) for _ in range(3)]


@pytest.mark.parametrize("length", [64, 256])
def test_block_mask_and_score_mod_match_the_cpu(length):
    q, k, v = _qkv(length=length)
    expected = flex_attention(
        q, k, v, score_mod=_bias, block_mask=create_block_mask(_causal, 1, 1, length, length, "cpu")
    )
    mask = create_block_mask(_causal, 1, 1, length, length, device="neuron")
    got = flex_attention(*(t.to("neuron") for t in (q, k, v)), score_mod=_bias, block_mask=mask)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-4)


def test_flex_attention_gradient_matches_plain_attention():
    q, k, v = (t.to("neuron").requires_grad_() for t in _qkv(1))
    mask = create_block_mask(_causal, 1, 1, 128, 128, device="neuron")
    flex_attention(q, k, v, block_mask=mask).sum().backward()
    ref = [t.detach().cpu().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=True).sum().backward()
    for got, expected in zip((q, k, v), ref):
        torch.testing.assert_close(got.grad.cpu(), expected.grad, atol=1e-4, rtol=1e-4)


@pytest.fixture
def compiled_splits():
    """Compiled graphs here have integer steps (the block mask's counts) that run between
    programs: strict mode, which refuses those splits, is off; no op may fall back to
    the CPU all the same."""
    with neuronsim.strict_mode(False):
        yield
    assert neuronsim.fallback_counts() == {}


def test_default_torch_compile_sends_neuron_graphs_to_the_neuron_backend(compiled_splits):
    q, k, v = (t.to("neuron") for t in _qkv(2))
    compiled = torch.compile(flex_attention)  # Inductor, which has no neuron code generator
    got = compiled(q, k, v, score_mod=_bias)
    expected = flex_attention(*(t.cpu() for t in (q, k, v)), score_mod=_bias)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-4)
    # A graph on the CPU still goes to Inductor's own path (here: its eager fallback check).
    assert torch.compile(lambda t: t * 2)(torch.ones(2)).device.type == "cpu"


def test_transformers_flex_attention_forward_and_backward(compiled_splits):
    ids = torch.randint(4, 200, (1, 16))
    with torch.no_grad():
        expected = tiny_qwen3(attn_implementation="flex_attention")(ids).logits
    model = tiny_qwen3(attn_implementation="flex_attention").to("neuron")
    logits = model(ids.to("neuron")).logits
    torch.testing.assert_close(logits.detach().cpu(), expected, atol=1e-4, rtol=1e-4)
    logits.float().sum().backward()
    assert all(p.grad is not None for p in model.parameters())

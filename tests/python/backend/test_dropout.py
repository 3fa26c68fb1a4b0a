"""Dropout on the device: its mask comes from the engines' random number generators,
seeded from the device's generator, so it cannot match the CPU's draws; what it must do
is drop about p of the elements, scale the rest by 1/(1-p), repeat under the same seed,
draw afresh otherwise, and send the gradient through the same mask, all in one kernel
and with no CPU fallback."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import neuronsim


def test_dropout_drops_p_and_scales_the_rest():
    neuronsim.set_strict(True)  # the mask is drawn on the device: no bernoulli_ on the CPU
    x = torch.full((64, 64), 2.0, device="neuron", requires_grad=True)
    torch.neuron.manual_seed(7)
    y = F.dropout(x, p=0.25, training=True)
    values = y.detach().cpu()
    kept = values != 0
    assert 0.73 < kept.float().mean().item() < 0.77  # 4096 draws: 5 sigma is 0.034 wide
    torch.testing.assert_close(values[kept], torch.full_like(values[kept], 2.0 / 0.75))
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75)
    assert neuronsim.fallback_counts() == {}


def test_native_dropout_is_one_kernel_whose_mask_matches_its_output():
    neuronsim.set_strict(True)
    x = torch.randn(3, 50, 70)
    dev = x.to("neuron")
    runs = neuronsim.kernels_run()
    out, mask = torch.ops.aten.native_dropout(dev, 0.1, True)
    assert neuronsim.kernels_run() - runs == 1
    assert mask.dtype == torch.bool and out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), x * mask.cpu() / 0.9)
    assert abs(mask.float().mean().item() - 0.9) < 0.01  # 10500 draws: 5 sigma is 0.015


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dropout_in_16_bit_floats(dtype):
    neuronsim.set_strict(True)
    x = torch.randn(256, 33).to(dtype)
    out, mask = torch.ops.aten.native_dropout(x.to("neuron"), 0.5, True)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), (x.float() * mask.cpu() * 2).to(dtype))
    assert 0.45 < mask.float().mean().item() < 0.55


def test_dropout_of_zero_keeps_everything_and_of_one_drops_everything():
    neuronsim.set_strict(True)
    x = torch.randn(1000).to("neuron")
    out, mask = torch.ops.aten.native_dropout(x, 0.0, True)
    assert bool(mask.all()) and torch.equal(out.cpu(), x.cpu())
    out, mask = torch.ops.aten.native_dropout(x, 1.0, True)
    assert not bool(mask.any()) and not bool(out.cpu().any())


def test_dropout_repeats_under_the_same_seed_and_is_identity_in_eval():
    x = torch.randn(32, 32, device="neuron")
    torch.neuron.manual_seed(3)
    a = F.dropout(x, 0.5).cpu()
    torch.neuron.manual_seed(3)
    b = F.dropout(x, 0.5).cpu()
    c = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, b)
    # A fresh draw: about half the masks agree by chance, never all of them.
    assert 0.35 < ((a == 0) == (c == 0)).float().mean().item() < 0.65
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())


def test_dropout_masks_of_a_strided_view_are_independent_per_element():
    neuronsim.set_strict(True)
    torch.neuron.manual_seed(11)
    base = torch.ones(512, 256, device="neuron")
    y = F.dropout(base.t(), 0.5).cpu()  # a transposed view: the kernel walks out's layout
    rows, cols = (y != 0).float().mean(1), (y != 0).float().mean(0)
    assert ((rows > 0.3) & (rows < 0.7)).all() and ((cols > 0.35) & (cols < 0.65)).all()

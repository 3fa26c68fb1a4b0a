"""Dropout on the device: its mask comes from the device's generator, so it cannot match
the CPU's draws; what it must do is drop about p of the elements, scale the rest by
1/(1-p), repeat under the same seed, and send the gradient through the same mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import neuronsim


def test_dropout_drops_p_and_scales_the_rest():
    x = torch.full((64, 64), 2.0, device="neuron", requires_grad=True)
    torch.neuron.manual_seed(7)
    y = F.dropout(x, p=0.25, training=True)
    values = y.detach().cpu()
    kept = values != 0
    assert 0.70 < kept.float().mean().item() < 0.80
    torch.testing.assert_close(values[kept], torch.full_like(values[kept], 2.0 / 0.75))
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.75)
    assert not any("dropout" in op for op in neuronsim.fallback_counts())


def test_dropout_repeats_under_the_same_seed_and_is_identity_in_eval():
    x = torch.randn(32, 32, device="neuron")
    torch.neuron.manual_seed(3)
    a = F.dropout(x, 0.5).cpu()
    torch.neuron.manual_seed(3)
    b = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, b)
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())

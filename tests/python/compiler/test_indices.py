"""Integer values in compiled programs (neuronsim/compiler/indices.py): a mixture of experts'
routing compiles into the program in strict mode, each integer op matches the CPU exactly,
and integers whose range the graph does not prove small stay out of the programs."""

from __future__ import annotations

import pytest
import torch

import neuronsim
from neuronsim import compiler


def _histc(ids, bins: int):
    """torch.histc of integer ids, one bin per id (the CPU's histc takes no integers, the
    same counts by bincount there)."""
    if ids.device.type == "neuron":
        return torch.histc(ids.int(), bins=bins, min=0, max=bins - 1)
    return torch.bincount(ids, minlength=bins).int()


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    compiler.reset_stats()
    yield
    neuronsim.set_strict(False)
    torch._dynamo.reset()


def _route(logits, x, w_up, w_down, k: int):
    """Transformers' grouped_mm experts, reduced to their integer work: top-k routing, the
    stable sort of expert ids, floor division, histc, cumsum, the grouped products and
    the inverse permutation."""
    experts = w_up.shape[0]
    values, ids = torch.topk(logits.softmax(-1), k)
    flat = ids.reshape(-1)
    sorted_ids, perm = torch.sort(flat)
    tokens = torch.div(perm, k, rounding_mode="floor")
    rows = x[tokens]
    weights = values.reshape(-1)[perm]
    counts = _histc(sorted_ids, experts)
    ends = torch.cumsum(counts, 0, dtype=torch.int32)
    h = torch.nn.functional.grouped_mm(rows, w_up.transpose(-2, -1), offs=ends)
    h = torch.nn.functional.silu(h)
    y = torch.nn.functional.grouped_mm(h, w_down.transpose(-2, -1), offs=ends)
    y = y * weights.unsqueeze(-1)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=perm.device)
    return y[inverse].view(-1, k, y.shape[-1]).sum(1), ends


def test_a_routed_layer_is_one_program_in_strict_mode():
    g = torch.Generator().manual_seed(0)
    tokens, hidden, inter, experts, k = 40, 64, 32, 8, 2
    x = torch.randn(tokens, hidden, generator=g).bfloat16()
    logits = torch.randn(tokens, experts, generator=g)
    w_up = (torch.randn(experts, inter, hidden, generator=g) / 8).bfloat16()
    w_down = (torch.randn(experts, hidden, inter, generator=g) / 8).bfloat16()
    want, want_ends = _route(logits, x, w_up, w_down, k)
    neuronsim.set_strict(True)
    args = [t.to("neuron") for t in (logits, x, w_up, w_down)]
    got, ends = torch.compile(_route, backend="neuron")(*args, k)
    (report,) = compiler.graphs()
    assert report.kernels == 1 and report.eager == [], report
    assert torch.equal(ends.cpu(), want_ends)
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=2e-2)


def test_each_integer_op_matches_the_cpu_exactly():
    def ops(scores, table, k: int):
        values, ids = torch.topk(scores, k, dim=-1)
        order, perm = torch.sort(ids.reshape(-1), stable=True)
        down, up = torch.sort(ids.reshape(-1), descending=True, stable=True)
        counts = _histc(order, 16)
        ends = torch.cumsum(counts, 0, dtype=torch.int32)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.numel(), device=perm.device)
        rows = table[torch.div(perm, k, rounding_mode="floor")]
        return values, ids, order, perm, down, up, counts, ends, inverse, rows, ends.long()

    g = torch.Generator().manual_seed(1)
    scores = torch.randn(24, 16, generator=g)
    table = torch.randn(24, 8, generator=g)
    want = ops(scores, table, 3)
    neuronsim.set_strict(True)
    got = torch.compile(ops, backend="neuron")(scores.to("neuron"), table.to("neuron"), 3)
    assert compiler.graphs()[0].eager == []
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, i
        assert torch.equal(a.cpu(), b), f"result {i}: {a.cpu()} != {b}"


def test_integers_whose_range_is_not_proven_stay_out_of_the_program():
    # Token ids from the host may be anything: dividing or sorting them is left to the eager
    # kernels, and strict mode refuses it, saying why.
    def halve(ids):
        return torch.div(ids, 2, rounding_mode="floor")

    ids = torch.randint(0, 1000, (32,))
    got = torch.compile(halve, backend="neuron")(ids.to("neuron"))
    assert torch.equal(got.cpu(), ids // 2)
    assert compiler.graphs()[0].eager == ["aten::div.Tensor_mode"]
    torch._dynamo.reset()
    neuronsim.set_strict(True)
    with pytest.raises(Exception, match=r"the dividend is not proven in \[0, 2\^24\)"):
        torch.compile(halve, backend="neuron")(ids.to("neuron"))


def test_a_bf16_product_widened_to_float32_is_rounded_where_the_graph_rounds_it():
    # A router's logits: a bf16 product copied into float32 before its softmax. The
    # compiled product is stored in bf16 first, as the graph holds it, so the float32 values
    # are the bf16-rounded ones the eager ops give, not the FP32 accumulators.
    def router(x, w):
        return (x @ w).float().softmax(-1)

    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 64, generator=g).bfloat16().to("neuron")
    w = torch.randn(64, 32, generator=g).bfloat16().to("neuron")
    eager = router(x, w).cpu()
    got = torch.compile(router, backend="neuron")(x, w).cpu()
    assert compiler.graphs()[0].eager == []
    torch.testing.assert_close(got, eager, rtol=1e-6, atol=1e-7)

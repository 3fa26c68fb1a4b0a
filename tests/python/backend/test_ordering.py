"""Order statistics and a mixture of experts' routing on the device, in strict mode:
topk and sort (VectorE's top-8 instructions, stable), histc, integer floor division,
index_put of int64 rows and torch._grouped_mm, each against the CPU."""

from __future__ import annotations

import pytest
import torch

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    neuronsim.set_strict(True)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_of_a_router_matches_the_cpu(largest, dtype):
    probs = torch.randn(37, 128, generator=_gen(1)).softmax(-1).to(dtype)
    values, indices = torch.topk(probs.to("neuron"), 8, dim=-1, largest=largest)
    want_v, want_i = torch.topk(probs, 8, dim=-1, largest=largest)
    assert torch.equal(values.cpu(), want_v)
    assert indices.dtype == torch.int64
    # bf16 probabilities tie, and the CPU picks among ties in no set order: the indices must
    # name distinct elements holding the values (in position order, ours).
    got = indices.cpu()
    assert torch.equal(probs.gather(1, got), want_v)
    assert all(len(set(row)) == 8 for row in got.tolist())
    if dtype == torch.float32:
        assert torch.equal(got, want_i)


def test_topk_along_an_inner_dim_and_over_a_vocabulary():
    x = torch.randn(3, 50, 4, generator=_gen(2))
    values, indices = torch.topk(x.to("neuron"), 5, dim=1)
    want_v, want_i = torch.topk(x, 5, dim=1)
    assert torch.equal(values.cpu(), want_v) and torch.equal(indices.cpu(), want_i)
    logits = torch.randn(2, 40000, generator=_gen(3))  # several 16,384-element chunks
    values, indices = torch.topk(logits.to("neuron"), 50)
    want_v, want_i = torch.topk(logits, 50)
    assert torch.equal(values.cpu(), want_v) and torch.equal(indices.cpu(), want_i)


@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_of_integers_with_ties(descending):
    ids = torch.randint(0, 16, (1024,), generator=_gen(4))  # expert ids: many ties
    values, perm = torch.sort(ids.to("neuron"), descending=descending, stable=True)
    want_v, want_p = torch.sort(ids, descending=descending, stable=True)
    assert torch.equal(values.cpu(), want_v)
    assert torch.equal(perm.cpu(), want_p)


def test_sort_puts_nan_last_ascending_and_first_descending():
    x = torch.tensor([3.0, float("nan"), -float("inf"), 1.0, float("nan"), -2.0, 1.0, 0.5])
    values, perm = torch.sort(x.to("neuron"), stable=True)
    want_v, want_p = torch.sort(x, stable=True)
    assert torch.equal(values.cpu()[:-2], want_v[:-2]) and values.cpu()[-2:].isnan().all()
    assert torch.equal(perm.cpu(), want_p)
    x[2] = float("inf")
    values, perm = torch.sort(x.to("neuron"), descending=True, stable=True)
    want_p = torch.sort(x, descending=True, stable=True)[1]
    assert values.cpu()[:2].isnan().all() and torch.equal(perm.cpu(), want_p)


def test_ascending_keys_tie_inf_and_nan_in_position_order():
    # The FP32 keys stay above -inf (what the top-8 rounds replace found elements by), so
    # ascending +inf and NaN tie: they come out in position order, where torch puts +inf
    # first (kernels/eager.h, topk).
    x = torch.tensor([float("nan"), 2.0, float("inf"), 1.0])
    values, perm = torch.sort(x.to("neuron"), stable=True)
    assert perm.cpu().tolist() == [3, 1, 0, 2]


def test_int64_keys_beyond_fp32_fall_back_named():
    neuronsim.set_strict(False)
    x = torch.tensor([2**40, 3, -(2**41), 7])
    values, perm = torch.sort(x.to("neuron"))
    assert torch.equal(values.cpu(), torch.sort(x).values)
    assert neuronsim.fallback_counts() == {"aten::sort.values_stable": 1}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_histc_counts_expert_ids(dtype):
    ids = torch.randint(0, 128, (1024,), generator=_gen(5)).to(dtype)
    ids[::97] = 127  # the top edge falls in the last bin
    got = torch.histc(ids.to("neuron"), bins=128, min=0, max=127)
    want = torch.histc(ids.float(), bins=128, min=0, max=127)
    assert torch.equal(got.cpu().float(), want)


def test_histc_of_floats_skips_values_outside_the_range():
    x = torch.tensor([-1.0, 0.0, 0.25, 0.5, 0.99, 1.0, 2.0, float("nan")])
    got = torch.histc(x.to("neuron"), bins=4, min=0, max=1)
    assert torch.equal(got.cpu(), torch.histc(x, bins=4, min=0, max=1))


@pytest.mark.parametrize("divisor", [8, 3, -3, 1])
def test_floor_divide_of_int64_by_a_number(divisor):
    x = torch.randint(-5000, 5000, (300,), generator=_gen(6))
    got = x.to("neuron") // divisor
    assert got.dtype == torch.int64
    assert torch.equal(got.cpu(), x // divisor)


def test_floor_divide_beyond_exact_fp32_falls_back_named():
    neuronsim.set_strict(False)
    x = torch.tensor([2**40 + 1, 5])
    assert torch.equal((x.to("neuron") // 2).cpu(), x // 2)
    assert neuronsim.fallback_counts() == {"aten::floor_divide": 1}


def test_index_put_of_int64_rows_inverts_a_permutation():
    perm = torch.randperm(1024, generator=_gen(7))
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(1024)
    d = torch.empty(1024, dtype=torch.int64, device="neuron")
    d[perm.to("neuron")] = torch.arange(1024, device="neuron")
    assert torch.equal(d.cpu(), inv)


def test_grouped_mm_of_experts_matches_per_group_products():
    g = _gen(8)
    x = torch.randn(40, 64, generator=g).bfloat16()
    w = torch.randn(6, 64, 48, generator=g).bfloat16()
    ends = torch.tensor([5, 5, 17, 30, 30, 38], dtype=torch.int32)  # empty groups, 2 rows left
    got = torch.nn.functional.grouped_mm(x.to("neuron"), w.to("neuron"), offs=ends.to("neuron"))
    want = torch.zeros(40, 48)
    start = 0
    for e, end in enumerate(ends.tolist()):
        want[start:end] = x[start:end].float() @ w[e].float()
        start = end
    assert torch.allclose(got.cpu().float(), want, rtol=1.6e-2, atol=1e-2)
    assert torch.equal(got.cpu()[38:], torch.zeros(2, 48, dtype=torch.bfloat16))
    # A transposed weight (Transformers' [experts, out, in] layout) is read in place.
    wt = w.transpose(-2, -1).contiguous().to("neuron").transpose(-2, -1)
    again = torch.nn.functional.grouped_mm(x.to("neuron"), wt, offs=ends.to("neuron"))
    assert torch.equal(again.cpu(), got.cpu())


def test_integer_div_with_floor_rounding_as_compiled_graphs_write_it():
    x = torch.randint(-1000, 1000, (64,), generator=_gen(9))
    got = torch.div(x.to("neuron"), 8, rounding_mode="floor")
    assert torch.equal(got.cpu(), torch.div(x, 8, rounding_mode="floor"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sum_over_a_middle_dim_runs_on_the_tensor_engine(dtype):
    # The [tokens, top-k, hidden] sum of a mixture of experts: segment-of-ones products that
    # read x in contiguous rows; against the CPU's sum in FP32 of the same values.
    x = torch.randn(130, 8, 256, generator=_gen(10)).to(dtype)  # a full block of 128 and 2
    got = x.to("neuron").sum(dim=1)
    want = x.float().sum(dim=1)
    torch.testing.assert_close(
        got.cpu().float(), want, rtol=1.6e-2 if dtype != torch.float32 else 1e-5, atol=1e-5
    )
    assert got.dtype == dtype
    bias_grad = torch.randn(300, 128, generator=_gen(11))  # a bias gradient: over the tokens
    torch.testing.assert_close(
        bias_grad.to("neuron").sum(0).cpu(), bias_grad.sum(0), rtol=1e-5, atol=1e-5
    )


def test_the_sum_of_a_mixture_of_experts_reads_its_rows_at_dma_speed():
    x = torch.randn(128, 8, 2048).bfloat16().to("neuron")
    x.sum(dim=1)
    torch.neuron.synchronize()
    start = neuronsim.simulated_time()
    x.sum(dim=1)
    torch.neuron.synchronize()
    # 4 MiB: some 11 us of DMA, plus the launch. Reading each column's 8 elements one by one
    # (the reduce kernel's layout) took 548 us.
    assert neuronsim.mode() == "functional-only" or neuronsim.simulated_time() - start < 80e-6

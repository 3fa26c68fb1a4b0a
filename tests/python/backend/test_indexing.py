"""Indexing on the device in strict mode: gather (element offsets from positions and
index limbs, one indirect DMA), scatter and index_put (the same offsets, one indirect
scatter DMA), with torch's errors for indices out of bounds."""

from __future__ import annotations

import pytest
import torch

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    neuronsim.set_strict(True)


@pytest.mark.parametrize(
    "dim, shape", [(1, (3, 7, 5)), (0, (2, 40, 5)), (2, (3, 40, 9)), (-1, (1, 2, 3))]
)
def test_gather_along_any_dim(dim, shape):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(3, 40, 5, generator=g)
    index = torch.randint(0, x.size(dim), shape, generator=g)
    got = torch.gather(x.to("neuron"), dim, index.to("neuron"))
    assert torch.equal(got.cpu(), torch.gather(x, dim, index))


def test_gather_of_the_labels_log_probabilities():
    g = torch.Generator().manual_seed(9)
    logp = torch.randn(2, 6, 11, generator=g).log_softmax(-1)
    labels = torch.randint(0, 11, (2, 6), generator=g)
    got = torch.gather(logp.to("neuron"), 2, labels.to("neuron").unsqueeze(2))
    assert torch.equal(got.cpu(), torch.gather(logp, 2, labels.unsqueeze(2)))


@pytest.mark.parametrize("bad", [45, -1, 2**33])
def test_gather_index_out_of_bounds_is_torchs_error(bad):
    x = torch.randn(3, 40).to("neuron")
    with pytest.raises(
        RuntimeError, match=f"index {bad} is out of bounds for dimension 1 with size 40"
    ):
        torch.gather(x, 1, torch.tensor([[0], [bad], [1]]).to("neuron"))


def test_scatter_src_and_value():
    g = torch.Generator().manual_seed(10)
    x = torch.randn(4, 6, generator=g)
    index = torch.tensor([[0, 5], [1, 1], [3, 2], [0, 0]])  # repeats: the last one wins
    src = torch.randn(4, 3, generator=g)
    got = x.to("neuron").scatter(1, index.to("neuron"), src.to("neuron"))
    assert torch.equal(got.cpu(), x.scatter(1, index, src))
    rows = torch.tensor([[3, 1, 0]])
    assert torch.equal(
        x.to("neuron").scatter(0, rows.to("neuron"), 7.5).cpu(), x.scatter(0, rows, 7.5)
    )
    d = x.to("neuron")
    d.scatter_(1, index.to("neuron"), -1.0)
    assert torch.equal(d.cpu(), x.clone().scatter_(1, index, -1.0))


def test_scatter_index_out_of_bounds_is_torchs_error():
    d = torch.zeros(4, 6, device="neuron")
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension 1 with size 6"):
        d.scatter_(1, torch.tensor([[9]]).to("neuron"), 1.0)
    assert torch.equal(d.cpu(), torch.zeros(4, 6))


def test_index_put_rows_with_negative_indices():
    g = torch.Generator().manual_seed(11)
    y = torch.zeros(5, 3)
    d = y.to("neuron")
    index = torch.tensor([-1, 0, 2])
    values = torch.randn(3, 3, generator=g)
    y[index] = values
    d[index.to("neuron")] = values.to("neuron")
    assert torch.equal(d.cpu(), y)
    y[torch.tensor([1])] = 4.0
    d[torch.tensor([1]).to("neuron")] = 4.0
    assert torch.equal(d.cpu(), y)
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
        d[torch.tensor([7]).to("neuron")] = 1.0


def test_index_put_along_an_inner_dim_updates_a_static_kv_cache():
    # cache[:, :, positions] = keys: a static cache's update, negative positions from the end,
    # values broadcast along a dim of one.
    g = torch.Generator().manual_seed(12)
    cache = torch.randn(2, 3, 40, 8, generator=g)
    dev = cache.to("neuron")
    positions = torch.tensor([5, 6, 39, -2])
    keys = torch.randn(2, 1, 4, 8, generator=g)
    with neuronsim.strict_mode():
        dev[:, :, positions.to("neuron")] = keys.to("neuron")
    cache[:, :, positions] = keys
    assert torch.equal(dev.cpu(), cache)
    with pytest.raises(IndexError, match="index 40 is out of bounds for dimension 2 with size 40"):
        dev[:, :, torch.tensor([40]).to("neuron")] = keys[:, :, :1].to("neuron")


def test_a_uint8_index_at_an_inner_dim_is_a_mask_not_positions():
    x, m = torch.zeros(2, 4), torch.tensor([1, 0, 1, 1], dtype=torch.uint8)
    d = x.to("neuron")
    # torch's deprecation of uint8 indices, on both sides; the device may run it on the CPU.
    with neuronsim.strict_mode(False), pytest.warns(UserWarning):
        x[:, m] = torch.ones(2, 1)
        d[:, m.to("neuron")] = torch.ones(2, 1, device="neuron")
    assert torch.equal(d.cpu(), x)


def test_accumulating_index_put_sums_repeated_rows_on_the_device():
    y = torch.zeros(5, 3)
    d = y.to("neuron")
    index = torch.tensor([1, 1, -1])
    y.index_put_((index,), torch.ones(3, 3), accumulate=True)
    d.index_put_((index.to("neuron"),), torch.ones(3, 3, device="neuron"), accumulate=True)
    assert torch.equal(d.cpu(), y)
    # The gradient of x[index] is such a put: repeated rows add up.
    w = torch.randn(6, 4, requires_grad=True)
    w[torch.tensor([1, 1, 5])].sum().backward()
    wd = w.detach().to("neuron").requires_grad_()
    wd[torch.tensor([1, 1, 5]).to("neuron")].sum().backward()
    assert torch.equal(wd.grad.cpu(), w.grad)


def test_index_put_with_several_index_tensors():
    y = torch.zeros(4, 5, 3)
    rows, cols = torch.tensor([[0], [-1]]), torch.tensor([1, 4])  # broadcast to [2, 2]
    values = torch.arange(12.0).reshape(2, 2, 3)
    d = y.to("neuron")
    d[rows.to("neuron"), cols.to("neuron")] = values.to("neuron")
    y[rows, cols] = values
    assert torch.equal(d.cpu(), y)
    d.index_put_((rows.to("neuron"), cols.to("neuron")), values.to("neuron"), accumulate=True)
    y.index_put_((rows, cols), values, accumulate=True)
    assert torch.equal(d.cpu(), y)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 5"):
        d[torch.tensor([0]).to("neuron"), torch.tensor([5]).to("neuron")] = 1.0


def test_advanced_indexing_with_one_index_tensor():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 10, 3, generator=g)
    d = x.to("neuron")
    for index in (torch.tensor([9, 0, 4]), torch.tensor([-1, 2])):
        i = index.to("neuron")
        assert torch.equal(d[:, i].cpu(), x[:, index])
        assert torch.equal(d[:, :, (index % 3).to("neuron")].cpu(), x[:, :, index % 3])
    # int64 token ids at the cache positions, as generate() reads them
    ids = torch.arange(20).view(2, 10) * 2**40
    positions = torch.tensor([7, 8, 9])
    assert torch.equal(ids.to("neuron")[:, positions.to("neuron")].cpu(), ids[:, positions])
    with pytest.raises(IndexError, match="index 10 is out of bounds for dimension 1 with size 10"):
        d[:, torch.tensor([10]).to("neuron")]


def test_rows_named_by_an_index_move_as_rows():
    # x[perm]: a mixture of experts' token order, one indirect DMA of whole rows; negative
    # indices take the element path, which wraps them.
    g = torch.Generator().manual_seed(13)
    x = torch.randn(300, 64, generator=g).bfloat16()
    perm = torch.randperm(300, generator=g)[:200].view(20, 10)
    d = x.to("neuron")
    assert torch.equal(d[perm.to("neuron")].cpu(), x[perm])
    assert torch.equal(d[torch.tensor([-1, 5]).to("neuron")].cpu(), x[torch.tensor([-1, 5])])
    with pytest.raises(
        IndexError, match="index 300 is out of bounds for dimension 0 with size 300"
    ):
        d[torch.tensor([3, 300]).to("neuron")]


def test_int64_elements_move_as_words():
    ids = torch.arange(20).view(2, 10) * 2**40 - 3
    index = torch.tensor([[1, 1], [0, 9]])
    got = torch.gather(ids.to("neuron"), 1, index.to("neuron"))
    assert torch.equal(got.cpu(), torch.gather(ids, 1, index))
    d = ids.to("neuron")
    d.scatter_(1, index.to("neuron"), torch.full((2, 2), -(2**62)).to("neuron"))
    assert torch.equal(d.cpu(), ids.clone().scatter_(1, index, torch.full((2, 2), -(2**62))))

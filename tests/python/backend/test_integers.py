"""Integers on the device, exactly, in strict mode (no CPU fallback allowed): int64 and
int32 arithmetic, comparisons, bitwise ops, where, fill, casts and arange, with values
at the ends of each type's range, where FP32 (the engines' compute type) would round
or a carry would cross every limb."""

from __future__ import annotations

import pytest
import torch

import neuronsim

INT64_EDGES = [2**63 - 1, -(2**63), -1, 0, 1, 2**24 + 1, -(2**31), 2**32 - 1, 2**48, 65535, 65536]


def _values(dtype: torch.dtype, shape, seed: int) -> torch.Tensor:
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(info.min, info.max, shape, generator=g, dtype=dtype)
    edges = [v for v in INT64_EDGES if info.min <= v <= info.max]
    x.view(-1)[: len(edges)] = torch.tensor(edges, dtype=dtype)
    return x


@pytest.fixture(autouse=True)
def strict():
    neuronsim.set_strict(True)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "add alpha -1": lambda a, b: torch.add(a, b, alpha=-1),
    "add scalar": lambda a, b: a + 70000,
    "scalar - x": lambda a, b: 3 - a,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "lt scalar": lambda a, b: a < -7,
    "eq itself": lambda a, b: a == a,  # noqa: PLR0124 (one tensor, one load)
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "not": lambda a, b: ~a,
    "where": lambda a, b: torch.where(a > b, a, b),
    "where scalar": lambda a, b: torch.where(a > 0, a, -100),
    "masked_fill_": lambda a, b: a.clone().masked_fill_(a < b, -100),
    "masked_fill_ device value": lambda a, b: a.clone().masked_fill_(a < b, b.reshape(-1)[3]),
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "neg": lambda a, b: -a,
    "abs": lambda a, b: a.abs(),
    "relu": lambda a, b: a.relu(),
    "tril": lambda a, b: a.tril(1),
    "triu": lambda a, b: a.triu(-2),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops_match_the_cpu(name, dtype):
    f = BINARY[name]
    a = _values(dtype, (9, 37), seed=1)
    for b in (_values(dtype, (9, 37), seed=2), a[:, :1], _values(dtype, (37,), seed=3)):
        got = f(a.to("neuron"), b.to("neuron"))
        assert got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), f(a, b), rtol=0, atol=0, msg=f"{name} {dtype}")


def test_mixed_widths_promote_as_torch():
    a, b = _values(torch.int64, (5, 7), 4), _values(torch.int32, (5, 7), 5)
    c, m = _values(torch.int8, (5, 7), 6), _values(torch.uint8, (5, 7), 7)
    for x, y in ((a, b), (b, c), (a, c), (c, m), (b, m), (a, m.bool())):
        got = (x.to("neuron") + y.to("neuron")).cpu()
        assert got.dtype == (x + y).dtype
        assert torch.equal(got, x + y), (x.dtype, y.dtype)
        assert torch.equal((x.to("neuron") < y.to("neuron")).cpu(), x < y)


def test_in_place_on_views():
    a = _values(torch.int64, (6, 8), 8)
    d = a.to("neuron")
    d[:, 2:5] += 1
    d[1] -= d[0]  # another row of the same storage
    want = a.clone()
    want[:, 2:5] += 1
    want[1] -= want[0]
    assert torch.equal(d.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.bool])
def test_casts_between_integer_types(dtype):
    a = _values(torch.int64, (4, 33), 9)
    for src in (a, a.to(torch.int32), a.to(torch.int8), a.to(torch.uint8), a > 0):
        got = src.to("neuron").to(dtype).cpu()
        assert torch.equal(got, src.to(dtype)), (src.dtype, dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_floats_truncate_toward_zero(dtype):
    info = torch.iinfo(dtype)
    scale = min(float(info.max), 1e6) / 4
    x = torch.randn(3, 50, generator=torch.Generator().manual_seed(10)) * scale
    if dtype == torch.uint8:
        x = x.abs()
    x[0, :4] = torch.tensor([2.7, -2.7, 0.5, -0.5])
    for src in (x, x.to(torch.bfloat16)):
        assert torch.equal(src.to("neuron").to(dtype).cpu(), src.to(dtype)), src.dtype


def test_integers_to_floats():
    a = _values(torch.int32, (3, 40), 11)
    small = torch.randint(-(2**24), 2**24, (3, 40), dtype=torch.int64)
    for src in (a, small, small.to(torch.int32)):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            if dtype == torch.float16 and src.abs().max() > 65504:
                continue
            assert torch.equal(src.to("neuron").to(dtype).cpu(), src.to(dtype)), (src.dtype, dtype)
    # Beyond 2^24, int64 -> float32 rounds once, to nearest even, as the CPU's: ties, values
    # just above and below them, and every magnitude from 2^24 to 2^63.
    g = torch.Generator().manual_seed(12)
    shifts = torch.randint(0, 40, (2000,), generator=g)
    big = torch.randint(2**23, 2**24, (2000,), generator=g) << shifts
    ties = torch.tensor([2**24 + 1, 2**24 + 3, 2**40 + 2**16, 2**40 + 3 * 2**16, 2**62 + 2**38])
    for x in (
        big,
        big + 1,
        big - 1,
        -big,
        ties,
        ties + 1,
        ties - 1,
        -ties,
        _values(torch.int64, (1000,), 12),
    ):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            want = x.to(dtype)
            assert torch.equal(x.to("neuron").to(dtype).cpu(), want), (dtype, x[:4])


def test_fill_any_int64_value():
    for v in (2**63 - 1, -(2**63), -(2**40) - 3, 7):
        t = torch.empty(5, 3, dtype=torch.int64, device="neuron")
        t.fill_(v)
        assert torch.equal(t.cpu(), torch.full((5, 3), v))
    t = torch.zeros(4, 6, dtype=torch.int32, device="neuron")
    t[:, ::2].fill_(2**31 - 1)
    want = torch.zeros(4, 6, dtype=torch.int32)
    want[:, ::2] = 2**31 - 1
    assert torch.equal(t.cpu(), want)


@pytest.mark.parametrize(
    "args, dtype",
    [
        ((12,), torch.int64),
        ((3, 40, 3), torch.int64),
        ((-5, 2**20, 4099), torch.int32),
        ((10, -10, -3), torch.int64),
        ((0, 1, 0.125), torch.float32),
        ((0, 300), torch.bfloat16),
        ((5, 5), torch.int64),
    ],
)
def test_arange(args, dtype):
    got = torch.arange(*args, dtype=dtype, device="neuron")
    assert got.device.type == "neuron"
    assert torch.equal(got.cpu(), torch.arange(*args, dtype=dtype))


def test_arange_the_engines_cannot_hold_falls_back_counted():
    neuronsim.set_strict(False)
    got = torch.arange(0, 1, 0.1, device="neuron")  # 0.1 is not exact in binary
    assert torch.equal(got.cpu(), torch.arange(0, 1, 0.1))
    assert neuronsim.fallback_counts().get("aten::arange.start_out") == 1


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_multiplication_wraps_exactly(dtype):
    a, b = _values(dtype, (7, 40), 13), _values(dtype, (7, 40), 18)
    for got, want in (
        (a.to("neuron") * b.to("neuron"), a * b),
        (a.to("neuron") * 12345, a * 12345),
        (torch.add(a.to("neuron"), b.to("neuron"), alpha=-5), torch.add(a, b, alpha=-5)),
    ):
        assert torch.equal(got.cpu(), want)


def test_integer_division_falls_back_counted():
    neuronsim.set_strict(False)
    a = _values(torch.int64, (3, 4), 13)
    assert torch.equal(
        torch.div(a.to("neuron"), 7, rounding_mode="floor").cpu(),
        torch.div(a, 7, rounding_mode="floor"),
    )
    assert any(k.startswith("aten::div") for k in neuronsim.fallback_counts())


def test_python_numbers_are_kernel_inputs_not_new_kernels():
    x = torch.arange(12).to("neuron")
    x + 1, torch.arange(1, 2, device="neuron"), x.masked_fill(x > 3, 7), x < 1
    built = neuronsim.kernels_built()
    for k in range(2, 30):  # generate() adds a new past length every token
        y, z, w, v = x + k, torch.arange(k, k + 1, device="neuron"), x.masked_fill(x > 3, k), x < k
    assert neuronsim.kernels_built() == built
    assert torch.equal(y.cpu(), torch.arange(12) + 29) and z.cpu().tolist() == [29]
    assert torch.equal(w.cpu(), torch.arange(12).masked_fill(torch.arange(12) > 3, 29))
    assert torch.equal(v.cpu(), torch.arange(12) < 29)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_cumsum_is_exact(dtype):
    if dtype == torch.bool:
        a = torch.rand(6, 300, generator=torch.Generator().manual_seed(14)) > 0.5
    else:
        a = _values(dtype, (6, 300), 14)
    d = a.to("neuron")
    for dim in (1, 0, -1):
        assert torch.equal(d.cumsum(dim).cpu(), a.cumsum(dim)), dim
    assert torch.equal(d.t().cumsum(0).cpu(), a.t().cumsum(0))


def test_float_cumsum_over_several_chunks():
    x = torch.randn(4, 5000, generator=torch.Generator().manual_seed(15))
    torch.testing.assert_close(x.to("neuron").cumsum(1).cpu(), x.cumsum(1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_max_and_min_are_exact(dtype):
    a = _values(dtype, (6, 70), 16)
    d = a.to("neuron")
    assert torch.equal(d.max().cpu(), a.max()) and torch.equal(d.min().cpu(), a.min())
    assert torch.equal(d.amax(1).cpu(), a.amax(1))
    assert torch.equal(d.amin(0, keepdim=True).cpu(), a.amin(0, keepdim=True))
    # values that tie on the top limbs and differ below
    ties = torch.tensor([2**40 + 5, 2**40 + 3, -(2**40) + 1, 2**40 + 4])
    if dtype == torch.int64:
        assert torch.equal(ties.to("neuron").max().cpu(), ties.max())
        assert torch.equal(ties.to("neuron").min().cpu(), ties.min())


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_sums_are_exact_int64(dtype):
    if dtype == torch.bool:
        a = torch.rand(6, 300, generator=torch.Generator().manual_seed(17)) > 0.5
    else:
        a = _values(dtype, (6, 300), 17)
    d = a.to("neuron")
    for got, want in (
        (d.sum(), a.sum()),
        (d.sum(1), a.sum(1)),
        (d.sum(0, keepdim=True), a.sum(0, keepdim=True)),
        (d.sum(dtype=torch.int32), a.sum(dtype=torch.int32)),
    ):
        assert got.dtype == want.dtype
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_sums_of_more_elements_than_a_byte_plane_holds(dtype):
    """Beyond 65,535 elements a byte plane's FP32 sum would round: summed in chunks."""
    a = _values(dtype, (2, 300, 250), 19)  # 75,000 elements along dims 1 and 2
    d = a.to("neuron")
    for got, want in (
        (d.sum(), a.sum()),
        (d.sum((1, 2)), a.sum((1, 2))),
        (d.sum((2, 1), keepdim=True), a.sum((2, 1), keepdim=True)),
        (d.transpose(0, 2).sum((0, 1)), a.transpose(0, 2).sum((0, 1))),  # not contiguous
        (d.flatten()[: 65536 + 3].sum(0), a.flatten()[: 65536 + 3].sum(0)),
        (d.sum(dtype=torch.int32), a.sum(dtype=torch.int32)),  # wraps as the CPU's
    ):
        assert got.dtype == want.dtype
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16])
def test_floats_out_of_range_give_what_the_cpus_cast_gives(dtype, source):
    """NaN, infinities and values beyond int32 or int64: the cast's "integer indefinite"."""
    x = torch.tensor(
        [
            3e9,
            -3e9,
            1e20,
            -1e20,
            float("nan"),
            float("inf"),
            float("-inf"),
            300.7,
            -129.5,
            70000.2,
            2.0**31,
            -(2.0**31),
            2.0**63,
            -(2.0**63),
            4e18,
            65504.0,
        ]
    ).to(source)
    assert torch.equal(x.to("neuron").to(dtype).cpu(), x.to(dtype))

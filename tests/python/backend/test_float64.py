"""Conversions to and from float64 and complex128 on the device, in strict mode, bit for bit
against the CPU: the rounding to nearest even at float's precision and at a subnormal's, the
overflow to infinity, signed zeros, infinities and NaN, and views that are not contiguous."""

from __future__ import annotations

import warnings

import pytest
import torch

import neuronsim

TINY = 2.0**-149  # float32's smallest subnormal


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Bit patterns, with every NaN made one (NaN payloads are not compared)."""
    if t.is_floating_point():
        t = torch.where(t.isnan(), torch.full_like(t, float("nan")), t)
    return t.view(
        {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()]
    )


def _same_bits(cpu_src: torch.Tensor, dtype: torch.dtype, view=lambda t: t):
    expected = view(cpu_src).to(dtype)
    got = view(cpu_src.to("neuron")).to(dtype)
    assert got.device.type == "neuron" and got.dtype == dtype
    if dtype.is_complex:
        expected, got = torch.view_as_real(expected), torch.view_as_real(got.cpu())
    else:
        got = got.cpu()
    assert torch.equal(_bits(got), _bits(expected)), (got - expected).abs().max()


def _wide_range(dtype: torch.dtype, n: int = 4096, low: int = -160, high: int = 130):
    """Values from far below float's subnormals to beyond its largest, signs mixed."""
    g = torch.Generator().manual_seed(7)
    scale = torch.pow(2.0, torch.randint(low, high, (n,), generator=g).double())
    return (torch.randn(n, generator=g, dtype=torch.float64) * scale).to(dtype)


SPECIAL = [0.0, -0.0, 1.0, -1.5, 3.141592653589793, float("inf"), float("-inf"), float("nan")]


def test_float64_to_float32_rounds_to_nearest_even_as_the_cpu():
    ties = [
        1 + 2.0**-24,  # a tie: down to the even 1
        1 + 3 * 2.0**-24,  # a tie: up to the even neighbour
        1 + 2.0**-24 + 2.0**-50,  # just above a tie: up
        1 + 2.0**-24 - 2.0**-52,  # just below: down
        2.0**128 - 2.0**103,  # float's largest plus half an ulp: a tie to infinity
        2.0**128 - 2.0**103 - 2.0**76,  # just below it: float's largest
        3.4028234663852886e38,
        1e39,
        -1e300,
        2.0**-126,
        1e-40,  # subnormal results
        0.5 * TINY,  # a tie: down to zero
        0.5 * TINY * (1 + 2.0**-30),  # just above: the smallest subnormal
        1.5 * TINY,  # a tie: up to 2 * TINY
        2.5 * TINY,  # a tie: down to 2 * TINY
        (2**23 - 0.5) * TINY,  # a tie between the largest subnormal and the smallest normal
        1e-50,
        5e-324,  # float64's own subnormal
        -5e-324,
    ]
    _same_bits(torch.tensor(SPECIAL + ties, dtype=torch.float64), torch.float32)
    _same_bits(_wide_range(torch.float64), torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.bool])
def test_float64_to_the_other_engine_types_and_to_bool(dtype):
    values = torch.cat(
        [torch.tensor(SPECIAL, dtype=torch.float64), _wide_range(torch.float64, low=-30, high=20)]
    )
    _same_bits(values, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_engine_floats_to_float64_exactly_subnormals_included(dtype):
    info = torch.finfo(dtype)
    special = SPECIAL + [
        info.max,
        -info.max,
        info.tiny,
        info.smallest_normal / 8,
        -info.smallest_normal / 1024,
    ]
    _same_bits(torch.tensor(special).to(dtype), torch.float64)
    _same_bits(_wide_range(torch.float32).to(dtype), torch.float64)
    if dtype == torch.float32:
        _same_bits(torch.tensor([TINY, -TINY, 3 * TINY, (2**23 - 1) * TINY]), torch.float64)


def test_views_that_are_not_contiguous_and_float64_to_float64():
    x = _wide_range(torch.float64, n=24 * 40).reshape(24, 40)
    _same_bits(x, torch.float32, view=lambda t: t.t())
    _same_bits(x.float(), torch.float64, view=lambda t: t[::3, 1::2])
    src = x.to("neuron")
    out = torch.empty(40, 24, dtype=torch.float64, device="neuron")
    out.copy_(src.t())  # a transposing copy of doubles
    assert torch.equal(out.cpu(), x.t())


def test_complex128_to_and_from_complex64_and_reals():
    z = torch.complex(_wide_range(torch.float64, n=512), _wide_range(torch.float64, n=512).flip(0))
    _same_bits(z, torch.complex64)
    _same_bits(z.to(torch.complex64), torch.complex128)
    _same_bits(_wide_range(torch.float32, n=512), torch.complex128)  # the imaginary part zero
    _same_bits(_wide_range(torch.float64, n=512), torch.complex64)
    with warnings.catch_warnings():  # torch warns once per process that it drops a part
        warnings.simplefilter("ignore")
        _same_bits(z, torch.float32)  # the real part, as the CPU takes it


def test_a_model_cast_to_double_and_back():
    model = torch.nn.Linear(8, 4)
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("neuron").double().float()
    for k, v in model.state_dict().items():
        assert v.dtype == torch.float32 and torch.equal(v.cpu(), ref[k])


INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


def _integers(dtype: torch.dtype, n: int = 4096) -> torch.Tensor:
    """The type's ends, powers of two and their neighbours, and values of every magnitude."""
    if dtype == torch.bool:
        return torch.tensor([True, False, True])
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(11)
    powers = [2**k + d for k in range(info.bits) for d in (-1, 0, 1)]
    edges = [info.min, info.max, 0, -1, 1] + powers + [-p for p in powers]
    x = torch.tensor([v for v in edges if info.min <= v <= info.max], dtype=torch.int64)
    if dtype == torch.int64:  # beyond 2^53: ties, and values above and below them
        top = torch.randint(2**52, 2**53, (n,), generator=g) << torch.randint(
            1, 11, (n,), generator=g
        )
        x = torch.cat(
            [x, top, top + 1, top - 1, -top, torch.tensor([2**53 + 1, 2**53 + 3, 2**54 + 2])]
        )
    spread = torch.randint(0, info.bits, (n,), generator=g)
    x = torch.cat([x, (torch.rand(n, generator=g, dtype=torch.float64) * 2.0**spread).long()])
    return x.to(dtype) if dtype != torch.int64 else x


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integers_to_float64_exact_below_2_to_53_and_rounded_beyond(dtype):
    values = _integers(dtype)
    _same_bits(values, torch.float64)
    _same_bits(values, torch.complex128)
    _same_bits(values, torch.complex64)


@pytest.mark.parametrize("dtype", [t for t in INT_DTYPES if t != torch.bool], ids=str)
def test_float64_to_integers_truncates_and_overflows_as_the_cpu(dtype):
    edges = [
        0.0,
        -0.0,
        0.5,
        -0.5,
        0.999,
        -1.999,
        127.5,
        -128.7,
        255.9,
        300.7,
        -129.5,
        32767.9,
        -32768.9,
        70000.2,
        2.0**31 - 0.5,
        -(2.0**31) - 0.5,
        2.0**31,
        3e9,
        -3e9,
        2.0**53 + 2,
        2.0**62 * 1.5,
        2.0**63,
        -(2.0**63),
        1e20,
        -1e300,
        float("inf"),
        float("-inf"),
        float("nan"),
        5e-324,
    ]
    g = torch.Generator().manual_seed(5)
    spread = torch.pow(2.0, torch.randint(-4, 64, (4096,), generator=g).double())
    values = torch.cat(
        [
            torch.tensor(edges, dtype=torch.float64),
            torch.randn(4096, generator=g, dtype=torch.float64) * spread,
        ]
    )
    _same_bits(values, dtype)
    _same_bits(values.reshape(-1, 3).t(), dtype)  # a transposed view


def test_nan_payloads_stay_nan_and_come_out_quiet():
    doubles = torch.tensor(
        [0x7FF0000000000001, 0xFFF0000000001000 - 2**64, 0x7FF8000000000000], dtype=torch.int64
    )
    _same_bits(doubles.view(torch.float64), torch.float32)  # payloads below float's mantissa
    floats = torch.tensor([0x7F800001, 0x7FC00001, 0x7FA00000, -0x7FFFFF], dtype=torch.int32)
    expected = floats.view(torch.float32).double().view(torch.int64)
    got = floats.view(torch.float32).to("neuron").double().cpu().view(torch.int64)
    assert torch.equal(got, expected)  # bit for bit: the quiet bit set as the CPU sets it


def test_complex128_to_bool_reads_both_parts():
    z = torch.tensor([1j, 0, 2 + 0j, -0.0 - 0.0j, complex("nan")], dtype=torch.complex128)
    _same_bits(z, torch.bool)

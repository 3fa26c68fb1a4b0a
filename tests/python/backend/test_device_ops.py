"""Ops that real workloads call, on the device in strict mode against the CPU: pow with a
tensor exponent or a number base (rotary embeddings' inverse frequencies), erfinv
(trunc_normal_ initialisation), flip, index_add, scatter_add, mse_loss, unfold, remainder and
equal, with their gradients where training takes them."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import neuronsim


@pytest.fixture(autouse=True)
def strict():
    with neuronsim.strict_mode():
        yield


def _same(fn, *cpu_args, atol=1e-5, rtol=1e-4):
    expected = fn(*cpu_args)
    got = fn(*(a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol, equal_nan=True)


def test_pow_of_two_tensors_and_of_a_number_base():
    base = torch.tensor([2.0, -2.0, -2.0, 0.0, 0.0, 3.0, float("nan"), 1.5])
    exponent = torch.tensor([0.5, 3.0, 0.5, 0.0, -1.0, -2.0, 0.0, float("inf")])
    _same(torch.pow, base, exponent)  # NaN for a negative base's fraction, 0 ** 0 = 1
    _same(
        lambda b, e: b.pow(e),
        torch.rand(4, 6, dtype=torch.bfloat16) + 0.5,
        torch.randn(6, dtype=torch.bfloat16),
        atol=1e-2,
        rtol=1e-2,
    )
    # Rotary embeddings: 1 / base ** (arange(0, dim, 2) / dim), from int64 positions.
    _same(lambda ar: 1.0 / (500_000.0 ** (ar.float() / 128)), torch.arange(0, 128, 2))


def test_erfinv_and_truncated_normal_initialisation():
    x = torch.tensor([-1.0, -0.9999, -0.5, -0.0, 0.0, 1e-6, 0.7, 0.999, 1.0, 1.2, float("nan")])
    _same(torch.erfinv, x, atol=1e-5, rtol=2e-5)
    _same(torch.erfinv, torch.linspace(-0.999, 0.999, 2001), atol=1e-5, rtol=2e-5)
    w = torch.empty(256, 256, device="neuron")
    torch.nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    w = w.cpu()
    assert w.abs().max().item() <= 0.04 and 0.015 < w.std().item() < 0.02


def test_flip_along_any_dims():
    x = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(2, 3, 5)
    for dims in ([0], [1], [-1], [0, 2], [0, 1, 2]):
        _same(lambda t, dims=dims: torch.flip(t, dims), x, atol=0, rtol=0)
    _same(lambda t: torch.flip(t, [1]), torch.arange(12).reshape(3, 4), atol=0, rtol=0)
    _same(lambda t: torch.flip(t.t(), [0]), x[0], atol=0, rtol=0)  # a transposed view


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_index_add_sums_repeated_indices(dtype):
    index = torch.tensor([0, 2, 2, 4, 0])
    source = torch.randn(5, 3, 2).to(dtype)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    _same(
        lambda s, i, src: s.index_add(0, i, src, alpha=2),
        torch.ones(6, 3, 2, dtype=dtype),
        index,
        source,
        **tol,
    )
    _same(
        lambda s, i, src: s.index_add(1, i, src.transpose(0, 1)),
        torch.zeros(3, 6, 2, dtype=dtype),
        index,
        source,
        **tol,
    )
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        torch.zeros(3, 2, device="neuron").index_add_(
            0, torch.tensor([0, 3], device="neuron"), torch.ones(2, 2, device="neuron")
        )


def test_scatter_add_along_each_dim():
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    index = torch.tensor([[0, 1, 2, 0], [2, 0, 0, 1], [1, 1, 1, 1]])
    _same(lambda s, i, v: s.scatter_add(0, i, v), torch.zeros(3, 5), index, src)
    _same(lambda s, i, v: s.scatter_add(1, i[:2, :3], v), torch.ones(2, 3), index, src)
    # Counting tokens per expert, as a router's load-balancing statistics do.
    ids = torch.randint(0, 8, (64,))
    _same(lambda s, i, v: s.clone().scatter_add_(0, i, v), torch.zeros(8), ids, torch.ones(64))


def test_mse_loss_and_its_gradient():
    a, b = torch.randn(4, 7), torch.randn(4, 7)
    for reduction in ("mean", "sum", "none"):
        _same(lambda x, y, r=reduction: F.mse_loss(x, y, reduction=r), a, b)

    def grad(x, y):
        x = x.clone().requires_grad_()
        F.mse_loss(x, y).backward()
        return x.grad

    _same(grad, a, b)


def test_unfold_and_its_gradient():
    x = torch.arange(20, dtype=torch.float32).reshape(2, 10)
    _same(lambda t: t.unfold(1, 3, 2).contiguous(), x, atol=0, rtol=0)

    def grad(t):
        t = t.clone().requires_grad_()
        (t.unfold(1, 4, 3) * torch.arange(4.0, device=t.device)).sum().backward()
        return t.grad

    _same(grad, x)


def test_argmax_and_argmin_pick_the_first_nan_as_torch_does():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan], [float("-inf")] * 4, [nan] * 4])
    for fn in (
        lambda t: t.argmax(1),
        lambda t: t.argmin(1),
        lambda t: t.argmax(),
        lambda t: t.max(1).indices,
        lambda t: t.min(0).indices,
    ):
        _same(fn, x, atol=0, rtol=0)
    long_row = torch.randn(2, 20_000)  # several chunks: the chunks' best values hold the NaN
    long_row[1, 12_345] = nan
    _same(lambda t: t.argmax(1), long_row, atol=0, rtol=0)


def test_flip_of_empty_and_int64_tensors():
    _same(lambda t: torch.flip(t, [0, 2]), torch.zeros(5, 0, 3, dtype=torch.int64), atol=0, rtol=0)
    _same(lambda t: torch.flip(t, [-1]), torch.arange(10).reshape(2, 5), atol=0, rtol=0)
    _same(torch.erfinv, torch.tensor([0, 1, -1]), atol=0, rtol=0)  # integers promote to float


def test_index_select_of_a_scalar_and_with_strided_int64_indices():
    _same(lambda t, i: t.index_select(0, i), torch.tensor(3.5), torch.tensor([0]), atol=0, rtol=0)
    index = torch.tensor([2, 9, 0, 9, 1])[::2]  # a strided view
    _same(lambda t, i: t.index_select(0, i), torch.arange(12).reshape(3, 4), index, atol=0, rtol=0)
    _same(lambda t, i: t.index_select(1, i), torch.randn(2, 3), index, atol=0, rtol=0)


def test_integer_operands_of_float_results_and_scalars_of_scalars():
    # True division of integers, int64 against a float, 0-dim tensors against numbers.
    _same(lambda a, b: a / b, torch.tensor(7), torch.tensor(2))
    _same(lambda a: a / 4, torch.arange(6))
    _same(lambda a: a * 0.5 + 1, torch.arange(6))
    _same(lambda a: (a != 0.0) & torch.isfinite(a), torch.tensor(1.5))
    _same(lambda a: a.sum() + a.mean(), torch.tensor(2.5))
    _same(lambda a: a.sum(), torch.tensor(3))


def test_integer_clamp_and_masked_fill_of_a_mask():
    x = torch.tensor([[-100, 5, 3_000_000_000, -7]])
    _same(lambda t: t.clamp(min=0), x, atol=0, rtol=0)
    _same(lambda t: t[:, 1:].clamp(-5, 10), x, atol=0, rtol=0)
    a, m = torch.rand(4, 7) > 0.5, torch.rand(4, 7) > 0.5
    for value in (False, True):
        _same(lambda t, v=value: t.masked_fill(m.to(t.device), v), a, atol=0, rtol=0)


def test_addmm_with_beta_zero_and_into_an_out():
    bias, a, b = torch.full((3, 4), float("nan")), torch.randn(3, 5), torch.randn(5, 4)
    _same(lambda c, x, y: torch.addmm(c, x, y, beta=0, alpha=2), bias, a, b)
    _same(
        lambda c, x, y: torch.addmm(c, x, y, out=torch.empty(3, 4, device=x.device)),
        torch.randn(3, 4),
        a,
        b,
    )


def test_advanced_indexing_with_two_index_tensors():
    m = torch.rand(4, 16) > 0.5
    rows, cols = torch.arange(4).view(4, 1, 1), torch.arange(16).view(1, 1, 16)
    _same(lambda t, i, j: t[i, j], m, rows, cols, atol=0, rtol=0)
    _same(
        lambda t, i, j: t[i, j], torch.randn(4, 16, 2), torch.tensor([0, -1]), torch.tensor([3, 15])
    )


def test_log1p_and_expm1_keep_their_precision_near_zero():
    x = torch.tensor([-0.9, -0.6, -0.3, -1e-3, -1e-8, 0.0, 1e-9, 1e-4, 0.2, 0.49, 0.7, 3.0, 20.0])
    _same(torch.log1p, x, atol=0, rtol=2e-6)
    _same(torch.expm1, x, atol=0, rtol=2e-6)
    _same(torch.log1p, torch.tensor([-1.0, float("inf"), float("nan")]), atol=0, rtol=0)


def test_baddbmm_clamp_with_tensor_bounds_eye_and_isin():
    _same(
        lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2),
        torch.randn(2, 3, 4),
        torch.randn(2, 3, 5),
        torch.randn(2, 5, 4),
    )
    _same(
        lambda t, lo, hi: t.clamp(lo, hi),
        torch.randn(4, 5),
        torch.full((5,), -0.5),
        torch.tensor(0.5),
    )
    _same(lambda t: torch.eye(3, 5, device=t.device), torch.zeros(1), atol=0, rtol=0)
    _same(
        lambda t: torch.eye(4, dtype=torch.int64, device=t.device), torch.zeros(1), atol=0, rtol=0
    )
    ids = torch.tensor([[1, 5, 7], [2, 50_000, 9]])
    _same(lambda a, b: torch.isin(a, b), ids, torch.tensor([7, 2, 50_000]), atol=0, rtol=0)
    _same(lambda a, b: torch.isin(a, b, invert=True), ids, torch.tensor([7]), atol=0, rtol=0)


def test_boolean_mask_put_of_one_value():
    # An encoder-decoder's shift_tokens_right: labels[labels == -100] = pad_token_id.
    labels = torch.tensor([[5, -100, 7], [-100, -100, 9]])
    _same(
        lambda t: t.masked_fill(t == -100, 0).clone().index_put_((t == -100,), torch.tensor(1)),
        labels,
        atol=0,
        rtol=0,
    )
    _same(
        lambda t, m: t.clone().index_put_((m,), torch.tensor(0.5)),
        torch.randn(3, 4),
        torch.tensor([True, False, True]),
    )


@pytest.mark.parametrize(
    "conv",
    [
        lambda x, w, b: F.conv1d(x, w, None, padding=3, groups=8),  # Mamba's causal conv1d
        lambda x, w, b: F.conv1d(x, w[:, :1].repeat(1, 2, 1), b, stride=2, dilation=2, groups=4),
        lambda x, w, b: F.conv2d(
            x.unflatten(-1, (2, 5)), w.unsqueeze(-1), b, padding=(1, 0), groups=8
        ),
        lambda x, w, b: F.conv2d(
            x.unflatten(-1, (2, 5)), w.reshape(4, 8, 1, 1), None, stride=(1, 2)
        ),
    ],
)
def test_convolutions_run_on_the_device(conv):
    x, w, b = torch.randn(2, 8, 10), torch.randn(8, 1, 4), torch.randn(8)
    _same(conv, x, w, b, atol=1e-4, rtol=1e-4)


def _conv_and_grads(f, x, w, b, **kwargs):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = f(x, w, b, **kwargs)
    y.backward(torch.linspace(-1, 1, y.numel(), device=y.device).reshape(y.shape))
    return y, x.grad, w.grad, b.grad


@pytest.mark.parametrize(
    "f, x, w, b, kwargs",
    [
        (
            F.conv1d,
            (2, 8, 10),
            (4, 2, 3),
            4,
            {"stride": 2, "padding": 2, "dilation": 2, "groups": 4},
        ),
        (F.conv2d, (2, 3, 8, 7), (4, 3, 3, 3), 4, {"stride": 2, "padding": 1}),
        # Three spatial dims: the windows keep 7 dims, more than one DMA walks (in slices).
        (F.conv3d, (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), 3, {"padding": 1}),
        (
            F.conv_transpose1d,
            (2, 4, 7),
            (4, 3, 3),
            3,
            {"stride": 2, "padding": 1, "output_padding": 1},
        ),
        (
            F.conv_transpose2d,
            (2, 4, 5, 6),
            (4, 2, 3, 3),
            4,
            {"stride": 2, "padding": 1, "groups": 2, "dilation": (1, 2)},
        ),
        (F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 3, 2, 2, 2), 3, {"stride": (2, 1, 2)}),
        # output_padding past the stride (below the dilation): room for more windows
        # than the input has positions.
        (
            F.conv_transpose2d,
            (2, 2, 4, 4),
            (2, 2, 4, 5),
            4,
            {
                "stride": (3, 2),
                "padding": (1, 2),
                "output_padding": (2, 3),
                "groups": 2,
                "dilation": (4, 4),
            },
        ),
    ],
    ids=[
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "conv_transpose2d_output_padding",
    ],
)
def test_convolution_gradients_and_transposed_convolutions_run_on_the_device(f, x, w, b, kwargs):
    torch.manual_seed(0)
    x, w, b = torch.randn(x), torch.randn(w), torch.randn(b)
    expected = _conv_and_grads(f, x, w, b, **kwargs)
    got = _conv_and_grads(f, x.to("neuron"), w.to("neuron"), b.to("neuron"), **kwargs)
    for name, g, e in zip(["output", "input grad", "weight grad", "bias grad"], got, expected):
        assert g.device.type == "neuron", name
        torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-4, msg=name)


def test_pointwise_ops_on_views_of_many_dims_run_in_slices():
    x = torch.randn(2, 3, 5, 6, 4)
    windows = lambda t: t.unfold(2, 2, 1).unfold(3, 3, 2).unfold(4, 2, 1)  # noqa: E731
    _same(lambda t: windows(t) * 2.0, x, atol=0, rtol=0)
    _same(lambda t: windows(t).contiguous(), x, atol=0, rtol=0)


def test_puts_and_gathers_that_generation_and_seq2seq_models_make():
    # A logits processor's scores[:, banned] = -inf; an index along a middle dim.
    def banned(s, i):
        s = s.clone()
        s[:, i] = float("-inf")
        return s

    def middle(s, i):
        s = s.clone()
        s[:, :, i] = 0.0
        return s

    _same(banned, torch.randn(2, 9), torch.tensor([3, -1, 3]))
    _same(middle, torch.randn(2, 3, 5), torch.tensor([0, 4]))
    x = torch.randn(1, 4, 9, 17)
    _same(lambda t, i: t.transpose(1, 2).index_select(3, i), x, torch.arange(9))  # strided
    _same(lambda t, i: t.t().gather(1, i), torch.randn(32, 16), torch.randint(0, 32, (16, 9)))
    _same(lambda t: torch.all(t > 0), torch.tensor(1.5), atol=0, rtol=0)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_triangular_solves_as_gated_deltanet_makes_them(upper, left, unitriangular):
    torch.manual_seed(0)
    a = torch.randn(2, 3, 64, 64) * 0.1 + torch.eye(64) * 2
    b = torch.randn(2, 3, 64, 8) if left else torch.randn(2, 3, 8, 64)
    _same(
        lambda x, y: torch.linalg.solve_triangular(
            x, y, upper=upper, left=left, unitriangular=unitriangular
        ),
        a,
        b,
        atol=1e-5,
        rtol=1e-4,
    )


def test_boolean_masks_select_and_scatter_on_the_device():
    torch.manual_seed(0)
    x, m = torch.randn(4, 6), torch.rand(4, 6) > 0.5
    for t in (
        torch.tensor([0.0, 1.0, 0.0, 2.0]),
        m,
        torch.zeros(2, 3),
        torch.randint(-2, 3, (7, 9)),
    ):
        _same(torch.nonzero, t, atol=0, rtol=0)
    _same(lambda t, k: t[k], x, m, atol=0, rtol=0)  # nonzero, then the positions
    _same(lambda t, k: t[:, k], x, m[0], atol=0, rtol=0)
    _same(lambda t, k: t.masked_scatter(k, torch.arange(30.0, device=t.device)), x, m)
    with pytest.raises(RuntimeError, match="at least 24 elements"):
        x.to("neuron").masked_scatter(
            torch.ones(4, 6, dtype=torch.bool, device="neuron"), torch.ones(3, device="neuron")
        )


def test_histc_with_bounds_from_the_data():
    _same(lambda t: torch.histc(t, bins=7), torch.randn(50), atol=0, rtol=0)
    _same(lambda t: torch.histc(t.float(), bins=4), torch.tensor([3, 3, 3]), atol=0, rtol=0)
    _same(
        lambda t: torch.histc(t, bins=8, min=0, max=0),
        torch.randint(0, 8, (40,)).float(),
        atol=0,
        rtol=0,
    )


def test_rows_of_a_strided_table_by_an_index():
    _same(lambda t, i: t.t()[i], torch.randn(64, 8), torch.tensor([3, 0, 7, 3]), atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_division_with_a_rounding_mode(mode):
    torch.manual_seed(0)
    a, b = torch.randint(-1000, 1000, (64,)), torch.randint(-30, 30, (64,))
    b[b == 0] = 7
    div = lambda u, v: torch.div(u, v, rounding_mode=mode)  # noqa: E731
    _same(div, a, b, atol=0, rtol=0)  # a tensor divisor (JetMoE's routing)
    _same(div, a.int(), b.int(), atol=0, rtol=0)
    _same(lambda u: torch.div(u, -7, rounding_mode=mode), a, atol=0, rtol=0)
    x, y = torch.randn(1000) * 10, torch.randn(1000)
    y[:5] = torch.tensor([0.0, -0.0, 0.1, 1e-30, -3.0])
    x[:8] = torch.tensor([1.0, -1.0, 1.0, 5.0, -0.0, float("inf"), float("nan"), -float("inf")])
    _same(div, x, y, atol=0, rtol=0)  # torch's floor of floats: 1 // 0.1 is 9
    _same(lambda u: torch.div(u, 0.3, rounding_mode=mode), x, atol=0, rtol=0)
    _same(div, a, y[:64], atol=0, rtol=0)


def test_floor_division_operators():
    a, b = torch.randint(-1000, 1000, (64,)), torch.randint(1, 30, (64,))
    _same(lambda u, v: u // v, a, b, atol=0, rtol=0)
    _same(lambda u, v: u // v, torch.randn(100), torch.randn(100), atol=0, rtol=0)

    def in_place(u, v):
        u = u.clone()
        u //= v
        return u

    _same(in_place, a, b, atol=0, rtol=0)
    _same(in_place, torch.randn(100), torch.randn(100), atol=0, rtol=0)


def test_integer_division_by_zero_raises_the_cpus_error():
    a = torch.arange(4, device="neuron")
    with pytest.raises(RuntimeError, match="a divisor is zero"):
        torch.div(a, torch.zeros_like(a), rounding_mode="floor")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_bitwise_shifts_by_tensors_and_numbers(dtype):
    torch.manual_seed(0)
    info = torch.iinfo(dtype)
    a = torch.randint(info.min, info.max, (128,), dtype=dtype)
    a[:4] = torch.tensor([0, 1, info.min, info.max], dtype=dtype)
    # Counts past the width, and negative ones: 0 for <<, the sign's fill for >>.
    s = torch.randint(-2 if info.min < 0 else 0, info.bits + 3, (128,), dtype=dtype)
    for f in (torch.bitwise_left_shift, torch.bitwise_right_shift):
        _same(f, a, s, atol=0, rtol=0)
    for k in (-1, 0, 5, info.bits // 2 + 1, info.bits - 1, info.bits):
        _same(lambda x, k=k: x << k, a, atol=0, rtol=0)
        _same(lambda x, k=k: x >> k, a, atol=0, rtol=0)

    def in_place(x):
        x = x.clone()
        x <<= 3
        x >>= 2
        return x

    _same(in_place, a, atol=0, rtol=0)


def test_index_copy_and_scatter_of_a_number_into_int64():
    i = torch.tensor([0, 2, 5])
    _same(lambda t, i, s: t.clone().index_copy_(0, i, s), torch.zeros(6, 8), i, torch.randn(3, 8))
    _same(lambda t, i, s: t.index_copy(1, i, s), torch.zeros(4, 6), i, torch.randn(4, 3))
    _same(lambda t, i, s: t.index_copy(0, i, s.t()), torch.zeros(6, 4), i, torch.randn(4, 3))
    big = torch.randint(-(2**40), 2**40, (2, 4, 3))
    _same(lambda t, i, s: t.index_copy(-1, i, s), torch.zeros(2, 4, 6, dtype=torch.int64), i, big)
    # int64 moves as int32 word pairs, here of a size-1 view with a stray stride.
    _same(
        lambda t, i, s: t.index_copy(0, i, s[::2]),
        torch.zeros(1, dtype=torch.int64),
        torch.tensor([0]),
        torch.tensor([7, 8]),
    )
    # A one-hot made by scatter (LongCat-Flash's router).
    rows = torch.tensor([[1], [2], [3], [0]])
    _same(lambda t, i: t.scatter(1, i, 1), torch.zeros(4, 8, dtype=torch.int64), rows)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.zeros(6, 4, device="neuron").index_copy(
            0, torch.tensor([9], device="neuron"), torch.ones(1, 4, device="neuron")
        )


@pytest.mark.parametrize("f", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_over_any_dim_and_layout(f):
    x = torch.randn(2, 3, 8, 5)
    for dim in range(4):  # DeepSeek-V4's compressor gates over dim 2
        _same(lambda t, dim=dim: f(t, dim), x, atol=1e-6, rtol=1e-5)
    _same(lambda t: f(t.transpose(1, 3), -1), x, atol=1e-6, rtol=1e-5)
    _same(lambda t: f(t, 2, dtype=torch.float32), x.bfloat16(), atol=1e-6, rtol=1e-5)


def test_products_with_no_rows_or_no_terms():
    # JetMoE's experts take F.linear of the rows routed to them: none, for some.
    _same(lambda a, w: F.linear(a, w), torch.randn(0, 64), torch.randn(32, 64))
    _same(torch.mm, torch.randn(3, 0), torch.randn(0, 4), atol=0, rtol=0)  # zeros
    _same(torch.bmm, torch.randn(2, 3, 0), torch.randn(2, 0, 4), atol=0, rtol=0)
    _same(torch.addmm, torch.ones(3, 4), torch.randn(3, 0), torch.randn(0, 4), atol=0, rtol=0)


def test_complex_rotary_embeddings_and_complex_arithmetic():
    # Llama 4's and DeepSeek-V2's rotary embeddings: polar, then a complex product.
    def rope(x, f):
        fc = torch.polar(torch.ones_like(f), f) * 0.7
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * fc[:, :, None, :]).flatten(3)

    _same(rope, torch.randn(1, 8, 2, 8), torch.randn(1, 8, 4) * 10)
    c = torch.view_as_complex
    a, b = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    _same(lambda u, v: c(u) + c(v), a, b)
    _same(lambda u, v: torch.sub(c(u), c(v), alpha=2), a, b)
    _same(lambda u, v: c(u) * v, a, torch.randn(3))  # a float tensor
    _same(lambda u: c(u) * (1 + 2j), a)

    def in_place(u, v):
        u = c(u.clone())
        u *= c(v)
        return u

    _same(in_place, a, b)
    _same(lambda u: u.to(torch.complex64), torch.randn(5))
    _same(lambda u: c(u).t().contiguous(), a)


@pytest.mark.filterwarnings(r"ignore:index_reduce\(\) is in beta")
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False], ids=["with_self", "without_self"])
def test_scatter_reduce_and_index_reduce(reduce, include_self):
    torch.manual_seed(0)
    src = torch.randn(4, 6)
    src[0, 0] = float("nan")  # reaches its own position only
    _same(
        lambda s, i, v: s.scatter_reduce(0, i, v, reduce, include_self=include_self),
        torch.randn(5, 6),
        torch.randint(0, 5, (4, 6)),
        src,
    )
    if reduce != "sum":  # index_reduce takes prod, mean, amax and amin
        _same(
            lambda s, i, v: s.index_reduce(1, i, v, reduce, include_self=include_self),
            torch.randn(5, 6),
            torch.tensor([0, 2, 2, 5]),
            torch.randn(5, 4),
        )


def test_scatter_add_of_a_nan_reaches_its_own_position_only():
    src = torch.ones(2, 3)
    src[0, 1] = float("nan")
    index = torch.tensor([[0, 1, 2], [2, 1, 0]])
    _same(lambda s, i, v: s.scatter_add(1, i, v), torch.zeros(2, 4), index, src)


def test_cat_into_a_given_tensor_stays_on_the_device():
    # FSDP2 packs its reduce-scatter with torch.cat(..., out=): bf16 blocks of gradients.
    g = torch.Generator().manual_seed(13)
    a, b = torch.randn(2, 3, generator=g), torch.randn(2, 5, generator=g)
    out = torch.empty(2, 8, device="neuron", dtype=torch.bfloat16)
    with neuronsim.strict_mode():
        torch.cat([a.to("neuron").bfloat16(), b.to("neuron").bfloat16()], dim=1, out=out)
    assert torch.equal(out.cpu(), torch.cat([a, b], dim=1).bfloat16())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_remainder_takes_the_divisors_sign_exactly_as_the_cpu(dtype):
    torch.manual_seed(0)
    a = (torch.randn(64, 33) * 1e3).to(dtype)
    b = (torch.randn(64, 33) * 7).to(dtype)
    b[0, 0] = 0  # NaN, as on the CPU
    a[1, :4] = torch.tensor([1e8, -1e8, 5.0, -5.0]).to(dtype)  # large quotients stay exact
    got = [
        torch.remainder(a.to("neuron"), b.to("neuron")),
        a.to("neuron") % 3,
        a.to("neuron").t() % -2.5,
    ]
    inplace = a.to("neuron")
    inplace.remainder_(b.to("neuron"))
    want = [torch.remainder(a, b), a % 3, a.t() % -2.5]
    for g, w in zip(got + [inplace], want + [want[0]]):
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def test_equal_compares_sizes_and_every_element_on_the_device():
    a = torch.arange(12.0).reshape(3, 4)
    d = a.to("neuron")
    assert torch.equal(d, a.clone().to("neuron"))
    assert torch.equal(d.t().contiguous().t(), d)  # layout does not matter
    assert torch.equal(d.int(), d)  # promoted, as on the CPU
    assert not torch.equal(d, d.reshape(4, 3))
    changed = d.clone()
    changed[2, 3] = -1
    assert not torch.equal(d, changed)
    nan = torch.full((2,), float("nan"), device="neuron")
    assert not torch.equal(nan, nan)  # NaN equals nothing
    assert torch.equal(d[:0], d[:0])
    with pytest.raises(RuntimeError, match="aten::equal: expected all tensors on one device"):
        torch.equal(d, a)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_remainder_takes_the_divisors_sign_on_the_device(dtype):
    torch.manual_seed(0)
    a = torch.randint(-5000, 5000, (16, 9), dtype=dtype)
    b = torch.randint(-40, 40, (16, 9), dtype=dtype)
    b[b == 0] = 7
    a[0, :4] = torch.tensor([-7, 7, -(2**22), 2**22], dtype=dtype)
    d = a.to("neuron")
    got = [
        torch.remainder(d, b.to("neuron")),
        d % 5,
        d.t() % -3,
        torch.remainder(d, b.to("neuron").t().contiguous().t()),
    ]
    want = [torch.remainder(a, b), a % 5, a.t() % -3, torch.remainder(a, b)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g.cpu(), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_masked_select_and_nonzero_static_on_the_device(dtype):
    torch.manual_seed(0)
    x = (torch.randn(6, 5) * 9).to(dtype)
    x[2] = 0
    d = x.to("neuron")
    mask = x > 0
    row_mask = torch.tensor([True, False, False, True, True])  # broadcast over the rows
    for m in (mask, row_mask):
        assert torch.equal(torch.masked_select(d, m.to("neuron")).cpu(), torch.masked_select(x, m))
    assert torch.equal(d.t()[mask.t().to("neuron")].cpu(), x.t()[mask.t()])  # transposed
    out = torch.empty(0, dtype=dtype, device="neuron")
    torch.masked_select(d, mask.to("neuron"), out=out)
    assert torch.equal(out.cpu(), torch.masked_select(x, mask))
    # nonzero_static: the first `size` positions, fill_value rows after them.
    for size in (0, 4, 30, 40):
        got = torch.nonzero_static(d, size=size, fill_value=-1)
        assert torch.equal(got.cpu(), torch.nonzero_static(x, size=size, fill_value=-1)), size
    empty = torch.zeros(0, 3, dtype=dtype, device="neuron")
    assert torch.equal(
        torch.nonzero_static(empty, size=2, fill_value=9).cpu(), torch.full((2, 2), 9)
    )


def test_masked_select_gradient_reaches_the_selected_elements():
    x = torch.randn(4, 6, requires_grad=True)
    d = x.detach().to("neuron").requires_grad_()
    mask = x.detach() > 0
    (torch.masked_select(x, mask) * 3).sum().backward()
    (torch.masked_select(d, mask.to("neuron")) * 3).sum().backward()
    assert torch.equal(d.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_group_norm_rounds_once_as_the_cpu_does(dtype):
    # Statistics and the affine in FP32, rounded once at the end: no farther from the exact
    # (float64) result than the CPU's kernel, which keeps its intermediates in FP32 too.
    torch.manual_seed(0)
    x = (torch.randn(3, 6, 5) * 4 + 3).to(dtype)
    w, b = torch.randn(6).to(dtype), torch.randn(6).to(dtype)
    exact = torch.nn.functional.group_norm(x.double(), 3, w.double(), b.double())
    cpu = torch.nn.functional.group_norm(x, 3, w, b)
    dev = torch.nn.functional.group_norm(x.to("neuron"), 3, w.to("neuron"), b.to("neuron"))
    ulp = torch.finfo(dtype).eps * exact.abs().max().item()
    assert (dev.cpu().double() - exact).abs().max() <= (cpu.double() - exact).abs().max() + ulp
    out, mean, rstd = torch.native_group_norm(x.to("neuron"), None, None, 3, 6, 5, 2, 1e-5)
    _, cpu_mean, cpu_rstd = torch.native_group_norm(x, None, None, 3, 6, 5, 2, 1e-5)
    assert mean.dtype == rstd.dtype == dtype and mean.shape == (3, 2)
    torch.testing.assert_close(mean.cpu(), cpu_mean)
    torch.testing.assert_close(rstd.cpu(), cpu_rstd)
    empty = torch.native_group_norm(x[:0].to("neuron"), None, None, 0, 6, 5, 3, 1e-5)
    assert [t.shape for t in empty] == [(0, 6, 5), (0, 3), (0, 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_mean_on_the_device(dtype):
    x = (torch.randn(4, 9, 7) * 3).to(dtype)
    for kwargs in ({"dim": 2}, {"dim": (0, 2), "keepdim": True}, {"correction": 0}):
        got = torch.var_mean(x.to("neuron"), **kwargs)
        want = torch.var_mean(x, **kwargs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g.cpu(), w, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float32])
def test_all_and_any_of_integers_and_of_nothing(dtype):
    x = torch.tensor([[0, 65536, 3], [1, 2, 3]]).to(dtype)  # 65536: a zero low limb, not zero
    d = x.to("neuron")
    for f in (torch.all, torch.any):
        assert torch.equal(f(d).cpu(), f(x))
        for dim in (0, 1, (0, 1)):
            assert torch.equal(f(d, dim=dim).cpu(), f(x, dim=dim))
        assert torch.equal(f(d, dim=1, keepdim=True).cpu(), f(x, dim=1, keepdim=True))
        empty = torch.zeros(0, 3, dtype=dtype)
        for kwargs in ({}, {"dim": 0}, {"dim": 1, "keepdim": True}):
            got, want = f(empty.to("neuron"), **kwargs), f(empty, **kwargs)
            assert got.shape == want.shape and torch.equal(got.cpu(), want), (f, kwargs)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_argmax_and_argmin_of_integers_ties_and_views(dtype):
    big = 2**40 if dtype == torch.int64 else 2**30  # beyond FP32's integers
    x = torch.tensor([[3, big + 1, big + 1, -7], [big, big + 1, 5, -(big + 2)]])
    x = x.to(dtype) if dtype != torch.float32 else torch.randn(2, 4)
    d = x.to("neuron")
    for f in (torch.argmax, torch.argmin):
        assert torch.equal(f(d).cpu(), f(x))  # the first of equal values, as on the CPU
        for dim in (0, 1, -1):
            assert torch.equal(f(d, dim=dim).cpu(), f(x, dim=dim))
        assert torch.equal(f(d.t()).cpu(), f(x.t()))  # flattened from a view
        assert torch.equal(f(d[0, 1]).cpu(), f(x[0, 1]))  # a 0-dim tensor's is 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_integers_are_never_nan(dtype):
    x = torch.tensor([[0, 1], [2, 3]]).to(dtype)
    got = torch.isnan(x.to("neuron"))
    assert got.dtype == torch.bool and not got.cpu().any() and got.shape == x.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_the_max_and_min_of_one_element_are_itself(dtype):
    x = torch.tensor(5).to(dtype)
    for f in (torch.max, torch.min, torch.amax, torch.amin):
        got = f(x.to("neuron"))
        assert got.dtype == dtype and got.dim() == 0 and torch.equal(got.cpu(), f(x))
    # What an index_put with a 0-dim index checks its bounds with.
    t = torch.zeros(4, device="neuron")
    t[torch.tensor(2, device="neuron")] = 7.0
    assert t.cpu().tolist() == [0.0, 0.0, 7.0, 0.0]


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.complex128, torch.complex64, torch.complex32, torch.int64]
)
def test_fills_of_types_the_engines_do_not_hold_are_the_cpus_bits(dtype):
    # A double is written as its int64 bit pattern, a complex value part by part.
    value = {torch.float64: 1 / 3, torch.int64: -(2**62) - 5}.get(dtype, complex(1 / 3, -2.5e-30))
    for make in (
        lambda dev: torch.full((3, 4), value, dtype=dtype, device=dev),
        lambda dev: torch.zeros(5, 6, dtype=dtype, device=dev).t().fill_(value),  # strided
        lambda dev: torch.ones(2, dtype=dtype, device=dev),
    ):
        got, want = make("neuron"), make("cpu")
        assert got.device.type == "neuron"
        if dtype.is_complex:
            got, want = torch.view_as_real(got.cpu()), torch.view_as_real(want)
        assert torch.equal(
            got.cpu().contiguous().view(torch.uint8), want.contiguous().view(torch.uint8)
        )


def test_fill_with_a_zero_dim_tensor_from_the_host_or_the_device():
    for value in (torch.tensor(2.5), torch.tensor(7, device="neuron"), torch.tensor(-3.0)):
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            got = torch.zeros(3, 4, dtype=dtype, device="neuron").fill_(value)
            want = torch.zeros(3, 4, dtype=dtype).fill_(value.cpu())
            assert torch.equal(got.cpu(), want), (value, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_hardtanh_relu6_and_their_gradient(dtype):
    x = torch.tensor([[-3.0, -1.0, 0.0, 0.5], [1.0, 6.0, 7.5, float("nan")]])
    if dtype != torch.float32:
        x = torch.tensor([[-3, -1, 0, 2**40 + 1], [1, 6, 7, -(2**40)]]).to(dtype)
    for f in (F.relu6, lambda t: F.hardtanh(t, -1, 1)):
        assert torch.equal(f(x.to("neuron")).cpu().nan_to_num(9), f(x).nan_to_num(9))
    if dtype == torch.float32:  # the gradient is the CPU's, 0 at and past the bounds
        grad = torch.tensor([[1.0, float("inf"), 2.0, 3.0], [float("nan"), 4.0, 5.0, 6.0]])
        got = torch.ops.aten.hardtanh_backward(grad.to("neuron"), x.to("neuron"), 0.0, 6.0)
        want = torch.ops.aten.hardtanh_backward(grad, x, 0.0, 6.0)
        assert torch.equal(got.cpu().nan_to_num(9), want.nan_to_num(9))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_amax_amin_and_aminmax_over_several_dims_and_of_nothing(dtype):
    big = 2**40 if dtype == torch.int64 else 2**29
    x = (torch.randn(3, 4, 5) * big).to(dtype)
    d = x.to("neuron")
    for f in (torch.amax, torch.amin):
        for dim in ((0, 2), (1, 2), (-1, 0, 1)):
            assert torch.equal(f(d, dim=dim).cpu(), f(x, dim=dim)), (f, dim)
        assert torch.equal(
            f(d.transpose(0, 2), dim=(0, 1), keepdim=True).cpu(),
            f(x.transpose(0, 2), dim=(0, 1), keepdim=True),
        )
        empty = torch.zeros(0, 3, dtype=dtype)
        got = f(empty.to("neuron"), dim=1)
        assert got.shape == f(empty, dim=1).shape == (0,) and got.device.type == "neuron"
    for kwargs in ({}, {"dim": 1}, {"dim": -1, "keepdim": True}):
        for g, w in zip(torch.aminmax(d, **kwargs), torch.aminmax(x, **kwargs)):
            assert torch.equal(g.cpu(), w), kwargs
    lo, hi = torch.aminmax(torch.zeros(5, 0, 2, dtype=dtype, device="neuron"), dim=0)
    assert lo.shape == hi.shape == (0, 2)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_max_and_min_over_a_dim_of_integers_of_one_element_and_of_nothing(dtype):
    big = 2**40 if dtype == torch.int64 else 2**29  # beyond FP32's integers
    x = torch.tensor([[3, big + 1, big + 1, -7], [big, big + 1, 5, -(big + 2)]])
    x = x.to(dtype) if dtype != torch.float32 else torch.randn(2, 4)
    for f in (torch.max, torch.min):
        for dim, keepdim in ((0, False), (1, False), (-1, True)):
            got, want = f(x.to("neuron"), dim, keepdim), f(x, dim, keepdim)
            assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want)), (f, dim)
        one = torch.tensor(7).to(dtype)
        assert all(torch.equal(g.cpu(), w) for g, w in zip(f(one.to("neuron"), 0), f(one, 0)))
        values, indices = f(torch.zeros(0, 3, dtype=dtype, device="neuron"), 1)
        assert values.shape == indices.shape == (0,) and indices.dtype == torch.int64


def test_nansum_and_nanmean_take_nan_as_nothing():
    x = torch.tensor([[1.0, float("nan"), 2.0], [float("nan"), float("nan"), 4.0]])
    d = x.to("neuron")
    for f in (torch.nansum, torch.nanmean):
        _same(f, x)
        assert torch.equal(f(d, dim=1).cpu(), f(x, dim=1))
    ints = torch.tensor([[2**40, 3], [5, -7]])
    assert torch.equal(torch.nansum(ints.to("neuron"), dim=0).cpu(), torch.nansum(ints, dim=0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_dot_products_of_vectors_and_views(dtype):
    a = (torch.randn(37) * 5).to(dtype)
    b = (torch.randn(74) * 5).to(dtype)[::2]  # strided
    tol = {"atol": 0.5, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    _same(torch.dot, a, b, **tol)
    _same(torch.matmul, a, b, **tol)  # a vector by a vector is a dot
    _same(torch.dot, a[:0], b[:0])


def test_the_vector_norm_of_one_element():
    for ord in (2, 1, float("inf"), 0.5):
        _same(torch.linalg.vector_norm, torch.tensor(-3.0), ord)


def test_roll_along_dims_and_flattened():
    x = torch.arange(60).view(3, 4, 5)
    for shifts, dims in ((1, 0), (-2, 2), ((1, 7), (0, -1)), (3, None), (0, 1), (13, 1)):
        kwargs = {} if dims is None else {"dims": dims}
        want = torch.roll(x, shifts, **kwargs)
        assert torch.equal(torch.roll(x.to("neuron"), shifts, **kwargs).cpu(), want)
        assert torch.equal(
            torch.roll(x.to("neuron").float().transpose(0, 2), shifts, **kwargs).cpu(),
            torch.roll(x.float().transpose(0, 2), shifts, **kwargs),
        )
    assert torch.roll(torch.zeros(0, 3, device="neuron"), 1, 1).shape == (0, 3)


def test_empty_and_one_element_softmax_nonzero_and_cat():
    for f in (torch.softmax, torch.log_softmax):
        _same(f, torch.tensor(2.0), 0)
        got = f(torch.zeros(5, 0, device="neuron"), 1)
        assert got.shape == (5, 0) and got.device.type == "neuron"
    assert torch.nonzero(torch.zeros(5, 0, 5, device="neuron")).shape == (0, 3)
    both = torch.cat(
        [torch.zeros(0, device="neuron"), torch.zeros(0, device="neuron", dtype=torch.int32)]
    )
    assert both.shape == (0,) and both.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_forward_backward_and_running_statistics(dtype, training):
    torch.manual_seed(0)
    cpu = torch.nn.BatchNorm2d(3).train(training)
    with torch.no_grad():
        cpu.weight.uniform_(0.5, 1.5)
        cpu.bias.uniform_(-1, 1)
        cpu.running_mean.uniform_(-1, 1)
        cpu.running_var.uniform_(0.5, 2)
    dev = torch.nn.BatchNorm2d(3).train(training).to("neuron")
    dev.load_state_dict(cpu.state_dict())
    x = (torch.randn(4, 3, 5, 6) * 2 + 1).to(dtype)
    xc = x.clone().requires_grad_()
    xd = x.to("neuron").requires_grad_()
    cpu, dev = cpu.to(dtype), dev.to(dtype)
    grad = torch.randn(4, 3, 5, 6).to(dtype)
    yc, yd = cpu(xc), dev(xd)
    yc.backward(grad)
    yd.backward(grad.to("neuron"))
    tol = {"atol": 3e-2, "rtol": 3e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(yd.cpu(), yc, **tol)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    for name in ("weight", "bias"):
        torch.testing.assert_close(getattr(dev, name).grad.cpu(), getattr(cpu, name).grad, **tol)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(dev, name).cpu(), getattr(cpu, name), **tol)
    out, mean, invstd = torch.native_batch_norm(
        x.to("neuron"), None, None, None, None, True, 0.1, 1e-5
    )
    want = torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    for g, w in zip((out, mean, invstd), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, **tol)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3), "stride": (2, 1), "ceil_mode": True},
        {"kernel_size": 2, "dilation": 2, "padding": 1, "ceil_mode": True},
    ],
    ids=["padded", "ceil", "dilated"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_max_pooling_values_indices_and_gradient(kwargs, dtype):
    torch.manual_seed(0)
    x = (
        (torch.randn(2, 3, 7, 8) * 2**40).to(dtype)
        if dtype == torch.int64
        else torch.randn(2, 3, 7, 8).to(dtype)
    )
    if dtype == torch.float32:
        x[0, 0, 1, 1] = x[0, 0, 2, 2] = float("nan")  # the CPU takes a window's last NaN
        x[0, 1, :3, :3] = float("-inf")  # a window of -inf takes its first tap inside
        x[1, 2, 4:, :] = 1.0  # ties take the first maximum
    got = F.max_pool2d(x.to("neuron"), return_indices=True, **kwargs)
    want = F.max_pool2d(x, return_indices=True, **kwargs)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu().nan_to_num(7), w.nan_to_num(7)), kwargs
    assert torch.equal(
        F.max_pool2d(x[0].to("neuron"), **kwargs).cpu().nan_to_num(7),
        F.max_pool2d(x[0], **kwargs).nan_to_num(7),
    )  # unbatched [C, H, W]
    if dtype == torch.float32:
        xc = x.nan_to_num(0).clamp(-5, 5).requires_grad_()
        xd = xc.detach().to("neuron").requires_grad_()
        grad = torch.randn_like(F.max_pool2d(xc, **kwargs))
        F.max_pool2d(xc, **kwargs).backward(grad)
        F.max_pool2d(xd, **kwargs).backward(grad.to("neuron"))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": (2, 3), "stride": 2, "ceil_mode": True, "padding": (1, 1)},
        {"kernel_size": 2, "divisor_override": 3},
    ],
    ids=["padded", "without_pad", "ceil", "divisor"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_average_pooling_and_its_gradient(kwargs, dtype):
    torch.manual_seed(0)
    x = (torch.randn(2, 3, 7, 9) * 100).to(dtype)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    got = F.avg_pool2d(x.to("neuron"), **kwargs)
    torch.testing.assert_close(got.cpu(), F.avg_pool2d(x, **kwargs), **tol)
    if dtype == torch.float32:
        xc = x.clone().requires_grad_()
        xd = x.to("neuron").requires_grad_()
        grad = torch.randn_like(F.avg_pool2d(x, **kwargs))
        F.avg_pool2d(xc, **kwargs).backward(grad)
        F.avg_pool2d(xd, **kwargs).backward(grad.to("neuron"))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5)])
def test_adaptive_average_pooling_and_its_gradient(size):
    x = torch.randn(2, 3, 7, 10, requires_grad=True)
    d = x.detach().to("neuron").requires_grad_()
    grad = torch.randn(2, 3, *size)
    want, got = F.adaptive_avg_pool2d(x, size), F.adaptive_avg_pool2d(d, size)
    torch.testing.assert_close(got.cpu(), want)
    want.backward(grad)
    got.backward(grad.to("neuron"))
    torch.testing.assert_close(d.grad.cpu(), x.grad)


def test_a_small_convolutional_network_trains_on_the_device_alone():
    torch.manual_seed(0)

    def net():
        torch.manual_seed(1)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU6(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3),
            torch.nn.AvgPool2d(2, ceil_mode=True),
            torch.nn.AdaptiveAvgPool2d((2, 2)),
            torch.nn.Flatten(),
            torch.nn.Linear(32, 5),
        )

    x, y = torch.randn(4, 3, 12, 12), torch.randint(0, 5, (4,))
    losses = {}
    for device in ("cpu", "neuron"):
        model = net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
        losses[device] = loss.item()
    assert abs(losses["neuron"] - losses["cpu"]) < 1e-3, losses


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((2, 3, 7), (2, 3)),
        ((2, 3, 5, 6), (1, 2, 3, 0)),
        ((1, 2, 4, 5, 6), (1, 1, 2, 0, 0, 3)),
        ((1, 3, 4, 4), (-1, 1, -2, 1)),
    ],
    ids=["1d", "2d", "3d", "crop"],
)
def test_reflection_replication_and_circular_padding_and_gradients(mode, shape, pad):
    x = torch.randn(*shape, requires_grad=True)
    d = x.detach().to("neuron").requires_grad_()
    want, got = F.pad(x, pad, mode=mode), F.pad(d, pad, mode=mode)
    assert torch.equal(got.detach().cpu(), want.detach())
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad.to("neuron"))
    torch.testing.assert_close(d.grad.cpu(), x.grad)
    ints = torch.arange(24).view(2, 3, 4)
    assert torch.equal(
        F.pad(ints.to("neuron"), (1, 2), mode="replicate").cpu(),
        F.pad(ints, (1, 2), mode="replicate"),
    )


def test_a_convolution_that_pads_by_reflection_trains_on_the_device():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=2, padding_mode="reflect")
    dev = torch.nn.Conv2d(3, 4, 3, padding=2, padding_mode="reflect").to("neuron")
    dev.load_state_dict(conv.state_dict())
    x = torch.randn(2, 3, 8, 9)
    conv(x).square().sum().backward()
    dev(x.to("neuron")).square().sum().backward()
    torch.testing.assert_close(dev.weight.grad.cpu(), conv.weight.grad, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cumprod_along_any_dim_with_its_gradient(dtype):
    x = (torch.rand(4, 6, 5) + 0.5).to(dtype)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-5}
    for dim in (0, 1, -1):
        _same(torch.cumprod, x, dim, **tol)
        _same(torch.cumprod, x.transpose(0, 2), dim, **tol)
    _same(torch.cumprod, torch.tensor(3.0).to(dtype), 0)
    if dtype == torch.float32:
        xc = x.clone().requires_grad_()
        xd = x.to("neuron").requires_grad_()
        torch.cumprod(xc, 1).sum().backward()
        torch.cumprod(xd, 1).sum().backward()
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-4, rtol=1e-4)


def test_addmv_prod_cross_tensor_clamps_and_the_sort_of_one_element():
    torch.manual_seed(0)
    mat, vec, bias = torch.randn(5, 7), torch.randn(7), torch.randn(5)
    _same(torch.addmv, bias, mat, vec)
    _same(lambda *t: torch.addmv(*t, beta=0.5, alpha=2.0), bias, mat, vec)
    _same(lambda *t: torch.addmv(*t, beta=0.0), torch.full((5,), float("nan")), mat, vec)
    x = torch.rand(3, 4, 5) + 0.5
    _same(torch.prod, x)
    for dim in (0, 2, -2):
        _same(torch.prod, x, dim)
    _same(lambda t: torch.prod(t, 1, keepdim=True), x.transpose(0, 2))
    assert torch.equal(torch.prod(torch.zeros(0, 3, device="neuron"), 0).cpu(), torch.ones(3))
    a, b = torch.randn(4, 3, 2), torch.randn(1, 3, 2)
    _same(lambda u, v: torch.linalg.cross(u, v, dim=1), a, b)
    ints = torch.randint(-1000, 1000, (6, 3))
    _same(torch.linalg.cross, ints, ints.flip(0))
    lo = torch.randn(4, 1)
    _same(torch.clamp_min, x[0], lo)
    _same(torch.clamp_max, x[0], lo)
    for t in (torch.tensor(2.5), torch.tensor(4)):
        got, want = torch.sort(t.to("neuron")), torch.sort(t)
        assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_class_weighted_cross_entropy_and_its_gradient(reduction):
    torch.manual_seed(0)
    logits = torch.randn(6, 5, requires_grad=True)
    target = torch.tensor([0, 4, 2, -100, 2, 1])
    weight = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25])
    d = logits.detach().to("neuron").requires_grad_()
    want = F.cross_entropy(logits, target, weight=weight, reduction=reduction)
    got = F.cross_entropy(d, target.to("neuron"), weight=weight.to("neuron"), reduction=reduction)
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad.to("neuron"))
    torch.testing.assert_close(d.grad.cpu(), logits.grad)


def test_float64_choices_and_fills_move_bit_patterns_and_logical_ops_fill_an_out():
    x = torch.tensor([1 / 3, -2.5, float("nan"), 1e300], dtype=torch.float64)
    cond = torch.tensor([True, False, True, False])
    d = x.to("neuron")
    assert torch.equal(
        torch.where(cond.to("neuron"), d, 0.1).cpu().view(torch.int64),
        torch.where(cond, x, 0.1).view(torch.int64),
    )
    assert torch.equal(
        d.masked_fill(cond.to("neuron"), 1 / 7).cpu().view(torch.int64),
        x.masked_fill(cond, 1 / 7).view(torch.int64),
    )
    ints = torch.tensor([5, -6, 7, 2**40])
    for value in (42.9, -42.9):  # a float into an integer tensor truncates, as the CPU's
        assert torch.equal(
            ints.to("neuron").masked_fill(cond.to("neuron"), value).cpu(),
            ints.masked_fill(cond, value),
        )
    a, b = torch.tensor([0, 1, 2, 0]), torch.tensor([1.0, 0.0, 3.0, 0.0])
    for f in (torch.logical_and, torch.logical_or, torch.logical_xor):
        for dtype in (torch.bool, torch.float32):
            out = torch.empty(4, dtype=dtype, device="neuron")
            f(a.to("neuron"), b.to("neuron"), out=out)
            assert torch.equal(out.cpu(), f(a, b, out=torch.empty(4, dtype=dtype)))


def test_relus_gradient_is_the_cpus_for_nan_and_infinite_values():
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan"), -3.0, 4.0])
    grad = torch.tensor([float("nan"), float("inf"), 1.5, 2.0, float("-inf"), float("nan")])
    got = torch.ops.aten.threshold_backward(grad.to("neuron"), x.to("neuron"), 0.0)
    want = torch.ops.aten.threshold_backward(grad, x, 0.0)  # 0 where x <= 0, else grad
    assert torch.equal(got.cpu().nan_to_num(7), want.nan_to_num(7))


def _positive_definite(*shape, seed=23):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (3, 17, 17), (2, 2, 40, 40)])
def test_cholesky_factor_and_status_read_one_triangle(shape, upper):
    a = _positive_definite(*shape)
    # What LAPACK does not read (the other triangle) must not matter.
    skewed = a.triu() + 5 * a.tril(-1) if upper else a.tril() + 5 * a.triu(1)
    want, want_info = torch.linalg.cholesky_ex(skewed, upper=upper)
    got, info = torch.linalg.cholesky_ex(skewed.to("neuron"), upper=upper)
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)
    assert info.dtype == torch.int32 and torch.equal(info.cpu(), want_info)
    _same(lambda m: torch.linalg.cholesky(m, upper=upper), a, atol=1e-4, rtol=1e-4)


def test_cholesky_gradient():
    a = _positive_definite(2, 8, 8)
    grads = []
    for device in ("cpu", "neuron"):
        m = a.clone().to(device).requires_grad_()
        factor = torch.linalg.cholesky(m)
        (factor.sum() + (factor**2).mean()).backward()
        grads.append(m.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-4)


def test_a_matrix_that_is_not_positive_definite_takes_the_cpus_result_counted():
    a = _positive_definite(3, 5, 5)
    a[1, 3, 3] = -100.0  # the fourth leading minor of the second matrix fails
    with neuronsim.strict_mode(False):
        neuronsim.reset_fallback_counts()
        got, info = torch.linalg.cholesky_ex(a.to("neuron"))
        assert neuronsim.fallback_counts() == {"aten::linalg_cholesky_ex.L": 1}
    want, want_info = torch.linalg.cholesky_ex(a)
    assert info.cpu().tolist() == want_info.tolist() == [0, 4, 0]
    torch.testing.assert_close(got.cpu()[0], want[0])
    with neuronsim.strict_mode(False), pytest.raises(torch.linalg.LinAlgError, match="order 4"):
        torch.linalg.cholesky(a.to("neuron"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool])
def test_triangles_of_views_at_every_diagonal(dtype):
    """Each diagonal is its own kernel: a kernel made for one must not serve another."""
    x = torch.arange(10 * 12).reshape(10, 12).to(dtype)
    for view in (lambda t: t.mT, lambda t: t[::2, 1::2], lambda t: t.expand(3, 10, 12)):
        for diagonal in (0, 2, -1, 5, -20):
            for f in (torch.triu, torch.tril):
                _same(lambda t, f=f, v=view, d=diagonal: f(v(t), d), x, atol=0, rtol=0)

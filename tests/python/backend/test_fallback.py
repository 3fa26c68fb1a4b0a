"""The counted CPU fallback: ops without a neuron kernel give the CPU's values, are
counted by aten name, warn once, are refused in strict mode, write out= and in-place
arguments on the device, and draw random numbers from the device's generator."""

from __future__ import annotations

import warnings

import pytest
import torch

import neuronsim


def _keys_with(word: str) -> list[str]:
    return [k for k in neuronsim.fallback_counts() if word in k]


def _fallback_warnings(caught, word: str) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if "it runs on the CPU" in str(w.message) and word in str(w.message)
    ]


@pytest.fixture
def x():
    return torch.tensor([[3.0, -1.0, 2.0, 0.5], [0.0, 4.0, -2.0, 1.0]])


FALLBACK_OPS = {
    "cumsum": lambda t: torch.cumsum(t, 1),
    "sort": lambda t: torch.sort(t, dim=1).values,
    "sort indices": lambda t: torch.sort(t, dim=1, descending=True).indices,
    "argsort": lambda t: torch.argsort(t, dim=0),
    "cumprod": lambda t: torch.cumprod(t, 0),
    "flip": lambda t: torch.flip(t, [1]),
    "topk": lambda t: torch.topk(t, 2, dim=1).values,
    "where": lambda t: torch.where(t > 0, t, -t),
    "cat": lambda t: torch.cat([t, t * 2], 0),
    "index_select": lambda t: t.index_select(1, torch.tensor([3, 0]).to(t.device)),
    "masked_fill": lambda t: t.masked_fill(t < 0, 9.0),
    "clamp": lambda t: t.clamp(-1.0, 1.0),
    "roll": lambda t: torch.roll(t, 1, 1),
    "tril": lambda t: torch.tril(t),
    "nonzero": lambda t: torch.nonzero(t),
    "unique": lambda t: torch.unique(t),
    "to int": lambda t: t.to(torch.int32),
}


@pytest.mark.parametrize("name", list(FALLBACK_OPS))
def test_fallback_values_match_cpu(x, name):
    op = FALLBACK_OPS[name]
    expected = op(x)
    got = op(x.to("neuron"))
    assert got.device == torch.device("neuron:0")
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_fallback_on_neuron_1_stays_on_neuron_1(x):
    got = torch.logcumsumexp(x.to("neuron:1"), 1)
    assert got.device == torch.device("neuron:1")
    assert torch.equal(got.cpu(), torch.logcumsumexp(x, 1))


def test_fallback_on_a_non_contiguous_view(x):
    dev = x.to("neuron")
    got = torch.logcumsumexp(dev.t()[1:], 1)
    assert torch.equal(got.cpu(), torch.logcumsumexp(x.t()[1:], 1))


def test_fallback_returning_a_view_aliases_the_device_tensor(x):
    dev = x.to("neuron")
    parts = torch.chunk(dev, 2, dim=1)  # views
    assert all(p.device == dev.device for p in parts)
    parts[1].fill_(0.0)
    expected = x.clone()
    expected[:, 2:] = 0.0
    assert torch.equal(dev.cpu(), expected)


def test_fallback_is_counted_by_aten_name(x):
    dev = x.to("neuron")
    assert _keys_with("logcumsumexp") == []
    torch.logcumsumexp(dev, 1)
    keys = _keys_with("logcumsumexp")
    assert len(keys) == 1, neuronsim.fallback_counts()
    assert keys[0].startswith("aten::"), keys
    assert neuronsim.fallback_counts()[keys[0]] == 1
    torch.logcumsumexp(dev, 0)
    torch.logcumsumexp(dev, 1)
    assert neuronsim.fallback_counts()[keys[0]] == 3
    torch.kthvalue(dev, 2)
    assert len(_keys_with("kthvalue")) == 1
    assert all(isinstance(v, int) for v in neuronsim.fallback_counts().values())


def test_reset_fallback_counts(x):
    torch.logcumsumexp(x.to("neuron"), 1)
    assert neuronsim.fallback_counts()
    neuronsim.reset_fallback_counts()
    assert neuronsim.fallback_counts() == {}


def test_fallback_counts_is_a_copy(x):
    torch.logcumsumexp(x.to("neuron"), 1)
    counts = neuronsim.fallback_counts()
    counts.clear()
    assert neuronsim.fallback_counts()


def test_fallback_warns_once_per_op(x):
    dev = x.to("neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.logcumsumexp(dev, 1)
        torch.logcumsumexp(dev, 0)
        torch.logcumsumexp(dev, 1)
        torch.kthvalue(dev, 2)
        torch.kthvalue(dev, 2)
    logcumsumexp = _fallback_warnings(caught, "logcumsumexp")
    assert len(logcumsumexp) == 1, [str(w.message) for w in caught]
    assert "fallback_counts" in logcumsumexp[0] or "CPU" in logcumsumexp[0]
    assert len(_fallback_warnings(caught, "kthvalue")) == 1
    assert all(issubclass(w.category, UserWarning) for w in caught)


def test_views_of_more_dims_than_one_dma_walks_run_on_the_device_in_slices():
    # One DMA access pattern walks rows and 4 free dims: two 6-D operands whose layouts
    # share no dims leave 6 after coalescing, so the op runs once per outermost index.
    torch.manual_seed(0)
    a = torch.randn(2, 3, 4, 5, 6, 7).permute(5, 3, 1, 4, 2, 0)
    b = torch.randn(7, 5, 3, 6, 4, 2)
    with neuronsim.strict_mode():
        got = a.to("neuron") + b.to("neuron")
    torch.testing.assert_close(got.cpu(), a + b)


def test_a_case_a_kernel_refuses_says_which_limit_and_shapes():
    # Integer floor division runs in FP32, exact below 2^23: a larger dividend falls back.
    # The fallback names the limit, the op and its tensors, in strict mode and in the
    # warning.
    big = torch.tensor([2**40, 5])
    dev = big.to("neuron")
    with neuronsim.strict_mode(), pytest.raises(RuntimeError) as err:
        torch.div(dev, 3, rounding_mode="floor")
    refused = str(err.value)
    for part in ("aten::div.out_mode", "int64[2], int64[]", "2^23 or more"):
        assert part in refused, refused
    assert "strict mode" in refused and "has no neuron kernel" not in refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.div(dev, 3, rounding_mode="floor")
    said = _fallback_warnings(caught, "aten::div")
    assert len(said) == 1 and "2^23 or more" in said[0], said
    assert neuronsim.fallback_counts() == {"aten::div.out_mode": 1}
    assert torch.equal(got.cpu(), torch.div(big, 3, rounding_mode="floor"))


def test_a_fallback_names_the_dtypes_of_an_op_without_a_kernel(x):
    with neuronsim.strict_mode(), pytest.raises(RuntimeError) as err:
        torch.logcumsumexp(x.to("neuron").to(torch.bfloat16), 1)
    # logcumsumexp runs as _logcumsumexp: its input with its dtype and sizes.
    said = str(err.value)
    assert "aten::_logcumsumexp on bfloat16[2, 4] has no neuron kernel" in said


def test_strict_mode_refuses_a_fallback(x):
    dev = x.to("neuron")
    with neuronsim.strict_mode():
        assert neuronsim.strict() is True
        with pytest.raises(RuntimeError, match="logcumsumexp") as err:
            torch.logcumsumexp(dev, 1)
        assert "strict" in str(err.value).lower() or "NEURONSIM_STRICT" in str(err.value)
        with pytest.raises(RuntimeError, match="kthvalue"):
            torch.kthvalue(dev, 2)
        # the kernels and the host still work in strict mode
        torch.testing.assert_close((dev + dev).cpu(), x + x)
        assert torch.equal(dev.cpu(), x)
    assert neuronsim.strict() is False
    # out of strict mode the same op runs again, on the same device tensor
    assert torch.equal(torch.logcumsumexp(dev, 1).cpu(), torch.logcumsumexp(x, 1))
    assert torch.equal(torch.ones(3, device="neuron").cpu(), torch.ones(3))


def test_refused_fallback_is_not_counted(x):
    dev = x.to("neuron")
    with neuronsim.strict_mode(), pytest.raises(RuntimeError):
        torch.logcumsumexp(dev, 1)
    assert _keys_with("logcumsumexp") == []


def test_set_strict_and_strict_mode_false(x):
    neuronsim.set_strict(True)
    assert neuronsim.strict() is True
    with neuronsim.strict_mode(False):
        assert torch.equal(torch.logcumsumexp(x.to("neuron"), 1).cpu(), torch.logcumsumexp(x, 1))
    assert neuronsim.strict() is True
    neuronsim.set_strict(False)
    assert neuronsim.strict() is False


def test_strict_mode_restored_after_an_error(x):
    with pytest.raises(ValueError), neuronsim.strict_mode():
        raise ValueError("boom")
    assert neuronsim.strict() is False


STRICT_SUBPROCESS = """
import json, torch, neuronsim
out = {"strict": neuronsim.strict()}
x = torch.tensor([1.0, 2.0, 3.0]).to("neuron")
try:
    torch.logcumsumexp(x, 0)
    out["error"] = None
except RuntimeError as e:
    out["error"] = str(e)
out["after"] = (x + x).cpu().tolist()
neuronsim.set_strict(False)
out["logcumsumexp"] = torch.logcumsumexp(x, 0).cpu().tolist()
print(json.dumps(out))
"""


def test_neuronsim_strict_environment_variable(spawn_python):
    on = spawn_python(STRICT_SUBPROCESS, {"NEURONSIM_STRICT": "1"})
    off = spawn_python(STRICT_SUBPROCESS, {"NEURONSIM_STRICT": "0"})
    got = on.json()
    assert got["strict"] is True
    assert got["error"] is not None, "NEURONSIM_STRICT=1 let logcumsumexp fall back"
    assert "logcumsumexp" in got["error"]
    assert got["after"] == [2.0, 4.0, 6.0]
    assert got["logcumsumexp"] == pytest.approx([1.0, 2.3132617, 3.4076059])
    got = off.json()
    assert got["strict"] is False
    assert got["error"] is None


# ---- out= and in-place ------------------------------------------------------------


def test_out_argument_is_written_on_the_device(x):
    dev = x.to("neuron")
    out = torch.empty(2, 4, device="neuron")
    ptr = out.untyped_storage().data_ptr()
    result = torch.logcumsumexp(dev, 1, out=out)
    assert result is out
    assert out.device == torch.device("neuron:0")
    assert out.untyped_storage().data_ptr() == ptr
    assert torch.equal(out.cpu(), torch.logcumsumexp(x, 1))


def test_out_argument_that_must_be_resized(x):
    dev = x.to("neuron")
    out = torch.empty(0, device="neuron")
    torch.logcumsumexp(dev, 1, out=out)
    assert out.shape == (2, 4)
    assert out.device == torch.device("neuron:0")
    assert torch.equal(out.cpu(), torch.logcumsumexp(x, 1))
    values = torch.empty(0, device="neuron")
    indices = torch.empty(0, dtype=torch.int64, device="neuron")
    torch.sort(dev, dim=1, out=(values, indices))
    expected = torch.sort(x, dim=1)
    assert torch.equal(values.cpu(), expected.values)
    assert torch.equal(indices.cpu(), expected.indices)


def test_out_argument_resized_on_neuron_1(x):
    dev = x.to("neuron:1")
    out = torch.empty(0, device="neuron:1")
    before = torch.neuron.memory_allocated(1)
    torch.logcumsumexp(dev, 1, out=out)
    assert out.device == torch.device("neuron:1")
    assert torch.equal(out.cpu(), torch.logcumsumexp(x, 1))
    # the new storage is neuron:1's memory
    assert torch.neuron.memory_allocated(1) > before


def test_out_argument_that_is_a_view(x):
    dev = x.to("neuron")
    big = torch.zeros(4, 4, device="neuron")
    torch.logcumsumexp(dev, 1, out=big[1:3])
    expected = torch.zeros(4, 4)
    expected[1:3] = torch.logcumsumexp(x, 1)
    assert torch.equal(big.cpu(), expected)


def test_in_place_fallback_writes_the_device_tensor(x):
    dev = x.to("neuron")
    ptr = dev.untyped_storage().data_ptr()
    result = dev.lgamma_()
    assert result is dev
    assert dev.untyped_storage().data_ptr() == ptr
    assert torch.equal(dev.cpu(), x.lgamma())
    dev.exp2_()
    assert torch.equal(dev.cpu(), x.lgamma().exp2())
    assert _keys_with("lgamma") and _keys_with("exp2")


def test_in_place_fallback_on_views(x):
    dev = x.to("neuron")
    host = x.clone()
    dev[:, 1].neg_()
    host[:, 1].neg_()
    dev.t()[2:].clamp_(min=0.0)
    host.t()[2:].clamp_(min=0.0)
    dev[1].cumprod_(0)
    host[1].cumprod_(0)
    dev[0, ::2].zero_()
    host[0, ::2].zero_()
    assert torch.equal(dev.cpu(), host)


def test_in_place_fallback_with_a_neuron_index(x):
    dev = x.to("neuron")
    host = x.clone()
    index = torch.tensor([0, 3])
    dev.index_fill_(1, index.to("neuron"), -7.0)
    host.index_fill_(1, index, -7.0)
    dev[dev > 2] = 1.5
    host[host > 2] = 1.5
    assert torch.equal(dev.cpu(), host)


# ---- random numbers -----------------------------------------------------------------

RANDOM_OPS = {
    "randn": lambda: torch.randn(64, device="neuron"),
    "rand": lambda: torch.rand(8, 8, device="neuron"),
    "randint": lambda: torch.randint(0, 1000, (64,), device="neuron"),
    "normal_": lambda: torch.empty(64, device="neuron").normal_(1.0, 2.0),
    "uniform_": lambda: torch.empty(64, device="neuron").uniform_(),
    "bernoulli_": lambda: torch.empty(64, device="neuron").bernoulli_(0.5),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(256, device="neuron"), 0.5),
    "dropout bf16": lambda: torch.nn.functional.dropout(
        torch.ones(256, dtype=torch.bfloat16, device="neuron"), 0.5
    ),
    "randperm": lambda: torch.randperm(64, device="neuron"),
    "multinomial": lambda: torch.multinomial(torch.ones(4, 16, device="neuron"), 8),
}


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_random_ops_are_reproducible_under_neuron_manual_seed(name):
    op = RANDOM_OPS[name]
    torch.neuron.manual_seed(1234)
    first = op()
    second = op()
    torch.neuron.manual_seed(1234)
    again = op()
    assert first.device == torch.device("neuron:0")
    reproduced = torch.equal(first.cpu(), again.cpu())
    repeated = torch.equal(first.cpu(), second.cpu())
    assert reproduced, f"{name} gave other values after the same torch.neuron.manual_seed"
    assert not repeated, f"{name} repeated its draws"


@pytest.mark.parametrize("name", ["randn", "dropout"])
def test_random_ops_advance_the_neuron_generator(name):
    torch.neuron.manual_seed(5)
    before = torch.neuron.get_rng_state()
    RANDOM_OPS[name]()
    moved = not torch.equal(torch.neuron.get_rng_state(), before)
    assert moved, f"{name} did not draw from the neuron generator"


def test_random_ops_do_not_depend_on_the_cpu_generator():
    torch.neuron.manual_seed(77)
    torch.manual_seed(1)  # seeds neuron too: reseed neuron alone after it
    torch.neuron.manual_seed(77)
    a = torch.randn(16, device="neuron").cpu()
    torch.randn(100)  # the CPU generator moves on
    torch.neuron.manual_seed(77)
    b = torch.randn(16, device="neuron").cpu()
    assert torch.equal(a, b)


def test_explicit_neuron_generator():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron:0")
    g.manual_seed(99)
    a = torch.randn(10, device="neuron", generator=g).cpu()
    g.manual_seed(99)
    b = torch.randn(10, device="neuron", generator=g).cpu()
    assert torch.equal(a, b)


def test_random_values_look_random():
    torch.neuron.manual_seed(0)
    r = torch.randn(20000, device="neuron").cpu()
    assert abs(r.mean().item()) < 0.05
    assert abs(r.std().item() - 1.0) < 0.05
    u = torch.rand(20000, device="neuron").cpu()
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.02


@pytest.mark.parametrize(
    "fn", ["exp", "log", "sqrt", "rsqrt", "reciprocal", "sigmoid", "tanh", "sin", "cos", "erf"]
)
def test_activations_run_in_place_and_into_an_out_on_the_device(fn):
    # x.sqrt_() and torch.sqrt(x, out=y) are their own aten ops: without them they fell back.
    x = torch.rand(3, 5) + 0.5
    with neuronsim.strict_mode():
        d = x.to("neuron")
        getattr(d, fn + "_")()
        out = torch.empty(0, device="neuron")
        getattr(torch, fn)(x.to("neuron"), out=out)
    want = getattr(torch, fn)(x)
    torch.testing.assert_close(d.cpu(), want)
    torch.testing.assert_close(out.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_relu_neg_and_abs_in_place(dtype):
    x = torch.tensor([[3, -1, 0, -7]], dtype=dtype)
    with neuronsim.strict_mode():
        for fn in ("relu_", "neg_", "abs_"):
            d = x.to("neuron")
            getattr(d, fn)()
            assert torch.equal(d.cpu(), getattr(x.clone(), fn)()), fn


def test_rounding_sign_threshold_and_logical_not_on_the_device():
    x = torch.tensor(
        [-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.0, 9e6 + 0.5, 3e38, float("inf"),
         -float("inf"), float("nan")]
    )  # fmt: skip
    with neuronsim.strict_mode():
        d = x.to("neuron")
        for fn in ("floor", "ceil", "trunc", "sign"):
            got = getattr(torch, fn)(d).cpu()
            torch.testing.assert_close(got, getattr(torch, fn)(x), rtol=0, atol=0, equal_nan=True)
        got = torch.nn.functional.threshold(d, 0.4, -7.0).cpu()
        want = torch.nn.functional.threshold(x, 0.4, -7.0)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(torch.logical_not(d).cpu(), torch.logical_not(x))
        b = x > 0
        assert torch.equal(torch.logical_not(b.to("neuron")).cpu(), torch.logical_not(b))


def test_boolean_masks_multiply_and_add_as_logical_and_and_or():
    a = torch.tensor([True, False, True, False])
    b = torch.tensor([True, True, False, False])
    with neuronsim.strict_mode():
        da, db = a.to("neuron"), b.to("neuron")
        assert torch.equal((da * db).cpu(), a * b)
        assert torch.equal((da + db).cpu(), a + b)
        assert torch.equal((da * True).cpu(), a * True)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, 0, float("inf"), float("-inf")])
def test_vector_norms_and_gradient_clipping_run_on_the_device(ord):
    # linalg.vector_norm over all dims, one dim and two, with keepdim, and in bf16; then
    # clip_grad_norm_, whose per-gradient norms fell back at every training step.
    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, 5, 40, generator=g)
    x[0, 0, :7] = 0.0  # zeros, which ord=0 counts
    cases = [
        ((), {}),
        ((), {"dim": -1}),
        ((), {"dim": (0, 2), "keepdim": True}),
    ]
    with neuronsim.strict_mode():
        for args, kwargs in cases:
            got = torch.linalg.vector_norm(x.to("neuron"), ord, *args, **kwargs)
            want = torch.linalg.vector_norm(x, ord, *args, **kwargs)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        half = torch.linalg.vector_norm(x.bfloat16().to("neuron"), ord, dim=1)
        want = torch.linalg.vector_norm(x.bfloat16().float(), ord, dim=1).bfloat16()
        torch.testing.assert_close(half.cpu(), want, rtol=1.6e-2, atol=1e-2)
    if ord != 2:
        return
    model = torch.nn.Linear(40, 8)
    on_device = torch.nn.Linear(40, 8).to("neuron")
    on_device.load_state_dict(model.state_dict())
    for m, inputs in ((model, x.view(-1, 40)), (on_device, x.view(-1, 40).to("neuron"))):
        m(inputs).square().sum().backward()
    with neuronsim.strict_mode():
        total = torch.nn.utils.clip_grad_norm_(on_device.parameters(), 1.0)
    want = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    torch.testing.assert_close(total.cpu(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(on_device.weight.grad.cpu(), model.weight.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_log_sigmoid_and_its_gradient_run_on_the_device(dtype):
    # Preference losses (DPO's -logsigmoid of reward margins): large margins both ways
    # included, where log(1 + exp(-x)) would round to nothing or overflow.
    x = torch.tensor([-60.0, -25.0, -3.0, -0.5, 0.0, 0.5, 3.0, 25.0, 60.0], dtype=dtype)
    want = torch.nn.functional.logsigmoid(x.float().requires_grad_())
    want.sum().backward()
    xs = x.to("neuron").detach().requires_grad_()
    with neuronsim.strict_mode():
        got = torch.nn.functional.logsigmoid(xs)
        got.sum().backward()
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1e-2}
    torch.testing.assert_close(got.detach().cpu().float(), want.detach(), **tol)
    torch.testing.assert_close(xs.grad.cpu().float(), torch.sigmoid(-x.float()), **tol)


def test_a_fallback_whose_result_has_gaps_in_its_layout():
    # LAPACK lays lstsq's solution out with a padded leading dimension: the out= tensor
    # the fallback writes back needs the layout's extent, not just its element count.
    torch.manual_seed(0)
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    got = torch.linalg.lstsq(a.to("neuron"), b.to("neuron")).solution
    torch.testing.assert_close(got.cpu(), torch.linalg.lstsq(a, b).solution)

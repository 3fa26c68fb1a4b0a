"""PyTorch's own op tests on the device: for every op the backend claims, the OpInfo
samples of torch.testing._internal.common_methods_invocations.op_db run on "neuron"
and match the CPU within the dtype's tolerance, forward and (float32) backward.

An entry passes when every sample matches; it counts as "on the device" when its
samples also ran without a single CPU fallback. The last test prints the tally and
gates it, so a kernel that starts falling back shows up as a failure.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map

import neuronsim

# (OpInfo name, variant): the ops whose aten kernels run on the simulator.
CLAIMED = {
    ("abs", ""),
    ("add", ""),
    ("sub", ""),
    ("mul", ""),
    ("rsub", ""),
    ("div", "no_rounding_mode"),
    ("maximum", ""),
    ("minimum", ""),
    ("eq", ""),
    ("ne", ""),
    ("gt", ""),
    ("ge", ""),
    ("lt", ""),
    ("le", ""),
    ("logical_and", ""),
    ("logical_or", ""),
    ("logical_xor", ""),
    ("exp", ""),
    ("log", ""),
    ("sqrt", ""),
    ("rsqrt", ""),
    ("reciprocal", ""),
    ("sigmoid", ""),
    ("tanh", ""),
    ("sin", ""),
    ("cos", ""),
    ("erf", ""),
    ("neg", ""),
    ("nn.functional.relu", ""),
    ("nn.functional.silu", ""),
    ("nn.functional.gelu", ""),
    ("pow", ""),
    ("remainder", ""),
    ("masked_select", ""),
    ("nonzero_static", ""),
    ("equal", ""),
    ("where", ""),
    ("sum", ""),
    ("mean", ""),
    ("amax", ""),
    ("amin", ""),
    ("argmax", ""),
    ("argmin", ""),
    ("max", "reduction_with_dim"),
    ("min", "reduction_with_dim"),
    ("mm", ""),
    ("bmm", ""),
    ("addmm", ""),
    ("matmul", ""),
    ("nn.functional.linear", ""),
    ("softmax", ""),
    ("log_softmax", ""),
    ("nn.functional.layer_norm", ""),
    ("cat", ""),
    ("fill", ""),
    ("zero_", ""),
    ("clone", ""),
    ("contiguous", ""),
    ("nn.functional.scaled_dot_product_attention", ""),
    ("isnan", ""),
    ("isneginf", ""),
    ("isposinf", ""),
    ("masked_fill", ""),
    ("index_select", ""),
    ("nn.functional.embedding", ""),
    ("tril", ""),
    ("triu", ""),
    ("all", ""),
    ("any", ""),
    ("addcmul", ""),
    ("addcdiv", ""),
    ("lerp", ""),
    ("var", ""),
    ("std", ""),
    ("cumsum", ""),
    ("arange", ""),
    ("nn.functional.cross_entropy", ""),
    ("nn.functional.nll_loss", ""),
    ("bitwise_and", ""),
    ("bitwise_or", ""),
    ("bitwise_xor", ""),
    ("bitwise_not", ""),
    ("gather", ""),
    ("scatter", ""),
    ("index_put", ""),
    ("clamp", ""),
    ("nn.functional.softplus", ""),
    ("nn.functional.hardtanh", ""),
    ("nn.functional.relu6", ""),
    ("nn.functional.batch_norm", ""),
    ("roll", ""),
    ("nansum", ""),
    ("dot", ""),
    ("aminmax", ""),
    ("nonzero", ""),
    ("new_full", ""),
    ("full_like", ""),
    ("nn.functional.avg_pool2d", ""),
    ("nn.functional.avg_pool1d", ""),
    ("nn.functional.adaptive_avg_pool2d", ""),
    ("nn.functional.pad", "reflect"),
    ("nn.functional.pad", "replicate"),
    ("nn.functional.pad", "circular"),
    ("prod", ""),
    ("cumprod", ""),
    ("double", ""),
    ("linalg.cholesky", ""),
    ("linalg.cholesky_ex", ""),
    ("linalg.svdvals", ""),
    ("linalg.matrix_norm", ""),
    ("linalg.cond", ""),
    ("linalg.cross", ""),
    ("addmv", ""),
    ("clamp_min", ""),
    ("clamp_max", ""),
}
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.int32)
# The engines compute in FP32 like the CPU, but reduce and accumulate in another order
# and evaluate activations with their own tables. Integers are exact (integer limbs).
TOLERANCE = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
    torch.int64: {"atol": 0, "rtol": 0},
    torch.int32: {"atol": 0, "rtol": 0},
}

OPS = sorted(
    (o for o in op_db if (o.name, o.variant_test_name) in CLAIMED),
    key=lambda o: (o.name, o.variant_test_name),
)
RESULTS: dict[tuple[str, str], tuple[bool, int]] = {}  # (op, dtype) -> (passed, fallbacks)


def _op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _to(device):
    def move(x):
        if isinstance(x, torch.Tensor):
            y = x.detach().to(device)
            return y.requires_grad_(x.requires_grad) if x.is_floating_point() else y
        return x

    return move


def _cpu(x):
    return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)


def _compare(actual, expected, dtype, what):
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(
        _cpu(actual), expected, equal_nan=True, msg=lambda m: f"{what}: {m}", **tol
    )


def _tensors(x):
    out = []
    tree_map(lambda t: out.append(t) if isinstance(t, torch.Tensor) else None, x)
    return out


def _check_backward(op, sample, moved, dtype):
    expected_out = op(sample.input, *sample.args, **sample.kwargs)
    actual_out = op(moved.input, *moved.args, **moved.kwargs)
    outs = [t for t in _tensors(expected_out) if t.requires_grad]
    if not outs:
        return
    leaves = [t for t in _tensors([sample.input, sample.args, sample.kwargs]) if t.requires_grad]
    moved_leaves = [t for t in _tensors([moved.input, moved.args, moved.kwargs]) if t.requires_grad]
    grads = [torch.randn_like(t) for t in outs]
    expected = torch.autograd.grad(outs, leaves, grads, allow_unused=True)
    actual_outs = [t for t in _tensors(actual_out) if t.requires_grad]
    actual = torch.autograd.grad(
        actual_outs, moved_leaves, [g.to("neuron") for g in grads], allow_unused=True
    )
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is not None:
            _compare(a, e, dtype, f"gradient {i}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=_op_id)
def test_op_matches_cpu(op, dtype):
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{_op_id(op)} has no {dtype} on the CPU")
    backward = dtype == torch.float32 and op.supports_autograd
    neuronsim.reset_fallback_counts()
    passed = False
    try:
        for sample in op.sample_inputs("cpu", dtype, requires_grad=backward):
            if sample.kwargs.get("dropout_p", 0):
                continue  # random: the device draws its own mask, not the CPU's
            moved = sample.transform(_to("neuron"))
            expected = op(sample.input, *sample.args, **sample.kwargs)
            actual = op(moved.input, *moved.args, **moved.kwargs)
            _compare(actual, expected, dtype, f"{_op_id(op)} on {sample.summary()}")
            if backward:
                _check_backward(op, sample, moved, dtype)
        passed = True
    finally:
        RESULTS[(_op_id(op), str(dtype))] = (passed, sum(neuronsim.fallback_counts().values()))


# How many (op, dtype) entries must pass without a fallback: the gate of the tally.
MIN_ON_DEVICE = 309


def test_opinfo_tally(capsys):
    if len(RESULTS) < len(OPS) * len(DTYPES) // 2:
        pytest.skip("the op tests did not run in this session")
    passed = [k for k, (ok, _) in RESULTS.items() if ok]
    on_device = [k for k, (ok, fallbacks) in RESULTS.items() if ok and fallbacks == 0]
    with capsys.disabled():
        print(
            f"\nOpInfo on neuron: {len(passed)} of {len(RESULTS)} (op, dtype) entries match "
            f"the CPU; {len(on_device)} of them with zero CPU fallbacks"
        )
        partly = sorted(f"{op}[{dt}]: {fb}" for (op, dt), (ok, fb) in RESULTS.items() if ok and fb)
        if partly:
            print("  with fallbacks: " + ", ".join(partly))
    assert len(on_device) >= MIN_ON_DEVICE

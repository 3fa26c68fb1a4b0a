"""torch.compile(backend="neuron"): graphs become programs (one NEFF per segment), their
values match eager and the CPU, fusion keeps intermediates on chip, ops without a
lowering split the graph (or are refused in strict mode), a new shape recompiles once,
and the NEFF cache survives a new process."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import neuronsim
from neuronsim import compiler


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONSIM_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    compiler.reset_stats()
    yield
    torch._dynamo.reset()


def compiled_run(fn, *args):
    """fn compiled for "neuron" on neuron copies of args, and the report of its graph."""
    out = torch.compile(fn, backend="neuron", dynamic=False)(*[a.to("neuron") for a in args])
    (report,) = compiler.graphs()
    return out, report


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_the_backend_is_registered():
    assert "neuron" in torch._dynamo.list_backends()


def test_an_mlp_with_a_silu_gate_is_one_kernel_with_the_gate_on_chip():
    x, wg, wu, wd = rand(16, 32), rand(64, 32, seed=1), rand(64, 32, seed=2), rand(32, 64, seed=3)

    def mlp(x, wg, wu, wd):
        return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)

    got, report = compiled_run(mlp, x, wg, wu, wd)
    torch.testing.assert_close(got.cpu(), mlp(x, wg, wu, wd), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    # silu is x * sigmoid(x): the sigmoid and the product stay in SBUF, only the gated
    # product is stored (the down projection's matmul reads it from HBM).
    assert report.fused == 2
    assert report.stages == 4  # three matmuls and the gated product


def test_rmsnorm_then_matmul_stores_only_the_sum_of_squares_and_the_normed_rows():
    x, g, w = rand(8, 64), rand(64, seed=1), rand(32, 64, seed=2)

    def norm_linear(x, g, w):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return F.linear(x * r * g, w)

    got, report = compiled_run(norm_linear, x, g, w)
    torch.testing.assert_close(got.cpu(), norm_linear(x, g, w), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    # add eps, rsqrt and x * r stay on chip.
    assert report.fused == 3


def test_causal_attention_is_one_kernel():
    q, k, v = rand(2, 8, 16), rand(2, 8, 16, seed=1), rand(2, 8, 16, seed=2)
    mask = torch.full((8, 8), float("-inf")).triu(1)

    def attention(q, k, v, mask):
        scores = q @ k.transpose(-1, -2) * 0.25 + mask
        return torch.softmax(scores, dim=-1) @ v

    got, report = compiled_run(attention, q, k, v, mask)
    torch.testing.assert_close(got.cpu(), attention(q, k, v, mask), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    assert report.fused == 1  # the scaled scores stay on chip until the mask is added


def test_cross_entropy_splits_at_the_integer_targets():
    logits, target = rand(8, 32), torch.randint(0, 32, (8,), generator=torch.Generator())

    def loss(logits, target):
        return F.cross_entropy(logits * 2.0, target)

    got, report = compiled_run(loss, logits, target)
    torch.testing.assert_close(got.cpu(), loss(logits, target), atol=1e-5, rtol=1e-5)
    # The decomposed loss: the int64 work on the targets (which the engines do not
    # hold) runs eagerly first, the log_softmax in one program, the gather of the
    # targets' log-probabilities eagerly, then the masked mean in a second program.
    assert report.kernels == 2
    assert "aten::gather" in report.eager
    assert report.eager and all(
        op.startswith(
            (
                "aten::ne",
                "aten::where",
                "aten::scalar_tensor",
                "aten::sum",
                "aten::_to_copy",
                "aten::gather",
            )
        )
        for op in report.eager
    ), report.eager
    assert report.fused == 1  # the scaling of the logits


def test_an_op_without_a_lowering_splits_the_graph_and_strict_mode_refuses_it():
    x = rand(4, 16)

    def fn(x):
        y = torch.exp(x) + 1.0
        return torch.cumsum(y, dim=1) * 2.0

    got, report = compiled_run(fn, x)
    torch.testing.assert_close(got.cpu(), fn(x), atol=1e-4, rtol=1e-4)
    assert report.eager == ["aten::cumsum"]
    assert report.kernels == 2
    assert compiler.stats().eager_nodes["aten::cumsum"] == 1
    assert compiler.stats().eager_runs["aten::cumsum"] == 1

    torch._dynamo.reset()
    refused = pytest.raises(Exception, match=r"node cumsum.*aten::cumsum.*strict mode")
    with neuronsim.strict_mode(), refused:
        torch.compile(fn, backend="neuron", dynamic=False)(x.to("neuron"))


def test_a_new_shape_recompiles_once_and_says_so(caplog):
    fn = torch.compile(lambda x: torch.tanh(x) * 3.0, backend="neuron")
    for n in (8, 8, 16, 16, 8):
        x = rand(n, 4)
        torch.testing.assert_close(fn(x.to("neuron")).cpu(), torch.tanh(x) * 3.0)
    assert compiler.stats().recompiles == 1
    assert compiler.stats().graphs == 2
    assert "recompiles" in caplog.text and "[16, 4]" in caplog.text


def test_the_neff_cache_survives_a_new_process(tmp_path, run_python):
    script = """
        import torch, neuronsim, neuronsim.compiler as c
        f = torch.compile(lambda x, w: torch.relu(x @ w) + 1.0, backend="neuron")
        x = torch.ones(8, 16, device="neuron"); w = torch.ones(16, 4, device="neuron")
        assert f(x, w).cpu().eq(17.0).all()
        s = c.stats()
        print(s.neffs_built, s.neff_cache_hits, len(c.graphs()[0].neffs))
    """
    env = {"NEURONSIM_CACHE_DIR": str(tmp_path / "shared-cache")}
    first, second = (run_python(script, env=env) for _ in range(2))
    assert first.returncode == 0, first.stderr[-3000:]
    first, second = first.stdout.split(), second.stdout.split()
    assert first == ["1", "0", "1"]
    assert second == ["0", "1", "1"]
    (neff,) = (tmp_path / "shared-cache" / "graphs").glob("*.neff")
    assert neff.stat().st_size > 1024


def test_the_trace_shows_one_kernel_named_after_the_graph_and_module(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    model = model.to("neuron")
    fn = torch.compile(model, backend="neuron")
    x = torch.randn(4, 16).to("neuron")
    with torch.no_grad():
        fn(x)
        path = tmp_path / "trace.json"
        with neuronsim.profile(path):
            fn(x)
    text = path.read_text()
    assert "Sequential.frame0.inference.0" in text

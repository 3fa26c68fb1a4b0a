"""torch.compile(backend="neuron"): graphs become programs (one NEFF per segment), their
values match eager and the CPU, fusion keeps intermediates on chip, ops without a
lowering split the graph (or are refused in strict mode), a new shape recompiles once,
and the NEFF cache survives a new process."""

from __future__ import annotations

import copy
import pathlib
import subprocess

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
    # A segment the kernels refused runs eagerly whole: correct, but never what a test wants.
    assert compiler.stats().failed_segments == 0


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
    # silu(g) is g * sigmoid(g), so the gate's product has two readers and is stored; the
    # sigmoid, g * sigmoid(g) and the up projection's product stay on chip: the gating is
    # the epilogue of the up projection's matmul. Three stages, the three matmuls.
    assert report.fused == 3
    assert report.stages == 3


def test_rmsnorm_then_matmul_is_two_stages_that_store_only_the_normed_rows():
    x, g, w = rand(8, 64), rand(64, seed=1), rand(32, 64, seed=2)

    def norm_linear(x, g, w):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return F.linear(x * r * g, w)

    got, report = compiled_run(norm_linear, x, g, w)
    torch.testing.assert_close(got.cpu(), norm_linear(x, g, w), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    # One stage normalises the rows: the square is the mean's prologue, and the mean, add
    # eps, rsqrt, x * r and * g are its epilogue, which writes the normed rows the matmul
    # reads. Two stages; only the normed rows (and the unread mean) are stored.
    assert report.fused == 5 and report.stages == 2


def test_a_residual_add_and_the_next_norm_are_one_matmul_stage():
    h, x, w, g = rand(24, 64), rand(24, 32, seed=1), rand(64, 32, seed=2), rand(64, seed=3)

    def block(h, x, w, g):
        h2 = h + F.linear(x, w)
        r = torch.rsqrt(h2.pow(2).mean(-1, keepdim=True) + 1e-6)
        return h2, h2 * r * g

    (h2, y), report = compiled_run(block, h, x, w, g)
    want_h2, want_y = block(h, x, w, g)
    torch.testing.assert_close(h2.cpu(), want_h2, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(y.cpu(), want_y, atol=1e-4, rtol=1e-4)
    # The matmul stores h2 (its epilogue adds h) and, from h2 in SBUF, the normed rows:
    # one stage; the product, the square, the mean and the scaling never go to HBM.
    assert report.stages == 1 and report.fused == 6


def test_causal_attention_is_one_kernel():
    q, k, v = rand(2, 8, 16), rand(2, 8, 16, seed=1), rand(2, 8, 16, seed=2)
    mask = torch.full((8, 8), float("-inf")).triu(1)

    def attention(q, k, v, mask):
        scores = q @ k.transpose(-1, -2) * 0.25 + mask
        return torch.softmax(scores, dim=-1) @ v

    got, report = compiled_run(attention, q, k, v, mask)
    torch.testing.assert_close(got.cpu(), attention(q, k, v, mask), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    # q @ k^T computes the scores, scales and masks them and takes the softmax of each row
    # on chip: the product, the scaled and the masked scores never go to HBM. Two stages:
    # that matmul and the product with v.
    assert report.fused == 3 and report.stages == 2


def test_sdpa_and_its_backward_are_one_attention_stage_each():
    # Grouped-query causal attention: the fused op is one attention stage (the scores never
    # reach HBM), and its backward one attention_backward stage.
    q, k, v = rand(1, 4, 40, 16), rand(1, 2, 40, 16, seed=1), rand(1, 2, 40, 16, seed=2)

    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    with neuronsim.strict_mode():
        got, report = compiled_run(causal, q, k, v)
    torch.testing.assert_close(got.cpu(), causal(q, k, v), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.stages == 1 and report.eager == []

    for mask in (None, torch.randn(40, 40, generator=torch.Generator().manual_seed(3))):
        torch._dynamo.reset()
        compiler.reset_stats()

        def attention(q, k, v, mask):
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=True
            )

        grads = []
        compiled = torch.compile(attention, backend="neuron")
        for device, fn in (("cpu", attention), ("neuron", compiled)):
            leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
            with neuronsim.strict_mode():
                out = fn(*leaves, None if mask is None else mask.to(device))
                (out * torch.linspace(-1, 1, 16).to(device)).sum().backward()
            grads.append([t.grad.cpu() for t in leaves])
        for got_grad, want in zip(grads[1], grads[0]):
            torch.testing.assert_close(got_grad, want, atol=1e-4, rtol=1e-4)
        forward, backward = compiler.graphs()
        assert forward.stages == 1 and forward.eager == [] and backward.eager == []
        assert backward.kernels == 1 and backward.stages <= 3, backward


def test_a_product_over_a_vocabulary_long_k_runs_in_k_blocks_within_the_program():
    # An LM head's backward: grad_logits [T, V] @ W [V, H], K = V too long for one matmul
    # stage's A^T in SBUF; it runs as K blocks summed in FP32, in the same program.
    g = rand(8, 40_000).to(torch.bfloat16)
    w = rand(40_000, 16, seed=1).to(torch.bfloat16)

    def backward_of_head(g, w):
        return (g @ w) * 2.0

    with neuronsim.strict_mode():
        got, report = compiled_run(backward_of_head, g, w)
    expected = (g.float() @ w.float()) * 2.0
    torch.testing.assert_close(got.cpu().float(), expected, rtol=2e-2, atol=0.5)
    assert report.kernels == 1 and report.eager == []
    assert report.stages >= 5  # 5 blocks of 8192, their sums and the scaling


def test_views_of_an_expression_are_taken_of_its_leaves():
    x, y, z = rand(8, 16), rand(16, 8, seed=1), rand(3, 8, 16, seed=2)

    def fn(x, y, z):
        e = torch.exp(x * 2.0)
        return e.t() + y, e.unsqueeze(0).expand(3, 8, 16) * z

    (a, b), report = compiled_run(fn, x, y, z)
    want_a, want_b = fn(x, y, z)
    torch.testing.assert_close(a.cpu(), want_a, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.cpu(), want_b, atol=1e-4, rtol=1e-4)
    # e has two readers, so it is stored; x * 2 is computed on chip. Once e's transposed
    # and expanded views are read from e's place, both sums are one stage each.
    assert report.kernels == 1 and report.stages == 3 and report.fused == 1

    torch._dynamo.reset()
    compiler.reset_stats()

    def transposed(x, y):
        return torch.exp(x * 2.0).t() + y

    got, report = compiled_run(transposed, x, y)
    torch.testing.assert_close(got.cpu(), transposed(x, y), atol=1e-4, rtol=1e-4)
    # The transpose goes to x's leaf: the product and the exponential never leave SBUF.
    assert report.stages == 1 and report.fused == 2


def test_a_split_is_views_of_its_input():
    x, w = rand(6, 24), rand(24, 24, seed=1)

    def fn(x, w):
        q, k, v = F.linear(x, w).split([8, 8, 8], dim=-1)  # a fused QKV projection
        return torch.exp(q) + k * v

    got, report = compiled_run(fn, x, w)
    torch.testing.assert_close(got.cpu(), fn(x, w), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []
    assert report.stages == 2  # the projection, and the expression of its three slices


def test_a_slice_of_a_split_read_after_the_program_comes_from_an_output():
    x = rand(4, 12)

    def fn(x):
        a, b = (x * 2.0).split([4, 8], dim=-1)
        return a.t(), torch.exp(b)  # a view of a split's item leaves the program

    (a, b), report = compiled_run(fn, x)
    want_a, want_b = fn(x)
    torch.testing.assert_close(a.cpu(), want_a)
    torch.testing.assert_close(b.cpu(), want_b, atol=1e-5, rtol=1e-5)
    assert report.kernels == 1


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


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_an_embedding_lookup_is_a_gather_stage_of_the_program(index_dtype):
    table, ids = rand(1000, 48), torch.randint(0, 1000, (3, 70), generator=torch.Generator())

    def lookup(ids, table):
        return F.embedding(ids, table) * 2.0

    with neuronsim.strict_mode():
        got, report = compiled_run(lookup, ids.to(index_dtype), table)
    torch.testing.assert_close(got.cpu(), lookup(ids, table), atol=0, rtol=0)
    assert report.kernels == 1 and report.stages == 2 and report.eager == []


def test_an_inference_graph_keeps_its_weights_transposed_until_they_change():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.SiLU(), torch.nn.Linear(96, 32))
    model = model.to("neuron").eval()
    x = rand(8, 64).to("neuron")
    compiled = torch.compile(model, backend="neuron", dynamic=False)
    with torch.no_grad(), neuronsim.strict_mode():
        compiled(x)  # compiles, and lays out the two weights
        start = neuronsim.kernels_run()
        compiled(x)
        assert neuronsim.kernels_run() - start == 1  # the program alone: no transpose
        (report,) = compiler.graphs()
        assert report.kept_transposed == 2 and report.eager == []
        model[0].weight.mul_(-1.0)  # a new version: laid out again at the next call
        start = neuronsim.kernels_run()
        got = compiled(x)
        assert neuronsim.kernels_run() - start > 1
        expected = copy.deepcopy(model).cpu()(x.cpu())
        # Through .data, no version changes: forget_layouts() makes the next call see it.
        model[2].weight.data.mul_(2.0)
        compiler.forget_layouts()
        doubled = compiled(x)
        expected_doubled = copy.deepcopy(model).cpu()(x.cpu())
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(doubled.cpu(), expected_doubled, atol=1e-4, rtol=1e-4)


def test_an_empty_pass_through_slice_does_not_split_the_program():
    # Rotary over the whole head (Phi-3): the pass-through part q[..., 64:] is empty, and
    # is made from its meta without waiting for q.
    x, w = rand(2, 16, 32), rand(32, 32, seed=1)

    def partial(x, w):
        q = (x @ w).view(2, 16, 4, 8)
        rotated, passed = q[..., :8] * 2.0, q[..., 8:]
        return torch.cat([rotated, passed], dim=-1).sin() @ torch.ones(8, 3, device=x.device)

    with neuronsim.strict_mode():
        got, report = compiled_run(partial, x, w)
    torch.testing.assert_close(got.cpu(), partial(x, w), atol=1e-4, rtol=1e-4)
    assert report.kernels == 1 and report.eager == []


def test_values_of_no_graph_input_are_computed_once_at_compile():
    x = rand(4, 33)

    def shifted(x):  # int64 positions, which no engine holds
        positions = torch.arange(3, 3 + x.shape[-1], device=x.device) * 2
        return x + positions.to(x.dtype)

    compiled = torch.compile(shifted, backend="neuron", dynamic=False)
    with neuronsim.strict_mode():
        first, second = compiled(x.to("neuron")), compiled((x + 1).to("neuron"))
    torch.testing.assert_close(first.cpu(), shifted(x))
    torch.testing.assert_close(second.cpu(), shifted(x + 1))
    (report,) = compiler.graphs()
    assert report.constants == ["aten::_to_copy"] and report.eager == []
    assert report.kernels == 1


def test_a_value_of_no_input_that_the_graph_returns_is_made_at_every_call():
    def with_positions(x):
        return x * 2.0, torch.arange(5, device=x.device, dtype=torch.float32)

    compiled = torch.compile(with_positions, backend="neuron", dynamic=False)
    x = rand(5).to("neuron")
    _, positions = compiled(x)
    positions.add_(100.0)  # the caller's tensor: no later call may see this
    _, again = compiled(x)
    torch.testing.assert_close(again.cpu(), torch.arange(5, dtype=torch.float32))
    (report,) = compiler.graphs()
    assert report.constants == []


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


NEURON_SIM = pathlib.Path(__file__).resolve().parents[3] / "build" / "bin" / "neuron-sim"


@pytest.mark.skipif(not NEURON_SIM.exists(), reason="the CLI is built by the C++ build")
def test_the_cli_reads_and_runs_a_compiled_graphs_neff():

    x, w = rand(8, 16), rand(16, 4, seed=1)
    _, report = compiled_run(lambda x, w: torch.relu(x @ w) * 2.0, x, w)
    (neff,) = report.neffs
    info = subprocess.run([NEURON_SIM, "info", neff], capture_output=True, text=True, check=False)
    assert info.returncode == 0, info.stderr
    assert "producer neuronsim" in info.stdout and "executable by neuronsim: yes" in info.stdout
    run = subprocess.run(
        [NEURON_SIM, "run", neff, "--random-inputs"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "total simulated time" in run.stdout


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


# --- the tiny Qwen3 ---------------------------------------------------------------

# The Qwen3 forward's positions: int64 work from no input (the engines hold no int64),
# computed once when the graph compiles.
QWEN3_CONSTANTS = ["aten::_to_copy"]


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))


def test_the_tiny_qwen3_forward_is_one_kernel_with_the_values_of_eager_and_the_cpu(ids):
    from neuronsim.testing import tiny_qwen3

    model = tiny_qwen3().eval()
    with torch.no_grad():
        expected = model(ids).logits
        model = model.to("neuron")
        x = ids.to("neuron")
        start = neuronsim.kernels_run()
        eager = model(x).logits
        eager_kernels = neuronsim.kernels_run() - start
        compiled = torch.compile(model, backend="neuron", dynamic=False)
        with neuronsim.strict_mode():  # nothing runs outside the program
            compiled(x)
            start = neuronsim.kernels_run()
            got = compiled(x).logits
            compiled_kernels = neuronsim.kernels_run() - start
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.cpu(), eager.cpu(), atol=1e-5, rtol=1e-5)
    (report,) = compiler.graphs()
    assert report.name == "Qwen3Model.frame0.inference"
    assert report.kernels == 1
    assert report.eager == []
    assert report.constants == QWEN3_CONSTANTS
    assert report.fused > 50
    # The token lookup is the program's first stage: one kernel, against a kernel per op.
    assert compiled_kernels == 1 and eager_kernels > 100, eager_kernels
    assert compiler.stats().recompiles == 0


def test_a_compiled_training_step_gives_the_cpu_loss_and_gradients(ids):

    from neuronsim.testing import tiny_qwen3

    cpu_model = tiny_qwen3()
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    compiled = torch.compile(dev_model, backend="neuron", dynamic=False)
    expected = cpu_model(ids, labels=ids).loss
    expected.backward()
    x = ids.to("neuron")
    loss = compiled(x, labels=x).loss
    loss.backward()
    torch.testing.assert_close(loss.cpu(), expected.detach(), atol=1e-5, rtol=1e-5)
    for (name, p), q in zip(dev_model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5, rtol=1e-4, msg=name)
    forward, backward = compiler.graphs()
    assert forward.name.endswith(".forward") and backward.name.endswith(".backward")
    # Each splits once: at the gather of the targets' log-probabilities (forward) and
    # at the scatter of its gradient (backward), both indexed by int64 targets.
    assert forward.kernels == 2 and backward.kernels == 2
    assert backward.fused > 50


def test_generate_with_a_static_cache_and_compile_config_gives_the_eager_tokens(ids):
    from transformers import CompileConfig, GenerationConfig

    from neuronsim.testing import tiny_qwen3

    model = tiny_qwen3().eval().to("neuron")
    x = ids.to("neuron")
    expected = model.generate(x, max_new_tokens=6, do_sample=False)
    config = GenerationConfig(
        max_new_tokens=6,
        do_sample=False,
        cache_implementation="static",
        compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False),
    )
    got = model.generate(x, generation_config=config)
    assert torch.equal(got.cpu(), expected.cpu())
    # The decoding step compiles once (static shapes: every token has the same graph).
    assert compiler.stats().graphs == 1 and compiler.stats().recompiles == 0
    (report,) = compiler.graphs()
    assert report.kernels >= 1 and report.fused > 50


def test_the_trainer_picks_the_neuron_backend_and_trains_with_the_eager_losses(tmp_path):
    # TrainingArguments(torch_compile=True) chooses "neuron" when it sees the device; the
    # Trainer scales the compiled graph's loss in place, which a graph output that is a
    # view of a shared buffer would refuse.
    from transformers import Trainer, TrainingArguments

    from neuronsim.testing import tiny_qwen3

    rows = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(2))
    data = [{"input_ids": r, "labels": r} for r in rows]
    losses = {}
    for compile_ in (False, True):
        args = TrainingArguments(
            output_dir=str(tmp_path / str(compile_)),
            torch_compile=compile_,
            max_steps=2,
            per_device_train_batch_size=2,
            learning_rate=1e-3,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
        )
        if compile_:
            assert args.torch_compile_backend == "neuron"
        losses[compile_] = Trainer(model=tiny_qwen3(), args=args, train_dataset=data).train()
    assert losses[True].training_loss == pytest.approx(losses[False].training_loss, rel=1e-5)
    assert compiler.stats().graphs == 2  # the forward and the backward graph


def test_a_layer_norm_is_two_stages_and_gives_its_mean_and_rstd_for_training():
    x, g, b = rand(6, 40), rand(40, seed=1), rand(40, seed=2)

    def fn(x, g, b):
        return F.layer_norm(x * 2.0, (40,), g, b, eps=1e-5)

    got, report = compiled_run(fn, x, g, b)
    torch.testing.assert_close(got.cpu(), fn(x, g, b), atol=1e-5, rtol=1e-4)
    # x * 2 is stored for the mean's pass; the mean's stage writes x - mean, and the
    # variance's stage normalises, scales and shifts: three stages, no split.
    assert report.kernels == 1 and report.eager == [] and report.stages == 3

    torch._dynamo.reset()
    compiler.reset_stats()
    xs = x.to("neuron").requires_grad_()
    ws = g.to("neuron").requires_grad_()
    torch.compile(fn, backend="neuron")(xs, ws, b.to("neuron")).square().sum().backward()
    xc, wc = x.clone().requires_grad_(), g.clone().requires_grad_()
    fn(xc, wc, b).square().sum().backward()
    torch.testing.assert_close(xs.grad.cpu(), xc.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ws.grad.cpu(), wc.grad, atol=1e-4, rtol=1e-4)
    assert "aten::native_layer_norm" not in compiler.stats().eager_nodes


@pytest.mark.parametrize("model_type", ["gpt2", "phi3", "qwen3_moe", "bloom"])
def test_other_architectures_compile_to_the_eager_logits(model_type):
    # Layer norms and fused QKV splits (gpt2), a fused gate/up projection (phi3), expert
    # routing (qwen3_moe), ALiBi (bloom): compiled with no segment refused.
    from transformers import AutoModelForCausalLM

    from neuronsim.tools.architectures import tiny_config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(model_type)).eval().to("neuron")
    ids = torch.randint(3, 200, (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = model(ids.to("neuron")).logits.cpu()
        got = torch.compile(model, backend="neuron", dynamic=False)(ids.to("neuron")).logits
    torch.testing.assert_close(got.cpu(), eager, atol=1e-5, rtol=1e-5)
    assert compiler.graphs() and all(g.kernels >= 1 for g in compiler.graphs())

"""NKI kernels run unchanged on the simulator: values against NumPy, a deterministic
simulated latency, the mechanism that makes a blocked matmul faster, and errors that name
the tensor and the limit."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl
from neuronsim.tools.nki_kernels import (
    fused_attention,
    layer_norm,
    matmul_blocked,
    matmul_hoisted,
    matmul_naive,
    rms_norm,
    scaled_exp,
    selective_scan,
    softmax,
    tensor_add,
    top8,
    transpose,
)


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


def test_tiled_add_is_exact_and_its_latency_repeats():
    rng = np.random.default_rng(0)
    a, b = rng.random((256, 512), np.float32), rng.random((256, 512), np.float32)
    assert np.array_equal(tensor_add(a, b), a + b)
    first = tensor_add.last_run
    assert first.latency_us > 0
    assert first.count("tensor_tensor") == 2 and first.count("dma_copy") == 6
    assert first.dma_bytes == 3 * a.nbytes
    tensor_add(a, b)
    assert tensor_add.last_run.latency_us == first.latency_us  # deterministic


def test_activation_and_two_operator_tensor_scalar():
    x = np.linspace(-2, 2, 128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_allclose(scaled_exp(x), np.exp(2 * x) * 0.5 + 1, rtol=1e-6)


def test_rms_norm_softmax_and_transpose():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    w = rng.standard_normal((1, 384)).astype(np.float32)
    expected = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms_norm(x, w), expected, rtol=1e-5, atol=1e-5)
    assert rms_norm.last_run.count("dma_copy") == 1 + 2 * 2  # the weight once, broadcast
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.array_equal(transpose(x[:, :256]), x[:, :256].T)


def test_layer_norm_selective_scan_and_top8():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    w, b = rng.standard_normal((2, 1, 384)).astype(np.float32)
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    np.testing.assert_allclose(
        layer_norm(x, w, b), (x - mean) / np.sqrt(var + 1e-5) * w + b, rtol=1e-5, atol=1e-5
    )
    decay = rng.random((128, 64)).astype(np.float32)
    inputs = rng.standard_normal((128, 64)).astype(np.float32)
    h, state = np.zeros_like(inputs), np.zeros(128, np.float32)
    for t in range(64):  # the recurrence, step by step, in FP32 as the engine computes it
        state = decay[:, t] * state + inputs[:, t]
        h[:, t] = state
    np.testing.assert_allclose(selective_scan(decay, inputs), h, rtol=1e-6, atol=1e-6)
    values, positions = top8(x[:128])
    order = np.argsort(-x[:128], axis=1)[:, :8]
    assert np.array_equal(positions.astype(np.int64), order)
    assert np.array_equal(values, np.take_along_axis(x[:128], order, axis=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_attention(dtype):
    torch.manual_seed(5)
    q, k, v = (torch.randn(256, 128, dtype=dtype) for _ in range(3))
    expected = torch.softmax(q.float() @ k.float().T / 128**0.5, dim=-1) @ v.float()
    got = fused_attention(q.T.contiguous(), k.T.contiguous(), v)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2  # bf16 probabilities before P @ V
    np.testing.assert_allclose(got, expected.numpy(), rtol=tolerance, atol=tolerance)
    # q, k and v cross HBM once each, the fp32 output once: nothing else does.
    assert fused_attention.last_run.dma_bytes == 3 * q.numel() * q.element_size() + q.numel() * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matmuls_accumulate_over_k_tiles_in_psum(dtype):
    torch.manual_seed(0)
    lhs_t, rhs = torch.rand(256, 256, dtype=dtype), torch.rand(256, 1024, dtype=dtype)
    expected = (lhs_t.float().T @ rhs.float()).numpy()
    for kernel in (matmul_naive, matmul_hoisted):
        np.testing.assert_allclose(kernel(lhs_t, rhs), expected, rtol=1e-5, atol=1e-3)
    wide = torch.rand(256, 512, dtype=dtype)  # blocked over M: four 128-column tiles
    np.testing.assert_allclose(
        matmul_blocked(wide, rhs), (wide.float().T @ rhs.float()).numpy(), rtol=1e-5, atol=1e-3
    )


def test_loading_each_lhs_block_once_moves_fewer_bytes_and_runs_faster():
    torch.manual_seed(0)
    lhs_t, rhs = (
        torch.rand(512, 256, dtype=torch.bfloat16),
        torch.rand(512, 2048, dtype=torch.bfloat16),
    )
    matmul_naive(lhs_t, rhs)
    matmul_hoisted(lhs_t, rhs)
    naive, hoisted = matmul_naive.last_run, matmul_hoisted.last_run
    assert naive.count("matmul") == hoisted.count("matmul")
    assert hoisted.dma_bytes < naive.dma_bytes
    assert hoisted.latency_us < naive.latency_us


def test_targets_and_the_program_written_as_a_neff(tmp_path):
    a = np.ones((128, 64), np.float32)
    latencies = {}
    for target in ("trn1", "trn2", "trn3"):
        kernel = nki.jit(tensor_add.fn, target=target)
        assert np.array_equal(kernel(a, a), a + a)
        assert kernel.last_run.target == target
        latencies[target] = kernel.last_run.latency_us
    assert len(set(latencies.values())) > 1  # each generation's own figures
    path = tmp_path / "add.neff"
    tensor_add(a, a)
    tensor_add.last_run.program.write_neff(str(path))
    assert path.stat().st_size > 0
    assert "tensor_tensor" in tensor_add.last_run.program.disassemble()


def test_a_kernel_that_does_not_fit_sbuf_names_the_tensor_and_the_sizes():
    @nki.jit
    def too_big(x):
        nl.ndarray((128, 200_000), dtype=nl.float32, buffer=nl.sbuf, name="huge")
        return x

    with pytest.raises(
        nki.NkiError, match=r"huge \(allocated at .*\): 800000 bytes per partition in SBUF"
    ):
        too_big(np.zeros((1, 1), np.float32))


def test_bad_arguments_are_refused_with_the_instruction_and_tensor():
    @nki.jit
    def matmul_from_hbm(x):
        acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, x, x)
        return x

    with pytest.raises(nki.NkiError, match=r"nc_matmul stationary: x is in hbm, not in sbuf"):
        matmul_from_hbm(np.zeros((128, 128), np.float32))

    @nki.jit
    def too_many_partitions(x):
        nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf, name="tall")
        return x

    with pytest.raises(nki.NkiError, match=r"tall: partition dim 256 is outside 1..128"):
        too_many_partitions(np.zeros((1, 1), np.float32))


def test_calls_outside_a_kernel_say_so():
    with pytest.raises(nki.NkiError, match="inside a kernel"):
        nl.ndarray((128, 4), dtype=nl.float32)


def test_scripts_that_import_nki_run_through_the_launcher(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import nki
            import nki.isa as nisa
            import nki.language as nl

            @nki.jit
            def double(x_input):
                out = nl.ndarray(x_input.shape, dtype=x_input.dtype, buffer=nl.shared_hbm)
                x = nl.load(x_input)
                y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)
                nl.store(out, y)
                return out

            x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
            assert np.array_equal(double(x), 2 * x)
            print("latency", double.last_run.latency_us > 0)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.nki", str(script)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "latency True" in done.stdout


def test_a_kernel_on_neuron_tensors_runs_as_one_kernel_in_strict_mode():
    import neuronsim

    torch.manual_seed(0)
    a, b = torch.rand(256, 512), torch.rand(256, 512)

    class Model(torch.nn.Module):  # an NKI kernel between eager ops of a model
        def forward(self, x, y):
            return tensor_add(x * 2, y).relu()

    before = neuronsim.kernels_run()
    with neuronsim.strict_mode():
        out = Model()(a.to("neuron"), b.to("neuron"))
        lhs_t = torch.rand(256, 128, dtype=torch.bfloat16)
        rhs = torch.rand(256, 512, dtype=torch.bfloat16)
        product = matmul_naive(lhs_t.to("neuron"), rhs.to("neuron"))
    assert out.device.type == "neuron" and product.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), (a * 2 + b).relu())
    torch.testing.assert_close(product.cpu(), lhs_t.float().T @ rhs.float())
    assert neuronsim.kernels_run() - before == 4  # mul, the NKI kernel, relu; the matmul
    assert neuronsim.fallback_counts() == {}


def test_a_kernel_refuses_tensors_on_two_devices():
    a = torch.rand(128, 8)
    with pytest.raises(nki.NkiError, match="more than one device"):
        tensor_add(a.to("neuron"), a)


def test_an_instruction_the_hardware_refuses_is_reported_at_its_source_line():
    @nki.jit
    def too_wide(a_in, b_in):
        a, b = nl.load(a_in), nl.load(b_in)
        acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, a, b)  # the moving free size is at most 512
        return a_in

    line = too_wide.fn.__code__.co_firstlineno + 4
    with pytest.raises(nki.NkiError, match=rf"test_nki.py:{line}: matmul: .*exceeds 512"):
        too_wide(np.zeros((128, 128), np.float32), np.zeros((128, 1024), np.float32))


def test_activation_reduce_and_reciprocal():
    @nki.jit
    def exp_sum_and_inverse(x_in):
        sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        inverse = nl.ndarray(x_in.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(x_in)
        e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(e, nl.exp, x, reduce_op=nl.add, reduce_res=total)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(r, x)
        nl.store(sums, total)
        nl.store(inverse, r)
        return sums, inverse

    x = np.random.default_rng(6).random((128, 32), np.float32) + 0.5
    sums, inverse = exp_sum_and_inverse(x)
    np.testing.assert_allclose(sums[:, 0], np.exp(x).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(inverse, 1 / x, rtol=1e-6)


def test_a_kernel_inside_torch_compile_is_one_node_of_one_graph_in_strict_mode():
    import neuronsim
    import neuronsim.compiler

    class Model(torch.nn.Module):
        def forward(self, x, y):
            values, positions = top8(tensor_add(x * 2, y)[:128])
            return values.relu() + 1, positions

    torch._dynamo.reset()
    neuronsim.compiler.reset_stats()
    a, b = torch.rand(256, 512), torch.rand(256, 512)
    with neuronsim.strict_mode():
        values, positions = torch.compile(Model(), backend="neuron")(a.to("neuron"), b.to("neuron"))
    expected = torch.topk((a * 2 + b)[:128], 8)
    torch.testing.assert_close(values.cpu(), expected.values.relu() + 1)
    assert torch.equal(positions.cpu().to(torch.int64), expected.indices)
    stats = neuronsim.compiler.stats()
    assert stats.graphs == 1 and not stats.eager_nodes  # no graph break, no fallback
    assert neuronsim.fallback_counts() == {}


def test_torch_neuronx_nki_op_registers_a_custom_op_for_eager_and_compiled_use():
    import neuronsim
    import neuronsim.compiler
    import torch_neuronx

    @torch_neuronx.nki_op("neuronsim_tests::scaled_add", mutates_args=())
    def scaled_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return tensor_add(x, y) * 0.5

    a, b = torch.rand(256, 512), torch.rand(256, 512)
    with neuronsim.strict_mode():
        eager = scaled_add(a.to("neuron"), b.to("neuron"))
    torch.testing.assert_close(eager.cpu(), (a + b) * 0.5)
    assert torch.ops.neuronsim_tests.scaled_add.default is not None

    torch._dynamo.reset()
    neuronsim.compiler.reset_stats()
    with neuronsim.strict_mode():
        compiled = torch.compile(lambda x, y: scaled_add(x * 2, y).relu(), backend="neuron")(
            a.to("neuron"), b.to("neuron")
        )
    torch.testing.assert_close(compiled.cpu(), ((a * 2 + b) * 0.5).relu())
    assert neuronsim.compiler.stats().graphs == 1 and not neuronsim.compiler.stats().eager_nodes


NEURON_SIM = pathlib.Path(__file__).resolve().parents[3] / "build" / "bin" / "neuron-sim"


def test_a_run_writes_its_perfetto_trace(tmp_path):
    path = tmp_path / "add.json"
    kernel = nki.jit(tensor_add.fn, trace=str(path))
    a = np.ones((256, 512), np.float32)
    kernel(a, a)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e.get("name", "") for e in events}
    assert {"DMA transfers", "SBUF occupancy"} <= names, sorted(names)[:20]


@pytest.mark.skipif(not NEURON_SIM.exists(), reason="the CLI is built by the C++ build")
def test_the_neff_a_kernel_writes_runs_in_neuron_sim(tmp_path):
    a = np.ones((256, 512), np.float32)
    tensor_add(a, a)
    body_us = tensor_add.last_run.latency_us
    neff = tmp_path / "add.neff"
    tensor_add.last_run.program.write_neff(str(neff))
    info = subprocess.run([NEURON_SIM, "info", neff], capture_output=True, text=True)
    assert info.returncode == 0 and "a_input" in info.stdout, info.stderr
    run = subprocess.run(
        [NEURON_SIM, "run", neff, "--random-inputs", "--no-launch"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert f"total simulated time {body_us:.3f}" in run.stdout, run.stdout


def test_nki_jit_modes_and_target_aliases(monkeypatch):
    a = np.ones((128, 64), np.float32)
    for mode in ("auto", "baremetal", "simulation", "torchxla"):
        assert np.array_equal(nki.jit(tensor_add.fn, mode=mode)(a, a), 2 * a)
    assert np.array_equal(nki.jit("auto")(tensor_add.fn)(a, a), 2 * a)
    with pytest.raises(nki.NkiError, match="mode 'fast' is not one of"):
        nki.jit(tensor_add.fn, mode="fast")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")
    kernel = nki.jit(tensor_add.fn)
    kernel(a, a)
    assert kernel.last_run.target == "trn1"
    only_values = nki.jit(tensor_add.fn, sim_mode="functional-only")
    assert np.array_equal(only_values(a, a), 2 * a) and only_values.last_run.latency_us == 0


def test_a_kernel_is_built_once_per_layout_and_bf16_inputs_keep_their_nans():
    kernel = nki.jit(tensor_add.fn)
    a = np.ones((128, 64), np.float32)
    kernel(a, a)
    first = kernel.last_run.program
    kernel(2 * a, a)  # new values, the same layout: the same program
    assert kernel.last_run.program is first
    kernel(np.ones((256, 64), np.float32), np.ones((256, 64), np.float32))
    assert kernel.last_run.program is not first
    x = torch.tensor([[float("nan"), float("inf"), -1.5, 3.0e38]] * 128, dtype=torch.float32)
    out = kernel(x.numpy().astype(np.float32), np.zeros((128, 4), np.float32))
    assert np.isnan(out[:, 0]).all() and np.isinf(out[:, 1]).all()
    bf16 = kernel(x.to(torch.bfloat16), torch.zeros(128, 4, dtype=torch.bfloat16))
    assert np.isnan(bf16[:, 0]).all() and np.array_equal(bf16[:, 2], np.full(128, -1.5))
    # A NaN whose payload is in the low mantissa bits only stays a NaN, not an infinity.
    low_payload = np.full((128, 4), 0x7F800001, np.uint32).view(np.float32)
    assert np.isnan(_bits_roundtrip(low_payload)).all()


def _bits_roundtrip(values: np.ndarray) -> np.ndarray:
    from neuronsim.nki import _bits, _values

    return _values(_bits(values, "bfloat16"), "bfloat16", values.shape)


def test_the_run_gives_neuron_profiles_summary(tmp_path):
    path = tmp_path / "summary.json"
    kernel = nki.jit(tensor_add.fn, summary_json=str(path))
    a = np.ones((256, 512), np.float32)
    kernel(a, a)
    run = kernel.last_run
    written = json.loads(path.read_text())
    summary = next(iter(written.values()))  # as scripts read neuron-profile's
    assert summary["total_time"] == pytest.approx(run.latency_us * 1e-6, rel=1e-9)
    vector = run.engines["dve"]
    assert summary["vector_engine_instruction_count"] == vector["instructions"]
    assert summary["vector_engine_active_time"] == pytest.approx(vector["busy_ps"] * 1e-12)
    assert summary["hbm_read_bytes"] + summary["hbm_write_bytes"] == run.dma_bytes
    assert 0 < summary["dma_active_time"] <= summary["total_active_time"] <= summary["total_time"]
    # Without a file, the same figures (less the recorded unions) are on the run.
    assert run.profile_summary["nki_nc0"]["total_time"] == summary["total_time"]


@nki.jit
def row_block_add(a_input, b_input):
    """a + b, program i of the grid adding rows 128 i .. 128 i + 127."""
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    rows = slice(nl.program_id(0) * 128, (nl.program_id(0) + 1) * 128)
    a = nl.load(a_input[rows, :])
    b = nl.load(b_input[rows, :])
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    nl.store(out[rows, :], c)
    return out


def test_wrap_nki_calls_a_kernel_on_a_launch_grid():
    import torch_neuronx

    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(torch_neuronx.wrap_nki(tensor_add)[1](a, a), 2 * a)
    assert np.array_equal(torch_neuronx.wrap_nki(tensor_add)[(1, 1)](a, a), 2 * a)
    b = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)
    assert np.array_equal(torch_neuronx.wrap_nki(row_block_add)[4](b, b), 2 * b)

"""The legacy NKI surface (``from neuronxcc import nki``): index grids, instructions and
tile operations that return tiles, ``+=`` into PSUM, and the benchmark and simulate
entry points."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import neuronsim.nki.language as nl
import neuronsim.nki.legacy as nki
import neuronsim.nki.legacy.isa as nisa


@nki.jit
def add_legacy(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(a_input.shape[0] // 128):
        a = nl.load(a_input[m * 128 + ix, iy])
        b = nl.load(b_input[m * 128 + ix, iy])
        nl.store(c_output[m * 128 + ix, iy], value=a + b)
    return c_output


@nki.jit
def matmul_legacy(lhs_t, rhs):
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    result = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k, i_m = nl.arange(128)[:, None], nl.arange(128)[None, :]
    i_n = nl.arange(512)[None, :]
    for m in nl.affine_range(m_size // 128):
        for n in nl.affine_range(n_size // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                lhs_tile = nl.load(lhs_t[k * 128 + i_k, m * 128 + i_m])
                rhs_tile = nl.load(rhs[k * 128 + i_k, n * 512 + i_n])
                res_psum += nisa.nc_matmul(lhs_tile, rhs_tile)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * 128 + i_k, n * 512 + i_n], value=res_sb)
    return result


@nki.jit
def softmax_rows(x_in):
    """exp(x - max) / sum, per row, from tile operations."""
    out = nl.ndarray(x_in.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(x_in)
    shifted = nisa.tensor_scalar(x, nl.subtract, nl.max(x, axis=1, keepdims=True))
    e = nl.exp(shifted)
    total = nl.sum(e, axis=1, keepdims=True)
    nl.store(out, nisa.tensor_scalar(e, nl.divide, total))
    return out


def test_index_grids_and_tile_arithmetic():
    a = np.random.default_rng(0).random((256, 512), np.float32)
    assert np.array_equal(add_legacy(a, a), a + a)
    assert add_legacy.last_run.count("tensor_tensor") == 2


def test_matmul_accumulates_with_plus_equals_into_psum():
    rng = np.random.default_rng(1)
    lhs_t, rhs = rng.random((256, 256), np.float32), rng.random((256, 1024), np.float32)
    np.testing.assert_allclose(matmul_legacy(lhs_t, rhs), lhs_t.T @ rhs, rtol=1e-5, atol=1e-3)
    assert matmul_legacy.last_run.count("matmul") == 2 * 2 * 2


def test_reductions_and_per_row_operands():
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_rows(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_benchmark_and_simulate_kernel():
    a = np.ones((128, 512), np.float32)
    bench = nki.benchmark(warmup=2, iters=5)(add_legacy.fn)
    assert np.array_equal(bench(a, a), 2 * a)
    latency = bench.benchmark_result.nc_latency
    assert latency.get_latency_percentile(50) == latency.get_latency_percentile(99) > 0
    assert np.array_equal(nki.simulate_kernel(add_legacy, a, a), 2 * a)


def test_a_mask_that_is_not_index_comparisons_is_refused():
    @nki.jit
    def masked(x_in):
        x = nl.load(x_in)
        nl.exp(x, mask=x_in)
        return x_in

    with pytest.raises(nki.NkiError, match="mask= takes comparisons of nl.arange indices"):
        masked(np.zeros((128, 4), np.float32))


def test_scripts_that_import_neuronxcc_run_through_the_launcher(tmp_path):
    script = tmp_path / "legacy.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from neuronxcc import nki
            import neuronxcc.nki.language as nl

            @nki.jit
            def double(x_in):
                out = nl.ndarray(x_in.shape, dtype=x_in.dtype, buffer=nl.shared_hbm)
                i_p, i_f = nl.mgrid[0:128, 0:8]
                nl.store(out[i_p, i_f], value=nl.load(x_in[i_p, i_f]) * 2)
                return out

            x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
            assert np.array_equal(double(x), 2 * x)
            print("ok")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.nki", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

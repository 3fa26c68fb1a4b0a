"""NKI as kernel authors write it: tile assignment (``t[...] = ...``), block dims before
``par_dim``, views (reshape, ap), partition broadcasts, launch grids (SPMD), explicit
allocation (nki.compiler), nki.typing, non-tensor arguments and constants. Kernels of our
own in those styles, each against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl
from neuronsim.nki import legacy
from neuronsim.nki.legacy import isa as lisa

ncc = nki.compiler


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


# -- tile assignment and block dims ------------------------------------------------------
@legacy.jit
def blocked_matmul(lhs_t, rhs):
    """lhs_t.T @ rhs with the K tiles of each operand in a tensor of blocks
    (k, par_dim(128), n), filled by tile assignment, and the result assigned into PSUM."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    kt = k_size // 128
    result = nl.ndarray((m_size, n_size), nl.float32, buffer=nl.shared_hbm)
    lhs_tiles = nl.ndarray((kt, nl.par_dim(128), m_size), lhs_t.dtype, buffer=nl.sbuf)
    rhs_tiles = nl.ndarray((kt, nl.par_dim(128), n_size), rhs.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(kt):
        lhs_tiles[k] = nl.load(lhs_t[k * 128 : (k + 1) * 128, :])
        rhs_tiles[k, :, :] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
    acc = nl.ndarray((nl.par_dim(m_size), n_size), nl.float32, buffer=nl.psum)
    acc[...] = lisa.nc_matmul(lhs_tiles[0], rhs_tiles[0])
    for k in nl.affine_range(1, kt):
        acc[...] += lisa.nc_matmul(lhs_tiles[k], rhs_tiles[k])
    out = nl.ndarray((m_size, n_size), nl.float32, buffer=nl.sbuf)
    out[...] = nl.copy(acc)
    nl.store(result, out)
    return result


def test_tile_assignment_into_blocks_writes_the_tiles_in_place():
    rng = np.random.default_rng(2)
    lhs_t = rng.standard_normal((384, 128)).astype(np.float32)
    rhs = rng.standard_normal((384, 256)).astype(np.float32)
    np.testing.assert_allclose(blocked_matmul(lhs_t, rhs), lhs_t.T @ rhs, rtol=2e-2, atol=2e-1)
    run = blocked_matmul.last_run
    # Each load and the copy out of PSUM wrote its target directly: no extra copies.
    assert run.count("dma_copy") == 2 * 3 + 1 and run.count("tensor_copy") == 1


def test_an_assigned_tile_the_kernel_still_reads_is_copied():
    @legacy.jit
    def keep(a):
        out = nl.ndarray((2, 128, 64), a.dtype, buffer=nl.shared_hbm)
        kept = nl.ndarray((128, 64), a.dtype, buffer=nl.sbuf)
        tile = nl.load(a)
        kept[...] = tile  # tile is still used below: a copy, not a move
        doubled = nl.multiply(tile, 2.0)
        nl.store(out[0], kept)
        nl.store(out[1], doubled)
        return out

    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    got = keep(a)
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[1], 2 * a)


# -- views -------------------------------------------------------------------------------
@nki.jit
def pool_by_pattern(x, pool):
    """2-D average pooling of [C, H, W] with an access pattern over the loaded tile."""
    c, h, w = x.shape
    out = nl.ndarray((c, h // pool, w // pool), x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    windows = tile.ap([[h * w, c], [pool * w, h // pool], [pool, w // pool], [w, pool], [1, pool]])
    total = nl.ndarray((c, h // pool, w // pool), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=windows, axis=(3, 4))
    mean = nl.ndarray(total.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=mean, data=total, op0=nl.multiply, operand0=1.0 / (pool * pool))
    nisa.dma_copy(dst=out, src=mean)
    return out


def test_access_patterns_and_tuple_or_int_arguments_pass_through():
    x = np.random.default_rng(3).standard_normal((16, 8, 12)).astype(np.float32)
    want = x.reshape(16, 4, 2, 6, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(pool_by_pattern(x, 2), want, rtol=1e-5, atol=1e-6)


@nki.jit
def reshaped(x, shape):
    """x (HBM) reshaped to `shape` (a tuple argument), through SBUF as [128, -1]."""
    out = nl.ndarray(shape, x.dtype, buffer=nl.shared_hbm)
    flat = x.reshape((128, -1))
    tile = nl.ndarray(flat.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=flat)
    split = tile.reshape_dim(1, (4, -1)).flatten_dims(1, 2)
    nisa.dma_copy(dst=out.reshape((128, -1)), src=split)
    return out


def test_reshape_views_of_hbm_and_sbuf():
    x = np.arange(4 * 32 * 16, dtype=np.float32).reshape(4, 32, 16)
    np.testing.assert_array_equal(reshaped(x, (32, 4, 16)), x.reshape(32, 4, 16))
    with pytest.raises(nki.NkiError, match="not contiguous"):

        @nki.jit
        def strided(a):
            nl.load(a[:, 0:4].reshape((4, -1)))
            return a

        strided(np.zeros((128, 8), np.float32))


# -- partition broadcasts ---------------------------------------------------------------
@nki.jit
def scale_rows_by_one_row(x, row):
    """x * row, the [1, N] row loaded to one partition and broadcast to every partition."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    one = nl.ndarray(row.shape, row.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=one, src=row)
    every = nl.broadcast_to(one, x.shape)
    product = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=product, data1=tile, data2=every, op=nl.multiply)
    # The view form, read by an engine directly, is made a tile the same way.
    again = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=again, data1=product, data2=one.broadcast_to(x.shape), op=nl.divide)
    nl.store(out, again)
    return out


def test_a_one_partition_tile_broadcast_across_partitions():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 32)).astype(np.float32)
    row = (rng.random((1, 32)) + 0.5).astype(np.float32)
    got = scale_rows_by_one_row(x, row)
    np.testing.assert_allclose(got, x * row / row, rtol=1e-6)
    assert not np.any(got[1:] == 0)  # partitions 1..127 saw the row, not zeros


# -- launch grids ------------------------------------------------------------------------
@legacy.jit
def spmd_add(a, b):
    """a + b on a grid: program (i, j) adds the [128, 64] block (i, j)."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128
    cols = nl.program_id(1) * 64
    assert nl.num_programs(1) == a.shape[1] // 64 and nl.program_ndim() == 2
    x = nl.load(a[rows : rows + 128, cols : cols + 64])
    y = nl.load(b[rows : rows + 128, cols : cols + 64])
    nl.store(out[rows : rows + 128, cols : cols + 64], value=x + y)
    return out


def test_a_launch_grid_runs_every_program_into_one_shared_output():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 192)).astype(np.float32)
    b = rng.standard_normal((256, 192)).astype(np.float32)
    np.testing.assert_array_equal(spmd_add[2, 3](a, b), a + b)
    assert spmd_add.last_run.count("tensor_tensor") == 6
    # spmd_dim(1, nc(2)): one program on each of two cores, 2 along that dim in all.
    np.testing.assert_array_equal(spmd_add[nl.spmd_dim(1, nl.nc(2)), 3](a, b), a + b)
    np.testing.assert_array_equal(legacy.simulate_kernel(spmd_add[2, 3], a, b), a + b)
    bench = legacy.benchmark(warmup=1, iters=2)(spmd_add)
    np.testing.assert_array_equal(bench[2, 3](a, b), a + b)
    assert bench.benchmark_result.nc_latency.get_latency_percentile(99) > 0
    with pytest.raises(nki.NkiError, match=r"spmd_add\[0\]: a grid is one or more positive"):
        spmd_add[0](a, b)


# -- explicit allocation -----------------------------------------------------------------
def _rotating(buffers):
    @legacy.jit
    def rotating(x):
        """Row tiles loaded into tiles placed modulo `buffers`, all summed at the end:
        with fewer buffers than tiles, later loads overwrite tiles still to be read."""
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        n = x.shape[0] // 128
        tiles = nl.ndarray(
            (n, nl.par_dim(128), x.shape[1]),
            x.dtype,
            buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(buffers,)),
            name="tiles",
        )
        for i in nl.affine_range(n):
            tiles[i] = nl.load(x[i * 128 : (i + 1) * 128, :])
        total = nl.zeros((128, x.shape[1]), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(n):
            total[...] = nl.add(total, tiles[i])
        nl.store(out, nl.sum(total, axis=1, keepdims=True))
        return out

    return rotating


def test_modulo_allocation_places_tiles_and_the_check_finds_a_reuse_too_early():
    x = np.random.default_rng(6).standard_normal((512, 16)).astype(np.float32)
    want = x.reshape(4, 128, 16).sum(axis=(0, 2))[:, None]
    np.testing.assert_allclose(_rotating(4)(x), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(nki.NkiError, match=r"stale read .* tiles\[0\] .* tiles\[2\]"):
        _rotating(2)(x)


def test_psum_modulo_allocation_gives_each_block_a_bank():
    @legacy.jit
    def per_bank(a):
        out = nl.ndarray((4, 128, 128), nl.float32, buffer=nl.shared_hbm)
        identity = nl.shared_constant(np.identity(128, dtype=np.float32), dtype=nl.float32)
        eye = nl.load(identity)
        tile = nl.load(a)
        acc = nl.ndarray(
            (4, nl.par_dim(128), 128),
            nl.float32,
            buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(4,)),
        )
        for i in nl.affine_range(4):
            acc[i] = lisa.nc_matmul(eye, tile)
            nl.store(out[i], nl.multiply(nl.copy(acc[i]), float(i)))
        return out

    a = np.random.default_rng(7).standard_normal((128, 128)).astype(np.float32)
    got = per_bank(a)
    for i in range(4):
        np.testing.assert_allclose(got[i], i * a, rtol=2e-2, atol=2e-2)
    assert "psum.fp32[0:128]+4096" in per_bank.last_run.program.disassemble()  # bank 2


def test_force_auto_alloc_places_explicit_tensors_automatically():
    kernel = ncc.force_auto_alloc(_rotating(2))
    x = np.random.default_rng(8).standard_normal((512, 16)).astype(np.float32)
    np.testing.assert_allclose(
        kernel(x), x.reshape(4, 128, 16).sum(axis=(0, 2))[:, None], rtol=1e-4, atol=1e-4
    )


# -- nki.typing and the legacy measuring decorators --------------------------------------
def test_typed_arguments_benchmark_and_profile(tmp_path):
    @legacy.benchmark(save_neff_name=str(tmp_path / "exp.neff"))
    def exp_kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    got = exp_kernel(nki.typing.tensor[[128, 64], nl.float32])
    spec = nki.typing.tensor[[128, 64], nl.float32]
    np.testing.assert_allclose(got, np.exp(spec.values()), rtol=1e-5)
    assert (tmp_path / "exp.neff").stat().st_size > 0
    profiled = legacy.profile(working_directory=str(tmp_path / "prof"))(exp_kernel)
    assert profiled(np.zeros((128, 8), np.float32)) is None
    assert (tmp_path / "prof" / "file.neff").exists()
    assert (tmp_path / "prof" / "profile.json").exists()


# -- tile arithmetic broadcasts ------------------------------------------------------------
@legacy.jit
def normalized_rows(x_in):
    """(x - mean) * rsqrt(var + eps) per row, with [P, 1] statistics against [P, F] rows
    on either side of the operators, and a [1, F] row broadcast across partitions."""
    out = nl.ndarray(x_in.shape, nl.float32, buffer=nl.shared_hbm)
    x = nl.load(x_in)
    n = x_in.shape[1]
    mean = nl.sum(x, axis=1, keepdims=True) * (1.0 / n)
    centred = x - mean
    var = nl.sum(centred * centred, axis=1, keepdims=True) * (1.0 / n)
    scaled = nl.rsqrt(var + 1e-5) * centred
    ones = nl.full((1, n), 2.0, nl.float32)
    nl.store(out, scaled * ones)
    return out


def test_tile_arithmetic_broadcasts_per_partition_values_and_rows():
    x = np.random.default_rng(10).standard_normal((64, 32)).astype(np.float32)
    mean = x.mean(axis=1, keepdims=True)
    want = 2 * (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(normalized_rows(x), want, rtol=1e-3, atol=1e-3)
    # The statistics were per-partition scalars; only the row needed a DMA (its broadcast).
    assert normalized_rows.last_run.count("dma_copy") == 3


@legacy.jit
def matmul_by_nl_matmul(lhs_t, rhs):
    """lhs_t.T @ rhs as the legacy tutorial writes it: psum += nl.matmul(..., transpose_x)."""
    k_size, m_size = lhs_t.shape
    result = nl.ndarray((m_size, rhs.shape[1]), nl.float32, buffer=nl.shared_hbm)
    psum = nl.zeros((m_size, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(k_size // 128):
        lhs_tile = nl.ndarray((128, m_size), lhs_t.dtype, buffer=nl.sbuf)
        rhs_tile = nl.ndarray((128, rhs.shape[1]), rhs.dtype, buffer=nl.sbuf)
        lhs_tile[...] = nl.load(lhs_t[k * 128 : (k + 1) * 128, :])
        rhs_tile[...] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
        psum += nl.matmul(lhs_tile[...], rhs_tile[...], transpose_x=True)
    nl.store(result, nl.copy(psum))
    return result


def test_adding_a_fresh_product_to_psum_accumulates_on_tensor_e():
    rng = np.random.default_rng(11)
    lhs_t = rng.standard_normal((384, 128)).astype(np.float32)
    rhs = rng.standard_normal((384, 256)).astype(np.float32)
    np.testing.assert_allclose(matmul_by_nl_matmul(lhs_t, rhs), lhs_t.T @ rhs, rtol=2e-2, atol=2e-1)
    run = matmul_by_nl_matmul.last_run
    assert run.count("matmul") == 3 and run.count("tensor_tensor") == 0


@legacy.jit
def transposed_by_pe(x):
    """x.T through TensorE's transpose mode, as NKI describes it: the tile is the
    stationary, the identity the moving, the result a float32 PSUM tile."""
    out = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.shared_hbm)
    eye = nl.load(nl.shared_constant(np.identity(x.shape[0], dtype=np.float32), dtype=x.dtype))
    tile = nl.load(x)
    psum = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.psum)
    psum[...] = lisa.nc_matmul(tile, eye, is_transpose=True, is_moving_onezero=True)
    nl.store(out, nl.copy(psum))
    return out


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_transpose_mode_transposes_the_stationary_tile(dtype):
    import torch

    x = np.random.default_rng(12).standard_normal((128, 64)).astype(np.float32)
    x[3, 5] = np.inf
    arg = torch.from_numpy(x).to(torch.bfloat16) if dtype == "bfloat16" else x
    want = arg.float().numpy() if dtype == "bfloat16" else x
    got = transposed_by_pe(arg)
    np.testing.assert_array_equal(got, want.T)  # bit exact: the inf stays where it was
    assert "transpose=true" in transposed_by_pe.last_run.program.disassemble()

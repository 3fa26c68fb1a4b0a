"""TensorE's modes through nc_matmul: the tiling mode (tile_position, tile_size: placed, values
unchanged), FP8 double performance mode (perf_mode=double_row, [K, 2, *] operands contracting
over K x 2 at twice the FP8 throughput, NeuronCore-v3 and newer), the one-zero hints (half the
FP32 passes; an operand that breaks the hint is refused), and FP32 transposes (NeuronCore-v2
has no transpose mode: an FP32 matmul)."""

from __future__ import annotations

import numpy as np
import pytest

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


def _matmul_kernel(double_row, dtypes=(nl.float8_e4m3, nl.float8_e5m2)):
    """out = a.T @ b through one PSUM tile, a and b loaded (and cast) into SBUF tiles of
    `dtypes`; double_row True or False, or a perf_mode to pass as it is."""

    def kernel(a, b):
        m, n = a.shape[-1], b.shape[-1]
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray(a.shape, dtype=dtypes[0], buffer=nl.sbuf)
        bt = nl.ndarray(b.shape, dtype=dtypes[1], buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        product = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        modes = {True: nisa.matmul_perf_mode.double_row, False: nisa.matmul_perf_mode.none}
        nisa.nc_matmul(product, at, bt, perf_mode=modes.get(double_row, double_row))
        res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=product)
        nisa.dma_copy(dst=out, src=res)
        return out

    return kernel


def _quarters(shape, seed):
    """Multiples of 1/4 in [-2, 2): exact in both FP8 formats, and their products' sums in FP32."""
    return np.random.default_rng(seed).integers(-8, 8, shape).astype(np.float32) / 4


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_double_row_contracts_two_rows_in_every_partition(target):
    a, b = _quarters((128, 2, 64), 0), _quarters((128, 2, 512), 1)
    out = nki.jit(_matmul_kernel(True), target=target)(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.einsum("kri,krj->ij", a, b))


def test_double_row_doubles_fp8_throughput():
    """A contraction of 256 in double_row takes the time of a plain FP8 contraction of 128."""
    plain = nki.jit(_matmul_kernel(False), target="trn2")
    double = nki.jit(_matmul_kernel(True), target="trn2")
    plain(_quarters((128, 128), 0), _quarters((128, 512), 1))
    double(_quarters((128, 2, 128), 0), _quarters((128, 2, 512), 1))
    assert double.last_run.engines["pe"]["busy_ps"] == plain.last_run.engines["pe"]["busy_ps"]


def test_double_row_is_refused_where_it_does_not_exist_or_does_not_fit():
    with pytest.raises(nki.NkiError, match="double_row needs NeuronCore-v3 or newer; trn1"):
        nki.jit(_matmul_kernel(True), target="trn1")(
            _quarters((128, 2, 8), 0), _quarters((128, 2, 8), 1)
        )
    with pytest.raises(nki.NkiError, match=r"double_row needs stationary as \[K, 2, \.\.\.\]"):
        nki.jit(_matmul_kernel(True), target="trn2")(_quarters((128, 8), 0), _quarters((128, 8), 1))
    with pytest.raises(nki.NkiError, match="double_row multiplies FP8, not bfloat16"):
        nki.jit(_matmul_kernel(True, (nl.bfloat16, nl.bfloat16)), target="trn2")(
            _quarters((128, 2, 8), 0), _quarters((128, 2, 8), 1)
        )
    with pytest.raises(nki.NkiError, match="perf_mode 'quad' \\(none or double_row\\)"):
        nki.jit(_matmul_kernel("quad"), target="trn2")(
            _quarters((128, 2, 8), 0), _quarters((128, 2, 8), 1)
        )


def _hinted_kernel(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    bt = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a)
    nisa.dma_copy(dst=bt, src=b)
    product = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(product, at, bt, is_moving_onezero=True)
    res = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=product)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_one_zero_hints_halve_fp32_and_refuse_other_values():
    a = _quarters((128, 128), 0)
    mask = (np.random.default_rng(2).random((128, 512)) < 0.5).astype(np.float32)
    hinted = nki.jit(_hinted_kernel, target="trn1")
    np.testing.assert_allclose(np.asarray(hinted(a, mask)), a.T @ mask, rtol=1e-6)
    plain = nki.jit(_matmul_kernel(False, (nl.float32, nl.float32)), target="trn1")
    plain(a, mask)
    # 512 columns and the weights' load (ceil(128 / 4) = 32: nothing before it hides it) in 2
    # FP32 passes against 4, at trn1's 2.8 GHz.
    for kernel, passes in ((hinted, 2), (plain, 4)):
        want_ps = passes * (512 + 32) / 2.8 * 1e3
        assert kernel.last_run.engines["pe"]["busy_ps"] == pytest.approx(want_ps, rel=1e-3)
    mask[3, 7] = 2.0
    with pytest.raises(RuntimeError, match="moving_onezero says moving holds only 0 and 1"):
        hinted(a, mask)


def _transpose_kernel(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    flipped = nl.ndarray(out.shape, dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=tile)
    res = nl.ndarray(out.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=flipped)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize(("target", "passes"), [("trn1", 4), ("trn2", 2)])
def test_an_fp32_transpose_costs_the_matmul_it_is(target, passes):
    x = _quarters((128, 128), 3)
    kernel = nki.jit(_transpose_kernel, target=target)
    np.testing.assert_array_equal(np.asarray(kernel(x)), x.T)
    clock_ghz = 2.8 if target == "trn1" else 2.4
    # max(P, min(64, F)) = 128 cycles, and the load of the data (ceil(128 / 4) = 32), each
    # times the FP32 passes: nothing runs on TensorE before it to hide the load.
    want_ps = passes * (128 + 32) / clock_ghz * 1e3
    assert kernel.last_run.engines["pe"]["busy_ps"] == pytest.approx(want_ps, rel=1e-3)


def _tiled_kernel(tile):
    """Four [tile, tile] x [tile, 512] products, each in its own part of the PE array."""

    def kernel(g, h):
        out = nl.ndarray((4, tile, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in range(4):
            gt = nl.ndarray((tile, tile), dtype=nl.bfloat16, buffer=nl.sbuf)
            ht = nl.ndarray((tile, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=gt, src=g[i])
            nisa.dma_copy(dst=ht, src=h[i])
            product = nl.ndarray((tile, 512), dtype=nl.float32, buffer=nl.psum)
            place = ((i % 2) * tile, (i // 2) * tile)
            nisa.nc_matmul(product, gt, ht, tile_position=place, tile_size=(tile, tile))
            res = nl.ndarray((tile, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=product)
            nisa.dma_copy(dst=out[i], src=res)
        return out

    return kernel


def test_tiling_mode_places_matmuls_without_changing_them():
    g, h = _quarters((4, 64, 64), 4), _quarters((4, 64, 512), 5)
    out = nki.jit(_tiled_kernel(64), target="trn1")(g, h)
    np.testing.assert_array_equal(np.asarray(out), np.einsum("bkm,bkn->bmn", g, h))
    # NeuronCore-v2 splits its array in halves only; v3 in quarters too.
    g, h = _quarters((4, 32, 32), 4), _quarters((4, 32, 512), 5)
    np.testing.assert_array_equal(
        np.asarray(nki.jit(_tiled_kernel(32), target="trn2")(g, h)), np.einsum("bkm,bkn->bmn", g, h)
    )
    with pytest.raises(
        nki.NkiError, match="tile position row=32 must be a multiple of 64 below 128 on trn1"
    ):
        nki.jit(_tiled_kernel(32), target="trn1")(g, h)


def test_tiling_mode_refuses_a_tile_that_does_not_hold_the_matmul():
    def kernel(position, size):
        def body(a, b):
            out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
            at = nl.ndarray((64, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
            bt = nl.ndarray((64, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=at, src=a)
            nisa.dma_copy(dst=bt, src=b)
            product = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(product, at, bt, tile_position=position, tile_size=size)
            return out

        return nki.jit(body, target="trn2")

    a, b = _quarters((64, 64), 6), _quarters((64, 512), 7)
    with pytest.raises(nki.NkiError, match="needs both tile_position and tile_size"):
        kernel((0, 0), ())(a, b)
    with pytest.raises(
        nki.NkiError, match=r"stationary \[64, 64\] does not fit tile_size \(32, 32\)"
    ):
        kernel((0, 0), (32, 32))(a, b)
    with pytest.raises(nki.NkiError, match=r"\(32, 0\) is not a multiple of tile_size \(64, 64\)"):
        kernel((32, 0), (64, 64))(a, b)


def test_the_beta_api_takes_double_row_and_tiles():
    import neuronsim.nki.legacy as legacy
    import neuronsim.nki.legacy.isa as legacy_isa

    @legacy.jit
    def kernel(a, b):
        out = nl.ndarray((a.shape[2], b.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray(a.shape, dtype=nl.float8_e5m2, buffer=nl.sbuf)
        at[...] = nl.load(a)
        bt = nl.ndarray(b.shape, dtype=nl.float8_e5m2, buffer=nl.sbuf)
        bt[...] = nl.load(b)
        nl.store(out, value=legacy_isa.nc_matmul(at, bt, perf_mode="double_row_gen3"))
        return out

    a, b = _quarters((128, 2, 16), 8), _quarters((128, 2, 512), 9)
    out = kernel(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.einsum("kri,krj->ij", a, b))

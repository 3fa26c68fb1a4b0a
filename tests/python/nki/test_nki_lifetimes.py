"""Where on-chip tensors live: a tile is live from its first use to its last, so tiles
kept in a list are distinct buffers and a loop's dead tiles give their bytes back; what
does not fit is refused by name; the checking mode fails any read of overwritten data."""

from __future__ import annotations

import numpy as np
import pytest

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl
from neuronsim.nki import legacy
from neuronsim.nki.legacy import isa as lisa


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


@nki.jit
def matmul_from_tile_lists(lhs_t, rhs):
    """lhs_t.T @ rhs with every K tile of a row block loaded once into a list, and the rhs
    tiles of each column block into another: the tiles of a list are read long after
    later ones were allocated at the same line."""
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    result = nl.ndarray((m_size, n_size), nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        lhs_tiles = []
        for k in nl.affine_range(k_size // 128):
            tile = nl.ndarray((128, 128), lhs_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=lhs_t[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
            lhs_tiles.append(tile)
        for n in nl.affine_range(n_size // 256):
            rhs_tiles = []
            for k in nl.affine_range(k_size // 128):
                tile = nl.ndarray((128, 256), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=tile, src=rhs[k * 128 : (k + 1) * 128, n * 256 : (n + 1) * 256])
                rhs_tiles.append(tile)
            acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                nisa.nc_matmul(dst=acc, stationary=lhs_tiles[k], moving=rhs_tiles[k])
            out = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m * 128 : (m + 1) * 128, n * 256 : (n + 1) * 256], src=out)
    return result


def test_tiles_kept_in_a_list_are_distinct_buffers():
    rng = np.random.default_rng(0)
    lhs_t = rng.standard_normal((512, 256)).astype(np.float32)
    rhs = rng.standard_normal((512, 512)).astype(np.float32)
    got = matmul_from_tile_lists(lhs_t, rhs)
    np.testing.assert_allclose(got, lhs_t.T @ rhs, rtol=2e-2, atol=2e-1)
    run = matmul_from_tile_lists.last_run
    # Four lhs tiles (256 B) and four rhs tiles (1 KiB) per partition are live at once.
    assert run.peak_bytes["sbuf"] >= 4 * 512 + 4 * 1024
    assert run.count("matmul") == 2 * 2 * 4


@nki.jit
def two_loops_of_wide_tiles(x):
    """Two loops, each of three 64 KiB tiles that die within their iteration: six such
    tiles never live at once."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for _ in nl.sequential_range(2):
        for i in nl.affine_range(3):
            tile = nl.load(x[i * 128 : (i + 1) * 128, :])
            doubled = nl.ndarray(tile.shape, tile.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
            nl.store(out[i * 128 : (i + 1) * 128, :], doubled)
    return out


def test_dead_tiles_of_a_loop_give_their_bytes_back():
    x = np.random.default_rng(1).standard_normal((384, 16384 // 2)).astype(np.float32)
    np.testing.assert_array_equal(two_loops_of_wide_tiles(x), 2 * x)
    peak = two_loops_of_wide_tiles.last_run.peak_bytes["sbuf"]
    assert peak <= 3 * 32768  # at most tile, doubled and one more tile of 32 KiB


def _all_at_once(doubled: bool):
    @nki.jit
    def all_at_once(x):
        """Eight 32 KiB tiles made before any is read: 256 KiB live in trn2's 224 KiB of
        SBUF per partition, unless some wait in HBM. Loaded tiles can be loaded again;
        computed ones (`doubled`) must be stored first."""
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for i in nl.affine_range(8):
            tile = nl.load(x[:, i * 8192 : (i + 1) * 8192], name="wide")
            if doubled:
                twice = nl.ndarray(tile.shape, tile.dtype, buffer=nl.sbuf, name="twice")
                nisa.tensor_scalar(dst=twice, data=tile, op0=nl.multiply, operand0=2.0)
                tile = twice
            tiles.append(tile)
        total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=total, op=nl.add, data=tiles[0], axis=1)
        for t in tiles[1:]:
            part = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=part, op=nl.add, data=t, axis=1)
            nisa.tensor_tensor(dst=total, data1=total, data2=part, op=nl.add)
        nl.store(out, total)
        return out

    return all_at_once


@pytest.mark.parametrize("doubled", [False, True], ids=["loaded", "computed"])
def test_live_tiles_past_sbuf_are_spilled_to_hbm_and_read_back(doubled):
    kernel = _all_at_once(doubled)
    x = np.random.default_rng(2).standard_normal((128, 8 * 8192)).astype(np.float32)
    got = kernel(x)
    np.testing.assert_allclose(got[:, 0], (1 + doubled) * x.sum(axis=1), rtol=1e-4, atol=1e-3)
    run = kernel.last_run
    assert run.peak_bytes["sbuf"] <= 224 * 1024
    spilled = [s for s in run.spills if " to HBM" in s]
    assert spilled, run.spills
    if doubled:
        # A store after the tile's last use before the crowded point, a load back before
        # its next use: two DMAs each.
        assert all(s.startswith("twice") and s.endswith("to HBM") for s in spilled), spilled
        assert run.count("dma_copy") == 8 + 1 + 2 * len(spilled)
    else:
        # Loaded from x and not written since: only the load again.
        assert all(s.startswith("wide") and "loaded again from x" in s for s in spilled)
        assert run.count("dma_copy") == 8 + 1 + len(spilled)


def test_a_tile_written_through_an_index_output_is_stored_when_spilled():
    # idx is loaded, then overwritten as match_replace8's index output: spilled, it must be
    # stored (its load again would bring back the values it was loaded with).
    width = 28672  # two [2, width] fp32 tiles fill trn2's 224 KiB per partition

    @nki.jit
    def indices_kept_past_a_crowd(x, data, indices):
        out = nl.ndarray((1, 8), nl.uint32, buffer=nl.shared_hbm)
        total = nl.ndarray((2, width), nl.float32, buffer=nl.shared_hbm)
        idx = nl.load(indices, name="idx")
        values = nl.load(data)
        found = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=found, data=values, vals=values, imm=0.0, dst_idx=idx)
        a = nl.load(x[:, :width], name="a")
        b = nl.load(x[:, width:], name="b")
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nl.store(total, a)
        nl.store(out, idx)
        return out, total

    data = np.arange(8, dtype=np.float32)[None, ::-1].copy()
    got, total = indices_kept_past_a_crowd(
        np.ones((2, 2 * width), np.float32), data, np.full((1, 8), 99, np.uint32)
    )
    # Where data's eight largest are, largest first (7 at 0, 6 at 1, ...): not the 99s loaded.
    np.testing.assert_array_equal(got[0], np.arange(8))
    np.testing.assert_array_equal(total, 2.0)
    spills = indices_kept_past_a_crowd.last_run.spills
    assert spills == [s for s in spills if "loaded again" not in s] and spills


def test_a_register_load_places_the_kernel_so_far_without_spilling():
    # register_load runs the kernel traced so far: tiles its variables hold for later
    # instructions must stay where they are, so a crowd there is refused, saying why.
    width, wide = 8192, 25600

    @nki.jit
    def crowded_before_a_register(x, index):
        out = nl.ndarray((1, width), nl.float32, buffer=nl.shared_hbm)
        acc = nl.load(x[:, :width], name="acc")
        a = nl.load(x[:, width : width + wide], name="a")
        b = nl.load(x[:, width + wide :], name="b")
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        register = nisa.register_alloc()
        nisa.register_load(register, index)
        nl.store(out, acc)
        return out

    with pytest.raises(nki.NkiError, match="no tile is spilled while register_load"):
        crowded_before_a_register(
            np.zeros((1, width + 2 * wide), np.float32), np.zeros((1, 1), np.int32)
        )


def test_a_register_load_spills_no_psum_tile_either():
    # Twelve products in PSUM's eight banks, all made before any is read, then a
    # register_load, then one read again: a PSUM spill would leave that read on the tile it
    # copied, so the crowd is refused here too.
    @nki.jit
    def products_across_a_register(a, b, index):
        out = nl.ndarray((13, 128, 512), nl.float32, buffer=nl.shared_hbm)
        a_tile = nl.load(a)
        products = []
        for i in range(12):
            product = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(product, a_tile, nl.load(b[i * 128 : (i + 1) * 128, :]))
            products.append(product)
        for i, product in enumerate(products):
            nl.store(out[i], nl.copy(product))
        register = nisa.register_alloc()
        nisa.register_load(register, index)
        nl.store(out[12], nl.copy(products[0]))
        return out

    with pytest.raises(nki.NkiError, match="no tile is spilled while register_load"):
        products_across_a_register(
            np.zeros((128, 128), np.float32),
            np.zeros((12 * 128, 512), np.float32),
            np.zeros((1, 1), np.int32),
        )


def test_live_tiles_that_do_not_fit_are_refused_with_the_tensor_site_and_bytes():
    @nki.jit
    def one_wide_sum(x):
        """One instruction reads two 96 KiB tiles and writes a third: nothing live there
        can wait in HBM."""
        out = nl.ndarray((128, 24576), nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x[:, :24576], name="left")
        b = nl.load(x[:, 24576:], name="right")
        total = nl.ndarray((128, 24576), nl.float32, buffer=nl.sbuf, name="wide")
        nisa.tensor_tensor(dst=total, data1=a, data2=b, op=nl.add)
        nl.store(out, total)
        return out

    with pytest.raises(
        nki.NkiError,
        match=r"wide \(allocated at .*test_nki_lifetimes.py:\d+\): 98304 bytes per "
        r"partition in SBUF do not fit .* live in 2 tensors \(largest: (left|right).*"
        r"no tile live there can be spilled to HBM",
    ):
        one_wide_sum(np.zeros((128, 2 * 24576), np.float32))


def _aliased(check):
    @nki.jit(check=check)
    def aliased(a, b):
        """Two tensors the kernel put at the same address: b's load overwrites a's data
        before a is stored."""
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        first = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf, address=(0, 0), name="first")
        second = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf, address=(0, 0), name="second")
        nisa.dma_copy(dst=first, src=a)
        nisa.dma_copy(dst=second, src=b)
        nisa.dma_copy(dst=out, src=first)
        return out

    return aliased


def test_the_checking_mode_fails_a_read_of_overwritten_data():
    a, b = np.ones((128, 64), np.float32), np.full((128, 64), 2.0, np.float32)
    with pytest.raises(
        nki.NkiError,
        match=r"stale read at .*test_nki_lifetimes.py:\d+: dma_copy src: first .* reads "
        r"bytes that second \(allocated at .*\) overwrote",
    ):
        _aliased(check=None)(a, b)  # on in the tests (NEURONSIM_NKI_CHECK=1)
    # Unchecked, the kernel runs and reads what the hardware would: b's values.
    np.testing.assert_array_equal(_aliased(check=False)(a, b), b)


def test_the_checking_mode_names_reads_of_bytes_nothing_wrote():
    @nki.jit
    def unwritten(a):
        """The last tile has 64 rows: exp runs on all 128 partitions (64 never written), as
        a masked kernel computes on its tail, and only the loaded rows are stored."""
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for t in nl.affine_range(2):
            rows = min(128, a.shape[0] - t * 128)
            tile = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf, name="padded")
            nisa.dma_copy(dst=tile[0:rows, :], src=a[t * 128 : t * 128 + rows, :])
            e = nl.ndarray(tile.shape, a.dtype, buffer=nl.sbuf)
            nisa.activation(dst=e, op=nl.exp, data=tile)
            nisa.dma_copy(dst=out[t * 128 : t * 128 + rows, :], src=e[0:rows, :])
        return out

    a = np.random.default_rng(9).standard_normal((192, 8)).astype(np.float32)
    np.testing.assert_allclose(unwritten(a), np.exp(a), rtol=1e-5)
    reads = unwritten.last_run.unwritten_reads
    assert len(reads) == 1 and reads[0].endswith("activation src: padded")


def test_automatic_tiles_keep_clear_of_explicit_addresses():
    @nki.jit
    def beside(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        pinned = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=pinned, src=a)
        tile = nl.load(a)  # automatic: placed past the pinned bytes
        total = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=tile, data2=pinned, op=nl.add)
        nl.store(out, total)
        return out

    a = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    np.testing.assert_array_equal(beside(a), 2 * a)


@legacy.jit
def products_kept_in_psum(a, b):
    """Twelve [128, 512] products (a bank each) all made before any is read: more than
    PSUM's eight banks are live, so some are spilled to SBUF."""
    n = b.shape[0] // 128
    out = nl.ndarray((n, 128, 512), nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.load(a)
    products = nl.ndarray((n, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(n):
        products[i] = lisa.nc_matmul(a_tile, nl.load(b[i * 128 : (i + 1) * 128, :]))
    for i in nl.affine_range(n):
        nl.store(out[i], nl.multiply(products[i], 2.0))
    return out


def test_psum_tiles_live_past_psum_are_spilled_to_sbuf():
    rng = np.random.default_rng(13)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((12 * 128, 512)).astype(np.float32)
    want = np.stack([2 * a.T @ b[i * 128 : (i + 1) * 128] for i in range(12)])
    np.testing.assert_allclose(products_kept_in_psum(a, b), want, rtol=1e-4, atol=1e-3)
    run = products_kept_in_psum.last_run
    assert run.peak_bytes["psum"] <= 8 * 2048
    assert len(run.spills) >= 4 and run.count("tensor_scalar") == 12


@legacy.jit
def accumulate_into_a_fresh_tile(lhs_t, rhs):
    """psum[...] += product over K tiles into a PSUM tile nothing initialised: the first
    product starts the accumulation, as NKI's accumulation groups do."""
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    psum = nl.ndarray((nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhs_t.shape[0] // 128):
        lhs = nl.load(lhs_t[k * 128 : (k + 1) * 128, :])
        rhs_tile = nl.load(rhs[k * 128 : (k + 1) * 128, :])
        psum[...] += lisa.nc_matmul(lhs, rhs_tile)
    nl.store(out, nl.copy(psum))
    return out


def test_the_first_product_added_to_an_unwritten_psum_tile_starts_the_sum():
    rng = np.random.default_rng(14)
    lhs_t = rng.standard_normal((384, 128)).astype(np.float32)
    rhs = rng.standard_normal((384, 512)).astype(np.float32)
    # A PSUM bank that held something before: the sum must not start from it.
    np.testing.assert_allclose(
        accumulate_into_a_fresh_tile(lhs_t, rhs), lhs_t.T @ rhs, rtol=2e-2, atol=2e-1
    )
    assert accumulate_into_a_fresh_tile.last_run.program.disassemble().count("accumulate=true") == 2

"""The nki.isa instructions that reduce into VectorE's accumulator, scalar_tensor_tensor,
range_select, select_reduce, the DMA transpose, DMA between HBM tensors, iota and
affine_select; tensors at explicit addresses; and the legacy API's masks. Values against
NumPy, programs by their instructions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import neuronsim
import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl
from neuronsim.nki import legacy

FP32_MIN = float(np.finfo(np.float32).min)


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


def _row(x):
    """An input of [P] values as the [P, 1] column NKI keeps per-partition scalars in."""
    return np.ascontiguousarray(np.asarray(x, np.float32).reshape(-1, 1))


@nki.jit
def scaled_row_sums(x):
    """Row sums of 2x over two column tiles: the second folds into the first's accumulator."""
    out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    half = x.shape[1] // 2
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    for k in nl.static_range(2):
        tile = nl.load(x[:, k * half : (k + 1) * half])
        scaled = nl.ndarray(tile.shape, nl.float32, buffer=nl.sbuf)
        last = k == 1
        nisa.tensor_scalar_reduce(
            dst=scaled,
            data=tile,
            op0=nl.multiply,
            operand0=2.0,
            reduce_op=nl.add,
            reduce_res=total if last else None,
            reduce_cmd=nisa.reduce_cmd.reduce if k else nisa.reduce_cmd.reset_reduce,
        )
    nl.store(out, total)
    return out


def test_tensor_scalar_reduce_chains_through_the_accumulator():
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    np.testing.assert_allclose(scaled_row_sums(x)[:, 0], 2 * x.sum(axis=1), rtol=1e-5, atol=1e-4)
    run = scaled_row_sums.last_run
    assert run.count("tensor_scalar") == 2 and run.count("tensor_reduce") == 0


@nki.jit
def centred_product(x, y, mean):
    """(x - mean) * y with the row means as per-partition scalars, and each row's sum."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    xt, yt, m = nl.load(x), nl.load(y), nl.load(mean)
    r = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(
        dst=r,
        data=xt,
        op0=nl.subtract,
        operand0=m,
        op1=nl.multiply,
        operand1=yt,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
        reduce_op=nl.add,
        reduce_res=s,
    )
    nl.store(out, r)
    nl.store(sums, s)
    return out, sums


def test_scalar_tensor_tensor_with_a_per_partition_scalar_and_its_reduction():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 128, 64)).astype(np.float32)
    mean = _row(x.mean(axis=1))
    got, sums = centred_product(x, y, mean)
    want = (x - mean) * y
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sums[:, 0], want.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert centred_product.last_run.count("scalar_tensor_tensor") == 1


@nki.jit
def banded_max(scores, lo, hi):
    """Keep the columns j with lo[p] <= j < hi[p] (a causal or sliding window), FP32_MIN
    elsewhere, in bf16; the row maximum over two column blocks, chained."""
    out = nl.ndarray(scores.shape, nl.bfloat16, buffer=nl.shared_hbm)
    row_max = nl.ndarray((scores.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    lo_t, hi_t = nl.load(lo), nl.load(hi)
    best = nl.ndarray((scores.shape[0], 1), nl.float32, buffer=nl.sbuf)
    block = scores.shape[1] // 2
    for k in nl.static_range(2):
        tile = nl.load(scores[:, k * block : (k + 1) * block])
        kept = nl.ndarray(tile.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.range_select(
            dst=kept,
            on_true_tile=tile,
            comp_op0=nl.greater_equal,
            comp_op1=nl.less,
            bound0=lo_t,
            bound1=hi_t,
            reduce_cmd=nisa.reduce_cmd.reduce if k else nisa.reduce_cmd.reset_reduce,
            reduce_res=best if k else None,
            range_start=k * block,
        )
        nl.store(out[:, k * block : (k + 1) * block], kept)
    nl.store(row_max, best)
    return out, row_max


def test_range_select_masks_a_window_and_keeps_the_fp32_row_maximum():
    rng = np.random.default_rng(2)
    scores = rng.standard_normal((128, 128)).astype(np.float32)
    p = np.arange(128)
    lo, hi = np.maximum(p - 16, 0), p + 1  # a sliding window of 17 ending on the diagonal
    hi[5] = 0  # one row keeps nothing
    out, row_max = banded_max(scores, _row(lo), _row(hi))
    j = np.arange(128)[None, :]
    keep = (j >= lo[:, None]) & (j < hi[:, None])
    want = np.where(keep, torch.tensor(scores).bfloat16().float().numpy(), -np.inf)
    assert np.array_equal(out, want)  # FP32_MIN rounds to -inf in bf16
    masked_max = np.where(keep, scores, FP32_MIN).max(axis=1)
    assert np.array_equal(row_max[:, 0], masked_max)  # the accumulator keeps FP32's minimum
    assert row_max[5, 0] == FP32_MIN


@nki.jit
def clipped_max(x, threshold):
    """x where x > threshold[p] (else -1), and each row's maximum."""
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    best = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    xt, t = nl.load(x), nl.load(threshold)
    above = nl.ndarray(x.shape, nl.uint8, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=above, data=xt, op0=nl.greater, operand0=t)
    kept = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    row = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(
        dst=kept,
        predicate=above,
        on_true=xt,
        on_false=-1.0,
        reduce_res=row,
        reduce_cmd=nisa.reduce_cmd.reset_reduce,
    )
    nl.store(out, kept)
    nl.store(best, row)
    return out, best


def test_select_reduce_with_a_scalar_on_false():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    t = _row(rng.standard_normal(64) + 1)
    out, best = clipped_max(x, t)
    want = np.where(x > t, x, -1)
    assert np.array_equal(out, want)
    assert np.array_equal(best[:, 0], want.max(axis=1))


@nki.jit
def transposed(x):
    out = nl.ndarray((x.shape[-1], *x.shape[1:-1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(out.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x)
    nl.store(out, t)
    return out


@nki.jit
def transposed_by_pattern(x):
    """The same transpose as a plain DMA whose source walks columns: one piece per element."""
    out = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(out.shape, x.dtype, buffer=nl.sbuf)
    for p in nl.static_range(x.shape[1]):
        nisa.dma_copy(dst=t[p : p + 1, :], src=x[:, p : p + 1])
    nl.store(out, t)
    return out


def test_dma_transpose_is_bit_exact_in_two_and_three_dims_and_beats_a_strided_copy():
    x = torch.randn(128, 128, dtype=torch.bfloat16)
    got = transposed(x)
    assert np.array_equal(got, x.float().T.numpy())
    assert transposed.last_run.count("dma_copy") == 2
    cube = torch.randn(4, 8, 16, dtype=torch.bfloat16)  # axes (2, 1, 0)
    assert np.array_equal(transposed(cube), cube.float().permute(2, 1, 0).numpy())
    transposed(x)
    fast = transposed.last_run.latency_us
    assert np.array_equal(transposed_by_pattern(x), x.float().T.numpy())
    assert fast < transposed_by_pattern.last_run.latency_us / 2


@nki.jit
def copied_between_hbm_tensors(x):
    """x copied to a new HBM tensor by one DMA, then its first rows loaded from the copy and
    doubled: the load waits for the HBM-to-HBM copy; and a number stored (a memset tile)."""
    copy = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=copy, src=x)
    doubled = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(copy[0:128, :])
    twice = nl.ndarray(tile.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=twice, data=tile, op0=nl.multiply, operand0=2.0)
    nl.store(doubled, twice)
    sevens = nl.ndarray((128, 4), x.dtype, buffer=nl.shared_hbm)
    nl.store(sevens, 7)
    return copy, doubled, sevens


def test_dma_copy_between_hbm_tensors_and_a_stored_number():
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    copy, doubled, sevens = copied_between_hbm_tensors(x)
    np.testing.assert_array_equal(copy, x)
    np.testing.assert_array_equal(doubled, 2 * x[:128])
    np.testing.assert_array_equal(sevens, np.full((128, 4), 7, np.float32))
    with pytest.raises(nki.NkiError, match="store: value 'seven' is neither a tile nor a number"):

        @nki.jit
        def stores_a_word(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            nl.store(out, "seven")
            return out

        stores_a_word(x)


def test_dma_transpose_refuses_what_the_hardware_cannot():
    with pytest.raises(nki.NkiError, match="2-byte elements"):
        transposed(np.ones((16, 16), np.float32))
    with pytest.raises(nki.NkiError, match=r"axes \(0, 1\)"):

        @nki.jit
        def wrong_axes(x):
            t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=x, axes=(0, 1))
            return x

        wrong_axes(torch.ones(16, 16, dtype=torch.bfloat16))


@nki.jit
def causal_fill(x):
    """iota of the column index minus the partition, and the causal (lower) triangle of x."""
    idx = nl.ndarray(x.shape, nl.int32, buffer=nl.shared_hbm)
    low = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    i = nl.ndarray(x.shape, nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=i, pattern=[[1, x.shape[1]]], offset=0, channel_multiplier=-1)
    t = nl.load(x)
    kept = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.affine_select(
        dst=kept,
        pattern=[[-1, x.shape[1]]],
        channel_multiplier=1,
        on_true_tile=t,
        on_false_value=-9.0,
        cmp_op=nl.greater_equal,
    )
    nl.store(idx, i)
    nl.store(low, kept)
    return idx, low


def test_iota_and_affine_select_in_the_current_api():
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    idx, low = causal_fill(x)
    p, j = np.indices((64, 64))
    assert np.array_equal(idx, j - p)
    assert np.array_equal(low, np.where(p - j >= 0, x, -9))


@nki.jit
def pinned(a):
    """Tiles at explicit addresses: partitions 32.. of SBUF byte 4096, and PSUM bank 2."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf, address=(32, 4096))
    nisa.dma_copy(dst=t, src=a)
    acc = nl.ndarray(a.shape, nl.float32, buffer=nl.psum, address=(0, 2 * 2048))
    nisa.tensor_copy(dst=acc, src=t)
    nl.store(out, acc)
    return out


def test_explicit_addresses_place_tensors_there():
    a = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    assert np.array_equal(pinned(a), a)
    text = pinned.last_run.program.disassemble()
    assert "sbuf.fp32[32:32]+4096[[1,16]]" in text
    assert "psum.fp32[0:32]+4096[[1,16]]" in text


@pytest.mark.parametrize(
    "buffer, address, message",
    [
        (nl.sbuf, (120, 0), "partitions 120..151"),
        (nl.sbuf, (0, 1 << 20), "outside SBUF"),
        (nl.psum, (0, 100), "does not start a bank"),
        (nl.sbuf, (0, 2), "not a multiple of its float32 elements"),
    ],
)
def test_explicit_addresses_that_do_not_fit_are_refused(buffer, address, message):
    @nki.jit
    def bad(a):
        nl.ndarray((32, 16), nl.float32, buffer=buffer, address=address)
        return a

    with pytest.raises(nki.NkiError, match=message):
        bad(np.ones((32, 16), np.float32))


# -- the legacy API's masks ---------------------------------------------------------------
@legacy.jit
def legacy_tail_exp(x):
    """exp(x) in 128-row tiles; the last tile is partly outside x, so a mask cuts it."""
    out = legacy.language.ndarray(x.shape, x.dtype, buffer=legacy.language.shared_hbm)
    rows, cols = x.shape
    i_p, i_f = legacy.language.mgrid[0:128, 0:cols]
    for t in legacy.language.affine_range((rows + 127) // 128):
        inside = t * 128 + i_p < rows
        tile = legacy.language.load(x[t * 128 + i_p, i_f], mask=inside)
        e = legacy.language.exp(tile, mask=inside)
        legacy.language.store(out[t * 128 + i_p, i_f], value=e, mask=inside)
    return out


def test_legacy_masks_cut_the_tail_tile_of_every_instruction():
    x = np.linspace(-3, 3, 300 * 24, dtype=np.float32).reshape(300, 24)
    np.testing.assert_allclose(legacy_tail_exp(x), np.exp(x), rtol=1e-6)
    text = legacy_tail_exp.last_run.program.disassemble()
    # The third tile covers rows 256..299: 44 partitions, in its load, its exp and its store.
    cut = [line for line in text.splitlines() if "[0:44]" in line]
    assert len(cut) == 3 and all("[24,44]" in line for line in cut if "dma_copy" in line)


@legacy.jit
def legacy_transposed_load(x):
    out = legacy.language.ndarray(
        (x.shape[1], x.shape[0]), x.dtype, buffer=legacy.language.shared_hbm
    )
    legacy.language.store(out, value=legacy.language.load_transpose2d(x))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_load_transpose2d(dtype):
    x = torch.randn(96, 64, dtype=dtype)
    assert np.array_equal(legacy_transposed_load(x), x.float().T.numpy())
    text = legacy_transposed_load.last_run.program.disassemble()
    assert ("transpose=true" in text) == (dtype == torch.bfloat16)


def test_masks_that_are_not_rectangles_are_refused():
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    with pytest.raises(nki.NkiError, match="two indices"):
        _ = i_p < i_f
    with pytest.raises(nki.NkiError, match="only & is supported"):
        _ = (i_p < 3) | (i_f < 4)


# -- registers and loops with run-time bounds ---------------------------------------------
@nki.jit
def doubled_tiles(x, count):
    """Doubles the first `count` 128-row tiles of x (count: an int32 input read into a
    register), leaving the rest of the output as it starts (zeros)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tiles = nisa.register_alloc()
    nisa.register_load(tiles, count)

    def body(i):
        rows = nl.ds(i * 128, 128)
        t = nl.load(x[rows, :])
        nl.store(out[rows, :], nl.multiply(t, 2.0))

    nl.fori_loop(0, tiles, body)
    return out


def test_fori_loop_unrolls_with_the_value_a_register_load_reads():
    x = np.random.default_rng(4).standard_normal((512, 32)).astype(np.float32)
    for n in (1, 3):
        got = doubled_tiles(x, np.array([[n]], np.int32))
        assert np.array_equal(got[: 128 * n], 2 * x[: 128 * n])
        assert not got[128 * n :].any()
        # The load of the count, then a load and a store per tile.
        assert doubled_tiles.last_run.count("dma_copy") == 1 + 2 * n


@nki.jit
def halvings(x, start):
    """Halves x while a counter on the chip, counted down by VectorE, is nonzero."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    value = nl.load(x)
    counter = nl.load(start)
    cond = nisa.register_alloc()
    nisa.register_load(cond, counter)

    def body(_cond):
        nisa.tensor_scalar(dst=value, data=value, op0=nl.multiply, operand0=0.5)
        nisa.tensor_scalar(dst=counter, data=counter, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, counter)
        return nxt

    nl.while_loop(cond, body)
    nl.store(out, value)
    return out


def test_while_loop_reads_each_condition_from_what_the_program_computed():
    x = np.full((8, 8), 64.0, np.float32)
    assert np.array_equal(halvings(x, np.array([[3]], np.int32)), x / 8)
    assert halvings.last_run.count("tensor_scalar") == 6
    assert np.array_equal(halvings(x, np.array([[0]], np.int32)), x)  # a new program


def test_registers_hold_integers_and_are_refused_elsewhere():
    @nki.jit
    def from_floats(x):
        r = nisa.register_alloc()
        nisa.register_load(r, x[0:1, 0:1])
        return x

    with pytest.raises(nki.NkiError, match="registers hold integers"):
        from_floats(np.ones((4, 4), np.float32))

    @nki.jit
    def two_elements(x):
        nisa.register_load(nisa.register_alloc(), x[0:1, 0:2])
        return x

    with pytest.raises(nki.NkiError, match=r"is not one element"):
        two_elements(np.ones((4, 4), np.int32))


@legacy.jit
def legacy_masked_row_sums(x):
    """Row sums of the columns from 8 on, by a mask on the free index."""
    out = legacy.language.ndarray((x.shape[0], 1), x.dtype, buffer=legacy.language.shared_hbm)
    i_p, i_f = legacy.language.mgrid[0 : x.shape[0], 0 : x.shape[1]]
    tile = legacy.language.load(x[i_p, i_f])
    sums = legacy.language.sum(tile[i_p, i_f], axis=1, mask=(i_f >= 8))
    legacy.language.store(out, value=sums)
    return out


def test_a_mask_on_the_free_index_keeps_a_one_column_result_whole():
    x = np.arange(32 * 24, dtype=np.float32).reshape(32, 24)
    np.testing.assert_allclose(legacy_masked_row_sums(x)[:, 0], x[:, 8:].sum(axis=1), rtol=1e-6)


def test_indices_past_their_dim_and_masks_on_matmul_are_refused():
    @legacy.jit
    def past_the_end(x):
        i_p, i_f = legacy.language.mgrid[0:32, 0:128]
        t = legacy.language.load(x)
        legacy.language.exp(t[i_p, i_f])  # t has 64 columns
        return x

    with pytest.raises(nki.NkiError, match="dim 1 is indexed to 128 positions but has 64"):
        past_the_end(np.ones((32, 64), np.float32))

    @legacy.jit
    def masked_matmul(a, b):
        i_k = legacy.language.arange(128)[:, None]
        i_m = legacy.language.arange(128)[None, :]
        ta, tb = legacy.language.load(a), legacy.language.load(b)
        legacy.language.matmul(ta[i_k, i_m], tb, transpose_x=True, mask=(i_k < 100))
        return a

    with pytest.raises(nki.NkiError, match="mask= on matmul is not supported yet"):
        masked_matmul(np.ones((128, 128), np.float32), np.ones((128, 128), np.float32))


def test_dma_transpose_of_a_wide_three_dimensional_source():
    cube = torch.randn(4, 16, 16, dtype=torch.bfloat16)  # 256 elements per row: 16 partitions
    assert np.array_equal(transposed(cube), cube.float().permute(2, 1, 0).numpy())


def test_register_store_refuses_what_it_cannot_keep_exactly():
    @nki.jit
    def store_big(x):
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_store(t, nisa.register_alloc(1 << 25))
        return x

    with pytest.raises(nki.NkiError, match="beyond 2\\^24"):
        store_big(np.ones((1, 1), np.float32))


def test_a_register_bounded_kernel_on_the_device_builds_once_per_value():
    x = torch.randn(384, 32)
    count = torch.tensor([[2]], dtype=torch.int32)
    xd, cd = x.to("neuron"), count.to("neuron")
    before = neuronsim.kernels_built()
    for _ in range(3):
        got = doubled_tiles(xd, cd)
    assert neuronsim.kernels_built() - before == 1
    assert torch.equal(got.cpu()[:256], 2 * x[:256])
    doubled_tiles(xd, torch.tensor([[3]], dtype=torch.int32).to("neuron"))
    assert neuronsim.kernels_built() - before == 2

"""When the Sync engine triggers each DMA (nki/_schedule.py): a load that waits on nothing
goes ahead of the stores that wait on compute, never above an instruction that touches what
it touches, so the values stay those of program order."""

from __future__ import annotations

import numpy as np
import pytest

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl

ROWS = 4


@pytest.fixture(autouse=True)
def timed(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_MODE", "functional-and-timing")


def _add_one(x, out, b, tile=None, done=None) -> None:
    """Block b of 128 rows: loaded, one added on VectorE, stored (into new tiles unless
    given): the store waits for the add, the next block's load for nothing."""
    rows = slice(b * 128, (b + 1) * 128)
    tile = tile if tile is not None else nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    done = done if done is not None else nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[rows, :])
    nisa.tensor_scalar(dst=done, data=tile, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out[rows, :], src=done)


@nki.jit
def add_one_per_block(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(ROWS):
        _add_one(x, out, b)
    return out


@nki.jit
def add_one_in_one_tile(x):
    """The same through one tile placed once: each load overwrites what the add before it
    read, so it may not go above that add."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    done = nl.ndarray((128, x.shape[1]), x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(ROWS):
        _add_one(x, out, b, tile, done)
    return out


@nki.jit
def add_one_in_order(x):
    """add_one_per_block with its loop kept in program order."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for b in nl.sequential_range(ROWS, directives=nl.no_reorder()):
        _add_one(x, out, b)
    return out


@nki.jit
def add_one_with_a_block_in_order(x):
    """add_one_per_block with the second block in a no_reorder block: its load stays below
    the first block's store, and the third block's load does not pass it."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(ROWS):
        if b == 1:
            with nl.no_reorder():
                _add_one(x, out, b)
        else:
            _add_one(x, out, b)
    return out


def _sync_dmas(run) -> list[str]:
    """The Sync engine's DMAs in its order: ("load", row) or ("store", row)."""
    order = []
    for line in run.program.disassemble().splitlines():
        words = line.split()
        if words[:2] != ["sp", "dma_copy"]:
            continue
        fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        kind = "store" if fields["dst"].startswith("hbm") else "load"
        place = fields["dst"] if kind == "store" else fields["src"]
        offset = int(place.split(")+", 1)[1].split("[", 1)[0])
        order.append((kind, offset))
    return order


def _x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((ROWS * 128, 256)).astype(np.float32)


def test_loads_go_ahead_of_stores_that_wait_on_compute():
    x = _x()
    np.testing.assert_allclose(add_one_per_block(x), x + 1, rtol=1e-6)
    order = _sync_dmas(add_one_per_block.last_run)
    loads = [o for k, o in order if k == "load"]
    assert loads == sorted(loads), "loads keep their program order"
    assert [k for k, _ in order] == ["load"] * ROWS + ["store"] * ROWS, order


def test_a_load_never_passes_an_instruction_that_reads_what_it_overwrites():
    x = _x()
    np.testing.assert_allclose(add_one_in_one_tile(x), x + 1, rtol=1e-6)
    order = [k for k, _ in _sync_dmas(add_one_in_one_tile.last_run)]
    # Each load goes above the store before it (they touch different tiles), but not above
    # the add that reads the tile it overwrites, which comes before that store.
    assert order == ["load", "load", "store", "load", "store", "load", "store", "store"], order


def test_loads_ahead_of_stores_shorten_a_dma_bound_kernel():
    x = _x()
    add_one_per_block(x)
    ahead = add_one_per_block.last_run.latency_us
    add_one_in_one_tile(x)
    behind = add_one_in_one_tile.last_run.latency_us
    assert ahead < behind


def test_no_reorder_keeps_program_order():
    x = _x()
    np.testing.assert_allclose(add_one_in_order(x), x + 1, rtol=1e-6)
    order = [k for k, _ in _sync_dmas(add_one_in_order.last_run)]
    assert order == ["load", "store"] * ROWS, order
    np.testing.assert_allclose(add_one_with_a_block_in_order(x), x + 1, rtol=1e-6)
    order = [k for k, _ in _sync_dmas(add_one_with_a_block_in_order.last_run)]
    assert order == ["load", "store", "load", "store", "load", "load", "store", "store"], order

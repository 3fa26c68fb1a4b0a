"""Who makes a DMA's descriptors (nki.isa.dge_mode): pre-built by default, the hardware DGE
of the Sync or Scalar engine (about 600 ns per instruction, NeuronCore-v3+), or GpSimd's
software DGE. The values are the same in every mode; only the time differs."""

from __future__ import annotations

import numpy as np
import pytest

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl

LOADS = 16


def _copy_in_pieces(x, mode=None, engine=None):
    """x loaded in LOADS pieces (by `mode`), then stored. The stores, with descriptors built
    before the run, are on another queue than hardware-DGE loads, so each waits for its load:
    all the loads go first, as a scheduler would issue them."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = [nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf) for _ in range(LOADS)]
    for i, t in enumerate(tiles):
        nisa.dma_copy(dst=t, src=x[:, i * 64 : (i + 1) * 64], dge_mode=mode, engine=engine)
    for i, t in enumerate(tiles):
        nisa.dma_copy(dst=out[:, i * 64 : (i + 1) * 64], src=t)
    return out


def _run(target, mode=None, engine=None):
    x = np.arange(128 * 64 * LOADS, dtype=np.float32).reshape(128, 64 * LOADS)
    kernel = nki.jit(_copy_in_pieces, target=target, sim_mode="functional-and-timing")
    out = np.asarray(kernel(x, mode, engine))
    np.testing.assert_array_equal(out, x)
    return kernel.last_run


def test_the_hardware_dge_costs_each_load_its_descriptors_time():
    plain = _run("trn2")
    for engine in (None, nisa.engine.sync, nisa.engine.scalar):
        dge = _run("trn2", nisa.dge_mode.hwdge, engine)
        # Sixteen loads wait on one DGE in turn: about 600 ns each, less what overlaps.
        extra_us = dge.latency_us - plain.latency_us
        assert 0.5 * 0.6 * LOADS < extra_us < 0.6 * LOADS * 1.1, (engine, extra_us)
    assert (
        _run("trn2", nisa.dge_mode.hwdge, nisa.engine.scalar).engines["act"]["instructions"]
        == LOADS
    )


def test_pre_built_and_software_descriptors_need_no_dge():
    plain = _run("trn2")
    assert _run("trn2", nisa.dge_mode.none).latency_us == plain.latency_us
    assert _run("trn2", nisa.dge_mode.unknown).latency_us == plain.latency_us
    assert _run("trn2", nisa.dge_mode.swdge).engines["pool"]["instructions"] == LOADS


def test_trn1_has_no_hardware_dge():
    with pytest.raises(Exception, match=r"hardware DGE \(hwdge\) needs NeuronCore-v3 or newer"):
        _run("trn1", nisa.dge_mode.hwdge)
    with pytest.raises(Exception, match="triggered by the Sync or Scalar engine"):
        _run("trn2", nisa.dge_mode.hwdge, nisa.engine.gpsimd)
    with pytest.raises(Exception, match="not one of nki.isa.dge_mode"):
        _run("trn2", 7)

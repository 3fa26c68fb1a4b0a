"""Kernels of the calibration set (spec/calibration/), written after the algorithms whose
hardware times are published, and the command that times one of them for
``neuron-sim correlate`` (case kind ``nki``).

The four versions of the NKI matrix-multiplication tutorial, out = lhsT.T @ rhs in bf16 with
lhsT [K, M] and rhs [K, N]; each keeps the tutorial's loop order, tile shapes and blocking,
since those decide what the DMA engines and TensorE do:

* ``matmul_tiled``: per [128, 512] output tile, both operands' K tiles loaded again;
* ``matmul_hoist_load``: a column block of lhsT loaded once per 128 output rows, every rhs
  tile of the output tile loaded before its matmuls;
* ``matmul_block_free``: 2 x 2 output tiles per block, each operand tile loaded once per block;
* ``matmul_fully_optimized``: blocks of 16 x 2 x 8 tiles (M x N x K), the partial sums
  accumulated in SBUF by VectorE, each output row block stored once.

The three versions of the fused Mamba tutorial (a selective-scan layer over delta, u
[batch, channels, seq_len], A [channels, states], B, C [batch, states, seq_len], fp32):
``mamba_v1`` (states outside channel tiles), ``mamba_v2`` (channel tiles outside, delta and u
loaded once), ``mamba_v3`` (the sequence in chunks of 512, the scan carried between them).

Command (what ``neuron-sim correlate`` runs for a case of kind ``nki``)::

    python -m neuronsim.tools.calibration matmul_tiled --target trn1 \\
        --shape 4096x8192x8192 --metrics out.json

writes the kernel's simulated latency (timing-only mode, no launch) as a metrics file:
``{"metrics": [{"name": "latency_ns", "value": ..., "unit": "ns"}, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import neuronsim.nki as nki
import neuronsim.nki.isa as nisa
import neuronsim.nki.language as nl

TILE_M, TILE_K, TILE_N = 128, 128, 512  # stationary free, partitions, moving free


def _evacuate_and_store(out, rows: slice, cols: slice, acc) -> None:
    """PSUM accumulator -> bf16 SBUF tile -> HBM."""
    res = nl.ndarray((TILE_M, TILE_N), dtype=out.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(res, acc)
    nl.store(out[rows, cols], res)


def matmul_tiled(lhs_t, rhs):
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    out = nl.ndarray((m_size, n_size), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // TILE_M):
        rows = slice(m * TILE_M, (m + 1) * TILE_M)
        for n in nl.affine_range(n_size // TILE_N):
            cols = slice(n * TILE_N, (n + 1) * TILE_N)
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // TILE_K):
                ks = slice(k * TILE_K, (k + 1) * TILE_K)
                stationary = nl.load(lhs_t[ks, rows])
                moving = nl.load(rhs[ks, cols])
                nisa.nc_matmul(acc, stationary, moving)
            _evacuate_and_store(out, rows, cols, acc)
    return out


def matmul_hoist_load(lhs_t, rhs):
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    tiles_k = k_size // TILE_K
    out = nl.ndarray((m_size, n_size), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // TILE_M):
        rows = slice(m * TILE_M, (m + 1) * TILE_M)
        stationary = nl.ndarray((TILE_K, tiles_k, TILE_M), dtype=lhs_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(tiles_k):
            nisa.dma_copy(dst=stationary[:, k, :], src=lhs_t[k * TILE_K : (k + 1) * TILE_K, rows])
        for n in nl.affine_range(n_size // TILE_N):
            cols = slice(n * TILE_N, (n + 1) * TILE_N)
            moving = nl.ndarray((TILE_K, tiles_k, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(tiles_k):
                nisa.dma_copy(dst=moving[:, k, :], src=rhs[k * TILE_K : (k + 1) * TILE_K, cols])
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(tiles_k):
                nisa.nc_matmul(acc, stationary[:, k, :], moving[:, k, :])
            _evacuate_and_store(out, rows, cols, acc)
    return out


def matmul_block_free(lhs_t, rhs, tiles_m: int = 2, tiles_n: int = 2):
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    tiles_k = k_size // TILE_K
    block_m, block_n = TILE_M * tiles_m, TILE_N * tiles_n
    out = nl.ndarray((m_size, n_size), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(m_size // block_m):
        stationary = nl.ndarray(
            (tiles_m, tiles_k, nl.par_dim(TILE_K), TILE_M), dtype=lhs_t.dtype, buffer=nl.sbuf
        )
        for i in nl.affine_range(tiles_m):
            cols = slice(mb * block_m + i * TILE_M, mb * block_m + (i + 1) * TILE_M)
            for k in nl.affine_range(tiles_k):
                nisa.dma_copy(dst=stationary[i, k], src=lhs_t[k * TILE_K : (k + 1) * TILE_K, cols])
        for nb in nl.affine_range(n_size // block_n):
            moving = nl.ndarray(
                (tiles_n, tiles_k, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf
            )
            for j in nl.affine_range(tiles_n):
                cols = slice(nb * block_n + j * TILE_N, nb * block_n + (j + 1) * TILE_N)
                for k in nl.affine_range(tiles_k):
                    nisa.dma_copy(dst=moving[j, k], src=rhs[k * TILE_K : (k + 1) * TILE_K, cols])
            for i in nl.affine_range(tiles_m):
                rows = slice(mb * block_m + i * TILE_M, mb * block_m + (i + 1) * TILE_M)
                for j in nl.affine_range(tiles_n):
                    cols = slice(nb * block_n + j * TILE_N, nb * block_n + (j + 1) * TILE_N)
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(tiles_k):
                        nisa.nc_matmul(acc, stationary[i, k], moving[j, k])
                    _evacuate_and_store(out, rows, cols, acc)
    return out


def matmul_fully_optimized(lhs_t, rhs, tiles_m: int = 16, tiles_n: int = 2, tiles_k: int = 8):
    k_size, m_size = lhs_t.shape
    n_size = rhs.shape[1]
    block_m, block_n, block_k = TILE_M * tiles_m, TILE_N * tiles_n, TILE_K * tiles_k
    for size, block, dim in (
        (m_size, block_m, "M"),
        (n_size, block_n, "N"),
        (k_size, block_k, "K"),
    ):
        if size % block:
            raise ValueError(f"matmul_fully_optimized: {dim} = {size} is not a multiple of {block}")
    out = nl.ndarray((m_size, n_size), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(n_size // block_n):
        n_cols = slice(nb * block_n, (nb + 1) * block_n)
        # One SBUF row block of the output per 128 rows, accumulated over the K blocks.
        sums = []
        for _ in range(m_size // TILE_M):
            tile = nl.ndarray((TILE_M, tiles_n, TILE_N), dtype=out.dtype, buffer=nl.sbuf)
            nisa.memset(tile, 0.0)
            sums.append(tile)
        for kb in nl.sequential_range(k_size // block_k):
            moving = nl.ndarray((TILE_K, tiles_k, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in range(tiles_k):
                ks = slice((kb * tiles_k + k) * TILE_K, (kb * tiles_k + k + 1) * TILE_K)
                nisa.dma_copy(dst=moving[:, k, :], src=rhs[ks, n_cols])
            for mb in nl.affine_range(m_size // block_m):
                m_cols = slice(mb * block_m, (mb + 1) * block_m)
                stationary = nl.ndarray(
                    (TILE_K, tiles_k, block_m), dtype=lhs_t.dtype, buffer=nl.sbuf
                )
                for k in nl.affine_range(tiles_k):
                    ks = slice((kb * tiles_k + k) * TILE_K, (kb * tiles_k + k + 1) * TILE_K)
                    nisa.dma_copy(dst=stationary[:, k, :], src=lhs_t[ks, m_cols])
                for j in nl.affine_range(tiles_n):
                    for i in nl.affine_range(tiles_m):
                        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(tiles_k):
                            nisa.nc_matmul(
                                acc,
                                stationary[:, k, i * TILE_M : (i + 1) * TILE_M],
                                moving[:, k, j * TILE_N : (j + 1) * TILE_N],
                            )
                        total = sums[mb * tiles_m + i]
                        nisa.tensor_tensor(
                            dst=total[:, j, :], data1=total[:, j, :], data2=acc, op=nl.add
                        )
        for t, total in enumerate(sums):
            nisa.dma_copy(
                dst=out[t * TILE_M : (t + 1) * TILE_M, n_cols],
                src=total.reshape((TILE_M, block_n)),
            )
    return out


def _mamba_state_step(d, u, a_col, b_row, c_row, accum, initial=0.0):
    """One state of the selective scan on [128, L] tiles of delta and u, accumulated into
    `accum`: exp(delta * A) and delta * u * B (VectorE), the scan, its product with C and the
    sum over states. Returns the scan's tile (its last column carries into the next one)."""
    rows, length = d.shape
    decay = nl.ndarray((rows, length), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=decay, op=nl.exp, data=d, scale=a_col)
    du = nl.ndarray((rows, length), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=du, data1=d, data2=u, op=nl.multiply)
    dbu = nl.ndarray((rows, length), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dbu, data1=du, data2=b_row.broadcast_to((rows, length)), op=nl.multiply)
    scan = nl.ndarray((rows, length), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(
        dst=scan, data0=decay, data1=dbu, initial=initial, op0=nl.multiply, op1=nl.add
    )
    sc = nl.ndarray((rows, length), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=sc, data1=scan, data2=c_row.broadcast_to((rows, length)), op=nl.multiply)
    nisa.tensor_tensor(dst=accum, data1=accum, data2=sc, op=nl.add)
    return scan


def mamba_v1(delta, u, a, b, c):
    """The fused Mamba tutorial's first kernel: states outside channel tiles, so delta and u
    are loaded again for every state; the sums of all channel tiles kept in SBUF."""
    batch, channels, length = delta.shape
    states, tiles = a.shape[1], channels // 128
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    for bi in nl.affine_range(batch):
        accum = nl.ndarray((tiles, nl.par_dim(128), length), dtype=nl.float32, buffer=nl.sbuf)
        for t in range(tiles):
            nisa.memset(accum[t], 0.0)
        for s in nl.affine_range(states):
            for t in nl.affine_range(tiles):
                rows = slice(t * 128, (t + 1) * 128)
                d, uu = nl.load(delta[bi, rows, :]), nl.load(u[bi, rows, :])
                a_col = nl.load(a[rows, s : s + 1])
                b_row, c_row = nl.load(b[bi, s : s + 1, :]), nl.load(c[bi, s : s + 1, :])
                _mamba_state_step(d, uu, a_col, b_row, c_row, accum[t])
        for t in nl.affine_range(tiles):
            nl.store(out[bi, t * 128 : (t + 1) * 128, :], accum[t])
    return out


def mamba_v2(delta, u, a, b, c):
    """The second: channel tiles outside states, delta and u loaded once per tile."""
    batch, channels, length = delta.shape
    states = a.shape[1]
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    for bi in nl.affine_range(batch):
        for t in nl.affine_range(channels // 128):
            rows = slice(t * 128, (t + 1) * 128)
            accum = nl.ndarray((128, length), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(accum, 0.0)
            d, uu = nl.load(delta[bi, rows, :]), nl.load(u[bi, rows, :])
            for s in nl.affine_range(states):
                a_col = nl.load(a[rows, s : s + 1])
                b_row, c_row = nl.load(b[bi, s : s + 1, :]), nl.load(c[bi, s : s + 1, :])
                _mamba_state_step(d, uu, a_col, b_row, c_row, accum)
            nl.store(out[bi, rows, :], accum)
    return out


def mamba_v3(delta, u, a, b, c, chunk: int = 512):
    """The third: the sequence in chunks of 512 inside each state, the scan carried from one
    chunk to the next."""
    batch, channels, length = delta.shape
    states = a.shape[1]
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    for bi in nl.affine_range(batch):
        for t in nl.affine_range(channels // 128):
            rows = slice(t * 128, (t + 1) * 128)
            accum = nl.ndarray((128, length), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(accum, 0.0)
            d, uu = nl.load(delta[bi, rows, :]), nl.load(u[bi, rows, :])
            for s in nl.affine_range(states):
                a_col = nl.load(a[rows, s : s + 1])
                carry = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.memset(carry, 0.0)
                for q in nl.sequential_range(length // chunk):
                    cols = slice(q * chunk, (q + 1) * chunk)
                    b_row = nl.load(b[bi, s : s + 1, cols])
                    c_row = nl.load(c[bi, s : s + 1, cols])
                    scan = _mamba_state_step(
                        d[:, cols], uu[:, cols], a_col, b_row, c_row, accum[:, cols], carry
                    )
                    nisa.tensor_copy(carry, scan[:, chunk - 1 : chunk])
            nl.store(out[bi, rows, :], accum)
    return out


MATMULS = (matmul_tiled, matmul_hoist_load, matmul_block_free, matmul_fully_optimized)
MAMBAS = (mamba_v1, mamba_v2, mamba_v3)
KERNELS = {f.__name__: f for f in MATMULS + MAMBAS}


def _operands(name: str, shape: tuple[int, ...]):
    """Zero operands (timing-only runs read no values): bf16 lhsT [K, M] and rhs [K, N] for
    a matmul of MxKxN; fp32 delta, u [B, C, L], A [C, S], B, C [B, S, L] for a Mamba layer of
    BxCxLxS."""
    import torch

    if name.startswith("matmul"):
        if len(shape) != 3:
            raise ValueError(f"{name}: the shape is MxKxN, not {'x'.join(map(str, shape))}")
        m, k, n = shape
        return torch.zeros((k, m), dtype=torch.bfloat16), torch.zeros((k, n), dtype=torch.bfloat16)
    if len(shape) != 4:
        raise ValueError(f"{name}: the shape is BxCxLxS, not {'x'.join(map(str, shape))}")
    batch, channels, length, states = shape
    seq = np.zeros((batch, channels, length), np.float32)
    per_state = np.zeros((batch, states, length), np.float32)
    return seq, seq.copy(), np.zeros((channels, states), np.float32), per_state, per_state.copy()


def time_kernel(name: str, target: str, *shape: int) -> dict:
    """The kernel's simulated figures on `target`, in timing-only mode."""
    kernel = nki.jit(KERNELS[name], target=target, sim_mode="timing-only")
    kernel(*_operands(name, shape))
    run = kernel.last_run
    return {
        "latency_ns": run.latency_us * 1e3,
        "pe_utilization": run.engines["pe"]["utilization"],
        "dma_bytes": float(run.dma_bytes),
        "matmuls": float(run.count("matmul")),
    }


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape {text!r}: expected MxKxN (matmuls) or BxCxLxS (Mamba)"
        ) from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.calibration",
        description="Time one kernel of the calibration set (timing-only, no launch).",
    )
    parser.add_argument("kernel", choices=sorted(KERNELS))
    parser.add_argument("--target", default="trn1", help="chip generation (default trn1)")
    parser.add_argument(
        "--shape",
        type=_shape,
        help="MxKxN for a matmul (default the tutorial's 4096x8192x8192); BxCxLxS for Mamba "
        "(batch, channels, sequence, states; default 1x4096x512x16)",
    )
    parser.add_argument("--metrics", help="write the figures here as a metrics file")
    args = parser.parse_args(argv)
    shape = args.shape or (
        (4096, 8192, 8192) if args.kernel.startswith("matmul") else (1, 4096, 512, 16)
    )
    try:
        figures = time_kernel(args.kernel, args.target, *shape)
    except ValueError as err:
        parser.error(str(err))
    units = {"latency_ns": "ns"}
    doc = {
        "metrics": [
            {"name": name, "value": value, "unit": units.get(name, "")}
            for name, value in figures.items()
        ]
    }
    if args.metrics:
        with open(args.metrics, "w") as f:
            json.dump(doc, f, indent=1)
    else:
        json.dump(doc, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

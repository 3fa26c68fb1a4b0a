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


KERNELS = {
    f.__name__: f
    for f in (matmul_tiled, matmul_hoist_load, matmul_block_free, matmul_fully_optimized)
}


def _operands(m: int, k: int, n: int):
    """Zero bf16 operands: timing-only runs read no values."""
    import torch

    return torch.zeros((k, m), dtype=torch.bfloat16), torch.zeros((k, n), dtype=torch.bfloat16)


def time_kernel(name: str, target: str, m: int, k: int, n: int) -> dict:
    """The kernel's simulated figures on `target`, in timing-only mode."""
    kernel = nki.jit(KERNELS[name], target=target, sim_mode="timing-only")
    kernel(*_operands(m, k, n))
    run = kernel.last_run
    return {
        "latency_ns": run.latency_us * 1e3,
        "pe_utilization": run.engines["pe"]["utilization"],
        "dma_bytes": float(run.dma_bytes),
        "matmuls": float(run.count("matmul")),
    }


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, k, n = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: expected MxKxN") from None
    return m, k, n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.calibration",
        description="Time one kernel of the calibration set (timing-only, no launch).",
    )
    parser.add_argument("kernel", choices=sorted(KERNELS))
    parser.add_argument("--target", default="trn1", help="chip generation (default trn1)")
    parser.add_argument("--shape", type=_shape, default=(4096, 8192, 8192), help="MxKxN")
    parser.add_argument("--metrics", help="write the figures here as a metrics file")
    args = parser.parse_args(argv)
    figures = time_kernel(args.kernel, args.target, *args.shape)
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

"""Simulated latency of NKI kernels: ``python -m neuronsim.tools.nki_bench``.

Runs the tutorial-style kernels of ``neuronsim.tools.nki_kernels`` on trn1 and trn2 in
timing-only mode and reports, per kernel and shape, the simulated latency (µs), TensorE's
utilisation, its matmuls, the DMA bytes and the host seconds the simulation took. The
simulated figures are the same on every machine, so they are gated: ``--check
bench/expected_nki.csv`` fails when one leaves its margin (both ways), ``--update``
rewrites the file. ``--shapes full``
adds the matmul of [4096, 8192] x [8192, 8192] in bf16 (not gated: about 10 s per kernel).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from neuronsim import nki
from neuronsim.tools import bench, nki_kernels

_HEADER = """\
# Expected simulated figures of `python -m neuronsim.tools.nki_bench` on trn1 and trn2, in
# timing-only mode: the tutorial-style NKI kernels of neuronsim.tools.nki_kernels, their
# latency (the kernel body, no launch), TensorE matmuls and DMA bytes. Checked by
# `python -m neuronsim.tools.nki_bench --check bench/expected_nki.csv`
# (tests/python/nki/test_nki_bench.py); regenerate with --update, which keeps margins.
# Margins as in bench/expected_results.csv.
# Rule: a commit that changes an expected value gives the reason for it in the same commit.
benchmark,metric,value,margin
"""

TARGETS = ("trn1", "trn2")


def _bf16(shape: tuple[int, ...], seed: int):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=generator).to(torch.bfloat16)


def _cases(full: bool) -> list[tuple[str, object, tuple]]:
    add = np.ones((1024, 2048), np.float32)
    weight = np.ones((1, 2048), np.float32)
    cases = [
        ("tensor_add_1024x2048_fp32", nki_kernels.tensor_add.fn, (add, add)),
        ("rms_norm_1024x2048_fp32", nki_kernels.rms_norm.fn, (add, weight)),
        ("softmax_1024x2048_fp32", nki_kernels.softmax.fn, (add,)),
        ("transpose_1024x1024_fp32", nki_kernels.transpose.fn, (add[:, :1024],)),
        (
            "layer_norm_1024x512_fp32",
            nki_kernels.layer_norm.fn,
            (add[:, :512], weight[:, :512], weight[:, :512]),
        ),
        ("selective_scan_1024x2048_fp32", nki_kernels.selective_scan.fn, (add, add)),
        (
            "fused_attention_512x128_bf16",
            nki_kernels.fused_attention.fn,
            (_bf16((128, 512), 2), _bf16((128, 512), 3), _bf16((512, 128), 4)),
        ),
    ]
    shapes = [(1024, 2048, 2048)] + ([(4096, 8192, 8192)] if full else [])
    for m, k, n in shapes:
        operands = (_bf16((k, m), 0), _bf16((k, n), 1))
        for name in ("matmul_naive", "matmul_hoisted", "matmul_blocked"):
            fn = getattr(nki_kernels, name).fn
            cases.append((f"{name}_{m}x{k}x{n}_bf16", fn, operands))
    return cases


def measure(full: bool = False) -> list[dict]:
    rows = []
    for target in TARGETS:
        for name, fn, args in _cases(full):
            kernel = nki.jit(fn, target=target, sim_mode="timing-only")
            start = time.perf_counter()
            kernel(*args)
            seconds = time.perf_counter() - start
            run = kernel.last_run
            rows.append(
                {
                    "benchmark": f"{target}/nki/{name}",
                    "latency_us": run.latency_us,
                    "matmuls": run.count("matmul"),
                    "pe_utilization": run.engines["pe"]["utilization"],
                    "dma_bytes": run.dma_bytes,
                    "instructions": run.instructions,
                    "host_s": seconds,
                    "gated": "4096x8192x8192" not in name,
                }
            )
    return rows


def gate_rows(rows: list[dict]) -> list[tuple[str, str, float]]:
    measured = []
    for r in rows:
        if r["gated"]:
            measured.append((r["benchmark"], "simulated_us", round(r["latency_us"], 6)))
            measured.append((r["benchmark"], "matmuls", float(r["matmuls"])))
            measured.append((r["benchmark"], "dma_bytes", float(r["dma_bytes"])))
    return measured


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.nki_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--shapes", choices=["gated", "full"], default="gated")
    parser.add_argument("--check", metavar="CSV", help="check the gated figures against CSV")
    parser.add_argument("--update", metavar="CSV", help="rewrite CSV with the gated figures")
    parser.add_argument("--csv", metavar="PATH", help="write the gated figures as CSV rows")
    args = parser.parse_args(argv)
    rows = measure(full=args.shapes == "full")
    for r in rows:
        print(
            f"{r['benchmark']:<52} {r['latency_us']:>12.3f} us  PE {r['pe_utilization']:6.1%}"
            f"  DMA {r['dma_bytes'] / 1e6:9.1f} MB  {r['instructions']:>7} instr"
            f"  simulated in {r['host_s']:.2f} s"
        )
    measured = gate_rows(rows)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("benchmark,metric,value\n")
            f.writelines(f"{b},{m},{v!r}\n" for b, m, v in measured)
    if args.update:
        bench.update(args.update, measured, _HEADER)
        print(f"neuronsim.tools.nki_bench: wrote {len(measured)} rows to {args.update}")
        return 0
    if args.check:
        failures = bench.check(args.check, measured)
        for line in failures:
            print(line)
        print(
            f"neuronsim.tools.nki_bench: {len(measured) - len(failures)} of {len(measured)} "
            "rows pass"
        )
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

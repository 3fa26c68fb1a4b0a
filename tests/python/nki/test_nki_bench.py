"""The gate of the NKI kernels' simulated figures (exact on every machine), and the
mechanism a blocked matmul is faster by, on the gated figures."""

from __future__ import annotations

import csv
import pathlib
import subprocess
import sys

EXPECTED = pathlib.Path(__file__).resolve().parents[3] / "bench" / "expected_nki.csv"


def test_the_nki_kernels_simulated_figures_hold(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.nki_bench", "--check", str(EXPECTED)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_loading_each_lhs_block_once_saves_dma_bytes_and_time_on_every_target():
    rows = {}
    with open(EXPECTED) as f:
        for row in csv.reader(line for line in f if not line.startswith("#")):
            if row[0] != "benchmark":
                rows[(row[0], row[1])] = float(row[2])
    for target in ("trn1", "trn2"):
        naive = f"{target}/nki/matmul_naive_1024x2048x2048_bf16"
        hoisted = f"{target}/nki/matmul_hoisted_1024x2048x2048_bf16"
        assert rows[(naive, "matmuls")] == rows[(hoisted, "matmuls")]
        assert rows[(hoisted, "dma_bytes")] < rows[(naive, "dma_bytes")]
        assert rows[(hoisted, "simulated_us")] < rows[(naive, "simulated_us")]

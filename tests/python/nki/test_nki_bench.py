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


def test_each_step_of_the_matmul_sequence_saves_dma_bytes_and_time_on_every_target():
    rows = {}
    with open(EXPECTED) as f:
        for row in csv.reader(line for line in f if not line.startswith("#")):
            if row[0] != "benchmark":
                rows[(row[0], row[1])] = float(row[2])
    for target in ("trn1", "trn2"):
        steps = [
            f"{target}/nki/matmul_{kind}_1024x2048x2048_bf16"
            for kind in ("naive", "hoisted", "blocked")
        ]
        # The same matmuls on TensorE; each step moves fewer bytes and takes less time.
        assert len({rows[(step, "matmuls")] for step in steps}) == 1
        for slower, faster in zip(steps, steps[1:]):
            assert rows[(faster, "dma_bytes")] < rows[(slower, "dma_bytes")]
            assert rows[(faster, "simulated_us")] < rows[(slower, "simulated_us")]
        # Blocked over M, the rhs is read a quarter as often: TensorE sets the pace.
        assert rows[(steps[2], "simulated_us")] < 0.5 * rows[(steps[0], "simulated_us")]

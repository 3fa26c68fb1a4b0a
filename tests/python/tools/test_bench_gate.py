"""The gate of the PyTorch figures: eager and compiled steps of the tiny Qwen3 in the
timing mode, against bench/expected_torch.csv (simulated, so exact on every machine)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

EXPECTED = pathlib.Path(__file__).resolve().parents[3] / "bench" / "expected_torch.csv"


def test_the_compiled_tiny_qwen3_meets_its_expected_figures(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.bench", "--check", str(EXPECTED)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NEURONSIM_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


def test_compiling_launches_fewer_kernels_and_takes_less_simulated_time():
    from neuronsim.tools.bench import _read_expected

    figures = {(b.rsplit("/", 1)[-1], m): v for b, m, v, _ in _read_expected(str(EXPECTED))}
    for step in ("forward", "train_step"):
        eager, compiled = f"qwen3_tiny_{step}_eager", f"qwen3_tiny_{step}_compiled"
        assert figures[(compiled, "kernels")] * 2 < figures[(eager, "kernels")]
        assert figures[(compiled, "simulated_us")] < figures[(eager, "simulated_us")]

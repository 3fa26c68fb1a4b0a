"""Host and simulated speed of the PyTorch backend: ``python -m neuronsim.bench``.

Reports, each measured in one run (ratios, never absolute gates):
- host microseconds per cached small op in functional-only mode (the per-op floor a
  model pays), as a median, and its ratio to the same op on torch's CPU;
- one training step of the tiny Qwen3 (forward, backward, AdamW): kernels launched,
  CPU fallbacks, host seconds, and simulated seconds in the timing mode.

Each mode runs in its own process (the mode is chosen when the device opens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _median_us(fn, repeat: int = 300) -> float:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def _ops() -> dict:
    import torch

    x, y = torch.randn(64, 64), torch.randn(64, 64)
    X, Y = x.to("neuron"), y.to("neuron")
    cases = {
        "add 64x64": (lambda: X + Y, lambda: x + y),
        "mul by scalar 64x64": (lambda: X * 0.5, lambda: x * 0.5),
        "softmax 64x64": (lambda: X.softmax(-1), lambda: x.softmax(-1)),
        "mm 64x64x64": (lambda: X @ Y, lambda: x @ y),
    }
    out = {}
    for name, (dev, cpu) in cases.items():
        d, c = _median_us(dev), _median_us(cpu)
        out[name] = {"neuron_us": round(d, 1), "cpu_us": round(c, 1), "ratio": round(d / c, 1)}
    return out


def _train_step(steps: int = 3) -> dict:
    import torch

    import neuronsim
    from neuronsim.testing import tiny_qwen3

    model = tiny_qwen3().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (2, 32)).to("neuron")

    def step():
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.neuron.synchronize()

    step()  # compiles and loads the kernels
    neuronsim.reset_fallback_counts()
    kernels, sim, start = neuronsim.kernels_run(), neuronsim.simulated_time(), time.perf_counter()
    for _ in range(steps):
        step()
    return {
        "kernels_per_step": (neuronsim.kernels_run() - kernels) / steps,
        "fallbacks_per_step": sum(neuronsim.fallback_counts().values()) / steps,
        "host_s_per_step": round((time.perf_counter() - start) / steps, 4),
        "simulated_us_per_step": round((neuronsim.simulated_time() - sim) / steps * 1e6, 3),
    }


def _part(name: str) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    return {"ops": _ops, "train_step": _train_step}[name]()


def _run(part: str, mode: str) -> dict:
    env = dict(os.environ, NEURONSIM_MODE=mode, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.bench", "--part", part],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"neuronsim.bench: the {part} part failed in {mode}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--part", choices=["ops", "train_step"], help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.part:
        print(json.dumps(_part(args.part)))
        return 0
    results = {
        "ops_functional_only": _run("ops", "functional-only"),
        "train_step_functional_only": _run("train_step", "functional-only"),
        "train_step_timing": _run("train_step", "functional-and-timing"),
    }
    print("host time per cached op, functional-only (median):")
    for name, r in results["ops_functional_only"].items():
        print(
            f"  {name:22s} {r['neuron_us']:8.1f} us   torch CPU {r['cpu_us']:7.1f} us   "
            f"ratio {r['ratio']:.1f}x"
        )
    for key, label in (
        ("train_step_functional_only", "functional-only"),
        ("train_step_timing", "functional-and-timing"),
    ):
        r = results[key]
        print(
            f"tiny Qwen3 training step, {label}: {r['kernels_per_step']:.0f} kernels, "
            f"{r['fallbacks_per_step']:.0f} CPU fallbacks, host {r['host_s_per_step']:.3f} s, "
            f"simulated {r['simulated_us_per_step']:.1f} us"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

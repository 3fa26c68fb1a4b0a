"""The legacy NKI surface (beta 1: ``from neuronxcc import nki``) on the simulator.

``nki.jit`` and ``nki.baremetal`` run a kernel as ``neuronsim.nki.jit`` does;
``nki.simulate_kernel(kernel, *args)`` runs one and returns its outputs;
``nki.benchmark(...)`` runs it and keeps its latency as a benchmark result. The
instructions (``neuronxcc.nki.isa``) return new tiles; ``nki.language`` is the same module
as the current API's, with the legacy index grids (``arange``, ``mgrid``), ``par_dim`` and
the tile operations."""

from __future__ import annotations

import functools
from typing import Any

from .. import Kernel, KernelRun, NkiError, jit
from .. import language as language  # noqa: PLC0414 (the public name)
from . import isa as isa  # noqa: PLC0414 (the public name)

baremetal = jit

__all__ = ["jit", "baremetal", "benchmark", "simulate_kernel", "language", "isa", "NkiError"]


def simulate_kernel(kernel, *args: Any, **kwargs: Any):
    """Runs `kernel` on the simulator and returns its outputs."""
    runner = kernel if isinstance(kernel, Kernel) else Kernel(getattr(kernel, "fn", kernel))
    return runner(*args, **kwargs)


class _Latency:
    """Latencies in microseconds, as the legacy benchmark result reports them. The simulated
    latency of a kernel is the same on every run, so every percentile is that latency."""

    def __init__(self, run: KernelRun, iterations: int):
        self._us = run.latency_us
        self.iterations = iterations

    def get_latency_percentile(self, percentile: int) -> float:
        if not 0 <= percentile <= 100:
            raise NkiError(f"percentile {percentile} is outside 0..100")
        return self._us


class _BenchmarkResult:
    def __init__(self, run: KernelRun, iterations: int):
        self.nc_latency = _Latency(run, iterations)
        self.run = run


class _Benchmarked(Kernel):
    def __init__(self, fn, warmup: int, iters: int, **options: Any):
        super().__init__(fn, options.get("target"), options.get("sim_mode"), options.get("trace"))
        self.warmup, self.iters = warmup, iters
        self.benchmark_result: _BenchmarkResult | None = None

    def __call__(self, *args: Any, **kwargs: Any):
        outputs = super().__call__(*args, **kwargs)
        if self.last_run is not None:
            self.benchmark_result = _BenchmarkResult(self.last_run, self.iters)
        return outputs


def benchmark(fn=None, *, warmup: int = 2, iters: int = 10, **options: Any):
    """A kernel whose call runs it once (its simulated latency does not vary) and keeps the
    result in ``kernel.benchmark_result.nc_latency.get_latency_percentile(p)`` (µs)."""
    if fn is None:
        return functools.partial(benchmark, warmup=warmup, iters=iters, **options)
    return _Benchmarked(fn, warmup, iters, **options)

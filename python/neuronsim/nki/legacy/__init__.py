"""The legacy NKI surface (beta 1: ``from neuronxcc import nki``) on the simulator.

``nki.jit`` and ``nki.baremetal`` run a kernel as ``neuronsim.nki.jit`` does;
``nki.simulate_kernel(kernel, *args)`` runs one and returns its outputs;
``nki.benchmark(...)`` runs it and keeps its latency as a benchmark result. The
instructions (``neuronxcc.nki.isa``) return new tiles; ``nki.language`` is the same module
as the current API's, with the legacy index grids (``arange``, ``mgrid``), ``par_dim`` and
the tile operations."""

from __future__ import annotations

import functools
import os
from typing import Any

from .. import Kernel, KernelRun, NkiError, _Launch, jit
from .. import compiler as compiler  # noqa: PLC0414 (the public name)
from .. import language as language  # noqa: PLC0414 (the public name)
from .. import typing as typing  # noqa: PLC0414 (the public name)
from . import isa as isa  # noqa: PLC0414 (the public name)

baremetal = jit
tensor = typing.tensor

__all__ = [
    "jit",
    "baremetal",
    "benchmark",
    "profile",
    "simulate_kernel",
    "language",
    "isa",
    "compiler",
    "typing",
    "tensor",
    "NkiError",
]


def simulate_kernel(kernel, *args: Any, **kwargs: Any):
    """Runs `kernel` (a kernel, a kernel on a grid, or a plain body) on the simulator and
    returns its outputs."""
    if isinstance(kernel, (Kernel, _Launch)):
        return kernel(*args, **kwargs)
    return Kernel(kernel)(*args, **kwargs)


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


def _trace_file(name: str) -> str:
    """Where the Perfetto trace goes for a requested NTFF name: the same name with .json
    (the simulator writes Chrome/Perfetto JSON, not neuron-profile's NTFF)."""
    return os.path.splitext(name)[0] + ".json"


class _Measured(Kernel):
    """A kernel whose runs also write the program (NEFF) and a trace when asked."""

    def __init__(self, fn, directory=None, neff=None, trace_name=None, **options: Any):
        super().__init__(
            fn,
            options.get("target"),
            options.get("sim_mode"),
            None,
            None,
            options.get("check"),
        )
        self.directory, self.neff, self.trace_name = directory, neff, trace_name

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name) if self.directory else name

    def _launch(self, grid, args, kwargs):
        if self.trace_name:
            self.trace_path = self._path(_trace_file(self.trace_name))
        outputs = super()._launch(grid, args, kwargs)
        if self.neff and self.last_run is not None:
            self.last_run.program.write_neff(self._path(self.neff))
        return outputs


class _Benchmarked(_Measured):
    def __init__(self, fn, warmup: int, iters: int, **options: Any):
        super().__init__(
            fn,
            neff=options.pop("save_neff_name", None),
            trace_name=options.pop("save_trace_name", None),
            **options,
        )
        self.warmup, self.iters = warmup, iters
        self.benchmark_result: _BenchmarkResult | None = None

    def _launch(self, grid, args, kwargs):
        outputs = super()._launch(grid, args, kwargs)
        if self.last_run is not None:
            self.benchmark_result = _BenchmarkResult(self.last_run, self.iters)
        return outputs


def benchmark(fn=None, *, warmup: int = 2, iters: int = 10, **options: Any):
    """A kernel whose call runs it once (its simulated latency does not vary) and keeps the
    result in ``kernel.benchmark_result.nc_latency.get_latency_percentile(p)`` (µs);
    ``save_neff_name`` writes its program, ``save_trace_name`` a Perfetto trace (.json)."""
    if fn is None:
        return functools.partial(benchmark, warmup=warmup, iters=iters, **options)
    return _Benchmarked(getattr(fn, "fn", fn), warmup, iters, **options)


class _Profiled(_Measured):
    def _launch(self, grid, args, kwargs):
        super()._launch(grid, args, kwargs)
        return None  # nki.profile's call returns nothing; its files are the result


def profile(
    fn=None,
    *,
    working_directory: str | None = None,
    save_neff_name: str = "file.neff",
    save_trace_name: str = "profile.ntff",
    profile_nth: int = 1,
    overwrite: bool = False,
    **options: Any,
):
    """A kernel whose call runs it and writes its program (NEFF) and a Perfetto trace
    (.json beside the requested NTFF name) into `working_directory`; it returns None."""
    if fn is None:
        return functools.partial(
            profile,
            working_directory=working_directory,
            save_neff_name=save_neff_name,
            save_trace_name=save_trace_name,
            profile_nth=profile_nth,
            overwrite=overwrite,
            **options,
        )
    if working_directory is None:
        raise NkiError("nki.profile: working_directory is required")
    os.makedirs(working_directory, exist_ok=True)
    return _Profiled(
        getattr(fn, "fn", fn), working_directory, save_neff_name, save_trace_name, **options
    )

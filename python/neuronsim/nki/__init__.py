"""NKI kernels, unchanged, on the simulator: values, cycle-approximate latency, a trace.

A kernel decorated with ``@nki.jit`` and called with NumPy arrays (or CPU torch tensors)
runs its body as Python, records each ``nki.isa`` call as an instruction, and runs the
program on a simulated NeuronCore of the target (``NEURON_PLATFORM_TARGET_OVERRIDE``:
trn1, trn2 or trn3; trn2 by default). It returns the kernel's outputs as NumPy arrays;
``kernel.last_run`` holds the latency, the engines' utilisation and the program.

User code imports ``nki`` (``import nki.language as nl``): run it with
``python -m neuronsim.nki script.py`` or call ``neuronsim.nki.install()`` first, which
makes ``nki`` this package unless another ``nki`` is importable (AWS's own is never
shadowed). docs/nki.md lists what is supported.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import DTYPES
from . import _composite, _lower, compiler, isa, language, typing  # noqa: F401 (public modules)
from ._host import _as_array, _bits, _values
from ._trace import TARGETS, NkiError, Trace, dtype_name, set_current, target_name  # noqa: F401 (TARGETS public)

__all__ = [
    "jit",
    "simulate",
    "nki_op",
    "wrap_nki",
    "KernelRun",
    "NkiError",
    "install",
    "isa",
    "language",
]


@dataclasses.dataclass
class KernelRun:
    """What one simulated run of a kernel gave."""

    target: str
    instance: str
    latency_us: float  # the kernel body, from its first instruction to its last
    instructions: int
    engines: dict[str, dict[str, float]]  # per engine: instructions, busy_ps, utilization
    dma_bytes: int
    summary: str  # the table `neuron-sim run` prints
    program: Any  # the built program (.disassemble(), .write_neff(path))
    # neuron-profile's summary-json of the run ({"nki_nc0": {"total_time": ..., ...}})
    profile_summary: dict = dataclasses.field(default_factory=dict)
    # The most bytes per partition its tensors keep live at once: {"sbuf": ..., "psum": ...}
    peak_bytes: dict = dataclasses.field(default_factory=dict)
    # In the checking mode, the first reads of bytes that nothing wrote through the tensor
    # read ("file:line: opcode operand: tensor"): they see whatever was there.
    unwritten_reads: list = dataclasses.field(default_factory=list)
    # Tiles spilled because too many were live at once: PSUM tiles to SBUF ("name (file:line)"),
    # SBUF tiles to HBM and back ("name (file:line) to HBM").
    spills: list = dataclasses.field(default_factory=list)

    def count(self, opcode: str) -> int:
        """How many instructions of `opcode` (matmul, dma_copy, ...) the program has."""
        return sum(
            1 for line in self.program.disassemble().splitlines() if line.split()[1:2] == [opcode]
        )

    def __str__(self) -> str:
        return f"{self.latency_us:.3f} us on {self.target} ({self.instructions} instructions)"


class Kernel:
    """A traced NKI kernel: call it with host arrays to run it on the simulator."""

    def __init__(
        self,
        fn: Callable,
        target: str | None = None,
        mode: str | None = None,
        trace: str | None = None,
        summary_json: str | None = None,
        check: bool | None = None,
    ):
        self.fn = fn
        self.target = target
        self.mode = mode
        self.check = check  # stale-read checking (None: NEURONSIM_NKI_CHECK)
        self.trace_path = trace
        self.summary_json = summary_json
        self.last_run: KernelRun | None = None
        self._built: dict[tuple, tuple] = {}  # by target and the arguments' layouts
        functools.update_wrapper(self, fn)
        # How torch.compile's graphs name this kernel (the op neuronsim_nki::call's key).
        self.op_key = f"{fn.__module__}.{fn.__qualname__}@{id(self):x}"
        _KERNELS[self.op_key] = self

    def with_schedule(self, *_edges: Any):
        """NKI's explicit scheduling edges: not supported yet (here each engine runs its
        instructions in program order, and no edges across engines are added)."""
        raise NkiError(f"{self.fn.__name__}.with_schedule: scheduling edges are not supported yet")

    def build(self, *args: Any, target: str | None = None, grid: tuple = (1,), **kwargs: Any):
        """The body traced for these arguments: (trace, program), made once per target,
        launch grid, tensor shapes and dtypes, and non-tensor values, as NKI compiles a
        kernel."""
        target = target or target_name(self.target)
        signature = (
            target,
            grid,
            tuple(_layout(a) for a in args),
            tuple(sorted((k, _layout(v)) for k, v in kwargs.items())),
        )
        try:
            built = self._built.get(signature)
        except TypeError:  # an argument that cannot be a key: traced every call
            return self._trace(args, kwargs, target, grid)
        if built is None:
            built = self._trace(args, kwargs, target, grid)
            if not built[0].data_dependent:  # a register load's values shape the program
                self._built[signature] = built
        return built

    def _trace(self, args: tuple, kwargs: dict, target: str, grid: tuple):
        """Runs the body once per program of the grid (one after another: their
        instructions follow each other on one core), tensors bound to HBM tensors and
        every other argument passed as it is."""
        from .. import _C

        trace = Trace(_C.nki.target(target))
        trace.grid = grid
        trace.force_auto_alloc = any(getattr(k, "force_auto_alloc", False) for k in (self, self.fn))
        trace.input_values = _input_values(trace, args)
        call_args = list(args)
        call_kwargs = dict(kwargs)
        names = _parameter_names(self.fn, len(args), kwargs)
        for key, arg in [*enumerate(args), *kwargs.items()]:
            if not _is_tensor(arg):
                continue
            dtype, shape = _layout(arg)[1:]
            tensor = trace.declare_hbm(names[key], dtype, shape, "input")
            trace.params.append((key, tensor.name))
            if isinstance(key, int):
                call_args[key] = tensor
            else:
                call_kwargs[key] = tensor
        set_current(trace)
        try:
            for program in itertools.product(*(range(n) for n in grid)):
                trace.start_program(program)
                result = self.fn(*call_args, **call_kwargs)
        finally:
            set_current(None)
        trace.result = result
        return trace, _lower.build(trace, check=_lower.checking(self.check))

    def __getitem__(self, grid) -> _Launch:
        """kernel[n](...), kernel[n, m](...): the kernel launched on a grid of programs
        (NKI's SPMD launch; the current API's kernel[lnc])."""
        return _Launch(self, _grid(grid, self.fn.__name__))

    def __call__(self, *args: Any, **kwargs: Any):
        return self._launch((1,), args, kwargs)

    def _launch(self, grid: tuple, args: tuple, kwargs: dict):
        import torch

        if torch.compiler.is_compiling():  # one node of the graph: the op neuronsim_nki::call
            if kwargs or not all(isinstance(a, torch.Tensor) for a in args):
                raise NkiError(
                    f"{self.fn.__name__}: inside torch.compile a kernel takes tensors only"
                )
            if grid != (1,):
                raise NkiError(f"{self.fn.__name__}: inside torch.compile a grid of one only")
            outs = torch.ops.neuronsim_nki.call(self.op_key, list(args))
            return outs[0] if len(outs) == 1 else tuple(outs)
        devices = {a.device for a in [*args, *kwargs.values()] if _is_neuron_tensor(a)}
        if devices:
            return self._call_on_device(devices, *args, grid=grid, **kwargs)
        from .. import _C

        trace, program = self.build(*args, grid=grid, **kwargs)
        inputs = {
            name: _bits(*_as_array(_argument(args, kwargs, key))) for key, name in trace.params
        }
        inputs.update(trace.constants)
        mode = self.mode or os.environ.get("NEURONSIM_NKI_MODE", "functional-and-timing")
        run = _C.nki.run(program, inputs, mode, self.trace_path or "", self.summary_json or "")
        engines = run.get("engines", {})
        self.last_run = KernelRun(
            target=program.target,
            instance=run["instance"],
            latency_us=run["total_ps"] / 1e6,
            instructions=program.instructions(),
            engines=engines,
            dma_bytes=run.get("dma_bytes", 0),
            summary=run["summary"],
            program=program,
            profile_summary=json.loads(run["profile_summary"]),
            peak_bytes=dict(trace.peak),
            unwritten_reads=list(trace.unwritten_reads),
            spills=list(trace.spills),
        )
        outputs = {t.name: t for t in trace.outputs}
        values = {
            name: _values(data, outputs[name].dtype, outputs[name].shape)
            for name, data in run["outputs"].items()
        }
        return _unpack(trace.result, values)

    def _call_on_device(self, devices: set, *args: Any, grid: tuple = (1,), **kwargs: Any):
        """The kernel on tensors of device "neuron": one kernel on that device's core, its
        outputs new neuron tensors (what torch_neuronx's NKI entry points give)."""
        import torch

        from .. import _C

        if len(devices) > 1 or any(
            type(a).__module__.startswith("torch") and not _is_neuron_tensor(a) for a in args
        ):
            raise NkiError(f"{self.fn.__name__}: tensors on more than one device: {devices}")
        device = devices.pop()
        index = device.index if device.index is not None else torch.neuron.current_device()
        generation = _C.device_properties(index)["generation"]
        trace, program = self.build(*args, target=generation, grid=grid, **kwargs)
        bound = {name: _argument(args, kwargs, key).contiguous() for key, name in trace.params}
        for name, data in trace.constants.items():
            t = trace.constant_tensors[name]
            host = torch.from_numpy(_values(data, t.dtype, t.shape).copy())
            bound[name] = host.to(DTYPES[t.dtype].torch_dtype()).to(device)
        for t in trace.outputs:
            bound[t.name] = torch.empty(t.shape, dtype=DTYPES[t.dtype].torch_dtype(), device=device)
        if any(_is_fake(t) for t in bound.values()):  # shapes only (a fake kernel, tracing)
            return _unpack(trace.result, bound)
        # The device's program cache: one entry per build of this kernel. A kernel whose
        # registers shape its program is built on every call: its entry is its program's text,
        # so that calls with the same values share one.
        build = (
            hashlib.sha256(program.disassemble().encode()).hexdigest()[:24]
            if trace.data_dependent
            else f"{id(program):x}"
        )
        key = f"nki {self.op_key} {build}"
        _C.run_nki(index, self.fn.__name__, key, program, list(bound.items()))
        self.last_run = None  # it ran on the device's queue, among the model's kernels
        return _unpack(trace.result, bound)


def _input_values(trace: Trace, args: tuple):
    """The inputs' bytes by tensor name, made when a register load first asks; None for
    fake tensors, whose values do not exist."""
    if any(_is_fake(a) for a in args if type(a).__module__.startswith("torch")):
        return None
    return lambda: {
        **{name: _bits(*_as_array(args[key])) for key, name in trace.params},
        **trace.constants,
    }


def _argument(args: tuple, kwargs: dict, key):
    return args[key] if isinstance(key, int) else kwargs[key]


class _Launch:
    """A kernel on a launch grid: ``kernel[grid](*args)``."""

    def __init__(self, kernel: Kernel, grid: tuple):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args: Any, **kwargs: Any):
        return self.kernel._launch(self.grid, args, kwargs)

    def __getattr__(self, name: str):  # last_run, benchmark_result, fn, ...
        return getattr(self.kernel, name)


def _grid(grid, name: str) -> tuple:
    """A launch grid as a tuple of positive program counts (nl.spmd_dim's count is its
    size: every program runs here on one core)."""
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    try:
        dims = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        raise NkiError(f"{name}[{grid!r}]: a grid is one or more program counts") from None
    if not dims or any(d < 1 for d in dims):
        raise NkiError(f"{name}[{grid!r}]: a grid is one or more positive program counts")
    return dims


_KERNELS: dict[str, Kernel] = {}  # by op_key, for the op neuronsim_nki::call


def _flat(result: Any) -> list:
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _flat(r)]
    return [result]


def _register_torch_op():
    """neuronsim_nki::call(kernel, inputs): a kernel as one node of a torch.compile graph.
    On the device it runs as _call_on_device does; its fake form traces the kernel for the
    shapes of its outputs."""
    import torch

    library = torch.library.Library("neuronsim_nki", "DEF")
    library.define("call(str kernel, Tensor[] inputs) -> Tensor[]")

    def call(kernel: str, inputs: list):  # on fake tensors, the kernel is traced, not run
        return _flat(_KERNELS[kernel]._call_on_device({inputs[0].device}, *inputs))

    library.impl("call", call, "PrivateUse1")
    torch.library.register_fake("neuronsim_nki::call", call, lib=library)
    return library


# The custom ops whose bodies are NKI kernels: device kernels of their own, never fallbacks.
_KERNEL_OPS = {"neuronsim_nki::call"}


def is_kernel_op(target: Any) -> bool:
    """Whether an FX node's target is an NKI kernel's op (what torch.compile runs as a
    device kernel of its own between its programs)."""
    schema = getattr(target, "_schema", None)
    return schema is not None and schema.name in _KERNEL_OPS


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(value)


def nki_op(name: str, fn: Callable | None = None, mutates_args=()):
    """A PyTorch custom op (``"namespace::name"``) whose body calls NKI kernels: ``fn`` takes
    and returns tensors, with type annotations (its schema), and calls ``@nki.jit`` kernels
    on them. The op runs ``fn`` on the device; its fake form runs ``fn`` on fake tensors,
    where each kernel is traced for its outputs' shapes and not run. So the op works
    eagerly and as one node of a torch.compile graph (torch_neuronx.nki_op)."""
    import torch

    def register(body: Callable):
        op = torch.library.custom_op(name, mutates_args=mutates_args)(body)
        op.register_fake(body)
        _KERNEL_OPS.add(name)
        return op

    return register if fn is None else register(fn)


class _GridCaller:
    """What wrap_nki gives: ``caller[grid](*args)`` runs the kernel on its arguments."""

    def __init__(self, kernel: Kernel, **defaults: Any):
        self.kernel, self.defaults = kernel, defaults

    def __getitem__(self, grid) -> Callable:
        launch = self.kernel[grid]
        return lambda *args, **kwargs: launch(*args, **{**self.defaults, **kwargs})

    def __call__(self, *args: Any, **kwargs: Any):
        return self[1](*args, **kwargs)


def wrap_nki(kernel: Callable, **kwargs: Any) -> _GridCaller:
    """TorchNeuron's way of calling an NKI kernel from PyTorch code: ``wrap_nki(kernel)[grid]
    (*tensors)`` runs it on the tensors' device."""
    return _GridCaller(kernel if isinstance(kernel, Kernel) else Kernel(kernel), **kwargs)


def _is_neuron_tensor(value: Any) -> bool:
    return getattr(getattr(value, "device", None), "type", None) == "neuron"


def _is_tensor(value: Any) -> bool:
    """Whether a kernel argument is a tensor (bound to an HBM tensor of the kernel): a
    NumPy array, a torch tensor or an nki.typing tensor; anything else is passed to the
    body as the Python value it is."""
    from .typing import TensorSpec

    if isinstance(value, (np.ndarray, TensorSpec)):
        return True
    return type(value).__module__.startswith("torch") and hasattr(value, "shape")


def _layout(value: Any) -> Any:
    """An argument as the kernel is built for it: a tensor by ("tensor", dtype, shape),
    anything else by its value."""
    if _is_tensor(value):
        return ("tensor", dtype_name(value.dtype), tuple(value.shape))
    return value


def _unpack(result: Any, values: dict[str, np.ndarray]):
    from ._trace import Tensor

    if isinstance(result, Tensor):
        return values.get(result.name)
    if isinstance(result, (tuple, list)):
        return type(result)(_unpack(r, values) for r in result)
    return result


def _parameter_names(fn: Callable, count: int, kwargs: dict) -> dict:
    """The HBM tensor name of each argument: its parameter's name."""
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    by_key = {i: names[i] if i < len(names) else f"arg{i}" for i in range(count)}
    by_key.update({k: k for k in kwargs})
    return by_key


# NKI's own jit modes: the framework to compile for, which the arguments say here.
JIT_MODES = ("auto", "baremetal", "benchmark", "simulation", "torchxla", "jax", "trace")


def jit(
    fn: Callable | None = None,
    mode: str = "auto",
    *,
    target: str | None = None,
    sim_mode: str | None = None,
    trace: str | None = None,
    summary_json: str | None = None,
    check: bool | None = None,
    **_options: Any,
):
    """Makes `fn` an NKI kernel that runs on the simulator when called: on host arrays, or
    on tensors of device "neuron". `mode` is NKI's (any of JIT_MODES: the arguments decide
    here); `sim_mode` is the simulator's (functional-and-timing, functional-only,
    timing-only; default NEURONSIM_NKI_MODE, else functional-and-timing). `trace` writes a
    Perfetto trace of each run, `summary_json` neuron-profile's summary of it. `check`
    verifies that no read sees data another tensor overwrote (default
    NEURONSIM_NKI_CHECK)."""
    if isinstance(fn, str):  # @nki.jit("auto")
        fn, mode = None, fn
    if mode not in JIT_MODES:
        raise NkiError(f"nki.jit: mode {mode!r} is not one of {', '.join(JIT_MODES)}")
    if fn is None:
        return lambda f: Kernel(f, target, sim_mode, trace, summary_json, check)
    return Kernel(fn, target, sim_mode, trace, summary_json, check)


def simulate(kernel: Callable) -> Callable:
    """Runs `kernel` (an @nki.jit kernel, one on a grid, or a plain body) on the
    simulator."""
    return kernel if isinstance(kernel, (Kernel, _Launch)) else Kernel(kernel)


def install() -> bool:
    """Makes ``import nki`` (``nki.language``, ``nki.isa``) this package and ``from neuronxcc
    import nki`` (the legacy surface) neuronsim.nki.legacy, each unless another package of
    that name is importable. Returns whether ``nki`` is this package."""
    import types

    from . import legacy

    def alias(name: str, modules: dict[str, Any]) -> bool:
        if name in sys.modules:
            return sys.modules[name] is modules[name]
        if importlib.util.find_spec(name) is not None:
            return False
        sys.modules.update(modules)
        return True

    this = sys.modules[__name__]
    ours = alias(
        "nki",
        {
            "nki": this,
            "nki.language": language,
            "nki.isa": isa,
            "nki.typing": typing,
            "nki.compiler": compiler,
        },
    )
    neuronxcc = types.ModuleType("neuronxcc", "neuronsim's stand-in: only neuronxcc.nki")
    neuronxcc.nki = legacy
    alias(
        "neuronxcc",
        {
            "neuronxcc": neuronxcc,
            "neuronxcc.nki": legacy,
            "neuronxcc.nki.language": language,
            "neuronxcc.nki.isa": legacy.isa,
            "neuronxcc.nki.typing": typing,
            "neuronxcc.nki.compiler": compiler,
        },
    )
    return ours


_LIBRARY = _register_torch_op()  # kept: the op lives as long as its library

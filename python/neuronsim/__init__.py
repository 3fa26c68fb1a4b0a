"""neuronsim: a simulated Trainium behind PyTorch's device ``"neuron"``.

Importing ``neuronsim`` (or ``torch_neuronx``, its compatibility name) registers the
device: tensors on ``"neuron"`` live in the simulated HBM of a NeuronCore, their ops run
as kernels on the cycle-approximate simulator (values and simulated time), and an op
the backend has no kernel for runs on the CPU, counted (``fallback_counts()``) or
refused in strict mode (``NEURONSIM_STRICT=1``). ``import torch`` alone does it too,
through PyTorch's device-backend autoload (``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns
that off).

The machine is chosen by the Neuron runtime's variables: ``NEURONSIM_INSTANCE``
(default trn2.3xlarge), ``NEURON_RT_VISIBLE_CORES``, ``NEURON_RT_VIRTUAL_CORE_SIZE``,
and ``NEURONSIM_MODE`` (``functional-and-timing``, ``functional-only`` for fast CI,
``timing-only``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os

__version__ = "0.1.0"


def _refuse_aws_torch_neuronx() -> None:
    # Both packages install the torch_neuronx module and claim PyTorch's PrivateUse1
    # device, which a process can name only once.
    try:
        importlib.metadata.distribution("torch-neuronx")
    except importlib.metadata.PackageNotFoundError:
        return
    raise ImportError(
        "neuronsim cannot run beside AWS's torch-neuronx, which is installed in this "
        "environment: both provide the torch_neuronx module and the 'neuron' device. "
        "Use a separate virtual environment for neuronsim."
    )


def _autoload() -> None:
    """Entry point of PyTorch's device autoload (group ``torch.backends``). Importing
    this package registers the device; torch may call this while the package is still
    being imported (``import neuronsim`` imports torch, whose autoload comes back here),
    which is why it is defined before torch is imported."""


# Refused before torch is imported: importing torch autoloads the installed device backend.
_refuse_aws_torch_neuronx()

import torch  # noqa: E402

from . import _C  # noqa: E402


def _register() -> None:
    name = torch._C._get_privateuse1_backend_name()
    if name == "neuron" and hasattr(torch, "neuron"):
        return
    if name != "privateuseone":
        raise ImportError(
            f"PyTorch's custom device is already named {name!r} by another backend; "
            "neuronsim needs it as 'neuron'"
        )
    from . import device as _device_module

    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


_register()


def _register_distributed() -> None:
    from . import distributed

    distributed.register()


_register_distributed()

from . import _torch_hooks  # noqa: E402

_torch_hooks.install()

from . import _exit  # noqa: E402

_exit.install()


@contextlib.contextmanager
def host_inspection():
    """Inside the block, ops without a neuron kernel run on the CPU without being counted
    or refused: the host is looking at tensors, not running a model."""
    _C.begin_host_inspection()
    try:
        yield
    finally:
        _C.end_host_inspection()


def _print_on_host() -> None:
    # Formatting a tensor runs a dozen small ops (masked_select, abs, float64 casts):
    # printing a neuron tensor is host inspection.
    import torch._tensor_str as tensor_str

    original = tensor_str._str
    if getattr(original, "_neuronsim", False):
        return

    def _str(self, *, tensor_contents=None):
        if self.device.type != "neuron":
            return original(self, tensor_contents=tensor_contents)
        with host_inspection():
            return original(self, tensor_contents=tensor_contents)

    _str._neuronsim = True
    tensor_str._str = _str


_print_on_host()


def fallback_counts() -> dict[str, int]:
    """How many times each op without a neuron kernel ran on the CPU, by aten name."""
    return dict(_C.fallback_counts())


def reset_fallback_counts() -> None:
    _C.reset_fallback_counts()


def set_strict(on: bool) -> None:
    """In strict mode an op without a neuron kernel raises an error naming it instead
    of running on the CPU (also set by ``NEURONSIM_STRICT=1``)."""
    _C.set_strict(bool(on))


def strict() -> bool:
    return _C.strict()


@contextlib.contextmanager
def strict_mode(on: bool = True):
    """``with neuronsim.strict_mode(): ...`` runs a block in (or out of) strict mode."""
    old = strict()
    set_strict(on)
    try:
        yield
    finally:
        set_strict(old)


def rng_source() -> str:
    """Where random ops on "neuron" devices draw from: ``"device"`` (the default: the
    device's own generators, streams of their own as CUDA's are) or ``"cpu"`` (the host draws
    with the CPU's generator exactly as the CPU op would and copies the values to the device,
    as TorchNeuron does today, so that a run seeded with ``torch.manual_seed`` gives the CPU's
    numbers). Set by ``NEURONSIM_RNG`` and ``set_rng_source``."""
    return _C.rng_source()


def set_rng_source(source: str) -> None:
    """Chooses where random ops draw from: ``"device"`` or ``"cpu"`` (see ``rng_source``)."""
    _C.set_rng_source(source)


@contextlib.contextmanager
def rng_source_as(source: str):
    """``with neuronsim.rng_source_as("cpu"): ...`` draws from ``source`` in a block."""
    old = rng_source()
    set_rng_source(source)
    try:
        yield
    finally:
        set_rng_source(old)


def simulated_time() -> float:
    """The device clock in seconds: how far the simulated work of every NeuronCore has
    reached (0 in functional-only mode, which does not time)."""
    return _C.simulated_time_ps() / 1e12


def kernels_built() -> int:
    """How many distinct kernels (op, shapes, dtypes, layout) were built and loaded so
    far; once a model's step has run, further steps build none."""
    return _C.kernels_built()


def kernels_run() -> int:
    """How many kernels ran on the simulated NeuronCores so far."""
    return _C.kernels_run()


def mode() -> str:
    """The simulation mode: functional-and-timing, functional-only or timing-only."""
    return _C.mode()


def instance() -> str:
    """The simulated instance type (``NEURONSIM_INSTANCE``)."""
    return _C.instance()


@contextlib.contextmanager
def profile(path: str | os.PathLike | None, summary_json: str | os.PathLike | None = None):
    """Writes one Perfetto/Chrome trace of every kernel run inside the block, each
    named by its aten op, on the device's time axis; with `summary_json`, also
    neuron-profile's summary of the block (its summary-json fields and units). In a
    distributed job, ``{rank}`` in either path becomes the process's rank; the per-rank
    traces merge into one with ``python -m neuronsim.tools.merge_traces``."""

    def _path(p) -> str:
        return os.fspath(p).replace("{rank}", os.environ.get("RANK", "0")) if p else ""

    _C.drain()  # the work before the block is done; the simulated host did not wait for it
    session = _C.start_trace()
    try:
        yield
    finally:
        _C.stop_trace(session, _path(path), _path(summary_json))


__all__ = [
    "fallback_counts",
    "instance",
    "kernels_built",
    "kernels_run",
    "mode",
    "profile",
    "reset_fallback_counts",
    "rng_source",
    "rng_source_as",
    "set_rng_source",
    "set_strict",
    "simulated_time",
    "strict",
    "strict_mode",
]

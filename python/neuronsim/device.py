"""``torch.neuron``: the device module of the simulated NeuronCores.

What Transformers, Accelerate, TRL, DeviceMesh, FSDP2 and DTensor call on a device
module (``getattr(torch, "neuron")``), on the devices of neuronsim: one torch device per
visible logical NeuronCore of the simulated instance.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from . import (
    _C,
    memory,  # noqa: F401 (torch.neuron.memory: history and snapshots)
)
from .memory import _dump_snapshot, _record_memory_history, _snapshot, memory_snapshot  # noqa: F401

_TYPE = "neuron"
DeviceLike = torch.device | str | int | None


def _index(device: DeviceLike = None) -> int:
    """The index of `device` (the current device when None), checked against the count."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != _TYPE:
            raise ValueError(f"expected a neuron device, got {device}")
        index = current_device() if device.index is None else device.index
    count = device_count()
    if not 0 <= index < count:
        raise RuntimeError(
            f"neuron:{index} does not exist: {count} NeuronCore{'s' if count != 1 else ''} "
            f"{'are' if count != 1 else 'is'} visible (neuron:0-{count - 1})"
        )
    return index


def _neuron(device: DeviceLike = None) -> torch.device:
    return torch.device(_TYPE, _index(device))


# ---- devices ------------------------------------------------------------------


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def init() -> None:
    _C.init()


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    _C.init()


def _is_in_bad_fork() -> bool:
    return False


def current_device() -> int:
    return _C.current_device()


def set_device(device: DeviceLike) -> None:
    _C.set_device(_index(device))


class device:
    """Context manager that makes `device` current inside the block."""

    def __init__(self, device: DeviceLike):
        self.index = _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.prev)
        return False


def synchronize(device: DeviceLike = None) -> None:
    """Waits for the work queued on the device (every core runs in order)."""
    _index(device)
    _C.synchronize()


@dataclass(frozen=True)
class _DeviceProperties:
    name: str
    instance: str
    generation: str
    chip: int
    physical_core: int
    physical_cores_per_device: int
    total_memory: int  # the HBM stack beside the core, where its tensors live
    physical_cores_per_hbm_stack: int  # the cores that share that stack
    peak_bf16_flops: float  # TensorE's BF16 peak, FLOP/s, of the device's physical cores together
    dma_bytes_per_s: float  # their DMA engines together
    hbm_bytes_per_s: float  # the core's HBM stack
    host_dispatch_s: float  # the host's dispatch of one op (0 with NEURONSIM_HOST_DISPATCH=0)
    type: str = _TYPE

    def __repr__(self) -> str:
        return (
            f"_NeuronDeviceProperties(name='{self.name}', total_memory="
            f"{self.total_memory // 2**20}MB, chip={self.chip}, core={self.physical_core})"
        )


def get_device_properties(device: DeviceLike = None) -> _DeviceProperties:
    return _DeviceProperties(**_C.device_properties(_index(device)))


def get_device_name(device: DeviceLike = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: DeviceLike = None) -> dict[str, Any]:
    return {}


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


# ---- random numbers -----------------------------------------------------------


def _generator(device: DeviceLike = None) -> torch.Generator:
    return _C.default_generator(_index(device))


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.default_generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    for i in range(device_count()):
        _C.default_generator(i).seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: DeviceLike = None) -> torch.Tensor:
    """The generator state: 16 bytes, the int64 seed then the int64 offset."""
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = None) -> None:
    _generator(device).set_state(new_state.cpu())


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def default_generator(device: DeviceLike = None) -> torch.Generator:
    return _generator(device)


# ---- memory -------------------------------------------------------------------


def memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: DeviceLike = None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


# TorchNeuron's nested statistics: each figure of its pool "all" as {current, peak,
# allocated, freed}, beside CUDA's flat keys ("allocated_bytes.all.current", ...).
_NESTED = ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes")


def memory_stats(device: DeviceLike = None) -> dict[str, Any]:
    """The device's allocator statistics, in both forms scripts read: CUDA's flat keys
    (``stats["allocated_bytes.all.current"]``) and TorchNeuron's nested ones
    (``stats["allocated_bytes"]["current"]``, ``stats["num_tensor_frees"]``, ...)."""
    flat = torch.accelerator.memory_stats(_index(device))
    stats = dict(flat)
    for name in _NESTED:
        stats[name] = {
            k: flat.get(f"{name}.all.{k}", 0) for k in ("current", "peak", "allocated", "freed")
        }
    stats["num_tensor_frees"] = flat.get("allocation.all.freed", 0)
    stats["allocation_requests"] = flat.get("allocation.all.allocated", 0)
    return stats


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """The device's memory statistics as a table: the allocations, frees, retries and
    out-of-memory errors, then the bytes allocated, reserved and in use by live tensors
    (current, peak, and summed over the run)."""
    index = _index(device)
    s = memory_stats(index)
    rule = "=" * 75
    lines = [
        rule,
        f" neuron:{index} memory summary ({get_device_properties(index).name}, simulated)",
        rule,
        f" allocations: {s['allocation_requests']}   frees: {s['num_tensor_frees']}   "
        f"retries: {s.get('num_alloc_retries', 0)}   out of memory: {s.get('num_ooms', 0)}",
        "-" * 75,
        f" {'':<16}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}",
    ]
    for name, label in (
        ("allocated_bytes", "Allocated"),
        ("reserved_bytes", "Reserved"),
        ("active_bytes", "Active"),
    ):
        row = s[name]
        cells = "".join(f"{_size(row[k]):>14}" for k in ("current", "peak", "allocated", "freed"))
        lines.append(f" {label:<16}{cells}")
    lines.append(rule)
    return "\n".join(lines) + "\n"


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    torch.accelerator.empty_cache()


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of the HBM of the device's chip, which its cores share."""
    return torch.accelerator.get_memory_info(_index(device))


# ---- streams and events -------------------------------------------------------


class Stream(torch.Stream):
    """A stream of a neuron device. Every stream of a device runs on the core's one
    in-order queue, which is a valid schedule for any set of streams."""

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs):
        return super().__new__(cls, device=_neuron(device), priority=priority, **kwargs)

    def wait_stream(self, stream: torch.Stream) -> None:
        self.wait_event(stream.record_event())


class _NeuronEventType(type):
    # torch.Event's methods accept only torch.Event itself (no subclass), so
    # torch.neuron.Event makes torch.Event objects and recognises them.
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == _TYPE


class Event(metaclass=_NeuronEventType):
    """An event of the current neuron device (a torch.Event); elapsed_time() between
    two events is simulated milliseconds."""

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ):
        return torch.Event(
            device=_neuron(),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: DeviceLike = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: DeviceLike = None) -> torch.Stream:
    """Stream 0 of the device (torch.Stream takes the device type as c10's integer)."""
    device_type = int(torch._C._autograd.DeviceType.PrivateUse1.value)
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=device_type)


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s: torch.Stream | None):
    """Makes `s` the current stream (and its device the current device) inside the
    block; both are restored after it."""
    if s is None:
        yield
        return
    prev_device = current_device()
    prev = torch.accelerator.current_stream(s.device_index)
    torch.accelerator.set_stream(s)
    try:
        yield
    finally:
        torch.accelerator.set_stream(prev)
        set_device(prev_device)


# ---- simulation ---------------------------------------------------------------


def simulated_time() -> float:
    """The device clock in seconds (see neuronsim.simulated_time)."""
    return _C.simulated_time_ps() / 1e12

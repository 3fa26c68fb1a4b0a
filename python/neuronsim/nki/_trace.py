"""The tracing half of neuronsim.nki.

A kernel body runs as plain Python: loops unroll, helper functions inline. Each
instruction it calls appends one line of neuronsim's assembly (docs/isa.md) to the
trace, in program order and without semaphores; the C++ half (``_C.nki.build``) adds
the semaphores the order needs (isa::KernelBuilder) and runs the program on a
simulated NeuronCore.

A tensor is a view: a storage (an HBM tensor, or an SBUF/PSUM allocation) and an
access pattern over it, (stride, size) per dim. On chip, dim 0 is the partition dim.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
from typing import Any

import numpy as np


class NkiError(ValueError):
    """A kernel that cannot run as written: what is wrong, and where."""


# name -> (assembly name, bytes, numpy dtype of the host values; None: carried as bits)
_DTYPES = {
    "float32": ("float32", 4, np.float32),
    "bfloat16": ("bfloat16", 2, None),
    "float16": ("float16", 2, np.float16),
    "tfloat32": ("tfloat32", 4, np.float32),
    "float8_e4m3": ("float8_e4m3", 1, None),
    "float8_e5m2": ("float8_e5m2", 1, None),
    "int8": ("int8", 1, np.int8),
    "uint8": ("uint8", 1, np.uint8),
    "int16": ("int16", 2, np.int16),
    "uint16": ("uint16", 2, np.uint16),
    "int32": ("int32", 4, np.int32),
    "uint32": ("uint32", 4, np.uint32),
    "bool": ("bool", 1, np.bool_),
}


def dtype_name(dtype: Any) -> str:
    """The NKI name of a dtype given as a name, a numpy dtype or a torch dtype."""
    name = getattr(dtype, "name", None) or str(dtype)
    name = name.replace("torch.", "")
    name = {"float": "float32", "half": "float16", "bool_": "bool", "int": "int32"}.get(name, name)
    if name not in _DTYPES:
        raise NkiError(f"dtype {dtype!r} is not an NKI dtype (one of {', '.join(_DTYPES)})")
    return name


def itemsize(dtype: str) -> int:
    return _DTYPES[dtype][1]


SBUF, PSUM, HBM = "sbuf", "psum", "hbm"


@dataclasses.dataclass
class Storage:
    buffer: str  # sbuf, psum or hbm
    name: str
    dtype: str
    partition: int = 0  # on chip: the first partition
    offset: int = 0  # on chip: the byte offset in each partition


@dataclasses.dataclass(frozen=True)
class ds:  # noqa: N801 (NKI's name)
    """A dynamic slice: `size` elements from `start`."""

    start: int
    size: int


class Index:
    """An affine index of one axis, start + step * i for i in range(size): what nl.arange
    and nl.mgrid give, with + and * by integers (the legacy API's index expressions).
    Indices derived from one arange share its `axis`; comparing one with a number gives a
    Mask of that axis."""

    def __init__(self, start: int, step: int, size: int, axis: object = None):
        self.start, self.step, self.size = int(start), int(step), int(size)
        self.axis = axis if axis is not None else object()

    def as_slice(self) -> slice:
        if self.step <= 0:
            raise NkiError(f"index {self}: steps are positive")
        return slice(self.start, self.start + self.step * (self.size - 1) + 1, self.step)

    def __getitem__(self, _axes) -> Index:  # arange(n)[:, None]: the axis is the position
        return self

    def _derived(self, start: int, step: int) -> Index:
        return Index(start, step, self.size, self.axis)

    def __add__(self, v: int) -> Index:
        if isinstance(v, Index):
            raise NkiError("indices of two axes add only as a broadcast, which is not supported")
        return self._derived(self.start + int(v), self.step)

    __radd__ = __add__

    def __sub__(self, v: int) -> Index:
        return self._derived(self.start - int(v), self.step)

    def __mul__(self, v: int) -> Index:
        return self._derived(self.start * int(v), self.step * int(v))

    __rmul__ = __mul__

    # -- masks: the positions i whose value compares true, as a range [lo, hi) ----------
    def _first_at_least(self, bound: int) -> int:
        """The first i with start + step * i >= bound (step > 0), within 0..size."""
        if self.step <= 0:
            raise NkiError(f"mask on {self}: steps are positive")
        return min(self.size, max(0, -(-(bound - self.start) // self.step)))

    def _mask(self, lo: int, hi: int) -> Mask:
        return Mask({self.axis: (lo, hi)})

    def __lt__(self, bound) -> Mask:
        return self._mask(0, self._first_at_least(_mask_bound(bound)))

    def __le__(self, bound) -> Mask:
        return self._mask(0, self._first_at_least(_mask_bound(bound) + 1))

    def __ge__(self, bound) -> Mask:
        return self._mask(self._first_at_least(_mask_bound(bound)), self.size)

    def __gt__(self, bound) -> Mask:
        return self._mask(self._first_at_least(_mask_bound(bound) + 1), self.size)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Index({self.start} + {self.step} * i, i < {self.size})"


def _mask_bound(bound) -> int:
    if isinstance(bound, Index):
        raise NkiError("a mask that compares two indices (a triangle) is not supported yet")
    return int(bound)


class Mask:
    """A legacy mask= of comparisons of indices with numbers, joined by &: for each axis, the
    range of its positions that stay. An instruction under it covers only that rectangle."""

    def __init__(self, ranges: dict):
        self.ranges = ranges

    def __and__(self, other: Mask) -> Mask:
        if not isinstance(other, Mask):
            raise NkiError(f"a mask joins masks with &, not {other!r}")
        ranges = dict(self.ranges)
        for axis, (lo, hi) in other.ranges.items():
            old_lo, old_hi = ranges.get(axis, (lo, hi))
            ranges[axis] = (max(lo, old_lo), min(hi, old_hi))
        return Mask(ranges)

    def __or__(self, _other):
        raise NkiError("masks joined by | are not rectangles; only & is supported")

    def __invert__(self):
        raise NkiError("a negated mask is not a rectangle; compare the other way instead")

    def __bool__(self):
        raise NkiError("a mask is not a Python bool: pass it as mask=")


class Tensor:
    """An NKI tensor: a view of a storage by an access pattern."""

    def __init__(
        self,
        storage: Storage,
        dims: list[tuple[int, int]],
        start: int = 0,
        partition: int = 0,
        axes: list | None = None,
        room: list | None = None,
    ):
        self._storage = storage
        self._dims = [(int(s), int(n)) for s, n in dims]  # (stride, size) per dim, in elements
        self._start = int(start)  # elements from the storage's start (on chip: in dims 1..)
        self._partition = int(partition)  # on chip: partitions from the storage's first
        # The legacy index axis (nl.arange) each dim was sliced by, for masks; None if none.
        self._axes = list(axes) if axes is not None else [None] * len(self._dims)
        # Per dim, the positions the underlying dim has from this view's start: an arange
        # index may reach past it, which only a mask= may cut away (checked at emit).
        self._room = list(room) if room is not None else [n for _, n in self._dims]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for _, n in self._dims)

    @property
    def dtype(self) -> str:
        return self._storage.dtype

    @property
    def buffer(self) -> str:
        return self._storage.buffer

    @property
    def name(self) -> str:
        return self._storage.name

    @property
    def ndim(self) -> int:
        return len(self._dims)

    def __repr__(self) -> str:
        return f"NkiTensor({self.name}, shape={self.shape}, dtype={self.dtype}, {self.buffer})"

    def __getitem__(self, index) -> Tensor:
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = (slice(None),) * (self.ndim - len(index) + 1)
            index = index[:at] + fill + index[at + 1 :]
        if len(index) > self.ndim:
            raise NkiError(f"{self.name}: {len(index)} indices for a tensor of {self.ndim} dims")
        index = index + (slice(None),) * (self.ndim - len(index))
        dims, start, partition, axes, room = [], self._start, self._partition, [], []
        on_chip = self.buffer != HBM
        for d, (item, (stride, size)) in enumerate(zip(index, self._dims)):
            axis = self._axes[d]
            if isinstance(item, ds):
                item = slice(item.start, item.start + item.size)
            elif isinstance(item, Index):  # nl.arange/mgrid: start + step * i
                # Not clipped to the dim, as a slice would be: a mask= cuts what lies outside.
                if item.start < 0 or item.step <= 0:
                    raise NkiError(f"{self.name}: index {item} of dim {d} (size {size}) is invalid")
                first, step, count = item.start, item.step, item.size
                if on_chip and d == 0:
                    if step != 1:
                        raise NkiError(f"{self.name}: partitions are indexed with step 1")
                    partition += first
                    dims.append((1, count))
                else:
                    start += first * stride
                    dims.append((stride * step, count))
                axes.append(item.axis)
                room.append(max(0, -(-(self._room[d] - first) // step)))
                continue
            if isinstance(item, slice):
                first, stop, step = item.indices(size)
                count = len(range(first, stop, step))
                if count <= 0:
                    raise NkiError(f"{self.name}: index {item} of dim {d} (size {size}) is empty")
                if on_chip and d == 0:
                    if step != 1:
                        raise NkiError(
                            f"{self.name}: partitions are sliced with step 1, not {step}"
                        )
                    partition += first
                    dims.append((1, count))
                else:
                    start += first * stride
                    dims.append((stride * step, count))
                # Positions move with the slice: a mask's axis no longer names them.
                axes.append(axis if first == 0 and step == 1 else None)
                room.append(count)
                continue
            i = int(item)
            if not -size <= i < size:
                raise NkiError(f"{self.name}: index {i} is out of range for dim {d} (size {size})")
            i %= size
            if on_chip and d == 0:
                raise NkiError(
                    f"{self.name}: the partition dim is indexed with {i}; slice it ({i}:{i + 1})"
                )
            start += i * stride
        return Tensor(self._storage, dims, start, partition, axes, room)

    def broadcast_to(self, shape) -> Tensor:
        """This view repeated along its size-1 dims (stride 0): one DMA puts a row of HBM on
        every partition."""
        shape = tuple(int(n) for n in shape)
        if len(shape) != self.ndim:
            raise NkiError(f"{self.name}: broadcast_to {shape} from {self.shape}")
        dims = []
        for (stride, size), n in zip(self._dims, shape):
            if size != n and size != 1:
                raise NkiError(f"{self.name}: dim of size {size} does not broadcast to {n}")
            dims.append((stride if size == n else 0, n))
        return Tensor(self._storage, dims, self._start, self._partition, self._axes)

    def permute_free(self, order) -> Tensor:
        """This view with its free dims (1..) walked in `order` (indices among them)."""
        dims = [self._dims[0], *(self._dims[1 + i] for i in order)]
        axes = [self._axes[0], *(self._axes[1 + i] for i in order)]
        room = [self._room[0], *(self._room[1 + i] for i in order)]
        return Tensor(self._storage, dims, self._start, self._partition, axes, room)

    def transposed(self) -> Tensor:
        """This 2-D HBM view with its dims swapped (a walk down its columns)."""
        if self.buffer != HBM or self.ndim != 2:
            raise NkiError(f"{self.name}: only a 2-D HBM view is transposed by its pattern")
        return Tensor(
            self._storage, self._dims[::-1], self._start, 0, self._axes[::-1], self._room[::-1]
        )

    def masked(self, limits: list) -> Tensor | None:
        """This view cut to positions [lo, hi) per dim (None: whole); None if empty."""
        dims, start, partition, room = [], self._start, self._partition, []
        for d, ((stride, size), limit) in enumerate(zip(self._dims, limits)):
            lo, hi = limit if limit is not None else (0, size)
            hi = min(hi, size)
            if hi <= lo:
                return None
            if d == 0 and self.buffer != HBM:
                partition += lo
            else:
                start += lo * stride
            dims.append((stride, hi - lo))
            room.append(self._room[d] - lo)
        return Tensor(self._storage, dims, start, partition, self._axes, room)

    def check_within(self) -> None:
        """Refuses a view whose arange indices reach past the dim they index."""
        for d, ((_, size), room) in enumerate(zip(self._dims, self._room)):
            if size > room:
                raise NkiError(
                    f"{self.name}: dim {d} is indexed to {size} positions but has {room} from "
                    f"there on; cut the rest with mask="
                )

    def with_axes_of(self, other: Tensor) -> Tensor:
        """This tensor, indexed by the same legacy axes as `other` (a tile made from it)."""
        if other.ndim == self.ndim:
            self._axes = list(other._axes)
        return self

    def mask_limits(self, mask: Mask) -> list:
        """Per dim, the positions `mask` keeps along the axis that dim was sliced by."""
        return [mask.ranges.get(axis) if axis is not None else None for axis in self._axes]

    # -- the assembly form --------------------------------------------------------------
    def pattern(self) -> str:
        """This view as an access pattern of neuronsim's assembly."""
        st, dt = self._storage, _DTYPES[self.dtype][0]
        size = itemsize(self.dtype)
        if self.buffer == HBM:
            rows = self._dims[0] if self._dims else (1, 1)
            free = self._dims[1:] or [(1, 1)]
            if len(free) > 4:
                raise NkiError(
                    f"{self.name}: a DMA walks rows and up to 4 free dims, not {len(free)}"
                )
            pairs = ",".join(f"[{s},{n}]" for s, n in [rows, *free])
            return f"hbm.{dt}({st.name})+{self._start * size}[{pairs}]"
        partitions = self._dims[0][1] if self._dims else 1
        free = self._dims[1:] or [(1, 1)]
        if len(free) > 4:
            raise NkiError(f"{self.name}: an instruction walks up to 4 free dims, not {len(free)}")
        first = st.partition + self._partition
        pairs = ",".join(f"[{s},{n}]" for s, n in free)
        return f"{self.buffer}.{dt}[{first}:{partitions}]+{st.offset + self._start * size}[{pairs}]"

    # -- tile arithmetic (each a new tile, as nl.add etc.) -------------------------------
    def _binary(self, other, op: str, reverse: bool = False):
        from . import language

        return language._elementwise(op, self, other, reverse=reverse)

    def __add__(self, other):
        return self._binary(other, "add")

    def __radd__(self, other):
        return self._binary(other, "add", reverse=True)

    def __sub__(self, other):
        return self._binary(other, "subtract")

    def __rsub__(self, other):
        return self._binary(other, "subtract", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "multiply")

    def __rmul__(self, other):
        return self._binary(other, "multiply", reverse=True)

    def __truediv__(self, other):
        return self._binary(other, "divide")

    def __iadd__(self, other):
        """dst += value: a pending matmul accumulates into this PSUM tile (the legacy
        `res_psum += nisa.nc_matmul(a, b)`); anything else is added in place."""
        from . import language

        return language._accumulate(self, other)

    def identity(self) -> tuple:
        """This view of this allocation: a buffer allocated again is another allocation."""
        return (id(self._storage), self.pattern())


class Trace:
    """One kernel being traced: its tensors, allocations and instruction lines."""

    def __init__(self, target: dict[str, Any]):
        self.target = target
        self.declarations: list[str] = []
        self.lines: list[str] = []
        self.sources: list[str] = []  # the kernel's source line of each instruction
        self.params: list[tuple[int, str]] = []  # (argument position, HBM tensor) per input
        self.outputs: list[Tensor] = []
        self.used = {SBUF: 0, PSUM: 0}  # automatic allocations: bytes per partition
        self.pinned = {SBUF: 0, PSUM: 0}  # the end of the tensors at explicit addresses
        self.slots: dict[tuple, Storage] = {}
        self.loops: list[list] = []  # [site, iteration, serial] of each open loop
        self.iterations = 0  # serial numbers of loop iterations, kernel-wide
        self.occurrences: dict[tuple, int] = {}
        self.last_writer: dict[tuple, str] = {}
        self.allocations: list[Storage] = []
        self.names: dict[str, int] = {}
        self.dmas = 0  # DMAs issued: their queues go round robin
        self.mask: Mask | None = None  # the legacy mask= of the call being traced
        # The kernel's input values (name -> bytes), for register loads; None: not known.
        self.input_values: Any = None
        self.data_dependent = False  # a register load read a value: the program depends on it
        self.registers: Storage | None = None  # where register loads land, in SBUF

    # -- names and declarations -------------------------------------------------------
    def unique(self, name: str) -> str:
        n = self.names.get(name, 0)
        self.names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    def declare_hbm(self, name: str, dtype: str, shape: tuple[int, ...], kind: str) -> Tensor:
        name = self.unique(name)
        dims, stride = [], 1
        for n in reversed(shape):
            dims.insert(0, (stride, n))
            stride *= n
        dims_text = ",".join(str(n) for n in shape) or "1"
        self.declarations.append(f".tensor {name} {_DTYPES[dtype][0]} [{dims_text}] {kind}")
        return Tensor(Storage(HBM, name, dtype), dims)

    # -- on-chip allocation -----------------------------------------------------------
    def allocate(
        self, buffer: str, shape: tuple[int, ...], dtype: str, name: str, address=None
    ) -> Tensor:
        """An SBUF or PSUM tensor; in a loop, the same site rotates between two buffers
        (double buffering), as NKI's compiler allocates loop-local tensors. `address`
        (partition, byte offset) places it there instead."""
        if not shape:
            raise NkiError(f"{name}: an on-chip tensor needs a partition dim")
        partitions = shape[0]
        limit = self.target["partitions"]
        if not 0 < partitions <= limit:
            raise NkiError(f"{name}: partition dim {partitions} is outside 1..{limit}")
        per_partition = math.prod(shape[1:]) * itemsize(dtype)
        if address is not None:
            storage = self._place_at(buffer, partitions, per_partition, dtype, name, address)
            return self._view(storage, shape, dtype)
        site = _caller_site()
        loops = tuple(loop[0] for loop in self.loops)
        iteration, serial = (self.loops[-1][1], self.loops[-1][2]) if self.loops else (0, 0)
        base = (site, loops)
        # The n-th allocation from this site in this iteration of the innermost loop.
        occurrence = self.occurrences.get((base, serial), 0)
        self.occurrences[(base, serial)] = occurrence + 1
        key = (base, occurrence, iteration % 2)
        storage = self.slots.get(key)
        if storage is None:
            storage = self._place(buffer, per_partition, dtype, name)
            self.slots[key] = storage
        return self._view(storage, shape, dtype)

    def _view(self, storage: Storage, shape: tuple[int, ...], dtype: str) -> Tensor:
        """A new allocation of `storage`'s place, as a row-major tensor of `shape`."""
        dims, stride = [(1, shape[0])], 1
        for n in reversed(shape[1:]):
            dims.insert(1, (stride, n))
            stride *= n
        allocation = Storage(storage.buffer, storage.name, dtype, storage.partition, storage.offset)
        self.allocations.append(allocation)  # alive while traced: identities stay unique
        return Tensor(allocation, dims)

    def _place_at(self, buffer, partitions, size, dtype, name, address) -> Storage:
        """A tensor at the explicit address (first partition, byte offset in each
        partition). It must fit, start a PSUM bank, and stay clear of the tensors allocated
        automatically so far; those allocated later are placed after it."""
        try:
            partition, offset = (int(a) for a in address)
        except (TypeError, ValueError):
            raise NkiError(f"{name}: address {address!r} is not (partition, byte offset)") from None
        capacity = self.target["sbuf_partition_bytes" if buffer == SBUF else "psum_partition_bytes"]
        if partition < 0 or partition + partitions > self.target["partitions"]:
            raise NkiError(
                f"{name}: partitions {partition}..{partition + partitions - 1} at address "
                f"{address} exceed the {self.target['partitions']} partitions"
            )
        if offset < 0 or offset + size > capacity:
            raise NkiError(
                f"{name}: bytes {offset}..{offset + size} of each partition at address "
                f"{address} are outside {buffer.upper()} ({capacity} bytes per partition)"
            )
        bank = self.target["psum_bank_bytes"]
        if buffer == PSUM and offset % bank:
            raise NkiError(f"{name}: PSUM address {offset} does not start a bank ({bank} bytes)")
        if offset % itemsize(dtype):
            raise NkiError(f"{name}: address {offset} is not a multiple of its {dtype} elements")
        if offset < self.used[buffer]:
            raise NkiError(
                f"{name}: address {address} overlaps the tensors allocated automatically "
                f"({self.used[buffer]} bytes per partition of {buffer.upper()}); give "
                f"explicit addresses before the automatic allocations, or to all"
            )
        self.pinned[buffer] = max(self.pinned[buffer], offset + size)
        return Storage(buffer, name, dtype, partition, offset)

    def _place(self, buffer: str, size: int, dtype: str, name: str) -> Storage:
        capacity = self.target["sbuf_partition_bytes" if buffer == SBUF else "psum_partition_bytes"]
        # PSUM tiles start on a bank (matmuls accumulate within one); SBUF ones on 64 bytes.
        align = self.target["psum_bank_bytes"] if buffer == PSUM else 64
        offset = -(-max(self.used[buffer], self.pinned[buffer]) // align) * align
        if offset + size > capacity:
            raise NkiError(
                f"{name}: {size} bytes per partition in {buffer.upper()} do not fit: "
                f"{self.used[buffer]} of {capacity} bytes per partition are allocated"
            )
        self.used[buffer] = offset + size
        return Storage(buffer, name, dtype, 0, offset)

    # -- instructions -----------------------------------------------------------------
    def next_queue(self) -> int:
        self.dmas += 1
        return (self.dmas - 1) % 16

    def emit(self, engine: str, opcode: str, **fields: Any) -> None:
        if self.mask is not None:
            if opcode in ("matmul", "transpose"):
                raise NkiError(f"mask= on {opcode} is not supported yet (its dims change places)")
            fields = _masked_fields(fields, self.mask)
            if fields is None:  # the mask keeps nothing: no instruction
                return
        for value in fields.values():
            if isinstance(value, Tensor):
                value.check_within()
        parts = [engine, opcode]
        dst = fields.get("dst")
        if isinstance(dst, Tensor):  # what wrote this view last (matmuls accumulate on matmuls)
            self.last_writer[dst.identity()] = opcode
        for key, value in fields.items():
            if value is None:
                continue
            if isinstance(value, Tensor):
                value = value.pattern()
            elif isinstance(value, bool):
                value = "true" if value else "false"
            parts.append(f"{key}={value}")
        self.lines.append(" ".join(parts))
        self.sources.append(_caller_site(text=True))


class VirtualRegister:
    """An engine register: a 32-bit integer known while the kernel is traced, because its
    loads run the program up to them (the loops it bounds unroll at run time)."""

    def __init__(self, value: int):
        self.value = int(value)

    def __index__(self) -> int:
        return self.value

    __int__ = __index__

    def __add__(self, other) -> int:
        return self.value + int(other)

    __radd__ = __add__

    def __sub__(self, other) -> int:
        return self.value - int(other)

    def __rsub__(self, other) -> int:
        return int(other) - self.value

    def __mul__(self, other) -> int:
        return self.value * int(other)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return self.value != 0

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value})"


def load_register_value(trace: Trace, view: Tensor) -> int:
    """The value of the one element `view` holds at this point of the kernel: the program
    traced so far runs on the kernel's inputs (values only), and one DMA reads the element.
    Then the load itself goes into the program: a DMA of the element to the registers'
    place in SBUF, after whatever wrote it."""
    from .. import _C

    if math.prod(view.shape) != 1:
        raise NkiError(f"register_load: {view.name} {view.shape} is not one element")
    if view.buffer == PSUM:
        raise NkiError(f"register_load: {view.name} is in PSUM (SBUF or HBM)")
    if trace.input_values is None:
        raise NkiError(
            "register_load: the kernel's input values are not known here (inside "
            "torch.compile's tracing); a kernel with register loads runs eagerly"
        )
    name = trace.unique("register_value")
    dt = _DTYPES[view.dtype][0]
    decls = [*trace.declarations, f".tensor {name} {dt} [1] output"]
    read = f"sp dma_copy dst=hbm.{dt}({name})+0[[1,1],[1,1]] src={view.pattern()}"
    program = _C.nki.build(trace.target["name"], "\n".join(decls) + "\n", [*trace.lines, read])
    run = _C.nki.run(program, trace.input_values(), "functional-only", "")
    host = _DTYPES[view.dtype][2]
    if host is None or np.dtype(host).kind not in "iub":
        raise NkiError(f"register_load: {view.name} is {view.dtype}; registers hold integers")
    value = int(np.frombuffer(run["outputs"][name], dtype=host)[0])
    if trace.registers is None:
        trace.registers = trace._place(SBUF, 64, "int32", "registers")
    slot = Storage(SBUF, "registers", view.dtype, 0, trace.registers.offset)
    trace.emit(
        "sp", "dma_copy", dst=Tensor(slot, [(1, 1), (1, 1)]), src=view, queue=trace.next_queue()
    )
    trace.data_dependent = True
    return value


def _masked_fields(fields: dict, mask: Mask) -> dict | None:
    """The instruction's tensors cut to the rectangle `mask` keeps. A dim sliced by one of
    the mask's axes is cut by it; the dims of a tensor sliced by none (a whole tile) are cut
    like the same dims of the instruction's first tensor that was."""
    tensors = {k: v for k, v in fields.items() if isinstance(v, Tensor)}
    limits = {k: t.mask_limits(mask) for k, t in tensors.items()}
    ref = next((k for k, lim in limits.items() if any(x is not None for x in lim)), None)
    if ref is None:
        raise NkiError("mask=: no operand of the instruction is indexed by the mask's indices")
    shape = tensors[ref].shape
    out = dict(fields)
    for key, tensor in tensors.items():
        lim = limits[key]
        if all(x is None for x in lim) and tensor.ndim == len(shape):
            # A dim the same size as the reference's same dim is that dim (a [P, 1] result
            # keeps its one column).
            lim = [r if n == m else None for r, n, m in zip(limits[ref], tensor.shape, shape)]
        cut = tensor.masked(lim)
        if cut is None:
            return None
        out[key] = cut
    return out


_current = threading.local()


def current() -> Trace:
    trace = getattr(_current, "trace", None)
    if trace is None:
        raise NkiError("NKI calls run inside a kernel: decorate it with @nki.jit and call it")
    return trace


def set_current(trace: Trace | None) -> None:
    _current.trace = trace


def _caller_site(text: bool = False):
    """Where the kernel called in from: the first frame outside this package."""
    frame = sys._getframe(1)
    package = __name__.rsplit(".", 1)[0]
    while frame is not None and frame.f_globals.get("__name__", "").startswith(package):
        frame = frame.f_back
    if frame is None:
        return "<unknown>" if text else ("<unknown>", 0)
    if text:
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return (frame.f_code.co_filename, frame.f_lineno)

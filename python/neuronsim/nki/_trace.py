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
import os
import sys
import threading
from typing import Any

import numpy as np

from ..dtypes import DTYPES


class NkiError(ValueError):
    """A kernel that cannot run as written: what is wrong, and where."""


TARGETS = ("trn1", "trn2", "trn3")


def target_name(explicit: str | None) -> str:
    """The chip generation a kernel is built for: `explicit`, else
    NEURON_PLATFORM_TARGET_OVERRIDE (trn1..trn3, or gen2..gen4), else trn2."""
    target = explicit or os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE") or "trn2"
    target = {"gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}.get(target.lower(), target.lower())
    if target not in TARGETS:
        raise NkiError(f"target {target!r} is not one of {', '.join(TARGETS)}")
    return target


# nki.language's tile arithmetic, assignment and accumulation, which Tensor's operators
# (t + u, t[...] = v, psum += product) call. language.py builds on this module and fills
# these in when it is imported.
TILE_OPERATIONS: dict[str, Any] = {}


def refused(name: str, why: str):
    """A function of NKI's that is not supported: calling it raises NkiError naming it
    (`name`, qualified as the user spells it) and why."""

    def refuse(*_args, **_kwargs):
        raise NkiError(f"{name} is not supported: {why}")

    refuse.__name__ = name.rsplit(".", 1)[-1]
    refuse.__doc__ = f"Refused by name: {why}."
    return refuse


def dtype_name(dtype: Any) -> str:
    """The NKI name of a dtype given as a name, a numpy dtype or a torch dtype."""
    if isinstance(dtype, type) and issubclass(dtype, np.generic):  # np.float32, the type
        dtype = np.dtype(dtype)
    name = getattr(dtype, "name", None) or str(dtype)
    name = name.replace("torch.", "")
    name = {"float": "float32", "half": "float16", "bool_": "bool", "int": "int32"}.get(name, name)
    if name not in DTYPES:
        raise NkiError(f"dtype {dtype!r} is not an NKI dtype (one of {', '.join(DTYPES)})")
    return name


def itemsize(dtype: str) -> int:
    return DTYPES[dtype].bytes


SBUF, PSUM, HBM = "sbuf", "psum", "hbm"
# The fields through which an instruction writes a tensor.
WRITTEN_FIELDS = ("dst", "reduce_dst", "dst_index")


@dataclasses.dataclass(eq=False)
class Storage:
    """An HBM tensor, or one on-chip allocation: each nl.ndarray on chip is a storage of its
    own, whose offset is given after the trace (_alloc.py) unless the kernel placed it."""

    buffer: str  # sbuf, psum or hbm
    name: str
    dtype: str
    partition: int = 0  # on chip: the first partition
    offset: int = 0  # on chip: the byte offset in each partition
    serial: int = 0  # unique in its trace: the allocation's identity
    size: int = 0  # on chip: bytes per partition
    site: str = ""  # where the kernel allocated it (file:line)
    explicit: bool = False  # placed by the kernel (address=), not by the allocator
    uses: int = 0  # operands of instructions traced so far that are views of it
    written: bool = False  # an instruction traced so far writes it
    whole: tuple = ()  # on chip: the dims of the view nl.ndarray gave (all of it)
    # Placed by nki.compiler: the tile (a Tensor) of each index of the block dims.
    blocks: Any = None


class ParDim(int):
    """A size marked as the partition dim (nl.par_dim): the dims before it are blocks of
    tiles, laid out one after another in each partition."""


@dataclasses.dataclass(frozen=True)
class ds:  # noqa: N801 (NKI's name)
    """A dynamic slice: `size` elements from `start`."""

    start: int
    size: int


class Index:
    """An affine index, start + step * i for i in range(size): what nl.arange and nl.mgrid
    give, with + and * by integers (the legacy API's index expressions). Indices derived
    from one arange share its `axis`; comparing one with a number gives a Mask of that
    axis. `pos` is the place the axis marks give it among the index's dims
    (`arange(n)[None, :]` is 1; None when unmarked). Two indices of different axes add up
    to one index of several dims (`i_f1 * 4 + i_f2`), whose `terms` are (step, size, axis,
    pos) each."""

    def __init__(self, start: int, step: int, size: int, axis: object = None, pos=None):
        self.start = int(start)
        self.terms = [(int(step), int(size), axis if axis is not None else object(), pos)]

    @property
    def step(self) -> int:
        return self._single()[0]

    @property
    def size(self) -> int:
        return self._single()[1]

    @property
    def axis(self) -> object:
        return self._single()[2]

    @property
    def pos(self):
        return self._single()[3]

    def _single(self) -> tuple:
        if len(self.terms) != 1:
            raise NkiError(f"{self}: an index of several axes is used where one axis is needed")
        return self.terms[0]

    def as_slice(self) -> slice:
        if self.step <= 0:
            raise NkiError(f"index {self}: steps are positive")
        return slice(self.start, self.start + self.step * (self.size - 1) + 1, self.step)

    def __getitem__(self, marks) -> Index:
        """arange(n)[:, None], [None, :]: the axis takes the place of the ':'."""
        marks = marks if isinstance(marks, tuple) else (marks,)
        places = [k for k, m in enumerate(marks) if isinstance(m, slice)]
        if len(places) != 1 or any(m is not None for m in marks if not isinstance(m, slice)):
            raise NkiError(f"{self}[{marks!r}]: marks are one ':' among Nones")
        step, size, axis, _ = self._single()
        return Index(self.start, step, size, axis, places[0])

    def _derived(self, start: int, scale: int = 1) -> Index:
        index = Index(start, 1, 1)
        index.terms = [(step * scale, size, axis, pos) for step, size, axis, pos in self.terms]
        return index

    def __add__(self, v) -> Index:
        if isinstance(v, Index):
            axes = {t[2] for t in self.terms}
            if any(t[2] in axes for t in v.terms):
                raise NkiError(f"{self} + {v}: the same axis twice")
            index = self._derived(self.start + v.start)
            index.terms += v.terms
            return index
        return self._derived(self.start + int(v))

    __radd__ = __add__

    def __sub__(self, v: int) -> Index:
        return self._derived(self.start - int(v))

    def __mul__(self, v: int) -> Index:
        return self._derived(self.start * int(v), int(v))

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
        terms = " + ".join(
            f"{step} * i{k} (i{k} < {size})" for k, (step, size, _, _) in enumerate(self.terms)
        )
        return f"Index({self.start} + {terms})"


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


class _Probe:
    def __setitem__(self, index, value) -> None:
        self.references = sys.getrefcount(value)

    def __iadd__(self, value):
        self.references = sys.getrefcount(value)
        return self


def _temporary_references() -> tuple[int, int]:
    """How many references a temporary has inside __setitem__ (`p[0] = make()`) and
    inside __iadd__ (`p += make()`) when nothing else holds it, measured on this
    interpreter."""
    probe = _Probe()
    probe[0] = object()
    assigned = probe.references
    probe += object()
    return assigned, probe.references


_ASSIGNED_TEMPORARY_REFERENCES, _ADDED_TEMPORARY_REFERENCES = _temporary_references()


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
        pdim: int = 0,
        pstep: int = 1,
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
        # On chip: which dim is the partition dim (dims before it are blocks of tiles, as
        # nl.par_dim lays them out), and whether the partitions are consecutive (1) or all
        # the first one (0: a partition broadcast, which only a DMA reads).
        self._pdim = int(pdim)
        self._pstep = int(pstep)

    def _derive(self, dims, start=None, partition=None, axes=None, room=None, pdim=None):
        """A view of the same storage with some of this view's attributes changed."""
        return Tensor(
            self._storage,
            dims,
            self._start if start is None else start,
            self._partition if partition is None else partition,
            self._axes if axes is None else axes,
            room,
            self._pdim if pdim is None else pdim,
            self._pstep,
        )

    @property
    def on_chip(self) -> bool:
        return self.buffer != HBM

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
        if self._storage.blocks is not None and self._pdim > 0:
            return self._block(index)
        dims, start, partition, axes, room = [], self._start, self._partition, [], []
        on_chip, pdim = self.on_chip, self._pdim
        places = []  # per new dim, its place among the index's dims (None: unmarked)
        for d, (item, (stride, size)) in enumerate(zip(index, self._dims)):
            axis = self._axes[d]
            places += [None] * (len(dims) - len(places))
            if isinstance(item, Index) and len(item.terms) > 1:  # i_f1 * n + i_f2: a dim each
                if on_chip and d == self._pdim:
                    raise NkiError(f"{self.name}: the partition dim is indexed by {item}")
                last = item.start + sum(step * (n - 1) for step, n, _, _ in item.terms)
                if item.start < 0 or last >= size or any(t[0] <= 0 for t in item.terms):
                    raise NkiError(f"{self.name}: index {item} of dim {d} (size {size}) is invalid")
                start += item.start * stride
                for step, n, term_axis, place in item.terms:
                    dims.append((stride * step, n))
                    axes.append(term_axis)
                    room.append(n)
                    places.append(place)
                continue
            if isinstance(item, ds):
                item = slice(item.start, item.start + item.size)
            elif isinstance(item, Index):  # nl.arange/mgrid: start + step * i
                # Not clipped to the dim, as a slice would be: a mask= cuts what lies outside.
                if item.start < 0 or item.step <= 0:
                    raise NkiError(f"{self.name}: index {item} of dim {d} (size {size}) is invalid")
                first, step, count = item.start, item.step, item.size
                if on_chip and d == self._pdim:
                    if step != 1:
                        raise NkiError(f"{self.name}: partitions are indexed with step 1")
                    partition += first
                    dims.append((1, count))
                else:
                    start += first * stride
                    dims.append((stride * step, count))
                axes.append(item.axis)
                room.append(max(0, -(-(self._room[d] - first) // step)))
                places.append(item.pos)
                continue
            if isinstance(item, slice):
                first, stop, step = item.indices(size)
                count = len(range(first, stop, step))
                if count <= 0:
                    raise NkiError(f"{self.name}: index {item} of dim {d} (size {size}) is empty")
                if on_chip and d == self._pdim:
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
            if on_chip and d == self._pdim:
                raise NkiError(
                    f"{self.name}: the partition dim is indexed with {i}; slice it ({i}:{i + 1})"
                )
            if on_chip and d < self._pdim:  # a block dim indexed away
                pdim -= 1
            start += i * stride
        places += [None] * (len(dims) - len(places))
        if None not in places and places != sorted(places):
            # Indices marked with their places ([:, None], mgrid) give the view's dims in
            # that order, as NumPy broadcasts them.
            order = sorted(range(len(dims)), key=lambda k: places[k])
            pdim = order.index(pdim) if on_chip else 0
            dims, axes, room = ([x[k] for k in order] for x in (dims, axes, room))
        return self._derive(dims, start, partition, axes, room, pdim)

    def _block(self, index: tuple) -> Tensor:
        """The tile an explicit allocation placed for the block index (the dims before the
        partition dim, each an integer), indexed by the rest."""
        block = []
        for d, item in enumerate(index[: self._pdim]):
            if isinstance(item, slice) or isinstance(item, (Index, ds)):
                raise NkiError(
                    f"{self.name}: block dim {d} of a tensor placed by nki.compiler is indexed "
                    f"by {item!r}; index each block dim by an integer"
                )
            i, size = int(item), self._dims[d][1]
            if not -size <= i < size:
                raise NkiError(f"{self.name}: block {i} is out of range for dim {d} (size {size})")
            block.append(i % size)
        return self._storage.blocks(tuple(block))[index[self._pdim :]]

    def broadcast_to(self, shape) -> Tensor:
        """This view repeated along its size-1 dims (stride 0). On chip, a partition dim of
        one repeated is a partition broadcast, which only a DMA reads (language.py makes it
        a tile of its own before an engine reads it)."""
        shape = tuple(int(n) for n in shape)
        if len(shape) != self.ndim:
            raise NkiError(f"{self.name}: broadcast_to {shape} from {self.shape}")
        dims, pstep = [], self._pstep
        for d, ((stride, size), n) in enumerate(zip(self._dims, shape)):
            if size != n and size != 1:
                raise NkiError(f"{self.name}: dim of size {size} does not broadcast to {n}")
            if self.on_chip and d == self._pdim:
                if size != n:
                    pstep = 0
                dims.append((1, n))
                continue
            dims.append((stride if size == n else 0, n))
        view = self._derive(dims)
        view._pstep = pstep
        return view

    def permute_free(self, order) -> Tensor:
        """This view with its free dims (1..) walked in `order` (indices among them)."""
        dims = [self._dims[0], *(self._dims[1 + i] for i in order)]
        axes = [self._axes[0], *(self._axes[1 + i] for i in order)]
        room = [self._room[0], *(self._room[1 + i] for i in order)]
        return self._derive(dims, axes=axes, room=room)

    def transposed(self) -> Tensor:
        """This 2-D HBM view with its dims swapped (a walk down its columns)."""
        if self.buffer != HBM or self.ndim != 2:
            raise NkiError(f"{self.name}: only a 2-D HBM view is transposed by its pattern")
        return self._derive(
            self._dims[::-1], partition=0, axes=self._axes[::-1], room=self._room[::-1]
        )

    def masked(self, limits: list) -> Tensor | None:
        """This view cut to positions [lo, hi) per dim (None: whole); None if empty."""
        dims, start, partition, room = [], self._start, self._partition, []
        for d, ((stride, size), limit) in enumerate(zip(self._dims, limits)):
            lo, hi = limit if limit is not None else (0, size)
            hi = min(hi, size)
            if hi <= lo:
                return None
            if d == self._pdim and self.on_chip:
                partition += lo * self._pstep
            else:
                start += lo * stride
            dims.append((stride, hi - lo))
            room.append(self._room[d] - lo)
        return self._derive(dims, start, partition, room=room)

    # -- views of other shapes (no data moves) ------------------------------------------
    def _free_dims(self) -> list[int]:
        """The dims that are not the partition dim (on chip), or all of them (HBM)."""
        return [d for d in range(self.ndim) if not (self.on_chip and d == self._pdim)]

    def reshape_dim(self, dim: int, shape) -> Tensor:
        """Dim `dim` split into `shape` (one size may be -1)."""
        stride, size = self._dims[dim]
        shape = _resolve_shape([int(n) for n in shape], size, f"{self.name}.reshape_dim")
        if self.on_chip and dim == self._pdim and len(shape) > 1:
            raise NkiError(f"{self.name}.reshape_dim: the partition dim {dim} is not split")
        split, inner = [], stride
        for n in reversed(shape):
            split.insert(0, (inner, n))
            inner *= n
        dims = self._dims[:dim] + split + self._dims[dim + 1 :]
        pdim = self._pdim + (len(shape) - 1 if self.on_chip and dim < self._pdim else 0)
        return self._derive(dims, axes=[None] * len(dims), pdim=pdim)

    def flatten_dims(self, start_dim: int, end_dim: int) -> Tensor:
        """Dims start_dim..end_dim (inclusive) merged into one; they must be contiguous."""
        if self.on_chip and start_dim <= self._pdim <= end_dim:
            raise NkiError(f"{self.name}.flatten_dims: the partition dim is not merged")
        run = self._dims[start_dim : end_dim + 1]
        for (outer, _), (inner, n) in zip(run, run[1:]):
            if outer != inner * n:
                raise NkiError(
                    f"{self.name}.flatten_dims({start_dim}, {end_dim}): the dims are not "
                    f"contiguous in memory ({self.shape})"
                )
        merged = (run[-1][0], math.prod(n for _, n in run))
        dims = self._dims[:start_dim] + [merged] + self._dims[end_dim + 1 :]
        pdim = self._pdim - (end_dim - start_dim if self.on_chip and end_dim < self._pdim else 0)
        return self._derive(dims, axes=[None] * len(dims), pdim=pdim)

    def reshape(self, shape) -> Tensor:
        """The same elements in another shape: the view must be contiguous (on chip, in
        each partition; the partition dim keeps its size and place)."""
        shape = [int(n) for n in shape]
        if self.on_chip:
            if self._pdim != 0 or not shape or shape[0] != self._dims[0][1]:
                raise NkiError(
                    f"{self.name}.reshape{tuple(shape)}: on chip the partition dim stays "
                    f"first with its {self.shape[self._pdim]} partitions"
                )
            free = _resolve_shape(shape[1:], math.prod(self.shape[1:]), f"{self.name}.reshape")
            base = self._contiguous(self._dims[1:], "reshape")
            dims = [self._dims[0], *_row_major(free, base)]
        else:
            shape = _resolve_shape(shape, math.prod(self.shape), f"{self.name}.reshape")
            dims = _row_major(shape, self._contiguous(self._dims, "reshape"))
        return self._derive(dims, axes=[None] * len(dims), room=None)

    def _contiguous(self, dims, what: str) -> int:
        """The innermost stride of `dims` if they are laid out row-major (dense), else an
        NkiError naming `what`."""
        expected = dims[-1][0] if dims else 1
        inner = expected
        for stride, n in reversed(dims):
            if n > 1 and stride != expected:
                raise NkiError(
                    f"{self.name}.{what}: the view {self.shape} is not contiguous in memory"
                )
            expected *= n
        return inner

    def ap(
        self,
        pattern,
        offset=None,
        scalar_offset=None,
        vector_offset=None,
        indirect_dim=0,
        dtype=None,
    ) -> Tensor:
        """A view by an explicit access pattern over the storage: [[stride, count], ...] in
        elements, the first pair the partitions (rows in HBM). On chip the partition stride
        is the storage's elements per partition (consecutive partitions) or 0 (a
        partition broadcast)."""
        if scalar_offset is not None or vector_offset is not None:
            raise NkiError(
                f"{self.name}.ap: dynamic offsets (scalar_offset, vector_offset) are not "
                "supported yet"
            )
        if dtype is not None and dtype_name(dtype) != self.dtype:
            raise NkiError(
                f"{self.name}.ap: reinterpreting {self.dtype} as {dtype} is not supported yet"
            )
        pairs = [(int(s), int(n)) for s, n in pattern]
        if not pairs:
            raise NkiError(f"{self.name}.ap: an empty pattern")
        start = self._start if offset is None else self._start + int(offset)
        if not self.on_chip:
            return Tensor(self._storage, pairs, start)
        row = self._storage.size // itemsize(self.dtype)
        (pstride, partitions), free = pairs[0], pairs[1:] or [(1, 1)]
        if pstride not in (row, 0):
            raise NkiError(
                f"{self.name}.ap: partition stride {pstride} (on chip: {row}, the elements of "
                "each partition, or 0 for a broadcast)"
            )
        view = Tensor(
            self._storage,
            [(1, partitions), *free],
            start % row,
            self._partition + start // row,
        )
        view._pstep = 1 if pstride else 0
        return view

    def __setitem__(self, index, value) -> None:
        """view[index] = value: a tile, a pending matmul or a number written there (the
        legacy API's tile assignment). Whether the kernel keeps another reference to
        value is told by its reference count: the assignment's own, plus the fields of
        the last instruction that hold it."""
        temporary = sys.getrefcount(value) <= (
            _ASSIGNED_TEMPORARY_REFERENCES + self._held_by_last(value)
        )
        TILE_OPERATIONS["assign"](self[index], value, temporary)

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
        st, dt = self._storage, DTYPES[self.dtype].name
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
        if self._pdim != 0:
            raise NkiError(
                f"{self.name}: {self._pdim} block dims come before its partition dim "
                f"{self.shape}; index them to a tile first"
            )
        partitions = self._dims[0][1] if self._dims else 1
        free = self._dims[1:] or [(1, 1)]
        if len(free) > 4:
            raise NkiError(f"{self.name}: an instruction walks up to 4 free dims, not {len(free)}")
        first = st.partition + self._partition
        step = "" if self._pstep else ":0"
        pairs = ",".join(f"[{s},{n}]" for s, n in free)
        offset = st.offset + self._start * size
        return f"{self.buffer}.{dt}[{first}:{partitions}{step}]+{offset}[{pairs}]"

    # -- tile arithmetic (each a new tile, as nl.add etc.) -------------------------------
    def _binary(self, other, op: str, reverse: bool = False):
        return TILE_OPERATIONS["elementwise"](op, self, other, reverse=reverse)

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

    def __rtruediv__(self, other):
        return self._binary(other, "divide", reverse=True)

    def __neg__(self):
        return self._binary(-1.0, "multiply")

    def __pow__(self, other):
        return self._binary(other, "pow")

    def __iadd__(self, other):
        """dst += value: a pending matmul accumulates into this PSUM tile (the legacy
        `res_psum += nisa.nc_matmul(a, b)`); anything else is added in place."""
        temporary = sys.getrefcount(other) <= _ADDED_TEMPORARY_REFERENCES + self._held_by_last(
            other
        )
        return TILE_OPERATIONS["accumulate"](self, other, temporary)

    @staticmethod
    def _held_by_last(value) -> int:
        """How many fields of the last traced instruction are `value` itself."""
        trace = current()
        if not trace.instructions:
            return 0
        return sum(v is value for v in trace.instructions[-1].fields.values())

    def on(self, storage: Storage) -> Tensor:
        """This view, of another storage of the same layout."""
        view = self._derive(self._dims, room=self._room)
        view._storage = storage
        return view

    def is_whole(self) -> bool:
        """Whether this is the view nl.ndarray gave: all of its allocation, row-major."""
        st = self._storage
        return (
            bool(st.whole)
            and tuple(self._dims) == st.whole
            and self._start == 0
            and self._partition == 0
            and self._pstep == 1
        )

    def identity(self) -> tuple:
        """This view of this allocation: a buffer allocated again is another allocation."""
        return (
            self._storage.serial,
            self._partition,
            self._start,
            tuple(self._dims),
            self._pdim,
            self._pstep,
        )


def _resolve_shape(shape: list[int], total: int, what: str) -> list[int]:
    """`shape` with its one -1 worked out, checked to hold `total` elements."""
    if shape.count(-1) > 1:
        raise NkiError(f"{what}: at most one size is -1 in {tuple(shape)}")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or total % known:
            raise NkiError(f"{what}: {tuple(shape)} cannot hold {total} elements")
        shape = [total // known if n == -1 else n for n in shape]
    if math.prod(shape) != total:
        raise NkiError(f"{what}: {tuple(shape)} does not hold {total} elements")
    return shape


def _row_major(shape: list[int], inner: int) -> list[tuple[int, int]]:
    """(stride, size) per dim of `shape` laid out row-major, the innermost stride `inner`."""
    dims, stride = [], inner
    for n in reversed(shape):
        dims.insert(0, (stride, n))
        stride *= n
    return dims


@dataclasses.dataclass(slots=True)
class Instruction:
    """One traced instruction: its engine, opcode and fields (tensors as views, whose
    on-chip addresses are known once the trace is placed), and the kernel's source line."""

    engine: str
    opcode: str
    fields: dict
    source: str
    in_order: bool = False  # traced inside nl.no_reorder(): never moved, never passed

    def tensors(self) -> list[Tensor]:
        return [v for v in self.fields.values() if isinstance(v, Tensor)]

    def line(self) -> str:
        """This instruction as a line of neuronsim's assembly."""
        parts = [self.engine, self.opcode]
        for key, value in self.fields.items():  # emit leaves no None
            if isinstance(value, Tensor):
                value = value.pattern()
            elif isinstance(value, bool):
                value = "true" if value else "false"
            parts.append(f"{key}={value}")
        return " ".join(parts)


class Trace:
    """One kernel being traced: its tensors, allocations and instructions."""

    def __init__(self, target: dict[str, Any]):
        self.target = target
        self.declarations: list[str] = []
        self.instructions: list[Instruction] = []
        self.params: list[tuple[int, str]] = []  # (argument position, HBM tensor) per input
        self.outputs: list[Tensor] = []
        # Bytes per partition the kernel placed tensors at itself (address=): kept out of
        # the automatic allocations.
        self.reserved: dict[str, list[tuple[int, int]]] = {SBUF: [], PSUM: []}
        self.serials = 0
        self.last_writer: dict[tuple, str] = {}
        self.names: dict[str, int] = {}
        self.in_order = 0  # depth of nl.no_reorder() blocks around what is traced now
        self.mask: Mask | None = None  # the legacy mask= of the call being traced
        # The kernel's input values (name -> bytes), for register loads; None: not known.
        self.input_values: Any = None
        self.data_dependent = False  # a register load read a value: the program depends on it
        self.peak = {SBUF: 0, PSUM: 0}  # bytes per partition live at most, once placed
        self.grid: tuple = (1,)  # the launch grid; its programs are traced one after another
        self.program: tuple = (0,)  # the program being traced (nl.program_id)
        self._shared: list[Tensor] = []  # shared HBM outputs, in the order program 0 made them
        self._shared_made = 0  # how many the program being traced has asked for
        self.constants: dict[str, bytes] = {}  # nl.shared_constant values by tensor name
        self.constant_tensors: dict[str, Tensor] = {}
        self.unwritten_reads: list[str] = []  # the checking mode's reads of unwritten bytes
        self.spills: list[str] = []  # tiles spilled to fit: PSUM to SBUF, SBUF to HBM (_alloc.py)
        self.force_auto_alloc = False  # nki.compiler.force_auto_alloc: explicit ones automatic

    def start_program(self, program: tuple) -> None:
        """The next program of the grid: its shared HBM outputs are program 0's."""
        self.program, self._shared_made = tuple(program), 0

    def output(self, name: str, dtype: str, shape: tuple[int, ...], shared: bool) -> Tensor:
        """A new HBM output; a shared one is the same tensor in every program of the grid."""
        if shared and any(self.program):
            if self._shared_made >= len(self._shared):
                raise NkiError(
                    f"{name}: program {self.program} makes more shared HBM tensors than "
                    "program 0 did"
                )
            tensor = self._shared[self._shared_made]
            self._shared_made += 1
            if tensor.shape != shape or tensor.dtype != dtype:
                raise NkiError(
                    f"{name}: program {self.program} makes shared tensor {tensor.name} as "
                    f"{shape} {dtype}, program 0 as {tensor.shape} {tensor.dtype}"
                )
            return tensor
        tensor = self.declare_hbm(name, dtype, shape, "output")
        self.outputs.append(tensor)
        if shared:
            self._shared.append(tensor)
            self._shared_made += 1
        return tensor

    def constant(self, name: str, dtype: str, shape: tuple[int, ...], data: bytes) -> Tensor:
        """An HBM tensor of values known while tracing (nl.shared_constant): an input of
        the program, bound to these bytes."""
        tensor = self.declare_hbm(name, dtype, shape, "input")
        self.constants[tensor.name] = data
        self.constant_tensors[tensor.name] = tensor
        return tensor

    def _storage(self, buffer: str, name: str, dtype: str, **place: Any) -> Storage:
        self.serials += 1
        return Storage(buffer, name, dtype, serial=self.serials, **place)

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
        self.declarations.append(f".tensor {name} {DTYPES[dtype].name} [{dims_text}] {kind}")
        return Tensor(self._storage(HBM, name, dtype), dims)

    # -- on-chip allocation -----------------------------------------------------------
    def allocate(
        self,
        buffer: str,
        shape: tuple[int, ...],
        dtype: str,
        name: str,
        address=None,
        site: str | None = None,
    ) -> Tensor:
        """A new SBUF or PSUM tensor. Its place is given once the whole body is traced,
        from the instructions that use it (_alloc.py); `address` (partition, byte offset)
        places it there instead. With block dims before its par_dim, each block is a tile
        of its own, placed as its own uses say."""
        if not shape:
            raise NkiError(f"{name}: an on-chip tensor needs a partition dim")
        marked = [d for d, n in enumerate(shape) if isinstance(n, ParDim)]
        if len(marked) > 1:
            raise NkiError(f"{name}: {len(marked)} dims of {shape} are marked par_dim")
        pdim = marked[0] if marked else 0
        partitions = shape[pdim]
        limit = self.target["partitions"]
        if not 0 < partitions <= limit:
            raise NkiError(f"{name}: partition dim {partitions} is outside 1..{limit}")
        site = site or _caller_site(text=True)
        if pdim > 0 and address is None:
            return self.blocked(buffer, shape, pdim, dtype, name, site)
        free = [int(n) for d, n in enumerate(shape) if d != pdim]
        size = math.prod(free) * itemsize(dtype)
        if address is not None:
            storage = self._place_at(buffer, partitions, size, dtype, name, address)
            storage.site = site
        else:
            capacity = self._capacity(buffer)
            if size > capacity:
                raise NkiError(
                    f"{name} (allocated at {site}): {size} bytes per partition in "
                    f"{buffer.upper()} do not fit: it has {capacity} bytes per partition"
                )
            storage = self._storage(buffer, name, dtype, size=size, site=site)
        dims = _row_major(free, 1)
        dims.insert(pdim, (1, int(partitions)))
        storage.whole = tuple(dims)
        return Tensor(storage, dims, pdim=pdim)

    def blocked(self, buffer, shape, pdim, dtype, name, site, place=None) -> Tensor:
        """A tensor of blocks of tiles (the dims before pdim): a handle whose block index
        `t[i, j]` is a tile made on first use, placed automatically or at `place(block)`
        (partition, byte offset)."""
        tile_shape = tuple(int(n) for n in shape[pdim:])
        tiles: dict[tuple, Tensor] = {}

        def tile(block: tuple) -> Tensor:
            if block not in tiles:
                at = place(block) if place is not None else None
                label = f"{name}{list(block)}"
                tiles[block] = self.allocate(buffer, tile_shape, dtype, label, at, site)
            return tiles[block]

        handle = self._storage(buffer, name, dtype, explicit=True, blocks=tile, site=site)
        dims = [(0, int(n)) for n in shape[:pdim]] + [(1, tile_shape[0])]
        dims += [(0, n) for n in tile_shape[1:]]
        return Tensor(handle, dims, pdim=pdim)

    def _capacity(self, buffer: str) -> int:
        return self.target["sbuf_partition_bytes" if buffer == SBUF else "psum_partition_bytes"]

    def _place_at(self, buffer, partitions, size, dtype, name, address) -> Storage:
        """A tensor at the explicit address (first partition, byte offset in each
        partition). It must fit and start a PSUM bank; the automatic allocations keep
        clear of it."""
        try:
            partition, offset = (int(a) for a in address)
        except (TypeError, ValueError):
            raise NkiError(f"{name}: address {address!r} is not (partition, byte offset)") from None
        capacity = self._capacity(buffer)
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
        self.reserved[buffer].append((offset, offset + size))
        return self._storage(
            buffer, name, dtype, partition=partition, offset=offset, size=size, explicit=True
        )

    def broadcast_tile(self, view: Tensor) -> Tensor:
        """A partition broadcast made a tile of its own, which engines can read: one DMA
        reads the one partition into every partition of a new SBUF tile."""
        tile = self.allocate(SBUF, view.shape, view.dtype, f"{view.name}_broadcast")
        mask, self.mask = self.mask, None  # the view is already cut to the mask
        try:
            self.emit("sp", "dma_copy", dst=tile, src=view, queue=self.next_queue())
        finally:
            self.mask = mask
        return tile

    # -- instructions -----------------------------------------------------------------
    def next_queue(self, hwdge: bool = False) -> int:
        """The queue of a DMA the Sync engine (or another) triggers: one per descriptor method
        (static descriptors 0, the hardware DGE 1), as the DMA overview ties a queue to its
        trigger engine and descriptor method. A queue runs its transfers in order; the DMA
        engines take queues in turn."""
        return 1 if hwdge else 0

    def emit(self, engine: str, opcode: str, **fields: Any) -> None:
        if self.mask is not None:
            if opcode in ("matmul", "transpose"):
                raise NkiError(f"mask= on {opcode} is not supported yet (its dims change places)")
            fields = _masked_fields(fields, self.mask)
            if fields is None:  # the mask keeps nothing: no instruction
                return
        for key, value in fields.items():
            if isinstance(value, Tensor):
                value.check_within()
                if value.on_chip and not value._pstep and (opcode, key) != ("dma_copy", "src"):
                    fields[key] = value = self.broadcast_tile(value)
                value._storage.uses += 1
        dst = fields.get("dst")
        if isinstance(dst, Tensor):  # what wrote this view last (matmuls accumulate on matmuls)
            self.last_writer[dst.identity()] = opcode
            dst._storage.written = True
        fields = {k: v for k, v in fields.items() if v is not None}
        site = _caller_site(text=True)
        self.instructions.append(Instruction(engine, opcode, fields, site, self.in_order > 0))


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

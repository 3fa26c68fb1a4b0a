"""The checking mode: every read of an on-chip tensor must see data written through that
very tensor (its allocation), never what another tensor left in the same bytes.

After the trace is placed, the instructions are walked in program order (the order the
engines' semaphores keep) with, per 4-byte piece of each partition of SBUF and PSUM, the
allocation that last wrote it. A read of allocation S whose bytes were last written by
another allocation, or by none since S began, is a stale read: the kernel would compute
with data its Python program does not refer to. It fails with the instruction's source
line and both tensors. Turned on by NEURONSIM_NKI_CHECK=1 or nki.jit(check=True).
"""

from __future__ import annotations

import numpy as np

from ._trace import PSUM, SBUF, WRITTEN_FIELDS, NkiError, Storage, Tensor, Trace, itemsize

_GRANULE = 4  # bytes: the automatic allocations start on 64, elements on their size


def _reads_dst(opcode: str, fields: dict) -> bool:
    """Whether the instruction also reads what its dst held: an accumulating matmul, or a
    predicated copy (dst keeps its values where the predicate is false)."""
    return (opcode == "matmul" and fields.get("accumulate") is True) or opcode == "copy_predicated"


def _footprint(view: Tensor):
    """The (partition slice, granule index or slice) a view touches."""
    st = view._storage
    size = itemsize(view.dtype)
    first = st.partition + view._partition
    count = view._dims[0][1] if view._dims else 1
    if view._pstep == 0:
        count = 1
    parts = slice(first, first + count)
    base = st.offset + view._start * size
    free = view._dims[1:] or [(1, 1)]
    expected, dense = 1, True
    for stride, n in reversed(free):
        if n > 1 and stride != expected:
            dense = False
        expected *= n
    if dense:
        total = expected * size
        return parts, slice(base // _GRANULE, -(-(base + total) // _GRANULE))
    offsets = np.zeros(1, dtype=np.int64)
    for stride, n in free:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * stride).ravel()
    granules = np.unique((base + offsets * size) // _GRANULE)
    return parts, granules


class _Buffer:
    """Per 4-byte piece of each partition: the allocation that last wrote it, and the
    allocation whose data there another one overwrote while it was still to be used."""

    def __init__(self, partitions: int, size: int):
        self.owner = np.zeros((partitions, size // _GRANULE), np.int32)
        self.clobbered = np.zeros_like(self.owner)


def verify(trace: Trace, count: int) -> list[str]:
    """Raises NkiError at the first of the first `count` instructions that reads data its
    tensor wrote and another tensor overwrote since. Returns the reads of bytes that
    nothing wrote through the tensor read (a masked tail computed on but never stored is
    one): they read whatever was there, as the hardware would."""
    buffers = {
        buffer: _Buffer(trace.target["partitions"], trace.target[f"{buffer}_partition_bytes"])
        for buffer in (SBUF, PSUM)
    }
    last_use = np.full(trace.serials + 1, -1, np.int64)  # by serial; 0: nothing wrote
    for at, instruction in enumerate(trace.instructions[:count]):
        for view in instruction.tensors():
            last_use[view._storage.serial] = at
    storages: dict[int, Storage] = {}
    unwritten: list[str] = []
    for at, instruction in enumerate(trace.instructions[:count]):
        writes = []
        for key, view in instruction.fields.items():
            if not isinstance(view, Tensor) or view.buffer not in buffers:
                continue
            storages[view._storage.serial] = view._storage
            place = _footprint(view)
            if key in WRITTEN_FIELDS:
                writes.append((view, place))
                if not _reads_dst(instruction.opcode, instruction.fields):
                    continue
            state = buffers[view.buffer]
            if _check_read(state, view, place, key, instruction, storages) and len(unwritten) < 8:
                unwritten.append(f"{instruction.source}: {instruction.opcode} {key}: {view.name}")
        for view, (parts, granules) in writes:
            state, serial = buffers[view.buffer], view._storage.serial
            owner = state.owner[parts][:, granules]
            # Another tensor's data, which an instruction to come still reads.
            overwritten = (owner != 0) & (owner != serial) & (last_use[owner] > at)
            if overwritten.any():
                clobbered = state.clobbered[parts][:, granules]
                clobbered[overwritten] = owner[overwritten]
                state.clobbered[parts, granules] = clobbered
            state.owner[parts, granules] = serial
    return unwritten


def _check_read(state: _Buffer, view: Tensor, place, key: str, instruction, storages) -> bool:
    """Raises at a stale read; returns whether the read saw bytes nothing wrote through
    the view's tensor."""
    parts, granules = place
    owner = state.owner[parts][:, granules]
    serial = view._storage.serial
    foreign = owner != serial
    if not foreign.any():
        return False
    stale = foreign & (state.clobbered[parts][:, granules] == serial)
    if not stale.any():
        return True
    rows, cols = np.nonzero(stale)
    partition = parts.start + int(rows[0])
    st, by = view._storage, storages[int(owner[rows[0], cols[0]])]
    raise NkiError(
        f"stale read at {instruction.source}: {instruction.opcode} {key}: {st.name} "
        f"(allocated at {st.site}) in {view.buffer.upper()} partition {partition} reads bytes "
        f"that {by.name} (allocated at {by.site}) overwrote; the data {st.name} refers to is gone"
    )

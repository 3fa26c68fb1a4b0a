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

from ._trace import PSUM, SBUF, NkiError, Storage, Tensor, Trace, itemsize

_GRANULE = 4  # bytes: the automatic allocations start on 64, elements on their size
# The operands an instruction writes; every other operand is read.
_WRITTEN = ("dst", "reduce_dst", "dst_index")


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


def verify(trace: Trace, count: int) -> None:
    """Raises NkiError at the first of the first `count` instructions that reads data its
    tensor does not hold."""
    owners = {
        SBUF: np.zeros(
            (trace.target["partitions"], trace.target["sbuf_partition_bytes"] // _GRANULE),
            np.int32,
        ),
        PSUM: np.zeros(
            (trace.target["partitions"], trace.target["psum_partition_bytes"] // _GRANULE),
            np.int32,
        ),
    }
    storages: dict[int, Storage] = {}
    for instruction in trace.instructions[:count]:
        writes = []
        for key, view in instruction.fields.items():
            if not isinstance(view, Tensor) or view.buffer not in owners:
                continue
            storages[view._storage.serial] = view._storage
            place = _footprint(view)
            if key in _WRITTEN:
                writes.append((view, place))
                if not _reads_dst(instruction.opcode, instruction.fields):
                    continue
            _check_read(owners[view.buffer], view, place, key, instruction, storages)
        for view, (parts, granules) in writes:
            region = owners[view.buffer][parts]
            region[:, granules] = view._storage.serial


def _check_read(owner, view: Tensor, place, key: str, instruction, storages) -> None:
    parts, granules = place
    region = owner[parts][:, granules]
    serial = view._storage.serial
    stale = region != serial
    if not stale.any():
        return
    rows, cols = np.nonzero(stale)
    partition = parts.start + int(rows[0])
    other = int(region[rows[0], cols[0]])
    st = view._storage
    where = f"{instruction.source}: {instruction.opcode} {key}"
    what = f"{st.name} (allocated at {st.site}) in {view.buffer.upper()} partition {partition}"
    if other == 0 or other not in storages:
        raise NkiError(
            f"stale read at {where}: {what} reads bytes that no instruction wrote through "
            f"{st.name} since it was allocated"
        )
    by = storages[other]
    raise NkiError(
        f"stale read at {where}: {what} reads bytes that {by.name} (allocated at {by.site}) "
        f"overwrote; the data {st.name} refers to is gone"
    )

"""When the Sync engine triggers each DMA: a load does not wait behind a store.

The Sync engine triggers its DMAs in its program order, and a trigger whose data a compute
engine has just made waits for that engine, holding back every trigger behind it. A
compiler's list scheduler issues first what can start first (NKI's default heuristic is
ASAP), so a load that waits on nothing goes ahead of the stores that wait on compute.

This pass does that once the tiles are placed. A Sync DMA waits on compute when an
instruction of a compute engine traced after the Sync engine's previous DMA touches what it
touches (a store of the tile just computed). Every other Sync DMA moves above the run of
such waiting DMAs just before it on the Sync engine, but never above an instruction, on any
engine, that touches what it touches: so every instruction still reads what it read in
program order, and the values do not change (the checking mode, NEURONSIM_NKI_CHECK, walks
the order this pass leaves). Instructions traced inside nl.no_reorder() are neither moved
nor passed."""

from __future__ import annotations

from ._trace import HBM, WRITTEN_FIELDS, Instruction, Tensor, Trace, itemsize

SYNC = "sp"


def _extent(dims, start: int, size: int) -> tuple[int, int]:
    """The bytes [lo, hi) a walk of `dims` (stride, count) from element `start` touches."""
    lo = hi = start
    for stride, count in dims:
        reach = stride * (count - 1)
        lo, hi = lo + min(0, reach), hi + max(0, reach)
    return lo * size, (hi + 1) * size


def _place(view: Tensor) -> tuple:
    """Where a view lies: (space, partitions [lo, hi), bytes [lo, hi) in each)."""
    st, size = view._storage, itemsize(view.dtype)
    if view.buffer == HBM:
        lo, hi = _extent(view._dims, view._start, size)
        return (HBM, st.name), (0, 1), (lo, hi)
    dims = view._dims
    first = st.partition + view._partition
    partitions = dims[0][1] if dims else 1
    lo, hi = _extent(dims[1:], view._start, size)
    return (view.buffer,), (first, first + partitions), (st.offset + lo, st.offset + hi)


def _accesses(instruction: Instruction) -> list[tuple[tuple, bool]]:
    """Each place the instruction touches, and whether it writes there."""
    return [
        (_place(value), key in WRITTEN_FIELDS)
        for key, value in instruction.fields.items()
        if isinstance(value, Tensor)
    ]


def _meet(a: tuple, b: tuple) -> bool:
    (space_a, parts_a, bytes_a), (space_b, parts_b, bytes_b) = a, b
    return (
        space_a == space_b
        and parts_a[0] < parts_b[1]
        and parts_b[0] < parts_a[1]
        and bytes_a[0] < bytes_b[1]
        and bytes_b[0] < bytes_a[1]
    )


def _conflict(a: list, b: list) -> bool:
    """Whether two instructions must keep their order: one writes what the other touches."""
    return any((wa or wb) and _meet(pa, pb) for pa, wa in a for pb, wb in b)


def _is_sync_dma(instruction: Instruction) -> bool:
    return instruction.engine == SYNC and instruction.opcode == "dma_copy"


def schedule(trace: Trace, count: int) -> None:
    """Reorders the first `count` instructions of the placed trace, in place."""
    touches = {id(i): _accesses(i) for i in trace.instructions[:count]}
    waits = _waiting_on_compute(trace.instructions[:count], touches)
    order: list[Instruction] = []
    for instruction in trace.instructions[:count]:
        target = len(order)
        if _is_sync_dma(instruction) and id(instruction) not in waits and not instruction.in_order:
            mine = touches[id(instruction)]
            for k in range(len(order) - 1, -1, -1):
                other = order[k]
                if other.in_order or _conflict(touches[id(other)], mine):
                    break
                if other.engine == SYNC:
                    if id(other) not in waits:
                        break
                    target = k  # above a DMA that waits on compute
        order.insert(target, instruction)
    trace.instructions[:count] = order


def _waiting_on_compute(order: list[Instruction], touches: dict) -> set[int]:
    """The Sync DMAs that an instruction of a compute engine, traced after the Sync engine's
    previous DMA, touches the same bytes as."""
    waits, since = set(), []  # compute instructions since the Sync engine's last DMA
    for instruction in order:
        if instruction.engine != SYNC:
            if instruction.opcode != "dma_copy":
                since.append(instruction)
            continue
        if _is_sync_dma(instruction) and any(
            _conflict(touches[id(c)], touches[id(instruction)]) for c in since
        ):
            waits.add(id(instruction))
        since = []
    return waits

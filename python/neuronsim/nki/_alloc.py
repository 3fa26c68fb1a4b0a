"""Where each on-chip tensor of a traced kernel lives.

Addresses are given after the body has been traced, from the instructions that use each
allocation, as a compiler gives them: a tile is live from the first instruction that
touches it to the last, and two tiles share bytes only when their lives do not overlap.
A list of N tiles that are all read later is N buffers; a loop's tile whose previous
iteration is finished with is reused. The program order then makes every reuse safe:
isa::KernelBuilder orders a write after the reads of what was there before.

Tensors the kernel placed itself (``address=``) are kept where they are, and their bytes
are left out of the automatic allocations for the whole kernel.
"""

from __future__ import annotations

import collections

from ._trace import (
    PSUM,
    SBUF,
    WRITTEN_FIELDS,
    Instruction,
    NkiError,
    Storage,
    Tensor,
    Trace,
    itemsize,
)


class _Arena:
    """The free bytes of one buffer (the same range in every partition) as [lo, hi)
    pieces in address order, and a cursor where the last allocation ended."""

    def __init__(self, capacity: int, align: int, reserved: list[tuple[int, int]]):
        self.capacity = capacity
        self.free = [(0, capacity)]
        self.cursor = 0
        for lo, hi in reserved:
            self._carve(lo - lo % align, -(-hi // align) * align)

    def _carve(self, lo: int, hi: int) -> None:
        pieces = []
        for a, b in self.free:
            if b <= lo or a >= hi:
                pieces.append((a, b))
                continue
            if a < lo:
                pieces.append((a, lo))
            if b > hi:
                pieces.append((hi, b))
        self.free = pieces

    def take(self, size: int, next_fit: bool) -> int | None:
        """The offset of `size` free bytes, or None. Next fit goes on from the cursor and
        wraps around, so a freed place is taken again only after the rest of the buffer:
        a new tile's writes then rarely wait on the last reads of the tile before it
        (that is what lets one iteration's loads run ahead of the last one's compute).
        Otherwise the smallest piece that fits (the least fragmentation)."""
        if next_fit:
            ahead = [max(a, self.cursor) for a, b in self.free if b - max(a, self.cursor) >= size]
            behind = [a for a, b in self.free if b - a >= size]
            offset = ahead[0] if ahead else (behind[0] if behind else None)
        else:
            fits = [(b - a, a) for a, b in self.free if b - a >= size]
            offset = min(fits)[1] if fits else None
        if offset is not None:
            self._carve(offset, offset + size)
            self.cursor = offset + size
        return offset

    def give(self, lo: int, hi: int) -> None:
        pieces = sorted([*self.free, (lo, hi)])
        merged = [pieces[0]]
        for a, b in pieces[1:]:
            if a == merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self.free = merged

    def largest(self) -> int:
        return max((b - a for a, b in self.free), default=0)


def _lives(trace: Trace, count: int) -> tuple[list[Storage], dict[int, int], dict[int, int]]:
    """The automatic on-chip allocations the first `count` instructions use, in order of
    first use, with the first and last instruction using each (by serial)."""
    order, first, last = [], {}, {}
    for i, instruction in enumerate(trace.instructions[:count]):
        for tensor in instruction.tensors():
            st = tensor._storage
            if st.buffer not in (SBUF, PSUM) or st.explicit:
                continue
            if st.serial not in first:
                first[st.serial] = i
                order.append(st)
            last[st.serial] = i
    return order, first, last


def _size(trace: Trace, st: Storage) -> int:
    align = _alignment(trace, st.buffer)
    return -(-st.size // align) * align


def _alignment(trace: Trace, buffer: str) -> int:
    # PSUM tiles start on a bank (matmuls accumulate within one); SBUF ones on 64 bytes.
    return trace.target["psum_bank_bytes"] if buffer == PSUM else 64


def assign(
    trace: Trace, count: int | None = None, spill: bool = True
) -> tuple[dict[str, int], int]:
    """Gives every automatic allocation used by the first `count` instructions (all by
    default) its offset. Returns the peak bytes per partition live in SBUF and PSUM, and
    the count of those instructions once spills went in. Raises NkiError naming the tensor
    that does not fit, where it was allocated, and what is live at that point. Without
    `spill` no tile is spilled (PSUM to SBUF, SBUF to HBM): a placement of the kernel traced
    so far (for a register_load) must leave the tiles the rest of the kernel holds where
    they are, since the uses that would read a spilled tile's copy are not traced yet."""
    count = len(trace.instructions) if count is None else count
    rounds, most_rounds = 0, count  # each round parts a tile from a crowded point
    while True:
        order, first, last = _lives(trace, count)
        failure = None
        for next_fit in (True, False):  # when going round fragments, pack tightly instead
            try:
                return _scan(trace, order, first, last, next_fit), count
            except _DoesNotFit as err:
                failure = failure or err
                if err.deficit(trace) > 0:  # too much is live there, however it is packed
                    break
        rounds += 1
        if not spill:
            spilled = 0
        elif failure.storage.buffer == PSUM:
            spilled = _spill_psum(trace, order, first, last, count)
        else:
            spilled = _spill_sbuf(trace, failure, count)
        if not spilled or rounds > most_rounds:
            raise NkiError(failure.message(trace, spill))
        count += spilled


def _spill_psum(trace: Trace, order, first, last, count: int) -> int:
    """When PSUM tiles that are live together outgrow PSUM, the ones that are no longer
    written but still read while PSUM is over capacity are spilled, as a compiler spills
    them: one copy to a new SBUF tile right after the tile's last write, and the reads
    after it read that copy. Returns how many copies went in (0: nothing to spill)."""
    capacity = _room(trace, PSUM)
    live = [0] * (count + 1)  # PSUM bytes live at each instruction, from the full lives
    psum = [st for st in order if st.buffer == PSUM]
    for st in psum:
        live[first[st.serial]] += _size(trace, st)
        live[last[st.serial] + 1] -= _size(trace, st)
    over, total = [], 0
    for at in range(count):
        total += live[at]
        over.append(total > capacity)
    writes = {serial: at[-1] for serial, at in _uses(trace, count)[1].items()}
    victims = [
        (writes[st.serial], st)
        for st in psum
        if st.serial in writes and any(over[writes[st.serial] + 1 : last[st.serial] + 1])
    ]
    for after, st in sorted(victims, key=lambda v: -v[0]):  # from the end: indices hold
        _spill(trace, st, after)
    return len(victims)


def _room(trace: Trace, buffer: str) -> int:
    """The bytes per partition of `buffer` the automatic allocations may take: all but what
    the kernel placed itself (address=), each piece rounded to the buffer's alignment."""
    align = _alignment(trace, buffer)
    reserved = sum(-(-(hi - lo) // align) * align for lo, hi in trace.reserved[buffer])
    return trace._capacity(buffer) - reserved


def _use_copy_from(trace: Trace, st: Storage, copy: Storage, position: int) -> None:
    """The instructions from `position` on use `copy` where they used `st`."""
    for instruction in trace.instructions[position:]:
        for key, view in instruction.fields.items():
            if isinstance(view, Tensor) and view._storage is st:
                instruction.fields[key] = view.on(copy)


def _spill(trace: Trace, st: Storage, after: int) -> None:
    """A copy of st to a new SBUF tile after instruction `after`; later reads read it."""
    copy = trace._storage(
        SBUF, f"{st.name}_spilled", st.dtype, size=st.size, site=st.site, whole=st.whole
    )
    whole = list(st.whole)
    source, target = Tensor(st, whole), Tensor(copy, whole)
    spill = Instruction("dve", "tensor_copy", {"dst": target, "src": source}, st.site)
    trace.instructions.insert(after + 1, spill)
    _use_copy_from(trace, st, copy, after + 2)
    trace.spills.append(f"{st.name} ({st.site})")


def _spill_sbuf(trace: Trace, failure: _DoesNotFit, count: int) -> int:
    """When SBUF tiles live together outgrow SBUF, tiles that are live where the allocation
    failed but not used there go to HBM, as neuronx-cc spills them (the fused Mamba tutorial's
    second version shows spill and reload DMAs once its tiles outgrow SBUF): a DMA to a
    scratch HBM tensor after the tile's last use before that point, a DMA back to a new SBUF
    tile before its next use, and the uses from there on read the new tile. The tiles of the
    fewest partitions go first (the cheapest to move), then those whose next use is furthest
    (Belady's choice), until the failing tile would fit. Returns
    how many DMAs went in (0: no tile can go)."""
    at, deficit = failure.at, failure.deficit(trace)
    uses, writes = _uses(trace, count)
    candidates = []
    for st in failure.live:
        before = [i for i in uses[st.serial] if i < at]
        after = [i for i in uses[st.serial] if i > at]
        if before and after and at not in uses[st.serial]:
            source = _loaded_from(trace, st, writes)
            # The DMAs' bytes per byte freed: its partitions, once for a load, twice for a
            # store and a load.
            cost = st.whole[0][1] * (1 if source is not None else 2)
            candidates.append((cost, -after[0], before[-1], after[0], st, source))
    victims, freed = [], 0
    # The cheapest to move first: a row costs one partition's bytes and frees as many bytes
    # per partition as a whole tile, and a tile loaded from HBM and not written since is
    # loaded again rather than stored. Then the furthest next use (Belady's choice).
    for _, _, last_use, next_use, st, source in sorted(candidates, key=lambda c: c[:2]):
        if freed >= max(deficit, 1):
            break
        victims.append((last_use, next_use, st, source))
        freed += _size(trace, st)
    if freed < deficit or not victims:
        return 0
    # From the end, so the positions of the victims still to come hold.
    moves = sorted(
        [(v[0], "store", v) for v in victims if v[3] is None]
        + [(v[1], "reload", v) for v in victims],
        key=lambda m: -m[0],
    )
    scratch = {st.serial: source or _scratch(trace, st) for _, _, st, source in victims}
    for position, kind, (_, _, st, source) in moves:
        if kind == "reload":
            _reload(trace, st, scratch[st.serial], position, flat=source is None)
        else:
            store = {"dst": scratch[st.serial], "src": _flat(st), "queue": trace.next_queue()}
            trace.instructions.insert(position + 1, Instruction("sp", "dma_copy", store, st.site))
    for _, _, st, source in victims:
        again = f" (loaded again from {source._storage.name})" if source is not None else ""
        trace.spills.append(f"{st.name} ({st.site}) to HBM{again}")
    return len(moves)


def _loaded_from(trace: Trace, st: Storage, writes: dict[int, list[int]]) -> Tensor | None:
    """The HBM view a tile was loaded from, whole, by a plain DMA that is its only write,
    when nothing writes that HBM tensor after the load: such a tile needs no store to be
    spilled, only the same load again."""
    if len(writes.get(st.serial, ())) != 1:
        return None
    loaded_at = writes[st.serial][0]
    load = trace.instructions[loaded_at]
    dst, src = load.fields.get("dst"), load.fields.get("src")
    plain = set(load.fields) <= {"dst", "src", "queue", "hwdge"}
    if load.opcode != "dma_copy" or not plain or dst is None or dst._storage is not st:
        return None
    if not dst.is_whole() or not isinstance(src, Tensor) or src.on_chip:
        return None
    if any(at > loaded_at for at in writes.get(src._storage.serial, ())):
        return None
    return src


def _uses(trace: Trace, count: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The instructions using each storage, and those writing it (WRITTEN_FIELDS), in order,
    by serial."""
    uses, writes = collections.defaultdict(list), collections.defaultdict(list)
    for i, instruction in enumerate(trace.instructions[:count]):
        for serial in {t._storage.serial for t in instruction.tensors()}:
            uses[serial].append(i)
        for key in WRITTEN_FIELDS:
            view = instruction.fields.get(key)
            if isinstance(view, Tensor):
                writes[view._storage.serial].append(i)
    return uses, writes


def _flat(st: Storage) -> Tensor:
    """The whole of an automatic tile as [partitions, elements]: its free dims are row-major
    in each partition, so one free dim walks them all, however many the kernel gave."""
    return Tensor(st, [(1, st.whole[0][1]), (1, st.size // itemsize(st.dtype))])


def _scratch(trace: Trace, st: Storage) -> Tensor:
    """An HBM tensor of the tile's bytes ([partitions, elements]) to spill it to."""
    shape = _flat(st).shape
    name = st.name.removesuffix("_reloaded")
    return trace.declare_hbm(f"{name}_spill", st.dtype, tuple(shape), "scratch")


def _reload(trace: Trace, st: Storage, scratch: Tensor, position: int, flat: bool) -> None:
    """A DMA from `scratch` (or the HBM view the tile was loaded from) to a new SBUF tile
    before instruction `position`; it and the instructions after it use the new tile."""
    tile = trace._storage(
        SBUF,
        st.name if st.name.endswith("_reloaded") else f"{st.name}_reloaded",
        st.dtype,
        partition=st.partition,
        size=st.size,
        site=st.site,
        whole=st.whole,
    )
    _use_copy_from(trace, st, tile, position)
    dst = _flat(tile) if flat else Tensor(tile, list(st.whole))  # as stored, or as first loaded
    load = {"dst": dst, "src": scratch, "queue": trace.next_queue()}
    trace.instructions.insert(position, Instruction("sp", "dma_copy", load, st.site))


class _DoesNotFit(Exception):
    def __init__(self, storage: Storage, at: int, live: list[Storage], arena: _Arena, size: int):
        super().__init__()
        self.storage, self.at, self.live, self.arena, self.size = storage, at, live, arena, size

    def deficit(self, trace: Trace) -> int:
        """The bytes per partition past what the automatic allocations may take where the
        tile did not fit (0 or less: it was fragmentation)."""
        used = sum(_size(trace, t) for t in self.live)
        return used + self.size - _room(trace, self.storage.buffer)

    def message(self, trace: Trace, spill: bool = True) -> str:
        st, buffer = self.storage, self.storage.buffer.upper()
        used = sum(_size(trace, t) for t in self.live)
        biggest = sorted(self.live, key=lambda t: -t.size)[:4]
        named = ", ".join(f"{t.name} ({t.site}) {t.size}" for t in biggest)
        where = trace.instructions[self.at].source
        text = (
            f"{st.name} (allocated at {st.site}): {self.size} bytes per partition in {buffer} "
            f"do not fit at {where}: {used} of {self.arena.capacity} bytes per partition are "
            f"live in {len(self.live)} tensors (largest: {named})"
        )
        if used + self.size <= self.arena.capacity:
            text += f"; the largest free piece is {self.arena.largest()} bytes"
        elif not spill:
            text += " (no tile is spilled while register_load runs the kernel so far)"
        elif st.buffer == SBUF:
            text += " (and no tile live there can be spilled to HBM)"
        return text


def _scan(trace: Trace, order, first, last, next_fit: bool) -> dict[str, int]:
    """Linear scan in program order: at each instruction, the tensors it uses first get
    their place, then those it uses last give theirs back."""
    arenas = {
        SBUF: _Arena(trace.target["sbuf_partition_bytes"], 64, trace.reserved[SBUF]),
        PSUM: _Arena(
            trace.target["psum_partition_bytes"],
            trace.target["psum_bank_bytes"],
            trace.reserved[PSUM],
        ),
    }
    starts, ends = collections.defaultdict(list), collections.defaultdict(list)
    for st in order:
        starts[first[st.serial]].append(st)
        ends[last[st.serial]].append(st)
    live: dict[int, Storage] = {}
    peak = {SBUF: 0, PSUM: 0}
    in_use = {SBUF: 0, PSUM: 0}
    for at in sorted(set(starts) | set(ends)):
        for st in starts.get(at, ()):
            arena, size = arenas[st.buffer], _size(trace, st)
            offset = arena.take(size, next_fit)
            if offset is None:
                held = [t for t in live.values() if t.buffer == st.buffer]
                raise _DoesNotFit(st, at, held, arena, size)
            st.offset = offset
            live[st.serial] = st
            in_use[st.buffer] += size
            peak[st.buffer] = max(peak[st.buffer], in_use[st.buffer])
        for st in ends.get(at, ()):
            size = _size(trace, st)
            arenas[st.buffer].give(st.offset, st.offset + size)
            del live[st.serial]
            in_use[st.buffer] -= size
    return peak

"""nki.compiler: explicit allocation of SBUF and PSUM, and the kernel decorators that
steer the compiler.

A tensor whose buffer is ``sbuf.mod_alloc(...)``, ``psum.mod_alloc(...)`` or
``sbuf.alloc(func)`` / ``psum.alloc(func)`` is placed where the kernel says, tile by tile:
each index of its block dims (the dims before ``par_dim``) is a tile of its own at its own
address, and two tiles that share an address share bytes (the checking mode fails a read
of a tile another one overwrote). ``sbuf.auto_alloc`` / ``psum.auto_alloc`` are
``nl.sbuf`` / ``nl.psum``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from . import _trace, language
from ._trace import PSUM, SBUF, NkiError, ParDim, Tensor, Trace, itemsize


class _Explicit:
    """An allocation the kernel places: `where(block)` gives the (partition, byte offset)
    of each tile."""

    def __init__(self, buffer: str, what: str):
        self.buffer, self.what = buffer, what

    def where(self, trace: Trace, block: tuple, partitions: int, tile_bytes: int) -> tuple:
        raise NotImplementedError

    def place(self, trace: Trace, shape: tuple, dtype: str, name: str) -> Tensor:
        """The tensor nl.ndarray(shape, dtype, buffer=self) makes: one tile, or a handle
        whose block indices are tiles placed by `where`, each made on first use."""
        if trace.force_auto_alloc:
            return trace.allocate(self.buffer, shape, dtype, name)
        marked = [d for d, n in enumerate(shape) if isinstance(n, ParDim)]
        pdim = marked[0] if marked else 0
        tile_shape = tuple(int(n) for n in shape[pdim:])
        tile_bytes = math.prod(tile_shape[1:]) * itemsize(dtype)

        def place(block: tuple) -> tuple:
            return self.where(trace, block, tile_shape[0], tile_bytes)

        if pdim == 0:
            return trace.allocate(self.buffer, shape, dtype, name, address=place(()))
        site = _trace._caller_site(text=True)
        return trace.blocked(self.buffer, shape, pdim, dtype, name, site, place)


def _moduli(tiles, blocks: tuple, what: str) -> tuple:
    tiles = tuple(int(n) for n in tiles) or (1,) * len(blocks)
    if not blocks:  # one tile: the counts have nothing to rotate
        return ()
    if len(tiles) != len(blocks):
        raise NkiError(f"{what}: {len(tiles)} tile counts {tiles} for {len(blocks)} block dims")
    if any(n < 1 for n in tiles):
        raise NkiError(f"{what}: tile counts {tiles} are positive")
    return tiles


def _linear(block: tuple, moduli: tuple) -> int:
    """The physical tile of a block index: each index modulo its count, row-major."""
    at = 0
    for i, n in zip(block, moduli):
        at = at * n + i % n
    return at


class _SbufModulo(_Explicit):
    def __init__(self, base_addr: int, base_partition: int, num_par_tiles, num_free_tiles):
        super().__init__(SBUF, "sbuf.mod_alloc")
        if num_par_tiles and math.prod(num_par_tiles) != 1:
            raise NkiError(
                "sbuf.mod_alloc: num_par_tiles (tiles along partitions) is not supported yet"
            )
        self.base_addr, self.base_partition = int(base_addr), int(base_partition)
        self.free_tiles = tuple(num_free_tiles)

    def where(self, trace, block, partitions, tile_bytes):
        moduli = _moduli(self.free_tiles, block, self.what)
        return (self.base_partition, self.base_addr + _linear(block, moduli) * tile_bytes)


class _PsumModulo(_Explicit):
    def __init__(
        self, base_bank, base_addr, base_partition, num_bank_tiles, num_par_tiles, num_free_tiles
    ):
        super().__init__(PSUM, "psum.mod_alloc")
        if (num_par_tiles and math.prod(num_par_tiles) != 1) or (
            num_free_tiles and math.prod(num_free_tiles) != 1
        ):
            raise NkiError(
                "psum.mod_alloc: num_par_tiles and num_free_tiles (several tiles in "
                "a bank) are not supported yet"
            )
        self.base_bank, self.base_addr = int(base_bank), int(base_addr)
        self.base_partition = int(base_partition)
        self.bank_tiles = tuple(num_bank_tiles)

    def where(self, trace, block, partitions, tile_bytes):
        moduli = _moduli(self.bank_tiles, block, self.what)
        bank = self.base_bank + _linear(block, moduli)
        banks = trace.target["psum_partition_bytes"] // trace.target["psum_bank_bytes"]
        if bank >= banks:
            raise NkiError(f"psum.mod_alloc: block {block} lands in bank {bank} of {banks}")
        return (self.base_partition, bank * trace.target["psum_bank_bytes"] + self.base_addr)


class _ByFunction(_Explicit):
    def __init__(self, buffer: str, func: Callable):
        super().__init__(buffer, f"{buffer}.alloc")
        self.func = func

    def where(self, trace, block, partitions, tile_bytes):
        at = self.func(block, partitions, tile_bytes)
        if self.buffer == PSUM:  # (bank, byte offset in the bank, partition)
            bank, offset, partition = (tuple(at) + (0, 0))[:3]
            return (partition, bank * trace.target["psum_bank_bytes"] + offset)
        return tuple(at)


class _Buffer:
    """sbuf or psum of nki.compiler."""

    def __init__(self, buffer: str):
        self.auto_alloc = buffer
        self._buffer = buffer

    def alloc(self, func: Callable) -> _Explicit:
        """Tiles placed by `func(block_index, partitions, tile_bytes)`: (partition, byte
        offset) in SBUF; (bank, byte offset, partition) in PSUM."""
        return _ByFunction(self._buffer, func)


class _Sbuf(_Buffer):
    def mod_alloc(
        self,
        *,
        base_addr=None,
        base_partition=0,
        num_par_tiles=(),
        num_free_tiles=(),
        byte_addr=None,
    ) -> _Explicit:
        """Tiles at base_addr, block index modulo num_free_tiles, one after another."""
        addr = base_addr if base_addr is not None else byte_addr
        if addr is None:
            raise NkiError("sbuf.mod_alloc: base_addr is required")
        return _SbufModulo(addr, base_partition, num_par_tiles, num_free_tiles)


class _Psum(_Buffer):
    def mod_alloc(
        self,
        *,
        base_bank,
        base_addr=0,
        base_partition=0,
        num_bank_tiles=(),
        num_par_tiles=(),
        num_free_tiles=(),
    ) -> _Explicit:
        """A bank per tile from base_bank, block index modulo num_bank_tiles."""
        return _PsumModulo(
            base_bank, base_addr, base_partition, num_bank_tiles, num_par_tiles, num_free_tiles
        )


sbuf = _Sbuf(SBUF)
psum = _Psum(PSUM)

# A loop directive (`nl.sequential_range(n, directives=no_reorder())`) and a context
# manager: keep the instructions in program order (the scheduler moves none of them).
no_reorder = language.no_reorder


def _kernel_option(name: str, doc: str) -> Callable:
    """A decorator that marks a kernel (an nki.jit kernel or its function) with `name`."""

    def decorate(kernel):
        setattr(kernel, name, True)
        return kernel

    decorate.__doc__ = doc
    return decorate


skip_middle_end_transformations = _kernel_option(
    "skip_middle_end_transformations",
    "Runs the kernel as written: nothing here fuses or transforms its loops (the Sync "
    "engine's DMAs are still scheduled, as a compiler's back end schedules them).",
)
enable_stack_allocator = _kernel_option(
    "enable_stack_allocator",
    "Accepted: automatic allocations are placed by the lives of their tiles (docs/nki.md), "
    "which already frees a tile as soon as it is dead.",
)
force_auto_alloc = _kernel_option(
    "force_auto_alloc",
    "Places the kernel's explicitly allocated tensors automatically instead.",
)

__all__ = [
    "no_reorder",
    "sbuf",
    "psum",
    "skip_middle_end_transformations",
    "enable_stack_allocator",
    "force_auto_alloc",
]

"""From a traced kernel to its program: the on-chip tensors placed (_alloc.py), the
placement checked when asked (_check.py), the instructions written as neuronsim's assembly
and built by the C++ half (isa::KernelBuilder adds the semaphores)."""

from __future__ import annotations

import math
import os

import numpy as np

from ..dtypes import DTYPES
from . import _alloc, _check, _schedule
from ._trace import PSUM, SBUF, NkiError, Tensor, Trace


def checking(explicit: bool | None = None) -> bool:
    """Whether traces are checked for stale reads: `explicit` when given, else
    NEURONSIM_NKI_CHECK (1, true, yes or on)."""
    if explicit is not None:
        return bool(explicit)
    return os.environ.get("NEURONSIM_NKI_CHECK", "").lower() in ("1", "true", "yes", "on")


def lines(
    trace: Trace, count: int | None = None, check: bool = False, spill: bool = True
) -> list[str]:
    """The first `count` instructions (all by default) as assembly lines, their on-chip
    tensors placed and the Sync engine's DMAs scheduled (_schedule.py); with `check`, every
    read is verified to see the data its tensor holds. Without `spill` (the kernel so far,
    for a register_load) nothing is spilled or reordered."""
    count = len(trace.instructions) if count is None else count
    trace.peak, count = _alloc.assign(trace, count, spill)
    if spill:
        _schedule.schedule(trace, count)
    if check:
        trace.unwritten_reads = _check.verify(trace, count)
    return [instruction.line() for instruction in trace.instructions[:count]]


def build(trace: Trace, check: bool = False):
    """The traced kernel as a program of the C++ half."""
    from .. import _C

    program_lines = lines(trace, check=check)
    try:
        return _C.nki.build(
            trace.target["name"], "\n".join(trace.declarations) + "\n", program_lines
        )
    except (ValueError, RuntimeError) as err:
        raise NkiError(_locate(str(err), trace)) from None


def _locate(message: str, trace: Trace) -> str:
    """An assembler error's line number as the kernel's source line."""
    import re

    m = re.match(r"<kernel>:(\d+): (.*)", message, re.S)
    if not m:
        return message
    line = int(m.group(1)) - 2 - len(trace.declarations)  # .target, declarations, 1-based
    where = trace.instructions[line].source if 0 <= line < len(trace.instructions) else "?"
    return f"{where}: {m.group(2)}"


def load_register_value(trace: Trace, view: Tensor) -> int:
    """The value of the one element `view` holds at this point of the kernel: the program
    traced so far runs on the kernel's inputs (values only), and one DMA reads the element.
    Then the load itself goes into the program: a DMA of the element to a register slot in
    SBUF, after whatever wrote it."""
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
    host = DTYPES[view.dtype].numpy
    if host is None or np.dtype(host).kind not in "iub":
        raise NkiError(f"register_load: {view.name} is {view.dtype}; registers hold integers")
    # The load goes in first, so that the prefix placed below keeps `view` live up to it.
    slot = trace.allocate(SBUF, (1, 1), view.dtype, "register")
    trace.emit("sp", "dma_copy", dst=slot, src=view, queue=trace.next_queue())
    name = trace.unique("register_value")
    dt = DTYPES[view.dtype].name
    # The kernel so far is placed as it stands: a spill here would leave the tiles that the
    # kernel's variables hold for later instructions behind (their uses after this point are
    # not traced yet), so none is spilled, from PSUM or SBUF.
    prefix = lines(trace, spill=False)
    decls = [*trace.declarations, f".tensor {name} {dt} [1] output"]
    read = f"sp dma_copy dst=hbm.{dt}({name})+0[[1,1],[1,1]] src={slot.pattern()}"
    program = _C.nki.build(trace.target["name"], "\n".join(decls) + "\n", [*prefix, read])
    run = _C.nki.run(program, trace.input_values(), "functional-only", "")
    trace.data_dependent = True
    return int(np.frombuffer(run["outputs"][name], dtype=host)[0])

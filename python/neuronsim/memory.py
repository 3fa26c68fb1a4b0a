"""``torch.neuron.memory``: memory history and snapshots of the neuron devices in the form
CUDA's allocator gives them, so that PyTorch's memory tools read them unchanged
(``torch.cuda._memory_viz``, https://pytorch.org/memory_viz): every reserved block of
simulated HBM with its address and state, and with history on, each allocation and free.

Each block the allocator reserves is a segment of its own. Frames (the Python and C++
stacks CUDA's history can keep) are not recorded: every entry's list is empty.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

from . import _C

_SMALL = 1 << 20  # blocks up to 1 MiB are the small pool, as the allocator counts them


def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
) -> None:
    """Starts ("all": every allocation and free from now on) or stops (None, or "state":
    the snapshot's blocks only) recording the history of the devices' memory."""
    if enabled not in (None, "state", "all", True, False):
        raise ValueError(f"enabled={enabled!r}: None, 'state' or 'all'")
    on = enabled in ("all", True)
    _C.record_memory_history(on, max(0, int(min(max_entries, 2**62))) if on else 0)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The segments of every device and the history recorded, as CUDA's _snapshot()."""
    segments = []
    for b in sorted(_C.memory_blocks(), key=lambda b: (b["device"], b["address"])):
        state = "active_allocated" if b["active"] else "inactive"
        used = b["size"] if b["active"] else 0
        segments.append(
            {
                "device": b["device"],
                "address": b["address"],
                "total_size": b["size"],
                "allocated_size": used,
                "active_size": used,
                "requested_size": b["requested_size"],
                "stream": 0,
                "segment_type": "small" if b["size"] <= _SMALL else "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": [],
                "blocks": [
                    {
                        "address": b["address"],
                        "size": b["size"],
                        "requested_size": b["requested_size"],
                        "state": state,
                        "frames": [],
                    }
                ],
            }
        )
    history = _C.memory_history()
    devices = 1 + max([e["device"] for e in history] + [s["device"] for s in segments] + [0])
    traces: list[list[dict]] = [[] for _ in range(devices)]
    for e in history:
        traces[e["device"]].append(
            {
                "action": e["action"],
                "addr": e["addr"],
                "size": e["size"],
                "stream": 0,
                "time_us": e["time_us"],
                "frames": [],
            }
        )
    return {"segments": segments, "device_traces": traces, "allocator_settings": {}}


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments of every device (CUDA's memory_snapshot())."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles _snapshot() to `filename`, for pytorch.org/memory_viz or
    ``python -m torch.cuda._memory_viz trace_plot <file> -o trace.html``."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)

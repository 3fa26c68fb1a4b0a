"""The engine room (sim/) as docs/architecture.md draws it, checked on the sources.

Entrances (the runtime, the tools, the Python extension, the kernels, the traces and the
collectives) reach the simulator through its front headers, never through functional.h or
simulator.h; the one exception is the bench's host-speed figure, which times the bare
Simulator. Inside sim/src, the parts below the Simulator (the scheduling rules, the collective
hub, the HBM allocator) include neither simulator.h nor device.h, the device's rooms sit
beside device.cpp, nothing includes in a circle, and the scheduling rules (when an instruction
may start, the deadlock report) are written once."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SIM_SRC = ROOT / "sim" / "src"
ENTRANCES = ["runtime_shim", "tools", "python/csrc", "kernels", "traces", "collectives"]
ENGINE_ROOM = {"neuronsim/sim/functional.h", "neuronsim/sim/simulator.h"}
BARE_SIMULATOR = {"tools/bench/speed.cpp"}  # the simulator's host speed, on its own
BELOW_SIMULATOR = ["schedule", "collective_hub", "hbm_allocator"]
DEVICE_ROOMS = ["device_memory", "work_queue", "trace_sessions"]
INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def _includes(path: Path) -> set[str]:
    return set(INCLUDE.findall(path.read_text()))


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".h", ".cpp"))


def test_entrances_use_the_front_headers():
    wrong = []
    for entrance in ENTRANCES:
        for path in _sources(ROOT / entrance):
            name = str(path.relative_to(ROOT))
            if name not in BARE_SIMULATOR and _includes(path) & ENGINE_ROOM:
                wrong.append(name)
    assert not wrong, "entrances that include the engine room's insides: " + ", ".join(wrong)


def test_the_parts_below_the_simulator_include_nothing_above_them():
    above = {"neuronsim/sim/simulator.h", "neuronsim/sim/device.h"}
    wrong = [
        f"{part}.{ext}"
        for part in BELOW_SIMULATOR
        for ext in ("h", "cpp")
        if _includes(SIM_SRC / f"{part}.{ext}") & above
    ]
    assert not wrong, f"includes that run up: {wrong}"


def test_the_device_rooms_are_used_by_the_device_alone():
    for room in DEVICE_ROOMS:
        assert (SIM_SRC / f"{room}.h").is_file() and (SIM_SRC / f"{room}.cpp").is_file(), room
    users = {
        p.name
        for p in _sources(ROOT / "sim")
        if any(f"{room}.h" in _includes(p) for room in DEVICE_ROOMS)
    }
    assert users <= {f"{room}.{ext}" for room in DEVICE_ROOMS for ext in ("h", "cpp")} | {
        "device.cpp"
    }, users


def test_sim_src_includes_in_no_circle():
    graph: dict[str, set[str]] = {}  # a header and its source are one node
    for p in _sources(SIM_SRC):
        local = {Path(i).stem for i in _includes(p) if (SIM_SRC / i).is_file()}
        graph.setdefault(p.stem, set()).update(local - {p.stem})
    done: set[str] = set()

    def visit(node: str, trail: tuple[str, ...]) -> None:
        assert node not in trail, "include circle: " + " -> ".join((*trail, node))
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, (*trail, node))
        done.add(node)

    for node in sorted(graph):
        visit(node, ())


def test_the_scheduling_rules_are_written_once():
    """One place says what a blocked engine waits for; the two runs share it."""
    sayers = [p.name for p in _sources(SIM_SRC) if "waits for S[" in p.read_text()]
    assert sayers == ["schedule.cpp"], sayers
    for run in ("functional.cpp", "simulator.cpp"):
        text = (SIM_SRC / run).read_text()
        assert "wait_satisfied" not in text and "blocked_line" not in text, run
    assert '#include "schedule.h"' in (SIM_SRC / "simulator.cpp").read_text()

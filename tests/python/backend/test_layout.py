"""The backend's layers, as docs/architecture.md draws them, checked on the sources.

The C++ extension (python/csrc) is laid out as PyTorch's reference backend: profiler/ at the
bottom, runtime/ (device, guard, streams, generator, hooks, allocator) on it, under aten/ (the
kernels), with amp/, distributed/ and compiler/ beside aten and module.cpp on top. Includes run down
the layers only and no two files include each other, directly or through others. The
device-facing Python package never imports its tools (neuronsim.tools), and the compiler's
modules import down their layers only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CSRC = ROOT / "python" / "csrc"
PACKAGE = ROOT / "python" / "neuronsim"

# What each folder of csrc may include from csrc (its own folder is always allowed).
MAY_INCLUDE = {
    "profiler": set(),  # torch.profiler's device rows: the records, and the Kineto plugin
    "runtime": {"profiler"},
    "aten": {"runtime", "profiler"},
    "amp": {"runtime", "aten", "profiler"},
    "distributed": {"runtime", "aten", "profiler"},
    "compiler": {"runtime", "aten", "profiler"},
    "nki": set(),  # NKI kernels on a device of their own: nothing of the PyTorch backend
    ".": {"runtime", "aten", "amp", "distributed", "compiler", "nki", "profiler"},
}
INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def _sources() -> list[Path]:
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".h", ".cpp"))


def _layer(path: Path) -> str:
    parts = path.relative_to(CSRC).parts
    return parts[0] if len(parts) > 1 else "."


def _local_includes(path: Path) -> list[Path]:
    """The csrc files `path` includes (project and library headers are left out)."""
    found = []
    for name in INCLUDE.findall(path.read_text()):
        if name.startswith("neuronsim/"):
            continue
        target = CSRC / name
        assert target.is_file(), f"{path.relative_to(CSRC)} includes {name!r}, not under csrc/"
        found.append(target)
    return found


def _unit(path: Path) -> str:
    """A header and its source are one unit of the include graph."""
    return str(path.relative_to(CSRC).with_suffix(""))


def test_csrc_has_the_layers():
    assert {p.name for p in CSRC.iterdir() if p.is_dir()} == set(MAY_INCLUDE) - {"."}
    assert [p.name for p in CSRC.iterdir() if p.is_file()] == ["module.cpp"]


def test_includes_run_down_the_layers():
    wrong = []
    for path in _sources():
        layer = _layer(path)
        for target in _local_includes(path):
            if _layer(target) not in MAY_INCLUDE[layer] | {layer}:
                wrong.append(f"{path.relative_to(CSRC)} -> {target.relative_to(CSRC)}")
    assert not wrong, "includes against the layers: " + ", ".join(wrong)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph (its nodes in order, the first repeated last), or None."""
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return trail[trail.index(nxt) :] + [node, nxt] if nxt in trail else [node, nxt]
            found = visit(nxt, [*trail, node]) if nxt not in state else None
            if found:
                return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        found = visit(node, []) if node not in state else None
        if found:
            return found
    return None


def test_include_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for path in _sources():
        edges = graph.setdefault(_unit(path), set())
        edges.update(_unit(t) for t in _local_includes(path) if _unit(t) != _unit(path))
    cycle = _cycle(graph)
    assert cycle is None, "include cycle: " + " -> ".join(cycle)


def _module_imports() -> dict[str, set[str]]:
    """Each module of the Python package and the package's modules it imports, at the top
    or inside a function (an import inside a function still closes a circle). Importing an
    attribute of a package the module lives in (`from .. import _C`) is no edge: a module's
    packages are always imported before it."""
    root = PACKAGE.parent
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                targets = [f"{module}.{a.name}" for a in node.names] + [module]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            target = next((t for t in targets if t in modules), None)
            if target and target != name and not name.startswith(target + "."):
                edges.add(target)
    return graph


def test_the_python_package_has_no_import_cycle():
    graph = _module_imports()
    assert "neuronsim.compiler.indices" in graph and "neuronsim.nki._trace" in graph
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The compiler's modules from the bottom up, as Inductor's are: values and views; the bounds
# of integer values; the tables of what lowers and its checks; the decompositions of what does
# not; a segment's plan; lowering, cutting and running; folding constants (which cuts).
COMPILER_LAYERS = [
    {"expressions", "views", "layouts"},
    {"indices"},
    {"ops"},
    {"decompositions", "plan"},
    {"lowering", "schedule", "executor"},
    {"constants"},
]


def test_the_compiler_imports_one_way():
    layer = {name: i for i, names in enumerate(COMPILER_LAYERS) for name in names}
    prefix = "neuronsim.compiler."
    graph = _module_imports()
    modules = {m.removeprefix(prefix) for m in graph if m.startswith(prefix)}
    assert modules == set(layer), f"compiler modules not in a layer: {modules ^ set(layer)}"
    wrong = [
        f"{m} -> {t}"
        for m in modules
        for t in (x.removeprefix(prefix) for x in graph[prefix + m] if x.startswith(prefix))
        if layer[t] >= layer[m]
    ]
    assert not wrong, "compiler imports that do not run down: " + ", ".join(sorted(wrong))


def test_device_package_never_imports_the_tools():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "tools" or relative.name in ("hub.py", "bench.py"):
            continue  # the tools themselves, and the old names that alias them
        package = ["neuronsim", *relative.parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [module] + [f"{module}.{a.name}" for a in node.names]
            if any(n == "neuronsim.tools" or n.startswith("neuronsim.tools.") for n in names):
                wrong.append(f"{relative}:{node.lineno}")
    assert not wrong, "the device package imports its tools at " + ", ".join(wrong)

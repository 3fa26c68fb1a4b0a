"""docs/cost-model.md §8 stays true: every figure of the chip, instance and runtime-release
configurations has a row, and a row says "fitted" exactly where the figure's source says it
was fitted on a calibration set."""

from __future__ import annotations

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "spec" / "configs"


def _figures(node, name="") -> list[tuple[str, str]]:
    """(name, source) of every {"value", "source"} figure under a JSON node."""
    if isinstance(node, dict) and "value" in node and "source" in node:
        return [(name, node["source"])]
    if isinstance(node, dict):
        return [f for key, child in node.items() for f in _figures(child, key)]
    return []


def _all_figures() -> dict[str, list[str]]:
    sources: dict[str, list[str]] = {}
    for path in sorted(CONFIGS.glob("*.json")):
        for name, source in _figures(json.loads(path.read_text())):
            sources.setdefault(name, []).append(source)
    return sources


def _table() -> dict[str, str]:
    """Each figure named in the first column of §8's table, with its row's Kind."""
    text = (ROOT / "docs" / "cost-model.md").read_text()
    section = text.split("## 8. Every figure", 1)[1].split("\n## ", 1)[0]
    kinds = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or "`" not in cells[0]:
            continue
        group, _, names = cells[0].rpartition(": ")  # "`clocks`: `pe`" names a group first
        for name in re.findall(r"`([a-z0-9_]+)`", names):
            kinds[name] = cells[2]
    return kinds


def test_every_figure_of_the_configurations_has_a_row():
    figures, table = _all_figures(), _table()
    assert len(figures) > 40, sorted(figures)  # the walk found the configurations
    missing = sorted(set(figures) - set(table))
    assert not missing, f"figures with no row in docs/cost-model.md §8: {missing}"
    unknown = sorted(set(table) - set(figures))
    assert not unknown, f"rows of docs/cost-model.md §8 naming no figure: {unknown}"


def test_a_row_says_fitted_exactly_where_a_source_does():
    figures, table = _all_figures(), _table()
    for name, sources in figures.items():
        fitted = any(s.startswith("fitted on") for s in sources)
        assert fitted == ("fitted" in table[name]), (name, table[name], sources)

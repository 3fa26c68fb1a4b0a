"""The docs stay true where a claim can be checked: every repository path they name exists,
and none cites a path outside the repository (a clone has only what the repository holds)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "bench" / "README.md"]
# The research notes cite paths of other repositories (the Neuron SDK's docs): not ours.
NOTES = sorted((ROOT / "docs" / "sources").glob("*.md"))
# The repository's top folders: a quoted path starting with one of them names a file here.
TOPS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"build"}


def _quoted_paths(text: str) -> list[str]:
    paths = []
    for quoted in re.findall(r"`([A-Za-z0-9_./{},*<>:-]+)`", text):
        path = quoted.split(":")[0]  # file:line
        if "/" in path and path.split("/")[0] in TOPS and not set(path) & set("{}*<>"):
            paths.append(path)
    return paths


def test_every_repository_path_the_docs_name_exists():
    missing = [
        f"{doc.relative_to(ROOT)}: {path}"
        for doc in DOCS
        for path in _quoted_paths(doc.read_text())
        if not (ROOT / path).exists()
    ]
    assert not missing, missing


def test_no_doc_cites_a_path_outside_the_repository():
    outside = [
        f"{doc.relative_to(ROOT)}: {m.group(0)}"
        for doc in DOCS + NOTES
        for m in re.finditer(
            r"(?<![\w/.])(\.\./[\w./-]+|shared/(research|fixtures)[\w./-]*)", doc.read_text()
        )
    ]
    assert not outside, outside


def test_the_research_notes_the_configurations_cite_are_in_the_repository():
    sources = ROOT / "docs" / "sources"
    configs = " ".join(p.read_text() for p in (ROOT / "spec" / "configs").glob("*.json"))
    for note in ("neuron-hardware.md", "libnrt-api.md"):
        assert (sources / note).exists()
    assert "neuron-hardware.md §" in configs

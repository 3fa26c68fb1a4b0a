"""PyTorch's OpInfo database as the device's contract (``neuronsim.tools.opinfo``): a slice
of its (op, dtype, layout) entries runs here against the CPU, every STEP-th of the sorted
list plus every entry of the expected-failure list. An entry must match the CPU (on the
device, or counted on the CPU fallback) unless the list names it, with its reason; a
listed entry that now matches fails too, so that the list only shrinks. The whole
database runs with ``python -m neuronsim.tools.opinfo --expected
tests/python/tools/opinfo_expected_failures.csv`` (``scripts/opinfo.sh``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronsim.tools import opinfo

STEP = 32
EXPECTED = opinfo.read_expected(Path(__file__).with_name("opinfo_expected_failures.csv"))
ALL = opinfo.entries()
SLICE = sorted(set(ALL[::STEP]) | set(EXPECTED))
DATABASE = opinfo.database()


def test_the_expected_failures_name_real_entries_and_say_why():
    known = set(ALL)
    for key, row in EXPECTED.items():
        assert key in known, f"{key} is not an entry of the database"
        assert row["status"] in ("mismatch", "error") and len(row["reason"]) > 20, row


RESULTS: dict[tuple[str, str, str], str] = {}  # entry -> status, for the tally
# How many entries of the slice must run on the device alone (status pass, no fallback): the
# gate of the tally, as the dashboard's torch/opinfo figures follow the same count.
MIN_NO_FALLBACK = 90


@pytest.mark.parametrize("name,dtype,layout", SLICE, ids=lambda v: str(v))
def test_entry_matches_the_cpu_or_fails_as_listed(name, dtype, layout):
    result = opinfo.run_entry(DATABASE[name], dtype, layout)
    RESULTS[(name, dtype, layout)] = result.status
    listed = EXPECTED.get((name, dtype, layout))
    if listed:
        assert result.status in ("mismatch", "error"), (
            f"{name} [{dtype}, {layout}] now gives {result.status}: remove it from "
            "opinfo_expected_failures.csv"
        )
    else:
        assert result.status in ("pass", "fallback", "skip"), f"{result.status}: {result.message}"


def test_the_slice_runs_on_the_device_alone_as_often_as_before(capsys):
    if len(RESULTS) < len(SLICE):
        pytest.skip("the slice's entries did not all run in this session")
    no_fallback = sum(status == "pass" for status in RESULTS.values())
    with capsys.disabled():
        print(f"\nOpInfo slice: {no_fallback} of {len(RESULTS)} entries with no CPU fallback")
    assert no_fallback >= MIN_NO_FALLBACK


def test_the_tally_becomes_the_dashboards_figures(tmp_path):
    statuses = ["pass", "pass", "fallback", "mismatch", "crash", "skip"]
    results = [opinfo.Result(f"op{i}", "float32", "contiguous", s) for i, s in enumerate(statuses)]
    assert opinfo.figures(results, "torch/opinfo") == [
        ("torch/opinfo", "entries", 6),
        ("torch/opinfo", "no_fallback", 2),
        ("torch/opinfo", "fallback", 1),
        ("torch/opinfo", "mismatch", 1),
        ("torch/opinfo", "error", 1),
    ]
    out = tmp_path / "figures.csv"
    opinfo.write_figures(out, results, "torch/opinfo")
    rows = out.read_text().splitlines()
    assert rows[:3] == [
        "benchmark,metric,value",
        "torch/opinfo,entries,6",
        "torch/opinfo,no_fallback,2",
    ]

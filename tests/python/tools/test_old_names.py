"""The tools' old command names, kept as aliases for one release: ``python -m
neuronsim.hub`` and ``python -m neuronsim.bench`` run the new commands with the same
arguments and exit status, and importing the old modules gives the new ones."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("old, new", [("hub", "tools.hub"), ("bench", "tools.bench")])
def test_old_command_runs_the_new_one(old, new):
    def run(module: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", f"neuronsim.{module}", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    aliased, direct = run(old, "--help"), run(new, "--help")
    assert aliased.returncode == direct.returncode == 0, aliased.stderr
    assert aliased.stdout == direct.stdout
    assert f"python -m neuronsim.{new}" in aliased.stdout
    refused = run(old, "--no-such-option")
    assert refused.returncode == 2 and "--no-such-option" in refused.stderr


def test_old_module_is_the_new_one():
    import neuronsim.bench
    import neuronsim.hub
    import neuronsim.tools.bench
    import neuronsim.tools.hub

    assert sys.modules["neuronsim.hub"] is neuronsim.tools.hub
    assert sys.modules["neuronsim.bench"] is neuronsim.tools.bench

"""Every NKI test runs in the checking mode: a read that would see data another tensor
overwrote fails the kernel instead of returning a wrong value."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def check_stale_reads(monkeypatch):
    monkeypatch.setenv("NEURONSIM_NKI_CHECK", "1")

"""Checks that run on every rank of a torchrun job and one report of them all: each check
passes or records what went wrong on which rank; report() gathers the ranks' records and
rank 0 prints them as one JSON line {check: null when it passed on every rank, else why}."""

from __future__ import annotations

import json
import traceback

import torch.distributed as dist


class Checks:
    def __init__(self):
        self.failures: dict[str, str | None] = {}

    def run(self, name: str, fn) -> None:
        try:
            fn()
            self.failures[name] = None
        except Exception as e:  # noqa: BLE001  (a failed check is reported, the others still run)
            trace = traceback.format_exc()[-2000:]
            self.failures[name] = f"rank {dist.get_rank()}: {type(e).__name__}: {e}\n{trace}"

    def report(self, **extra) -> None:
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, self.failures)
        if dist.get_rank() == 0:
            merged: dict = {}
            for per_rank in gathered:
                for name, why in per_rank.items():
                    merged[name] = merged.get(name) or why
            merged.update(extra)
            print(json.dumps(merged), flush=True)

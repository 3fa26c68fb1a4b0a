"""A rank of a "neuron" process group that dies, hangs or runs a different collective; a
subgroup whose ranks go on after the others (and the store they host) have left, or meet
only after they have.
Started as plain processes (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), not by torchrun,
whose agent would stop the job at the first failure. Usage: c10d_faults.py CASE TIMEOUT_S.
Every rank that gets an error prints one JSON line: the error's type and message and the
seconds from the collective's start to the error."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import neuronsim  # noqa: F401

case, timeout_s = sys.argv[1], float(sys.argv[2])
dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=timeout_s))
me = dist.get_rank()
t = torch.ones(8, device="neuron")
dist.all_reduce(t)  # the group connects; every rank is healthy here

start = time.monotonic()
try:
    if case == "dies" and me == 1:
        os._exit(3)
    elif case == "hangs" and me == 1:
        time.sleep(3600)
    elif case == "disagrees" and me == 1:
        dist.broadcast(t, src=0)
    elif case == "late_subgroup":  # ranks 0-1 leave (with the store) once the group is made
        sub = dist.new_group([2, 3])
        dist.all_reduce(t)  # the job goes on together a while: every rank has made its groups
        if me in (2, 3):
            time.sleep(2)
            dist.all_reduce(t, group=sub)
            assert torch.equal(t.cpu(), torch.full((8,), 32.0)), t.cpu()
    elif case == "left_before_the_subgroup_met":  # ranks 0-1 leave at once, store and all
        sub = dist.new_group([2, 3])
        if me in (2, 3):
            time.sleep(2)  # torch's new_group does not wait for the others: they have left
            dist.all_reduce(t, group=sub)
            assert torch.equal(t.cpu(), torch.full((8,), 8.0)), t.cpu()
            if me == 2:
                dist.send(t * 2, dst=3, group=sub)
            else:
                got = torch.zeros(8, device="neuron")
                dist.recv(got, src=2, group=sub)
                assert torch.equal(got.cpu(), torch.full((8,), 16.0)), got.cpu()
    elif case == "bad_root":  # no rank 2 in a group of 2: refused, and the group lives on
        out = torch.zeros(8, device="neuron")
        try:
            dist.scatter(out, None, src=2)
        except ValueError as e:
            assert "invalid root rank 2" in str(e), str(e)
        else:
            raise AssertionError("scatter from rank 2 of 2 did not fail")
        for rooted in (dist.broadcast, dist.reduce):
            try:
                rooted(t, 2)
            except ValueError as e:
                assert "invalid root rank 2" in str(e), str(e)
            else:
                raise AssertionError(f"{rooted.__name__} from rank 2 of 2 did not fail")
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), torch.full((8,), 4.0)), t.cpu()
    else:
        dist.all_reduce(t)
    result = {"error": None}
except Exception as e:  # noqa: BLE001  (any error is the result, reported)
    result = {"error": type(e).__name__, "message": str(e)}
result["seconds"] = time.monotonic() - start
result["rank"] = me
print(json.dumps(result), flush=True)
os._exit(0)

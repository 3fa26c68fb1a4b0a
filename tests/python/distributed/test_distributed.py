"""The torch.distributed backend "neuron" across processes: every c10d operation in every
dtype under torchrun (tests/python/distributed/c10d_ops.py), and the faults: a rank that
dies, hangs or runs a different collective gives the others a DistBackendError naming the
operation within the group's timeout; DTensor, tensor parallelism and FSDP2 against one
process (tests/python/distributed/parallel.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent


def child_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON", "TORCHELASTIC"))}
    env.update(NEURONSIM_MODE=os.environ.get("NEURONSIM_MODE", "functional-only"))
    env.update(extra)
    return env


def torchrun(script: Path, nproc: int, *args: str, env=None, cwd=None, timeout: float = 900):
    """Runs `script` under torchrun with `nproc` ranks; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc_per_node={nproc}", str(script), *args]
    return subprocess.run(
        cmd,
        env=child_environment(**(env or {})),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_json(stdout: str):
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, "no JSON line printed"
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def c10d_results():
    done = torchrun(SCRIPTS / "c10d_ops.py", 4)
    assert done.returncode == 0, done.stderr[-6000:]
    return last_json(done.stdout)


def test_every_operation_and_dtype_matches_the_reference(c10d_results):
    results = {k: v for k, v in c10d_results.items() if not k.startswith("_")}
    # 13 dtypes × (reduce ops + 11 other operations) and the dtype-free checks
    assert len(results) > 200, sorted(results)
    failed = {k: v for k, v in results.items() if v is not None}
    assert not failed, "\n\n".join(f"{k}: {v}" for k, v in sorted(failed.items())[:10])


def test_the_group_counts_its_collectives(c10d_results):
    stats = c10d_results["_stats"]
    assert stats["collectives"] > 200
    assert stats["bytes"] > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_fault(case: str, timeout_s: float, ranks: int = 2):
    """Starts the ranks of c10d_faults.py; returns each surviving rank's JSON result."""
    port = free_port()
    procs = []
    for rank in range(ranks):
        env = child_environment(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(ranks),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPTS / "c10d_faults.py"), case, str(timeout_s)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = {}
    try:
        for rank, p in enumerate(procs):
            if case == "hangs" and rank == 1:
                continue
            out, err = p.communicate(timeout=timeout_s + 120)
            if case == "dies" and rank == 1:
                assert p.returncode == 3, err[-3000:]
                continue
            assert p.returncode == 0, err[-3000:]
            results[rank] = last_json(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return results


def assert_named_error(result, timeout_s: float, *words: str):
    assert result["error"] == "DistBackendError", result
    message = result["message"]
    assert "all_reduce" in message or "broadcast" in message, message
    for w in words:
        assert w in message, message
    assert result["seconds"] < timeout_s + 10, result


def test_a_rank_that_dies_fails_the_others_with_an_error_naming_it():
    results = run_fault("dies", 20)
    assert_named_error(results[0], 20, "rank 1")
    # A dead peer is noticed at once, not after the timeout.
    assert results[0]["seconds"] < 10, results[0]


def test_a_rank_that_hangs_fails_the_others_within_the_timeout():
    results = run_fault("hangs", 5)
    assert_named_error(results[0], 5, "rank")
    assert results[0]["seconds"] >= 4, results[0]


def test_ranks_that_run_different_collectives_both_fail():
    results = run_fault("disagrees", 20)
    for rank in (0, 1):
        assert_named_error(results[rank], 20, "broadcast", "all_reduce")


def test_a_subgroup_works_after_the_ranks_outside_it_have_left():
    # new_group([2, 3]) is called by every rank; its ranks connect then, so they need no store
    # (hosted by rank 0) after ranks 0 and 1 have finished and exited.
    results = run_fault("late_subgroup", 20, ranks=4)
    for rank in range(4):
        assert results[rank]["error"] is None, results[rank]


def test_a_subgroup_meets_after_the_ranks_outside_it_have_left():
    # As a spawned job's non-members do: ranks 0 and 1 return from new_group([2, 3]) and exit
    # (rank 0 with the job's store) before ranks 2 and 3 have met; they meet at rank 2's own
    # store, whose address every rank learnt when the default group was made.
    results = run_fault("left_before_the_subgroup_met", 20, ranks=4)
    for rank in range(4):
        assert results[rank]["error"] is None, results[rank]


def test_a_root_outside_the_group_is_refused_and_the_group_lives_on():
    # scatter, broadcast and reduce from rank 2 of 2: a ValueError on every rank (as Gloo's
    # "invalid root rank"), where scatter had written past its buffers; then an all_reduce.
    results = run_fault("bad_root", 20)
    for rank in (0, 1):
        assert results[rank]["error"] is None, results[rank]


def test_dtensor_tensor_parallel_and_fsdp2_match_one_process():
    """DTensor redistributions and ops, parallelize_module (with and without sequence
    parallelism), fully_shard, and both on a 2 × 2 mesh, against the CPU in one process."""
    done = torchrun(SCRIPTS / "parallel.py", 4)
    assert done.returncode == 0, done.stderr[-6000:]
    results = last_json(done.stdout)
    assert len(results) == 6, results
    failed = {k: v for k, v in results.items() if v is not None}
    assert not failed, "\n\n".join(f"{k}: {v}" for k, v in failed.items())


@pytest.mark.parametrize("mode", ["all", "one"])
def test_ranks_get_their_cores_either_way_launchers_give_them(mode):
    """Every core visible and LOCAL_RANK picks, or one visible core per process (TorchNeuron's
    way): either way each rank runs on its own core and the collective adds up."""
    done = torchrun(SCRIPTS / "launch_modes.py", 2, mode)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = last_json(done.stdout)["ranks"]
    assert [r["sum"] for r in ranks] == [[3.0] * 4] * 2
    assert [r["core"] for r in ranks] == [0, 1]  # each rank on its own physical core
    if mode == "one":
        assert [(r["count"], r["device"]) for r in ranks] == [(1, 0), (1, 0)]
    else:
        assert [(r["count"] > 1, r["device"]) for r in ranks] == [(True, 0), (True, 1)]


def test_per_rank_traces_merge_into_one_timeline_with_collectives_linked(tmp_path):
    done = torchrun(
        SCRIPTS / "profiled_job.py",
        2,
        str(tmp_path),
        env={"NEURONSIM_MODE": "functional-and-timing"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = sorted(tmp_path.glob("trace.rank*.json"))
    assert [p.name for p in ranks] == ["trace.rank0.json", "trace.rank1.json"]
    merged = tmp_path / "job.json"
    tool = subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.merge_traces", "-o", str(merged), *map(str, ranks)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tool.returncode == 0, tool.stderr
    events = json.loads(merged.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {n.split(":")[0] for n in names.values()} == {"rank 0", "rank 1"}
    collectives = [e for e in events if e.get("ph") == "X" and "[group " in e.get("name", "")]
    by_link = {}
    for e in collectives:
        by_link.setdefault(e["name"].split("[")[1], []).append(e)
    assert len(by_link) == 3 and all(len(v) == 2 for v in by_link.values()), sorted(by_link)
    # One arrow per collective, from rank 0's slice to rank 1's.
    starts = [e for e in events if e.get("ph") == "s" and e.get("cat") == "collective"]
    ends = [e for e in events if e.get("ph") == "f" and e.get("cat") == "collective"]
    assert len(starts) == len(ends) == 3
    assert all(names[s["pid"]].startswith("rank 0") for s in starts)
    assert all(names[f["pid"]].startswith("rank 1") for f in ends)
    # torch.profiler saw each collective as one device event of the same name, with its time.
    for rank in (0, 1):
        profiled = json.loads((tmp_path / f"torch.rank{rank}.json").read_text())["traceEvents"]
        held = [e for e in profiled if e.get("cat") == "kernel" and "[group " in e["name"]]
        assert sorted(e["name"].split("[")[1] for e in held) == sorted(by_link), held
        assert all(e["args"]["kind"] == "collective" and e["dur"] > 0 for e in held)

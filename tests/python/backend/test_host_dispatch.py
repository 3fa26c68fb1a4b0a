"""The host in the simulated clock (docs/cost-model.md §6.1): each op costs the host its
dispatch; the host queues the op and goes on (TorchNeuron's default), so the device waits for
it only when its kernels are shorter than the dispatch; NEURON_LAUNCH_BLOCKING=1 makes the host
wait for each op, and NEURONSIM_HOST_DISPATCH=0 leaves the dispatch out. The clocks are chosen
when the device opens, so each case runs in a process of its own, in timing-only mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A chain of 50 small multiplications and 20 large matmuls: the simulated time per op of each,
# the host's dispatch of one op, and the profile summary's host figures of the chain.
_CHAIN = """
import json, os, tempfile, torch, neuronsim
x = torch.ones(64, 64, device="neuron")
y = torch.ones(2048, 2048, device="neuron", dtype=torch.bfloat16)
x = x * 1.0
torch.neuron.synchronize()
summary = os.path.join(tempfile.mkdtemp(), "summary.json")
start = neuronsim.simulated_time()
with neuronsim.profile(None, summary):
    for _ in range(50):
        x = x * 1.0
    torch.neuron.synchronize()
small = (neuronsim.simulated_time() - start) / 50
start = neuronsim.simulated_time()
for _ in range(20):
    z = y @ y
torch.neuron.synchronize()
large = (neuronsim.simulated_time() - start) / 20
core = next(iter(json.load(open(summary)).values()))
print(json.dumps({
    "small": small, "large": large,
    "dispatch": torch.neuron.get_device_properties().host_dispatch_s,
    "host_dispatch_time": core["host_dispatch_time"], "host_bound_time": core["host_bound_time"],
}))
"""


# Ten small ops queued (the device, paying each launch, falls behind the host), then perhaps a
# read of a value on the host, then one more op: the simulated time of it all.
_READ = """
import json, sys, torch, neuronsim
x = torch.ones(64, 64, device="neuron")
torch.neuron.synchronize()
start = neuronsim.simulated_time()
for _ in range(10):
    x = x * 1.0
if sys.argv[1] == "read":
    x[0, 0].item()
x = x * 1.0
torch.neuron.synchronize()
print(json.dumps({
    "took": neuronsim.simulated_time() - start,
    "dispatch": torch.neuron.get_device_properties().host_dispatch_s,
}))
"""


def _run(code: str, *args: str, mode: str = "timing-only", **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NEURONSIM_MODE": mode, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _chain(**env: str) -> dict:
    return _run(_CHAIN, **env)


@pytest.fixture(scope="module")
def runs() -> dict:
    return {
        "ahead": _chain(),
        "blocking": _chain(NEURON_LAUNCH_BLOCKING="1"),
        "no dispatch": _chain(NEURONSIM_HOST_DISPATCH="0"),
        "ahead, no launch": _chain(NEURONSIM_LAUNCH="0"),
        "no dispatch, no launch": _chain(NEURONSIM_LAUNCH="0", NEURONSIM_HOST_DISPATCH="0"),
    }


def test_every_op_costs_the_host_its_dispatch(runs):
    ahead = runs["ahead"]
    assert ahead["dispatch"] > 0
    assert runs["no dispatch"]["dispatch"] == 0
    # 50 multiplications dispatched: the host's row holds 50 dispatches.
    assert ahead["host_dispatch_time"] == pytest.approx(50 * ahead["dispatch"])
    assert runs["no dispatch"]["host_dispatch_time"] == 0


def test_a_host_that_runs_ahead_hides_its_dispatch_behind_longer_kernels(runs):
    # Each small kernel's launch and body outlast the dispatch: after the synchronize, the
    # device waits for the first op's dispatch only, and the others are hidden behind it.
    ahead, none = runs["ahead"], runs["no dispatch"]
    dispatch = ahead["dispatch"]
    assert ahead["host_bound_time"] == pytest.approx(dispatch)
    assert 50 * ahead["small"] == pytest.approx(50 * none["small"] + dispatch, rel=1e-4)
    assert 20 * ahead["large"] == pytest.approx(20 * none["large"] + dispatch, rel=1e-4)


def test_kernels_shorter_than_the_dispatch_leave_the_device_waiting_for_the_host(runs):
    # Without the runtime's launch a small kernel is shorter than its dispatch: the chain goes
    # at the host's pace, one dispatch per op, and the device's wait is counted.
    fast, none = runs["ahead, no launch"], runs["no dispatch, no launch"]
    assert none["small"] < fast["dispatch"]
    assert fast["small"] == pytest.approx(fast["dispatch"], rel=0.02)
    waited = 50 * (fast["dispatch"] - none["small"])
    assert fast["host_bound_time"] == pytest.approx(waited, rel=0.05)


def test_a_blocking_host_pays_every_dispatch_on_top_of_the_device(runs):
    blocking, none = runs["blocking"], runs["no dispatch"]
    assert blocking["small"] == pytest.approx(none["small"] + blocking["dispatch"], rel=1e-3)
    assert blocking["large"] == pytest.approx(none["large"] + blocking["dispatch"], rel=1e-3)


def test_reading_a_value_makes_the_host_wait_for_the_device():
    # The host, far ahead, waits at the read for the ten ops; the op after it is dispatched
    # only then, and the device, idle meanwhile, waits one dispatch more than without the read.
    mode = "functional-and-timing"  # the read needs values
    without, read = _run(_READ, "no", mode=mode), _run(_READ, "read", mode=mode)
    assert read["took"] - without["took"] == pytest.approx(read["dispatch"], rel=1e-3)

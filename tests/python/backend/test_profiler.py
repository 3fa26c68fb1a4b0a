"""torch.profiler on "neuron": with ProfilerActivity.PrivateUse1, every kernel the device
runs is a device event linked to the op that launched it, lasting its simulated time; the
ops' device totals add up to the simulated clock, less the device's wait for the host's first
dispatch. The device is timed only in the timing
modes, chosen when it opens, so the profiled step runs in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# A tiny training step under torch.profiler: what the profile says, and what the device
# counted meanwhile, as JSON.
_STEP = """
import json, sys, torch, neuronsim
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
model = model.to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 32).to("neuron"), torch.randn(16, 8).to("neuron")
compiled = torch.compile(model, backend="neuron")
with torch.no_grad():
    compiled(x)  # built before the profile: one program, one device event
torch.neuron.synchronize()
clock, kernels = neuronsim.simulated_time(), neuronsim.kernels_run()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    with torch.no_grad():
        compiled(x)
    torch.neuron.synchronize()
clock, kernels = neuronsim.simulated_time() - clock, neuronsim.kernels_run() - kernels
prof.export_chrome_trace(sys.argv[1])
averages = prof.key_averages()
ops = [e for e in averages if e.device_type == torch.autograd.DeviceType.CPU]
print(json.dumps({
    "clock_us": clock * 1e6,
    "dispatch_us": torch.neuron.get_device_properties().host_dispatch_s * 1e6,
    "kernels": kernels,
    "device_total_us": sum(e.self_device_time_total for e in ops),
    "ops_with_device_time": sorted(e.key for e in ops if e.self_device_time_total > 0),
    "table": averages.table(sort_by="self_device_time_total", row_limit=5),
}))
"""


def _timed(code: str, path) -> dict:
    """Runs `code` (given `path` as its argument) in a timed process; its last line's JSON."""
    env = {**os.environ, "NEURONSIM_MODE": "functional-and-timing"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _profiled_step(tmp_path) -> tuple[dict, list]:
    trace = tmp_path / "step.json"
    result = _timed(_STEP, trace)
    return result, json.loads(trace.read_text())["traceEvents"]


def test_a_profiled_training_step_has_one_device_event_per_kernel(tmp_path):
    result, events = _profiled_step(tmp_path)
    device = [e for e in events if e.get("cat") == "kernel"]
    kernels = [e for e in device if e["args"]["kind"] == "kernel"]
    assert len(kernels) == result["kernels"] > 10
    # The compiled forward is one program, so one event, named by its graph.
    graphs = [e for e in kernels if e["name"].startswith("Sequential.frame")]
    assert len(graphs) == 1, [e["name"] for e in kernels]
    # Each lasts its simulated time (the trace's microseconds, to the nanosecond).
    for e in device:
        assert abs(e["dur"] - e["args"]["simulated_us"]) < 1e-3, e
        assert e["args"]["device"] == "neuron:0"
    # Each is linked to the op that launched it: same correlation id, and a flow arrow.
    ops = {
        e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")
    }
    launched_by = {e["name"]: ops[e["args"]["External id"]]["name"] for e in device}
    assert launched_by["aten::addmm"] == "aten::addmm"
    assert launched_by["aten::gelu"] == "aten::gelu"
    assert launched_by[graphs[0]["name"]].startswith(("CompiledFunction", "Torch-Compiled Region"))
    arrows = {e["id"] for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert {e["args"]["External id"] for e in device} <= arrows
    # The device's row is named and its events do not overlap.
    row = device[0]["pid"]
    names = {e["args"].get("name") for e in events if e.get("ph") == "M" and e["pid"] == row}
    assert {"neuron:0", "NeuronCore 0"} <= names
    ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in device)
    assert all(a[1] <= b[0] + 1e-3 for a, b in zip(ends, ends[1:]))


def test_per_op_device_totals_add_up_to_the_device_clock(tmp_path):
    result, _ = _profiled_step(tmp_path)
    assert result["clock_us"] > 0
    # After the synchronize the device waits for the first op's dispatch; the host, running
    # ahead, hides every other dispatch behind the kernels (docs/cost-model.md §6.1).
    assert result["dispatch_us"] > 0
    idle = result["clock_us"] - result["device_total_us"]
    assert abs(idle - result["dispatch_us"]) <= 1e-3 * result["clock_us"]
    assert {"aten::addmm", "aten::mm"} & set(result["ops_with_device_time"])
    assert "Self NEURON" in result["table"]


_SUMMARY = """
import json, sys, torch, neuronsim
x = torch.randn(128, 256).to("neuron")
w = torch.randn(256, 512).to("neuron")
for _ in range(3):  # earlier work on the device clock, outside the profiled block
    (x @ w).relu()
torch.neuron.synchronize()
clock = neuronsim.simulated_time()
with neuronsim.profile(None, summary_json=sys.argv[1]):
    (x @ w).relu()
    torch.neuron.synchronize()
print(json.dumps({"clock_s": neuronsim.simulated_time() - clock}))
"""


def test_neuronsim_profile_writes_neuron_profiles_summary(tmp_path):
    path = tmp_path / "summary.json"
    clock = _timed(_SUMMARY, path)["clock_s"]
    summary = next(iter(json.loads(path.read_text()).values()))
    assert 0 < summary["total_time"] <= clock  # the block's time, not the clock's since start
    assert summary["matmul_instruction_count"] > 0 and summary["model_flops"] >= 2 * 128 * 256 * 512
    assert 0 < summary["tensor_engine_active_time_percent"] < 1

"""neuronsim.profile(): one Chrome/Perfetto trace of everything that ran in the block,
each kernel named by its aten op, on the device clock (timing mode)."""

from __future__ import annotations


def test_profile_writes_one_trace_with_a_kernel_per_aten_op(run_json, tmp_path):
    path = tmp_path / "step.trace.json"
    got = run_json(
        f"""
        import json, torch, neuronsim
        x = torch.randn(64, 64, device="neuron")
        w = torch.randn(64, 64, device="neuron")
        (x @ w).softmax(-1)  # before the block: not in the trace
        with neuronsim.profile({str(path)!r}):
            y = torch.relu(x @ w) + 1
            z = y.softmax(-1).sum()
        trace = json.load(open({str(path)!r}))
        slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        kernels = [e["name"] for e in slices if e["cat"] == "Execution"]
        host = [e["name"] for e in slices if e["cat"] == "Host"]
        print(json.dumps({{"kernels": kernels, "host": host, "events": len(slices)}}))
        """,
        env={"NEURONSIM_MODE": "functional-and-timing"},
    )
    kernels = got["kernels"]
    for op in ("aten::mm", "aten::relu", "aten::add", "aten::_softmax", "aten::sum"):
        assert op in kernels, f"{op} missing from {kernels}"
    assert kernels.count("aten::mm") == 1  # the matmul before the block is not recorded
    assert got["host"] == kernels  # the host dispatched each, in order
    assert got["events"] > len(kernels)  # the engines' instructions are there too

"""The names scripts written for TorchNeuron (AWS's native PyTorch backend) call on
torch_neuronx and torch.neuron: top-level aliases of the device module, op tracking, the
nested memory statistics and their summary, and torch_neuronx.utils."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import neuronsim
import torch_neuronx


@pytest.fixture(autouse=True, scope="module")
def _stop_tracking_after():
    # Op tracking costs every op of the process once started: the later tests go without it.
    yield
    neuronsim._C.stop_op_tracking()


def test_top_level_names_are_the_device_modules():
    for name in (
        "device_count",
        "current_device",
        "set_device",
        "synchronize",
        "current_stream",
        "default_stream",
        "stream",
        "Stream",
        "Event",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_stats",
        "memory_summary",
        "reset_peak_memory_stats",
        "empty_cache",
        "get_device_properties",
    ):
        assert getattr(torch_neuronx, name) is getattr(torch.neuron, name), name
    assert torch_neuronx.device_count() == torch.neuron.device_count() > 0
    with torch_neuronx.stream(torch_neuronx.Stream()):
        x = torch.ones(4, device="neuron") * 2
    torch_neuronx.synchronize()
    assert x.cpu().tolist() == [2.0] * 4


def test_op_tracking_lists_each_op_once_since_the_last_clear():
    torch_neuronx.clear_op_tracking()
    x = torch.arange(6.0, device="neuron")
    (x + 1).mul(3)
    (x + 2).mul(4)
    torch.fft.fft(x.cpu().to(torch.complex64).to("neuron"))  # no FFT kernel: the CPU's
    torch.neuron.synchronize()
    executed, fallen = torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops()
    assert {"aten::add", "aten::mul"} <= {op.split(".")[0] for op in executed}
    assert len(executed) == len(set(executed))
    assert any(op.startswith("aten::_fft") for op in fallen), fallen
    assert neuronsim.fallback_counts()  # the counts go on
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == [] and torch_neuronx.get_fallback_ops() == []
    x + 1
    assert torch_neuronx.get_executed_ops() == ["aten::add", "aten::add.Tensor"]


def _tracked(run):
    torch_neuronx.clear_op_tracking()
    run()
    torch.neuron.synchronize()
    return set(torch_neuronx.get_executed_ops()), set(torch_neuronx.get_fallback_ops())


def test_op_tracking_names_the_dispatched_op_kernel_or_not():
    x = torch.randn(4, 8, device="neuron")
    w = torch.randn(3, 8, device="neuron")
    # A composite and the ops it calls on the way down; with and without the overload.
    executed, _ = _tracked(lambda: torch.nn.functional.linear(x, w))
    assert {"aten::linear", "aten::mm"} <= executed
    executed, _ = _tracked(lambda: torch.where(x > 0, x, 0.0))
    assert {"aten::where", "aten::where.self", "aten::gt", "aten::gt.Scalar"} <= executed
    # Factories and ops with no kernel of their own: an allocation or a read is the device's.
    # A composite's steps are listed too, as the ops it became (full is empty and fill_; a
    # tensor moved to the device is empty_strided and copy_), as TorchNeuron lists them.
    executed, _ = _tracked(lambda: torch.full((3,), 2.0, device="neuron"))
    assert {"aten::full", "aten::empty", "aten::fill_", "aten::fill_.Scalar"} <= executed
    executed, _ = _tracked(lambda: torch.randn(2, 3).to("neuron"))
    assert {"aten::_to_copy", "aten::empty_strided", "aten::copy_"} <= executed
    for op, run in {
        "aten::clone": lambda: x.clone(),
        "aten::new_empty": lambda: x.new_empty(3),
        "aten::empty_strided": lambda: torch.empty_strided((2, 3), (3, 1), device="neuron"),
        "aten::_local_scalar_dense": lambda: x[0, 0].item(),
    }.items():
        assert op in _tracked(run)[0], op
    t = torch.empty(0, device="neuron")
    assert "aten::resize_" in _tracked(lambda: t.resize_(4))[0]
    # A backward op, dispatched by the autograd engine.
    xg = x.clone().requires_grad_()
    loss = torch.log_softmax(xg, 1).sum()
    assert "aten::_log_softmax_backward_data" in _tracked(loss.backward)[0]


def test_op_tracking_leaves_out_views_kernels_insides_and_fallbacks():
    x = torch.randn(4, 8, device="neuron")
    scalar = torch.randn(5, device="neuron")[0]
    # Views do nothing on the device, and neither does an op made only of them.
    assert _tracked(lambda: torch.atleast_2d(scalar)) == (set(), set())
    assert _tracked(lambda: x.unsqueeze(0).mT) == (set(), set())
    assert _tracked(lambda: x.contiguous()) == (set(), set())  # already contiguous
    # A transposed operand is the kernel's business, not a contiguous() of the caller's.
    executed, _ = _tracked(lambda: x.T + x.T)
    assert executed == {"aten::add", "aten::add.Tensor"}
    # An op that ran on the CPU is a fallback only, and so is the composite above it.
    c = x.to(torch.complex64)
    executed, fallen = _tracked(lambda: torch.fft.fft(c))
    assert "aten::_fft_c2c" in fallen
    assert not {"aten::_fft_c2c", "aten::fft_fft"} & executed
    # In inference mode too: a composite's steps are listed, a kernel's own insides are not
    # (batch norm's kernel takes its statistics with mean and rsqrt inside itself).
    with torch.inference_mode():
        executed, _ = _tracked(lambda: torch.nn.functional.linear(x, x[:3]))
        assert {"aten::linear", "aten::mm"} <= executed
        ones = torch.ones(3, device="neuron")
        images = torch.randn(2, 3, 4, device="neuron")
        executed, _ = _tracked(
            lambda: torch.nn.functional.batch_norm(images, None, None, ones, ones, training=True)
        )
    assert "aten::native_batch_norm" in executed
    assert not {"aten::mean", "aten::rsqrt", "aten::_to_copy"} & executed


def test_torch_neuronx_neuron_is_the_device_module():
    import importlib

    assert torch_neuronx.neuron is torch.neuron
    assert importlib.import_module("torch_neuronx.neuron") is torch.neuron
    from torch_neuronx.neuron import current_device

    assert current_device() == torch.neuron.current_device()


def test_memory_stats_in_torchneurons_nested_form_and_cudas_flat_one():
    torch.neuron.reset_peak_memory_stats()
    x = torch.ones(1024, 1024, device="neuron")
    stats = torch.neuron.memory_stats()
    nested = stats["allocated_bytes"]
    assert nested["current"] == stats["allocated_bytes.all.current"] >= x.numel() * 4
    assert nested["peak"] >= nested["current"]
    assert set(nested) == {"current", "peak", "allocated", "freed"}
    assert stats["reserved_bytes"]["current"] >= nested["current"]
    assert stats["allocation_requests"] >= 1
    del x
    assert torch.neuron.memory_stats()["num_tensor_frees"] >= 1
    summary = torch_neuronx.memory_summary()
    assert "Allocated" in summary and "Reserved" in summary and "Active" in summary
    assert "neuron:0" in summary


def test_utils_report_the_platform_and_the_logical_core_size(monkeypatch):
    assert torch_neuronx.utils.get_platform_target() == "trn2"  # trn2.3xlarge, the default
    assert torch_neuronx.utils.get_lnc_setting() == "1"
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    assert torch_neuronx.utils.get_lnc_setting() == "2"


def test_utils_report_the_launch_and_lowering_switches(monkeypatch):
    # The names TorchNeuron's shared test helper imports: NEURON_LAUNCH_BLOCKING (which the
    # simulated host honours) and TORCH_NEURONX_MLIR_ATEN_OPS (reported only).
    monkeypatch.delenv("NEURON_LAUNCH_BLOCKING", raising=False)
    monkeypatch.delenv("TORCH_NEURONX_MLIR_ATEN_OPS", raising=False)
    assert torch_neuronx.utils.is_sync_mode_enabled() is False
    assert torch_neuronx.utils.use_mlir_aten_ops() is False
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("TORCH_NEURONX_MLIR_ATEN_OPS", "1")
    assert torch_neuronx.utils.is_sync_mode_enabled() is True
    assert torch_neuronx.utils.use_mlir_aten_ops() is True
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "0")
    assert torch_neuronx.utils.is_sync_mode_enabled() is False


def test_memory_history_and_snapshots_in_cudas_form_read_by_pytorchs_tools(tmp_path):
    import pickle

    from torch.cuda import _memory_viz

    torch.neuron.memory._record_memory_history(max_entries=1000)
    try:
        a = torch.empty(300_000, device="neuron")  # 1.2 MB: the large pool
        b = torch.empty(100, device="neuron")
        del b
        snapshot = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    blocks = {s["address"]: s["blocks"][0] for s in snapshot["segments"]}
    live = [blk for blk in blocks.values() if blk["state"] == "active_allocated"]
    assert any(blk["requested_size"] == a.numel() * 4 for blk in live)
    actions = [e["action"] for e in snapshot["device_traces"][0]]
    assert actions.count("alloc") >= 2 and "free_completed" in actions
    freed = [e for e in snapshot["device_traces"][0] if e["action"] == "free_completed"]
    assert blocks[freed[-1]["addr"]]["state"] == "inactive"  # cached, still reserved
    # PyTorch's own tools read it: the text summary and the interactive plots.
    assert "Summary of segments" in _memory_viz.segsum(snapshot)
    assert "<html" in _memory_viz.trace_plot(snapshot).lower()
    path = tmp_path / "snapshot.pickle"
    torch.neuron.memory._dump_snapshot(str(path))
    assert pickle.loads(path.read_bytes())["segments"]
    assert torch.neuron.memory_snapshot() == torch.neuron.memory._snapshot()["segments"]
    del a


def test_op_tracking_starts_when_asked_for_or_from_the_environment():
    code = (
        "import torch, torch_neuronx, neuronsim\n"
        "x = torch.ones(3, device='neuron') + 1\n"
        "before = neuronsim._C.op_tracking()\n"
        "torch_neuronx.clear_op_tracking()\n"
        "x * 2\n"
        "print(before, neuronsim._C.op_tracking(), torch_neuronx.get_executed_ops())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.split(" ", 2)[:2] == ["False", "True"], run.stdout + run.stderr
    assert "'aten::mul'" in run.stdout
    env = dict(os.environ, NEURONSIM_OP_TRACKING="1")
    code = "import torch_neuronx, neuronsim; print(neuronsim._C.op_tracking())"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.stdout.strip() == "True", run.stdout + run.stderr

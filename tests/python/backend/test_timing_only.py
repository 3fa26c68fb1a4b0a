"""Timing-only mode (NEURONSIM_MODE=timing-only): kernels run on the device clock without
arithmetic. The same kernels take the same simulated time as with values; whatever needs
device values on the host fails, naming itself and the mode. The mode is chosen when the
device opens, so each case runs in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A real-size LM head, a long-row log_softmax and an embedding lookup over Qwen3's
# vocabulary (hidden cut to 256): the simulated time of each, as JSON.
_KERNELS = """
import json, torch, torch.nn.functional as F, neuronsim
g = torch.Generator().manual_seed(0)
x = torch.randn(128, 256, generator=g).to(torch.bfloat16).to("neuron")
w = torch.randn(151_936, 256, generator=g).to(torch.bfloat16).to("neuron")
ids = torch.randint(0, 151_936, (1, 128), generator=g).to("neuron")
times = {}
for name, call in {
    "lm_head": lambda: F.linear(x, w),
    "log_softmax": lambda: F.linear(x, w).float().log_softmax(-1),
    "embedding": lambda: F.embedding(ids, w),
}.items():
    call()
    torch.neuron.synchronize()
    start = neuronsim.simulated_time()
    call()
    torch.neuron.synchronize()
    times[name] = neuronsim.simulated_time() - start
print(json.dumps(times))
"""


def _run(code: str, mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NEURONSIM_MODE": mode}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _in_both_modes(code: str) -> dict:
    """The JSON the code prints last, with values and in timing-only mode, by mode."""
    timed = {}
    for mode in ("functional-and-timing", "timing-only"):
        done = _run(code, mode)
        assert done.returncode == 0, done.stderr[-3000:]
        timed[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return timed


def test_kernels_take_the_same_simulated_time_as_with_values():
    timed = _in_both_modes(_KERNELS)
    assert timed["timing-only"] == timed["functional-and-timing"]
    assert all(t > 0 for t in timed["timing-only"].values())


@pytest.mark.parametrize(
    ("read", "names"),
    [
        ("t.sum().item()", "aten::_local_scalar_dense (Tensor.item())"),
        ("t.cpu()", "aten::copy_ of a neuron tensor to cpu"),
        ("print(t)", "aten::masked_select"),  # printing finds the values to format
        ("torch.nonzero(t > 0)", "aten::nonzero"),
    ],
)
def test_reading_values_on_the_host_names_the_op_and_the_mode(read, names):
    done = _run(
        f"""
        import torch, neuronsim
        assert neuronsim.mode() == "timing-only", neuronsim.mode()
        t = torch.randn(4, 8).to("neuron")
        u = (t * 2).softmax(-1)  # kernels run, on the clock
        {read}
        """,
        "timing-only",
    )
    assert done.returncode != 0, done.stdout
    said = done.stderr
    assert names in said and "NEURONSIM_MODE=timing-only" in said, said[-2000:]


def test_index_checks_that_need_values_are_skipped():
    # Indices are device values: their range cannot be checked, and the gather still runs.
    done = _run(
        """
        import torch, neuronsim
        table = torch.randn(1000, 16).to("neuron")
        ids = torch.tensor([3, 999, 0]).to("neuron")
        out = table.index_select(0, ids)
        loss = torch.nn.functional.cross_entropy(torch.randn(3, 1000).to("neuron"), ids)
        torch.neuron.synchronize()
        assert out.shape == (3, 16) and loss.shape == ()
        assert neuronsim.simulated_time() > 0
        """,
        "timing-only",
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_cpu_fallback_that_refuses_the_unspecified_values_names_the_op_and_the_mode():
    # An op without a neuron kernel runs on the CPU over the device's bytes, which this mode
    # leaves unspecified; when the CPU kernel refuses them, the error says why.
    done = _run(
        """
        import torch, neuronsim
        y = torch.zeros(5, dtype=torch.int64).to("neuron")  # integer sums: no kernel
        at = torch.tensor([7]).to("neuron")
        y.index_put_((at,), torch.ones(1, dtype=torch.int64).to("neuron"), accumulate=True)
        """,
        "timing-only",
    )
    assert done.returncode != 0, done.stdout
    said = done.stderr
    assert "aten::_index_put_impl_, which runs on the CPU" in said, said[-2000:]
    assert "NEURONSIM_MODE=timing-only" in said and "out of bounds" in said, said[-2000:]


def test_a_mixture_of_experts_routes_without_values():
    # The routing is device values: the grouped product takes the rows as evenly spread
    # over the experts; sort, histc and floor division skip their exactness checks.
    done = _run(
        """
        import torch, neuronsim
        neuronsim.set_strict(True)
        ids = torch.randint(0, 8, (64, 2)).to("neuron").reshape(-1)
        order, perm = torch.sort(ids, stable=True)
        counts = torch.histc(order.int(), bins=8, min=0, max=7)
        ends = torch.cumsum(counts, 0, dtype=torch.int32)
        x = torch.randn(64, 32).bfloat16().to("neuron")[perm // 2]
        w = torch.randn(8, 32, 16).bfloat16().to("neuron")
        start = neuronsim.simulated_time()
        out = torch.nn.functional.grouped_mm(x, w, offs=ends)
        torch.neuron.synchronize()
        assert out.shape == (128, 16) and neuronsim.simulated_time() > start
        assert neuronsim.fallback_counts() == {}
        """,
        "timing-only",
    )
    assert done.returncode == 0, done.stderr[-3000:]


# A compiled loss: cross_entropy's graph holds an integer constant on the device, whose
# values the compiler's bound inference cannot read in timing-only mode.
_COMPILED_LOSS = """
import json, torch, torch.nn.functional as F, neuronsim
g = torch.Generator().manual_seed(0)
x = torch.randn(64, 512, generator=g).to("neuron")
t = torch.randint(0, 512, (64,), generator=g).to("neuron")
loss = torch.compile(lambda x, t: F.cross_entropy(x, t), backend="neuron")
loss(x, t)
torch.neuron.synchronize()
start = neuronsim.simulated_time()
loss(x, t)
torch.neuron.synchronize()
print(json.dumps(neuronsim.simulated_time() - start))
"""


def test_a_compiled_loss_runs_in_timing_only_mode_in_the_same_time():
    timed = _in_both_modes(_COMPILED_LOSS)
    assert timed["timing-only"] == timed["functional-and-timing"] > 0


# A training step of the nanochat-style GPT (value embeddings, multi-query attention,
# ReLU-squared MLP, cross-entropy), cut to one narrow layer, compiled: the step's simulated
# time and the CPU fallbacks, as JSON.
_COMPILED_GPT_STEP = """
import dataclasses, json, torch, neuronsim
from neuronsim.tools import nanochat
torch.manual_seed(0)
c = dataclasses.replace(nanochat.Config(), layers=1, width=128, vocab=1024, sequence=128)
model = nanochat.GPT(c).to(torch.bfloat16).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = torch.compile(model, backend="neuron")
ids = torch.randint(0, c.vocab, (2, 128)).to("neuron")
times = []
for _ in range(2):
    start = neuronsim.simulated_time()
    step(ids, ids).backward()
    opt.step()
    opt.zero_grad()
    torch.neuron.synchronize()
    times.append(neuronsim.simulated_time() - start)
print(json.dumps({"step": times[-1], "fallbacks": neuronsim.fallback_counts()}))
"""


def test_a_compiled_gpt_training_step_in_timing_only_mode_takes_the_time_it_takes_with_values():
    timed = _in_both_modes(_COMPILED_GPT_STEP)
    assert timed["timing-only"] == timed["functional-and-timing"]
    assert timed["timing-only"]["step"] > 0
    assert timed["timing-only"]["fallbacks"] == {}

"""The projection command (python -m neuronsim.tools.project): one process standing for a
job's symmetric ranks takes the time every rank run as its own process takes; a job past a
core's HBM is reported as not fitting, with the runtime's error; the report has the figures a
user asks for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from neuronsim.tools import project

# A Qwen3 of two narrow layers, as a config.json.
TINY_QWEN3 = {
    "model_type": "qwen3",
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 4096,
    "tie_word_embeddings": False,
}


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps(TINY_QWEN3))
    return str(path)


def test_symmetric_ranks_take_the_time_of_every_rank_run(tiny_config, tmp_path):
    # TP 2 x FSDP 2: one process standing for four against four processes under torchrun.
    job = project.Job(model=tiny_config, tp=2, fsdp=2, seq=128)
    symmetric = project.project(job)
    trace = tmp_path / "job.json"
    every = project.project(project.Job(**{**vars(job), "every_rank": True, "trace": str(trace)}))
    # Every rank's trace of the micro-batch, merged into the job's: four ranks, collectives
    # linked.
    merged = json.loads((tmp_path / "job.first-micro-batch.json").read_text())
    assert merged["otherData"]["ranks"] == [0, 1, 2, 3]
    assert merged["otherData"]["collectives_linked"] > 0
    assert symmetric["step_s"] > 0
    assert symmetric["step_s"] == pytest.approx(every["step_s"], rel=1e-9)
    assert symmetric["collectives"]["collectives"] == every["collectives"]["collectives"] > 0
    assert symmetric["collective_s"] == pytest.approx(every["collective_s"], rel=1e-9)
    assert symmetric["collective_s"] > 0
    assert symmetric["peak_hbm_bytes"] == every["peak_hbm_bytes"] > 0
    assert symmetric["fallbacks"] == {}
    text = project.report(symmetric)
    for needed in ("tokens/s", "MFU", "busy ms", "collectives", "peak HBM", "fits", "host"):
        assert needed in text, text
    rows = {metric: value for _, metric, value in project.gate_rows(symmetric, "tiny")}
    assert rows["simulated_us_per_step"] == pytest.approx(symmetric["step_s"] * 1e6)
    assert rows["fits"] == 1.0 and rows["fallbacks"] == 0.0
    assert 0 < rows["mfu"] < 1 and rows["tokens_per_s"] > 0


def test_micro_batches_counted_rather_than_run_give_the_update_run_in_full(tiny_config):
    job = project.Job(model=tiny_config, fsdp=2, seq=64, accum=3)
    counted = project.project(job)
    full = project.project(project.Job(**{**vars(job), "full_accum": True}))
    # Equal but for what one micro-batch leaves running into the next (the host's lead, a
    # reduce-scatter beside the next forward), which the counted one repeats: 0.01 % here.
    assert counted["step_s"] == pytest.approx(full["step_s"], rel=1e-3)
    assert counted["phases_s"]["micro-batch"] * 2 < counted["step_s"]


def test_the_runtimes_launches_are_a_row_of_the_breakdown_that_a_switch_leaves_out(tiny_config):
    # Without the host's dispatch, the launches are all the device's overhead: leaving them
    # out shortens the step by exactly their sum.
    job = project.Job(model=tiny_config, seq=64, steps=1, host_dispatch=False)
    launched = project.project(job)
    bare = project.project(project.Job(**{**vars(job), "launch": False}))
    assert launched["launch_s"] > 0 and bare["launch_s"] == 0
    assert bare["step_s"] == pytest.approx(launched["step_s"] - launched["launch_s"], rel=1e-6)
    assert launched["host_dispatch_s"] == 0 and launched["host_bound_s"] == 0
    assert "runtime launches" in project.report(launched)
    # A rank of two physical cores (LNC=2) splits its kernels over both: the report says how.
    assert launched["physical_cores_per_rank"] == 1 and "(LNC)" not in project.report(launched)
    assert "a rank is 2 physical cores (LNC)" in project.report(
        {**launched, "physical_cores_per_rank": 2}
    )


def test_the_hosts_dispatch_is_a_row_of_the_breakdown_hidden_unless_kernels_are_short(tiny_config):
    job = project.Job(model=tiny_config, seq=64, steps=1)
    dispatched = project.project(job)
    none = project.project(project.Job(**{**vars(job), "host_dispatch": False}))
    assert dispatched["host_dispatch_s"] > 0
    # The host runs ahead: behind the launches, the device waits for the first op's dispatch.
    assert dispatched["host_bound_s"] < 0.01 * dispatched["step_s"]
    assert dispatched["step_s"] - none["step_s"] == pytest.approx(dispatched["host_bound_s"])
    # A host that waits for each op pays every dispatch.
    blocking = project.project(project.Job(**{**vars(job), "blocking": True}))
    assert blocking["step_s"] - none["step_s"] == pytest.approx(blocking["host_dispatch_s"])
    # Without launches the small kernels are shorter than their dispatch: the device waits.
    bare = project.project(project.Job(**{**vars(job), "launch": False}))
    assert bare["host_bound_s"] > 0.1 * bare["step_s"]
    assert "host dispatch" in project.report(bare)


def test_a_job_past_the_hbm_of_a_core_does_not_fit():
    # Qwen3-8B's 8.2 B parameters in BF16 on one core of 12 GiB (two cores per 24 GiB stack).
    result = project.project(project.Job(model="Qwen3-8B", seq=128, steps=1))
    assert "NRT_RESOURCE" in result["out_of_memory"]
    assert "HBM stack" in result["out_of_memory"]
    assert "does not fit" in project.report(result)


def test_a_generation_reports_time_to_first_token_and_tokens_per_second(tiny_config):
    result = project.project(
        project.Job(model=tiny_config, tp=2, task="generate", seq=64, new_tokens=4)
    )
    assert 0 < result["prefill_s"] < result["step_s"]
    assert result["tokens_per_s"] > 0
    assert "time to first token" in project.report(result)
    # The prompt in two chunks, as the seed's generate_tp.py prefills: two forwards, so two
    # rounds of the TP all-reduces, and the same decode.
    chunked = project.project(project.Job(**{**result["job"], "prefill_chunk": 32}))
    assert chunked["collectives"]["collectives"] > result["collectives"]["collectives"]
    assert "prefill in chunks of 32" in project.report(chunked)


# One process standing for 4 ranks: a collective of neuron tensors is timed for the group; one
# of CPU tensors, whose values would need the peers, is refused by name.
_SYMMETRIC = """
import torch, torch.distributed as dist, neuronsim
dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=4)
before = neuronsim.simulated_time()
dist.all_reduce(torch.ones(1024, device="neuron"))
assert neuronsim.simulated_time() > before
try:
    dist.all_reduce(torch.ones(1))
except ValueError as e:
    print("refused:", e)
"""


def test_symmetric_ranks_refuse_a_collective_of_cpu_tensors():
    env = {**os.environ, "NEURONSIM_MODE": "timing-only", "NEURONSIM_SYMMETRIC_RANKS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SYMMETRIC], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused:" in done.stdout and "cpu tensors" in done.stdout, done.stdout


# A collective beside the kernels: an all-gather into 128 MiB over 8 ranks, then a matmul that
# does not touch its tensors, or a sum that reads its output; the simulated time of each.
_OVERLAP = """
import json, torch, torch.distributed as dist, neuronsim
dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=8)
shard = torch.ones(4 * 2**20, device="neuron")
gathered = torch.empty(8 * shard.numel(), device="neuron")
a = torch.ones(2048, 2048, device="neuron", dtype=torch.bfloat16)
a @ a
torch.neuron.synchronize()

def timed(call):
    torch.neuron.synchronize()
    start = neuronsim.simulated_time()
    call()
    torch.neuron.synchronize()
    return neuronsim.simulated_time() - start

alone = {
    "gather": timed(lambda: dist.all_gather_into_tensor(gathered, shard)),
    "matmul": timed(lambda: a @ a),
}
both = timed(lambda: (dist.all_gather_into_tensor(gathered, shard), a @ a))
after = timed(lambda: (dist.all_gather_into_tensor(gathered, shard), gathered.sum()))
print(json.dumps({"alone": alone, "both": both, "after": after,
                  "sum": timed(lambda: gathered.sum())}))
"""


def test_a_collective_runs_beside_the_kernels_that_do_not_touch_its_tensors():
    env = {**os.environ, "NEURONSIM_MODE": "timing-only", "NEURONSIM_SYMMETRIC_RANKS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _OVERLAP], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    t = json.loads(done.stdout.strip().splitlines()[-1])
    gather, matmul = t["alone"]["gather"], t["alone"]["matmul"]
    assert min(gather, matmul) > 0.2 * max(gather, matmul)  # both matter
    # The matmul hides behind the all-gather (or the other way): the pair takes the longer.
    assert t["both"] == pytest.approx(max(gather, matmul), rel=0.02)
    # A kernel that reads the gathered tensor waits for it.
    assert t["after"] == pytest.approx(gather + t["sum"], rel=0.02)


def test_model_flops_count_the_experts_a_token_is_routed_to(tmp_path):
    # A mixture of 8 experts, 2 per token: the experts' weights count a quarter; the dense
    # weights (attention, router, head) in full.
    config = {
        **TINY_QWEN3,
        "model_type": "qwen3_moe",
        "architectures": ["Qwen3MoeForCausalLM"],
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "decoder_sparse_step": 1,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model, flops_per_token, _, _ = project._build(project.Job(model=str(path), seq=64))
    routed = [p for n, p in model.named_parameters() if "experts" in n.split(".")]
    linears = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    expert_weights = sum(p.numel() for p in routed)
    dense = sum(w.numel() for w in linears if all(w is not p for p in routed))
    assert expert_weights > 0
    attention = project._attention_flops_per_token(2, 4, 64, 64)
    assert flops_per_token == pytest.approx(6 * (dense + expert_weights * 2 / 8) + attention)

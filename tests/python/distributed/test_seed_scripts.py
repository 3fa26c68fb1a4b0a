"""The Trainium launch scripts (../shared/seed-scripts/), unedited, under torchrun on the
simulator, with the offline Hugging Face cache the project's hub tool writes:
- generate_tp.py on 2 ranks (tensor parallel, bf16, static cache, compiled with the neuron
  backend) prints the text the same model generates greedily in one CPU process;
- sft_neuron_example.py on 4 ranks (TP_SIZE=2 × FSDP_SIZE=2), eager and with
  --torch_compile true: the loss falls, the run ends, and the checkpoint save_model wrote
  loads on the CPU with weights equal to the trained shards gathered.
The SFT runs are observed through tests/python/distributed/observe (PYTHONPATH), which
records per-step measurements and the gathered weights without touching the script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neuronsim.tools import bench
from test_distributed import SCRIPTS, child_environment, torchrun

# The scripts live beside the checkout, in ../shared/seed-scripts.
SEED_SCRIPTS = Path(__file__).resolve().parents[4] / "shared" / "seed-scripts"


# The measurements of the runs below (simulated, so the same on every machine) are gated
# like the other benchmarks; NEURONSIM_BENCH_UPDATE=1 rewrites the file instead.
GATE = Path(__file__).resolve().parents[3] / "bench" / "expected_seed_scripts.csv"
GATE_HEADER = """\
# Expected simulated figures of the seed scripts on trn2.3xlarge under torchrun
# (tests/python/distributed/test_seed_scripts.py, which checks them): sft_neuron_example.py
# with TP_SIZE=2 FSDP_SIZE=2 on 4 ranks (per steady training step, rank 0: simulated time,
# time in collectives and their share; peak device memory of any rank) and generate_tp.py on
# 2 ranks (new tokens and simulated tokens per second). Margins as in
# bench/expected_results.csv; NEURONSIM_BENCH_UPDATE=1 pytest
# tests/python/distributed/test_seed_scripts.py rewrites the file.
# Rule: a commit that changes an expected value gives the reason for it in the same commit.
benchmark,metric,value,margin
"""


def gate(rows: list[tuple[str, str, float]]) -> None:
    """Checks `rows` against their lines of the gate file (rows of other tests ignored), and
    appends them to $NEURONSIM_BENCH_OUT when set (bench/suite.json records them so)."""
    if out := os.environ.get("NEURONSIM_BENCH_OUT"):
        fresh = not os.path.exists(out) or os.path.getsize(out) == 0
        with open(out, "a") as f:
            f.write("benchmark,metric,value\n" if fresh else "")
            f.writelines(f"{b},{m},{v!r}\n" for b, m, v in rows)
    if os.environ.get("NEURONSIM_BENCH_UPDATE") == "1":
        kept = [(b, m, v) for b, m, v, _ in bench._read_expected(GATE)] if GATE.exists() else []
        new = {(b, m) for b, m, _ in rows}
        bench.update(str(GATE), [r for r in kept if (r[0], r[1]) not in new] + rows, GATE_HEADER)
        return
    names = {b for b, _, _ in rows}
    expected = [r for r in bench._read_expected(GATE) if r[0] in names]
    failures = [f for f in bench.check(str(GATE), rows) if f.split()[1] in names]
    assert not failures, "\n".join(failures)
    assert expected, f"no rows for {sorted(names)} in {GATE}"


def hub_environment(home: Path) -> dict[str, str]:
    return {
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_DEACTIVATE_ASYNC_LOAD": "1",
    }


@pytest.fixture(scope="module")
def offline_hub(offline_hub_cache):
    assert SEED_SCRIPTS.is_dir(), f"the seed scripts are not at {SEED_SCRIPTS}"
    return hub_environment(offline_hub_cache[0])


def observed_environment(offline_hub, observed: Path, **extra: str) -> dict[str, str]:
    """The offline hub, the observe hook on PYTHONPATH recording into `observed`."""
    env = dict(offline_hub, NEURONSIM_OBSERVE=str(observed), **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SCRIPTS / "observe"), str(SCRIPTS), os.environ.get("PYTHONPATH", "")]
    )
    return env


def test_generate_tp_prints_what_one_cpu_process_generates(offline_hub, tmp_path):
    observed = tmp_path / "observed"
    env = observed_environment(offline_hub, observed, NEURONSIM_MODE="functional-and-timing")
    done = torchrun(SEED_SCRIPTS / "generate_tp.py", 2, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-6000:]
    reference = subprocess.run(
        [sys.executable, str(SCRIPTS / "generate_reference.py"), "Qwen/Qwen3.8-27B", "1024", "512"],
        env=child_environment(**offline_hub),
        capture_output=True,
        text=True,
        check=False,
    )
    assert reference.returncode == 0, reference.stderr[-4000:]
    want = json.loads(reference.stdout.strip().splitlines()[-1])
    assert len(want["tokens"]) >= 8, want  # a real continuation, not an immediate stop
    assert done.stdout.strip() == want["text"].strip()
    # Both ranks generated the reference's tokens; the simulated rate is gated.
    calls = [json.loads((observed / f"generate_rank{r}.json").read_text()) for r in range(2)]
    assert all(len(c) == 1 and c[0]["new_tokens"] == len(want["tokens"]) for c in calls), calls
    call = calls[0][0]
    assert 0 < call["collectives_simulated_s"] < call["simulated_s"], call
    name = "trn2/seed/generate_qwen3_tiny_tp2"
    gate(
        [
            (name, "new_tokens", float(call["new_tokens"])),
            (name, "simulated_tokens_per_s", round(call["new_tokens"] / call["simulated_s"], 6)),
            (
                name,
                "collectives_share",
                round(call["collectives_simulated_s"] / call["simulated_s"], 9),
            ),
        ]
    )


SFT_ARGS = [
    "--model_name_or_path", "Qwen/Qwen3-8B",
    "--dataset_name", "HuggingFaceH4/ultrachat_200k",
    "--dataset_train_split", "train_sft",
    "--dtype", "bfloat16",
    "--max_length", "64",
    "--packing", "true",
    "--packing_strategy", "wrapped",
    "--learning_rate", "2e-3",
    "--warmup_steps", "0.03",
    "--num_train_epochs", "1",
    "--max_steps", "6",
    "--logging_steps", "1",
    "--per_device_train_batch_size", "2",
    "--gradient_accumulation_steps", "1",
    "--save_only_model", "true",
]  # fmt: skip


def run_sft(offline_hub, tmp_path: Path, *extra: str, mode: str = "functional-only"):
    out, observed = tmp_path / "out", tmp_path / "observed"
    env = observed_environment(offline_hub, observed, TP_SIZE="2", FSDP_SIZE="2")
    env["NEURONSIM_MODE"] = mode
    args = [*SFT_ARGS, "--output_dir", str(out), *extra]
    done = torchrun(SEED_SCRIPTS / "sft_neuron_example.py", 4, *args, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-8000:]
    ranks = [json.loads((observed / f"rank{r}.json").read_text()) for r in range(4)]
    return out, observed, ranks


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch_compile"])
def test_sft_on_a_tp_by_fsdp_grid_trains_and_saves_a_standard_checkpoint(
    offline_hub, tmp_path, compiled
):
    from transformers import AutoModelForCausalLM

    extra = ["--torch_compile", "true"] if compiled else []
    # The eager run is timed (the tiny model costs little more) and gated.
    mode = "functional-only" if compiled else "functional-and-timing"
    out, observed, ranks = run_sft(offline_hub, tmp_path, *extra, mode=mode)
    losses = ranks[0]["losses"]
    assert len(losses) == 6, losses
    assert losses[-1] < losses[0] - 0.1, losses
    assert all(len(r["steps"]) == 6 for r in ranks)
    assert all(r["peak_memory_bytes"] > 0 for r in ranks)
    # The checkpoint is the standard layout and holds the trained weights, whole.
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16)
    saved = model.state_dict()
    gathered = torch.load(observed / "gathered.pt")
    assert set(gathered) == set(saved), set(gathered) ^ set(saved)
    for name, value in gathered.items():
        assert torch.equal(saved[name], value.to(saved[name].dtype)), name
    # and they moved from the initial ones
    initial = AutoModelForCausalLM.from_pretrained(
        "Qwen/Qwen3-8B",
        dtype=torch.bfloat16,
        cache_dir=offline_hub["HF_HUB_CACHE"],
        local_files_only=True,
    )
    name = "model.layers.0.mlp.down_proj.weight"
    assert not torch.equal(initial.state_dict()[name], saved[name])
    if not compiled:
        gate(sft_measurements(ranks))


def sft_measurements(ranks: list[dict]) -> list[tuple[str, str, float]]:
    """Per steady step (the first includes one-time work) of rank 0, and peak memory."""
    steady = ranks[0]["steps"][1:]
    simulated = sum(s["simulated_s"] for s in steady) / len(steady)
    collectives = sum(s["collectives_simulated_s"] for s in steady) / len(steady)
    assert simulated > 0 and 0 < collectives < simulated, ranks[0]["steps"]
    name = "trn2/seed/sft_qwen3_tiny_tp2_fsdp2"
    return [
        (name, "simulated_us_per_step", round(simulated * 1e6, 6)),
        (name, "collectives_us_per_step", round(collectives * 1e6, 6)),
        (name, "collectives_share", round(collectives / simulated, 9)),
        (name, "peak_memory_bytes", float(max(r["peak_memory_bytes"] for r in ranks))),
    ]


def test_a_diffusers_pipeline_sharded_by_tensor_parallelism_draws_the_cpu_image(
    offline_hub, tmp_path
):
    script = SCRIPTS / "diffusers_tp.py"
    done = torchrun(script, 2, "neuronsim/tiny-flux", str(tmp_path / "tp.pt"), env=offline_hub)
    assert done.returncode == 0, done.stderr[-6000:]
    reference = subprocess.run(
        [sys.executable, str(script), "neuronsim/tiny-flux", str(tmp_path / "cpu.pt")],
        env=child_environment(**offline_hub),
        capture_output=True,
        text=True,
        check=False,
    )
    assert reference.returncode == 0, reference.stderr[-4000:]
    tp, cpu = torch.load(tmp_path / "tp.pt"), torch.load(tmp_path / "cpu.pt")
    assert tp["sharded"] > 20, tp["sharded"]  # Diffusers' plan shards the blocks' linears
    assert tp["collectives"] > 0
    assert tp["image"].shape == cpu["image"].shape == (1, 3, 32, 32)
    assert cpu["image"].std() > 0.05  # an image, not a flat field
    torch.testing.assert_close(tp["image"], cpu["image"], atol=1e-4, rtol=0)

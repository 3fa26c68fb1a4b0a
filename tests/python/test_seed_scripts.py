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

from test_distributed import SCRIPTS, child_environment

# The scripts live beside the checkout, in ../shared/seed-scripts.
SEED_SCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "seed-scripts"


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
def offline_hub(tmp_path_factory):
    assert SEED_SCRIPTS.is_dir(), f"the seed scripts are not at {SEED_SCRIPTS}"
    home = tmp_path_factory.mktemp("seed_hf_home")
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.hub", "--cache-dir", str(home)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return hub_environment(home)


def torchrun(script: Path, nproc: int, args=(), env=None, cwd=None, timeout=900):
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


def run_sft(offline_hub, tmp_path: Path, *extra: str):
    out, observed = tmp_path / "out", tmp_path / "observed"
    env = dict(offline_hub, TP_SIZE="2", FSDP_SIZE="2", NEURONSIM_OBSERVE=str(observed))
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SCRIPTS / "observe"), str(SCRIPTS), os.environ.get("PYTHONPATH", "")]
    )
    args = [*SFT_ARGS, "--output_dir", str(out), *extra]
    done = torchrun(SEED_SCRIPTS / "sft_neuron_example.py", 4, args, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-8000:]
    ranks = [json.loads((observed / f"rank{r}.json").read_text()) for r in range(4)]
    return out, observed, ranks


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch_compile"])
def test_sft_on_a_tp_by_fsdp_grid_trains_and_saves_a_standard_checkpoint(
    offline_hub, tmp_path, compiled
):
    from transformers import AutoModelForCausalLM

    extra = ["--torch_compile", "true"] if compiled else []
    out, observed, ranks = run_sft(offline_hub, tmp_path, *extra)
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


def test_a_diffusers_pipeline_sharded_by_tensor_parallelism_draws_the_cpu_image(
    offline_hub, tmp_path
):
    script = SCRIPTS / "diffusers_tp.py"
    done = torchrun(script, 2, ["neuronsim/tiny-flux", str(tmp_path / "tp.pt")], env=offline_hub)
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

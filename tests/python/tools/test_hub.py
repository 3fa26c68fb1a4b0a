"""python -m neuronsim.tools.hub: what it writes loads offline, in fresh processes that have
nothing but its cache (HF_HOME set to it, HF_HUB_OFFLINE=1): both Qwen3 ids' tokenizers
and models, a TRL SFT step on the chat dataset, the dataset itself and the Flux
pipeline. The model generate_tp.py generates with makes its greedy choices by margins
that bfloat16 rounding cannot overturn. Running it again changes no byte, and --force
writes the same bytes.

The readers start together once the cache is written (each test then takes its
reader's result), so that their imports overlap on a small machine."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

QWEN_IDS = ("Qwen/Qwen3-8B", "Qwen/Qwen3.8-27B")
ULTRACHAT = "HuggingFaceH4/ultrachat_200k"
FLUX = "neuronsim/tiny-flux"
ALL_IDS = (*QWEN_IDS, ULTRACHAT, FLUX)
# The model and prompt of ../shared/seed-scripts/generate_tp.py.
GENERATE_TP_ID, GENERATE_TP_PROMPT = "Qwen/Qwen3.8-27B", "The future of AI is"

TEXT = "The teacher reads a quiet song near the sea, 42 times!"
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What do you know about trains?"},
    {"role": "assistant", "content": "The chip counts the numbers."},
    {"role": "user", "content": "Why is that?"},
]
CHATML = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nWhat do you know about trains?<|im_end|>\n"
    "<|im_start|>assistant\nThe chip counts the numbers.<|im_end|>\n"
    "<|im_start|>user\nWhy is that?<|im_end|>\n"
    "<|im_start|>assistant\n"
)

TOKENIZERS_READER = f"""
import json
from huggingface_hub import hf_hub_download
from tokenizers import Tokenizer
from transformers import AutoTokenizer

MESSAGES, TEXT = {MESSAGES!r}, {TEXT!r}
out = {{}}
for model_id in {QWEN_IDS!r}:
    tok = AutoTokenizer.from_pretrained(model_id)
    raw = Tokenizer.from_file(hf_hub_download(model_id, "tokenizer.json"))
    ids = tok(TEXT)["input_ids"]
    batch = tok.apply_chat_template(
        MESSAGES, add_generation_prompt=True, padding=True,
        tokenizer_kwargs={{"pad_to_multiple_of": 512}}, return_tensors="pt",
    )
    plain = tok.apply_chat_template(MESSAGES, add_generation_prompt=True)["input_ids"]
    masked = tok.apply_chat_template(
        MESSAGES[:3], return_dict=True, return_assistant_tokens_mask=True
    )
    said = [i for i, m in zip(masked["input_ids"], masked["assistant_masks"]) if m]
    out[model_id] = {{
        "class": type(tok).__name__,
        "size": len(tok),
        "ids": ids,
        "raw_ids": raw.encode(TEXT).ids,
        "decoded": tok.decode(ids),
        "words": [len(tok.tokenize(" " + w)) for w in TEXT.split()[1:7]],
        "special": [tok.eos_token, tok.pad_token, tok.bos_token],
        "special_ids": tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
        "start": tok("<|im_start|>user")["input_ids"],
        "rendered": tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True),
        "keys": sorted(batch.keys()),
        "shape": list(batch["input_ids"].shape),
        "attended": int(batch["attention_mask"].sum()),
        "unpadded": len(plain),
        "said": tok.decode(said),
    }}
print(json.dumps(out))
"""

MODELS_READER = f"""
import json
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

out = {{}}
for model_id in {QWEN_IDS!r}:
    tok = AutoTokenizer.from_pretrained(model_id)
    model = AutoModelForCausalLM.from_pretrained(model_id)
    c, g = model.config, model.generation_config
    enc = tok.apply_chat_template({MESSAGES!r}, add_generation_prompt=True, return_tensors="pt")
    with torch.no_grad():
        last = model(**enc).logits[0, -1].float()
    done = model.generate(**enc, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    out[model_id] = {{
        "architectures": c.architectures,
        "model_type": c.model_type,
        "sizes": [c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                  c.num_attention_heads, c.num_key_value_heads, c.head_dim],
        "max_positions": c.max_position_embeddings,
        "tied": c.tie_word_embeddings,
        "vocab": [c.vocab_size, len(tok), model.lm_head.out_features],
        "ids": [c.bos_token_id, c.eos_token_id, c.pad_token_id],
        "generation_ids": [g.bos_token_id, g.eos_token_id, g.pad_token_id],
        "tokenizer_ids": [tok.convert_tokens_to_ids("<|endoftext|>"), tok.eos_token_id,
                          tok.pad_token_id],
        "dtype": str(model.dtype),
        "new": done.shape[1] - enc["input_ids"].shape[1],
        "logits": last[:16].tolist(),
    }}

# generate_tp.py's generation, as generate_reference.py makes it on the CPU (bfloat16,
# left padding to the prefill chunk, static cache), with the logits of each step.
model_id = {GENERATE_TP_ID!r}
tok = AutoTokenizer.from_pretrained(model_id)
tok.padding_side = "left"
enc = tok.apply_chat_template(
    [{{"role": "user", "content": {GENERATE_TP_PROMPT!r}}}], add_generation_prompt=True,
    padding=True, tokenizer_kwargs={{"pad_to_multiple_of": 512}}, return_tensors="pt",
)
config = GenerationConfig(
    max_new_tokens=128, do_sample=False, pad_token_id=tok.pad_token_id,
    eos_token_id=tok.eos_token_id, cache_implementation="static", max_cache_len=1024,
    prefill_chunk_size=512, output_logits=True, return_dict_in_generate=True,
)
model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.bfloat16)
with torch.no_grad():
    done = model.generate(**enc, generation_config=config)
    new = done.sequences[0, enc["input_ids"].shape[1]:]
    logits = torch.stack(done.logits)[:, 0].float()
    # The same choices computed in float32 from the same (bfloat16) weights: how far
    # bfloat16 arithmetic moves the logits.
    ids = torch.cat([enc["input_ids"][0][enc["attention_mask"][0].bool()], new])[None]
    exact = model.float()(ids).logits[0, ids.shape[1] - len(new) - 1 : -1]
top2 = logits.topk(2, dim=-1).values
out["generate_tp"] = {{
    "new": len(new),
    "ended": new[-1].item() == tok.eos_token_id,
    "margin": (top2[:, 0] - top2[:, 1]).min().item(),
    "noise": (logits - exact).abs().max().item(),
    "text": tok.decode(new, skip_special_tokens=True),
}}
print(json.dumps(out))
"""

SFT_READER = f"""
import json, tempfile
import datasets
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

# As with the real dataset: a "prompt" column would make TRL take the rows for
# prompt-completion pairs.
data = datasets.load_dataset({ULTRACHAT!r}, split="train_sft")
data = data.select(range(8)).select_columns(["messages"])
with tempfile.TemporaryDirectory() as out:
    args = SFTConfig(output_dir=out, max_steps=2, per_device_train_batch_size=4,
                     max_length=128, learning_rate=1e-2, logging_steps=1,
                     save_strategy="no", report_to=[], use_cpu=True)
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained({QWEN_IDS[0]!r}),
        args=args,
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained({QWEN_IDS[0]!r}),
    )
    batch = next(iter(trainer.get_train_dataloader()))
    trainer.train()
losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
first = trainer.processing_class.decode(batch["input_ids"][0])
print(json.dumps({{"losses": losses, "first": first}}))
"""

DATASET_READER = f"""
import hashlib, json, tempfile
import datasets
from huggingface_hub import snapshot_download

train = datasets.load_dataset({ULTRACHAT!r}, name=None, split="train_sft")
every = datasets.load_dataset({ULTRACHAT!r})
# The hub repository is a dataset too: its card's configs name the same rows.
repo = snapshot_download({ULTRACHAT!r}, repo_type="dataset")
with tempfile.TemporaryDirectory() as elsewhere:
    from_repo = datasets.load_dataset(repo, split="train_sft", cache_dir=elsewhere).to_list()
rows = train.to_list()
print(json.dumps({{
    "columns": train.column_names,
    "features": str(train.features),
    "splits": {{name: split.num_rows for name, split in every.items()}},
    "same_as_repo": from_repo == rows,
    "prompt_is_first": all(r["prompt"] == r["messages"][0]["content"] for r in rows),
    "prompt_ids": all(
        r["prompt_id"] == hashlib.sha256(r["prompt"].encode()).hexdigest() for r in rows
    ),
    "turns": sorted({{len(r["messages"]) for r in rows}}),
    "roles": sorted({{"/".join(m["role"] for m in r["messages"]) for r in rows}}),
    "distinct": len({{r["prompt"] for r in rows}}),
}}))
"""

FLUX_READER = f"""
import json
import numpy as np
import torch
from diffusers import DiffusionPipeline
from diffusers.hooks.tensor_parallel import resolve_tp_shard_specs

pipe = DiffusionPipeline.from_pretrained({FLUX!r})
pipe.set_progress_bar_config(disable=True)

def draw(**kwargs):
    return pipe("a red apple in the garden", height=32, width=32, num_inference_steps=2,
                max_sequence_length=32, generator=torch.Generator().manual_seed(0),
                **kwargs).images

image = draw()[0]
a, b = draw(output_type="np"), draw(output_type="np")
t = pipe.transformer
print(json.dumps({{
    "classes": [type(pipe).__name__, type(t).__name__, type(pipe.tokenizer).__name__,
                type(pipe.tokenizer_2).__name__],
    "size": list(image.size),
    "shape": list(a.shape),
    "finite": bool(np.isfinite(a).all()),
    "spread": float(a.std()),
    "same": bool((a == b).all()),
    "dtype": str(t.dtype),
    "heads": t.config.num_attention_heads,
    # Every planned weight splits evenly over 2 ranks (this raises otherwise).
    "sharded_over_2": len(resolve_tp_shard_specs(t, t._tp_plan, 2)),
}}))
"""

READERS = {
    "tokenizers": TOKENIZERS_READER,
    "models": MODELS_READER,
    "sft": SFT_READER,
    "dataset": DATASET_READER,
    "flux": FLUX_READER,
}

# What readers add to the tool's folders: datasets keeps the results of map() and
# select() beside the Arrow files they came from, written first as tmp* files.
READERS_FILES = ("cache-*", "tmp*", "*.lock")


def run_hub(home: Path, *args: str) -> subprocess.CompletedProcess:
    # The caches come from --cache-dir alone, whatever this environment names.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    return subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.hub", "--cache-dir", str(home), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def tool_folders(home: Path) -> list[Path]:
    """The folders the tool writes under `home` (readers add locks and caches beside)."""
    repos = sorted((home / "hub").glob("*--*"))
    parts = [repo / part for repo in repos for part in ("blobs", "snapshots", "refs")]
    return [*parts, home / "datasets" / "HuggingFaceH4___ultrachat_200k"]


def tree_hashes(home: Path) -> dict[str, str]:
    """What the tool wrote, by path under `home`: the sha256 of each file, the target of
    each link."""
    ignored = shutil.ignore_patterns(*READERS_FILES)
    hashes = {}
    for root in tool_folders(home):
        for path in sorted(root.rglob("*")):
            if ignored(str(path.parent), [path.name]):
                continue
            name = path.relative_to(home).as_posix()
            if path.is_symlink():
                hashes[name] = "-> " + os.readlink(path)
            elif path.is_file():
                hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


@pytest.fixture(scope="session")
def hub_home(offline_hub_cache):
    """The session's cache written by the tool (conftest.py): (HF_HOME, its hashes, its
    output). This file runs before the seed scripts read the cache (readers' own files are
    left out of the hashes anyway)."""
    home, stdout = offline_hub_cache
    return home, tree_hashes(home), stdout


@pytest.fixture(scope="session")
def readers(hub_home, spawn_python):
    """Every reader, started at once in the environment of a process that has only the
    tool's cache and no network."""
    home = hub_home[0]
    offline = {
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_DATASETS_CACHE": str(home / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # Five processes share the machine: one thread each.
        "OMP_NUM_THREADS": "1",
    }
    started = {name: spawn_python(code, offline) for name, code in READERS.items()}
    yield started
    for reader in started.values():
        reader.kill()


def test_the_tool_writes_every_repository(hub_home):
    home, hashes, stdout = hub_home
    for repo_id in ALL_IDS:
        assert f"hub: wrote {repo_id} (" in stdout
    for repo_id in (*QWEN_IDS, FLUX):
        folder = home / "hub" / f"models--{repo_id.replace('/', '--')}"
        commit = (folder / "refs" / "main").read_text()
        assert len(commit) == 40 and int(commit, 16) >= 0
        assert (folder / "snapshots" / commit / "README.md").is_file()
    assert any(name.endswith("ultrachat_200k-train_sft.arrow") for name in hashes)


def test_tokenizers_round_trip_and_speak_chatml(readers):
    got = readers["tokenizers"].json(timeout=300)
    for model_id in QWEN_IDS:
        tok = got[model_id]
        assert tok["class"] == "Qwen2Tokenizer"
        assert tok["size"] == 768
        # The class Transformers builds from the files cuts text as tokenizer.json does.
        assert tok["ids"] == tok["raw_ids"]
        assert tok["decoded"] == TEXT
        assert tok["words"] == [1] * 6, "the corpus's words should be single tokens"
        assert tok["special"] == ["<|im_end|>", "<|endoftext|>", None]
        # Each special token is one id of its own, and stays whole inside text.
        assert len(set(tok["special_ids"])) == 3
        assert tok["start"][0] == tok["special_ids"][1]
        assert tok["rendered"] == CHATML
        assert tok["keys"] == ["attention_mask", "input_ids"]
        assert tok["shape"] == [1, 512]
        assert tok["attended"] == tok["unpadded"] < 512
        # The {% generation %} markers cover the assistant's words and its end of turn.
        assert tok["said"] == "The chip counts the numbers.<|im_end|>"
    assert got[QWEN_IDS[0]]["ids"] == got[QWEN_IDS[1]]["ids"]


def test_models_load_with_their_config_and_generate(readers):
    got = readers["models"].json(timeout=300)
    for model_id in QWEN_IDS:
        m = got[model_id]
        assert m["architectures"] == ["Qwen3ForCausalLM"] and m["model_type"] == "qwen3"
        assert m["sizes"] == [2, 64, 128, 4, 2, 16]
        assert m["max_positions"] >= 2048 and m["tied"] is False
        assert m["vocab"] == [768, 768, 768]
        endoftext, im_end, pad = m["tokenizer_ids"]
        assert m["ids"] == [endoftext, im_end, pad]
        assert m["generation_ids"] == [endoftext, [im_end, endoftext], pad]
        assert m["dtype"] == "torch.bfloat16"
        assert m["new"] == 4
    assert got[QWEN_IDS[0]]["logits"] != got[QWEN_IDS[1]]["logits"], "same seed twice"


def test_greedy_generation_of_the_tensor_parallel_script_is_decisive(readers):
    """generate_tp.py's tokens are compared with one CPU process's, and bfloat16 tensor
    parallelism rounds differently from one process: every greedy choice must lead its
    runner-up by far more than bfloat16 moves the logits, for a reply long enough to
    matter. (A random model's top two differ by about nothing.)"""
    got = readers["models"].json(timeout=300)["generate_tp"]
    assert got["ended"] and 64 <= got["new"] <= 128, got
    assert got["margin"] > 2.0, got
    assert got["margin"] > 10 * got["noise"], got
    assert got["text"].startswith("Computers follow instructions exactly."), got


def test_sft_trainer_steps_on_the_chat_dataset(readers):
    got = readers["sft"].json(timeout=300)
    assert len(got["losses"]) == 2
    assert all(0 < loss < 20 for loss in got["losses"])
    assert got["first"].startswith("<|im_start|>user\n")
    assert "<|im_end|>\n<|im_start|>assistant\n" in got["first"]


def test_the_dataset_loads_offline_with_ultrachats_columns(readers):
    got = readers["dataset"].json(timeout=300)
    assert got["columns"] == ["prompt", "prompt_id", "messages"]
    assert "'content': Value('string'), 'role': Value('string')" in got["features"]
    assert got["splits"] == {"train_sft": 384, "test_sft": 48, "train_gen": 384, "test_gen": 48}
    assert got["same_as_repo"] and got["prompt_is_first"] and got["prompt_ids"]
    assert got["turns"] == [2, 4]
    assert got["roles"] == ["user/assistant", "user/assistant/user/assistant"]
    assert got["distinct"] > 100


def test_the_flux_pipeline_loads_offline_and_draws(readers):
    got = readers["flux"].json(timeout=300)
    assert got["classes"] == [
        "FluxPipeline",
        "FluxTransformer2DModel",
        "CLIPTokenizer",
        "T5Tokenizer",
    ]
    assert got["size"] == [32, 32]
    assert got["shape"] == [1, 32, 32, 3]
    assert got["finite"] and got["spread"] > 0.01
    assert got["same"], "a seeded generator should draw the same image"
    assert got["dtype"] == "torch.float32"
    assert got["heads"] % 2 == 0 and got["sharded_over_2"] > 0


def test_a_second_run_changes_nothing(hub_home):
    home, hashes, _ = hub_home
    done = run_hub(home)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "hub: wrote" not in done.stdout
    for repo_id in ALL_IDS:
        assert f"hub: {repo_id} already there" in done.stdout
    assert tree_hashes(home) == hashes


def test_force_writes_the_same_bytes(hub_home, tmp_path):
    home, hashes, _ = hub_home
    again = tmp_path / "again"
    for folder in tool_folders(home):
        shutil.copytree(
            folder,
            again / folder.relative_to(home),
            symlinks=True,
            ignore=shutil.ignore_patterns(*READERS_FILES),
        )
    done = run_hub(again, "--force")
    assert done.returncode == 0, done.stderr[-4000:]
    for repo_id in ALL_IDS:
        assert f"hub: wrote {repo_id} (" in done.stdout
    assert tree_hashes(again) == hashes


def test_an_unusable_cache_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_hub(blocker)
    assert done.returncode == 1
    assert "hub: error: cannot create the cache folder" in done.stderr
    assert "Traceback" not in done.stderr

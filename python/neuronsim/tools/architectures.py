"""Which of Transformers' causal-LM architectures run on "neuron":
``python -m neuronsim.tools.architectures``.

For every model type in Transformers' causal-LM auto mapping, a tiny random model is built
from a shrunk config (2 layers, hidden 64, vocabulary 256, 4 experts where there are
experts) and run on the CPU and on "neuron": one forward pass on a fixed (1, 8) input and
8 greedy tokens. Each architecture runs in its own interpreter (a crash or a hang of one
does not stop the table) under a timeout, in functional-only mode (``--timing`` times the
neuron side) with ``HF_HUB_OFFLINE=1``.

A row's status is one of:

- ``ran``: the neuron run finished (``tokens_match`` and ``max_abs_diff`` say how well);
- ``skipped``: the CPU baseline itself failed (config, model build or CPU run), which is
  not counted against the device;
- ``error``: the neuron run raised (``error`` holds the exception's first line), or the
  model type is unknown;
- ``timeout``: the neuron run did not finish in time.

The summary line counts the rows: "N architectures: A run on neuron (P% of those the CPU
runs), T with identical tokens, F with zero fallbacks".

``run(model_types, jobs=2)`` is the same from Python and returns the rows.

``--real-size`` (``run(names, real_size=True)``) runs the models of ``real_size.MODELS``
instead, each at its published dimensions: see ``neuronsim.tools.real_size``.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time

from . import real_size as real_size_models
from .model_runs import aligned, first_line, logits_of

SEED = 0
PROMPT_LEN = 8
NEW_TOKENS = 8
VOCAB = 256
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 128
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
EXPERT_INTERMEDIATE = 32
# Prompt tokens are drawn from [FIRST_ID, LAST_ID): clear of the special ids, which the
# shrinker moves to the top of the vocabulary (or below FIRST_ID).
FIRST_ID, LAST_ID = 4, 200

MARK = "@@neuronsim-architectures "
STATUSES = ("ran", "skipped", "error", "timeout")

# Variables that would change what the worker measures: strict mode turns fallbacks into
# errors; the autoload switch would leave the device unregistered.
_DROPPED_VARIABLES = ("NEURONSIM_STRICT", "TORCH_DEVICE_BACKEND_AUTOLOAD")

# ---------------------------------------------------------------------------------------
# The config shrinker.

_HIDDEN_KEYS = (
    "hidden_size",
    "n_embd",
    "d_model",
    "embed_dim",
    "model_dim",
    "word_embed_proj_dim",
    "dim",
    "hidden_dim_model",
    "attention_hidden_size",
    "embedding_dim",
    "lru_width",
)
_LAYER_KEYS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "decoder_layers",
    "num_decoder_layers",
    "encoder_layers",
    "num_encoder_layers",
    "num_blocks",
)
_HEAD_KEYS = (
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_heads",
    "decoder_attention_heads",
    "encoder_attention_heads",
    "attention_heads",
)
_KV_HEAD_KEYS = (
    "num_key_value_heads",
    "n_kv_heads",
    "num_kv_heads",
    "multi_query_group_num",
    "num_kv_heads_per_layer",
)
_HEAD_DIM_KEYS = ("head_dim", "kv_channels", "attention_head_dim", "d_head", "d_kv")
_INTERMEDIATE_KEYS = (
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "decoder_ffn_dim",
    "encoder_ffn_dim",
    "ffn_hidden_size",
    "d_ff",
    "inner_hidden_size",
    "dense_intermediate_size",
    "hidden_dim",
)
_EXPERT_INTERMEDIATE_KEYS = (
    "moe_intermediate_size",
    "expert_intermediate_size",
    "shared_expert_intermediate_size",
    "moe_ffn_hidden_size",
    "shared_intermediate_size",
    "expert_hidden_size",
    "moe_shared_expert_intermediate_size",
)
_EXPERT_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_routed_experts",
    "ffn_num_experts",
    "moe_num_routed_experts",
)
_EXPERTS_PER_TOKEN_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "moe_topk",
    "moe_top_k",
    "top_k",
    "moe_k",
    "num_selected_experts",
    "router_top_k",
)
_SHARED_EXPERT_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "n_ctx",
    "max_seq_len",
    "max_sequence_length",
    "seq_length",
    "max_length_positions",
)
_SLIDING_KEYS = ("sliding_window", "attention_window_size", "window_size")
# Per-layer lists under other names than "<something>_layers"/"layer_types".
_PER_LAYER_HINTS = ("layer", "pattern", "block_type", "window")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _set(d: dict, keys, value, *, only_if=None) -> None:
    for key in keys:
        if key in d and _is_int(d[key]) and (only_if is None or only_if(d[key])):
            d[key] = value


def _layer_count(d: dict):
    for key in _LAYER_KEYS:
        if _is_int(d.get(key)) and d[key] > 0:
            return d[key]
    return None


def _per_layer_lists(d: dict, layers: int) -> list[str]:
    return [
        key
        for key, value in d.items()
        if isinstance(value, (list, tuple))
        and len(value) == layers
        and layers > 1
        and not key.endswith("_token_id")
        and not key.endswith("_ids")
    ]


def _choose_layers(d: dict, keys: list[str], layers: int) -> list[int]:
    """Indices of the layers to keep: the first layer of each distinct kind (a kind being
    the layer's values across every per-layer list), at least LAYERS of them, at most 4."""
    kinds = [tuple(str(d[key][i]) for key in keys) for i in range(layers)]
    keep, seen = [], set()
    for i, kind in enumerate(kinds):
        if kind not in seen:
            seen.add(kind)
            keep.append(i)
    keep = keep[:4]
    for i in range(layers):
        if len(keep) >= LAYERS:
            break
        if i not in keep:
            keep.append(i)
    return sorted(keep)


def _shrink_special_ids(d: dict) -> None:
    # Special ids must lie in the small vocabulary; they go to its top (clear of the
    # prompt), ids already small enough stay.
    top = VOCAB - 1
    for key in sorted(d):
        value = d[key]
        if not (key.endswith(("_token_id", "_token_index")) or key == "pad_idx"):
            continue
        if _is_int(value) and value >= FIRST_ID:
            d[key] = top
            top -= 1
        elif isinstance(value, list) and all(_is_int(v) for v in value):
            new = []
            for v in value:
                if v >= FIRST_ID:
                    new.append(top)
                    top -= 1
                else:
                    new.append(v)
            d[key] = new


def shrink_dict(d: dict) -> dict:
    """A copy of the config dict ``d`` (as ``to_dict()`` gives it) shrunk to a tiny model;
    nested sub-configs (text_config, vision_config, ...) are shrunk the same way."""
    d = dict(d)
    for key, value in list(d.items()):
        if isinstance(value, dict) and (
            "model_type" in value or (key.endswith("_config") and key != "per_layer_config")
        ):
            d[key] = shrink_dict(value)

    old_heads = next((d[k] for k in _HEAD_KEYS if _is_int(d.get(k))), None)
    old_layers = _layer_count(d)
    old_head_dim = d.get("head_dim")
    if any(k in d for k in ("moe_intermediate_size", "moe_num_experts")):
        # MoE settings left unset by the defaults: give the model a few experts.
        for key in _EXPERT_KEYS:
            if key in d and d[key] is None:
                d[key] = EXPERTS

    _set(d, _HIDDEN_KEYS, HIDDEN, only_if=lambda v: v > HIDDEN)
    _set(d, _HEAD_KEYS, HEADS, only_if=lambda v: v > 1)
    for key in _KV_HEAD_KEYS:
        value = d.get(key)
        if _is_int(value) and value > 1:
            d[key] = HEADS if value == old_heads else KV_HEADS
    _set(d, _HEAD_DIM_KEYS, HEAD_DIM, only_if=lambda v: v > HEAD_DIM)
    if "head_dim" in d and d["head_dim"] is None and "qk_rope_head_dim" not in d:
        d["head_dim"] = HEAD_DIM  # what most derive; some use it without deriving
    _set(d, _INTERMEDIATE_KEYS, INTERMEDIATE, only_if=lambda v: v > INTERMEDIATE)
    _set(d, _EXPERT_INTERMEDIATE_KEYS, EXPERT_INTERMEDIATE, only_if=lambda v: v > 0)
    _set(d, _EXPERT_KEYS, EXPERTS, only_if=lambda v: v > EXPERTS)
    _set(d, _EXPERTS_PER_TOKEN_KEYS, EXPERTS_PER_TOKEN, only_if=lambda v: v > EXPERTS_PER_TOKEN)
    _set(d, _SHARED_EXPERT_KEYS, 1, only_if=lambda v: v > 1)
    if any(_is_int(d.get(k)) for k in _EXPERT_KEYS):
        for key in ("num_experts_per_tok", "num_experts_per_token"):
            if key in d and d[key] is None:
                d[key] = EXPERTS_PER_TOKEN
    _set(d, ("n_group", "topk_group", "num_expert_group"), 1)
    _set(d, _SLIDING_KEYS, 8, only_if=lambda v: v > 8)
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if not (isinstance(rope, dict) and "original_max_position_embeddings" in rope):
        _set(d, _POSITION_KEYS, 256, only_if=lambda v: v > 256)
    _set(d, ("vocab_size", "vocab_size_per_layer_input"), VOCAB, only_if=lambda v: v > VOCAB)
    _set(d, ("hidden_size_per_layer_input",), HEAD_DIM, only_if=lambda v: v > HEAD_DIM)
    _set(d, ("num_kv_shared_layers",), 0)
    _shrink_special_ids(d)

    # Multi-head latent attention (DeepSeek and relatives).
    _set(d, ("kv_lora_rank",), 32, only_if=lambda v: v > 32)
    _set(d, ("q_lora_rank",), 32, only_if=lambda v: v > 32)
    if _is_int(d.get("qk_rope_head_dim")):
        rope_dim = d["qk_rope_head_dim"]
        d["qk_rope_head_dim"] = d["qk_nope_head_dim"] = HEAD_DIM // 2
        # head_dim is the rotary part in some (DeepSeek), the whole query-key head in
        # others (it stays HEAD_DIM, the sum of the two halves).
        if _is_int(d.get("head_dim")) and old_head_dim == rope_dim:
            d["head_dim"] = HEAD_DIM // 2
    _set(d, ("rotary_dim",), HEAD_DIM // 2, only_if=lambda v: v > HEAD_DIM // 2)
    _set(d, ("v_head_dim",), HEAD_DIM, only_if=lambda v: v > HEAD_DIM)
    # State-space layers (Mamba and the hybrids).
    _set(d, ("state_size", "ssm_state_size", "mamba_d_state"), 16, only_if=lambda v: v > 16)
    _set(d, ("n_groups", "mamba_n_groups", "ngroups"), 1)
    _set(d, ("time_step_rank",), 8, only_if=lambda v: v > 8)
    _set(d, ("mamba_d_head", "mamba_head_dim", "ssm_head_dim"), HEAD_DIM)
    if "mamba_n_heads" in d:
        d["mamba_n_heads"] = HIDDEN * d.get("mamba_expand", 2) // HEAD_DIM
    if _is_int(d.get("mamba_d_ssm")):
        d["mamba_d_ssm"] = d["mamba_n_heads"] * d["mamba_d_head"]
    _set(d, ("chunk_size", "mamba_chunk_size"), 8, only_if=lambda v: v > 8)
    # Linear attention (Qwen3-Next and relatives).
    _set(d, ("linear_num_key_heads", "linear_num_value_heads"), 2, only_if=lambda v: v > 2)
    _set(d, ("linear_key_head_dim", "linear_value_head_dim"), HEAD_DIM)

    if old_layers is not None:
        per_layer = _per_layer_lists(d, old_layers)
        keep = _choose_layers(d, per_layer, old_layers) if per_layer else list(range(LAYERS))
        keep = keep[:old_layers]
        for key in per_layer:
            d[key] = type(d[key])(d[key][i] for i in keep)
        for key, value in list(d.items()):
            # Settings keyed by layer index: those of the kept layers, renumbered.
            if isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
                d[key] = {
                    type(k)(keep.index(int(k))): shrink_dict(v) if isinstance(v, dict) else v
                    for k, v in value.items()
                    if int(k) in keep
                }
        _set(d, _LAYER_KEYS, len(keep), only_if=lambda v: v > len(keep))
    for key in ("hybrid_override_pattern", "block_pattern"):
        if isinstance(d.get(key), str) and old_layers and len(d[key]) == old_layers:
            pattern = d[key]
            keep = _choose_layers({"p": list(pattern)}, ["p"], len(pattern))
            d[key] = "".join(pattern[i] for i in keep)
            _set(d, _LAYER_KEYS, len(keep))
    _set(d, ("first_k_dense_replace", "num_dense_layers"), 1, only_if=lambda v: v > 1)
    return d


# Settings the generic rules cannot guess, by model type (applied after them).
MODEL_TWEAKS: dict[str, dict] = {
    # Without an attention layer its hybrid cache cannot tell the sequence length.
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "jamba": {
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
    },
    # Its heads times their size must be the expanded hidden size.
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    "reformer": {"is_decoder": True},
    "mamba2": {"num_heads": HIDDEN * 2 // HEAD_DIM, "expand": 2},
    "hrm_text": {"num_layers_per_stack": 1},
    # A short-convolution layer and an attention layer.
    "lfm2": {"layer_types": ["conv", "full_attention"], "full_attn_idxs": [1]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
}


def _delta(original: dict, shrunk: dict) -> dict:
    """The settings the shrinker changed (sub-configs: theirs, with their model type), so
    that the config class derives everything else from them as it would for a user."""
    out = {}
    for key, value in shrunk.items():
        old = original.get(key)
        if isinstance(value, dict) and isinstance(old, dict) and key != "rope_parameters":
            sub = _delta(old, value)
            if sub:
                if "model_type" in value:
                    sub["model_type"] = value["model_type"]
                out[key] = sub
        elif value != old:
            out[key] = value
    return out


def _layers_consistent(config) -> bool:
    for cfg in {id(c): c for c in (config, config.get_text_config())}.values():
        d = cfg.to_dict()
        layers = _layer_count(d)
        if layers is None:
            continue
        if layers > 4:
            return False
        for key in ("layer_types", "mlp_layer_types", "layers_block_type"):
            if isinstance(d.get(key), list) and len(d[key]) != layers:
                return False
    return True


def tiny_config(model_type: str):
    """The shrunk config of ``model_type``: its defaults made tiny by the generic rules
    (``shrink_dict``) and ``MODEL_TWEAKS``."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    original = config.to_dict()
    shrunk = shrink_dict(original)
    shrunk.update(MODEL_TWEAKS.get(model_type, {}))
    changed = _delta(original, shrunk)
    layers = _layer_count(original)
    per_layer = set(_per_layer_lists(original, layers)) if layers else set()
    attempts = (
        # The changed settings, per-layer lists included (they keep each kind of layer).
        lambda: AutoConfig.for_model(model_type, **changed),
        # The same, the config deriving its per-layer lists from the layer count.
        lambda: AutoConfig.for_model(
            model_type, **{k: v for k, v in changed.items() if k not in per_layer}
        ),
        # Every setting, derived ones too.
        lambda: type(config).from_dict(
            {k: v for k, v in shrunk.items() if k not in ("transformers_version", "architectures")}
        ),
    )
    error = None
    for attempt in attempts:
        try:
            tiny = attempt()
        except Exception as exc:  # noqa: BLE001 (the next attempt may do)
            error = error or exc
            continue
        if _layers_consistent(tiny):
            tiny.use_cache = True
            return tiny
        error = error or ValueError("the shrunk config's per-layer settings disagree")
    raise error


# ---------------------------------------------------------------------------------------
# One architecture, in its own interpreter.


def _emit(record: dict) -> None:
    sys.stdout.write(MARK + json.dumps(record) + "\n")
    sys.stdout.flush()


def _quiet_worker() -> None:
    import warnings

    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def _worker(model_type: str) -> None:
    _quiet_worker()
    import torch

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    import neuronsim

    record = {"model_type": model_type, "stage": "config"}
    try:
        config = tiny_config(model_type)
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        _emit({**record, "status": "skipped", "error": "config: " + first_line(exc)})
        return

    try:
        torch.manual_seed(SEED)
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
        record["class"] = type(model).__name__
        record["params"] = sum(p.numel() for p in model.parameters())
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        _emit({**record, "status": "skipped", "error": "build: " + first_line(exc)})
        return

    vocab = getattr(model.config.get_text_config(), "vocab_size", VOCAB) or VOCAB
    ids = torch.randint(
        FIRST_ID, max(FIRST_ID + 1, min(LAST_ID, vocab)), (1, PROMPT_LEN),
        generator=torch.Generator().manual_seed(SEED),
    )  # fmt: skip
    mask = torch.ones_like(ids)
    generation = model.generation_config
    generation.pad_token_id = 0
    generation.eos_token_id = None
    generation.max_new_tokens = NEW_TOKENS
    generation.min_new_tokens = NEW_TOKENS
    generation.do_sample = False
    generation.max_length = None
    for attr in ("temperature", "top_p", "top_k"):
        if hasattr(generation, attr):
            setattr(generation, attr, None)

    def forward_and_generate(device):
        with torch.no_grad():
            logits = logits_of(model(input_ids=ids.to(device), attention_mask=mask.to(device)))
            logits = logits.float().to("cpu") if device != "cpu" else logits.float()
            tokens = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                generation_config=generation,
            )
        return logits, tokens.to("cpu")

    record["stage"] = "cpu"
    try:
        cpu_logits, cpu_tokens = forward_and_generate("cpu")
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        _emit({**record, "status": "skipped", "error": "cpu: " + first_line(exc)})
        return
    _emit({**record, "stage": "cpu_done"})

    record["stage"] = "neuron"
    neuronsim.reset_fallback_counts()
    kernels, clock = neuronsim.kernels_run(), neuronsim.simulated_time()
    start = time.perf_counter()
    try:
        model.to("neuron")
        dev_logits, dev_tokens = forward_and_generate("neuron")
        torch.neuron.synchronize()
        record["status"] = "ran"
        record["tokens_match"] = bool(torch.equal(dev_tokens, cpu_tokens))
        if dev_logits.shape == cpu_logits.shape:
            record["max_abs_diff"] = float((dev_logits - cpu_logits).abs().max())
        else:
            record["max_abs_diff"] = None
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        record["status"] = "error"
        record["error"] = first_line(exc)
    record["host_s"] = round(time.perf_counter() - start, 3)
    counts = neuronsim.fallback_counts()
    record["fallbacks"] = sum(counts.values())
    record["fallback_ops"] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    record["kernels"] = neuronsim.kernels_run() - kernels
    record["simulated_s"] = neuronsim.simulated_time() - clock
    record["stage"] = "done"
    _emit(record)


# ---------------------------------------------------------------------------------------
# The driver.


def architectures() -> list[str]:
    """Every model type of Transformers' causal-LM auto mapping, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _environment(timing: bool, real_size: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_VARIABLES}
    env["NEURONSIM_MODE"] = "functional-and-timing" if timing or real_size else "functional-only"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_VERBOSITY"] = "error"
    env["TOKENIZERS_PARALLELISM"] = "false"
    if not real_size:  # tiny models: one thread each, two workers at a time
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
    return env


def _stderr_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


_LIVE: set = set()  # the workers running now
_LIVE_LOCK = threading.Lock()


def _kill(process) -> None:
    """Kills a worker and whatever it started (it leads its own process group)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_one(
    model_type: str, *, timeout: float = 120, timing: bool = False, real_size: bool = False
) -> dict:
    """One architecture's row, from a fresh interpreter limited to ``timeout`` seconds;
    with ``real_size``, ``model_type`` names one of ``real_size.MODELS`` instead."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    known = real_size_models.MODELS if real_size else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if model_type not in known:
        what = "real-size model" if real_size else "model type"
        return {
            "model_type": model_type,
            "status": "error",
            "stage": "config",
            "error": f"unknown {what} {model_type!r} (known: {', '.join(sorted(known))})"[:300],
        }
    start = time.perf_counter()
    with _LIVE_LOCK:
        # By module name, not as a file: run as a file, the worker would import from its own
        # folder first.
        worker = "--real-worker" if real_size else "--worker"
        process = subprocess.Popen(
            [sys.executable, "-m", "neuronsim.tools.architectures", worker, model_type],
            env=_environment(timing, real_size),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _LIVE.add(process)
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(process)
        stdout, stderr = process.communicate()
    finally:
        _LIVE.discard(process)
    records = [
        json.loads(line[len(MARK) :]) for line in stdout.splitlines() if line.startswith(MARK)
    ]
    row = {"model_type": model_type}
    for record in records:
        row.update(record)
    cpu_done = any(r.get("stage") in ("cpu_done", "done") for r in records)
    if timed_out and row.get("status") is None:
        if cpu_done:
            row.update(status="timeout", error=f"neuron run over {timeout:g} s")
        else:
            row.update(status="skipped", error=f"cpu: over {timeout:g} s")
    elif row.get("status") is None:
        why = f"exit {process.returncode}"
        if process.returncode < 0:
            why = f"killed by {signal.Signals(-process.returncode).name}"
        why = f"{why}: {_stderr_line(stderr)}"
        if cpu_done:
            row.update(status="error", error=f"crashed ({why})"[:300])
        else:
            row.update(status="skipped", error=f"{row.get('stage', 'start')}: crashed ({why})")
    row["wall_s"] = round(time.perf_counter() - start, 1)
    return row


def run(
    model_types=None,
    *,
    jobs: int = 2,
    timeout: float = 120,
    timing: bool = False,
    real_size: bool = False,
    limit: int | None = None,
    progress=None,
) -> list[dict]:
    """Rows for ``model_types`` (default: every causal-LM architecture, or with
    ``real_size`` every real-size model), ``jobs`` at a time, in the order given;
    ``progress(row)`` is called as each finishes."""
    if model_types is not None:
        types = list(model_types)
    else:
        types = list(real_size_models.MODELS) if real_size else architectures()
    if limit is not None:
        types = types[:limit]
    rows: dict[int, dict] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = {
            pool.submit(run_one, t, timeout=timeout, timing=timing, real_size=real_size): i
            for i, t in enumerate(types)
        }
        for future in concurrent.futures.as_completed(futures):
            row = future.result()
            rows[futures[future]] = row
            if progress is not None:
                progress(row)
    finally:
        # Interrupted (Ctrl-C, SIGTERM): no worker outlives the driver.
        pool.shutdown(wait=False, cancel_futures=True)
        for process in list(_LIVE):
            _kill(process)
        pool.shutdown(wait=True)
    return [rows[i] for i in range(len(types))]


def summarize(rows: list[dict]) -> dict:
    """The counts behind the summary line."""
    by_status = collections.Counter(row["status"] for row in rows)
    ran = [row for row in rows if row["status"] == "ran"]
    cpu_runs = by_status["ran"] + by_status["timeout"] + sum(
        1 for row in rows if row["status"] == "error" and row.get("stage") != "config"
    )  # fmt: skip
    return {
        "architectures": len(rows),
        **{status: by_status[status] for status in STATUSES},
        "cpu_runs": cpu_runs,
        "share": by_status["ran"] / cpu_runs if cpu_runs else 0.0,
        "identical_tokens": sum(1 for row in ran if row.get("tokens_match")),
        "zero_fallbacks": sum(1 for row in ran if row.get("fallbacks") == 0),
    }


def summary_line(rows: list[dict]) -> str:
    s = summarize(rows)
    return (
        f"{s['architectures']} architectures: {s['ran']} run on neuron "
        f"({100 * s['share']:.0f}% of those the CPU runs), {s['identical_tokens']} with "
        f"identical tokens, {s['zero_fallbacks']} with zero fallbacks "
        f"({s['skipped']} skipped, {s['error']} errors, {s['timeout']} timeouts)"
    )


def _top_ops(row: dict, n: int = 3) -> str:
    ops = row.get("fallback_ops") or {}
    return ", ".join(f"{op.removeprefix('aten::')}:{count}" for op, count in list(ops.items())[:n])


def format_table(rows: list[dict]) -> str:
    header = (
        "model_type", "status", "tokens", "max|diff|", "fallbacks", "top fallback ops",
        "kernels", "sim_s", "note",
    )  # fmt: skip
    table = [header]
    for row in rows:
        diff = row.get("max_abs_diff")
        tokens = row.get("tokens_match")
        table.append(
            (
                row["model_type"],
                row["status"],
                "" if tokens is None else ("same" if tokens else "DIFF"),
                "" if diff is None else f"{diff:.2e}",
                "" if "fallbacks" not in row else str(row["fallbacks"]),
                _top_ops(row),
                "" if "kernels" not in row else str(row["kernels"]),
                "" if "simulated_s" not in row else f"{row['simulated_s']:.3g}",
                row.get("error", ""),
            )
        )
    return aligned(table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.architectures",
        description="Run a tiny random model of every Transformers causal-LM architecture "
        "on the CPU and on 'neuron' and tabulate which run, match and fall back.",
    )
    parser.add_argument("--only", help="comma-separated model types (default: all)")
    parser.add_argument("--limit", type=int, help="the first N architectures only")
    parser.add_argument("--json", metavar="PATH", help="write every row to PATH")
    parser.add_argument(
        "--real-size",
        action="store_true",
        help="build each of a set of models at its published dimensions (layers cut to "
        f"{real_size_models.LAYERS}) and run it in strict mode, eager and compiled, with "
        "timing: simulated time against the roofline (--only takes those models' names)",
    )
    parser.add_argument(
        "--timeout", type=float, help="seconds per architecture (default 120, real-size 1200)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="architectures run at once")
    parser.add_argument(
        "--timing", action="store_true", help="run the neuron side in functional-and-timing mode"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--real-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        _worker(args.worker)
        return 0
    if args.real_worker:
        _quiet_worker()
        real_size_models.worker(args.real_worker, _emit)
        return 0
    if args.timeout is None:
        args.timeout = 1200 if args.real_size else 120
    # A terminated driver unwinds like Ctrl-C, killing its workers on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    types = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else None
    everything = real_size_models.MODELS if args.real_size else architectures()
    total = len(types) if types is not None else len(everything)
    if args.limit is not None:
        total = min(total, args.limit)
    done = []

    def progress(row):
        done.append(row)
        if not args.quiet:
            note = row.get("error", "")
            print(
                f"[{len(done)}/{total}] {row.get('model', row['model_type'])}: {row['status']} "
                f"({row.get('wall_s', 0):.0f} s) {note}"[:200],
                file=sys.stderr,
                flush=True,
            )

    rows = run(
        types,
        jobs=args.jobs,
        timeout=args.timeout,
        timing=args.timing,
        real_size=args.real_size,
        limit=args.limit,
        progress=progress,
    )
    tables = real_size_models if args.real_size else sys.modules[__name__]
    print(tables.format_table(rows))
    print()
    print(tables.summary_line(rows))
    if args.json:
        summary = summarize(rows) if not args.real_size else tables.summary_line(rows)
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The architecture sweep at real size: ``python -m neuronsim.tools.architectures --real-size``.

Each model below is built from its published dimensions (hidden size, heads, KV heads, head
dim, intermediate size, vocabulary, experts), with random weights in bf16 and its layers cut
to ``LAYERS``, and runs one forward of 1 x ``TOKENS`` tokens on the CPU and on "neuron" in
strict mode (no CPU fallback), eagerly and compiled (``torch.compile(backend="neuron")``).
A row says whether each ran, how far its logits are from the CPU's, the simulated time
(with launches; the second call, once kernels are built and graphs compiled) against the
forward's roofline, and the host time against the CPU's forward in the same run.

The roofline of a forward is the larger of its FLOPs at TensorE's peak and its bytes at the
core's DMA rate (``bench.roofline_rates``, from the device's properties): every weight read once
(an input embedding only for the rows looked up), 2 FLOPs per weight and token (a routed
expert's weights for the share of tokens routed to it, top-k of the experts), and causal
attention's two products. Logits match when the largest difference is within
``TOLERANCE`` of the CPU's largest logit: bf16 rounds each of the forward's values to 8
significant bits, and the two sides accumulate in different orders. A mixture of experts
routes each token to its top-k experts by its router's logits, which those roundings move
too: a token whose k-th and (k+1)-th experts are nearly tied goes to another expert on one
side, and its logits then differ by far more than rounding (4 of 128 tokens in one
Qwen3-30B-A3B layer, where the others are within 7e-3). Its logits match when at least
``ROUTED_SHARE`` of the tokens are within ``TOLERANCE``.
"""

from __future__ import annotations

import time

from .bench import roofline_rates
from .model_runs import aligned, first_line, logits_of

LAYERS = 2
TOKENS = 128
SEED = 0
# Twice PyTorch's relative tolerance for bf16 (torch.testing: 1.6e-2), of the largest logit.
TOLERANCE = 3.2e-2
# The share of tokens within TOLERANCE that a mixture of experts needs (module docstring).
ROUTED_SHARE = 0.9


# name: (model type, published dimensions and the settings they need, source). Rotary
# scaling and other settings that change values but neither shapes nor ops keep the
# config's defaults.
MODELS: dict[str, tuple[str, dict, str]] = {
    "Llama-3.1-8B": (
        "llama",
        {
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
        },
        "meta-llama/Llama-3.1-8B config.json",
    ),
    "Qwen3-0.6B": (
        "qwen3",
        {
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
        },
        "Qwen/Qwen3-0.6B config.json",
    ),
    "Qwen3-30B-A3B": (
        "qwen3_moe",
        {
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "vocab_size": 151936,
            "decoder_sparse_step": 1,
            "norm_topk_prob": True,
            "tie_word_embeddings": False,
        },
        "Qwen/Qwen3-30B-A3B config.json",
    ),
    "Gemma-3-1B": (
        "gemma3_text",
        {
            "hidden_size": 1152,
            "intermediate_size": 6912,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "vocab_size": 262144,
            "sliding_window": 512,
            "query_pre_attn_scalar": 256,
            "layer_types": ["sliding_attention", "full_attention"],
        },
        "google/gemma-3-1b-pt config.json (a local and a global layer kept)",
    ),
    "Mistral-7B-v0.3": (
        "mistral",
        {
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 32768,
            "sliding_window": None,
            "tie_word_embeddings": False,
        },
        "mistralai/Mistral-7B-v0.3 config.json",
    ),
    "Phi-3-mini": (
        "phi3",
        {
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32064,
            "pad_token_id": 32000,
            "tie_word_embeddings": False,
        },
        "microsoft/Phi-3-mini-4k-instruct config.json",
    ),
    "GPT-2": (
        "gpt2",
        {"n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257},
        "openai-community/gpt2 config.json",
    ),
    "SmolLM2-135M": (
        "llama",
        {
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "vocab_size": 49152,
            "tie_word_embeddings": True,
        },
        "HuggingFaceTB/SmolLM2-135M config.json",
    ),
    "OLMo-2-1B": (
        "olmo2",
        {
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "vocab_size": 100352,
            "tie_word_embeddings": False,
        },
        "allenai/OLMo-2-0425-1B config.json",
    ),
}


def config(name: str):
    """The model's config: its published dimensions, its layers cut to ``LAYERS``."""
    from transformers import AutoConfig

    if name not in MODELS:
        raise KeyError(f"unknown real-size model {name!r} (known: {', '.join(MODELS)})")
    model_type, dims, _ = MODELS[name]
    cfg = AutoConfig.for_model(model_type, num_hidden_layers=LAYERS, **dims)
    cfg.use_cache = False
    return cfg


def roofline(model, tokens: int) -> dict:
    """The forward's FLOPs and bytes (module docstring) and its roofline in ms."""
    import torch

    cfg = model.config.get_text_config()
    out = model.get_output_embeddings()
    out_weight = out.weight if out is not None else None
    lookups = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, torch.nn.Embedding) and m.weight is not out_weight
    }
    experts = getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None)
    routed = (getattr(cfg, "num_experts_per_tok", 0) or 0) / experts if experts else 1.0
    flops = nbytes = 0
    for name, p in model.named_parameters():
        if id(p) in lookups:
            nbytes += tokens * p.shape[-1] * p.element_size()
            continue
        nbytes += p.numel() * p.element_size()
        if p.dim() >= 2:
            share = routed if ".experts." in f".{name}." else 1.0
            flops += 2 * tokens * p.numel() * share
    # Standard names: configs map their own (GPT-2's n_head, n_layer) onto them.
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    flops += cfg.num_hidden_layers * 2 * 2 * heads * head_dim * (tokens * (tokens + 1) // 2)
    peak_flops, dma_bytes_per_s = roofline_rates()
    ms = max(flops / peak_flops, nbytes / dma_bytes_per_s) * 1e3
    return {"flops": flops, "bytes": nbytes, "roofline_ms": round(ms, 4)}


def _compare(logits, reference, routed: bool = False) -> dict:
    """The logits' largest difference from the CPU's, relative to its largest logit, and the
    share of tokens within TOLERANCE. A routed model matches when ROUTED_SHARE of its tokens
    do (module docstring); any other when all do."""
    scale = float(reference.abs().max()) or 1.0
    per_token = (logits.float() - reference).abs().amax(-1).flatten() / scale
    rel = float(per_token.max())
    within = float((per_token <= TOLERANCE).float().mean())
    same = (logits.float().argmax(-1) == reference.argmax(-1)).float().mean()
    matches = within >= ROUTED_SHARE if routed else rel <= TOLERANCE
    return {
        "rel_err": round(rel, 5),
        "tokens_within": round(within, 4),
        "matches": matches,
        "argmax_same": float(same),
    }


def _forward(run, ids, strict: bool = True) -> dict:
    """Two calls of ``run(ids)`` in strict mode (or out of it); the second's figures."""
    import torch

    import neuronsim

    with neuronsim.strict_mode(strict):
        run(ids)  # builds the kernels, compiles the graphs
        torch.neuron.synchronize()
        neuronsim.reset_fallback_counts()
        kernels, clock, start = (
            neuronsim.kernels_run(),
            neuronsim.simulated_time(),
            time.perf_counter(),
        )
        logits = run(ids)
        torch.neuron.synchronize()
        host = time.perf_counter() - start
        result = {
            "host_s": round(host, 3),
            "simulated_ms": round((neuronsim.simulated_time() - clock) * 1e3, 4),
            "kernels": neuronsim.kernels_run() - kernels,
            "fallbacks": sum(neuronsim.fallback_counts().values()),
        }
        result["logits"] = logits.float().cpu()
    return result


# How the compiler's strict mode refuses a graph that would run a node eagerly.
_SPLIT = "strict mode refuses to run it eagerly"


def _measure(make, ids, reference, routed: bool, strict: bool = True) -> dict:
    result = _forward(make(), ids, strict)
    result.update(_compare(result.pop("logits"), reference, routed=routed))
    result["status"] = "ran"
    return result


def _split_run(make, ids, reference, routed: bool, refusal: str) -> dict:
    """A compiled forward that strict mode refuses for its splits, run again with them (the
    nodes that do not lower run eagerly on the device, counted): status "split", with the
    figures and the refusal."""
    import torch

    torch._dynamo.reset()
    try:
        result = _measure(make, ids, reference, routed, strict=False)
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        return {"status": "error", "error": first_line(exc)}
    result.update(status="split", error="strict: " + refusal)
    return result


def worker(name: str, emit) -> None:
    """One model's row, emitted (``emit(record)``) as each part finishes."""
    import torch
    from transformers import AutoModelForCausalLM

    from neuronsim import compiler

    model_type, _, source = MODELS[name]
    record = {"model": name, "model_type": model_type, "source": source, "stage": "config"}
    try:
        cfg = config(name)
        torch.manual_seed(SEED)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
        emit({**record, "status": "skipped", "error": "build: " + first_line(exc)})
        return
    record["params"] = sum(p.numel() for p in model.parameters())
    record.update(roofline(model, TOKENS))
    text = cfg.get_text_config()
    vocab = text.vocab_size
    experts = bool(getattr(text, "num_experts", None) or getattr(text, "num_local_experts", None))
    ids = torch.randint(0, vocab, (1, TOKENS), generator=torch.Generator().manual_seed(SEED))

    def forward_logits(m):
        return lambda x: logits_of(m(input_ids=x))

    record["stage"] = "cpu"
    with torch.no_grad():
        forward_logits(model)(ids)
        start = time.perf_counter()
        reference = forward_logits(model)(ids).float()
        record["cpu_s"] = round(time.perf_counter() - start, 3)
        emit({**record, "stage": "cpu_done"})

        model.to("neuron")
        device_ids = ids.to("neuron")
        runs = {
            "eager": lambda: forward_logits(model),
            "compiled": lambda: forward_logits(
                torch.compile(model, backend="neuron", dynamic=False)
            ),
        }
        for mode, make in runs.items():
            record["stage"] = mode
            compiler.reset_stats()
            try:
                result = _measure(make, device_ids, reference, experts)
            except Exception as exc:  # noqa: BLE001 (any failure is a row of the table)
                result = {"status": "error", "error": first_line(exc)}
                if mode == "compiled" and _SPLIT in result["error"]:
                    result = _split_run(make, device_ids, reference, experts, result["error"])
            if mode == "compiled":
                result["eager_nodes"] = sum(len(g.eager) for g in compiler.graphs())
                result["graphs"] = len(compiler.graphs())
            record[mode] = result
            emit(record)
            torch._dynamo.reset()
    record["status"] = "ran" if all(record[m]["status"] == "ran" for m in runs) else "error"
    record["stage"] = "done"
    emit(record)


def _ms(part: dict) -> str:
    return f"{part['simulated_ms']:.2f} ms" if "simulated_ms" in part else part.get("status", "")


def _times(part: dict, roofline_ms: float | None) -> str:
    """The simulated time as a multiple of the roofline."""
    if roofline_ms and part.get("simulated_ms"):
        return f"{part['simulated_ms'] / roofline_ms:.1f}x"
    return ""


def format_table(rows: list[dict]) -> str:
    header = (
        "model", "params", "roofline", "eager", "x", "compiled", "x", "kernels",
        "rel err", "host/cpu", "note",
    )  # fmt: skip
    table = [header]
    for row in rows:
        e, c = row.get("eager", {}), row.get("compiled", {})
        roof = row.get("roofline_ms")
        errs = "/".join(f"{p['rel_err']:.1e}" for p in (e, c) if "rel_err" in p)
        ratio = f"{e['host_s'] / row['cpu_s']:.1f}x" if "host_s" in e and row.get("cpu_s") else ""
        notes = [p.get("error", "") for p in (e, c)] + [row.get("error", "")]
        if c.get("status") == "split":
            notes.insert(0, f"compiled with {c.get('eager_nodes', 0)} eager nodes")
        notes += [
            f"{mode}: {p['tokens_within']:.0%} of tokens within {TOLERANCE:g} (routing)"
            for mode, p in (("eager", e), ("compiled", c))
            if p.get("tokens_within", 1.0) < 1.0
        ]
        table.append(
            (
                row.get("model", row.get("model_type", "")),
                f"{row['params'] / 1e6:.0f}M" if "params" in row else "",
                f"{roof:.2f} ms" if roof else "",
                _ms(e),
                _times(e, roof),
                _ms(c),
                _times(c, roof),
                "/".join(str(p["kernels"]) for p in (e, c) if "kernels" in p),
                errs,
                ratio,
                "; ".join(n for n in notes if n),
            )
        )
    return aligned(table)


def summary_line(rows: list[dict]) -> str:
    ran = {
        m: sum(1 for r in rows if r.get(m, {}).get("status") == "ran")
        for m in ("eager", "compiled")
    }
    match = sum(1 for r in rows if all(r.get(m, {}).get("matches") for m in ("eager", "compiled")))
    return (
        f"{len(rows)} real-size models ({LAYERS} layers, 1 x {TOKENS} tokens, strict mode): "
        f"{ran['eager']} run eagerly, {ran['compiled']} compiled, {match} with logits within "
        f"{TOLERANCE:g} of the CPU's both ways (a mixture of experts: {ROUTED_SHARE:.0%} of tokens)"
    )

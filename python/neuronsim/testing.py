"""Tiny models for tests and benchmarks, built from configs (nothing is downloaded)."""

from __future__ import annotations


def tiny_qwen3_config(**overrides):
    """A Qwen3-style causal LM small enough for CI: 2 layers, hidden 64, grouped-query
    attention (4 heads, 2 key/value heads of 16)."""
    from transformers import Qwen3Config

    settings = {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 128,
        "tie_word_embeddings": False,
    }
    settings.update(overrides)
    return Qwen3Config(**settings)


def tiny_qwen3(seed: int = 0, **overrides):
    """A randomly initialised tiny Qwen3 (the same weights for the same seed)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(tiny_qwen3_config(**overrides))

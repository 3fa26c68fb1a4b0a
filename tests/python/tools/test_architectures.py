"""``python -m neuronsim.tools.architectures``: tiny random models of Transformers' causal-LM
architectures on the CPU and on "neuron", each in its own interpreter. Here two
mainstream architectures and a bogus one (about 15 s: one round of two workers)."""

from __future__ import annotations

import json

import pytest

from neuronsim.tools import architectures, real_size

ARCHITECTURES = ["qwen3", "llama", "no_such_architecture"]


@pytest.fixture(scope="module")
def rows():
    return architectures.run(ARCHITECTURES, jobs=2, timeout=100)


def by_type(rows):
    return {row["model_type"]: row for row in rows}


def test_rows_come_back_in_the_order_asked(rows):
    assert [row["model_type"] for row in rows] == ARCHITECTURES
    assert all(row["status"] in architectures.STATUSES for row in rows)


@pytest.mark.parametrize("model_type", ["qwen3", "llama"])
def test_mainstream_architectures_run_with_the_cpu_tokens(rows, model_type):
    row = by_type(rows)[model_type]
    assert row["status"] == "ran", row
    assert row["tokens_match"] is True
    assert row["max_abs_diff"] < 1e-3
    assert row["kernels"] > 100
    assert row["simulated_s"] == 0  # functional-only: no clock
    assert row["fallbacks"] == sum(row["fallback_ops"].values())
    assert row["params"] < 1_000_000  # the config was shrunk


def test_a_bogus_model_type_is_an_error_row_not_a_crash(rows):
    row = by_type(rows)["no_such_architecture"]
    assert row["status"] == "error"
    assert "unknown model type" in row["error"]


def test_summary_counts_add_up(rows):
    s = architectures.summarize(rows)
    assert s["architectures"] == len(ARCHITECTURES)
    assert sum(s[status] for status in architectures.STATUSES) == s["architectures"]
    # The bogus type never ran on the CPU, so it is not in the share's denominator.
    assert s["cpu_runs"] == s["architectures"] - s["skipped"] - 1
    assert s["ran"] >= 2
    assert s["identical_tokens"] <= s["ran"]
    assert s["zero_fallbacks"] <= s["ran"]
    assert s["share"] == pytest.approx(s["ran"] / s["cpu_runs"])
    line = architectures.summary_line(rows)
    assert line.startswith(f"{len(ARCHITECTURES)} architectures: {s['ran']} run on neuron (")
    assert f"{s['identical_tokens']} with identical tokens" in line


def test_table_has_a_line_per_row(rows):
    lines = architectures.format_table(rows).splitlines()
    assert lines[0].split()[:2] == ["model_type", "status"]
    assert [line.split()[0] for line in lines[1:]] == ARCHITECTURES


def test_shrinker_makes_tiny_consistent_configs():
    llama = architectures.tiny_config("llama")
    assert (llama.num_hidden_layers, llama.hidden_size, llama.vocab_size) == (2, 64, 256)
    assert llama.hidden_size % llama.num_attention_heads == 0
    assert llama.num_attention_heads % llama.num_key_value_heads == 0
    # Per-layer lists follow the layer count; a multimodal wrapper's text config shrinks.
    text = architectures.tiny_config("gemma3").text_config
    assert len(text.layer_types) == text.num_hidden_layers <= 4
    assert text.hidden_size <= 128
    mixtral = architectures.tiny_config("mixtral")
    assert mixtral.num_local_experts <= 4
    assert mixtral.num_experts_per_tok <= mixtral.num_local_experts


def test_command_line_writes_the_json(tmp_path, capsys):
    path = tmp_path / "rows.json"
    assert (
        architectures.main(["--only", "no_such_architecture", "--json", str(path), "--quiet"]) == 0
    )
    out = capsys.readouterr().out
    assert "1 architectures: 0 run on neuron" in out
    written = json.loads(path.read_text())
    assert written["rows"][0]["status"] == "error"
    assert written["summary"]["error"] == 1


# --- the real-size mode ----------------------------------------------------------------

REAL = ["SmolLM2-135M", "Qwen3-0.6B"]


@pytest.fixture(scope="module")
def real_rows():
    return architectures.run(REAL + ["Tiny-0B"], jobs=1, real_size=True, timeout=900)


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_real_size_models_run_strict_at_the_cpus_logits_and_above_the_roofline(
    real_rows, name, mode
):
    row = next(r for r in real_rows if r["model"] == name)
    assert row["status"] == "ran", row
    part = row[mode]
    assert part["status"] == "ran" and part["fallbacks"] == 0, part
    assert part["matches"] and part["rel_err"] <= real_size.TOLERANCE, part
    assert part["argmax_same"] > 0.9
    # Simulated time can approach the roofline, never beat it.
    assert row["roofline_ms"] < part["simulated_ms"] < 50 * row["roofline_ms"]
    if mode == "compiled":
        assert part["eager_nodes"] == 0 and part["kernels"] == 1, part


def test_real_size_models_have_their_published_dimensions(real_rows):
    qwen = real_size.config("Qwen3-0.6B")
    assert (qwen.hidden_size, qwen.vocab_size, qwen.num_hidden_layers) == (1024, 151936, 2)
    row = next(r for r in real_rows if r["model"] == "Qwen3-0.6B")
    # The embedding (tied to the LM head) and two layers of 15.7 M weights each.
    assert row["params"] == 151936 * 1024 + 2 * 15_730_944 + 1024
    # Read once: the tied table and the layers in bf16, at 128 tokens (attention aside,
    # 2 FLOPs per weight and token).
    assert row["bytes"] == 2 * row["params"]
    assert row["flops"] > 2 * 128 * (row["params"] - 1024)


def test_real_size_table_and_an_unknown_model(real_rows):
    bogus = real_rows[-1]
    assert bogus["status"] == "error" and "unknown real-size model" in bogus["error"]
    lines = real_size.format_table(real_rows).splitlines()
    assert lines[0].split()[:3] == ["model", "params", "roofline"]
    assert [line.split()[0] for line in lines[1:]] == REAL + ["Tiny-0B"]
    assert real_size.summary_line(real_rows).startswith("3 real-size models")


def test_a_mixture_of_experts_matches_when_most_tokens_do():
    # One token routed to another expert on one side differs by far more than rounding:
    # a routed model matches when ROUTED_SHARE of its tokens are within the tolerance.
    import torch

    reference = torch.randn(1, 20, 50, generator=torch.Generator().manual_seed(0))
    logits = reference.clone()
    logits[0, 7] += 0.5 * reference.abs().max()
    dense = real_size._compare(logits, reference)
    routed = real_size._compare(logits, reference, routed=True)
    assert not dense["matches"] and routed["matches"]
    assert dense["rel_err"] == routed["rel_err"] == pytest.approx(0.5, rel=1e-4)
    assert routed["tokens_within"] == 0.95
    logits[0, :3] += 0.5 * reference.abs().max()  # 4 of 20 tokens: below 90 %
    assert not real_size._compare(logits, reference, routed=True)["matches"]

"""``python -m neuronsim.tools.architectures``: tiny random models of Transformers' causal-LM
architectures on the CPU and on "neuron", each in its own interpreter. Here two
mainstream architectures and a bogus one (about 15 s: one round of two workers)."""

from __future__ import annotations

import json

import pytest

from neuronsim.tools import architectures

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

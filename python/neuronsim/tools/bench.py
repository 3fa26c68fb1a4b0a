"""Host and simulated speed of the PyTorch backend: ``python -m neuronsim.tools.bench``.

Reports, each measured in one run (ratios, never absolute gates):
- host microseconds per cached small op in functional-only mode (the per-op floor a
  model pays), as a median, and its ratio to the same op on torch's CPU;
- one training step of the tiny Qwen3 (forward, backward, AdamW): kernels launched,
  CPU fallbacks, host seconds, and simulated seconds in the timing mode;
- eager against torch.compile(backend="neuron") on the tiny Qwen3 (a forward and a
  training step): kernels launched and simulated time per step, and host seconds to
  compile each graph.

- each kernel family at the shapes of a real model (Qwen3-0.6B, 128 tokens; an MLP over
  4096 tokens; Qwen3-30B-A3B's routed experts and routing), in the timing mode without the
  runtime's launch cost: simulated microseconds against the roofline (FLOPs at TensorE's
  peak, the bytes each operand must move at least once at the core's DMA rate);
- the whole Qwen3-0.6B-shaped model in timing-only mode: a forward of 128 tokens, eager
  and compiled, against its roofline, and an eager training step of 1024 tokens.

The simulated figures of the last two parts are the same on every machine, so they are
also gated: ``--check bench/expected_torch.csv`` (the tiny Qwen3; ``--gate real`` with
bench/expected_real_shapes.csv for the real shapes) fails when one leaves its margin (both
ways), ``--update`` rewrites the file (the format of bench/expected_results.csv).

Each mode runs in its own process (the mode is chosen when the device opens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _median_us(fn, repeat: int = 300) -> float:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def _ops() -> dict:
    import torch

    x, y = torch.randn(64, 64), torch.randn(64, 64)
    X, Y = x.to("neuron"), y.to("neuron")
    cases = {
        "add 64x64": (lambda: X + Y, lambda: x + y),
        "mul by scalar 64x64": (lambda: X * 0.5, lambda: x * 0.5),
        "softmax 64x64": (lambda: X.softmax(-1), lambda: x.softmax(-1)),
        "mm 64x64x64": (lambda: X @ Y, lambda: x @ y),
    }
    out = {}
    for name, (dev, cpu) in cases.items():
        d, c = _median_us(dev), _median_us(cpu)
        out[name] = {"neuron_us": round(d, 1), "cpu_us": round(c, 1), "ratio": round(d / c, 1)}
    return out


def _train_step(steps: int = 3) -> dict:
    import torch

    import neuronsim
    from neuronsim.testing import tiny_qwen3

    model = tiny_qwen3().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (2, 32)).to("neuron")

    def step():
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.neuron.synchronize()

    step()  # compiles and loads the kernels
    neuronsim.reset_fallback_counts()
    kernels, sim, start = neuronsim.kernels_run(), neuronsim.simulated_time(), time.perf_counter()
    for _ in range(steps):
        step()
    return {
        "kernels_per_step": (neuronsim.kernels_run() - kernels) / steps,
        "fallbacks_per_step": sum(neuronsim.fallback_counts().values()) / steps,
        "host_s_per_step": round((time.perf_counter() - start) / steps, 4),
        "simulated_us_per_step": round((neuronsim.simulated_time() - sim) / steps * 1e6, 3),
    }


def _compiled() -> dict:
    """Eager and compiled steps of the tiny Qwen3 in the timing mode: per step, kernels
    launched and simulated microseconds; per compiled graph, its counts and host compile
    seconds."""
    import torch

    import neuronsim
    from neuronsim import compiler
    from neuronsim.testing import tiny_qwen3

    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1)).to("neuron")

    def measure(step) -> dict:
        step()  # builds the kernels or compiles the graphs
        torch.neuron.synchronize()
        kernels, sim = neuronsim.kernels_run(), neuronsim.simulated_time()
        step()
        torch.neuron.synchronize()
        return {
            "kernels": neuronsim.kernels_run() - kernels,
            "simulated_us": round((neuronsim.simulated_time() - sim) * 1e6, 6),
        }

    def steps(run, opt):
        def forward():
            with torch.no_grad():
                run(ids)

        def train():
            run(ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()

        return forward, train

    rows = {}
    for compiled in (False, True):
        model = tiny_qwen3().to("neuron")
        run = torch.compile(model, backend="neuron", dynamic=False) if compiled else model
        forward, train = steps(run, torch.optim.AdamW(model.parameters(), lr=1e-3))
        how = "compiled" if compiled else "eager"
        rows[f"qwen3_tiny_forward_{how}"] = measure(forward)
        rows[f"qwen3_tiny_train_step_{how}"] = measure(train)
    graphs = {
        g.name: {
            "kernels": g.kernels,
            "stages": g.stages,
            "fused_nodes": g.fused,
            "eager_nodes": len(g.eager),
            "compile_s": round(g.compile_seconds, 4),
        }
        for g in compiler.graphs()
    }
    return {"steps": rows, "graphs": graphs}


def roofline_rates() -> tuple[float, float]:
    """TensorE's BF16 peak (FLOP/s) and the DMA rate (bytes/s) of the neuron device the
    figures run on, as its chip configuration gives them (docs/cost-model.md §1; on trn2,
    2 x 128 x 128 MACs at 2.4 GHz and 16 engines x 23 B/ns)."""
    from ..device import get_device_properties

    props = get_device_properties()
    return props.peak_bf16_flops, props.dma_bytes_per_s


# The kernels' bodies alone: neither the runtime's launch nor the host's dispatch
# (docs/cost-model.md §6, §6.1), so that a kernel is judged against its roofline.
_BODIES_ONLY = {"NEURONSIM_LAUNCH": "0", "NEURONSIM_HOST_DISPATCH": "0"}


def _real_shapes() -> dict:
    """Each kernel family once at a real model's shapes: simulated microseconds (the
    kernels of the call, without launches) and its roofline."""
    import torch
    import torch.nn.functional as F

    import neuronsim

    bf16, g = torch.bfloat16, torch.Generator().manual_seed(3)

    def rand(*sizes, dtype=bf16):
        return torch.randn(*sizes, generator=g).to(dtype).to("neuron")

    hidden, inter, vocab, tokens = 1024, 3072, 151_936, 128  # Qwen3-0.6B
    x, x4k = rand(tokens, hidden), rand(4096, hidden)
    w_up, w_down, w_head = rand(inter, hidden), rand(hidden, inter), rand(vocab, hidden)
    h, gate = rand(tokens, inter), rand(tokens, inter)
    ids = torch.randint(0, vocab, (1, tokens), generator=g).to("neuron")
    logits = rand(tokens, vocab, dtype=torch.float32)
    q, kv = rand(1, 16, tokens, 128), rand(1, 8, tokens, 128)
    q4k, kv4k = rand(1, 16, 4096, 128), rand(1, 8, 4096, 128)
    norm_w = rand(hidden)
    mm = 2.0  # bytes of a bf16 element
    # Qwen3-30B-A3B's routed experts: 128 tokens to 8 of 128 experts (hidden 2048,
    # intermediate 768), routed evenly: 8 token-expert pairs per expert.
    # An embedding's gradient over a real batch: 16,384 tokens into the 151,936-row table.
    batch_tokens = 16_384
    batch_ids = torch.randint(0, vocab, (batch_tokens,), generator=g).to("neuron")
    batch_grad = rand(batch_tokens, hidden)
    experts, top_k, moe_hidden, moe_inter = 128, 8, 2048, 768
    pairs = tokens * top_k
    moe_x = rand(pairs, moe_hidden)
    moe_w = rand(experts, 2 * moe_inter, moe_hidden)
    moe_ends = torch.arange(1, experts + 1, dtype=torch.int32).mul(pairs // experts).to("neuron")
    router = rand(tokens, experts, dtype=torch.float32).softmax(-1)
    expert_ids = torch.randint(0, experts, (pairs,), generator=g).to("neuron")
    moe_out = rand(tokens, top_k, moe_hidden)

    def linear(a, w):  # x @ w.t(): FLOPs, and x, w and the result moved once
        (m, k), n = a.shape, w.shape[0]
        return lambda: F.linear(a, w), 2 * m * k * n, mm * (m * k + n * k + m * n)

    def causal_attention(q, kv):  # the FLOPs of the scores below the diagonal, both products
        heads, t = q.shape[1], q.shape[2]
        return (
            lambda: F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True),
            2 * 2 * heads * (t * (t + 1) // 2) * 128,
            mm * (2 * heads * t * 128 + 2 * kv.shape[1] * t * 128),
        )

    cases = {
        # name: (call, FLOPs, bytes each operand moves at least once)
        "lm_head_128x1024x151936": linear(x, w_head),
        "mlp_up_128x1024x3072": linear(x, w_up),
        "mlp_down_128x3072x1024": linear(h, w_down),
        "mlp_up_4096x1024x3072": linear(x4k, w_up),
        "embedding_151936x1024": (
            lambda: F.embedding(ids, w_head),
            0,
            mm * 2 * tokens * hidden,
        ),
        # The zeroed table written once, and each token's row read, added and written back.
        "embedding_backward_16384x1024_151936": (
            lambda: torch.ops.aten.embedding_dense_backward(
                batch_grad, batch_ids, vocab, -1, False
            ),
            0,
            mm * (vocab * hidden + 3 * batch_tokens * hidden),
        ),
        "rms_norm_128x1024": (
            lambda: F.rms_norm(x, (hidden,), norm_w, 1e-6),
            0,
            mm * (2 * tokens * hidden + hidden),
        ),
        "silu_mul_128x3072": (lambda: F.silu(gate) * h, 0, mm * 3 * tokens * inter),
        "log_softmax_128x151936_fp32": (
            lambda: logits.log_softmax(-1),
            0,
            4.0 * 2 * tokens * vocab,
        ),
        "attention_causal_gqa_128": causal_attention(q, kv),
        "attention_causal_gqa_4096": causal_attention(q4k, kv4k),
        # Every expert is hit, so every expert's weights are read once.
        "moe_experts_gate_up_1024x2048x1536_128e": (
            lambda: F.grouped_mm(moe_x, moe_w.transpose(-2, -1), offs=moe_ends),
            2 * pairs * moe_hidden * 2 * moe_inter,
            mm * (moe_w.numel() + pairs * (moe_hidden + 2 * moe_inter)),
        ),
        "moe_router_topk_128x128": (lambda: torch.topk(router, top_k), 0, 4.0 * tokens * experts),
        "moe_sort_1024": (
            lambda: torch.sort(expert_ids, stable=True),
            0,
            8.0 * 3 * pairs,
        ),
        "moe_topk_sum_128x8x2048": (
            lambda: moe_out.sum(dim=1),
            0,
            mm * (pairs + tokens) * moe_hidden,
        ),
    }
    peak_flops, dma_bytes_per_s = roofline_rates()
    rows = {}
    for name, (call, flops, nbytes) in cases.items():
        call()  # builds the kernels
        torch.neuron.synchronize()
        kernels, sim = neuronsim.kernels_run(), neuronsim.simulated_time()
        call()
        torch.neuron.synchronize()
        simulated = (neuronsim.simulated_time() - sim) * 1e6
        roofline = max(flops / peak_flops, nbytes / dma_bytes_per_s) * 1e6
        rows[name] = {
            "kernels": neuronsim.kernels_run() - kernels,
            "simulated_us": round(simulated, 6),
            "roofline_us": round(roofline, 3),
            "of_roofline": round(roofline / simulated, 3),
        }
    return rows


def _part_gate_rows(result: dict, prefix: str, keys: tuple) -> list[tuple[str, str, float]]:
    """The gated figures of a part whose result is {name: {figure: value}}."""
    return [(f"{prefix}/{name}", k, float(r[k])) for name, r in result.items() for k in keys]


# Figures of _compiled() that the gate checks: simulated, so the same on every machine.
def _gate_rows(result: dict, target: str) -> list[tuple[str, str, float]]:
    rows = []
    for name, r in result["steps"].items():
        rows += [(f"{target}/torch/{name}", k, float(v)) for k, v in r.items()]
    for name, g in result["graphs"].items():
        rows += [(f"{target}/torch/{name}", k, float(v)) for k, v in g.items() if k != "compile_s"]
    return rows


def _margin_ok(margin: str, expected: float, actual: float) -> bool:
    if margin.startswith("abs:"):
        return abs(actual - expected) <= float(margin[4:])
    return abs(actual - expected) <= float(margin) * abs(expected)


_GATE_HEADER = """\
# Expected simulated figures of `python -m neuronsim.tools.bench` on trn2.3xlarge: the tiny
# Qwen3 run eagerly and through torch.compile(backend="neuron"), kernels launched and
# simulated microseconds per step, and the counts of each compiled graph. Checked by
# `python -m neuronsim.tools.bench --check bench/expected_torch.csv`
# (tests/python/tools/test_bench_gate.py); regenerate with --update, which keeps margins.
# Margins as in bench/expected_results.csv.
# Rule: a commit that changes an expected value gives the reason for it in the same commit.
benchmark,metric,value,margin
"""


_REAL_GATE_HEADER = """\
# Expected simulated figures of `python -m neuronsim.tools.bench --gate real` on trn2.3xlarge:
# each kernel family once at a real model's shapes (Qwen3-0.6B at 128 tokens, an MLP over
# 4096, Qwen3-30B-A3B's experts and routing), kernels launched and simulated microseconds
# without the runtime's launch cost.
# Checked by `python -m neuronsim.tools.bench --gate real --check
# bench/expected_real_shapes.csv` (tests/python/tools/test_bench_gate.py); regenerate with
# --update. Margins as in bench/expected_results.csv.
# Rule: a commit that changes an expected value gives the reason for it in the same commit.
benchmark,metric,value,margin
"""

_MODEL_GATE_HEADER = """\
# Expected simulated figures of `python -m neuronsim.tools.bench --gate model` on
# trn2.3xlarge, in timing-only mode: the Qwen3-0.6B-shaped model (28 layers, bf16), a forward
# of 1 x 128 tokens eager and compiled, and an eager training step (AdamW) of 1 x 1024 tokens:
# kernels launched, simulated milliseconds with launches, CPU fallbacks. Checked by
# `python -m neuronsim.tools.bench --gate model --check bench/expected_real_model.csv`
# (tests/python/tools/test_bench_gate.py); regenerate with --update. Margins as in
# bench/expected_results.csv.
# Rule: a commit that changes an expected value gives the reason for it in the same commit.
benchmark,metric,value,margin
"""


def _read_expected(path: str) -> list[tuple[str, str, float, str]]:
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith(("#", "benchmark,")):
                continue
            fields = line.split(",")
            if len(fields) != 4:
                raise SystemExit(f"{path}:{number}: expected benchmark,metric,value,margin")
            rows.append((fields[0], fields[1], float(fields[2]), fields[3]))
    return rows


def check(path: str, measured: list[tuple[str, str, float]]) -> list[str]:
    """The failures of `measured` against the expected file: rows out of margin (either
    way), missing from the run, or measured but not expected."""
    actual = {(b, m): v for b, m, v in measured}
    failures, seen = [], set()
    for bench, metric, value, margin in _read_expected(path):
        seen.add((bench, metric))
        if (bench, metric) not in actual:
            failures.append(f"MISSING {bench} {metric}: expected {value}, not measured")
        elif not _margin_ok(margin, value, actual[(bench, metric)]):
            failures.append(
                f"FAIL {bench} {metric}: expected {value}, actual {actual[(bench, metric)]}, "
                f"margin {margin}"
            )
    failures += [
        f"NEW {b} {m}: {v} (not in {path})" for (b, m), v in actual.items() if (b, m) not in seen
    ]
    return failures


def update(path: str, measured: list[tuple[str, str, float]], header: str = _GATE_HEADER) -> None:
    """Rewrites the expected file `path` with `measured`, keeping the margins it had."""
    margins = {}
    if os.path.exists(path):
        margins = {(b, m): margin for b, m, _, margin in _read_expected(path)}
    with open(path, "w") as f:
        f.write(header)
        for bench, metric, value in measured:
            exact = float(value).is_integer() and metric != "simulated_us"
            default = "abs:0" if exact else "1e-06"
            f.write(f"{bench},{metric},{value!r},{margins.get((bench, metric), default)}\n")


# Qwen3-0.6B's published dimensions (random weights: only the shapes matter here).
QWEN3_0_6B = {
    "vocab_size": 151_936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 4096,
}


def _real_model() -> dict:
    """A Qwen3-0.6B-shaped model in bf16, one forward of 1 x 128 tokens, eager and
    compiled, and one eager training step (AdamW) of 1 x 1024 tokens: simulated time with
    launches, kernels, host seconds, CPU fallbacks. Run in timing-only mode: the values
    are unspecified, the simulated time is the full mode's."""
    import torch

    import neuronsim
    from neuronsim.testing import tiny_qwen3

    model = tiny_qwen3(**QWEN3_0_6B).to(torch.bfloat16).to("neuron")
    params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, QWEN3_0_6B["vocab_size"], (1, 128), generator=g).to("neuron")

    def measure(fn) -> dict:
        fn()
        torch.neuron.synchronize()
        kernels, sim, host = (
            neuronsim.kernels_run(),
            neuronsim.simulated_time(),
            time.perf_counter(),
        )
        neuronsim.reset_fallback_counts()
        fn()
        torch.neuron.synchronize()
        return {
            "simulated_ms": round((neuronsim.simulated_time() - sim) * 1e3, 3),
            "kernels": neuronsim.kernels_run() - kernels,
            "host_s": round(time.perf_counter() - host, 2),
            "fallbacks": sum(neuronsim.fallback_counts().values()),
        }

    rows = {}
    with torch.no_grad():
        rows["forward_128_eager"] = measure(lambda: model(ids))
        compiled = torch.compile(model, backend="neuron", dynamic=False)
        rows["forward_128_compiled"] = measure(lambda: compiled(ids))
    # The roofline of a forward: every parameter read once at the core's DMA rate, the
    # FLOPs (2 per parameter and token, attention's aside at 128 tokens) at TensorE's peak.
    flops = 2 * params * 128
    peak_flops, dma_bytes_per_s = roofline_rates()
    roofline = max(flops / peak_flops, 2.0 * params / dma_bytes_per_s) * 1e3
    for name in ("forward_128_eager", "forward_128_compiled"):
        rows[name]["roofline_ms"] = round(roofline, 3)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, QWEN3_0_6B["vocab_size"], (1, 1024), generator=g).to("neuron")

    def step():
        model(ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()

    rows["train_step_1024_eager"] = measure(step)
    return rows


def _part(name: str) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    parts = {"ops": _ops, "train_step": _train_step, "compiled": _compiled}
    return {**parts, "real_shapes": _real_shapes, "real_model": _real_model}[name]()


def _run(part: str, mode: str, **env_extra: str) -> dict:
    env = dict(os.environ, NEURONSIM_MODE=mode, HF_HUB_OFFLINE="1", **env_extra)
    done = subprocess.run(
        [sys.executable, "-m", "neuronsim.tools.bench", "--part", part],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"neuronsim.tools.bench: the {part} part failed in {mode}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--part",
        choices=["ops", "train_step", "compiled", "real_shapes", "real_model"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--gate",
        choices=["tiny", "real", "model"],
        default="tiny",
        help="the gated part --check, --update and --csv run: the tiny Qwen3 (default, "
        "bench/expected_torch.csv), the kernels at real shapes "
        "(bench/expected_real_shapes.csv) or the Qwen3-0.6B-shaped model "
        "(bench/expected_real_model.csv)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--check", metavar="CSV", help="run only the gated part and check it against CSV"
    )
    parser.add_argument("--update", metavar="CSV", help="run only the gated part and rewrite CSV")
    parser.add_argument(
        "--csv",
        metavar="PATH",
        help="run only the gated part and write its figures as benchmark,metric,value rows "
        "(what `neuron-sim bench --suite` records)",
    )
    args = parser.parse_args(argv)
    if args.part:
        print(json.dumps(_part(args.part)))
        return 0
    if args.check or args.update or args.csv:
        if args.gate == "real":
            result = _run("real_shapes", "functional-and-timing", **_BODIES_ONLY)
            measured = _part_gate_rows(result, "trn2/real", ("kernels", "simulated_us"))
            header = _REAL_GATE_HEADER
        elif args.gate == "model":
            result = _run("real_model", "timing-only")
            keys = ("kernels", "simulated_ms", "fallbacks")
            measured, header = _part_gate_rows(result, "trn2/model", keys), _MODEL_GATE_HEADER
        else:
            result = _run("compiled", "functional-and-timing")
            measured, header = _gate_rows(result, "trn2"), _GATE_HEADER
        if args.csv:
            with open(args.csv, "w") as f:
                f.write("benchmark,metric,value\n")
                f.writelines(f"{b},{m},{v!r}\n" for b, m, v in measured)
            print(f"neuronsim.tools.bench: wrote {len(measured)} figures to {args.csv}")
            if not (args.check or args.update):
                return 0
        if args.update:
            update(args.update, measured, header)
            print(f"neuronsim.tools.bench: wrote {len(measured)} rows to {args.update}")
            return 0
        failures = check(args.check, measured)
        for line in failures:
            print(line)
        print(
            f"neuronsim.tools.bench: {len(measured) - len(failures)} of {len(measured)} rows pass"
        )
        return 1 if failures else 0
    results = {
        "ops_functional_only": _run("ops", "functional-only"),
        "train_step_functional_only": _run("train_step", "functional-only"),
        "train_step_timing": _run("train_step", "functional-and-timing"),
        "compiled_timing": _run("compiled", "functional-and-timing"),
        "real_shapes": _run("real_shapes", "functional-and-timing", **_BODIES_ONLY),
        "real_model": _run("real_model", "timing-only"),
    }
    print("host time per cached op, functional-only (median):")
    for name, r in results["ops_functional_only"].items():
        print(
            f"  {name:22s} {r['neuron_us']:8.1f} us   torch CPU {r['cpu_us']:7.1f} us   "
            f"ratio {r['ratio']:.1f}x"
        )
    for key, label in (
        ("train_step_functional_only", "functional-only"),
        ("train_step_timing", "functional-and-timing"),
    ):
        r = results[key]
        print(
            f"tiny Qwen3 training step, {label}: {r['kernels_per_step']:.0f} kernels, "
            f"{r['fallbacks_per_step']:.0f} CPU fallbacks, host {r['host_s_per_step']:.3f} s, "
            f"simulated {r['simulated_us_per_step']:.1f} us"
        )
    steps = results["compiled_timing"]["steps"]
    print("tiny Qwen3, eager against torch.compile(backend='neuron'), per step (timing mode):")
    for what in ("forward", "train_step"):
        e, c = steps[f"qwen3_tiny_{what}_eager"], steps[f"qwen3_tiny_{what}_compiled"]
        print(
            f"  {what:10s} eager {e['kernels']:4d} kernels {e['simulated_us']:9.1f} us   "
            f"compiled {c['kernels']:4d} kernels {c['simulated_us']:9.1f} us"
        )
    for name, g in results["compiled_timing"]["graphs"].items():
        print(
            f"  graph {name}: {g['kernels']} kernel(s), {g['stages']} stages, "
            f"{g['fused_nodes']} fused, {g['eager_nodes']} eager nodes, "
            f"compiled in {g['compile_s']:.3f} s"
        )
    print(
        "kernels at real shapes (timing mode, launches and dispatch left out): "
        "simulated against roofline"
    )
    for name, r in results["real_shapes"].items():
        print(
            f"  {name:30s} {r['kernels']:3d} kernel(s) {r['simulated_us']:10.1f} us   "
            f"roofline {r['roofline_us']:9.1f} us   {100 * r['of_roofline']:5.1f} %"
        )
    print("Qwen3-0.6B-shaped model, bf16 (timing-only mode, launches included):")
    for name, r in results["real_model"].items():
        line = (
            f"  {name:24s} {r['simulated_ms']:9.2f} ms simulated  {r['kernels']:5d} kernels  "
            f"host {r['host_s']:6.2f} s  {r['fallbacks']} CPU fallbacks"
        )
        if "roofline_ms" in r:
            line += f"  roofline {r['roofline_ms']:.2f} ms"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

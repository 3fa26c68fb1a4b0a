"""PyTorch's OpInfo database against the CPU: ``python -m neuronsim.tools.opinfo``.

Every op of ``torch.testing._internal.common_methods_invocations.op_db`` runs, for each
dtype the device claims that the CPU supports for it, on its OpInfo samples on "neuron"
and on the CPU, the way PyTorch's ``TestCommon.test_compare_cpu`` does: samples made on
"neuron" (from a fixed seed, so a run is reproducible) and copied to the CPU. Each entry
runs once with contiguous samples and once with the non-contiguous ones of
``test_noncontiguous_samples`` (each tensor a strided view whose gaps hold NaN, True or
12, made so on both sides). Only the forward results are compared; fallbacks are
counted while the op runs, not while its samples are made.

An entry (op, dtype, layout) gets one status:

- ``pass``: every sample matched the CPU and nothing fell back to the CPU;
- ``fallback``: every sample matched, but some op ran on the CPU fallback (named);
- ``mismatch``: a result differs from the CPU's beyond the dtype's tolerance;
- ``error``: "neuron" raised where the CPU did not (the exception is kept);
- ``crash``: the process died (each worker runs in its own interpreter, so the run goes
  on and the entry is named);
- ``timeout``: the entry did not finish in time;
- ``skip``: no sample ran (the CPU refused them all, the op's OpInfo skips
  ``test_compare_cpu`` or expects it to fail for every device, or the op is random;
  samples with dropout are left out).

``--expected FILE`` compares the run with an expected-failure list (CSV: op, dtype,
layout, status, reason): an entry that fails without being listed, or that is listed and
now passes, is reported, and the exit status is 1. A crash or a timeout is never
expected. ``--write-expected FILE`` writes the list of this run, keeping the reasons an
earlier list gave.
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import fnmatch
import json
import os
import subprocess
import sys
import time
import warnings

# The dtypes the device claims, as in the OpInfo dtype sets.
DTYPE_NAMES = ("float32", "bfloat16", "float16", "int64", "int32", "bool")
LAYOUTS = ("contiguous", "noncontiguous")
FAILURES = ("mismatch", "error", "crash", "timeout")
# Tolerances per dtype: test_compare_cpu's 1e-3 for float32; one or two units in the last
# place for the 16-bit floats, whose results the engines round from FP32 like the CPU.
TOLERANCE = {
    "float32": {"atol": 1e-3, "rtol": 1e-3},
    "bfloat16": {"atol": 2e-2, "rtol": 2e-2},
    "float16": {"atol": 2e-3, "rtol": 2e-3},
}
# Ops whose results are random draws (compared only by the tests of the sampling ops).
RANDOM_OPS = {
    "bernoulli",
    "normal",
    "uniform",
    "multinomial",
    "randint",
    "randn",
    "rand_like",
    "randn_like",
    "randint_like",
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "empty_strided",
    "empty_permuted",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "torch.randn",
    "torch.rand",
    "nn.functional.fractional_max_pool2d",  # draws its pooling regions
    "nn.functional.fractional_max_pool3d",
    "svd_lowrank",  # a random projection
    "pca_lowrank",
    "nn.functional.multi_head_attention_forward",  # its samples pass dropout_p=0.5 by position
}
ENTRY_TIMEOUT_S = 120


@dataclasses.dataclass
class Result:
    op: str
    dtype: str
    layout: str
    status: str
    fallbacks: str = ""  # "op:count;op:count" of the CPU fallbacks seen
    message: str = ""


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def database():
    """op_db, by id (name.variant)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_id(op): op for op in op_db}


def entries(patterns=None, dtypes=DTYPE_NAMES, layouts=LAYOUTS):
    """(op id, dtype, layout) of every entry to run: ops matching one of the glob
    patterns (all when none), each dtype the CPU supports for it."""
    import torch

    out = []
    for name, op in sorted(database().items()):
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        supported = op.supported_dtypes("cpu")
        for dt in dtypes:
            if getattr(torch, dt) in supported:
                out.extend((name, dt, layout) for layout in layouts)
    return out


def _skip_reason(op, dtype, layout) -> str | None:
    """Why the op's OpInfo skips this comparison on every device, or None."""
    if op.name in RANDOM_OPS or op_id(op) in RANDOM_OPS:
        return "random results"
    test = "test_noncontiguous_samples" if layout == "noncontiguous" else "test_compare_cpu"

    def probe():
        pass

    for info in op.decorators:
        if not hasattr(info, "cls_name"):  # a decorator of every test (a precision override)
            continue
        if info.cls_name not in (None, "TestCommon") or info.test_name != test:
            continue
        if info.device_type is not None or (info.dtypes and dtype not in info.dtypes):
            continue
        for decorator in info.decorators:
            try:
                wrapped = decorator(probe)
            except Exception:
                continue
            if getattr(wrapped, "__unittest_skip__", False):
                return f"OpInfo skips it: {getattr(wrapped, '__unittest_skip_why__', '')}"
            if getattr(wrapped, "__unittest_expecting_failure__", False):
                return "OpInfo expects it to fail on every device"
    return None


def _random_sample(sample) -> bool:
    """A sample whose result is random: attention or a loss with dropout."""
    kwargs = sample.kwargs
    return bool(kwargs.get("dropout_p", 0)) or (
        bool(kwargs.get("dropout", 0)) and kwargs.get("training", True)
    )


def _compare(actual, expected) -> None:
    """assert_close leaf by leaf, each with the tolerance of its expected dtype (an
    integer op's float result is compared as a float)."""
    import torch
    from torch.utils._pytree import tree_flatten

    got, got_spec = tree_flatten(actual)
    want, want_spec = tree_flatten(expected)
    if not any(isinstance(e, torch.Tensor) for e in want):  # sizes, numbers: by value
        if list(got) != list(want):
            raise AssertionError(f"{actual!r} != {expected!r}")
        return
    if got_spec != want_spec:
        raise AssertionError(f"the results differ in structure: {got_spec} vs {want_spec}")
    for a, e in zip(got, want):
        name = str(e.dtype).removeprefix("torch.") if isinstance(e, torch.Tensor) else ""
        tol = TOLERANCE.get(name, {"atol": 0, "rtol": 0} if name else {})
        torch.testing.assert_close(a, e, equal_nan=True, check_device=False, **tol)


def _summarise(exc: BaseException) -> str:
    lines = [line.strip() for line in f"{type(exc).__name__}: {exc}".splitlines()]
    return "; ".join(line for line in lines if line)[:400]


def _fallback_text(counts: dict[str, int]) -> str:
    return ";".join(f"{name}:{n}" for name, n in sorted(counts.items()))


def run_entry(op, dtype_name: str, layout: str) -> Result:
    """Runs one entry in this process (see the module docstring for its statuses)."""
    import torch
    from torch.utils._pytree import tree_map

    import neuronsim

    name = op_id(op)
    result = Result(name, dtype_name, layout, "skip")
    dtype = getattr(torch, dtype_name)
    reason = _skip_reason(op, dtype, layout)
    if reason:
        result.message = reason
        return result

    def to_cpu(x):
        return tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, x)

    torch.manual_seed(0)
    ran = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # made on the device, as test_compare_cpu makes them
            samples = list(op.sample_inputs("neuron", dtype))
        except Exception as exc:
            result.status, result.message = "error", f"making samples: {_summarise(exc)}"
            return result
        neuronsim.reset_fallback_counts()
        for i, sample in enumerate(samples):
            if _random_sample(sample):
                continue
            where = f"sample {i} ({sample.summary()[:120]})"
            try:
                cpu_sample = sample.transform(to_cpu)
                if layout == "noncontiguous":
                    sample, cpu_sample = sample.noncontiguous(), cpu_sample.noncontiguous()
            except Exception as exc:
                result.status, result.message = "error", f"{where}: making it: {_summarise(exc)}"
                break
            try:
                expected = cpu_sample.output_process_fn_grad(
                    op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
                )
            except Exception:
                continue  # the CPU refuses this sample: not the device's concern
            try:
                actual = sample.output_process_fn_grad(
                    op(sample.input, *sample.args, **sample.kwargs)
                )
                actual = to_cpu(actual)
            except Exception as exc:
                result.status, result.message = "error", f"{where}: {_summarise(exc)}"
                break
            try:
                _compare(actual, expected)
            except Exception as exc:
                result.status, result.message = "mismatch", f"{where}: {_summarise(exc)}"
                break
            ran += 1
        else:
            if ran:
                result.status = "fallback" if neuronsim.fallback_counts() else "pass"
            else:
                result.message = "the CPU refused every sample"
    result.fallbacks = _fallback_text(neuronsim.fallback_counts())
    return result


# --- running entries in worker interpreters -------------------------------------------


def _worker(path: str) -> None:
    """Runs the entries listed in the JSON file at path, one JSON line per event."""
    os.environ.setdefault("NEURONSIM_MODE", "functional-only")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import neuronsim  # noqa: F401  (registers the device)

    db = database()
    with open(path) as f:
        todo = json.load(f)
    for name, dtype_name, layout in todo:
        print(json.dumps({"start": [name, dtype_name, layout]}), flush=True)
        try:
            result = run_entry(db[name], dtype_name, layout)
        except BaseException as exc:  # an escape from run_entry itself
            result = Result(name, dtype_name, layout, "error", message=_summarise(exc))
        print(json.dumps({"result": dataclasses.asdict(result)}), flush=True)


def _run_worker(todo, tmpdir, index, progress):
    """Runs todo in worker interpreters until every entry has a result; a crash or a
    timeout is recorded against the entry that was running, and a new worker goes on."""
    import select

    results = []
    while todo:
        path = os.path.join(tmpdir, f"todo-{index}.json")
        with open(path, "w") as f:
            json.dump(todo, f)
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuronsim.tools.opinfo", "--worker", path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        current, started, buffer = None, time.monotonic(), ""
        stderr_tail = collections.deque(maxlen=20)
        done = 0
        while True:
            ready, _, _ = select.select([proc.stdout, proc.stderr], [], [], 1.0)
            if proc.stderr in ready:
                line = proc.stderr.readline()
                if line:
                    stderr_tail.append(line.rstrip())
            if proc.stdout in ready:
                line = proc.stdout.readline()
                if not line:
                    break
                event = json.loads(line)
                if "start" in event:
                    current, started = tuple(event["start"]), time.monotonic()
                else:
                    results.append(Result(**event["result"]))
                    progress(results[-1])
                    current, done = None, done + 1
            if current and time.monotonic() - started > ENTRY_TIMEOUT_S:
                proc.kill()
                results.append(Result(*current, "timeout", message=f"over {ENTRY_TIMEOUT_S} s"))
                progress(results[-1])
                done += 1
                current = None
                break
            if proc.poll() is not None and not ready:
                break
        proc.wait()
        del buffer
        if current:
            tail = " | ".join(list(stderr_tail)[-3:])
            results.append(
                Result(*current, "crash", message=f"exit status {proc.returncode}: {tail}"[:300])
            )
            progress(results[-1])
            done += 1
        todo = todo[done:]
    return results


def run(todo, jobs=1, progress=None):
    """Runs the entries in ``jobs`` parallel chains of worker interpreters."""
    import concurrent.futures
    import tempfile

    progress = progress or (lambda result: None)
    chunks = [todo[i::jobs] for i in range(jobs)]
    with tempfile.TemporaryDirectory() as tmpdir:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            parts = pool.map(
                lambda ic: _run_worker(ic[1], tmpdir, ic[0], progress), enumerate(chunks)
            )
            results = [r for part in parts for r in part]
    return sorted(results, key=lambda r: (r.op, r.dtype, r.layout))


# --- the expected-failure list -----------------------------------------------------------

FIELDS = ("op", "dtype", "layout", "status", "reason")


def read_expected(path) -> dict[tuple[str, str, str], dict[str, str]]:
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["op"].startswith("#")]
    return {(r["op"], r["dtype"], r["layout"]): r for r in rows}


def write_expected(path, results, old=None) -> None:
    old = old or {}
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        for r in results:
            if r.status in ("mismatch", "error"):
                kept = old.get((r.op, r.dtype, r.layout), {}).get("reason")
                writer.writerow(
                    {
                        "op": r.op,
                        "dtype": r.dtype,
                        "layout": r.layout,
                        "status": r.status,
                        "reason": kept or r.message,
                    }
                )


def compare(results, expected) -> list[str]:
    """What differs from the expected-failure list, one line each."""
    problems = []
    for r in results:
        listed = expected.get((r.op, r.dtype, r.layout))
        where = f"{r.op} [{r.dtype}, {r.layout}]"
        if r.status in ("crash", "timeout"):
            problems.append(f"{where}: {r.status}: {r.message}")
        elif r.status in FAILURES and not listed:
            problems.append(f"{where}: unexpected {r.status}: {r.message}")
        elif listed and r.status not in FAILURES:
            problems.append(
                f"{where}: expected to fail but now {r.status}: "
                "remove it from the expected-failure list"
            )
    return problems


def tally(results) -> str:
    lines = []
    for layout in LAYOUTS:
        counts = collections.Counter(r.status for r in results if r.layout == layout)
        total = sum(counts.values())
        parts = ", ".join(
            f"{counts[s]} {s}"
            for s in ("pass", "fallback", "mismatch", "error", "crash", "timeout", "skip")
        )
        lines.append(f"{layout}: {total} entries: {parts}")
    ops = collections.Counter()
    for r in results:
        for item in filter(None, r.fallbacks.split(";")):
            ops[item.rsplit(":", 1)[0]] += 1
    if ops:
        lines.append(
            "fallback ops by entries: "
            + ", ".join(f"{name} {n}" for name, n in ops.most_common(25))
        )
    return "\n".join(lines)


def figures(results, name: str) -> list[tuple[str, str, int]]:
    """The tally as benchmark figures (what ``neuron-sim bench --suite`` records): entries,
    those that ran with no fallback, and those that fell back, mismatched or failed."""
    counts = collections.Counter(r.status for r in results)
    return [
        (name, "entries", len(results)),
        (name, "no_fallback", counts["pass"]),
        (name, "fallback", counts["fallback"]),
        (name, "mismatch", counts["mismatch"]),
        (name, "error", counts["error"] + counts["crash"] + counts["timeout"]),
    ]


def write_figures(path, results, name: str) -> None:
    with open(path, "w") as f:
        f.write("benchmark,metric,value\n")
        f.writelines(f"{b},{m},{v}\n" for b, m, v in figures(results, name))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.opinfo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ops", nargs="*", help="glob patterns of op ids (default: all)")
    parser.add_argument("--dtypes", nargs="*", default=list(DTYPE_NAMES), choices=DTYPE_NAMES)
    parser.add_argument("--layouts", nargs="*", default=list(LAYOUTS), choices=LAYOUTS)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--every", type=int, default=1, metavar="N", help="every N-th entry of those selected"
    )
    parser.add_argument("--csv", help="write every entry's result here")
    parser.add_argument(
        "--figures",
        metavar="PATH",
        help="write the tally as benchmark,metric,value rows (what `neuron-sim bench --suite` "
        "records): entries, no_fallback, fallback, mismatch, error",
    )
    parser.add_argument(
        "--figures-name", default="opinfo", help="the benchmark name of --figures' rows"
    )
    parser.add_argument("--expected", help="the expected-failure list to check against")
    parser.add_argument("--write-expected", help="write this run's failures as the list")
    parser.add_argument("-q", "--quiet", action="store_true", help="no line per failure")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker)
        return 0

    todo = entries(args.ops, args.dtypes, args.layouts)[:: max(1, args.every)]
    print(f"{len(todo)} entries on {args.jobs} workers", file=sys.stderr, flush=True)
    counter = {"n": 0}

    def progress(r):
        counter["n"] += 1
        if not args.quiet and r.status in FAILURES:
            print(
                f"[{counter['n']}/{len(todo)}] {r.op} [{r.dtype}, {r.layout}]: "
                f"{r.status}: {r.message}",
                file=sys.stderr,
                flush=True,
            )
        elif counter["n"] % 100 == 0:
            print(f"[{counter['n']}/{len(todo)}]", file=sys.stderr, flush=True)

    results = run(todo, args.jobs, progress)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(
                f, [f.name for f in dataclasses.fields(Result)], lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(dataclasses.asdict(r) for r in results)
    print(tally(results))
    if args.figures:
        write_figures(args.figures, results, args.figures_name)
    status = 0
    if args.expected:
        expected = read_expected(args.expected)
        problems = compare(results, expected)
        for line in problems:
            print(line)
        print(f"{len(problems)} differences from {args.expected}")
        status = 1 if problems else 0
    if args.write_expected:
        old = read_expected(args.write_expected) if os.path.exists(args.write_expected) else {}
        write_expected(args.write_expected, results, old)
    elif any(r.status in ("crash", "timeout") for r in results):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

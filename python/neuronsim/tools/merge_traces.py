"""One timeline for a job: ``python -m neuronsim.tools.merge_traces -o job.json rank*.json``.

Merges the per-rank Perfetto/Chrome traces of a distributed job (``neuronsim.profile`` or
``NEURONSIM_TRACE`` in each process) into one trace: each rank's NeuronCores become
processes named ``rank <r>: ...``, all on the simulated clock the ranks share (a collective
finishes at the same simulated time on every rank), and the slices of one collective on the
different ranks (named alike, ``... [group <g> #<n>]``) are joined by flow arrows, rank to
rank. A rank is the number in its file name (``trace.rank3.json``), else its position in
the arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# Process ids of one rank's trace stay below this; rank r's are shifted by r times it.
_PID_STRIDE = 1 << 20
_COLLECTIVE = re.compile(r"\[(group [^\]]+ #\d+)\]")
_RANK_IN_NAME = re.compile(r"rank[_.-]?(\d+)", re.IGNORECASE)


def _rank_of(path: Path, position: int) -> int:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else position


def _load(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"merge_traces: {path}: not a readable JSON trace ({err})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise SystemExit(f"merge_traces: {path}: no traceEvents list")
    return events


def merge(paths: list[Path]) -> dict:
    """The merged trace of the per-rank traces at `paths`."""
    ranks = [_rank_of(p, i) for i, p in enumerate(paths)]
    if len(set(ranks)) != len(ranks):
        raise SystemExit(f"merge_traces: two files have the same rank: {dict(zip(ranks, paths))}")
    merged: list[dict] = []
    collectives: dict[str, list[tuple[int, dict]]] = {}  # link -> (rank, slice)
    for rank, path in sorted(zip(ranks, paths)):
        for event in _load(path):
            event = dict(event)
            if isinstance(event.get("pid"), int):
                event["pid"] += rank * _PID_STRIDE
            if event.get("ph") == "M" and event.get("name") == "process_name":
                event["args"] = {"name": f"rank {rank}: {event['args'].get('name', '')}"}
            elif event.get("ph") == "M" and event.get("name") == "process_sort_index":
                event["args"] = {"sort_index": rank * _PID_STRIDE + event["args"]["sort_index"]}
            if isinstance(event.get("id"), int):  # flows of different ranks stay apart
                event["id"] += rank * _PID_STRIDE
            merged.append(event)
            if event.get("ph") == "X" and (m := _COLLECTIVE.search(event.get("name", ""))):
                collectives.setdefault(m.group(1), []).append((rank, event))
    links = 0
    for key, slices in sorted(collectives.items()):
        slices.sort(key=lambda rs: rs[0])
        for (_, a), (_, b) in zip(slices, slices[1:]):
            links += 1
            flow = {"name": key, "cat": "collective", "id": f"cc{links}"}
            merged.append({**flow, "ph": "s", "pid": a["pid"], "tid": a["tid"], "ts": a["ts"]})
            merged.append(
                {**flow, "ph": "f", "bp": "e", "pid": b["pid"], "tid": b["tid"], "ts": b["ts"]}
            )
    return {
        "traceEvents": merged,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "neuronsim merge_traces",
            "ranks": sorted(ranks),
            "collectives_linked": len(collectives),
            "links": links,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.merge_traces", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("traces", nargs="+", type=Path, help="per-rank trace files")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the merged trace")
    args = parser.parse_args(argv)
    trace = merge(args.traces)
    args.output.write_text(json.dumps(trace))
    info = trace["otherData"]
    print(
        f"merged {len(args.traces)} ranks into {args.output}: "
        f"{info['collectives_linked']} collectives linked across ranks",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

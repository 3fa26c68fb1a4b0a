"""Running a compiled graph: its steps in order, eager nodes on the device's eager
kernels and segments as their NEFFs, values kept by FX node."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
from collections import Counter
from typing import Any

import torch
import torch.fx

from .. import _C, __version__
from .expressions import Place, meta
from .plan import SegmentPlan


@dataclasses.dataclass
class Stats:
    graphs: int = 0  # graphs compiled (forward, backward and inference graphs)
    recompiles: int = 0  # compiles of a frame compiled before (a new shape, a failed guard)
    neffs_built: int = 0
    neff_cache_hits: int = 0  # NEFFs found in the on-disk cache instead of built
    failed_segments: int = 0  # segments run eagerly whole because a kernel refused them
    eager_nodes: Counter = dataclasses.field(default_factory=Counter)  # split out, by op
    eager_runs: Counter = dataclasses.field(default_factory=Counter)  # their runs, by op


STATS = Stats()


def cache_dir() -> pathlib.Path:
    """Where compiled graphs are kept across processes: ``NEURONSIM_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/neuronsim`` (``~/.cache/neuronsim``)."""
    if path := os.environ.get("NEURONSIM_CACHE_DIR"):
        return pathlib.Path(path)
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "neuronsim"


@functools.cache
def build_id() -> str:
    """What built the programs: the digest of the backend's libraries, so that a NEFF
    cached by another build of the kernels is never taken for this one's."""
    digest = hashlib.sha256(__version__.encode())
    so = pathlib.Path(_C.__file__)
    for path in [so, *sorted((so.parent / "lib").glob("libneuronsim*"))]:
        with open(path, "rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


def op_name(node: torch.fx.Node) -> str:
    """The aten name of a node's op ("aten::embedding"), as fallback_counts() spells it."""
    return getattr(node.target, "_name", None) or getattr(node.target, "__name__", str(node.target))


class CompiledSegment:
    """A segment's NEFF and how the graph's values bind to its tensors."""

    def __init__(self, name: str, plan: SegmentPlan):
        self.name = name
        self.inputs = plan.inputs
        self.outputs = plan.outputs
        self.escapes = plan.escapes
        self.stages = len(plan.stages)
        self.fused = plan.fused
        self.nodes = plan.nodes
        # The device of the segment's values (a node with several results has a tuple).
        self.device = next(meta(n).device for n in plan.nodes if isinstance(meta(n), torch.Tensor))
        text = json.dumps(plan.plan(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        key = hashlib.sha256(f"{build_id()}\n{_C.instance()}\n{text}".encode()).hexdigest()
        self.path = str(cache_dir() / "graphs" / f"{key[:32]}.neff")
        if os.path.exists(self.path):
            STATS.neff_cache_hits += 1
        else:
            _C.compile_graph(text, name, self.path)  # ValueError when a kernel refuses
            STATS.neffs_built += 1

    def run(self, env: dict) -> None:
        bound: dict[str, torch.Tensor] = {}
        for name, node in self.inputs:
            bound[name] = as_planned(env[node], meta(node))
            if bound[name].dtype == torch.int64:  # indices, read as their int32 words
                bound[name] = bound[name].view(torch.int32)
        device = self.device
        # Each output is a tensor of its own (a graph's output that is a view of a shared
        # buffer could not be modified in place, as a loss is by a Trainer).
        for p in self.outputs:
            bound[p.tensor] = torch.empty_strided(p.sizes, p.strides, dtype=p.dtype, device=device)
        _C.run_graph(self.name, self.path, list(bound.items()))
        for node, place in self.escapes:
            env[node] = view_of(bound[place.tensor], place)


def as_planned(t: torch.Tensor, planned: torch.Tensor) -> torch.Tensor:
    """`t` with the strides the plan was made for (a copy when an eager kernel gave it
    others)."""
    if tuple(t.shape) != tuple(planned.shape) or t.dtype != planned.dtype:
        raise RuntimeError(
            f"torch.compile(backend='neuron'): a graph input is {t.dtype}{list(t.shape)}, "
            f"its graph was compiled for {planned.dtype}{list(planned.shape)}"
        )
    if t.numel() <= 1 or tuple(t.stride()) == tuple(planned.stride()):
        return t
    out = torch.empty_strided(planned.shape, planned.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def view_of(base: torch.Tensor, place: Place) -> torch.Tensor:
    """The place's view of the tensor bound to it: the tensor itself when it is all of it."""
    if place.offset == 0 and place.sizes == tuple(base.shape) and place.strides == base.stride():
        return base
    return torch.as_strided(base, place.sizes, place.strides, base.storage_offset() + place.offset)


def run_eager(node: torch.fx.Node, env: dict) -> None:
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), env.__getitem__)
    env[node] = node.target(*args, **kwargs)


class CompiledGraph:
    """The callable a compiled FX graph becomes (boxed: called with a list of inputs).
    `steps` are ("segment", CompiledSegment), ("eager", node) for a node split out of
    the program, ("view", node) for a view left between eager nodes (no work), or
    ("empty", node) for a result with no elements."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, steps: list[tuple[str, Any]]):
        # An instance attribute: Dynamo wraps backward graphs with functools.wraps, which
        # copies the instance's __dict__ only.
        self._boxed_call = True
        self.name = name
        self.steps = steps
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.attributes = {n: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
        self.output = next(n for n in gm.graph.nodes if n.op == "output")

    def __call__(self, args: list) -> Any:
        env: dict = dict(zip(self.placeholders, args))
        env.update(self.attributes)
        for kind, item in self.steps:
            if kind == "segment":
                item.run(env)
            elif kind == "empty":
                v = meta(item)
                env[item] = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
            else:
                run_eager(item, env)
                if kind == "eager":
                    STATS.eager_runs[op_name(item)] += 1
        return torch.fx.node.map_arg(self.output.args[0], env.__getitem__)

"""``torch.compile(model, backend="neuron")``: each FX graph becomes one program.

Dynamo hands the backend a graph; AOTAutograd turns it into core aten forward and
backward (or inference) graphs; each of those is cut into segments of nodes this
package lowers (``ops.py``, ``plan.py``, ``lowering.py``), separated by nodes it does not,
which run eagerly on the device and are counted (``stats().eager_nodes``) or, in strict mode
(``neuronsim.strict_mode()``, ``NEURONSIM_STRICT=1``), refused with an error naming the
node. A segment is one program, built once into a NEFF in the on-disk cache
(``NEURONSIM_CACHE_DIR``) and run through the runtime as one kernel named after the
graph and its source module. A model without splits runs one kernel per graph.

Shapes are static, as on the hardware: a new input shape is a new compile, counted in
``stats().recompiles`` and logged (logger ``neuronsim.compiler``), and automatic dynamic
shapes are switched off when the backend first compiles.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any

import torch
import torch.fx

from .. import strict
from .constants import fold_constants
from .decompositions import DECOMPOSITIONS
from .executor import STATS, CompiledGraph, CompiledSegment, Stats, cache_dir, op_name
from .indices import infer_bounds
from .layouts import forget_layouts, keep_transposed_parameters
from .lowering import lower
from .ops import Unsupported
from .schedule import cut

log = logging.getLogger("neuronsim.compiler")


@dataclasses.dataclass
class GraphReport:
    """What compiling one graph gave."""

    name: str
    nodes: int  # call nodes of the core aten graph
    kernels: int  # programs (NEFFs) one run of the graph launches
    stages: int  # kernels' stages (matmuls, reductions, stored expressions)
    fused: int  # pointwise nodes computed on chip only: HBM round trips saved
    eager: list[str]  # the nodes split out to run eagerly, by op
    constants: list[str]  # nodes of no graph input, computed once at compile, by op
    kept_transposed: int  # transposes of parameters kept between calls
    compile_seconds: float
    neffs: list[str]


_REPORTS: list[GraphReport] = []


def stats() -> Stats:
    """Counters since the process started (or reset_stats())."""
    return STATS


def graphs() -> list[GraphReport]:
    """A report per graph compiled, in order."""
    return list(_REPORTS)


def reset_stats() -> None:
    _REPORTS.clear()
    fresh = Stats()
    for field in dataclasses.fields(Stats):
        setattr(STATS, field.name, getattr(fresh, field.name))


def _refuse(node: torch.fx.Node, why: str) -> None:
    if strict():
        raise NotImplementedError(
            f"torch.compile(backend='neuron'): node {node.name} ({op_name(node)}) does not "
            f"lower to the graph program ({why}); strict mode refuses to run it eagerly"
        )


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs: list,
    *,
    name: str,
    parameters: list[bool] | None = None,
) -> CompiledGraph:
    """A core aten graph (from AOTAutograd) as a CompiledGraph. ``parameters`` flags the
    inputs that are parameters of an inference graph, whose transposes are kept between
    calls (``layouts.py``)."""
    start = time.perf_counter()
    steps: list[tuple[str, Any]] = []
    eager: list[str] = []
    segments: list[CompiledSegment] = []
    constants = fold_constants(gm)
    infer_bounds(gm)
    kept = keep_transposed_parameters(gm, parameters) if parameters else 0
    for step in cut(gm.graph, _refuse):
        if step.eager is not None:
            kind = "empty" if step.empty else "eager" if step.work else "view"
            steps.append((kind, step.eager))
            if step.work:
                eager.append(op_name(step.eager))
            continue
        plan = step.segment
        try:
            lower(plan)
            if not plan.stages:  # views only, between eager nodes: nothing to compute
                steps.extend(("view", n) for n in plan.nodes)
                continue
            segment = CompiledSegment(f"{name}.{len(segments)}", plan)
        except (Unsupported, ValueError) as why:
            # The kernels refused a case the checks let through: the segment runs eagerly.
            for node in plan.nodes:
                _refuse(node, f"its segment does not build: {why}")
                steps.append(("eager", node))
                eager.append(op_name(node))
            STATS.failed_segments += 1
            log.warning("%s: a segment of %d nodes runs eagerly: %s", name, len(plan.nodes), why)
            continue
        segments.append(segment)
        steps.append(("segment", segment))
    for op in eager:
        STATS.eager_nodes[op] += 1
    STATS.graphs += 1
    report = GraphReport(
        name=name,
        nodes=sum(1 for n in gm.graph.nodes if n.op == "call_function"),
        kernels=len(segments),
        stages=sum(s.stages for s in segments),
        fused=sum(s.fused for s in segments),
        eager=eager,
        constants=constants,
        kept_transposed=kept,
        compile_seconds=time.perf_counter() - start,
        neffs=[s.path for s in segments],
    )
    _REPORTS.append(report)
    log.info(
        "%s: %d nodes -> %d kernel(s), %d stages, %d fused, %d eager, %.3f s",
        name,
        report.nodes,
        report.kernels,
        report.stages,
        report.fused,
        len(eager),
        report.compile_seconds,
    )
    return CompiledGraph(gm, name, steps)


def _source_name(gm: torch.fx.GraphModule) -> str:
    """The class of the outermost module the graph's nodes came from, or "graph"."""
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            _, cls = next(iter(stack.values()))
            return getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].strip("'>")
    return "graph"


def neuron(gm: torch.fx.GraphModule, example_inputs: list, **options: Any):
    """The Dynamo backend ``"neuron"`` (entry point ``torch_dynamo_backends``)."""
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd

    # Static shapes, as on the hardware: a new shape compiles anew, never symbolically.
    torch._dynamo.config.automatic_dynamic_shapes = False
    source = _source_name(gm)
    compile_id = torch._guards.CompileContext.current_compile_id()
    frame, attempt = (compile_id.frame_id, compile_id.frame_compile_id) if compile_id else (0, 0)
    if attempt:
        STATS.recompiles += 1
        shapes = [list(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)]
        log.warning(
            "torch.compile(backend='neuron') recompiles %s (frame %d, compile %d): input shapes %s",
            source,
            frame,
            attempt + 1,
            shapes,
        )
    base = f"{source}.frame{frame}" + (f"_{attempt}" if attempt else "")
    backend = aot_autograd(
        fw_compiler=functools.partial(compile_graph, name=f"{base}.forward"),
        bw_compiler=functools.partial(compile_graph, name=f"{base}.backward"),
        inference_compiler=functools.partial(
            compile_graph,
            name=f"{base}.inference",
            parameters=[isinstance(t, torch.nn.Parameter) for t in example_inputs],
        ),
        decompositions={**core_aten_decompositions(), **DECOMPOSITIONS},
    )
    return backend(gm, example_inputs)


__all__ = [
    "GraphReport",
    "cache_dir",
    "forget_layouts",
    "graphs",
    "neuron",
    "reset_stats",
    "stats",
]

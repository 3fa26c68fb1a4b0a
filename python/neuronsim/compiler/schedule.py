"""Cutting a graph into steps: segments of lowerable nodes, and nodes run eagerly."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.fx

from .ops import Empty, NoWork, Unsupported, check_lowerable
from .plan import SegmentPlan


@dataclasses.dataclass
class Step:
    """One step of a compiled graph: a node run eagerly, or a segment's program."""

    eager: torch.fx.Node | None = None
    segment: SegmentPlan | None = None
    reason: str = ""
    work: bool = True  # False for an eager node that computes nothing (NoWork)
    empty: bool = False  # a result with no elements, made from its meta (Empty)


def cut(graph: torch.fx.Graph, refuse: Callable[[torch.fx.Node, str], None]) -> list[Step]:
    """The graph's call nodes as steps: segments of lowerable nodes and eager nodes.

    The graph is functional, so nodes may run in any order their inputs allow: every
    eager node runs as soon as its inputs are ready, and each segment then takes every
    lowerable node whose inputs are ready or in the segment. That makes as few segments
    as the eager nodes' dependencies allow (integer index work before a loss, for
    instance, runs ahead and does not split the program). Nodes with side effects
    (mutations, random draws) keep their place in the order. `refuse(node, why)` is
    called for each node that runs eagerly (strict mode raises there)."""
    nodes = [n for n in graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    position = {n: i for i, n in enumerate(nodes)}
    why: dict[torch.fx.Node, str] = {}
    no_work: set[torch.fx.Node] = set()
    empty: set[torch.fx.Node] = set()
    for node in nodes:
        try:
            check_lowerable(node)
        except Empty as reason:
            why[node] = str(reason)
            no_work.add(node)
            empty.add(node)
        except NoWork as reason:
            why[node] = str(reason)
            no_work.add(node)
        except Unsupported as reason:
            why[node] = str(reason)
            refuse(node, str(reason))
    # An empty result waits for nothing: it would otherwise split the segment it reads.
    deps = {
        n: set() if n in empty else {a for a in n.all_input_nodes if a in position} for n in nodes
    }
    barrier = None
    for i, node in enumerate(nodes):
        if has_side_effects(node):
            deps[node] |= set(nodes[:i])
            barrier = node
        elif barrier is not None:
            deps[node].add(barrier)

    steps: list[Step] = []
    done: set[torch.fx.Node] = set()
    remaining = nodes
    while remaining:
        for node in remaining:  # in order, so a chain of eager nodes runs in one pass
            if node in why and deps[node] <= done:
                steps.append(
                    Step(
                        eager=node,
                        reason=why[node],
                        work=node not in no_work,
                        empty=node in empty,
                    )
                )
                done.add(node)
        run: list[torch.fx.Node] = []
        taken: set[torch.fx.Node] = set()
        for node in remaining:
            if (
                node not in why
                and node not in done
                and all(d in done or d in taken for d in deps[node])
            ):
                run.append(node)
                taken.add(node)
        if run:
            steps.append(Step(segment=segment_of(run)))
            done |= taken
        remaining = [n for n in remaining if n not in done]
    return steps


def has_side_effects(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    tags = getattr(node.target, "tags", ())
    if schema is not None and schema.is_mutable:
        return True
    return torch.Tag.nondeterministic_seeded in tags and not draws_nothing(node, schema)


def draws_nothing(node: torch.fx.Node, schema) -> bool:
    """An op tagged as seeded for its dropout (attention) draws nothing at dropout_p 0."""
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "dropout_p" not in names:
        return False
    i = names.index("dropout_p")
    p = node.kwargs.get("dropout_p", node.args[i] if i < len(node.args) else None)
    if p is None:
        p = schema.arguments[i].default_value
    return p == 0.0


def segment_of(nodes: list[torch.fx.Node]) -> SegmentPlan:
    members = set(nodes)
    outside = {n for n in nodes if any(u not in members for u in n.users)}
    return SegmentPlan(nodes, outside)

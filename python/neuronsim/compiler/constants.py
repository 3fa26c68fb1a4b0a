"""Constant folding: the values a graph computes from no input at all (positions from
``arange``, a mask from ``full``) are computed once, when the graph compiles, and kept on
the device as constants of the compiled graph. With static shapes they are the same at
every run. They are mostly integer work the engines do not hold (int64 positions), which
would otherwise run eagerly before the program at every call."""

from __future__ import annotations

import torch
import torch.fx

from .expressions import meta
from .schedule import has_side_effects

aten = torch.ops.aten

# A folded value is kept on the device for the graph's life: larger ones are left to run.
MAX_BYTES = 16 << 20

# Ops whose result has no defined value: nothing to fold.
_UNDEFINED = {
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten.empty_like.default,
    aten.new_empty.default,
    aten.new_empty_strided.default,
}


def _foldable(node: torch.fx.Node, constant: dict) -> bool:
    return (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target not in _UNDEFINED
        and not has_side_effects(node)
        and all(a in constant for a in node.all_input_nodes)
    )


def _on_cpu(kwargs: dict) -> dict:
    return {k: (torch.device("cpu") if k == "device" else v) for k, v in kwargs.items()}


def fold_constants(gm: torch.fx.GraphModule) -> list[str]:
    """Replaces each node that depends on no graph input, and that something else reads,
    by a constant of ``gm`` (a ``get_attr`` node); returns the ops folded, by name."""
    # AOTAutograd may call the compiler with its fake mode still on: folding is real work.
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        return _fold(gm)


def _fold(gm: torch.fx.GraphModule) -> list[str]:
    graph = gm.graph
    constant: dict[torch.fx.Node, torch.Tensor] = {}
    for node in graph.nodes:
        if not _foldable(node, constant):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), constant.__getitem__)
        try:
            value = node.target(*args, **_on_cpu(kwargs))
        except Exception:  # noqa: BLE001 (the node then runs as it would have)
            continue
        if isinstance(value, torch.Tensor):
            constant[node] = value
    folded = []
    for node, value in constant.items():
        v = meta(node)
        if all(u in constant for u in node.users) or not isinstance(v, torch.Tensor):
            continue
        if any(u.op == "output" for u in node.users):
            continue  # the caller owns what a graph returns, and may change it in place
        if v.device.type != "neuron" or value.numel() * value.element_size() > MAX_BYTES:
            continue
        if tuple(value.shape) != tuple(v.shape) or value.dtype != v.dtype:
            continue
        kept = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
        kept.copy_(value)
        name = f"_neuron_constant_{len(folded)}"
        gm.register_buffer(name, kept)
        with graph.inserting_before(node):
            attr = graph.get_attr(name)
        attr.meta["val"] = v
        node.replace_all_uses_with(attr)
        folded.append(getattr(node.target, "_name", str(node.target)))
    if folded:
        graph.eliminate_dead_code()
        gm.recompile()
    return folded

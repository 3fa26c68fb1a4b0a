"""Parameters kept in the layout their matmuls read.

``F.linear`` reads its weight transposed (``x @ w.t()``): a matmul then has to transpose
the weight on the PE at every call, which is most of a forward at small batch. The Neuron
compiler lays weights out once, when a model loads. Here an inference graph's
``w.t()`` of a parameter becomes a ``kept_transposed`` node: the transposed weight,
made contiguous once and kept on the device for as long as the parameter's storage and
version are unchanged (an optimizer step, a ``load_state_dict`` or an in-place edit makes
it again). The cost is a second copy of each such weight in device memory.

A change made through ``weight.data`` escapes the version counter (``.data`` is a tensor
with a counter of its own): after one, call ``forget_layouts()``. AWS's
``torch_neuronx.trace`` goes further and bakes the weights into the NEFF."""

from __future__ import annotations

import contextlib
import weakref

import torch
import torch.fx

aten = torch.ops.aten

# id(parameter) -> (its data pointer and version, the transposed copy); an entry goes
# with its parameter (tensors compare elementwise, so no WeakKeyDictionary).
_KEPT: dict[int, tuple[tuple[int, int], torch.Tensor]] = {}


def kept_transposed(weight: torch.Tensor) -> torch.Tensor:
    """``weight.t()`` as a contiguous tensor, made once per version of ``weight``."""
    key = (weight.data_ptr(), weight._version)
    entry = _KEPT.get(id(weight))
    if entry is None:
        weakref.finalize(weight, _KEPT.pop, id(weight), None)
    if entry is None or entry[0] != key:
        with torch.no_grad():
            entry = (key, weight.t().contiguous())
        _KEPT[id(weight)] = entry
    return entry[1]


def forget_layouts() -> None:
    """Drops every kept layout: the next call of each graph lays its weights out anew."""
    _KEPT.clear()


def _is_transpose(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is aten.t.default:
        return True
    return node.target is aten.permute.default and list(node.args[1]) in ([1, 0], [-1, -2])


def keep_transposed_parameters(gm: torch.fx.GraphModule, parameters: list[bool]) -> int:
    """Rewrites each 2-dim transpose of a parameter placeholder (``parameters`` flags the
    placeholders, in order) as a ``kept_transposed`` node; returns how many."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(parameters):
        return 0
    rewritten = 0
    for node, is_parameter in zip(placeholders, parameters):
        if not is_parameter:
            continue
        for user in [u for u in node.users if _is_transpose(u) and u.args[0] is node]:
            if any(u.op == "output" for u in user.users):
                continue  # returned, the caller could change the kept copy in place
            view = user.meta.get("val")
            if not isinstance(view, torch.Tensor) or view.dim() != 2:
                continue
            with gm.graph.inserting_before(user):
                kept = gm.graph.call_function(kept_transposed, (node,))
            with getattr(view, "fake_mode", None) or contextlib.nullcontext():
                kept.meta["val"] = view.contiguous()
            user.replace_all_uses_with(kept)
            gm.graph.erase_node(user)
            rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten

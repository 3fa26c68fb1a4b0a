"""Two places where PyTorch decides by device type that "neuron" cannot run something
that it can:

- Flex attention's eager path (``torch.nn.attention.flex_attention``) checks the query's
  device against a fixed list (CUDA, CPU, XPU, HPU, MPS) and raises for any other. That
  path is device-agnostic: the attention higher-order op's dense implementation, which
  materialises the scores and applies ``score_mod`` and the block mask with ordinary ops.
  neuron tensors pass the check, so flex attention (and its block masks, and its
  backward, which the CPU refuses) runs on the device.
- ``torch.compile``'s default backend, Inductor, generates code for CUDA, CPU and a few
  others; a graph whose inputs are neuron tensors fails in its lowering ("No interface
  for device neuron"). Such graphs (an input or a value they make is a neuron tensor) go
  to the ``"neuron"`` backend instead, with a warning
  the first time, so code that compiles without naming a backend (Transformers' flex
  attention, a user's ``torch.compile(model)``) runs on the device. Graphs on other
  devices still go to Inductor.
"""

from __future__ import annotations

import functools
import logging

import torch

log = logging.getLogger("neuronsim")


def _is_neuron(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def _on_neuron(gm, inputs) -> bool:
    """Whether a Dynamo graph computes on neuron: an input, or any value it makes (a
    graph may take no tensor at all and build its tensors on the device)."""
    if any(_is_neuron(t) for t in inputs):
        return True
    from torch.utils._pytree import tree_leaves

    graph = getattr(gm, "graph", None)
    for node in graph.nodes if graph is not None else ():
        if any(_is_neuron(v) for v in tree_leaves(node.meta.get("example_value"))):
            return True
    return False


def allow_flex_attention() -> None:
    import torch.nn.attention.flex_attention as flex

    check = flex._validate_device
    if getattr(check, "_neuronsim", False):
        return

    @functools.wraps(check)
    def validate_device(query, key, value):
        if query.device.type != "neuron":
            check(query, key, value)

    validate_device._neuronsim = True
    flex._validate_device = validate_device


def route_inductor_graphs_on_neuron() -> None:
    wrapper = torch._TorchCompileInductorWrapper
    call = wrapper.__call__
    if getattr(call, "_neuronsim", False):
        return
    warned = []

    @functools.wraps(call)
    def __call__(self, model_, inputs_, **kwargs):
        if not _on_neuron(model_, inputs_):
            return call(self, model_, inputs_, **kwargs)
        if not warned:
            warned.append(True)
            log.warning(
                "torch.compile: Inductor generates no code for neuron tensors; graphs on "
                "neuron compile with backend='neuron' (name it to silence this warning)"
            )
        from .compiler import neuron

        return neuron(model_, inputs_)

    __call__._neuronsim = True
    wrapper.__call__ = __call__


def install() -> None:
    allow_flex_attention()
    route_inductor_graphs_on_neuron()

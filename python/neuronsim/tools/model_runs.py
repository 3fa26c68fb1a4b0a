"""What the model sweeps (architectures.py, real_size.py) share: a model's logits from
whatever its forward returns, the first line of an error, and a table in aligned columns."""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """The error's type and first line; for Dynamo's wrapper of a backend's error
    ("backend='neuron' raised:"), the backend's own, which says why."""
    exc = getattr(exc, "inner_exception", None) or exc
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def logits_of(output):
    """The logits of a forward's output: its .logits, or the first tensor it holds."""
    import torch

    if hasattr(output, "logits") and output.logits is not None:
        return output.logits
    if isinstance(output, (tuple, list)):
        return next(x for x in output if isinstance(x, torch.Tensor))
    return output


def aligned(table: list[tuple]) -> str:
    """Lines of cells in aligned columns, the last (a note) left ragged."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    out = []
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths)]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)

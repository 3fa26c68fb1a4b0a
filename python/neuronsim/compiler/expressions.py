"""Values of a segment: places in the program's tensors and the lazy expressions not
stored yet, and turning expressions into the steps of a PointwiseExpr
(python/csrc/compiler/graph.cpp reads them)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
import torch.fx


@dataclasses.dataclass(frozen=True)
class Place:
    tensor: str
    offset: int
    sizes: tuple
    strides: tuple
    dtype: torch.dtype

    def json(self) -> dict:
        if self.dtype == torch.int64:  # int64 values are held as int32 words: their low ones
            return self.words().json()
        return {
            "tensor": self.tensor,
            "offset": self.offset,
            "sizes": list(self.sizes),
            "strides": list(self.strides),
        }

    def words(self, high: bool = False) -> Place:
        """An int64 place as the int32 words the program holds it in: the low words (the
        value, for the small non-negative values the programs compute, indices.py), or the
        high ones (zero for those)."""
        assert self.dtype == torch.int64, self
        strides = tuple(2 * s for s in self.strides)
        return Place(self.tensor, 2 * self.offset + int(high), self.sizes, strides, torch.int32)


@dataclasses.dataclass(frozen=True)
class Lazy:
    """A pointwise value not stored yet: an expression tree whose leaves are Places.
    Trees are tuples: ("load", place), ("const", v), ("act", func, x, scale),
    ("alu", op, a, b), ("alu_imm", op, a, imm, reverse), ("select", p, t, f),
    ("pos", [weights]) (an output position, PointwiseExpr::position)."""

    expr: tuple
    sizes: tuple
    dtype: torch.dtype


def meta(node: Any):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def extent(sizes, strides) -> int:
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(sizes, strides))


def is_dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the tensor's elements fill exactly its extent."""
    return t.numel() > 0 and extent(t.shape, t.stride()) == t.numel()


def contiguous_strides(sizes) -> tuple:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def number(v: float) -> float | str:
    """A number as the plan writes it: JSON has no infinities or NaN."""
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def emit_expression(
    root: tuple | list[tuple], first: tuple | None = None, seed: Place | None = None
) -> tuple[list[dict], list[Any], list[int]]:
    """The steps of a PointwiseExpr computing `root` (or each of a list of roots, one
    output each), and the places it loads. With `first` (a matmul epilogue), that leaf is
    input 0 and the places follow."""
    steps: list[dict] = []
    # A reduction's epilogue reads its input as load(0) and the row's result as load(1).
    if seed is not None:
        loads: dict[Any, int] = {seed: 0, first: 1}
    else:
        loads = {first: 0} if first is not None else {}
    memo: dict[int, int] = {}

    def visit(e: tuple) -> int:
        key = id(e)
        if key in memo:
            return memo[key]
        kind = e[0]
        if e is first:
            step = {"op": "load", "input": loads[first]}
        elif kind == "load":
            if e[1] not in loads:
                loads[e[1]] = len(loads)
            step = {"op": "load", "input": loads[e[1]]}
        elif kind == "const":
            step = {"op": "constant", "imm": number(e[1])}
        elif kind == "act":
            step = {"op": "activation", "func": e[1], "args": [visit(e[2])], "imm": e[3]}
        elif kind == "alu":
            step = {"op": "alu", "alu": e[1], "args": [visit(e[2]), visit(e[3])]}
        elif kind == "alu_imm":
            step = {
                "op": "alu_imm",
                "alu": e[1],
                "args": [visit(e[2])],
                "imm": number(e[3]),
                "reverse": e[4],
            }
        elif kind == "select":
            step = {"op": "select", "args": [visit(e[1]), visit(e[2]), visit(e[3])]}
        elif kind == "pos":  # ("pos", [weight per output dim]): sum of index * weight
            step = {"op": "position", "weights": list(e[1])}
        else:
            raise AssertionError(kind)
        steps.append(step)
        memo[key] = len(steps) - 1
        return memo[key]

    results = [visit(r) for r in (root if isinstance(root, list) else [root])]
    return steps, list(loads), results


def leaves_of(expr: tuple, kind: str) -> list[tuple]:
    """The distinct leaves of one kind ("matmul", "rowreduce") in an expression."""
    found: dict[int, tuple] = {}

    def visit(e: Any) -> None:
        if isinstance(e, tuple) and e and e[0] == kind:
            found.setdefault(id(e), e)
        elif isinstance(e, tuple) and e and e[0] not in ("load", "matmul", "rowreduce"):
            for x in e[1:]:
                visit(x)

    visit(expr)
    return list(found.values())


def matmul_leaves(expr: tuple) -> list[tuple]:
    return leaves_of(expr, "matmul")


def prologue_input(expr: tuple, sizes) -> Place | None:
    """The one place an expression reads, when it reads one, of its own sizes (so that a
    reduction can walk it and compute the expression on chip), and no product."""
    places: set[Place] = set()

    def visit(e: tuple) -> bool:
        if e[0] == "load":
            places.add(e[1])
            return True
        if e[0] in ("matmul", "rowreduce"):
            return False
        return all(visit(x) for x in e[1:] if isinstance(x, tuple))

    if not visit(expr) or len(places) != 1:
        return None
    (p,) = places
    return p if tuple(p.sizes) == tuple(sizes) else None


def substitute(expr: tuple, old: tuple, new: tuple) -> tuple:
    if expr is old:
        return new
    if expr[0] in ("load", "const", "matmul", "rowreduce"):
        return expr
    return tuple(substitute(x, old, new) if isinstance(x, tuple) else x for x in expr)


def meta_view(sizes, strides, new_sizes) -> tuple | None:
    """The strides of (sizes, strides) viewed as new_sizes, or None when no view gives it."""
    try:
        t = torch.empty_strided(sizes, strides, device="meta").view(new_sizes)
    except (RuntimeError, ValueError):  # torch says "Cannot view ..." with either
        return None
    return tuple(t.stride())


def reshaped(p: Place, sizes: tuple) -> Place:
    strides = meta_view(p.sizes, p.strides, sizes)
    assert strides is not None, (p, sizes)
    return Place(p.tensor, p.offset, tuple(sizes), strides, p.dtype)


def broadcast(p: Place, sizes: tuple) -> Place:
    """p expanded to sizes (numpy rules: dims aligned on the right)."""
    pad = len(sizes) - len(p.sizes)
    old = (1,) * pad + tuple(p.sizes), (0,) * pad + tuple(p.strides)
    strides = tuple(0 if n == 1 and s != 1 else st for n, s, st in zip(old[0], sizes, old[1]))
    return Place(p.tensor, p.offset, tuple(sizes), strides, p.dtype)


def fits_epilogue(leaf: tuple, place: Place) -> bool:
    """The product can be computed straight into place, with the expression as its
    epilogue: it has the place's shape, and the place (and so every input broadcast to
    it) can be viewed with the product's sizes. 3-D products need a dense batch."""
    _, _, _, product_sizes, sizes = leaf
    return tuple(sizes) == tuple(place.sizes) and (
        meta_view(place.sizes, place.strides, product_sizes) is not None
    )


def view_leaves(lazy: Lazy, node: torch.fx.Node) -> tuple | None:
    """lazy's expression with the view `node` applied to each leaf (broadcast to lazy's
    sizes first): the view of the value it computes. None when a leaf cannot be viewed so
    (a reshape of a broadcast leaf)."""
    args, kwargs = node.args[1:], node.kwargs
    done: dict[Place, Place] = {}

    def leaf(p: Place) -> Place:
        if p not in done:
            full = broadcast(p, lazy.sizes)
            base = torch.empty_strided(full.sizes, full.strides, device="meta", dtype=p.dtype)
            t = node.target(base, *args, **kwargs)
            done[p] = Place(
                p.tensor, p.offset + t.storage_offset(), tuple(t.shape), tuple(t.stride()), p.dtype
            )
        return done[p]

    memo: dict[int, tuple] = {}  # shared subexpressions stay shared

    def visit(e: Any) -> Any:
        if not isinstance(e, tuple) or not e or e[0] == "const":
            return e
        if id(e) not in memo:
            memo[id(e)] = (
                ("load", leaf(e[1])) if e[0] == "load" else (e[0],) + tuple(visit(x) for x in e[1:])
            )
        return memo[id(e)]

    try:
        return visit(lazy.expr)
    except (RuntimeError, ValueError):
        return None

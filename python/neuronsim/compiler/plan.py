"""A segment's plan: the program's tensors, its stages and the value of each node so far.

The graph is cut into segments: maximal runs of nodes that lower, between nodes that run
eagerly on the device (schedule.py). Each segment becomes one plan
(``python/csrc/compiler/graph.cpp`` documents its JSON), built by the C++ side into one
program, one NEFF. lowering.py turns each node into stages through the plan's methods here.

Inside a segment every value is either a ``Place`` (a view of one of the program's HBM
tensors: an input bound at run time, an output the caller allocates, or scratch the
program keeps) or a ``Lazy`` pointwise expression not yet stored anywhere. A pointwise
node whose only user is another pointwise node of the segment stays lazy and is computed
on chip, in SBUF, by the kernel that stores its user: that is the fusion, and each lazy
node is one HBM round trip (a store and a load) saved. Matmuls, reductions and softmax
read Places, so they store the expressions that feed them."""

from __future__ import annotations

import json
import math
from typing import Any

import torch
import torch.fx

from .expressions import (
    Lazy,
    Place,
    broadcast,
    contiguous_strides,
    emit_expression,
    extent,
    fits_epilogue,
    leaves_of,
    matmul_leaves,
    meta,
    meta_view,
    prologue_input,
    reshaped,
    substitute,
)
from .ops import (
    CONCAT,
    ENGINE_DTYPES,
    REDUCTIONS,
    RESHAPES,
    SOFTMAX,
    SPLITS,
    Unsupported,
    aten,
    is_item,
    is_split_item,
    reads_lazy,
)
from .views import VIEWS


class SegmentPlan:
    """The plan of one segment, which lowering.py fills node by node. `outside_users` are
    the nodes of the segment whose values are needed after it (by eager nodes, later segments or the
    graph's output)."""

    def __init__(self, nodes: list[torch.fx.Node], outside_users: set[torch.fx.Node]):
        self.nodes = nodes
        self.members = set(nodes)
        self.escaping = set(outside_users)
        # A view that escapes needs its base in an output tensor too.
        self.must_store = set(self.escaping)
        for n in list(self.escaping):
            while (n.target in VIEWS or n.target in SPLITS or is_split_item(n)) and n.args[
                0
            ] in self.members:
                n = n.args[0]
                self.must_store.add(n)
        self.tensors: list[dict] = []
        self.stages: list[dict] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.inputs: list[tuple[str, torch.fx.Node]] = []  # bound at run time
        self.outputs: list[Place] = []  # allocated by the caller, each a whole tensor
        self.escapes: list[tuple[torch.fx.Node, Place]] = []
        self.fused = 0  # pointwise nodes computed on chip only

    # -- tensors

    def _declare(self, kind: str, dtype: torch.dtype, elems: int) -> str:
        # Integers are indices (indices.py): int64 ones as twice as many int32 words.
        plan_dtype = "int32" if dtype in (torch.int32, torch.int64) else ENGINE_DTYPES[dtype]
        if dtype == torch.int64:
            elems *= 2
        name = f"{kind[0]}{len(self.tensors)}"
        self.tensors.append({"name": name, "dtype": plan_dtype, "elems": elems, "kind": kind})
        return name

    def _input(self, node: torch.fx.Node) -> Place:
        v = meta(node)
        name = self._declare("input", v.dtype, extent(v.shape, v.stride()))
        self.inputs.append((name, node))
        place = Place(name, 0, tuple(v.shape), tuple(v.stride()), v.dtype)
        self.env[node] = place
        return place

    def index_words(self, node: torch.fx.Node) -> Place:
        """Contiguous int64 or int32 indices as a flat int32 place; int64 ones at stride 2,
        their low words (bound as int32 when they are a graph input)."""
        v = meta(node)
        if isinstance(self.env.get(node), Place):  # computed by the program (indices.py)
            flat = reshaped(self.env[node], (v.numel(),))
            return flat.words() if flat.dtype == torch.int64 else flat
        words = 2 if v.dtype == torch.int64 else 1
        name = self._declare("input", torch.int32, v.numel() * words)
        self.inputs.append((name, node))
        return Place(name, 0, (v.numel(),), (words,), torch.int32)

    def result_place(self, node: torch.fx.Node, index: int) -> Place:
        """Item `index` of a node with several results: an output tensor when it is read after
        the program, else scratch, with the strides of its meta."""
        readers = [u for u in node.users if is_item(u) and u.args[1] == index]
        stored = [u for u in readers if u in self.must_store]
        if stored:
            return self._new(stored[0])
        t = meta(node)[index]
        name = self._declare("scratch", t.dtype, t.numel())
        return Place(name, 0, tuple(t.shape), tuple(t.stride()), t.dtype)

    def _new(self, node: torch.fx.Node) -> Place:
        """A fresh tensor for the node's value, with the strides its meta says."""
        v = meta(node)
        kind = "output" if node in self.must_store else "scratch"
        name = self._declare(kind, v.dtype, v.numel())
        place = Place(name, 0, tuple(v.shape), tuple(v.stride()), v.dtype)
        if kind == "output":
            self.outputs.append(place)
        return place

    # -- values

    def value(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            if a not in self.env:
                self._input(a)
            return self.env[a]
        return a

    def place(self, a: Any) -> Place:
        """The argument as a Place, storing it when it is lazy (an expression a softmax
        could not take into its matmul: it was counted as fused, and is not)."""
        v = self.value(a)
        if isinstance(v, Lazy):
            self.fused -= 1
            v = self.env[a] = self.store(a, v)
        return v

    def term(self, a: Any) -> tuple:
        v = self.value(a)
        if isinstance(v, Lazy):
            return v.expr
        if isinstance(v, Place):
            return ("load", v)
        if isinstance(v, (bool, int, float)):
            return ("const", float(v))
        raise Unsupported(f"operand {a!r}")

    def store(self, node: torch.fx.Node, lazy: Lazy, place: Place | None = None) -> Place:
        """Stores a lazy value: as the epilogue of the matmul it holds when one of its
        products has the value's shape (the product then never goes to HBM), else as a
        pointwise stage. Other products in the expression are stored first."""
        place = place or self._new(node)
        expr = lazy.expr
        rows = leaves_of(expr, "rowreduce")
        if len(rows) == 1 and not leaves_of(expr, "matmul"):
            stage = self._row_stage(node, expr, rows[0], place)
            if stage is not None:
                if not self._norm_into_matmul(stage):
                    self.stages.append(stage)
                return place
        for leaf in rows:
            expr = substitute(expr, leaf, ("load", self._row_result(node, leaf)))
        for leaf in matmul_leaves(expr):
            if wide_k(leaf):
                expr = substitute(expr, leaf, ("load", self._k_blocks(node, leaf)))
        products = matmul_leaves(expr)
        main = next((m for m in products if fits_epilogue(m, place)), None)
        expr = self.store_products(node, expr, keep=main)
        if main is not None:
            stage = self._epilogue_stage(node, expr, main, place)
            if stage is not None:
                self.stages.append(stage)
                return place
            expr = substitute(expr, main, ("load", self._product(node, main)))
        self._pointwise_stage(node, expr, place)
        return place

    def _pointwise_stage(self, node: torch.fx.Node, expr: tuple, place: Place) -> None:
        """A pointwise stage storing expr (without products) into place."""
        steps, loads, outputs = emit_expression(expr)
        self.stages.append(
            {
                "kind": "pointwise",
                "steps": steps,
                "outputs": outputs,
                "inputs": [p.json() for p in loads],
                "outs": [place.json()],
                "node": node.name,
            }
        )

    def _epilogue_stage(self, node, expr: tuple, main: tuple, place: Place) -> dict | None:
        """The matmul stage computing `main` into place with the rest of expr as its
        epilogue, or None when an input cannot be viewed with the product's sizes."""
        _, a, b, product_sizes, _ = main
        stage = {
            "kind": "matmul",
            "a": a.json(),
            "b": b.json(),
            "out": reshaped(place, product_sizes).json(),
            "node": node.name,
        }
        if expr is main:
            return stage
        steps, loads, outputs = emit_expression(expr, first=main)
        inputs = []
        for p in loads[1:]:
            wide = broadcast(p, place.sizes)
            if meta_view(wide.sizes, wide.strides, product_sizes) is None:
                return None
            inputs.append(reshaped(wide, product_sizes).json())
        stage["epilogue"] = {"steps": steps, "outputs": outputs, "inputs": inputs}
        return stage

    def store_products(self, node: torch.fx.Node, expr: tuple, keep: tuple | None) -> tuple:
        """expr with each product leaf but `keep` stored on its own and loaded."""
        for m in matmul_leaves(expr):
            if m is not keep:
                expr = substitute(expr, m, ("load", self._product(node, m)))
        return expr

    def _k_blocks(self, node: torch.fx.Node, leaf: tuple) -> Place:
        """A product whose K is too long for one matmul stage (an LM head's backward, K the
        vocabulary): a matmul stage per block of K_BLOCK into FP32 scratch, summed in place
        by pointwise stages; the sum in FP32, rounded where it is read."""
        _, a, b, product_sizes, sizes = leaf
        k = a.sizes[-1]
        total = None
        for k0 in range(0, k, K_BLOCK):
            n = min(K_BLOCK, k - k0)
            a_block = Place(
                a.tensor, a.offset + k0 * a.strides[-1], a.sizes[:-1] + (n,), a.strides, a.dtype
            )
            b_block = Place(
                b.tensor,
                b.offset + k0 * b.strides[-2],
                b.sizes[:-2] + (n, b.sizes[-1]),
                b.strides,
                b.dtype,
            )
            part = scratch_like(self, Place("", 0, tuple(product_sizes), (), torch.float32))
            self.stages.append(
                {
                    "kind": "matmul",
                    "a": a_block.json(),
                    "b": b_block.json(),
                    "out": part.json(),
                    "node": node.name,
                }
            )
            if total is None:
                total = part
                continue
            self._pointwise_stage(node, ("alu", "add", ("load", total), ("load", part)), total)
        return reshaped(total, tuple(sizes))

    def _product(self, node: torch.fx.Node, leaf: tuple) -> Place:
        """A matmul leaf stored on its own: a plain matmul stage into scratch."""
        if wide_k(leaf):
            return self._k_blocks(node, leaf)
        _, a, b, product_sizes, sizes = leaf
        out = scratch_like(self, Place("", 0, tuple(sizes), (), a.dtype))
        self.stages.append(
            {
                "kind": "matmul",
                "a": a.json(),
                "b": b.json(),
                "out": reshaped(out, product_sizes).json(),
                "node": node.name,
            }
        )
        return out

    def row_reduction_stays_lazy(self, node: torch.fx.Node, x: Place, runs: list) -> bool:
        """A reduction over the last dim, keeping it, whose one user computes from
        expressions: the stage that stores that user's value reduces the rows itself."""
        users = list(node.users)
        v = meta(node)
        return (
            node not in self.must_store
            and len(x.sizes) > 0
            and runs == [[len(x.sizes) - 1]]
            and tuple(v.shape) == tuple(x.sizes[:-1]) + (1,)
            and node.target not in (aten.any.dim, aten.any.dims, aten.any.default)
            and len(users) == 1
            and users[0] in self.members
            and reads_lazy(users[0])
            and users[0].target not in CONCAT
        )

    def _row_stage(
        self, node: torch.fx.Node, expr: tuple, leaf: tuple, place: Place
    ) -> dict | None:
        """The reduce stage that reduces leaf's rows and writes place = expr from them,
        or None when its rows are not place's or would not fit SBUF."""
        x = leaf[2]
        if tuple(x.sizes) != tuple(place.sizes):
            return None
        steps, loads, outputs = emit_expression(expr, first=leaf, seed=x)
        # Per row element: the input, the rows written, each input's tile, two or three
        # buffers of each, and a temporary per step: the kernel needs the row in one tile.
        if x.sizes[-1] * 4 * (len(steps) + 3 * (2 + len(loads))) > 160 * 1024:
            return None
        stage, _ = self._row_reduce(node, leaf)
        stage["epilogue"] = {
            "steps": steps,
            "outputs": outputs,
            "inputs": [broadcast(p, place.sizes).json() for p in loads[2:]],
            "rows": place.json(),
        }
        return stage

    def _norm_into_matmul(self, stage: dict) -> bool:
        """Moves a row stage (a norm) into the matmul stage that stores its input, when the
        matmul's tiles hold the rows whole and nothing the norm reads is written after
        that matmul: the norm is then computed from the stored value in SBUF."""
        x = stage["in"]
        for k in range(len(self.stages) - 1, -1, -1):
            mm = self.stages[k]
            if mm["kind"] == "matmul" and mm["out"]["tensor"] == x["tensor"]:
                break
        else:
            return False
        out, epilogue = mm["out"], stage["epilogue"]
        dense = all(
            tuple(p["strides"]) == contiguous_strides(p["sizes"])
            for p in (out, x, epilogue["rows"])
        )
        if (
            "rows" in mm
            or "norm" in mm
            or not dense
            or out["offset"] != x["offset"]
            or math.prod(out["sizes"]) != math.prod(x["sizes"])
            or out["sizes"][-1] != x["sizes"][-1]
        ):
            return False
        written = {t for later in self.stages[k + 1 :] for t in stage_writes(later)}
        if any(p["tensor"] in written for p in epilogue["inputs"]):
            return False
        inputs = []
        for p in epilogue["inputs"]:
            strides = meta_view(p["sizes"], p["strides"], out["sizes"])
            if strides is None:
                return False
            inputs.append({**p, "sizes": list(out["sizes"]), "strides": list(strides)})
        rows = {**epilogue["rows"], "sizes": list(out["sizes"])}
        rows["strides"] = list(contiguous_strides(out["sizes"]))
        norm = {"op": stage["op"], **epilogue, "inputs": inputs, "rows": rows}
        if "prologue" in stage:
            norm["prologue"] = stage["prologue"]
        mm["norm"] = norm
        return True

    def _row_result(self, node: torch.fx.Node, leaf: tuple) -> Place:
        """A row reduction leaf stored on its own: a plain reduce stage into scratch."""
        stage, out = self._row_reduce(node, leaf)
        self.stages.append(stage)
        return out

    def _row_reduce(self, node: torch.fx.Node, leaf: tuple) -> tuple[dict, Place]:
        """The reduce stage of a row reduction leaf, its result (kept dims) in scratch."""
        _, op, x, prologue = leaf
        out = scratch_like(self, Place("", 0, tuple(x.sizes[:-1]) + (1,), (), torch.float32))
        stage = {
            "kind": "reduce",
            "op": op,
            "in": x.json(),
            "dim": len(x.sizes) - 1,
            "out": out.json(),
            "node": node.name,
        }
        if prologue != "null":
            stage["prologue"] = json.loads(prologue)
        return stage, out

    def fusable_product(self, node: torch.fx.Node) -> bool:
        """A matmul whose product can stay on chip: through reshapes, its one user is a
        node of the segment that computes from expressions, or a softmax (which the matmul
        then computes on its rows)."""
        n = node
        while n not in self.must_store:
            users = list(n.users)
            if len(users) != 1 or users[0] not in self.members:
                return False
            if users[0].target not in RESHAPES:
                return reads_lazy(users[0]) or users[0].target in SOFTMAX
            n = users[0]
        return False

    def _stays_lazy(self, node: torch.fx.Node, expr: tuple) -> bool:
        users = list(node.users)
        # A value eager rounds to bf16 or fp16 is stored, so that it is rounded too.
        if (
            node in self.must_store
            or meta(node).dtype not in (torch.float32, torch.bool)
            or len(users) != 1
            or users[0] not in self.members
        ):
            return False
        if users[0].target in REDUCTIONS:  # as the reduction's prologue
            return users[0].args[0] is node and prologue_input(expr, meta(node).shape) is not None
        if users[0].target in SOFTMAX:  # as the epilogue of a matmul that ends in the softmax
            return bool(matmul_leaves(expr))
        if (
            users[0].target in VIEWS
            and not leaves_of(expr, "matmul")
            and not leaves_of(expr, "rowreduce")
        ):  # viewed, then read by a pointwise node: the view goes to the expression's leaves
            return self._read_through_views(users[0])
        return reads_lazy(users[0])

    def _read_through_views(self, view: torch.fx.Node) -> bool:
        """A chain of views, each read by the next only, ending in a node that reads
        expressions."""
        n = view
        while n.target in VIEWS:
            users = list(n.users)
            if n in self.must_store or len(users) != 1 or users[0] not in self.members:
                return False
            n = users[0]
        return reads_lazy(n)

    def pointwise_result(self, node: torch.fx.Node, expr: tuple) -> None:
        v = meta(node)
        lazy = Lazy(expr, tuple(v.shape), v.dtype)
        if self._stays_lazy(node, expr):
            self.env[node] = lazy
            self.fused += 1
        else:
            self.env[node] = self.store(node, lazy)

    def plan(self) -> dict:
        return {"tensors": self.tensors, "stages": self.stages}


def stage_writes(stage: dict) -> list[str]:
    """The tensors a plan stage writes."""
    places = list(stage.get("outs", []))
    if "out" in stage:
        places.append(stage["out"])
    for extra in ("epilogue", "norm"):
        if extra in stage and "rows" in stage[extra]:
            places.append(stage[extra]["rows"])
    return [p["tensor"] for p in places]


# A product whose A^T rows would take more than this per SBUF partition runs in blocks of K
# (the matmul kernel keeps A^T for the whole of K on chip): K past 16,384 in bf16.
K_BYTES = 32 * 1024
K_BLOCK = 8192


def wide_k(leaf: tuple) -> bool:
    a = leaf[1]
    return a.sizes[-1] * a.dtype.itemsize > K_BYTES


def scratch_like(seg: SegmentPlan, p: Place) -> Place:
    name = seg._declare("scratch", p.dtype, math.prod(p.sizes))
    return Place(name, 0, p.sizes, contiguous_strides(p.sizes), p.dtype)

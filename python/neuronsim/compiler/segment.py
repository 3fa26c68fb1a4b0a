"""From an FX graph of core aten ops to graph programs.

The graph is cut into segments: maximal runs of nodes this module lowers, between nodes
that run eagerly on the device (ops without a lowering here). Each segment becomes one
plan (``python/csrc/compiler/graph.cpp`` documents its JSON), built by the C++ side into one
program, one NEFF.

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

from . import indices
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
    view_leaves,
)
from .ops import (
    ACTIVATIONS,
    ATTENTION,
    ATTENTION_BACKWARD,
    BINARY,
    CONCAT,
    EMBEDDING,
    ENGINE_DTYPES,
    MATMULS,
    REDUCTIONS,
    RESHAPES,
    SCATTERS,
    SOFTMAX,
    SPLITS,
    TUPLES,
    Unsupported,
    aten,
    attention_args,
    attention_backward_args,
    is_integer_cast,
    is_item,
    is_pointwise,
    is_split_item,
    reads_lazy,
    reduced_runs,
)
from .views import VIEWS


class SegmentPlan:
    """Lowers the nodes of one segment into a plan. `outside_users` are the nodes of the
    segment whose values are needed after it (by eager nodes, later segments or the
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

    # -- lowering

    def lower(self) -> None:
        for node in self.nodes:
            lower_node(self, node)
        for node in self.escaping:
            if node.target in TUPLES:  # read through its items, which escape themselves
                continue
            v = self.env[node]
            assert isinstance(v, Place), node
            self.escapes.append((node, v))

    def plan(self) -> dict:
        return {"tensors": self.tensors, "stages": self.stages}


def widens(node: torch.fx.Node) -> bool:
    """A copy of a 16-bit float value into float32."""
    x, out = meta(node.args[0]), meta(node)
    return (
        isinstance(x, torch.Tensor)
        and x.dtype in (torch.bfloat16, torch.float16)
        and out.dtype == torch.float32
    )


def binary(seg: SegmentPlan, op: str, a: Any, b: Any) -> tuple:
    if not isinstance(b, torch.fx.Node):
        return ("alu_imm", op, seg.term(a), float(b), False)
    if not isinstance(a, torch.fx.Node):
        return ("alu_imm", op, seg.term(b), float(a), True)
    return ("alu", op, seg.term(a), seg.term(b))


def pointwise_expr(seg: SegmentPlan, node: torch.fx.Node) -> tuple:
    t, args, kwargs = node.target, node.args, node.kwargs
    if t in ACTIVATIONS:
        return ("act", ACTIVATIONS[t], seg.term(args[0]), 1.0)
    if t in (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar):
        alpha = kwargs.get("alpha", 1)
        b = args[1]
        if alpha != 1:
            b = (
                ("alu_imm", "multiply", seg.term(b), float(alpha), False)
                if isinstance(b, torch.fx.Node)
                else b * alpha
            )
            if isinstance(b, tuple):
                return ("alu", BINARY[t], seg.term(args[0]), b)
        return binary(seg, BINARY[t], args[0], b)
    if t in BINARY:
        return binary(seg, BINARY[t], args[0], args[1])
    if t is aten.rsub.Scalar:
        alpha = kwargs.get("alpha", 1)
        x = seg.term(args[0])
        if alpha != 1:
            x = ("alu_imm", "multiply", x, float(alpha), False)
        return ("alu_imm", "subtract", x, float(args[1]), True)
    if t is aten.pow.Tensor_Scalar:
        x, e = seg.term(args[0]), float(args[1])
        if e == 2.0:
            return ("alu", "multiply", x, x)
        if e == 1.0:
            return x
        if e == 0.5:
            return ("act", "sqrt", x, 1.0)
        if e == -0.5:
            return ("act", "rsqrt", x, 1.0)
        if e == -1.0:
            return ("act", "reciprocal", x, 1.0)
        return ("alu_imm", "pow", x, e, False)
    if t is aten.where.self:
        return ("select", seg.term(args[0]), seg.term(args[1]), seg.term(args[2]))
    if t is aten._to_copy.default and widens(node) and isinstance(seg.value(args[0]), Lazy):
        # The graph holds the value in its 16-bit dtype (a bf16 product, a residual sum):
        # stored so, it is rounded where the graph rounds it, and what is computed from it
        # sees the values the CPU sees. Kept in FP32 instead, a router's near ties broke
        # otherwise than the CPU's (15 % of Qwen3-30B-A3B's tokens went to other experts).
        # The store costs a round trip to HBM that a rounding on chip would save.
        return ("load", seg.place(args[0]))
    if t in (aten.clone.default, aten._to_copy.default, aten.lift_fresh_copy.default):
        return seg.term(args[0])
    if t is aten.full_like.default:
        return ("const", float(args[1]))
    if t is aten.copy.default:
        return seg.term(args[1])
    if t is aten.full.default:
        return ("const", float(args[1]))
    if t is aten.scalar_tensor.default:
        return ("const", float(args[0]))
    if t is aten.logical_not.default:
        return ("alu_imm", "is_equal", seg.term(args[0]), 0.0, False)
    if t is aten.clamp.default:
        x = seg.term(args[0])
        lo = args[1] if len(args) > 1 else kwargs.get("min")
        hi = args[2] if len(args) > 2 else kwargs.get("max")
        if lo is not None:
            x = ("alu_imm", "max", x, float(lo), False)
        if hi is not None:
            x = ("alu_imm", "min", x, float(hi), False)
        return x
    if t is aten.gelu.default:
        approx = kwargs.get("approximate", "none")
        return ("act", "gelu_tanh" if approx == "tanh" else "gelu", seg.term(args[0]), 1.0)
    raise Unsupported(f"no pointwise lowering for {t}")


def view_place(seg: SegmentPlan, node: torch.fx.Node) -> Place:
    """A view node's place: its base's tensor, with the view's sizes and strides and the
    offset its meta's storage offset gives relative to the base's."""
    base = seg.place(node.args[0])
    b, v = meta(node.args[0]), meta(node)
    if tuple(b.stride()) != base.strides and b.numel() > 1:
        raise Unsupported("a view of a value laid out unlike its meta")
    offset = base.offset + v.storage_offset() - b.storage_offset()
    return Place(base.tensor, offset, tuple(v.shape), tuple(v.stride()), v.dtype)


def lower_node(seg: SegmentPlan, node: torch.fx.Node) -> None:
    t = node.target
    if t in SPLITS:  # the parts' places; each item node picks its own
        base = seg.place(node.args[0])
        b = meta(node.args[0])
        if tuple(b.stride()) != base.strides and b.numel() > 1:
            raise Unsupported("a split of a value laid out unlike its meta")
        seg.env[node] = [
            Place(
                base.tensor,
                base.offset + part.storage_offset() - b.storage_offset(),
                tuple(part.shape),
                tuple(part.stride()),
                part.dtype,
            )
            for part in meta(node)
        ]
        return
    if is_split_item(node):
        seg.env[node] = seg.env[node.args[0]][node.args[1]]
        return
    if t is aten.native_layer_norm.default:
        lower_layer_norm(seg, node)
        return
    if t is EMBEDDING:
        lower_embedding(seg, node)
        return
    if t is ATTENTION:
        lower_attention(seg, node)
        return
    if t is ATTENTION_BACKWARD:
        lower_attention_backward(seg, node)
        return
    if t in indices.OPS or is_integer_cast(node):
        indices.lower(seg, node)
        return
    if is_item(node):  # of a layer norm: a place, or an expression
        item = seg.env[node.args[0]][node.args[1]]
        if isinstance(item, Lazy):
            seg.pointwise_result(node, item.expr)
        else:
            seg.env[node] = item
        return
    if t in VIEWS:
        src = seg.value(node.args[0])
        v = meta(node)
        if isinstance(src, Lazy) and src.expr[0] == "matmul":  # a reshape of a product
            assert t in RESHAPES, node
            seg.env[node] = Lazy(src.expr[:4] + (tuple(v.shape),), tuple(v.shape), v.dtype)
            return
        if isinstance(src, Lazy):  # the view taken of each leaf of the expression
            expr = view_leaves(src, node)
            if expr is not None:
                seg.env[node] = Lazy(expr, tuple(v.shape), v.dtype)
                return
            seg.place(node.args[0])  # a leaf that the view does not apply to: stored first
        seg.env[node] = view_place(seg, node)
    elif t is aten.addmm.default:
        bias, a, b = node.args[:3]
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            raise Unsupported("addmm with beta or alpha")
        seg.pointwise_result(node, ("alu", "add", product_leaf(seg, node, a, b), seg.term(bias)))
    elif is_pointwise(node):
        seg.pointwise_result(node, pointwise_expr(seg, node))
    elif t in MATMULS:
        leaf = product_leaf(seg, node, node.args[0], node.args[1])
        if seg.fusable_product(node):
            seg.env[node] = Lazy(leaf, leaf[4], meta(node).dtype)
            seg.fused += 1
        else:
            seg.env[node] = seg.store(node, Lazy(leaf, leaf[4], meta(node).dtype))
    elif t in REDUCTIONS:
        lower_reduction(seg, node)
    elif t in SOFTMAX:
        if isinstance(seg.value(node.args[0]), Lazy) and softmax_of_product(seg, node):
            return
        x = seg.place(node.args[0])
        if x.strides != contiguous_strides(x.sizes):
            x = seg.store(node, Lazy(("load", x), x.sizes, x.dtype), scratch_like(seg, x))
        out = seg._new(node)
        if out.strides != contiguous_strides(out.sizes):
            raise Unsupported("a softmax result that is not contiguous")
        seg.stages.append(
            {
                "kind": "softmax",
                "log": SOFTMAX[t],
                "in": x.json(),
                "out": out.json(),
                "node": node.name,
            }
        )
        seg.env[node] = out
    elif t in CONCAT:
        lower_concat(seg, node)
    elif t in SCATTERS:
        lower_scatter(seg, node)
    else:
        raise Unsupported(f"no lowering for {t}")


def lower_layer_norm(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """(out, mean, rstd) of a layer norm over the last dim, in two passes as eager does:
    a reduce stage whose epilogue writes d = x - mean(x), then the variance, mean(d * d),
    as a row reduction read by out = d * rsqrt(var + eps) * w + b (one stage when out is
    stored: the reduction with out as its epilogue)."""
    x_node, _, weight, bias, eps = node.args[:5]
    x = seg.place(x_node)
    keep = tuple(x.sizes[:-1]) + (1,)
    mean = scratch_like(seg, Place("", 0, keep, (), torch.float32))
    if any(u.args[1] == 1 and u in seg.must_store for u in node.users):  # read after the program
        mean = seg._new(next(u for u in node.users if u.args[1] == 1))
    d = scratch_like(seg, Place("", 0, tuple(x.sizes), (), torch.float32))
    centre = [
        {"op": "load", "input": 0},
        {"op": "load", "input": 1},
        {"op": "alu", "alu": "subtract", "args": [0, 1]},
    ]
    seg.stages.append(
        {
            "kind": "reduce",
            "op": "mean",
            "in": x.json(),
            "dim": len(x.sizes) - 1,
            "out": mean.json(),
            "node": node.name,
            "epilogue": {"steps": centre, "outputs": [2], "inputs": [], "rows": d.json()},
        }
    )
    square = {
        "steps": [{"op": "load", "input": 0}, {"op": "alu", "alu": "multiply", "args": [0, 0]}],
        "outputs": [1],
    }
    var = ("rowreduce", "mean", d, json.dumps(square))
    rstd = ("act", "rsqrt", ("alu_imm", "add", var, float(eps), False), 1.0)
    out = ("alu", "multiply", ("load", d), rstd)
    if weight is not None:
        out = ("alu", "multiply", out, seg.term(weight))
    if bias is not None:
        out = ("alu", "add", out, seg.term(bias))
    v = meta(node)
    seg.env[node] = [
        Lazy(out, tuple(x.sizes), v[0].dtype),
        Place(mean.tensor, 0, tuple(v[1].shape), contiguous_strides(v[1].shape), torch.float32),
        Lazy(rstd, tuple(v[2].shape), v[2].dtype),
    ]


def lower_embedding(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """An embedding lookup as one gather stage: the table's rows named by the indices,
    straight from HBM to the node's place."""
    table = seg.place(node.args[0])
    out = seg._new(node)
    rows = math.prod(out.sizes[:-1])
    stage = {
        "kind": "gather",
        "table": table.json(),
        "index": seg.index_words(node.args[1]).json(),
        "out": reshaped(out, (rows, out.sizes[-1])).json(),
        "node": node.name,
    }
    seg.stages.append(stage)
    seg.env[node] = out


def lower_attention(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """The flash attention kernel as one stage: out and the logsumexp (items 0 and 1),
    each in an output tensor when read after the program, else in scratch."""
    a = attention_args(node)
    q, k, v = (seg.place(a[n]) for n in ("query", "key", "value"))
    results = meta(node)
    out, lse = seg.result_place(node, 0), seg.result_place(node, 1)
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.sizes[-1])
    stage = {
        "kind": "attention",
        "q": q.json(),
        "k": k.json(),
        "v": v.json(),
        "out": out.json(),
        "lse": (lse if len(q.sizes) == 4 else reshaped(lse, lse.sizes[1:])).json(),
        "scale": float(scale),
        "causal": bool(a["is_causal"]),
        "node": node.name,
    }
    if a["attn_bias"] is not None:
        stage["mask"] = seg.place(a["attn_bias"]).json()
    seg.stages.append(stage)
    seg.env[node] = [out, lse] + [None] * (len(results) - 2)


def lower_attention_backward(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """attention_backward as one stage: dq, dk, dv (items 0-2) from the forward's tensors."""
    a = attention_backward_args(node)
    q = seg.place(a["query"])
    places = {
        "q": q,
        "k": seg.place(a["key"]),
        "v": seg.place(a["value"]),
        "out": seg.place(a["out"]),
        "dout": seg.place(a["grad_out"]),
        "lse": seg.place(a["logsumexp"]),
        "dq": seg.result_place(node, 0),
        "dk": seg.result_place(node, 1),
        "dv": seg.result_place(node, 2),
    }
    if len(q.sizes) == 3:
        places["lse"] = reshaped(places["lse"], places["lse"].sizes[1:])
    stage = {name: p.json() for name, p in places.items()}
    if a["attn_bias"] is not None:
        stage["mask"] = seg.place(a["attn_bias"]).json()
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.sizes[-1])
    stage.update(
        {
            "kind": "attention_backward",
            "scale": float(scale),
            "causal": bool(a["is_causal"]),
            "node": node.name,
        }
    )
    seg.stages.append(stage)
    seg.env[node] = [places["dq"], places["dk"], places["dv"], None]


def lower_concat(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """Each input copied into its slice of the result (one stored expression each, so a
    lazy input is computed straight into its slice)."""
    out = seg._new(node)
    dim = (node.args[1] if len(node.args) > 1 else 0) % len(out.sizes)
    first, parts = 0, []
    for a in node.args[0]:
        if meta(a).numel() == 0:  # torch.cat skips empty inputs, even 1-D ones of any rank
            continue
        size = meta(a).shape[dim]
        sizes = list(out.sizes)
        sizes[dim] = size
        part = Place(
            out.tensor, out.offset + first * out.strides[dim], tuple(sizes), out.strides, out.dtype
        )
        parts.append((seg.term(a), part))
        first += size
    same = all(p.sizes == parts[0][1].sizes for _, p in parts)
    if same and len(parts) > 1 and not any(matmul_leaves(e) for e, _ in parts):
        # Parts of one shape (rotate_half's halves): one stage writes them all.
        steps, loads, outputs = emit_expression([e for e, _ in parts])
        seg.stages.append(
            {
                "kind": "pointwise",
                "steps": steps,
                "outputs": outputs,
                "inputs": [p.json() for p in loads],
                "outs": [p.json() for _, p in parts],
                "node": node.name,
            }
        )
    else:
        for e, part in parts:
            seg.store(node, Lazy(e, part.sizes, out.dtype), part)
    seg.env[node] = out


def lower_scatter(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """The base stored into the result, then the source into its slice of it."""
    out = seg._new(node)
    seg.store(node, Lazy(seg.term(node.args[0]), out.sizes, out.dtype), out)
    src = meta(node.args[1])
    dim = node.args[2] % len(out.sizes) if len(node.args) > 2 else 0
    strides = list(out.strides)
    if node.target is aten.select_scatter.default:
        index = node.args[3] % out.sizes[dim]
        offset = out.offset + index * out.strides[dim]
        del strides[dim]
    else:
        start = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0
        step = node.args[5] if len(node.args) > 5 else 1
        start = max(0, start + out.sizes[dim] if start < 0 else start)
        offset = out.offset + start * out.strides[dim]
        strides[dim] *= step
    part = Place(out.tensor, offset, tuple(src.shape), tuple(strides), out.dtype)
    seg.store(node, Lazy(seg.term(node.args[1]), part.sizes, out.dtype), part)
    seg.env[node] = out


def stage_writes(stage: dict) -> list[str]:
    """The tensors a plan stage writes."""
    places = list(stage.get("outs", []))
    if "out" in stage:
        places.append(stage["out"])
    for extra in ("epilogue", "norm"):
        if extra in stage and "rows" in stage[extra]:
            places.append(stage[extra]["rows"])
    return [p["tensor"] for p in places]


def softmax_of_product(seg: SegmentPlan, node: torch.fx.Node) -> bool:
    """A softmax of an expression of a product, lowered as the matmul whose epilogue
    computes the expression and then the softmax of each row; False when the product
    does not fit (its rows are not the softmax's), the expression left to be stored."""
    source = node.args[0]
    lazy = seg.value(source)
    v = meta(node)
    planned = Place("", 0, tuple(v.shape), tuple(v.stride()), v.dtype)
    if planned.strides != contiguous_strides(planned.sizes):
        return False
    leaves = matmul_leaves(lazy.expr)
    main = next(
        (m for m in leaves if fits_epilogue(m, planned) and m[3][-1] == planned.sizes[-1]), None
    )
    if main is None:
        return False
    expr = seg.store_products(node, lazy.expr, keep=main)
    seg.env[source] = lazy = Lazy(expr, lazy.sizes, lazy.dtype)
    if seg._epilogue_stage(node, expr, main, planned) is None:
        return False
    out = seg._new(node)
    stage = seg._epilogue_stage(node, expr, main, out)
    stage["rows"] = "log_softmax" if SOFTMAX[node.target] else "softmax"
    seg.stages.append(stage)
    seg.env[node] = out
    return True


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


def product_leaf(seg: SegmentPlan, node: torch.fx.Node, a: Any, b: Any) -> tuple:
    """A matmul as an expression leaf: ("matmul", a, b, product sizes, sizes in the
    expression), the last two differing after a reshape."""
    sizes = tuple(meta(node).shape)
    return ("matmul", seg.place(a), seg.place(b), sizes, sizes)


def lower_reduction(seg: SegmentPlan, node: torch.fx.Node) -> None:
    """One reduce stage per run of reduced dims, innermost run first; the runs before the
    last go to scratch with the reduced dims kept as 1 (a mean of equal-sized means is
    the mean, so mean chains too)."""
    x = seg.value(node.args[0])
    prologue = None
    if isinstance(x, Lazy):  # computed on chip from one place, as the reduction reads it
        steps, (x,), outputs = emit_expression(x.expr)
        prologue = {"steps": steps, "outputs": outputs}
    runs = reduced_runs(node, x)
    if seg.row_reduction_stays_lazy(node, x, runs):
        # The consumer's stage reduces each row and computes from the result (a norm).
        v = meta(node)
        # The prologue as text: leaves are hashable (they key an expression's loads).
        leaf = ("rowreduce", REDUCTIONS[node.target], x, json.dumps(prologue))
        seg.env[node] = Lazy(leaf, tuple(v.shape), v.dtype)
        seg.fused += 1
        return
    if not x.sizes:  # a 0-dim input: one element
        x = Place(x.tensor, x.offset, (1,), (1,), x.dtype)
    rank, reduced = len(x.sizes), {d for run in runs for d in run}
    out = seg._new(node)
    keepdim = len(out.sizes) == rank and len(meta(node.args[0]).shape) > 0
    kept_strides = (
        [out.strides[d] for d in range(rank) if d not in reduced] if keepdim else out.strides
    )
    cur, removed = x, set()
    for k, run in enumerate(reversed(runs)):
        in_sizes, in_strides, dim = [], [], 0
        for d in range(rank):
            if d == run[0]:
                inner = [e for e in run if cur.sizes[e] != 1] or [run[-1]]
                dim = len(in_sizes)
                in_sizes.append(math.prod(cur.sizes[e] for e in run))
                in_strides.append(cur.strides[inner[-1]])
            elif d not in removed and d not in run:
                in_sizes.append(cur.sizes[d])
                in_strides.append(cur.strides[d])
        kept = [d for d in range(rank) if d not in removed and d not in run]
        if k == len(runs) - 1:
            target = Place(
                out.tensor, 0, tuple(x.sizes[d] for d in kept), tuple(kept_strides), out.dtype
            )
            nxt = out
        else:
            sizes = tuple(1 if d in removed or d in run else x.sizes[d] for d in range(rank))
            nxt = scratch_like(seg, Place("", 0, sizes, (), meta(node).dtype))
            target = Place(
                nxt.tensor,
                0,
                tuple(sizes[d] for d in kept),
                tuple(nxt.strides[d] for d in kept),
                nxt.dtype,
            )
        merged = Place(cur.tensor, cur.offset, tuple(in_sizes), tuple(in_strides), cur.dtype)
        stage = {
            "kind": "reduce",
            "op": REDUCTIONS[node.target],
            "in": merged.json(),
            "dim": dim,
            "out": target.json(),
            "node": node.name,
        }
        if prologue is not None and k == 0:
            stage["prologue"] = prologue
        seg.stages.append(stage)
        removed |= set(run)
        cur = nxt
    seg.env[node] = out

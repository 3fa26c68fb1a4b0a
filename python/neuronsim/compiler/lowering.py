"""Lowering a segment: each aten node of it becomes stages of its plan (plan.py).

``lower`` walks the segment's nodes in order. A pointwise node becomes an expression, lazy
until a reader needs it stored; a view becomes a new view of its Place; matmuls, reductions,
softmax, layer norm, embedding, attention, concatenation and scatter become the stages whose
kernels python/csrc/compiler/graph.cpp builds. Which nodes get here, and how they are
grouped, is ops.py's; the integer ops are indices.py's."""

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
    contiguous_strides,
    emit_expression,
    fits_epilogue,
    matmul_leaves,
    meta,
    reshaped,
    view_leaves,
)
from .ops import (
    ACTIVATIONS,
    ATTENTION,
    ATTENTION_BACKWARD,
    BINARY,
    CONCAT,
    EMBEDDING,
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
    reduced_runs,
)
from .plan import SegmentPlan, scratch_like
from .views import VIEWS


def lower(seg: SegmentPlan) -> None:
    """Lowers every node of the segment into its plan, then records the values that leave it."""
    for node in seg.nodes:
        lower_node(seg, node)
    for node in seg.escaping:
        if node.target in TUPLES:  # read through its items, which escape themselves
            continue
        v = seg.env[node]
        assert isinstance(v, Place), node
        seg.escapes.append((node, v))


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

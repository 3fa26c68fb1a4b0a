"""Integer values in programs: the indices a mixture of experts routes with.

The engines compute in FP32, which holds an integer exactly below 2^24, and have no 64-bit
type. So the programs compute only integers whose range the graph proves small: each integer
node gets bounds (``infer_bounds``) from what made it (a topk's positions lie in [0, n), a
histogram's counts in [0, numel], a floor division divides its input's bounds, a folded
constant has its values), and an op on integers lowers only when its operands' and result's
bounds lie in [0, 2^24). An int64 value is held as two int32 words (``Place.words``): the low
one is the value, and a stage that writes one also writes the high one, zero.

The ops, each a few stages (kernels/include/neuronsim/kernels/graph.h):
  topk            the topk stage, its positions into the low words;
  sort            topk of the whole dim (stable), integer keys through an FP32 copy;
  floor division  by a positive integer: (a - a mod k) / k, exact;
  integer casts   int64 <-> int32, a copy of the low words;
  histc           of integers with one bin per integer: a comparison of each element with
                  each bin's position, summed;
  cumsum          the scan stage;
  x[index]        along dim 0: a gather stage (rows by indirect DMA);
  index_put       of rows along dim 0: a copy of self (none when the index is a permutation
                  of all of self), then a scatter stage;
  _grouped_mm     the grouped product with its row ends on the device (2-D x 3-D).
A node whose bounds are not proven runs eagerly, as before.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx

from .. import _C
from .expressions import Place, contiguous_strides, meta
from .views import VIEWS

aten = torch.ops.aten

EXACT = 1 << 24  # integers below this are exact in FP32
BOUNDS = "neuron_bounds"  # node.meta: (lo, hi), inclusive bounds of an integer tensor
PERMUTATION = "neuron_permutation"  # node.meta: the values are a permutation of range(numel)
INTEGERS = (torch.int64, torch.int32)
FLOATS = (torch.float32, torch.bfloat16, torch.float16)

TOPK = aten.topk.default
SORTS = {aten.sort.default, aten.sort.stable}
FLOOR_DIV = aten.div.Tensor_mode
GROUPED_MM = aten._grouped_mm.default
OPS = {
    TOPK,
    *SORTS,
    FLOOR_DIV,
    aten.histc.default,
    aten.cumsum.default,
    aten.index.Tensor,
    aten.index_put.default,
    GROUPED_MM,
}


class NotSmall(Exception):
    """An integer node whose values are not proven small: it runs eagerly."""


# -- bounds


def _arg(node: torch.fx.Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def bounds(node) -> tuple[int, int] | None:
    return node.meta.get(BOUNDS) if isinstance(node, torch.fx.Node) else None


def small(node) -> bool:
    """An integer node whose values are proven to lie in [0, 2^24)."""
    b = bounds(node)
    return b is not None and 0 <= b[0] and b[1] < EXACT


def infer_bounds(gm: torch.fx.GraphModule) -> None:
    """Sets BOUNDS (and PERMUTATION) on the integer nodes whose values it can bound."""
    # Constants are real tensors, read on the host, outside AOTAutograd's fake mode.
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        _infer(gm)


def _infer(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        v = meta(node)
        found = _bounds_of(gm, node)
        if found is not None and isinstance(v, torch.Tensor) and v.dtype in INTEGERS:
            node.meta[BOUNDS] = (int(found[0]), int(found[1]))


def _union(*bs) -> tuple[int, int] | None:
    if any(b is None for b in bs):
        return None
    return min(b[0] for b in bs), max(b[1] for b in bs)


def _bounds_of(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[int, int] | None:
    t = node.target
    if node.op == "get_attr":
        value = getattr(gm, node.target, None)
        if not (isinstance(value, torch.Tensor) and value.dtype in INTEGERS and value.numel()):
            return None
        if value.device.type != "cpu" and _C.mode() == "timing-only":
            return None  # its values are never computed: unbounded, as a graph input is
        host = value.cpu()
        return int(host.min()), int(host.max())
    if node.op != "call_function":
        return None
    if t is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        source, item = node.args[0], node.args[1]
        if source.target is TOPK and item == 1:
            x = meta(source.args[0])
            n = x.shape[_arg(source, 2, "dim", -1)] if x.dim() else 1
            return 0, n - 1
        if source.target in SORTS:
            x = meta(source.args[0])
            if item == 0:
                return bounds(source.args[0])
            dim = _sort_dim(source)
            n = x.shape[dim] if x.dim() else 1
            if x.dim() <= 1:
                node.meta[PERMUTATION] = True
            return 0, n - 1
        return None
    if t in VIEWS or t in (aten.clone.default, aten._to_copy.default):  # values kept
        return bounds(node.args[0])
    if t is FLOOR_DIV:
        b, k = bounds(node.args[0]), node.args[1]
        if b is None or not _floor_division(node):
            return None
        return b[0] // k, b[1] // k
    if t is aten.histc.default:
        return 0, meta(node.args[0]).numel()
    if t is aten.cumsum.default:
        b = bounds(node.args[0])
        if b is None or b[0] < 0:
            return None
        x = meta(node.args[0])
        return 0, b[1] * (x.shape[node.args[1]] if x.dim() else 1)
    if t is aten.arange.start_step:
        start, end = node.args[:2]
        if _arg(node, 2, "step", 1) != 1 or not (isinstance(start, int) and isinstance(end, int)):
            return None
        return start, end - 1
    if t is aten.index.Tensor:
        return bounds(node.args[0])
    if t is aten.index_put.default:
        self_node, index, values = node.args[:3]
        if len(index) == 1 and isinstance(index[0], torch.fx.Node) and _covers(index[0], self_node):
            return bounds(values)
        return _union(bounds(self_node), bounds(values))
    return None


def _sort_args(node: torch.fx.Node) -> tuple[int, bool]:
    """(dim, descending) of a sort: sort.default takes them by position, sort.stable by
    keyword."""
    positional = node.args[1:] if node.target is aten.sort.default else ()
    dim = positional[0] if len(positional) > 0 else node.kwargs.get("dim", -1)
    descending = positional[1] if len(positional) > 1 else node.kwargs.get("descending", False)
    return dim % max(meta(node.args[0]).dim(), 1), bool(descending)


def _sort_dim(node: torch.fx.Node) -> int:
    return _sort_args(node)[0]


def _covers(index: torch.fx.Node, target: torch.fx.Node) -> bool:
    """index is a permutation of all of target's (1-D) positions."""
    t, i = meta(target), meta(index)
    return bool(index.meta.get(PERMUTATION)) and t.dim() == 1 and i.numel() == t.numel()


def _floor_division(node: torch.fx.Node) -> bool:
    k = node.args[1]
    return (
        node.kwargs.get("rounding_mode") == "floor"
        and isinstance(k, int)
        and not isinstance(k, bool)
        and 0 < k < EXACT
    )


# -- which nodes lower


def _device(*tensors) -> bool:
    return all(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in tensors)


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise NotSmall(why)


def _small_input(node, what: str) -> None:
    _need(isinstance(node, torch.fx.Node) and small(node), f"{what} is not proven in [0, 2^24)")


def check(node: torch.fx.Node) -> None:
    """Raises NotSmall, saying why, unless the integer op (OPS) lowers."""
    t, out = node.target, meta(node)
    if t is TOPK:
        x = meta(node.args[0])
        _need(_device(x) and x.dtype in FLOATS and x.dim() >= 1, "a topk that is not of floats")
        _need(_arg(node, 4, "sorted", True), "an unsorted topk")
        return
    if t in SORTS:
        x = meta(node.args[0])
        _need(_device(x) and x.dim() >= 1, "a sort off the device")
        if x.dtype in INTEGERS:
            _small_input(node.args[0], "the sort's keys")
        else:
            _need(x.dtype in FLOATS, f"a sort of {x.dtype}")
        _need(x.shape[_sort_dim(node)] <= 16384, "a sort of rows past 16,384 elements")
        return
    if t is FLOOR_DIV:
        _need(_floor_division(node), "a division that is not floor by a positive integer")
        _small_input(node.args[0], "the dividend")
        _need(out.dtype in INTEGERS and out.is_contiguous(), "a division into a strided result")
        return
    if t is aten.histc.default:
        x = meta(node.args[0])
        bins, lo, hi = (
            _arg(node, i, n, d) for i, n, d in ((1, "bins", 100), (2, "min", 0), (3, "max", 0))
        )
        _need(
            x.dtype in INTEGERS and out.dtype in INTEGERS and x.is_contiguous(),
            "a histogram of floats or of a strided tensor",
        )
        _small_input(node.args[0], "the histogram's input")
        _need(
            all(isinstance(v, int) for v in (lo, hi)) and bins == hi - lo + 1 and lo >= 0,
            "a histogram whose bins are not one per integer",
        )
        _need(bins * x.numel() <= (1 << 22), "a histogram of more than 4 M comparisons")
        return
    if t is aten.cumsum.default:
        x = meta(node.args[0])
        _need(x.dtype in INTEGERS and out.dtype in INTEGERS, "a running sum of floats")
        _small_input(node.args[0], "the running sum's input")
        _need(small(node), "running sums not proven below 2^24")
        return
    if t is aten.index.Tensor:
        self_node, indices = node.args[:2]
        x = meta(self_node)
        _need(len(indices) == 1 and isinstance(indices[0], torch.fx.Node), "advanced indexing")
        i = meta(indices[0])
        _need(_device(x, i) and i.dtype in INTEGERS and i.dim() == 1, "an index that is not 1-D")
        _need(x.dtype in FLOATS and x.is_contiguous(), "an index of a strided or integer tensor")
        _small_input(indices[0], "the index")
        _need(bounds(indices[0])[1] < x.shape[0], "an index past the rows")
        return
    if t is aten.index_put.default:
        self_node, indices, values = node.args[:3]
        _need(not _arg(node, 3, "accumulate", False), "an accumulating index_put")
        _need(len(indices) == 1 and isinstance(indices[0], torch.fx.Node), "advanced indexing")
        x, i, v = meta(self_node), meta(indices[0]), meta(values)
        _need(
            _device(x, i, v) and x.dim() == 1 and i.dim() == 1 and v.shape == i.shape,
            "an index_put that is not of 1-D rows",
        )
        _need(
            x.dtype == v.dtype and (x.dtype in FLOATS or small(node)),
            "an index_put of values not proven small",
        )
        _need(x.is_contiguous() and v.is_contiguous(), "an index_put of strided tensors")
        _small_input(indices[0], "the index")
        _need(bounds(indices[0])[1] < x.shape[0], "an index past the rows")
        return
    if t is GROUPED_MM:
        a, b, offs = (meta(x) for x in node.args[:3])
        _need(len(node.args) <= 3 or node.args[3] is None, "a grouped product with a bias")
        _need(
            _device(a, b, offs) and a.dim() == 2 and b.dim() == 3 and offs.dim() == 1,
            "a grouped product that is not 2-D x 3-D with row ends",
        )
        _need(
            a.dtype in FLOATS and b.dtype == a.dtype and offs.dtype == torch.int32,
            "a grouped product of other dtypes",
        )
        _need(a.stride(-1) == 1 and out.is_contiguous(), "a grouped product of strided rows")
        G, K, N = b.shape
        rows_of_w = N > 1 and b.stride(1) == 1 and b.stride(2) != 1
        _need(
            G == 1 or b.stride(0) == (N * b.stride(2) if rows_of_w else K * b.stride(1)),
            "a grouped product whose groups are not one after another",
        )
        _need(
            G <= 1024 and G * (N if rows_of_w else K) < EXACT, "a grouped product past its limits"
        )
        return
    raise NotSmall(f"no lowering for {t}")


def check_cast(node: torch.fx.Node) -> None:
    """An integer cast (_to_copy between int32 and int64) of small values."""
    x, out = meta(node.args[0]), meta(node)
    _need(x.dtype in INTEGERS and out.dtype in INTEGERS, "a cast to or from floats")
    _small_input(node.args[0], "the cast's input")


# -- lowering


def _zero_high(seg, node: torch.fx.Node, place: Place) -> None:
    """The high words of an int64 place: zero, as its small non-negative values need."""
    if place.dtype == torch.int64:
        seg.stages.append(
            {
                "kind": "pointwise",
                "steps": [{"op": "constant", "imm": 0.0}],
                "outputs": [0],
                "inputs": [],
                "outs": [place.words(high=True).json()],
                "node": node.name,
            }
        )


def _store(seg, node: torch.fx.Node, expr: tuple, place: Place) -> None:
    seg._pointwise_stage(node, expr, place)
    _zero_high(seg, node, place)


def _scratch(seg, dtype: torch.dtype, sizes) -> Place:
    name = seg._declare("scratch", dtype, math.prod(sizes))
    return Place(name, 0, tuple(sizes), contiguous_strides(sizes), dtype)


def _topk_stage(seg, node, x: Place, dim: int, k: int, largest: bool, values, indices) -> None:
    seg.stages.append(
        {
            "kind": "topk",
            "in": x.json(),
            "dim": dim,
            "k": k,
            "largest": bool(largest),
            "values": values.json(),
            "indices": indices.json(),
            "node": node.name,
        }
    )


def lower(seg, node: torch.fx.Node) -> None:
    t = node.target
    if t is TOPK:
        x = seg.place(node.args[0])
        dim = _arg(node, 2, "dim", -1) % len(x.sizes)
        values, indices = seg.result_place(node, 0), seg.result_place(node, 1)
        _topk_stage(
            seg, node, x, dim, node.args[1], _arg(node, 3, "largest", True), values, indices
        )
        _zero_high(seg, node, indices)
        seg.env[node] = [values, indices]
    elif t in SORTS:
        x = seg.place(node.args[0])
        dim, descending = _sort_args(node)
        values, indices = seg.result_place(node, 0), seg.result_place(node, 1)
        n = x.sizes[dim]
        if x.dtype in INTEGERS:  # keys through FP32, exact for small values
            keys = _scratch(seg, torch.float32, x.sizes)
            seg._pointwise_stage(node, ("load", x), keys)
            ordered = _scratch(seg, torch.float32, x.sizes)
            _topk_stage(seg, node, keys, dim, n, descending, ordered, indices)
            _store(seg, node, ("load", ordered), values)
        else:
            _topk_stage(seg, node, x, dim, n, descending, values, indices)
        _zero_high(seg, node, indices)
        seg.env[node] = [values, indices]
    elif t is FLOOR_DIV:
        x, k = seg.place(node.args[0]), float(node.args[1])
        out = seg._new(node)
        a = ("load", x)
        rest = ("alu", "subtract", a, ("alu_imm", "mod", a, k, False))
        _store(seg, node, ("alu_imm", "divide", rest, k, False), out)
        seg.env[node] = out
    elif t is aten._to_copy.default:
        out = seg._new(node)
        _store(seg, node, ("load", seg.place(node.args[0])), out)
        seg.env[node] = out
    elif t is aten.histc.default:
        _lower_histc(seg, node)
    elif t is aten.cumsum.default:
        x, out = seg.place(node.args[0]), seg._new(node)
        seg.stages.append(
            {
                "kind": "cumsum",
                "in": x.json(),
                "dim": node.args[1] % len(x.sizes),
                "out": out.json(),
                "node": node.name,
            }
        )
        _zero_high(seg, node, out)
        seg.env[node] = out
    elif t is aten.index.Tensor:
        table, index = seg.place(node.args[0]), seg.place(node.args[1][0])
        out = seg._new(node)
        rows = table.sizes[0]
        cols = math.prod(table.sizes[1:])
        seg.stages.append(
            {
                "kind": "gather",
                "table": Place(
                    table.tensor, table.offset, (rows, cols), (cols, 1), table.dtype
                ).json(),
                "index": _flat(index).json(),
                "out": Place(
                    out.tensor, out.offset, (index.sizes[0], cols), (cols, 1), out.dtype
                ).json(),
                "node": node.name,
            }
        )
        seg.env[node] = out
    elif t is aten.index_put.default:
        _lower_index_put(seg, node)
    elif t is GROUPED_MM:
        a, b, offs = (seg.place(x) for x in node.args[:3])
        out = seg._new(node)
        seg.stages.append(
            {
                "kind": "grouped_matmul",
                "a": a.json(),
                "b": b.json(),
                "offs": offs.json(),
                "out": out.json(),
                "node": node.name,
            }
        )
        seg.env[node] = out
    else:
        raise AssertionError(t)


def _flat(index: Place) -> Place:
    assert len(index.sizes) == 1 and index.strides == (1,), index
    return index


def _lower_histc(seg, node: torch.fx.Node) -> None:
    """counts[b] = sum over x of (x - min == b): the comparisons [bins, n] in scratch, then
    summed along each bin's row."""
    x = seg.place(node.args[0])
    bins = _arg(node, 1, "bins", 100)
    lo = _arg(node, 2, "min", 0)
    n = math.prod(x.sizes)
    assert x.strides == contiguous_strides(x.sizes), x
    every = Place(x.tensor, x.offset, (bins, n), (0, 1), x.dtype)
    hits = _scratch(seg, torch.float32, (bins, n))
    shifted = ("alu_imm", "subtract", ("load", every), float(lo), False)
    seg._pointwise_stage(node, ("alu", "is_equal", shifted, ("pos", [1, 0])), hits)
    out = seg._new(node)
    seg.stages.append(
        {
            "kind": "reduce",
            "op": "sum",
            "in": hits.json(),
            "dim": 1,
            "out": out.json(),
            "node": node.name,
        }
    )
    _zero_high(seg, node, out)
    seg.env[node] = out


def _lower_index_put(seg, node: torch.fx.Node) -> None:
    """out = self with rows index[i] = values[i]: a copy of self (none when the index is a
    permutation of all its rows), then the rows scattered (one row is one element here)."""
    self_node, (index_node,), values_node = node.args[:3]
    out = seg._new(node)
    if not _covers(index_node, self_node):
        seg._pointwise_stage(node, ("load", seg.place(self_node)), out)
    values, index = seg.place(values_node), seg.place(index_node)
    count = values.sizes[0]
    words = 2 if out.dtype == torch.int64 else 1
    dtype = torch.int32 if words == 2 else out.dtype
    # Rows of one element: 8-byte int64 values move as two int32 words.
    src = Place(values.tensor, values.offset * words, (count, words), (words, 1), dtype)
    dst = Place(out.tensor, out.offset * words, (out.sizes[0], words), (words, 1), dtype)
    seg.stages.append(
        {
            "kind": "scatter",
            "src": src.json(),
            "index": _flat(index).json(),
            "out": dst.json(),
            "node": node.name,
        }
    )
    seg.env[node] = out

"""Which aten nodes lower to graph programs (check_lowerable) and the tables that say how
they are grouped; a node that does not lower runs eagerly."""

from __future__ import annotations

import operator

import torch
import torch.fx

from ..dtypes import DTYPES
from ..nki import is_kernel_op
from . import indices
from .expressions import Place, is_dense, meta
from .layouts import kept_transposed
from .views import VIEWS

aten = torch.ops.aten


# What the engines hold: the dtypes a lowered node reads and writes, by their ISA names.
ENGINE_DTYPES = {
    DTYPES[name].torch_dtype(): DTYPES[name].isa
    for name in ("float32", "bfloat16", "float16", "bool")
}


FLOATS = indices.FLOATS  # float32, bfloat16, float16


class Unsupported(Exception):
    """A node this module does not lower (it runs eagerly instead); the message says why."""


class NoWork(Unsupported):
    """A node outside the programs that computes nothing (a view of a tensor the engines
    do not hold, an item of a tuple): it runs eagerly, but nothing is split out."""


class OwnKernel(NoWork):
    """A node that is a device kernel of its own (an NKI kernel, neuronsim.nki): it runs
    between the programs, on the device, and is no fallback."""


class Empty(NoWork):
    """A node whose result has no elements (a pass-through slice of a partial rotary
    embedding): made from its meta alone, so it waits for none of its inputs."""


ACTIVATIONS = {
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
    aten.relu.default: "relu",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.reciprocal.default: "reciprocal",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.erf.default: "erf",
    aten.abs.default: "abs",
    aten.neg.default: "negate",
    aten.silu.default: "silu",
}


BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "subtract",
    aten.sub.Scalar: "subtract",
    aten.mul.Tensor: "multiply",
    aten.mul.Scalar: "multiply",
    aten.div.Tensor: "divide",
    aten.div.Scalar: "divide",
    aten.maximum.default: "max",
    aten.minimum.default: "min",
    aten.pow.Tensor_Tensor: "pow",
    aten.eq.Tensor: "is_equal",
    aten.eq.Scalar: "is_equal",
    aten.ne.Tensor: "not_equal",
    aten.ne.Scalar: "not_equal",
    aten.gt.Tensor: "is_gt",
    aten.gt.Scalar: "is_gt",
    aten.ge.Tensor: "is_ge",
    aten.ge.Scalar: "is_ge",
    aten.lt.Tensor: "is_lt",
    aten.lt.Scalar: "is_lt",
    aten.le.Tensor: "is_le",
    aten.le.Scalar: "is_le",
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
}


# Pointwise ops that choose, move or make values without arithmetic: exact in any dtype.
MOVES = {
    aten.where.self,
    aten.clone.default,
    aten._to_copy.default,
    aten.copy.default,
    aten.full.default,
    aten.full_like.default,
    aten.scalar_tensor.default,
    aten.lift_fresh_copy.default,
}


OTHER_POINTWISE = MOVES | {
    aten.pow.Tensor_Scalar,
    aten.rsub.Scalar,
    aten.clamp.default,
    aten.logical_not.default,
    aten.gelu.default,
}


MATMULS = {aten.mm.default, aten.bmm.default, aten.addmm.default}


RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


# Views of a tensor's slices along a dim, one per item (read through getitem).
SPLITS = {aten.split_with_sizes.default, aten.split.Tensor}


EMBEDDING = aten.embedding.default
INDEX_DTYPES = indices.INTEGERS

ATTENTION = aten._scaled_dot_product_fused_attention_overrideable.default
ATTENTION_BACKWARD = aten._scaled_dot_product_fused_attention_overrideable_backward.default
ATTENTION_HEAD_DIM = 256  # kernels::attention's limit
ATTENTION_BACKWARD_HEAD_DIM = 128  # kernels::attention_backward's
# SBUF per partition that attention_backward's resident query tiles may take (of trn2's 224
# KiB, the rest being its key blocks and steps), and what one tile takes at head dims d, dv.
ATTENTION_BACKWARD_SBUF = 160 * 1024


def attention_backward_tile_bytes(d: int, dv: int, itemsize: int) -> int:
    def tile(n, size):
        return (n * size + 63) // 64 * 64

    return 2 * tile(d, itemsize) + tile(dv, itemsize) + tile(128, itemsize) + tile(d, 4) + 192


# Ops with several results, each read through getitem.
TUPLES = SPLITS | {aten.native_layer_norm.default, ATTENTION, ATTENTION_BACKWARD, indices.TOPK}
TUPLES |= indices.SORTS


def is_split_item(node: torch.fx.Node) -> bool:
    return (
        node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].target in SPLITS
    )


def is_item(node: torch.fx.Node) -> bool:
    return (
        node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].target in TUPLES
    )


REDUCTIONS = {
    aten.sum.dim_IntList: "sum",
    aten.sum.default: "sum",
    aten.mean.dim: "mean",
    aten.mean.default: "mean",
    aten.amax.default: "max",
    aten.amin.default: "min",
    aten.any.dim: "max",
    aten.any.dims: "max",
    aten.any.default: "max",
}


SOFTMAX = {aten._softmax.default: False, aten._log_softmax.default: True}


CONCAT = {aten.cat.default}


# The result is the first input with a slice replaced by the second (backward of slices).
SCATTERS = {aten.slice_scatter.default, aten.select_scatter.default}


def is_pointwise(node: torch.fx.Node) -> bool:
    t = node.target
    return t in ACTIVATIONS or t in BINARY or t in OTHER_POINTWISE or t is aten.addmm.default


def reads_lazy(node: torch.fx.Node) -> bool:
    """The node computes from expressions (it stores them itself), not from places."""
    t = node.target
    return (is_pointwise(node) and t is not aten.addmm.default) or t in CONCAT or t in SCATTERS


def check_lowerable(node: torch.fx.Node) -> None:
    """Raises Unsupported, saying why, unless this module lowers the node."""
    t = node.target
    if node.op != "call_function":
        raise Unsupported(f"{node.op} node")
    if t is kept_transposed:
        raise NoWork("a parameter kept transposed between calls")
    if is_kernel_op(t):
        raise OwnKernel("an NKI kernel, a device kernel of its own")
    if t is operator.getitem:
        if not is_item(node):
            raise NoWork("an item of a tuple")
        check_lowerable(node.args[0])  # an item of a split or a layer norm that lowers
        return
    if t is aten.native_layer_norm.default:
        x, shape, weight, bias = node.args[:4]
        v = meta(x)
        if len(shape) != 1 or v.dtype not in FLOATS or v.device.type != "neuron" or not v.numel():
            raise Unsupported("a layer norm over more than the last dim, or not of floats")
        for a in (weight, bias):
            if a is not None and (meta(a) is None or meta(a).dtype not in FLOATS):
                raise Unsupported("a layer norm's weight or bias that is not a float tensor")
        if meta(node)[1].dtype != torch.float32:
            raise Unsupported("a layer norm whose mean is not float32")
        return
    if t is EMBEDDING:
        check_embedding(node)
        return
    if t is ATTENTION:
        check_attention(node)
        return
    if t is ATTENTION_BACKWARD:
        args = attention_backward_args(node)
        if not backward_lowers(*(meta(args[n]) for n in BACKWARD_TENSORS), args):
            raise Unsupported("an attention backward the kernel does not cover")
        return
    if t in indices.OPS or is_integer_cast(node):
        try:
            (indices.check_cast if t is aten._to_copy.default else indices.check)(node)
        except indices.NotSmall as why:
            raise Unsupported(str(why)) from None
        return
    if t in VIEWS and isinstance(meta(node), torch.Tensor) and indices.small(node):
        return  # a view of small integers (indices.py)
    if t in SPLITS:
        parts = meta(node)
        if not all(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in parts):
            raise Unsupported("a split off the device")
        if meta(node.args[0]).dtype not in ENGINE_DTYPES:
            raise NoWork(f"{meta(node.args[0]).dtype} has no engine type")
        return
    if not (
        t in ACTIVATIONS
        or t in BINARY
        or t in VIEWS
        or t in OTHER_POINTWISE
        or t in MATMULS
        or t in REDUCTIONS
        or t in SOFTMAX
        or t in CONCAT
        or t in SCATTERS
    ):
        raise Unsupported(f"no lowering for {t}")
    out = meta(node)
    if not isinstance(out, torch.Tensor):
        raise Unsupported("its result is not one tensor")
    if t in CONCAT and any(meta(a).dtype != out.dtype for a in node.args[0]):
        raise Unsupported("a concatenation of several dtypes")
    tensors = [out] + [meta(a) for a in node.all_input_nodes]
    for v in tensors:
        if not isinstance(v, torch.Tensor):
            raise Unsupported("an input is not a tensor")
        if v.device.type != "neuron":
            raise Unsupported(f"a tensor is on {v.device}, not a neuron device")
        if v.dtype not in ENGINE_DTYPES:
            raise (NoWork if t in VIEWS else Unsupported)(f"{v.dtype} has no engine type")
        if v.numel() == 0 and (v is out or t not in CONCAT):
            raise (Empty if v is out else Unsupported)("an empty tensor")
    if t not in VIEWS and not is_dense(out):
        raise Unsupported("its result's strides overlap or leave gaps")
    computes = t in FLOAT_ONLY or t in MATMULS or t in SOFTMAX
    if computes and out.dtype not in FLOATS and t not in ANY_DTYPE:
        raise Unsupported(f"{out.dtype} arithmetic rounds differently from the engines")
    if t is aten.div.Tensor and node.kwargs.get("rounding_mode") is not None:
        raise Unsupported("div with a rounding mode")
    if t in SOFTMAX:
        dim = node.args[1] % out.dim()
        if dim != out.dim() - 1 or node.args[2]:
            raise Unsupported("softmax over a dim other than the last, or half to float")
    if t in (aten._to_copy.default,):
        extra = set(node.kwargs) - {"dtype", "layout", "device", "memory_format"}
        if extra or node.kwargs.get("device") not in (None, out.device):
            raise Unsupported("a copy to another device")
    if t in (
        aten.full.default,
        aten.full_like.default,
        aten.scalar_tensor.default,
    ) and not isinstance(
        node.args[0] if t is aten.scalar_tensor.default else node.args[1], (int, float, bool)
    ):
        raise Unsupported("a fill value that is not a number")
    if t is aten.gelu.default and node.kwargs.get("approximate", "none") not in ("none", "tanh"):
        raise Unsupported("gelu approximation")
    if t in REDUCTIONS:
        reduced_runs(node)  # raises for a dtype argument
    if t is aten.clamp.default and any(isinstance(a, torch.fx.Node) for a in node.args[1:]):
        raise Unsupported("clamp with tensor bounds")


def is_integer_cast(node: torch.fx.Node) -> bool:
    """A copy of an integer tensor into another integer dtype (indices.py)."""
    if node.target is not aten._to_copy.default:
        return False
    x, out = meta(node.args[0]), meta(node)
    return (
        isinstance(x, torch.Tensor)
        and isinstance(out, torch.Tensor)
        and x.dtype in indices.INTEGERS
        and out.dtype in indices.INTEGERS
    )


def attention_args(node: torch.fx.Node) -> dict:
    """The arguments of an attention node by name, defaults filled in."""
    names = ("query", "key", "value", "attn_bias", "dropout_p", "is_causal", "return_debug_mask")
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    args.setdefault("attn_bias", None)
    args.setdefault("dropout_p", 0.0)
    args.setdefault("is_causal", False)
    args.setdefault("return_debug_mask", False)
    args.setdefault("scale", None)
    return args


BACKWARD_NAMES = (
    "grad_out",
    "query",
    "key",
    "value",
    "attn_bias",
    "grad_input_mask",
    "out",
    "logsumexp",
    "cum_seq_q",
    "cum_seq_k",
    "max_q",
    "max_k",
    "dropout_p",
    "is_causal",
    "philox_seed",
    "philox_offset",
)
BACKWARD_TENSORS = ("query", "key", "value", "out", "grad_out", "logsumexp")


def attention_backward_args(node: torch.fx.Node) -> dict:
    args = dict(zip(BACKWARD_NAMES, node.args))
    args.update(node.kwargs)
    args.setdefault("scale", None)
    return args


def backward_lowers(q, k, v, out, grad_out, lse, args: dict) -> bool:
    """Whether kernels::attention_backward computes this backward (a graph stage; the
    decomposition leaves it to the stage). Takes tensors or their metas."""
    tensors = (q, k, v, out, grad_out)
    if any(not isinstance(t, torch.Tensor) or t.device.type != "neuron" for t in tensors):
        return False
    if q.dtype not in FLOATS or any(t.dtype != q.dtype for t in tensors) or q.dim() not in (3, 4):
        return False
    if args["dropout_p"] != 0.0 or (args["attn_bias"] is not None and args["grad_input_mask"][3]):
        return False
    if max(q.shape[-1], v.shape[-1]) > ATTENTION_BACKWARD_HEAD_DIM:
        return False
    if any(t.stride(-1) != 1 and t.shape[-1] != 1 for t in tensors):
        return False
    tiles = q.shape[-3] // k.shape[-3] * -(-q.shape[-2] // 128)
    tile = attention_backward_tile_bytes(q.shape[-1], v.shape[-1], q.element_size())
    return tiles * tile <= ATTENTION_BACKWARD_SBUF


def check_embedding(node: torch.fx.Node) -> None:
    """An embedding lookup is one gather stage (indirect DMA from the table): a table on the
    device with rows one after another, and contiguous indices (int64 ones read by their
    low words, the eager kernel's check of the high words aside: an index past 2^32 aliases,
    where PyTorch raises)."""
    weight, indices = (meta(a) for a in node.args[:2])
    if not all(
        isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in (weight, indices)
    ):
        raise Unsupported("an embedding off the device")
    if weight.dim() != 2 or weight.dtype not in ENGINE_DTYPES or not weight.is_contiguous():
        raise Unsupported("an embedding table that is not a contiguous 2-dim engine tensor")
    if indices.dtype not in INDEX_DTYPES or indices.dim() == 0 or not indices.is_contiguous():
        raise Unsupported("embedding indices that are not contiguous int64 or int32")
    if not indices.numel() or weight.shape[0] >= 2**31:
        raise Unsupported("an embedding of no indices, or of 2^31 rows or more")


def check_attention(node: torch.fx.Node) -> None:
    """The cases of the attention stage: what the eager op runs on its kernel."""
    a = attention_args(node)
    q, k, v = (meta(a[n]) for n in ("query", "key", "value"))
    if a["dropout_p"] != 0.0 or a["return_debug_mask"]:
        raise Unsupported("attention with dropout or a debug mask")
    if any(not isinstance(t, torch.Tensor) or t.device.type != "neuron" for t in (q, k, v)):
        raise Unsupported("attention off the device")
    if q.dtype not in FLOATS or k.dtype != q.dtype or v.dtype != q.dtype:
        raise Unsupported("attention over tensors of several dtypes, or not floats")
    if q.dim() not in (3, 4) or max(q.shape[-1], v.shape[-1]) > ATTENTION_HEAD_DIM:
        raise Unsupported(f"attention with head dims past {ATTENTION_HEAD_DIM}, or not 3-D/4-D")
    if any(t.stride(-1) != 1 and t.shape[-1] != 1 for t in (q, k, v)):
        raise Unsupported("attention whose head dim is not contiguous")
    mask = meta(a["attn_bias"])
    if a["attn_bias"] is not None and (
        not isinstance(mask, torch.Tensor) or mask.dtype not in FLOATS or mask.dim() > 4
    ):
        raise Unsupported("attention with a mask that is not a float tensor")


# Ops whose results are exact in any engine dtype: comparisons and logic give 0 or 1.
ANY_DTYPE = (
    {k for k, v in BINARY.items() if v.startswith("is_") or v == "not_equal"}
    | {aten.logical_not.default, aten.logical_and.default, aten.logical_or.default}
    | MOVES
    | {aten.any.dim, aten.any.dims, aten.any.default}
)


FLOAT_ONLY = set(ACTIVATIONS) | set(BINARY) | set(OTHER_POINTWISE) | set(REDUCTIONS)


def reduced_runs(node: torch.fx.Node, x: Place | None = None) -> list[list[int]]:
    """The dims a reduction node reduces, as runs of adjacent dims that the input's
    strides (x's, else its meta's) let one reduction walk as one dim; the reductions run
    one run at a time."""
    v = meta(node.args[0])
    rank = v.dim()
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if isinstance(dims, int):
        dims = [dims]
    if node.target in (aten.sum.default, aten.mean.default, aten.any.default) or dims in (None, []):
        dims = list(range(rank))
    if node.kwargs.get("dtype") not in (None, meta(node).dtype):
        raise Unsupported("a reduction with a dtype")
    if rank == 0:
        return [[0]]
    runs: list[list[int]] = []
    sizes, strides = (x.sizes, x.strides) if x is not None else (v.shape, v.stride())
    for d in sorted({d % rank for d in dims}):
        prev = runs[-1][-1] if runs else None
        if prev == d - 1 and (sizes[d] == 1 or strides[prev] == strides[d] * sizes[d]):
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs

"""The composite functions of nki.language: each returns a new tile that a few real
instructions of nki.isa compute (every docstring names them). language.py imports
nothing of this module: this module adds its functions to language.py when the package is
imported (nki/__init__.py imports it), so the current API and the legacy one (the same
module) both have them.

- reductions over free axes: mean, var, prod, all;
- normalisations: softmax, rms_norm;
- selection and views: where, expand_dims, broadcast_to, shared_identity_matrix;
- activations with no ScalarE function of their own: gelu_dx, gelu_apprx_sigmoid,
  gelu_apprx_sigmoid_dx, silu_dx, erf_dx, tan;
- rounding, remainders and bit logic: floor, ceil, trunc, mod, fmod, abs_min, invert,
  logical_not.

What the instructions here cannot compute (random numbers, gathers, prints) raises NkiError
naming the function. language.py takes only the names it does not define itself. Written
from NKI's public API reference; see docs/nki.md.
"""

from __future__ import annotations

import contextlib
import math

from . import _trace
from . import isa as _isa
from . import language as _nl
from ._trace import HBM, SBUF, NkiError
from ._trace import Tensor as NkiTensor

__all__ = [
    "abs_min",
    "all",
    "broadcast_to",
    "ceil",
    "device_print",
    "dropout",
    "erf_dx",
    "expand_dims",
    "floor",
    "fmod",
    "gather_flattened",
    "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx",
    "gelu_dx",
    "invert",
    "logical_not",
    "mean",
    "mod",
    "prod",
    "rand",
    "random_seed",
    "rms_norm",
    "shared_identity_matrix",
    "silu_dx",
    "softmax",
    "tan",
    "trunc",
    "var",
    "where",
]

_F32 = "float32"
# From 2^23 on every float32 is an integer (and inf/NaN are not finite): rounding keeps it.
_INTEGRAL = float(1 << 23)


# -- checks and shapes ----------------------------------------------------------------------
def _tile(what: str, x, role: str = "x") -> NkiTensor:
    """x, which an engine reads: an SBUF or PSUM tile."""
    if not isinstance(x, NkiTensor):
        raise NkiError(f"{what}: {role} is a tile (an SBUF or PSUM tensor), not {x!r}")
    if x.buffer == HBM:
        raise NkiError(f"{what}: {role} {x.name} is in HBM; load it into SBUF first (nl.load)")
    return x


def _free_axes(what: str, x: NkiTensor, axis) -> tuple[int, ...]:
    """`axis` (an int or a sequence, negative counting from the end) as sorted dims of x,
    all free: VectorE and ScalarE reduce along the free dims of each partition only."""
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    if not items:
        raise NkiError(f"{what}: no axis to reduce")
    axes = set()
    for a in items:
        d = int(a) + x.ndim if int(a) < 0 else int(a)
        if not 0 <= d < x.ndim:
            raise NkiError(f"{what}: axis {a} is outside the {x.ndim} dims of {x.shape}")
        if d == 0:
            raise NkiError(
                f"{what}: axis 0 of {x.name} {x.shape} is the partition axis; the engines "
                f"reduce along free axes only (transpose first to reduce across partitions)"
            )
        axes.add(d)
    return tuple(sorted(axes))


def _count(x: NkiTensor, axes) -> int:
    """How many elements of x each reduction over `axes` covers: a legacy mask= that cuts
    one of those dims shortens it."""
    mask = _trace.current().mask
    limits = x.mask_limits(mask) if mask is not None else [None] * x.ndim
    n = 1
    for a in axes:
        size = x.shape[a]
        if limits[a] is not None:
            lo, hi = limits[a]
            size = max(0, min(hi, size) - lo)
        n *= size
    return n


def _per_partition(t: NkiTensor) -> bool:
    """t holds one value per partition: an operand0/bias of the engines."""
    return math.prod(t.shape[1:]) == 1


def _new(shape, dtype, name: str) -> NkiTensor:
    return _nl.ndarray(tuple(shape), _trace.dtype_name(dtype), SBUF, name=name)


# -- per-row values under a legacy mask= ----------------------------------------------------
# A reduction's result has x's kept dims. Under a mask, its tiles are indexed by the legacy
# axes of those dims, so the mask cuts their rows as it cuts x's, and the instructions that
# read only such tiles run under the mask narrowed to those axes (a mask on a reduced axis
# has done its work in the reduction).
def _rows(t: NkiTensor, x: NkiTensor, axes, keepdims: bool = True) -> NkiTensor:
    """t, a result of reducing `axes` of x, indexed by the legacy axes of x's kept dims."""
    x_axes = x._axes
    if keepdims:
        kept = [None if d in axes else x_axes[d] for d in range(x.ndim)]
    else:
        kept = [x_axes[d] for d in range(x.ndim) if d not in axes]
    if len(kept) != t.ndim:  # (P,) kept as (P, 1)
        kept = [kept[0]] + [None] * (t.ndim - 1)
    t._axes = kept
    return t


@contextlib.contextmanager
def _kept_mask(x: NkiTensor, axes):
    """The legacy mask= narrowed to the axes of x's kept dims, for instructions that read
    per-row values only (None when it cuts none of them: they run whole)."""
    trace = _trace.current()
    mask = trace.mask
    if mask is None:
        yield
        return
    kept = {a for d, a in enumerate(x._axes) if d not in axes and a is not None}
    ranges = {a: r for a, r in mask.ranges.items() if a in kept}
    trace.mask = _trace.Mask(ranges) if ranges else None
    try:
        yield
    finally:
        trace.mask = mask


def _reduce_keep(op: str, x: NkiTensor, axes, dtype=_F32, negate=False) -> NkiTensor:
    """op over `axes` of x with the reduced dims kept (size 1): one tensor_reduce."""
    return _rows(_nl._reduced(op, x, axes, dtype, keepdims=True, negate=negate), x, axes)


def _spread(t: NkiTensor, x: NkiTensor) -> NkiTensor:
    """Per-row values t repeated along the reduced dims to x's shape (a stride-0 view),
    indexed as x is."""
    return t.broadcast_to(x.shape).with_axes_of(x)


def _per_row(shape, dtype, name: str, x: NkiTensor, axes) -> NkiTensor:
    """A new tile of per-row values of x (its shape with `axes` reduced, kept)."""
    return _rows(_new(shape, dtype, name), x, axes)


def _like(x: NkiTensor, dtype=None) -> NkiTensor:
    """A new SBUF tile of x's shape, indexed by x's legacy axes (for mask=)."""
    return _nl._new_tile(x, _trace.dtype_name(dtype) if dtype is not None else None)


def _expand(what: str, t: NkiTensor, shape, role: str) -> NkiTensor:
    """t read as `shape`: itself, a view repeated along its size-1 free dims (stride 0), or,
    for a one-partition tile read on every partition, a tile of its own by one DMA."""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    if t.ndim != len(shape) or any(n not in (1, m) for n, m in zip(t.shape, shape)):
        raise NkiError(f"{what}: {role} {t.name} {t.shape} does not broadcast to {shape}")
    if t.shape[0] != shape[0]:
        return _nl.broadcast_to(t, shape)  # language.py's, or this module's
    return t.broadcast_to(shape)


def _broadcast_shape(what: str, tensors: dict) -> tuple[int, ...]:
    """The shape the tiles broadcast to: same rank, each dim equal or 1."""
    shapes = {role: t.shape for role, t in tensors.items()}
    ranks = {len(s) for s in shapes.values()}
    if len(ranks) != 1:
        raise NkiError(f"{what}: operands of different ranks {shapes}")
    out = []
    for sizes in zip(*shapes.values()):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            raise NkiError(f"{what}: operands {shapes} do not broadcast together")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _is_float(dtype: str) -> bool:
    return dtype in ("float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2")


class _CompositeOp(str):
    """A function of NKI's operator table that no single instruction computes here: called,
    it computes its new tile with several instructions. It is not an `op=` of nki.isa
    instructions (kind "composite", which they refuse)."""

    kind = "composite"

    def __new__(cls, name: str, fn):
        op = super().__new__(cls, name)
        op._fn = fn
        op.__doc__ = fn.__doc__
        return op

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


# -- reductions -----------------------------------------------------------------------------
def mean(x, axis, dtype=None, keepdims: bool = False, mask=None) -> NkiTensor:
    """The mean over the free axes `axis`: a tensor_reduce (add) in float32, then one
    tensor_scalar dividing by the count. Integer inputs give float32 unless dtype says."""
    with _nl._masked(mask):
        x = _tile("mean", x)
        axes = _free_axes("mean", x, axis)
        total = _rows(_nl._reduced("add", x, axes, _F32, keepdims), x, axes, keepdims)
        out_dtype = dtype or (x.dtype if _is_float(x.dtype) else _F32)
        out = _rows(_new(total.shape, out_dtype, "mean"), x, axes, keepdims)
        n = float(_count(x, axes))
        with _kept_mask(x, axes):
            _isa.tensor_scalar(dst=out, data=total, op0=_nl.divide, operand0=n)
        return out


def prod(x, axis, dtype=None, keepdims: bool = False, mask=None) -> NkiTensor:
    """The product over the free axes `axis`: one tensor_reduce (multiply)."""
    with _nl._masked(mask):
        x = _tile("prod", x)
        return _nl._reduced("multiply", x, _free_axes("prod", x, axis), dtype, keepdims)


def all(x, axis, dtype=None, mask=None) -> NkiTensor:  # noqa: A001 (NKI's name)
    """1 where every element over the free axes `axis` is nonzero, else 0, with the axes
    removed: a tensor_scalar (not_equal 0), then a tensor_reduce (min)."""
    with _nl._masked(mask):
        x = _tile("all", x)
        axes = _free_axes("all", x, axis)
        nonzero = _like(x, "uint8")
        _isa.tensor_scalar(dst=nonzero, data=x, op0=_nl.not_equal, operand0=0.0)
        return _nl._reduced("min", nonzero, axes, dtype or x.dtype, keepdims=False)


def var(x, axis, dtype=None, keepdims: bool = False, mask=None) -> NkiTensor:
    """The (population) variance over the free axes `axis`, in two passes in float32. The
    result keeps the reduced axes (size 1), as the current API gives it; `keepdims` is
    accepted and has no effect. With every free axis reduced: tensor_reduce (add),
    tensor_scalar (the negated mean), one ScalarE activation (square, with the negated mean
    as bias, its results summed), tensor_scalar (divide). Otherwise the centred squares
    are tensor_tensor instructions against the mean repeated along the reduced axes."""
    with _nl._masked(mask):
        x = _tile("var", x)
        axes = _free_axes("var", x, axis)
        n = float(_count(x, axes))
        total = _reduce_keep("add", x, axes)
        if _per_partition(total):
            squares = _per_row(total.shape, _F32, "var_sq", x, axes)
            neg_mean = _per_row(total.shape, _F32, "var_mean", x, axes)
            with _kept_mask(x, axes):
                _isa.tensor_scalar(
                    dst=neg_mean,
                    data=total,
                    op0=_nl.divide,
                    operand0=n,
                    op1=_nl.multiply,
                    operand1=-1.0,
                )
            centred = _like(x, _F32)
            _isa.activation(
                dst=centred,
                op=_nl.square,
                data=x,
                bias=neg_mean,
                reduce_op=_nl.add,
                reduce_res=squares,
            )
        else:
            mean_ = _per_row(total.shape, _F32, "var_mean", x, axes)
            with _kept_mask(x, axes):
                _isa.tensor_scalar(dst=mean_, data=total, op0=_nl.divide, operand0=n)
            centred = _like(x, _F32)
            _isa.tensor_tensor(dst=centred, data1=x, data2=_spread(mean_, x), op=_nl.subtract)
            sq = _like(x, _F32)
            _isa.tensor_tensor(dst=sq, data1=centred, data2=centred, op=_nl.multiply)
            squares = _reduce_keep("add", sq, axes)
        out = _per_row(total.shape, dtype or x.dtype, "var", x, axes)
        with _kept_mask(x, axes):
            _isa.tensor_scalar(dst=out, data=squares, op0=_nl.divide, operand0=n)
        return out


# -- normalisations -------------------------------------------------------------------------
def softmax(x, axis=-1, dtype=None, compute_dtype=None, mask=None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) over the free axes `axis` (intermediates in
    compute_dtype, float32 by default). With every free axis reduced: a tensor_reduce (the
    negated maximum), one ScalarE activation (exp, the negated maximum as bias, its results
    summed into a float32 [P, 1] tile) and a tensor_scalar dividing by the sums. Otherwise
    the shift and the division are tensor_tensor instructions against the per-row values
    repeated along the reduced axes, and the sums a tensor_reduce."""
    with _nl._masked(mask):
        x = _tile("softmax", x)
        axes = _free_axes("softmax", x, axis)
        work = compute_dtype or _F32
        neg_max = _reduce_keep("max", x, axes, work, negate=True)
        e = _like(x, work)
        out = _like(x, dtype)
        if _per_partition(neg_max):
            total = _per_row(neg_max.shape, _F32, "softmax_sum", x, axes)
            _isa.activation(
                dst=e, op=_nl.exp, data=x, bias=neg_max, reduce_op=_nl.add, reduce_res=total
            )
            _isa.tensor_scalar(dst=out, data=e, op0=_nl.divide, operand0=total)
            return out
        shifted = _like(x, work)
        _isa.tensor_tensor(dst=shifted, data1=x, data2=_spread(neg_max, x), op=_nl.add)
        _isa.activation(dst=e, op=_nl.exp, data=shifted)
        total = _reduce_keep("add", e, axes)
        _isa.tensor_tensor(dst=out, data1=e, data2=_spread(total, x), op=_nl.divide)
        return out


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, mask=None) -> NkiTensor:
    """x / sqrt(sum(x^2) / n + epsilon) * w, the sum over the free axes `axis`. w has x's
    shape, or broadcasts to it (its size-1 free dims are repeated by a stride-0 view, a
    one-partition w is put on every partition by one DMA). With every free axis reduced:
    one ScalarE activation (square of x / sqrt(n), summed into a float32 [P, 1] tile), a
    tensor_scalar (+ epsilon, ^ -0.5) and a scalar_tensor_tensor (x * that * w). Otherwise
    the squares are reduced by a tensor_reduce and the products are tensor_tensor
    instructions."""
    with _nl._masked(mask):
        x = _tile("rms_norm", x)
        w = _expand("rms_norm", _tile("rms_norm", w, "w"), x.shape, "w")
        axes = _free_axes("rms_norm", x, axis)
        if int(n) <= 0:
            raise NkiError(f"rms_norm: n is the count of values the mean square is over, not {n}")
        work = compute_dtype or _F32
        scale = 1.0 / math.sqrt(int(n))
        squares = _like(x, work)
        kept = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        out = _like(x, dtype)
        if math.prod(kept[1:]) == 1:
            mean_sq = _per_row(kept, _F32, "rms_norm_ms", x, axes)
            _isa.activation(
                dst=squares,
                op=_nl.square,
                data=x,
                scale=scale,
                reduce_op=_nl.add,
                reduce_res=mean_sq,
            )
        else:
            _isa.activation(dst=squares, op=_nl.square, data=x, scale=scale)
            mean_sq = _reduce_keep("add", squares, axes)
        inv = _per_row(kept, _F32, "rms_norm_inv", x, axes)
        with _kept_mask(x, axes):
            _isa.tensor_scalar(
                dst=inv,
                data=mean_sq,
                op0=_nl.add,
                operand0=float(epsilon),
                op1=_nl.power,
                operand1=-0.5,
            )
        if _per_partition(inv):
            _isa.scalar_tensor_tensor(
                dst=out, data=x, op0=_nl.multiply, operand0=inv, op1=_nl.multiply, operand1=w
            )
            return out
        normed = _like(x, work)
        _isa.tensor_tensor(dst=normed, data1=x, data2=_spread(inv, x), op=_nl.multiply)
        _isa.tensor_tensor(dst=out, data1=normed, data2=w, op=_nl.multiply)
        return out


# -- selection and views --------------------------------------------------------------------
def where(condition, x, y, dtype=None, mask=None) -> NkiTensor:
    """x where condition is nonzero, else y: one VectorE select (nisa.select_reduce without
    a reduction). x and y are tiles or numbers; tiles broadcast along size-1 dims (a [P, 1]
    tile is a value per partition). Two numbers take a memset of x first."""
    with _nl._masked(mask):
        condition = _tile("where", condition, "condition")
        tiles = {"condition": condition}
        for role, t in (("x", x), ("y", y)):
            if isinstance(t, NkiTensor):
                tiles[role] = _tile("where", t, role)
        shape = _broadcast_shape("where", tiles)
        cond = _expand("where", condition, shape, "condition")
        like = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else None
        out_dtype = dtype or (like.dtype if like is not None else _F32)
        out = _like(cond, out_dtype)
        if isinstance(x, NkiTensor):
            on_true = _expand("where", x, shape, "x")
            on_false = _expand("where", y, shape, "y") if isinstance(y, NkiTensor) else float(y)
            _isa.select_reduce(dst=out, predicate=cond, on_true=on_true, on_false=on_false)
        elif isinstance(y, NkiTensor):
            on_true = _expand("where", y, shape, "y")
            _isa.select_reduce(
                dst=out, predicate=cond, on_true=on_true, on_false=float(x), reverse_pred=True
            )
        else:
            fill = _like(cond, out_dtype)
            _isa.memset(dst=fill, value=float(x))
            _isa.select_reduce(dst=out, predicate=cond, on_true=fill, on_false=float(y))
        return out


def expand_dims(x=None, axis=None, *, data=None) -> NkiTensor:
    """A view of x with a new dim of size 1 at each position of `axis` (an int or a
    sequence, as NumPy places them). No instruction. On chip, axis 0 would move the
    partition dim off its place and is refused. (The legacy API names x `data`.)"""
    x = data if x is None else x
    if not isinstance(x, NkiTensor):
        raise NkiError(f"expand_dims: expects an NKI tensor, got {x!r}")
    if axis is None:
        raise NkiError("expand_dims: axis is required")
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    rank = x.ndim + len(items)
    positions = sorted(int(a) + rank if int(a) < 0 else int(a) for a in items)
    if len(set(positions)) != len(positions) or any(not 0 <= p < rank for p in positions):
        raise NkiError(f"expand_dims: axis {axis} does not fit a {rank}-dim result of {x.shape}")
    if x.buffer != HBM and positions[0] == 0:
        raise NkiError(
            f"expand_dims: axis 0 of {x.name} {x.shape} would make the partition dim a free dim"
        )
    if x.buffer != HBM and getattr(x, "_pdim", 0):
        raise NkiError(f"expand_dims: {x.name} {x.shape} has block dims; index a tile first")
    view = x
    for p in positions:
        dims, axes, room = list(view._dims), list(view._axes), list(view._room)
        dims.insert(p, (1, 1))
        axes.insert(p, None)
        room.insert(p, 1)
        view = view._derive(dims, axes=axes, room=room)
    return view


def broadcast_to(x=None, shape=None, dtype=None, *, src=None) -> NkiTensor:
    """x repeated along its size-1 dims to `shape` (same rank). An HBM view stays a view
    (stride 0), for a DMA to read. On chip, a view (stride 0 along free dims) unless the
    partitions broadcast: then one DMA puts the one partition on every partition of a new
    SBUF tile, as engines read their own partitions only. dtype= converts into a new tile
    (the DMA, or a tensor_copy). (The legacy API names x `src`.)"""
    x = src if x is None else x
    if not isinstance(x, NkiTensor):
        raise NkiError(f"broadcast_to: expects an NKI tensor, got {x!r}")
    if shape is None:
        raise NkiError("broadcast_to: shape is required")
    shape = tuple(int(n) for n in shape)
    out_dtype = _trace.dtype_name(dtype) if dtype is not None else x.dtype
    if shape == x.shape and out_dtype == x.dtype:
        return x
    view = x.broadcast_to(shape)
    if x.buffer == HBM:
        if out_dtype != x.dtype:
            raise NkiError(
                f"broadcast_to: {x.name} is in HBM, where a view keeps its {x.dtype}; "
                f"load it with dtype={out_dtype} instead"
            )
        return view
    if x.shape[0] != shape[0]:
        tile = _new(shape, out_dtype, f"{x.name}_bcast")
        _isa.dma_copy(dst=tile, src=view)
        return tile
    if out_dtype != x.dtype:
        tile = _new(shape, out_dtype, f"{x.name}_bcast")
        _isa.tensor_copy(dst=tile, src=view)
        return tile
    return view


def shared_identity_matrix(n, dtype="uint8", dst=None) -> NkiTensor:
    """The [n, n] identity in SBUF (or into dst): a memset of ones, then one GpSimd
    affine_select keeping the diagonal (partition - column == 0) and 0 elsewhere."""
    n = int(n)
    if dst is None:
        dst = _new((n, n), dtype, "identity")
    elif dst.shape != (n, n):
        raise NkiError(f"shared_identity_matrix: dst {dst.name} {dst.shape} is not ({n}, {n})")
    ones = _new((n, n), dst.dtype, "identity_ones")
    _isa.memset(dst=ones, value=1.0)
    _isa.affine_select(
        dst=dst,
        pattern=[[-1, n]],
        channel_multiplier=1,
        on_true_tile=ones,
        on_false_value=0.0,
        cmp_op=_nl.equal,
    )
    return dst


# -- activations with no ScalarE function here ----------------------------------------------
def _activate(x, op, dtype=_F32, scale=1.0) -> NkiTensor:
    out = _like(x, dtype)
    _isa.activation(dst=out, op=op, data=x, scale=scale)
    return out


def _erf_dx(x, dtype=None, mask=None) -> NkiTensor:
    """2 / sqrt(pi) * exp(-x^2): ScalarE square, ScalarE exp (scale -1), a tensor_scalar."""
    with _nl._masked(mask):
        x = _tile("erf_dx", x)
        e = _activate(_activate(x, _nl.square), _nl.exp, scale=-1.0)
        out = _like(x, dtype)
        _isa.tensor_scalar(dst=out, data=e, op0=_nl.multiply, operand0=2.0 / math.sqrt(math.pi))
        return out


def _gelu_dx(x, dtype=None, mask=None) -> NkiTensor:
    """The derivative of the exact GELU, Phi(x) + x * phi(x): ScalarE erf (scale
    1/sqrt(2)), square and exp (scale -1/2), then two scalar_tensor_tensor and a
    tensor_scalar: (erf + 1 + 2 x phi) / 2."""
    with _nl._masked(mask):
        x = _tile("gelu_dx", x)
        erf = _activate(x, _nl.erf, scale=1.0 / math.sqrt(2.0))
        gauss = _activate(_activate(x, _nl.square), _nl.exp, scale=-0.5)
        twice_x_pdf = _like(x, _F32)  # 2 x phi(x) = sqrt(2 / pi) x exp(-x^2 / 2)
        _isa.scalar_tensor_tensor(
            dst=twice_x_pdf,
            data=gauss,
            op0=_nl.multiply,
            operand0=math.sqrt(2.0 / math.pi),
            op1=_nl.multiply,
            operand1=x,
        )
        twice = _like(x, _F32)
        _isa.scalar_tensor_tensor(
            dst=twice, data=erf, op0=_nl.add, operand0=1.0, op1=_nl.add, operand1=twice_x_pdf
        )
        out = _like(x, dtype)
        _isa.tensor_scalar(dst=out, data=twice, op0=_nl.multiply, operand0=0.5)
        return out


# The constant of the sigmoid approximation of GELU: x * sigmoid(1.702 x).
_GELU_SIGMOID = 1.702


def _gelu_apprx_sigmoid(x, dtype=None, mask=None) -> NkiTensor:
    """x * sigmoid(1.702 x): ScalarE sigmoid (scale 1.702), a tensor_tensor multiply."""
    with _nl._masked(mask):
        x = _tile("gelu_apprx_sigmoid", x)
        s = _activate(x, _nl.sigmoid, scale=_GELU_SIGMOID)
        out = _like(x, dtype)
        _isa.tensor_tensor(dst=out, data1=x, data2=s, op=_nl.multiply)
        return out


def _sigmoid_gate_dx(what: str, x, k: float, dtype, mask) -> NkiTensor:
    """d/dx of x * sigmoid(k x) = s * (1 + k x (1 - s)), s = sigmoid(k x): ScalarE sigmoid,
    then scalar_tensor_tensor instructions (with k != 1, a tensor_scalar for k x first)."""
    with _nl._masked(mask):
        x = _tile(what, x)
        s = _activate(x, _nl.sigmoid, scale=k)
        kx = x
        if k != 1.0:
            kx = _like(x, _F32)
            _isa.tensor_scalar(dst=kx, data=x, op0=_nl.multiply, operand0=k)
        t = _like(x, _F32)  # (1 - s) * k x
        _isa.scalar_tensor_tensor(
            dst=t,
            data=s,
            op0=_nl.subtract,
            operand0=1.0,
            reverse0=True,
            op1=_nl.multiply,
            operand1=kx,
        )
        out = _like(x, dtype)
        _isa.scalar_tensor_tensor(
            dst=out, data=t, op0=_nl.add, operand0=1.0, op1=_nl.multiply, operand1=s
        )
        return out


def _silu_dx(x, dtype=None, mask=None) -> NkiTensor:
    """The derivative of x * sigmoid(x): ScalarE sigmoid and two scalar_tensor_tensor."""
    return _sigmoid_gate_dx("silu_dx", x, 1.0, dtype, mask)


def _gelu_apprx_sigmoid_dx(x, dtype=None, mask=None) -> NkiTensor:
    """The derivative of x * sigmoid(1.702 x): ScalarE sigmoid, a tensor_scalar and two
    scalar_tensor_tensor."""
    return _sigmoid_gate_dx("gelu_apprx_sigmoid_dx", x, _GELU_SIGMOID, dtype, mask)


def _tan(x, dtype=None, mask=None) -> NkiTensor:
    """sin(x) / cos(x): ScalarE sin and cos, a tensor_tensor divide."""
    with _nl._masked(mask):
        x = _tile("tan", x)
        out = _like(x, dtype)
        sin, cos = _activate(x, _nl.sin), _activate(x, _nl.cos)
        _isa.tensor_tensor(dst=out, data1=sin, data2=cos, op=_nl.divide)
        return out


gelu_dx = _CompositeOp("gelu_dx", _gelu_dx)
gelu_apprx_sigmoid = _CompositeOp("gelu_apprx_sigmoid", _gelu_apprx_sigmoid)
gelu_apprx_sigmoid_dx = _CompositeOp("gelu_apprx_sigmoid_dx", _gelu_apprx_sigmoid_dx)
silu_dx = _CompositeOp("silu_dx", _silu_dx)
erf_dx = _CompositeOp("erf_dx", _erf_dx)
tan = _CompositeOp("tan", _tan)


# -- rounding, remainders and bit logic -----------------------------------------------------
# Python's remainder (the sign of the divisor) is one ALU operation: an operator like add.
mod = _nl._alu("mod")


def _keep_integral(x: NkiTensor, rounded: NkiTensor, dtype) -> NkiTensor:
    """rounded, except where |x| >= 2^23 (already an integer, or inf/NaN, where the
    remainder is NaN): there x itself. A tensor_scalar (|x| >= 2^23) and a select."""
    big = _like(x, "uint8")
    _isa.tensor_scalar(
        dst=big, data=x, op0=_nl.abs_max, operand0=0.0, op1=_nl.greater_equal, operand1=_INTEGRAL
    )
    out = _like(x, dtype)
    _isa.select_reduce(dst=out, predicate=big, on_true=x, on_false=rounded)
    return out


def _rounded(what: str, x, divisor: float, dtype, mask) -> NkiTensor:
    """x - mod(x, divisor) (floor for 1, ceil for -1): one scalar_tensor_tensor, exact."""
    with _nl._masked(mask):
        x = _tile(what, x)
        r = _like(x, _F32)
        _isa.scalar_tensor_tensor(
            dst=r,
            data=x,
            op0=mod,
            operand0=divisor,
            op1=_nl.subtract,
            operand1=x,
            reverse1=True,
        )
        return _keep_integral(x, r, dtype)


def _floor(x, dtype=None, mask=None) -> NkiTensor:
    """The largest integer <= x: x - mod(x, 1) by one scalar_tensor_tensor, and |x| >= 2^23
    (inf included) kept as x by a tensor_scalar and a select."""
    return _rounded("floor", x, 1.0, dtype, mask)


def _ceil(x, dtype=None, mask=None) -> NkiTensor:
    """The smallest integer >= x: x - mod(x, -1) by one scalar_tensor_tensor, and |x| >=
    2^23 (inf included) kept as x by a tensor_scalar and a select."""
    return _rounded("ceil", x, -1.0, dtype, mask)


def _trunc(x, dtype=None, mask=None) -> NkiTensor:
    """x rounded toward zero: x - mod(x, s) with s = 1 for x >= 0 and -1 below (a
    tensor_scalar: (-1) ^ (x < 0)), two tensor_tensor, and |x| >= 2^23 kept as x."""
    with _nl._masked(mask):
        x = _tile("trunc", x)
        sign = _like(x, _F32)
        _isa.tensor_scalar(
            dst=sign,
            data=x,
            op0=_nl.less,
            operand0=0.0,
            op1=_nl.power,
            operand1=-1.0,
            reverse1=True,
        )
        rem = _like(x, _F32)
        _isa.tensor_tensor(dst=rem, data1=x, data2=sign, op=mod)
        r = _like(x, _F32)
        _isa.tensor_tensor(dst=r, data1=x, data2=rem, op=_nl.subtract)
        return _keep_integral(x, r, dtype)


floor = _CompositeOp("floor", _floor)
ceil = _CompositeOp("ceil", _ceil)
trunc = _CompositeOp("trunc", _trunc)


def _fmod(x, y, dtype=None, mask=None) -> NkiTensor:
    """The remainder with the sign of x (C's fmod): sign(x) * mod(|x|, |y|), exact. A
    tensor_scalar (|x| mod |y| for a number y; a tile y takes a tensor_scalar for |y| and a
    tensor_tensor), ScalarE sign of x, a tensor_tensor multiply. A number x is broadcast to
    y's shape."""
    with _nl._masked(mask):
        if not isinstance(x, NkiTensor):
            y = _tile("fmod", y, "y")
            mag = _like(y, _F32)
            _isa.tensor_scalar(
                dst=mag,
                data=y,
                op0=_nl.abs_max,
                operand0=0.0,
                op1=mod,
                operand1=abs(float(x)),
                reverse1=True,
            )
            out = _like(y, dtype or y.dtype)
            _isa.tensor_scalar(
                dst=out, data=mag, op0=_nl.multiply, operand0=math.copysign(1.0, float(x))
            )
            return out
        x = _tile("fmod", x)
        mag = _like(x, _F32)
        if isinstance(y, NkiTensor):
            y = _expand("fmod", _tile("fmod", y, "y"), x.shape, "y")
            abs_x, abs_y = _like(x, _F32), _like(x, _F32)
            _isa.tensor_scalar(dst=abs_x, data=x, op0=_nl.abs_max, operand0=0.0)
            _isa.tensor_scalar(dst=abs_y, data=y, op0=_nl.abs_max, operand0=0.0)
            _isa.tensor_tensor(dst=mag, data1=abs_x, data2=abs_y, op=mod)
        else:
            _isa.tensor_scalar(
                dst=mag, data=x, op0=_nl.abs_max, operand0=0.0, op1=mod, operand1=abs(float(y))
            )
        sign = _activate(x, _nl.sign)
        out = _like(x, dtype)
        _isa.tensor_tensor(dst=out, data1=mag, data2=sign, op=_nl.multiply)
        return out


fmod = _CompositeOp("fmod", _fmod)


def _abs_min(x, y, dtype=None, mask=None) -> NkiTensor:
    """x where |x| < |y|, else y (ties give y), signs kept: tensor_scalar/
    scalar_tensor_tensor instructions for |x| < |y|, then a select. NKI has it on
    NeuronCore-v4 (trn3) only, and so does this."""
    with _nl._masked(mask):
        target = _trace.current().target.get("name")
        if target is not None and target != "trn3":
            raise NkiError(f"abs_min: NKI has it on NeuronCore-v4 (trn3) only, not {target}")
        tiles = {
            r: _tile("abs_min", t, r) for r, t in (("x", x), ("y", y)) if isinstance(t, NkiTensor)
        }
        if not tiles:
            raise NkiError("abs_min: at least one of x and y is a tile")
        shape = _broadcast_shape("abs_min", tiles)
        xs = {r: _expand("abs_min", t, shape, r) for r, t in tiles.items()}
        like = xs.get("x", xs.get("y"))
        smaller = _like(like, "uint8")  # |x| < |y|
        if "x" in xs and "y" in xs:
            abs_y = _like(like, _F32)
            _isa.tensor_scalar(dst=abs_y, data=xs["y"], op0=_nl.abs_max, operand0=0.0)
            _isa.scalar_tensor_tensor(
                dst=smaller,
                data=xs["x"],
                op0=_nl.abs_max,
                operand0=0.0,
                op1=_nl.less,
                operand1=abs_y,
            )
        elif "x" in xs:
            _isa.tensor_scalar(
                dst=smaller,
                data=xs["x"],
                op0=_nl.abs_max,
                operand0=0.0,
                op1=_nl.less,
                operand1=abs(float(y)),
            )
        else:
            _isa.tensor_scalar(
                dst=smaller,
                data=xs["y"],
                op0=_nl.abs_max,
                operand0=0.0,
                op1=_nl.greater,
                operand1=abs(float(x)),
            )
        out = _like(like, dtype or like.dtype)
        if "x" in xs:
            on_false = xs["y"] if "y" in xs else float(y)
            _isa.select_reduce(dst=out, predicate=smaller, on_true=xs["x"], on_false=on_false)
        else:
            _isa.select_reduce(
                dst=out, predicate=smaller, on_true=xs["y"], on_false=float(x), reverse_pred=True
            )
        return out


abs_min = _CompositeOp("abs_min", _abs_min)

# XOR with all ones of each integer dtype (VectorE's bitwise operations work on int32).
_ALL_ONES = {"int8": -1, "int16": -1, "int32": -1, "uint8": 0xFF, "uint16": 0xFFFF, "bool": 1}


def _invert(x, dtype=None, mask=None) -> NkiTensor:
    """Bitwise NOT of an integer tile: one tensor_scalar (bitwise_xor with all ones of its
    dtype; bool is logical NOT). uint32 is refused: its values from 2^31 on are not int32,
    which the bitwise operations work on."""
    with _nl._masked(mask):
        x = _tile("invert", x)
        if x.dtype not in _ALL_ONES:
            raise NkiError(
                f"invert: {x.name} is {x.dtype}; bitwise NOT takes int8/16/32, uint8/16 or "
                "bool tiles (uint32 does not fit the int32 the bitwise operations use)"
            )
        out = _like(x, dtype)
        _isa.tensor_scalar(dst=out, data=x, op0=_nl.bitwise_xor, operand0=float(_ALL_ONES[x.dtype]))
        return out


def _logical_not(x, dtype=None, mask=None) -> NkiTensor:
    """1 - x for 0/1 tiles, as NKI computes it: one tensor_scalar, bitwise_xor with 1
    (other values are XORed too, as in NKI; compare with 0 for those)."""
    with _nl._masked(mask):
        x = _tile("logical_not", x)
        out = _like(x, dtype)
        _isa.tensor_scalar(dst=out, data=x, op0=_nl.bitwise_xor, operand0=1.0)
        return out


invert = _CompositeOp("invert", _invert)
logical_not = _CompositeOp("logical_not", _logical_not)


# -- what the instructions here cannot compute ----------------------------------------------
def _refuse(name: str, why: str):
    return _trace.refused(f"nl.{name}", why)


_RANDOM = (
    "the random number generator (nisa.rng, its seeds and how NKI maps its bits to values) "
    "is not modelled by neuronsim.nki yet"
)
dropout = _refuse("dropout", _RANDOM)
rand = _refuse("rand", _RANDOM)
random_seed = _refuse("random_seed", _RANDOM)
gather_flattened = _refuse(
    "gather_flattened", "it needs GpSimd's local gather, which neuronsim.nki.isa does not have yet"
)
device_print = _refuse(
    "device_print",
    "values exist only when the program runs, after tracing; store the tile to an output instead",
)


# Into nki.language, which keeps the names it defines itself.
for _name in __all__:
    if not hasattr(_nl, _name):
        setattr(_nl, _name, globals()[_name])
del _name

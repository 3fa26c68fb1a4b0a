"""The legacy (beta 1, ``neuronxcc.nki.isa``) form of the instructions: no destination
argument, each returns a new tile. ``nc_matmul`` returns a pending product, which
``psum_tile += nisa.nc_matmul(a, b)`` accumulates into a PSUM tile."""

from __future__ import annotations

from .. import isa as _isa
from .. import language as _nl
from .._trace import NkiError, Tensor, dtype_name, refused

engine = _isa.engine
# The legacy names of the engines.
tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, sync_engine, unknown_engine = engine.gpsimd, engine.sync, engine.unknown


_masked = _nl._masked


def nc_matmul(
    stationary: Tensor,
    moving: Tensor,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    tile_position=(),
    tile_size=(),
    mask=None,
    perf_mode=None,
    **unsupported,
):
    if unsupported:
        raise NkiError(f"nki.isa.nc_matmul: {', '.join(unsupported)} not supported yet")
    return _nl._product(
        stationary,
        moving,
        mask,
        is_transpose,
        is_stationary_onezero=is_stationary_onezero,
        is_moving_onezero=is_moving_onezero,
        tile_position=tile_position,
        tile_size=tile_size,
        perf_mode=perf_mode,
    )


def nc_transpose(data: Tensor, mask=None, dtype=None, engine=None):
    with _masked(mask):
        return _nl.transpose(data, dtype=dtype)


def tensor_tensor(data1: Tensor, data2: Tensor, op, dtype=None, mask=None, engine=None):
    with _masked(mask):
        out = _nl._new_tile(data1, dtype)
        _isa.tensor_tensor(dst=out, data1=data1, data2=data2, op=_op(op), engine=engine)
        return out


def tensor_scalar(
    data: Tensor,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    dtype=None,
    mask=None,
    engine=None,
):
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.tensor_scalar(
            out, data, _op(op0), operand0, reverse0, _op(op1), operand1, reverse1, engine
        )
        return out


def activation(
    op,
    data: Tensor,
    bias=None,
    scale=1.0,
    dtype=None,
    mask=None,
    reduce_op=None,
    reduce_res=None,
    reduce_cmd=0,
):
    """op(data * scale + bias) on ScalarE, as a new tile; with reduce_res, its results
    reduced along the free dims by reduce_op in the same instruction. ScalarE's accumulator
    across instructions (reduce_cmd reset or reduce) is not modelled and is refused."""
    if int(reduce_cmd) not in (_isa.reduce_cmd.idle, _isa.reduce_cmd.reset_reduce):
        raise NkiError(
            f"nki.isa.activation: reduce_cmd {int(reduce_cmd)} (ScalarE's accumulator across "
            "instructions) is not supported yet; reduce within one instruction with reduce_res"
        )
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.activation(
            dst=out,
            op=_op(op),
            data=data,
            bias=bias,
            scale=scale,
            reduce_op=_op(reduce_op) if reduce_res is not None else None,
            reduce_res=reduce_res,
        )
        return out


def tensor_copy(src: Tensor, dtype=None, mask=None, engine=None):
    with _masked(mask):
        out = _nl._new_tile(src, dtype)
        _isa.tensor_copy(out, src, engine=engine)
        return out


def tensor_reduce(op, data: Tensor, axis, dtype=None, negate=False, keepdims=False, mask=None):
    with _masked(mask):
        return _nl._reduced(_op(op), data, axis, dtype, keepdims, negate)


def memset(shape, value, dtype, mask=None, engine=None):
    with _masked(mask):
        return _nl.full(shape, value, dtype)


# -- the rest of the legacy instructions that nki.isa (the current API's) has ---------------
# The legacy API also takes NumPy's functions as operators (np.add, np.amax, ...).
def _numpy_ops() -> dict:
    import numpy as np

    pairs = {
        "add": _nl.add,
        "subtract": _nl.subtract,
        "multiply": _nl.multiply,
        "divide": _nl.divide,
        "true_divide": _nl.divide,
        "maximum": _nl.maximum,
        "max": _nl.maximum,
        "amax": _nl.maximum,
        "minimum": _nl.minimum,
        "min": _nl.minimum,
        "amin": _nl.minimum,
        "power": _nl.power,
        "mod": _nl.mod,
        "equal": _nl.equal,
        "not_equal": _nl.not_equal,
        "greater": _nl.greater,
        "greater_equal": _nl.greater_equal,
        "less": _nl.less,
        "less_equal": _nl.less_equal,
        "logical_and": _nl.logical_and,
        "logical_or": _nl.logical_or,
        "logical_xor": _nl.logical_xor,
        "bitwise_and": _nl.bitwise_and,
        "bitwise_or": _nl.bitwise_or,
        "bitwise_xor": _nl.bitwise_xor,
        "left_shift": _nl.left_shift,
        "right_shift": _nl.right_shift,
        "exp": _nl.exp,
        "log": _nl.log,
        "tanh": _nl.tanh,
        "sqrt": _nl.sqrt,
        "reciprocal": _nl.reciprocal,
        "square": _nl.square,
        "sin": _nl.sin,
        "cos": _nl.cos,
        "abs": _nl.abs,
        "absolute": _nl.abs,
        "sign": _nl.sign,
        "negative": _nl.negative,
        "arctan": _nl.arctan,
    }
    return {getattr(np, name): op for name, op in pairs.items() if hasattr(np, name)}


_NUMPY_OPS: dict | None = None


def _op(op):
    """op as nki.language's operator: NumPy's functions become theirs; others pass."""
    global _NUMPY_OPS
    if isinstance(op, str):
        return op
    if _NUMPY_OPS is None:
        _NUMPY_OPS = _numpy_ops()
    try:
        return _NUMPY_OPS.get(op, op)
    except TypeError:  # not hashable: not one of NumPy's
        return op


class oob_mode:  # noqa: N801 (NKI's name)
    """What an indirect DMA does with an index outside its tensor (accepted: no DMA here is
    indirect)."""

    error, skip = 0, 1


class nc_version:  # noqa: N801 (NKI's name)
    """NeuronCore generations: gen2 (trn1), gen3 (trn2), gen4 (trn3)."""

    gen2, gen3, gen4 = 2, 3, 4


class fp32:  # noqa: N801 (NKI's name)
    """FP32 constants: `min` is the most negative finite FP32 value."""

    min = -3.4028234663852886e38


reduce_cmd = _isa.reduce_cmd
dge_mode = _isa.dge_mode


def get_nc_version() -> int:
    """The generation of the target the kernel is traced for."""
    from .._trace import current

    name = current().target.get("name")
    return {"trn1": nc_version.gen2, "trn2": nc_version.gen3, "trn3": nc_version.gen4}[name]


def _tile(shape, dtype, name: str) -> Tensor:
    return _nl.ndarray(tuple(shape), dtype, _nl.sbuf, name=name)


def _accumulating(what: str, cmd, res):
    """The legacy default reduce_cmd is idle; a reduce_res asks for this instruction's
    reduction, which is reset_reduce."""
    cmd = int(cmd)
    if res is not None and cmd == reduce_cmd.idle:
        return reduce_cmd.reset_reduce
    return cmd


def activation_reduce(
    op, data: Tensor, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None
):
    """op(data * scale + bias) on ScalarE, its results reduced along the free dims into
    reduce_res ([P, 1]) by the same instruction."""
    return activation(
        op,
        data,
        bias=bias,
        scale=scale,
        dtype=dtype,
        mask=mask,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
    )


def bn_stats(data: Tensor, *, mask=None, dtype=None):
    """[P, 6]: count, mean and sum of squared deviations of each half of each partition's
    elements (up to 512), for bn_aggr (VectorE)."""
    with _masked(mask):
        out = _tile((data.shape[0], 6), dtype or data.dtype, "bn_stats")
        _isa.bn_stats(out, data)
        return out


def bn_aggr(data: Tensor, *, mask=None, dtype=None):
    """[P, 2]: the mean and variance of each partition from its bn_stats records (VectorE)."""
    with _masked(mask):
        out = _tile((data.shape[0], 2), dtype or data.dtype, "bn_aggr")
        _isa.bn_aggr(out, data)
        return out


def dma_copy(*, dst: Tensor, src: Tensor, mask=None, dst_rmw_op=None, oob_mode=0, dge_mode=None):
    """dst <- src by DMA (HBM and SBUF either way, or on chip)."""
    if dst_rmw_op is not None:
        raise NkiError(
            "nki.isa.dma_copy: dst_rmw_op (a DMA that adds into dst) is not supported yet"
        )
    with _masked(mask):
        _isa.dma_copy(dst, src, dge_mode=dge_mode)


def dma_transpose(src: Tensor, *, axes=None, mask=None, dtype=None, **_kwargs):
    """src with its dims permuted by the DMA engines ((1, 0), (2, 1, 0) or (3, 1, 2, 0) by
    rank), into a new SBUF tile; dtype= converts after, by a tensor_copy."""
    order = _isa._DMA_TRANSPOSE_AXES.get(src.ndim)
    if order is None:
        raise NkiError(f"nki.isa.dma_transpose: {src.name} has {src.ndim} dims (2 to 4)")
    with _masked(mask):
        out = _tile(tuple(src.shape[a] for a in order), src.dtype, f"{src.name}_t")
        _isa.dma_transpose(out, src, axes=axes)
        if dtype is None or dtype_name(dtype) == src.dtype:
            return out
        converted = _nl._new_tile(out, dtype)
        _isa.tensor_copy(converted, out)
        return converted


def max8(*, src: Tensor, mask=None, dtype=None):
    """[P, 8]: the 8 largest values of each partition, largest first (VectorE)."""
    with _masked(mask):
        out = _tile((src.shape[0], 8), dtype or src.dtype, "max8")
        _isa.max8(out, src)
        return out


def nc_find_index8(*, data: Tensor, vals: Tensor, mask=None, dtype=None):
    """[P, 8]: where each of the 8 vals first occurs in its partition of data (uint32 by
    default, or uint16)."""
    with _masked(mask):
        out = _tile((data.shape[0], 8), dtype or "uint32", "find_index8")
        _isa.nc_find_index8(out, data, vals)
        return out


def nc_match_replace8(*, data: Tensor, vals: Tensor, imm, dst_idx=None, mask=None, dtype=None):
    """data with the first occurrence of each of the 8 vals replaced by imm, as a new tile;
    their positions go to dst_idx when given."""
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.nc_match_replace8(out, data, vals, imm, dst_idx=dst_idx)
        return out


def range_select(
    *,
    on_true_tile: Tensor,
    comp_op0,
    comp_op1,
    bound0,
    bound1,
    reduce_cmd=reduce_cmd.idle,
    reduce_res=None,
    reduce_op=_nl.maximum,
    range_start=0,
    on_false_value=fp32.min,
    mask=None,
    dtype=None,
):
    """on_true_tile where range_start + the free index compares with bound0 and bound1
    ([P, 1] float32), else on_false_value; with reduce_res, each row's maximum (VectorE)."""
    with _masked(mask):
        out = _nl._new_tile(on_true_tile, dtype)
        _isa.range_select(
            out,
            on_true_tile,
            _op(comp_op0),
            _op(comp_op1),
            bound0,
            bound1,
            reduce_cmd=_accumulating("range_select", reduce_cmd, reduce_res),
            reduce_res=reduce_res,
            reduce_op=_op(reduce_op),
            range_start=range_start,
            on_false_value=on_false_value,
        )
        return out


def reciprocal(data: Tensor, *, dtype=None, mask=None):
    """1 / data, as a new tile (VectorE)."""
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.reciprocal(out, data)
        return out


def scalar_tensor_tensor(
    *,
    data: Tensor,
    op0,
    operand0,
    op1,
    operand1,
    reverse0=False,
    reverse1=False,
    dtype=None,
    mask=None,
):
    """(data <op0> operand0) <op1> operand1, operand0 a number or a [P, 1] tile, operand1 a
    tile of data's shape, as a new tile (VectorE)."""
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.scalar_tensor_tensor(
            out,
            data,
            _op(op0),
            operand0,
            _op(op1),
            operand1,
            reverse0=reverse0,
            reverse1=reverse1,
        )
        return out


def select_reduce(
    *,
    dst: Tensor,
    predicate: Tensor,
    on_true: Tensor,
    on_false,
    reduce_res=None,
    reduce_cmd=reduce_cmd.idle,
    reduce_op=_nl.maximum,
    reverse_pred=False,
    mask=None,
    dtype=None,
):
    """dst = on_true where predicate is nonzero (zero, with reverse_pred), else on_false (a
    number or a [P, 1] tile); with reduce_res, each row's maximum (VectorE). Returns dst."""
    if dtype is not None and dtype_name(dtype) != dst.dtype:
        raise NkiError(f"nki.isa.select_reduce: dtype {dtype} differs from dst's {dst.dtype}")
    with _masked(mask):
        _isa.select_reduce(
            dst,
            predicate,
            on_true,
            on_false,
            reduce_res=reduce_res,
            reduce_cmd=_accumulating("select_reduce", reduce_cmd, reduce_res),
            reduce_op=_op(reduce_op),
            reverse_pred=reverse_pred,
        )
        return dst


def tensor_copy_predicated(
    *, src, dst: Tensor, predicate: Tensor, reverse_pred=False, mask=None, dtype=None
):
    """dst = src where predicate is nonzero (zero, with reverse_pred); elsewhere dst keeps
    its values (VectorE). A number src is a memset tile first."""
    if dtype is not None and dtype_name(dtype) != dst.dtype:
        raise NkiError(
            f"nki.isa.tensor_copy_predicated: dtype {dtype} differs from dst's {dst.dtype}"
        )
    with _masked(mask):
        if not isinstance(src, Tensor):
            src = _nl.full(dst.shape, float(src), dst.dtype)
        _isa.tensor_copy_predicated(dst, src, predicate, reverse_pred=reverse_pred)


_PARTITION_REDUCTIONS = ("add", "multiply", "max", "min")


def tensor_partition_reduce(op, data: Tensor, *, mask=None, dtype=None):
    """op across the partitions of data: a [1, ...] tile (GpSimd)."""
    op = _op(op)
    if str(op) not in _PARTITION_REDUCTIONS:
        raise NkiError(
            f"nki.isa.tensor_partition_reduce: op {op} is not supported (add, multiply, "
            "maximum, minimum)"
        )
    with _masked(mask):
        out = _tile((1, *data.shape[1:]), dtype or data.dtype, "partition_reduce")
        _isa.tensor_partition_reduce(out, op, data)
        return out


def tensor_scalar_reduce(
    *, data: Tensor, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None
):
    """data <op0> operand0 as a new tile, and each partition's results reduced by reduce_op
    into reduce_res ([P, 1]) by the same VectorE instruction."""
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.tensor_scalar_reduce(
            out,
            data,
            _op(op0),
            operand0,
            _op(reduce_op),
            reduce_res=reduce_res,
            reverse0=reverse0,
            reduce_cmd=reduce_cmd.reset_reduce,
        )
        return out


# Result dtypes by precision, for instructions whose result takes the wider of two inputs.
_PRECISION = (
    "float32",
    "tfloat32",
    "float16",
    "bfloat16",
    "float8_e4m3",
    "float8_e5m2",
    "int32",
    "uint32",
    "int16",
    "uint16",
    "int8",
    "uint8",
    "bool",
)


def _wider(a: str, b: str) -> str:
    return min(a, b, key=_PRECISION.index)


def tensor_tensor_scan(
    data0: Tensor,
    data1: Tensor,
    initial,
    op0,
    op1,
    reverse0=False,
    reverse1=False,
    *,
    dtype=None,
    mask=None,
):
    """Per partition along the free elements, r = (data0 <op0> r_prev) <op1> data1, from
    initial (a number or a [P, 1] tile), as a new tile (VectorE): a linear recurrence."""
    with _masked(mask):
        out = _nl._new_tile(data0, dtype or _wider(data0.dtype, data1.dtype))
        _isa.tensor_tensor_scan(
            out, data0, data1, initial, _op(op0), _op(op1), reverse0=reverse0, reverse1=reverse1
        )
        return out


def _refused(name: str, why: str):
    return refused(f"nki.isa.{name}", why)


_INDEX_EXPRESSIONS = (
    "its affine expression of nl.arange indices is not built here (an index does not record "
    "which dim it indexes, and two indices do not combine); use the current API's {}"
)
iota = _refused(
    "iota", _INDEX_EXPRESSIONS.format("nisa.iota(dst, pattern, offset, channel_multiplier)")
)
affine_select = _refused(
    "affine_select",
    _INDEX_EXPRESSIONS.format("nisa.affine_select(dst, pattern, channel_multiplier, ...)"),
)
dropout = _refused("dropout", "the random number generator is not modelled by neuronsim.nki yet")
local_gather = _refused("local_gather", "GpSimd's local gather is not in neuronsim.nki.isa yet")
nc_stream_shuffle = _refused(
    "nc_stream_shuffle", "the partition shuffle is not in neuronsim.nki.isa yet"
)
sequence_bounds = _refused("sequence_bounds", "it is not in neuronsim.nki.isa yet")
tensor_copy_dynamic_src = _refused(
    "tensor_copy_dynamic_src", "copies addressed by run-time values are not supported yet"
)
tensor_copy_dynamic_dst = _refused(
    "tensor_copy_dynamic_dst", "copies addressed by run-time values are not supported yet"
)
builtin_custom_op = _refused("builtin_custom_op", "custom operator libraries cannot run here")

"""nki.isa on the simulator: each call is one instruction of a NeuronCore engine,
destination first, with NKI's argument names. Written from NKI's public API reference.
"""

from __future__ import annotations

import math

from . import _trace
from ._trace import HBM, PSUM, SBUF, NkiError
from ._trace import Tensor as NkiTensor


class engine:  # noqa: N801 (NKI's name)
    tensor, vector, scalar, gpsimd, sync, unknown = "pe", "dve", "act", "pool", "sp", None


_ENGINES = {None: None, "pe": "pe", "dve": "dve", "act": "act", "pool": "pool", "sp": "sp"}


def _engine(value, default: str) -> str:
    if value not in _ENGINES:
        raise NkiError(f"engine {value!r} is not one of nki.isa.engine's")
    return _ENGINES[value] or default


def _alu(op, what: str) -> str:
    if getattr(op, "kind", "alu") != "alu":
        raise NkiError(f"{what}: {op} is an activation function, not an arithmetic operator")
    return str(op)


def _on_chip(t: NkiTensor, what: str, *buffers: str) -> None:
    if not isinstance(t, NkiTensor):
        raise NkiError(f"{what}: expects an NKI tensor, got {type(t).__name__}")
    if t.buffer not in buffers:
        raise NkiError(f"{what}: {t.name} is in {t.buffer}, not in {' or '.join(buffers)}")


def _same_shape(what: str, a: NkiTensor, b: NkiTensor) -> None:
    if a.shape != b.shape:
        raise NkiError(f"{what}: {a.name} has shape {a.shape} and {b.name} has shape {b.shape}")


def dma_copy(dst: NkiTensor, src: NkiTensor, dge_mode=None, name: str = "") -> None:
    """dst <- src by DMA: HBM to SBUF, SBUF to HBM, or between on-chip buffers."""
    if dst.buffer == HBM and src.buffer == HBM:
        raise NkiError(f"dma_copy: {dst.name} and {src.name} are both in HBM")
    if _elems(dst) != _elems(src):
        raise NkiError(
            f"dma_copy: {dst.name} {dst.shape} and {src.name} {src.shape} differ in size"
        )
    trace = _trace.current()
    # Spread over the Sync engine's 16 queues, round robin, as a compiler spreads DMAs:
    # transfers on one queue complete in order.
    trace.emit("sp", "dma_copy", dst=dst, src=src, queue=trace.next_queue())


def _elems(t: NkiTensor) -> int:
    return math.prod(t.shape)


def tensor_tensor(dst, data1, data2, op, engine=None, name: str = "") -> None:
    """dst = data1 <op> data2, elementwise (VectorE, or GpSimd)."""
    for t, role in ((dst, "dst"), (data1, "data1"), (data2, "data2")):
        _on_chip(t, f"tensor_tensor {role}", SBUF, PSUM)
    _same_shape("tensor_tensor", data1, data2)
    _trace.current().emit(
        _engine(engine, "dve"),
        "tensor_tensor",
        dst=dst,
        in0=data1,
        in1=data2,
        op=_alu(op, "tensor_tensor"),
    )


def tensor_scalar(
    dst,
    data,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    engine=None,
    name: str = "",
) -> None:
    """dst = (data <op0> operand0) <op1> operand1, each operand a number or a [P, 1] tile."""
    _on_chip(dst, "tensor_scalar dst", SBUF, PSUM)
    _on_chip(data, "tensor_scalar data", SBUF, PSUM)
    fields = {"dst": dst, "src": data, "op0": _alu(op0, "tensor_scalar")}
    fields.update(_scalar_operand(operand0, "0"))
    fields["reverse0"] = bool(reverse0) or None
    if op1 is not None:
        fields["op1"] = _alu(op1, "tensor_scalar")
        fields.update(_scalar_operand(operand1, "1"))
        fields["reverse1"] = bool(reverse1) or None
    _trace.current().emit(_engine(engine, "dve"), "tensor_scalar", **fields)


def _scalar_operand(value, k: str) -> dict:
    if isinstance(value, NkiTensor):
        return {f"operand{k}": value}
    return {f"imm{k}": repr(float(value))}


def activation(
    dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, name: str = ""
) -> None:
    """dst = op(data * scale + bias) on ScalarE."""
    if getattr(op, "kind", "act") != "act":
        raise NkiError(f"activation: {op} is an arithmetic operator, not an activation function")
    _on_chip(dst, "activation dst", SBUF, PSUM)
    _on_chip(data, "activation data", SBUF, PSUM)
    scale_field = (
        scale
        if isinstance(scale, NkiTensor)
        else (None if float(scale) == 1.0 else repr(float(scale)))
    )
    _trace.current().emit(
        "act",
        "activation",
        dst=dst,
        src=data,
        func=str(op),
        scale=scale_field,
        bias=bias,
        reduce_dst=reduce_res,
        reduce=None if reduce_op is None else _alu(reduce_op, "activation"),
    )


def nc_matmul(
    dst,
    stationary,
    moving,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    accumulate=None,
    name: str = "",
    **unsupported,
) -> None:
    """dst (PSUM) = stationary.T @ moving on TensorE. With accumulate=None, a matmul into the
    very view the previous instruction writing it was a matmul into accumulates there (the
    contraction split over K tiles); otherwise it overwrites."""
    if unsupported:
        raise NkiError(f"nc_matmul: {', '.join(unsupported)} not supported yet")
    _on_chip(dst, "nc_matmul dst", PSUM)
    _on_chip(stationary, "nc_matmul stationary", SBUF)
    _on_chip(moving, "nc_matmul moving", SBUF)
    k, m = stationary.shape[0], _elems(stationary) // stationary.shape[0]
    if moving.shape[0] != k:
        raise NkiError(
            f"nc_matmul: stationary {stationary.shape} and moving {moving.shape} "
            f"contract different partition dims"
        )
    if dst.shape[0] != m:
        raise NkiError(
            f"nc_matmul: dst {dst.shape} has {dst.shape[0]} partitions for {m} stationary columns"
        )
    trace = _trace.current()
    if accumulate is None:
        accumulate = trace.last_writer.get(dst.identity()) == "matmul"
    trace.emit(
        "pe",
        "matmul",
        dst=dst,
        stationary=stationary,
        moving=moving,
        accumulate=bool(accumulate) or None,
        transpose=bool(is_transpose) or None,
    )


def nc_transpose(dst, data, engine=None, name: str = "") -> None:
    """dst = data transposed (partitions and the free dim swapped): TensorE into PSUM, or
    VectorE for up to 32 x 32."""
    where = _engine(engine, "pe" if dst.buffer == PSUM else "dve")
    _trace.current().emit(where, "transpose", dst=dst, src=data)


def tensor_copy(dst, src, engine=None, name: str = "") -> None:
    """dst = src, converted to dst's dtype (VectorE, ScalarE or GpSimd)."""
    _on_chip(dst, "tensor_copy dst", SBUF, PSUM)
    _on_chip(src, "tensor_copy src", SBUF, PSUM)
    _trace.current().emit(_engine(engine, "dve"), "tensor_copy", dst=dst, src=src)


def memset(dst, value, engine=None, name: str = "") -> None:
    """dst = value everywhere."""
    _on_chip(dst, "memset dst", SBUF, PSUM)
    _trace.current().emit(
        _engine(engine, "dve"),
        "memset",
        dst=dst,
        value=None if float(value) == 0.0 else repr(float(value)),
    )


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name: str = "") -> None:
    """dst = op over the free axes `axis` of data (VectorE)."""
    _on_chip(data, "tensor_reduce data", SBUF, PSUM)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    mask = 0
    for a in axes:
        if not 1 <= a < data.ndim:
            raise NkiError(f"tensor_reduce: axis {a} is not a free axis of {data.shape}")
        mask |= 1 << (a - 1)
    _trace.current().emit(
        "dve",
        "tensor_reduce",
        dst=dst,
        src=data,
        op=_alu(op, "tensor_reduce"),
        axes=hex(mask),
        negate=bool(negate) or None,
        keepdims=bool(keepdims) or None,
    )


def bn_stats(dst, data, name: str = "") -> None:
    """Per partition, the count, mean and variance terms of `data` (VectorE): 6 values
    for bn_aggr to combine."""
    _on_chip(data, "bn_stats data", SBUF, PSUM)
    _trace.current().emit("dve", "bn_stats", dst=dst, src=data)


def bn_aggr(dst, data, name: str = "") -> None:
    """Per partition, the mean and variance from bn_stats' groups of 6 (VectorE)."""
    _on_chip(data, "bn_aggr data", SBUF, PSUM)
    _trace.current().emit("dve", "bn_aggr", dst=dst, src=data)


def tensor_tensor_scan(
    dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name: str = ""
) -> None:
    """Per partition along the free dim: r[i] = (data0[i] <op0> r[i-1]) <op1> data1[i],
    r[-1] = initial (a number or a [P, 1] tile): a linear recurrence (VectorE)."""
    if reverse0 or reverse1:
        raise NkiError("tensor_tensor_scan: reverse0/reverse1 are not supported yet")
    _same_shape("tensor_tensor_scan", data0, data1)
    start = initial if isinstance(initial, NkiTensor) else repr(float(initial))
    _trace.current().emit(
        "dve",
        "tensor_tensor_scan",
        dst=dst,
        in0=data0,
        in1=data1,
        op0=_alu(op0, "tensor_tensor_scan"),
        op1=_alu(op1, "tensor_tensor_scan"),
        initial=start,
    )


def tensor_partition_reduce(dst, op, data, name: str = "") -> None:
    """op across the partitions of data, into one partition (GpSimd)."""
    _trace.current().emit(
        "pool", "partition_reduce", dst=dst, src=data, op=_alu(op, "tensor_partition_reduce")
    )


def max8(dst, src, name: str = "") -> None:
    """The 8 largest values of each partition, largest first (VectorE)."""
    _trace.current().emit("dve", "max8", dst=dst, src=src)


def nc_find_index8(dst, data, vals, name: str = "") -> None:
    """The position of the first occurrence of each of the 8 `vals` in each partition."""
    _trace.current().emit("dve", "find_index8", dst=dst, src=data, vals=vals)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name: str = "") -> None:
    """data with the first occurrence of each of the 8 `vals` replaced by `imm` (their
    positions into dst_idx): the next round of a top-k."""
    _trace.current().emit(
        "dve",
        "match_replace8",
        dst=dst,
        src=data,
        vals=vals,
        dst_index=dst_idx,
        imm=repr(float(imm)),
    )


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name: str = "") -> None:
    """dst = src where predicate is nonzero (zero, with reverse_pred); elsewhere dst keeps
    its values (VectorE)."""
    _trace.current().emit(
        "dve",
        "copy_predicated",
        dst=dst,
        src=src,
        predicate=predicate,
        reverse=bool(reverse_pred) or None,
    )


def activation_reduce(
    dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name: str = ""
) -> None:
    """activation, and its results reduced along the free dim into reduce_res ([P, 1]), in
    the same ScalarE instruction."""
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res)


def reciprocal(dst, data, name: str = "") -> None:
    """dst = 1 / data on VectorE: one tensor_scalar (1 divided by each element), whose cost
    the cost model gives."""
    _on_chip(dst, "reciprocal dst", SBUF, PSUM)
    _on_chip(data, "reciprocal data", SBUF, PSUM)
    _trace.current().emit(
        "dve", "tensor_scalar", dst=dst, src=data, op0="divide", imm0="1.0", reverse0=True
    )

"""nki.isa on the simulator: each call is one instruction of a NeuronCore engine,
destination first, with NKI's argument names. Written from NKI's public API reference.
"""

from __future__ import annotations

import math

from . import _lower, _trace
from ._trace import PSUM, SBUF, NkiError
from ._trace import Tensor as NkiTensor


class engine:  # noqa: N801 (NKI's name)
    tensor, vector, scalar, gpsimd, sync, unknown = "pe", "dve", "act", "pool", "sp", None


engine_ns = engine  # dma_copy's `engine` parameter hides the class


_ENGINES = {None: None, "pe": "pe", "dve": "dve", "act": "act", "pool": "pool", "sp": "sp"}


def _engine(value, default: str) -> str:
    if value not in _ENGINES:
        raise NkiError(f"engine {value!r} is not one of nki.isa.engine's")
    return _ENGINES[value] or default


_KINDS = {
    "act": "an activation function",
    "alu": "an arithmetic operator",
    "composite": "a function of several instructions (call it on a tile)",
}


def _alu(op, what: str) -> str:
    kind = getattr(op, "kind", "alu")
    if kind != "alu":
        raise NkiError(f"{what}: {op} is {_KINDS.get(kind, kind)}, not an arithmetic operator")
    return str(op)


def _on_chip(t: NkiTensor, what: str, *buffers: str) -> None:
    if not isinstance(t, NkiTensor):
        raise NkiError(f"{what}: expects an NKI tensor, got {type(t).__name__}")
    if t.buffer not in buffers:
        raise NkiError(f"{what}: {t.name} is in {t.buffer}, not in {' or '.join(buffers)}")


def _same_shape(what: str, a: NkiTensor, b: NkiTensor) -> None:
    if a.shape != b.shape:
        raise NkiError(f"{what}: {a.name} has shape {a.shape} and {b.name} has shape {b.shape}")


def _dma_trigger(what: str, mode, engine) -> tuple[str, dict]:
    """The engine that triggers a DMA and its flags, from NKI's dge_mode and engine: static
    descriptors (the default) from the Sync engine; the hardware DGE (NeuronCore-v3+) of the
    Sync or Scalar engine; the software DGE on GpSimd."""
    if mode in (None, dge_mode.unknown, dge_mode.none):
        return "sp", {}
    if mode == dge_mode.hwdge:
        if engine not in (None, engine_ns.sync, engine_ns.scalar):
            raise NkiError(f"{what}: the hardware DGE is triggered by the Sync or Scalar engine")
        return engine or "sp", {"hwdge": True}
    if mode == dge_mode.swdge:
        return "pool", {}
    raise NkiError(f"{what}: dge_mode {mode!r} is not one of nki.isa.dge_mode's")


def dma_copy(dst: NkiTensor, src: NkiTensor, dge_mode=None, engine=None, name: str = "") -> None:
    """dst <- src by DMA: between HBM tensors, HBM to SBUF, SBUF to HBM, or between on-chip
    buffers. `dge_mode` says who makes the descriptors (docs/nki.md, "DMA descriptors")."""
    if _elems(dst) != _elems(src):
        raise NkiError(
            f"dma_copy: {dst.name} {dst.shape} and {src.name} {src.shape} differ in size"
        )
    trigger, flags = _dma_trigger("dma_copy", dge_mode, engine)
    trace = _trace.current()
    queue = trace.next_queue("hwdge" in flags)
    trace.emit(trigger, "dma_copy", dst=dst, src=src, queue=queue, **flags)


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
    kind = getattr(op, "kind", "act")
    if kind != "act":
        raise NkiError(f"activation: {op} is {_KINDS.get(kind, kind)}, not an activation function")
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


class matmul_perf_mode:  # noqa: N801 (NKI's name)
    """TensorE's performance mode: none, or double_row (FP8 on NeuronCore-v3 and newer: each
    partition of both operands holds two contraction rows, [K, 2, *], twice the throughput)."""

    none, double_row = "none", "double_row"


def _double_row(perf_mode) -> bool:
    mode = getattr(perf_mode, "value", perf_mode)
    if mode in (None, "none"):
        return False
    if mode in ("double_row", "double_row_gen3"):  # the second, the beta API's name
        return True
    raise NkiError(f"nc_matmul: perf_mode {mode!r} (none or double_row)")


def _pe_tile(tile_position, tile_size, k: int, m: int) -> dict:
    """The ISA's row/col of a matmul in TensorE's tiling mode: tile_position (start row, start
    column) and tile_size (rows, columns) both given, the operands inside the tile, each start a
    multiple of its size. The ISA checks the sizes the generation splits its array into."""
    if not tile_position and not tile_size:
        return {}
    if not tile_position or not tile_size:
        raise NkiError("nc_matmul: tiling mode needs both tile_position and tile_size")
    (row, col), (rows, cols) = (int(v) for v in tile_position), (int(v) for v in tile_size)
    if k > rows or m > cols:
        raise NkiError(f"nc_matmul: stationary [{k}, {m}] does not fit tile_size ({rows}, {cols})")
    if row % rows or col % cols:
        raise NkiError(
            f"nc_matmul: tile_position ({row}, {col}) is not a multiple of tile_size "
            f"({rows}, {cols})"
        )
    return {"row": row or None, "col": col or None}


def nc_matmul(
    dst,
    stationary,
    moving,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    accumulate=None,
    tile_position=(),
    tile_size=(),
    perf_mode=None,
    name: str = "",
    **unsupported,
) -> None:
    """dst (PSUM) = stationary.T @ moving on TensorE. With accumulate=None, a matmul into the
    very view the previous instruction writing it was a matmul into accumulates there (the
    contraction split over K tiles); otherwise it overwrites. tile_position and tile_size place
    it in a part of the PE array (the values do not change; the cost model does not yet run
    tiles side by side). In double_row mode stationary [K, 2, M] and moving [K, 2, N] contract
    over K x 2. The one-zero hints halve an FP32
    matmul's time; an operand hinted so that holds other values is refused when it runs."""
    if unsupported:
        raise NkiError(f"nc_matmul: {', '.join(unsupported)} not supported yet")
    _on_chip(dst, "nc_matmul dst", PSUM)
    _on_chip(stationary, "nc_matmul stationary", SBUF)
    _on_chip(moving, "nc_matmul moving", SBUF)
    double_row = _double_row(perf_mode)
    if double_row:
        for what, t in (("stationary", stationary), ("moving", moving)):
            if t.ndim < 3 or t.shape[1] != 2:
                raise NkiError(f"nc_matmul: double_row needs {what} as [K, 2, ...], not {t.shape}")
    rows = 2 if double_row else 1
    k, m = stationary.shape[0], _elems(stationary) // (stationary.shape[0] * rows)
    if moving.shape[0] != k:
        raise NkiError(
            f"nc_matmul: stationary {stationary.shape} and moving {moving.shape} "
            f"contract different partition dims"
        )
    if dst.shape[0] != m:
        raise NkiError(
            f"nc_matmul: dst {dst.shape} has {dst.shape[0]} partitions for {m} stationary columns"
        )
    tiling = _pe_tile(tile_position, tile_size, k, m)
    trace = _trace.current()
    if accumulate is None:
        accumulate = trace.last_writer.get(dst.identity()) == "matmul"
    trace.emit(
        "pe",
        "matmul",
        **tiling,
        dst=dst,
        stationary=stationary,
        moving=moving,
        accumulate=bool(accumulate) or None,
        transpose=bool(is_transpose) or None,
        double_row=double_row or None,
        stationary_onezero=bool(is_stationary_onezero) or None,
        moving_onezero=bool(is_moving_onezero) or None,
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
    r[-1] = initial (a number or a [P, 1] tile): a linear recurrence (VectorE).
    reverse0/reverse1 swap the operands of op0/op1."""
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
        reverse0=bool(reverse0) or None,
        reverse1=bool(reverse1) or None,
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


# -- VectorE's accumulator: the instructions that also reduce ---------------------------------
class reduce_cmd:  # noqa: N801 (NKI's name)
    """What an instruction does with VectorE's accumulator (one value per partition, kept
    from one instruction to the next)."""

    idle, reset, reduce, reset_reduce, load_reduce = 0, 1, 2, 3, 4


_REDUCE_CMDS = {0, 1, 2, 3, 4}


def _reduction(what: str, cmd, op, res, init=None, data=None) -> dict:
    """The assembly fields of an instruction's use of the accumulator."""
    cmd = int(cmd)
    if cmd not in _REDUCE_CMDS:
        raise NkiError(f"{what}: reduce_cmd {cmd} is not one of nki.isa.reduce_cmd's")
    if cmd == reduce_cmd.idle:
        if res is not None:
            raise NkiError(f"{what}: reduce_res is given but reduce_cmd is idle")
        return {}
    if res is not None:
        _on_chip(res, f"{what} reduce_res", SBUF, PSUM)
        if data is not None and res.shape[0] != data.shape[0]:
            raise NkiError(
                f"{what}: reduce_res {res.shape} needs one value per partition of {data.shape}"
            )
    fields = {"reduce_dst": res, "reduce": _alu(op, what), "reduce_cmd": cmd}
    if cmd == reduce_cmd.load_reduce:
        if not isinstance(init, NkiTensor):
            raise NkiError(f"{what}: load_reduce takes reduce_init as a [P, 1] tile")
        fields["initial"] = init
    elif init is not None:
        raise NkiError(f"{what}: reduce_init is only read by reduce_cmd.load_reduce")
    return fields


def tensor_scalar_reduce(
    dst,
    data,
    op0,
    operand0,
    reduce_op,
    reduce_res=None,
    reverse0=False,
    reduce_cmd=reduce_cmd.reset_reduce,
    reduce_init=None,
    reduce_res_negate=False,
    name: str = "",
) -> None:
    """dst = data <op0> operand0, and each partition's results reduced by reduce_op into
    VectorE's accumulator (written to reduce_res when given)."""
    if reduce_res_negate:
        raise NkiError("tensor_scalar_reduce: reduce_res_negate is not supported yet")
    _on_chip(dst, "tensor_scalar_reduce dst", SBUF, PSUM)
    _on_chip(data, "tensor_scalar_reduce data", SBUF, PSUM)
    fields = {"dst": dst, "src": data, "op0": _alu(op0, "tensor_scalar_reduce")}
    fields.update(_scalar_operand(operand0, "0"))
    fields["reverse0"] = bool(reverse0) or None
    fields.update(
        _reduction("tensor_scalar_reduce", reduce_cmd, reduce_op, reduce_res, reduce_init, data)
    )
    _trace.current().emit("dve", "tensor_scalar", **fields)


def scalar_tensor_tensor(
    dst,
    data,
    op0,
    operand0,
    op1,
    operand1,
    reverse0=False,
    reverse1=False,
    reduce_cmd=reduce_cmd.idle,
    reduce_op=None,
    reduce_res=None,
    name: str = "",
) -> None:
    """dst = (data <op0> operand0) <op1> operand1: operand0 a number or a [P, 1] tile,
    operand1 a tile of data's shape (VectorE)."""
    for t, role in ((dst, "dst"), (data, "data"), (operand1, "operand1")):
        _on_chip(t, f"scalar_tensor_tensor {role}", SBUF, PSUM)
    _same_shape("scalar_tensor_tensor", data, operand1)
    fields = {"dst": dst, "in0": data, "in1": operand1}
    fields.update(_scalar_operand(operand0, "0"))
    fields.update(
        op0=_alu(op0, "scalar_tensor_tensor"),
        op1=_alu(op1, "scalar_tensor_tensor"),
        reverse0=bool(reverse0) or None,
        reverse1=bool(reverse1) or None,
    )
    if reduce_cmd != 0 or reduce_res is not None:
        fields.update(
            _reduction(
                "scalar_tensor_tensor", reduce_cmd, reduce_op or "add", reduce_res, None, data
            )
        )
    _trace.current().emit("dve", "scalar_tensor_tensor", **fields)


_FP32_MIN = -3.4028234663852886e38


def range_select(
    dst,
    on_true_tile,
    comp_op0,
    comp_op1,
    bound0,
    bound1,
    reduce_cmd=reduce_cmd.reset_reduce,
    reduce_res=None,
    reduce_op="max",
    range_start=0,
    on_false_value=_FP32_MIN,
    name: str = "",
) -> None:
    """dst[p, j] = on_true_tile[p, j] where range_start + j compares with bound0[p] by
    comp_op0 and with bound1[p] by comp_op1, else on_false_value; the row's maximum goes to
    VectorE's accumulator (reduce_res when given)."""
    _on_chip(dst, "range_select dst", SBUF, PSUM)
    _on_chip(on_true_tile, "range_select on_true_tile", SBUF, PSUM)
    for bound, role in ((bound0, "bound0"), (bound1, "bound1")):
        if not isinstance(bound, NkiTensor):
            raise NkiError(f"range_select: {role} is a [P, 1] float32 tile, not {bound!r}")
    fields = {
        "dst": dst,
        "on_true": on_true_tile,
        "operand0": bound0,
        "operand1": bound1,
        "cmp0": _alu(comp_op0, "range_select"),
        "cmp1": _alu(comp_op1, "range_select"),
        "range_start": int(range_start) or None,
        "on_false": None if float(on_false_value) == 0.0 else repr(float(on_false_value)),
    }
    fields.update(_reduction("range_select", reduce_cmd, reduce_op, reduce_res, None, on_true_tile))
    _trace.current().emit("dve", "range_select", **fields)


def select_reduce(
    dst,
    predicate,
    on_true,
    on_false,
    reduce_res=None,
    reduce_cmd=reduce_cmd.idle,
    reduce_op="max",
    reverse_pred=False,
    name: str = "",
) -> None:
    """dst = on_true where predicate is nonzero (zero, with reverse_pred), else on_false (a
    number or a [P, 1] tile); the row's maximum may go to VectorE's accumulator."""
    for t, role in ((dst, "dst"), (predicate, "predicate"), (on_true, "on_true")):
        _on_chip(t, f"select_reduce {role}", SBUF, PSUM)
    fields = {"dst": dst, "predicate": predicate, "on_true": on_true}
    if isinstance(on_false, NkiTensor):
        fields["on_false"] = on_false
    elif float(on_false) != 0.0:
        fields["on_false"] = repr(float(on_false))
    fields["reverse"] = bool(reverse_pred) or None
    fields.update(_reduction("select_reduce", reduce_cmd, reduce_op, reduce_res, None, on_true))
    _trace.current().emit("dve", "select", **fields)


# The permutations a DMA transpose supports, by rank: the last source dim becomes the
# partitions (NKI's dma_transpose).
_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


class dge_mode:  # noqa: N801 (NKI's name)
    """Who makes a DMA's descriptors: unknown and none, pre-built (no cost on the device);
    hwdge, the triggering engine's hardware DGE (about 600 ns per instruction, v3+); swdge,
    GpSimd."""

    unknown, none, swdge, hwdge = 0, 1, 2, 3


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=None, oob_mode=None, name=""):
    """dst = src with its dims permuted by the DMA engines (`axes`: (1, 0) in 2-D,
    (2, 1, 0) in 3-D, (3, 1, 2, 0) in 4-D): src's last dim becomes dst's partitions."""
    if src.ndim not in _DMA_TRANSPOSE_AXES:
        raise NkiError(f"dma_transpose: {src.name} has {src.ndim} dims (2 to 4 are supported)")
    expected = _DMA_TRANSPOSE_AXES[src.ndim]
    if axes is not None and tuple(axes) != expected:
        raise NkiError(f"dma_transpose: axes {tuple(axes)} (only {expected} for {src.ndim} dims)")
    _on_chip(dst, "dma_transpose dst", SBUF)
    if src.buffer == PSUM:
        raise NkiError(f"dma_transpose: {src.name} is in PSUM (HBM or SBUF)")
    want = tuple(src.shape[a] for a in expected)
    if math.prod(dst.shape) != math.prod(want) or dst.shape[0] != want[0]:
        raise NkiError(f"dma_transpose: dst {dst.shape} is not src {src.shape} permuted: {want}")
    trace = _trace.current()
    # The rows are walked innermost (the flag); the free dims in the order dst walks them.
    reordered = src.permute_free([a - 1 for a in expected[:-1]])
    trigger, flags = _dma_trigger("dma_transpose", dge_mode, None)
    trace.emit(
        trigger,
        "dma_copy",
        dst=dst,
        src=reordered,
        queue=trace.next_queue("hwdge" in flags),
        transpose=True,
        **flags,
    )


# -- GpSimd's index patterns ------------------------------------------------------------------
def _pattern(pattern, what: str) -> str:
    pairs = [(int(step), int(num)) for step, num in pattern]
    if not 1 <= len(pairs) <= 4:
        raise NkiError(f"{what}: a pattern has 1 to 4 [step, num] pairs, not {len(pairs)}")
    return "pattern[" + ",".join(f"[{s},{n}]" for s, n in pairs) + "]"


def _pattern_size(pattern) -> int:
    return math.prod(int(num) for _, num in pattern)


def iota(dst, pattern, offset=0, channel_multiplier=0, name: str = "") -> None:
    """dst[p, i...] = offset + channel_multiplier * p + sum(step_k * i_k) over the pattern's
    [step, num] pairs (GpSimd)."""
    _on_chip(dst, "iota dst", SBUF)
    if _pattern_size(pattern) != _elems(dst) // dst.shape[0]:
        raise NkiError(
            f"iota: the pattern's {_pattern_size(pattern)} indices do not fill {dst.shape}"
        )
    _trace.current().emit(
        "pool",
        "iota",
        dst=dst,
        pattern=_pattern(pattern, "iota"),
        offset=int(offset) or None,
        channel_multiplier=int(channel_multiplier) or None,
    )


_CMP_WITH_ZERO = {"is_equal", "not_equal", "is_gt", "is_ge", "is_lt", "is_le"}


def affine_select(
    dst,
    pattern,
    channel_multiplier,
    on_true_tile,
    on_false_value,
    cmp_op="is_equal",
    offset=0,
    name: str = "",
) -> None:
    """dst = on_true_tile where offset + channel_multiplier * p + sum(step_k * i_k) compares
    with 0 by cmp_op, else on_false_value (GpSimd): causal and banded masks."""
    _on_chip(dst, "affine_select dst", SBUF)
    _on_chip(on_true_tile, "affine_select on_true_tile", SBUF)
    _same_shape("affine_select", dst, on_true_tile)
    if str(cmp_op) not in _CMP_WITH_ZERO:
        raise NkiError(f"affine_select: cmp_op {cmp_op} is not a comparison")
    if _pattern_size(pattern) != _elems(dst) // dst.shape[0]:
        raise NkiError(
            f"affine_select: the pattern's {_pattern_size(pattern)} indices do not fill {dst.shape}"
        )
    _trace.current().emit(
        "pool",
        "affine_select",
        dst=dst,
        on_true=on_true_tile,
        pattern=_pattern(pattern, "affine_select"),
        offset=int(offset) or None,
        channel_multiplier=int(channel_multiplier) or None,
        cmp=str(cmp_op),
        on_false=None if float(on_false_value) == 0.0 else repr(float(on_false_value)),
    )


# -- registers: integers the loops with run-time bounds count with ----------------------------
def register_alloc(x=None):
    """A new register, holding x (0 when not given)."""
    return _trace.VirtualRegister(0 if x is None else _register_value(x, "register_alloc"))


def register_move(dst, src) -> None:
    """dst = src (a register or an integer)."""
    _register(dst, "register_move dst").value = _register_value(src, "register_move")


def register_load(dst, src) -> None:
    """dst = the one integer element of src (SBUF or HBM), as the program has it at this
    point: the program runs up to here on the kernel's inputs to read it."""
    _register(dst, "register_load dst").value = _lower.load_register_value(_trace.current(), src)


def register_store(dst, src) -> None:
    """The register's value written to the one element of dst (SBUF or PSUM): a memset."""
    _on_chip(dst, "register_store dst", SBUF, PSUM)
    if _elems(dst) != 1:
        raise NkiError(f"register_store: {dst.name} {dst.shape} is not one element")
    value = _register_value(src, "register_store")
    if abs(value) > 1 << 24:  # memset's value is FP32: exact up to 2^24
        raise NkiError(f"register_store: {value} is beyond 2^24, which the store keeps exactly")
    memset(dst, value)


def _register(value, what: str):
    if not isinstance(value, _trace.VirtualRegister):
        raise NkiError(f"{what}: expects a register (nki.isa.register_alloc), got {value!r}")
    return value


def _register_value(value, what: str) -> int:
    if isinstance(value, (_trace.VirtualRegister, int)) and not isinstance(value, bool):
        return int(value)
    raise NkiError(f"{what}: expects a register or an integer, got {value!r}")

"""nki.language on the simulator: tensor creation in SBUF, PSUM and HBM, views, loops,
dtypes and the operator names that nki.isa instructions take.

Written from NKI's public API reference; see docs/nki.md for what is supported.
"""

from __future__ import annotations

import contextlib
import math

from ..dtypes import DTYPES
from . import _trace, isa
from ._trace import HBM, PSUM, SBUF, NkiError, ds  # noqa: F401 (public names)
from ._trace import Tensor as NkiTensor

# -- memory -------------------------------------------------------------------------------
sbuf = SBUF
psum = PSUM
hbm = HBM
shared_hbm = "shared_hbm"  # one tensor for every program of a launch grid
private_hbm = "private_hbm"  # a tensor per program
_HBM_BUFFERS = {HBM: False, shared_hbm: True, private_hbm: False}  # name -> shared

# -- dtypes -------------------------------------------------------------------------------
float32 = "float32"
bfloat16 = "bfloat16"
float16 = "float16"
tfloat32 = "tfloat32"
float8_e4m3 = "float8_e4m3"
float8_e5m2 = "float8_e5m2"
int8 = "int8"
uint8 = "uint8"
int16 = "int16"
uint16 = "uint16"
int32 = "int32"
uint32 = "uint32"
bool_ = "bool"


class _TileSize:
    """The hardware's tile limits: those NeuronCore-v2 to v4 share, and the buffer sizes
    of the kernel's target (outside a kernel, of the default target)."""

    pmax = 128  # partitions
    psum_fmax = psum_bank_fmax = 512  # fp32 elements per partition of one PSUM bank
    psum_bank_fmax_bytes = 2048
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512  # the free elements one bn_stats takes (docs/isa.md)
    sbuf_min_align = 64  # where automatic SBUF allocations start (docs/nki.md)

    @staticmethod
    def _target() -> dict:
        trace = getattr(_trace._current, "trace", None)
        if trace is not None:
            return trace.target
        from .. import _C

        return _C.nki.target(_trace.target_name(None))

    @property
    def psum_num_banks(self) -> int:
        t = self._target()
        return t["psum_partition_bytes"] // t["psum_bank_bytes"]

    @property
    def sbuf_fmax_bytes(self) -> int:
        return self._target()["sbuf_partition_bytes"]

    total_available_sbuf_size = sbuf_fmax_bytes

    @property
    def sbuf_fmax(self) -> int:
        return self.sbuf_fmax_bytes // 4

    @property
    def sbuf_size_bytes(self) -> int:
        t = self._target()
        return t["partitions"] * t["sbuf_partition_bytes"]


tile_size = _TileSize()


# -- operators: the names nki.isa instructions take ---------------------------------------
class _Op(str):
    """An operator: an ALU op (add, maximum, ...) or an activation function (exp, ...). As
    an argument of an nki.isa instruction it names the operation; called, it computes a new
    tile (nl.add(a, b), nl.exp(x)) with one instruction."""

    kind: str

    def __new__(cls, name: str, kind: str):
        op = super().__new__(cls, name)
        op.kind = kind
        return op

    def __call__(self, x, y=None, dtype=None, mask=None, **_kwargs):
        with _masked(mask):
            if self.kind == "act":
                return _activation(self, x, dtype)
            return _elementwise(self, x, y, dtype=dtype)


def _alu(name: str) -> _Op:
    return _Op(name, "alu")


def _act(name: str) -> _Op:
    return _Op(name, "act")


add, subtract, multiply, divide = _alu("add"), _alu("subtract"), _alu("multiply"), _alu("divide")
maximum, minimum, power = _alu("max"), _alu("min"), _alu("pow")
abs_max = _alu("abs_max")
equal, not_equal = _alu("is_equal"), _alu("not_equal")
greater, greater_equal = _alu("is_gt"), _alu("is_ge")
less, less_equal = _alu("is_lt"), _alu("is_le")
logical_and, logical_or, logical_xor = _alu("logical_and"), _alu("logical_or"), _alu("logical_xor")
bitwise_and, bitwise_or, bitwise_xor = _alu("bitwise_and"), _alu("bitwise_or"), _alu("bitwise_xor")
left_shift, right_shift = _alu("left_shift"), _alu("arith_shift_right")
logical_right_shift = _alu("logical_shift_right")

copy = _act("identity")  # as an operator; called, it is _copy below
exp, log, tanh, sigmoid, relu = (
    _act("exp"),
    _act("log"),
    _act("tanh"),
    _act("sigmoid"),
    _act("relu"),
)
gelu, gelu_apprx_tanh, silu = _act("gelu"), _act("gelu_tanh"), _act("silu")
softplus, sqrt, rsqrt = _act("softplus"), _act("sqrt"), _act("rsqrt")
reciprocal, square, sin, cos = _act("reciprocal"), _act("square"), _act("sin"), _act("cos")
erf, sign, arctan, mish = _act("erf"), _act("sign"), _act("arctan"), _act("mish")
negative = _act("negate")
abs = _act("abs")  # noqa: A001 (NKI's name)


# -- creation -----------------------------------------------------------------------------
def ndarray(shape, dtype, buffer: str = SBUF, name: str = "", address=None) -> NkiTensor:
    """A new tensor of `shape` in `buffer` (its first dim the partitions, on chip), at
    `address` = (first partition, byte offset in each partition) when given."""
    trace = _trace.current()
    dtype = _trace.dtype_name(dtype)
    shape = tuple(n if isinstance(n, _trace.ParDim) else int(n) for n in shape)
    if isinstance(buffer, str) and buffer in _HBM_BUFFERS:
        if address is not None:
            raise NkiError(f"ndarray {name or ''}: HBM tensors take no address")
        shape = tuple(int(n) for n in shape)
        return trace.output(name or "hbm", dtype, shape, _HBM_BUFFERS[buffer])
    if hasattr(buffer, "place"):  # nki.compiler's explicit allocation
        return buffer.place(trace, shape, dtype, name or "tensor")
    if buffer not in (SBUF, PSUM):
        raise NkiError(f"ndarray {name or ''}: buffer {buffer!r} is not sbuf, psum or hbm")
    return trace.allocate(buffer, shape, dtype, name or buffer, address)


def zeros(shape, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    return full(shape, 1.0, dtype, buffer, name)


def full(shape, fill_value: float, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    """A new tensor filled with fill_value: one memset, or one per tile of its blocks."""
    import itertools

    tensor = ndarray(shape, dtype, buffer, name)
    blocks = tensor.shape[: tensor._pdim] if tensor.on_chip else ()
    for block in itertools.product(*(range(n) for n in blocks)):
        isa.memset(tensor[block] if block else tensor, fill_value)
    return tensor


def zeros_like(t: NkiTensor, dtype=None, buffer: str | None = None, name: str = "") -> NkiTensor:
    return zeros(t.shape, dtype or t.dtype, buffer or t.buffer, name)


def empty_like(t: NkiTensor, dtype=None, buffer: str | None = None, name: str = "") -> NkiTensor:
    return ndarray(t.shape, dtype or t.dtype, buffer or t.buffer, name)


# -- tensor operations --------------------------------------------------------------------
def load(src: NkiTensor, dtype=None, name: str = "", mask=None) -> NkiTensor:
    """An SBUF copy of an HBM view (one DMA)."""
    tile = ndarray(src.shape, dtype or src.dtype, SBUF, name or f"{src.name}_tile").with_axes_of(
        src
    )
    with _masked(mask):
        isa.dma_copy(tile, src)
    return tile


def store(dst: NkiTensor, value, mask=None) -> None:
    """Writes an on-chip tile to an HBM view (one DMA); a number fills a tile of dst's shape
    first (a memset)."""
    with _masked(mask):
        if isinstance(value, (bool, int, float)):
            tile = ndarray(dst.shape, dst.dtype, SBUF, f"{dst.name}_fill")
            isa.memset(tile, value)
            value = tile
        if not isinstance(value, NkiTensor):
            raise NkiError(f"store: value {value!r} is neither a tile nor a number")
        isa.dma_copy(dst, value)


def load_transpose2d(src: NkiTensor, dtype=None, mask=None) -> NkiTensor:
    """An SBUF tile of the 2-D HBM view src transposed (the legacy API's): one DMA
    transpose for 2-byte dtypes, else one DMA whose source walks src's columns."""
    if src.ndim != 2 or src.buffer != HBM:
        raise NkiError(f"load_transpose2d: {src.name} {src.shape} is not a 2-D HBM view")
    tile = ndarray((src.shape[1], src.shape[0]), dtype or src.dtype, SBUF, f"{src.name}_t")
    with _masked(mask):
        if _trace.itemsize(src.dtype) == 2 and tile.dtype == src.dtype:
            isa.dma_transpose(tile, src)
        else:
            isa.dma_copy(tile, src.transposed())
    return tile


class no_reorder:  # noqa: N801 (NKI's name)
    """Keeps the instructions traced inside in program order: the scheduler
    (nki/_schedule.py) moves none of them and moves nothing past them. A context manager,
    or a loop directive (`nl.sequential_range(n, directives=nl.no_reorder())`)."""

    def __enter__(self):
        _trace.current().in_order += 1
        return self

    def __exit__(self, *_exc) -> None:
        _trace.current().in_order -= 1


# -- loops: run as Python, unrolled --------------------------------------------------------
class _Range:
    def __init__(self, *args: int, directives=None):
        self._range = range(*(int(a) for a in args))
        listed = directives if isinstance(directives, (list, tuple)) else [directives]
        self._in_order = any(isinstance(d, no_reorder) for d in listed)

    def __iter__(self):
        _trace.current()  # loops run inside a kernel
        return self._ordered() if self._in_order else iter(self._range)

    def _ordered(self):
        """The body runs while this generator waits at its yield: in order, as no_reorder."""
        with no_reorder():
            yield from self._range

    def __len__(self) -> int:
        return len(self._range)


class _DynamicRange(_Range):
    """A loop whose bounds may be registers: unrolled with their run-time values, each
    index a register."""

    def __iter__(self):
        for i in super().__iter__():
            yield _trace.VirtualRegister(i)


def dynamic_range(*args) -> _DynamicRange:
    return _DynamicRange(*args)


def fori_loop(lower, upper, body_fun, step: int = 1) -> None:
    """body_fun(i) for i from lower up to upper (integers or registers) by step: a loop
    on the device, unrolled here with the bounds' run-time values."""
    if int(step) <= 0:
        raise NkiError(f"fori_loop: step {step} (positive steps only)")
    for i in _DynamicRange(lower, upper, step):
        body_fun(i)


# A while_loop that has not ended after this many iterations is reported, not run forever.
_WHILE_LIMIT = 1_000_000


def while_loop(init, body_fun):
    """Runs body_fun(cond) while the register cond is nonzero; body_fun returns the next
    condition register. Unrolled here with the registers' run-time values."""
    _trace.current()
    cond, iterations = init, 0
    while int(cond) != 0:
        if iterations == _WHILE_LIMIT:
            raise NkiError(f"while_loop: still running after {_WHILE_LIMIT} iterations")
        iterations += 1
        cond = body_fun(cond)
        if not isinstance(cond, _trace.VirtualRegister):
            raise NkiError(
                f"while_loop: the body returns the next condition register, not {cond!r}"
            )
    return cond


def affine_range(*args: int, directives=None) -> _Range:
    return _Range(*args, directives=directives)


def sequential_range(*args: int, directives=None) -> _Range:
    return _Range(*args, directives=directives)


def static_range(*args: int, directives=None) -> _Range:
    return _Range(*args, directives=directives)


def program_id(axis: int = 0) -> int:
    """This program's index along `axis` of the launch grid."""
    program = _trace.current().program
    return program[axis] if axis < len(program) else 0


def num_programs(axes=0) -> int:
    """The launch grid's program count along `axes` (an axis or a tuple of axes)."""
    grid = _trace.current().grid
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    return math.prod(grid[a] if a < len(grid) else 1 for a in axes)


def program_ndim() -> int:
    """How many dims the launch grid has."""
    return len(_trace.current().grid)


class nc(int):  # noqa: N801 (NKI's name)
    """NeuronCores a grid dim is spread over (nl.spmd_dim(n, nl.nc(2)))."""


def spmd_dim(size: int, *cores) -> int:
    """A grid dim of `size` programs on each of the NeuronCores `cores` (nl.nc(k)) name:
    size x k programs. Here every program runs on one core, one after another."""
    return int(size) * math.prod(int(c) for c in cores)


def static_cast(value, dtype):
    """A host array converted to dtype (outside kernels, as inputs are made): a NumPy
    array, or a CPU torch tensor for bfloat16 (NumPy has no bfloat16)."""
    import numpy as np

    name = _trace.dtype_name(dtype)
    if name == "bfloat16":
        import torch

        return torch.from_numpy(np.asarray(value, np.float32)).to(torch.bfloat16)
    host = DTYPES[name].numpy
    if host is None:
        raise NkiError(f"static_cast: {name} has no host array type here")
    return np.asarray(value).astype(host)


def shared_constant(value, dtype=None) -> NkiTensor:
    """An HBM tensor holding `value` (a NumPy array), known while the kernel is traced."""
    import numpy as np

    from ._host import _bits

    array = np.asarray(value)
    name = _trace.dtype_name(dtype or array.dtype)
    bits = _bits(array.astype(np.float32) if name == "bfloat16" else array, name)
    return _trace.current().constant("constant", name, tuple(array.shape), bits)


# -- tiles computed by one instruction (nl.add(a, b), a * 2, nl.exp(x), ...) -----------------
@contextlib.contextmanager
def _masked(mask):
    """The instructions traced inside cover only what `mask` (legacy mask=) keeps."""
    if mask is None:
        yield
        return
    if not isinstance(mask, _trace.Mask):
        raise NkiError(f"mask= takes comparisons of nl.arange indices joined by &, not {mask!r}")
    trace = _trace.current()
    outer = trace.mask
    trace.mask = mask if outer is None else outer & mask
    try:
        yield
    finally:
        trace.mask = outer


def _new_tile(like: NkiTensor, dtype=None, buffer: str = SBUF) -> NkiTensor:
    return ndarray(like.shape, dtype or like.dtype, buffer, name="tile").with_axes_of(like)


def _elementwise(op, x, y, dtype=None, reverse: bool = False) -> NkiTensor:
    """x <op> y of a tile and a tile or a number, into a new SBUF tile."""
    if not isinstance(x, NkiTensor):
        x, y, reverse = y, x, not reverse
    if isinstance(y, NkiTensor) and y.shape != x.shape:
        if _per_partition(y, x):  # x is [P, 1] beside y's [P, F]: y is the data
            x, y, reverse = y, x, not reverse
        if not _per_partition(y, x):
            x, y = _broadcast_pair(x, y)
    out = _new_tile(x, dtype)
    alu = _Op(str(op), "alu")
    if isinstance(y, NkiTensor) and y.shape == x.shape:
        a, b = (y, x) if reverse else (x, y)
        isa.tensor_tensor(dst=out, data1=a, data2=b, op=alu)
    else:  # a number, or a [P, 1] tile beside x's [P, F]
        isa.tensor_scalar(dst=out, data=x, op0=alu, operand0=y, reverse0=reverse)
    return out


def _per_partition(x: NkiTensor, y: NkiTensor) -> bool:
    """Whether y is one value per partition of x: [P, 1] (or [P, 1, 1]) beside [P, F...]."""
    return (
        y.ndim == x.ndim
        and y.shape[0] == x.shape[0]
        and math.prod(y.shape[1:]) == 1
        and math.prod(x.shape[1:]) > 1
    )


def _broadcast_pair(x: NkiTensor, y: NkiTensor) -> tuple[NkiTensor, NkiTensor]:
    """x and y broadcast to one shape, NumPy's way (size-1 dims repeated)."""
    if x.ndim != y.ndim:
        raise NkiError(f"{x.name} {x.shape} and {y.name} {y.shape}: ranks differ")
    shape = []
    for a, b in zip(x.shape, y.shape):
        if a != b and 1 not in (a, b):
            raise NkiError(f"{x.name} {x.shape} and {y.name} {y.shape} do not broadcast")
        shape.append(a if b == 1 else b)
    shape = tuple(shape)
    return (
        x if x.shape == shape else broadcast_to(x, shape),
        y if y.shape == shape else broadcast_to(y, shape),
    )


def _activation(op, x, dtype=None) -> NkiTensor:
    out = _new_tile(x, dtype)
    isa.activation(dst=out, op=op, data=x)
    return out


def _product(stationary: NkiTensor, moving: NkiTensor, mask=None, transpose=False, **options):
    """stationary.T @ moving into a new PSUM tile (one matmul; `options` are nc_matmul's).
    `psum += it` and `t[...] = it` then make that matmul write there instead (_accumulate,
    _assign). In double_row mode the operands are [K, 2, M] and [K, 2, N]."""
    paired = isa._double_row(options.get("perf_mode")) and stationary.ndim > 2
    rows = stationary.shape[-1 if paired else 1] if stationary.ndim > 1 else 1
    out = ndarray((rows, *moving.shape[2 if paired else 1 :]), float32, PSUM, name="matmul")
    with _masked(mask):
        isa.nc_matmul(out, stationary, moving, is_transpose=transpose, accumulate=False, **options)
    return out


def broadcast_to(x: NkiTensor = None, shape=None, dtype=None, *, src: NkiTensor = None):
    """x (the legacy API's `src`) repeated along its size-1 dims to `shape`. Repeated
    across partitions, it is a new SBUF tile (one DMA copies the partition to every
    partition); along free dims, a view (stride 0)."""
    x = x if x is not None else src
    if x is None or shape is None:
        raise NkiError("broadcast_to: takes the tile (x, or src=) and shape=")
    view = x.broadcast_to(shape)
    if view.on_chip and not view._pstep:
        view = _trace.current().broadcast_tile(view)
    if dtype is not None and _trace.dtype_name(dtype) != view.dtype:
        return _copy(view, dtype)
    return view


def _assign(target: NkiTensor, value, temporary: bool = False) -> None:
    """target = value (the legacy `t[...] = ...`): a number fills it; a tile the previous
    instruction has just made (a product too), and nothing else refers to, is made there
    instead (its instruction writes target), else copied."""
    if not isinstance(value, NkiTensor):
        isa.memset(target, value)
        return
    if value.identity() == target.identity():  # t[i] += v: already written there
        return
    if _retarget(target, value, temporary):
        return
    if HBM in (target.buffer, value.buffer):
        isa.dma_copy(target, value)
    else:
        isa.tensor_copy(target, value)


def _retarget(target: NkiTensor, value: NkiTensor, temporary: bool) -> bool:
    """Makes the last instruction write target instead of value, when value is a whole
    tile that instruction alone has touched (its dst) and the kernel keeps no reference to
    it. A mask's cut of value becomes the same cut of target."""
    trace = _trace.current()
    st = value._storage
    if st.explicit or st.buffer == HBM or st.uses != 1 or not trace.instructions:
        return False
    last = trace.instructions[-1]
    dst = last.fields.get("dst")
    if not isinstance(dst, NkiTensor) or dst._storage is not st or not value.is_whole():
        return False
    if target.buffer != value.buffer:  # TensorE writes PSUM only, say: copy instead
        return False
    if not temporary:
        return False
    if dst.is_whole():
        if math.prod(target.shape) != math.prod(value.shape) or target.shape[0] != value.shape[0]:
            return False
        new_dst = target
    else:
        if target.shape != value.shape:
            return False
        new_dst = target.masked(_cut_of(value, dst))
    new_dst.check_within()
    _redirect(trace, last, new_dst)
    return True


def _redirect(trace, instruction, dst: NkiTensor) -> None:
    """Makes `instruction` (the last traced) write dst instead of its own fresh tile."""
    instruction.fields["dst"]._storage.uses -= 1
    dst._storage.uses += 1
    dst._storage.written = True
    instruction.fields["dst"] = dst
    trace.last_writer[dst.identity()] = instruction.opcode


def _accumulate_product(dst: NkiTensor, value: NkiTensor, temporary: bool) -> bool:
    """Makes the matmul that has just written value (a whole fresh PSUM tile of dst's
    shape, referred to by nothing else) accumulate into dst instead."""
    trace = _trace.current()
    st = value._storage
    if not (temporary and trace.instructions and dst.buffer == PSUM == value.buffer):
        return False
    last = trace.instructions[-1]
    if last.opcode != "matmul" or last.fields.get("dst") is not value or st.uses != 1:
        return False
    if not value.is_whole() or value.shape != dst.shape:
        return False
    # Into a tile nothing has written yet, the product starts the accumulation (NKI's
    # `psum[...] += matmul` over a loop into an uninitialised tile); else it adds.
    if dst._storage.written:
        last.fields["accumulate"] = True
    _redirect(trace, last, dst)
    return True


def _cut_of(whole: NkiTensor, part: NkiTensor) -> list:
    """The rectangle [lo, hi) per dim that `part` (a masked cut) is of the row-major
    `whole`."""
    limits = [(part._partition, part._partition + part.shape[0])]
    offset = part._start
    for (stride, _), (_, n) in zip(whole._dims[1:], part._dims[1:]):
        lo = offset // stride
        offset -= lo * stride
        limits.append((lo, lo + n))
    return limits


def _accumulate(dst: NkiTensor, value, temporary: bool = False) -> NkiTensor:
    """dst += value. A product (a PSUM tile a matmul has just made that nothing else
    refers to: `psum += nisa.nc_matmul(a, b)`, `psum += nl.matmul(a, b)`) accumulates
    into dst on TensorE; anything else is added by VectorE."""
    if isinstance(value, NkiTensor) and _accumulate_product(dst, value, temporary):
        return dst
    if isinstance(value, NkiTensor):
        isa.tensor_tensor(dst=dst, data1=dst, data2=value, op=add)
    else:
        isa.tensor_scalar(dst=dst, data=dst, op0=add, operand0=value)
    return dst


# -- the legacy API's indices and tile operations -------------------------------------------
def arange(*args: int) -> _trace.Index:
    """An index along one axis (`nl.arange(128)[:, None]`)."""
    r = range(*(int(a) for a in args))
    return _trace.Index(r.start, r.step, len(r))


class _MGrid:
    def __getitem__(self, slices) -> tuple:
        slices = slices if isinstance(slices, tuple) else (slices,)
        return _Grid(
            _trace.Index(r.start, r.step, len(r), pos=k)
            for k, r in enumerate(range(s.start or 0, s.stop, s.step or 1) for s in slices)
        )


class _Grid(tuple):
    @property
    def p(self) -> _trace.Index:
        return self[0]

    @property
    def x(self) -> _trace.Index:
        return self[1]


mgrid = _MGrid()


def par_dim(n: int) -> int:
    """Marks the partition dim of an on-chip shape: the dims before it are blocks of tiles
    (`t[b]` is one tile). Unmarked, the first dim is the partition dim."""
    return _trace.ParDim(int(n))


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False, mask=None) -> NkiTensor:
    """x @ y (x.T @ y with transpose_x) into a new PSUM tile. TensorE reads SBUF: an
    operand in PSUM is copied there first, as x transposed is."""
    with _masked(mask):
        if not transpose_x:
            x = copy(transpose(x), dtype=x.dtype)
        x, y = (copy(t) if t.buffer == PSUM else t for t in (x, y))
        return _product(x, y)


def transpose(x: NkiTensor, dtype=None, mask=None) -> NkiTensor:
    """x with its partition and free dims swapped, into a new PSUM tile (TensorE)."""
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, PSUM, name="transpose")
    with _masked(mask):
        isa.nc_transpose(out, x)
    return out


def _copy(x: NkiTensor, dtype=None, mask=None) -> NkiTensor:
    """x into a new SBUF tile, converted to dtype."""
    with _masked(mask):
        out = _new_tile(x, dtype)
        isa.tensor_copy(out, x)
    return out


def _reduced(op, x: NkiTensor, axis, dtype=None, keepdims=False, negate=False) -> NkiTensor:
    """op over the free axes `axis` of x into a new SBUF tile (one VectorE reduction)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if keepdims:
        shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
    else:
        shape = [n for d, n in enumerate(x.shape) if d not in axes]
    out = ndarray(
        tuple(shape) if len(shape) > 1 else (shape[0], 1), dtype or x.dtype, SBUF, name=str(op)
    )
    isa.tensor_reduce(out, _Op(str(op), "alu"), x, axis=axes, negate=negate, keepdims=keepdims)
    return out


class _ReduceOp(_Op):
    """nl.sum, nl.max, nl.min: called, a reduction over free axes into a new tile; as an
    instruction's op= (`nisa.tensor_reduce(op=nl.max, ...)`), the ALU operator."""

    def __call__(self, x, axis, dtype=None, keepdims: bool = False, mask=None, **_kwargs):
        with _masked(mask):
            return _reduced(str(self), x, axis, dtype, keepdims)


sum = _ReduceOp("add", "alu")  # noqa: A001 (NKI's name)
max = _ReduceOp("max", "alu")  # noqa: A001 (NKI's name)
min = _ReduceOp("min", "alu")  # noqa: A001 (NKI's name)


class _CopyOp(_Op):
    def __call__(self, x, dtype=None, mask=None, **_kwargs):
        return _copy(x, dtype, mask)


copy = _CopyOp("identity", "act")  # noqa: F811 (the operator, callable as nl.copy(x))


# Tensor's operators (t + u, t[...] = v, psum += product) are these functions.
_trace.TILE_OPERATIONS.update(assign=_assign, elementwise=_elementwise, accumulate=_accumulate)

# The composite functions (softmax, rms_norm, mean, var, where, ...) are _composite.py's,
# built on this module: it adds those not defined here to it when the package is imported.

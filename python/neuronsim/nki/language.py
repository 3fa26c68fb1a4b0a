"""nki.language on the simulator: tensor creation in SBUF, PSUM and HBM, views, loops,
dtypes and the operator names that nki.isa instructions take.

Written from NKI's public API reference; see docs/nki.md for what is supported.
"""

from __future__ import annotations

from typing import Any

from . import _trace
from ._trace import HBM, PSUM, SBUF, NkiError, ds  # noqa: F401 (public names)
from ._trace import Tensor as NkiTensor

# -- memory -------------------------------------------------------------------------------
sbuf = SBUF
psum = PSUM
hbm = HBM
shared_hbm = HBM
private_hbm = HBM

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


class tile_size:  # noqa: N801 (NKI's name)
    """The hardware's tile limits (NeuronCore-v2 to v4 share them)."""

    pmax = 128  # partitions
    psum_fmax = 512  # fp32 elements per partition of one PSUM bank
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512


# -- operators: the names nki.isa instructions take ---------------------------------------
class _Op(str):
    """An operator: an ALU op (add, maximum, ...) or an activation function (exp, ...)."""

    kind: str

    def __new__(cls, name: str, kind: str):
        op = super().__new__(cls, name)
        op.kind = kind
        return op


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

copy = _act("identity")
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
def ndarray(shape, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    """A new tensor of `shape` in `buffer` (its first dim the partitions, on chip)."""
    trace = _trace.current()
    dtype = _trace.dtype_name(dtype)
    shape = tuple(int(n) for n in shape)
    if buffer == HBM:
        tensor = trace.declare_hbm(name or "hbm", dtype, shape, "output")
        trace.outputs.append(tensor)
        return tensor
    if buffer not in (SBUF, PSUM):
        raise NkiError(f"ndarray {name or ''}: buffer {buffer!r} is not sbuf, psum or hbm")
    return trace.allocate(buffer, shape, dtype, name or buffer)


def zeros(shape, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    return full(shape, 1.0, dtype, buffer, name)


def full(shape, fill_value: float, dtype, buffer: str = SBUF, name: str = "") -> NkiTensor:
    tensor = ndarray(shape, dtype, buffer, name)
    from . import isa

    isa.memset(tensor, fill_value)
    return tensor


def zeros_like(t: NkiTensor, dtype=None, buffer: str | None = None, name: str = "") -> NkiTensor:
    return zeros(t.shape, dtype or t.dtype, buffer or t.buffer, name)


def empty_like(t: NkiTensor, dtype=None, buffer: str | None = None, name: str = "") -> NkiTensor:
    return ndarray(t.shape, dtype or t.dtype, buffer or t.buffer, name)


# -- tensor operations --------------------------------------------------------------------
def load(src: NkiTensor, dtype=None, name: str = "") -> NkiTensor:
    """An SBUF copy of an HBM view (one DMA)."""
    from . import isa

    tile = ndarray(src.shape, dtype or src.dtype, SBUF, name or f"{src.name}_tile")
    isa.dma_copy(tile, src)
    return tile


def store(dst: NkiTensor, value: NkiTensor) -> None:
    """Writes an on-chip tile to an HBM view (one DMA)."""
    from . import isa

    isa.dma_copy(dst, value)


# -- loops: run as Python, unrolled --------------------------------------------------------
class _Range:
    def __init__(self, *args: int):
        self._range = range(*(int(a) for a in args))

    def __iter__(self):
        trace = _trace.current()
        loop = [_trace._caller_site(), 0, 0]
        trace.loops.append(loop)
        try:
            for i in self._range:
                trace.iterations += 1
                loop[1], loop[2] = i, trace.iterations
                yield i
        finally:
            trace.loops.remove(loop)

    def __len__(self) -> int:
        return len(self._range)


def affine_range(*args: int) -> _Range:
    return _Range(*args)


def sequential_range(*args: int) -> _Range:
    return _Range(*args)


def static_range(*args: int) -> _Range:
    return _Range(*args)


def program_id(axis: int = 0) -> int:
    return 0


def num_programs(axis: int = 0) -> int:
    return 1


def _describe(value: Any) -> str:
    return repr(value)

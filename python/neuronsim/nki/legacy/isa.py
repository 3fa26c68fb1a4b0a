"""The legacy (beta 1, ``neuronxcc.nki.isa``) form of the instructions: no destination
argument, each returns a new tile. ``nc_matmul`` returns a pending product, which
``psum_tile += nisa.nc_matmul(a, b)`` accumulates into a PSUM tile."""

from __future__ import annotations

from .. import isa as _isa
from .. import language as _nl
from .._trace import NkiError, Tensor

engine = _isa.engine


_masked = _nl._masked


def nc_matmul(
    stationary: Tensor,
    moving: Tensor,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    mask=None,
    **unsupported,
):
    if is_transpose or unsupported:
        raise NkiError(
            f"nki.isa.nc_matmul: {', '.join(unsupported) or 'is_transpose'} not supported yet"
        )
    return _nl._PendingMatmul(stationary, moving, mask)


def nc_transpose(data: Tensor, mask=None, dtype=None, engine=None):
    with _masked(mask):
        return _nl.transpose(data, dtype=dtype)


def tensor_tensor(data1: Tensor, data2: Tensor, op, dtype=None, mask=None, engine=None):
    with _masked(mask):
        out = _nl._new_tile(data1, dtype)
        _isa.tensor_tensor(dst=out, data1=data1, data2=data2, op=op, engine=engine)
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
        _isa.tensor_scalar(out, data, op0, operand0, reverse0, op1, operand1, reverse1, engine)
        return out


def activation(op, data: Tensor, bias=None, scale=1.0, dtype=None, mask=None):
    with _masked(mask):
        out = _nl._new_tile(data, dtype)
        _isa.activation(dst=out, op=op, data=data, bias=bias, scale=scale)
        return out


def tensor_copy(src: Tensor, dtype=None, mask=None, engine=None):
    with _masked(mask):
        value = src.materialize() if isinstance(src, _nl._PendingMatmul) else src
        out = _nl._new_tile(value, dtype)
        _isa.tensor_copy(out, value, engine=engine)
        return out


def tensor_reduce(op, data: Tensor, axis, dtype=None, negate=False, keepdims=False, mask=None):
    with _masked(mask):
        return _nl._reduced(op, data, axis, dtype, keepdims, negate)


def memset(shape, value, dtype, mask=None, engine=None):
    with _masked(mask):
        return _nl.full(shape, value, dtype)

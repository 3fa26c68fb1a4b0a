"""Host values of kernel tensors: NumPy arrays and CPU torch tensors to and from the
bytes of an NKI dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DTYPES
from ._trace import NkiError, dtype_name
from .typing import TensorSpec


def _bits(array: np.ndarray, dtype: str) -> bytes:
    """The little-endian bytes of the host values in the kernel tensor's dtype."""
    if dtype == "bfloat16":  # torch's conversion: to nearest even, NaN kept a NaN
        import torch

        values = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
        return values.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    host = DTYPES[dtype].numpy
    if host is None:
        raise NkiError(f"inputs of dtype {dtype} are not supported yet")
    return np.ascontiguousarray(array, dtype=host).tobytes()


def _values(data: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data, dtype=DTYPES[dtype].numpy).reshape(shape).copy()


def _as_array(value: Any) -> tuple[np.ndarray, str]:
    """A host array and its NKI dtype from a NumPy array or a CPU torch tensor."""
    if type(value).__module__.startswith("torch"):
        name = dtype_name(value.dtype)
        host = value.detach().to("cpu")
        host = host.float() if name == "bfloat16" else host
        return host.numpy(), name
    if isinstance(value, TensorSpec):
        return value.values(), dtype_name(value.dtype)
    array = np.asarray(value)
    return array, dtype_name(array.dtype)

"""nki.typing: tensor and scalar types, for annotations and as the arguments of a
benchmark run that needs only shapes (``kernel(tensor[[250, 512], nl.float32])``)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._trace import NkiError, dtype_name


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor known by its shape and dtype. Passed to a kernel, it is an input whose
    values are made from a fixed seed (the same every run)."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def values(self) -> np.ndarray:
        name = dtype_name(self.dtype)
        rng = np.random.default_rng(math.prod(self.shape))
        if name in ("float32", "bfloat16", "float16", "tfloat32"):
            return rng.standard_normal(self.shape).astype(np.float32)
        if name == "bool":
            return rng.integers(0, 2, self.shape).astype(np.bool_)
        return np.zeros(self.shape, dtype=np.int32)


class _TensorType:
    """``tensor[shape, dtype]`` or ``tensor[d0, d1, ...]``: a TensorSpec."""

    def __getitem__(self, key) -> TensorSpec:
        key = key if isinstance(key, tuple) else (key,)
        if key and isinstance(key[0], (list, tuple)):
            shape, rest = key[0], key[1:]
        else:
            ints = [k for k in key if isinstance(k, int)]
            shape, rest = ints, key[len(ints) :]
        if len(rest) > 1:
            raise NkiError(f"nki.typing.tensor[{key!r}]: a shape and at most one dtype")
        dtype = dtype_name(rest[0]) if rest else "float32"
        return TensorSpec(tuple(int(n) for n in shape), dtype)


class _ScalarType:
    """``scalar[dtype]``: a number argument of that dtype (annotations only)."""

    def __getitem__(self, dtype) -> str:
        return dtype_name(dtype)


tensor = _TensorType()
scalar = _ScalarType()

__all__ = ["tensor", "scalar", "TensorSpec"]

"""The dtypes the engines hold, in one table: each one's name (NKI's and NumPy's spelling),
the ISA's short name, its bytes, how the host carries its values (a NumPy dtype, or None for
raw bits: bfloat16 and the FP8s have no NumPy type), and torch's dtype where torch has one.
The NKI package and the compiler read it; neither keeps a table of its own."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class DType:
    name: str  # float32, bfloat16, ...: the assembly takes it as is
    isa: str  # fp32, bf16, ...: the ISA's short name, which compiled plans use
    bytes: int
    numpy: type | None  # the host's array type; None: its values travel as bits
    torch: str | None  # the attribute of torch, e.g. "bfloat16"; None: torch has none

    def torch_dtype(self):
        import torch

        if self.torch is None:
            raise TypeError(f"{self.name} has no torch dtype")
        return getattr(torch, self.torch)


DTYPES = {
    d.name: d
    for d in (
        DType("float32", "fp32", 4, np.float32, "float32"),
        DType("bfloat16", "bf16", 2, None, "bfloat16"),
        DType("float16", "fp16", 2, np.float16, "float16"),
        DType("tfloat32", "tf32", 4, np.float32, None),
        DType("float8_e4m3", "fp8_e4m3", 1, None, None),
        DType("float8_e5m2", "fp8_e5m2", 1, None, None),
        DType("int8", "int8", 1, np.int8, "int8"),
        DType("uint8", "uint8", 1, np.uint8, "uint8"),
        DType("int16", "int16", 2, np.int16, "int16"),
        DType("uint16", "uint16", 2, np.uint16, "uint16"),
        DType("int32", "int32", 4, np.int32, "int32"),
        DType("uint32", "uint32", 4, np.uint32, "uint32"),
        DType("bool", "bool", 1, np.bool_, "bool"),
    )
}

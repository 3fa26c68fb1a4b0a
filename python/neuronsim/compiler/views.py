"""The aten ops that only view their input: a new shape, order or window of the same values,
no value computed. The bounds of indices (indices.py) pass through them, and the lowering
(ops.py, lowering.py) places them without a kernel."""

from __future__ import annotations

import torch

aten = torch.ops.aten

VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.expand.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.slice.Tensor,
    aten.select.int,
    aten.alias.default,
    aten.detach.default,
    aten.as_strided.default,
}

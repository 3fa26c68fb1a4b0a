"""torch_neuronx, as neuronsim provides it: the module Trainium scripts import and that
Transformers and Accelerate look for (``importlib.util.find_spec("torch_neuronx")``)
to find a Trainium device. Importing it registers the simulated ``"neuron"`` device;
the API is neuronsim's (``import neuronsim``), plus the names TorchNeuron (AWS's native
PyTorch backend) exposes at the top level: ``torch.neuron``'s device, stream and memory
functions, its op tracking (``get_fallback_ops``, ``get_executed_ops``,
``clear_op_tracking``), ``nki_op``, ``torch_neuronx.utils`` and ``torch_neuronx.neuron``
(the device module itself, ``torch.neuron``, as TorchNeuron names it).

This is not AWS's torch-neuronx, and must never be installed beside it.
"""

import os
import sys

from neuronsim import *  # noqa: F403 (the compatibility name re-exports the API)
from neuronsim import _C as _C
from neuronsim import __version__, _autoload  # noqa: F401
from neuronsim.device import (  # noqa: F401 (TorchNeuron's aliases of torch.neuron)
    Event,
    Stream,
    current_device,
    current_stream,
    default_stream,
    device,
    device_count,
    empty_cache,
    get_device_properties,
    is_available,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_device,
    set_stream,
    stream,
    synchronize,
)
from neuronsim.nki import jit as nki_jit  # noqa: F401 (torch-neuronx's name of nki.jit)
from neuronsim.nki import nki_op, wrap_nki  # noqa: F401 (NKI kernels from PyTorch code)

from . import utils  # noqa: F401

# torch.neuron under TorchNeuron's name for it: the same module object, so that patching
# torch_neuronx.neuron.current_device patches torch.neuron's.
neuron = sys.modules["neuronsim.device"]
sys.modules[__name__ + ".neuron"] = neuron

# Fallback counts when op tracking was last cleared: get_fallback_ops names what grew since.
_fallbacks_at_clear: dict[str, int] = {}


# Op tracking watches every op of the process, which costs each a fifth more host time on a
# small CPU op, so it starts when a script first asks for it (clear_op_tracking, or a get_*
# call), or from the import with NEURONSIM_OP_TRACKING=1.
if os.environ.get("NEURONSIM_OP_TRACKING") == "1":
    _C.start_op_tracking()


def get_fallback_ops() -> list[str]:
    """The ops (aten names) that ran on the CPU since op tracking was last cleared, each
    once, as TorchNeuron lists them. neuronsim.fallback_counts() has how often."""
    _C.start_op_tracking()
    counts = _C.fallback_counts()
    # A count below its mark was reset since (neuronsim.reset_fallback_counts): all of it is new.
    return sorted(
        op
        for op, n in counts.items()
        if n > _fallbacks_at_clear.get(op, 0) or 0 < n < _fallbacks_at_clear.get(op, 0)
    )


def get_executed_ops() -> list[str]:
    """The ops dispatched to the device since op tracking was last cleared, each once, by
    their aten names with and without the overload (``aten::where``, ``aten::where.self``):
    every op the device did something for (a kernel, a copy, an allocation, a read by the
    host), composites and factories included, views and CPU fallbacks not; a compiled
    graph or an NKI kernel run outside any op, by its own name. Tracking starts at the first
    call of this, get_fallback_ops or clear_op_tracking (or with NEURONSIM_OP_TRACKING=1 at
    the import)."""
    _C.start_op_tracking()
    return list(_C.executed_ops())


def clear_op_tracking() -> None:
    """Starts both lists afresh (fallback_counts() keeps counting)."""
    global _fallbacks_at_clear
    _C.start_op_tracking()
    _fallbacks_at_clear = dict(_C.fallback_counts())
    _C.clear_executed_ops()

"""torch_neuronx.utils: what TorchNeuron's scripts ask of the platform, for the simulated
instance (NEURONSIM_INSTANCE) and its logical core size."""

from __future__ import annotations

import os

from neuronsim import _C


def get_platform_target() -> str:
    """The compiler target of the simulated instance: trn1 (Trn1 and Inf2), trn2 or trn3.
    Read from the environment: asking does not start the device."""
    return _C.environment_generation()


def get_lnc_setting() -> str:
    """The logical NeuronCore size the devices have: NEURON_LOGICAL_NC_CONFIG (or
    NEURON_RT_VIRTUAL_CORE_SIZE) when set, else "1". (TorchNeuron's default on trn2 and
    trn3 is "2"; neuronsim's devices are one physical core each unless asked.)"""
    for name in ("NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VIRTUAL_CORE_SIZE"):
        if os.environ.get(name):
            return os.environ[name]
    return "1"


get_logical_neuron_cores = get_lnc_setting


def is_sync_mode_enabled() -> bool:
    """Whether the host waits for each op before dispatching the next (NEURON_LAUNCH_BLOCKING
    set to 1, TorchNeuron's switch). Off, the simulated host queues ops and runs ahead of the
    device (docs/cost-model.md section 6.1)."""
    return os.environ.get("NEURON_LAUNCH_BLOCKING", "0").strip().lower() in (
        "1",
        "true",
        "yes",
        "on",
    )


def use_mlir_aten_ops() -> bool:
    """Whether TORCH_NEURONX_MLIR_ATEN_OPS asks for TorchNeuron's torch-mlir lowering of aten
    ops (set to 1). neuronsim's kernels are its own either way: this reports the setting."""
    return os.environ.get("TORCH_NEURONX_MLIR_ATEN_OPS", "0") == "1"

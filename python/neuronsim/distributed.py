"""The ``torch.distributed`` backend ``"neuron"``.

``dist.init_process_group(backend="neuron")`` under torchrun gives each process one rank
whose collectives cross the simulated NeuronLink fabric (the C++ ProcessGroupNeuron,
``python/csrc/distributed/process_group.h``): data moves between the processes for real, and each
rank's simulated device clock advances by the collective's simulated duration. The
backend serves ``neuron`` tensors and CPU tensors (object collectives), every group
torch makes (``new_group``, a ``DeviceMesh``'s dimensions), DTensor and FSDP2.

Each rank binds its NeuronCore in either of the two ways launchers give ranks their cores:
with every core visible, ``LOCAL_RANK`` picks the device (the Neuron runtime's way); with
one visible core per process (``NEURON_RT_VISIBLE_CORES=<core>``, TorchNeuron's way), that
core is the process's device 0 whatever its local rank. Settings:
``NEURONSIM_COMM_HOST`` (the address this host's ranks listen on, default 127.0.0.1),
``NEURONSIM_JOB_TOKEN`` (the job's secret; torchrun's run id when it has one, else one
the ranks share through the rendezvous store).
"""

from __future__ import annotations

import os

import torch

from . import _C

NAME = "neuron"


def _bind_local_rank() -> None:
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None or not local_rank.isdigit():
        return
    index = int(local_rank)
    if torch.neuron.device_count() == 1:  # one visible core per process: that one is ours
        index = 0
    if index >= torch.neuron.device_count():
        raise RuntimeError(
            f"neuron: LOCAL_RANK={index} but this process sees "
            f"{torch.neuron.device_count()} NeuronCores (NEURONSIM_INSTANCE, "
            "NEURON_RT_VISIBLE_CORES): start fewer ranks per node or choose a larger instance"
        )
    torch.neuron.set_device(index)


def _create_backend(options, _backend_options=None):
    """torch.distributed's creator of the backend for one process group."""
    _C._define_process_group_class(_C)
    _bind_local_rank()
    return _C.ProcessGroupNeuron(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout.total_seconds(),
        str(options.group_id),
        [int(r) for r in options.global_ranks_in_group],
    )


def register() -> None:
    """Registers the backend with torch.distributed (once; a no-op without it)."""
    import torch.distributed as dist

    if not dist.is_available() or NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(
        NAME, _create_backend, extended_api=True, devices=["neuron", "cpu"]
    )


def group_stats(group=None) -> dict[str, int]:
    """What the group's neuron backend has done on this rank: ``collectives`` run,
    ``bytes`` this rank contributed and ``simulated_ps`` its core spent in them."""
    import torch.distributed as dist

    pg = group if group is not None else dist.group.WORLD
    backend = pg._get_backend(torch.device("neuron"))
    return backend.stats()


def all_groups_stats() -> dict[str, int]:
    """group_stats() summed over every process group of this rank that runs on the neuron
    backend (a mesh's dimension groups and the default group together)."""
    import torch.distributed as dist

    total = {"collectives": 0, "bytes": 0, "simulated_ps": 0}
    if not dist.is_initialized():
        return total
    for pg in list(dist.distributed_c10d._world.pg_map):
        try:
            backend = pg._get_backend(torch.device("neuron"))
        except RuntimeError:  # a group of another backend
            continue
        if hasattr(backend, "stats"):
            for key, value in backend.stats().items():
                total[key] += value
    return total

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


# Where each rank of the job meets the ranks of a later group: a rendezvous store every
# process hosts, their addresses shared when the default group is made, while every rank is
# surely there. A group's ranks then meet at its first rank's store, not at the job's store,
# which the job's first process hosts under mp.spawn and takes with it when it leaves: a
# group of later ranks must not need that process after it has left.
_own_store = None  # this process's rendezvous store (a TCPStore server)
_rendezvous: dict[int, str] = {}  # the default group's rank -> "host:port" of its store


def _share_rendezvous_stores(options) -> None:
    import torch.distributed as dist

    global _own_store
    host = os.environ.get("NEURONSIM_COMM_HOST", "127.0.0.1")
    _own_store = dist.TCPStore(
        host, 0, is_master=True, wait_for_workers=False, timeout=options.timeout
    )
    options.store.set(f"neuronsim/rendezvous/{options.group_rank}", f"{host}:{_own_store.port}")
    _rendezvous.clear()
    for rank in range(options.group_size):
        _rendezvous[rank] = options.store.get(f"neuronsim/rendezvous/{rank}").decode()


def _group_store(options):
    """The store a group's ranks meet at: the job's for the default group, else a prefix of
    the store its first rank hosts."""
    import torch.distributed as dist

    if os.environ.get("NEURONSIM_SYMMETRIC_RANKS") == "1":
        return options.store  # no peers run
    if not dist.is_initialized():  # the default group, being made
        _share_rendezvous_stores(options)
        return options.store
    first = int(options.global_ranks_in_group[0])
    if first not in _rendezvous:  # a default group of another backend: no stores shared
        return options.store
    if options.group_rank == 0:
        store = _own_store
    else:
        host, port = _rendezvous[first].rsplit(":", 1)
        store = dist.TCPStore(host, int(port), is_master=False, timeout=options.timeout)
    return dist.PrefixStore(f"neuronsim/group/{options.group_id}/", store)


def _create_backend(options, _backend_options=None):
    """torch.distributed's creator of the backend for one process group."""
    _C._define_process_group_class(_C)
    _bind_local_rank()
    return _C.ProcessGroupNeuron(
        _group_store(options),
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

"""One rank of a 2-rank job, its cores given one way or the other (argv[1]): "all" (every
core visible, LOCAL_RANK picks) or "one" (each process sees one core, set here before the
device starts, as TorchNeuron's init_process_group does). Prints what it saw as JSON."""

import json
import os
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
if mode == "one":
    os.environ["NEURON_RT_VISIBLE_CORES"] = os.environ["LOCAL_RANK"]
    assert torch.neuron.device_count() == 1  # read afresh: the device has not started
dist.init_process_group("neuron")
rank = dist.get_rank()
x = torch.full((4,), float(rank + 1), device="neuron")
dist.all_reduce(x)
seen = {
    "rank": rank,
    "count": torch.neuron.device_count(),
    "device": torch.neuron.current_device(),
    "core": torch.neuron.get_device_properties().physical_core,
    "sum": x.cpu().tolist(),
}
out = [None] * dist.get_world_size()
dist.all_gather_object(out, seen)
if rank == 0:
    print(json.dumps({"ranks": out}))
dist.destroy_process_group()

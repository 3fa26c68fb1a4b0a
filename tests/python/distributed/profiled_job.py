"""One rank of a profiled job: three collectives (two on the world group, one on a
subgroup) between kernels, recorded by neuronsim.profile into <dir>/trace.rank{rank}.json."""

import sys

import torch
import torch.distributed as dist

import neuronsim

dist.init_process_group("neuron")
pair = dist.new_group([0, 1])
x = torch.ones(256, device="neuron") * (dist.get_rank() + 1)
with neuronsim.profile(f"{sys.argv[1]}/trace.rank{{rank}}.json"):
    y = x * 2
    dist.all_reduce(y)
    z = y + 1
    dist.all_reduce(z, group=pair)
    dist.broadcast(z, src=0)
    torch.neuron.synchronize()
dist.destroy_process_group()

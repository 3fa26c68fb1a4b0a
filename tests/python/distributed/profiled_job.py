"""One rank of a profiled job: three collectives (two on the world group, one on a
subgroup) between kernels, recorded by neuronsim.profile into <dir>/trace.rank{rank}.json
and by torch.profiler into <dir>/torch.rank<r>.json."""

import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

import neuronsim

dist.init_process_group("neuron")
pair = dist.new_group([0, 1])
x = torch.ones(256, device="neuron") * (dist.get_rank() + 1)
activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
with (
    profile(activities=activities) as prof,
    neuronsim.profile(f"{sys.argv[1]}/trace.rank{{rank}}.json"),
):
    y = x * 2
    dist.all_reduce(y)
    z = y + 1
    dist.all_reduce(z, group=pair)
    dist.broadcast(z, src=0)
    torch.neuron.synchronize()
prof.export_chrome_trace(f"{sys.argv[1]}/torch.rank{dist.get_rank()}.json")
dist.destroy_process_group()

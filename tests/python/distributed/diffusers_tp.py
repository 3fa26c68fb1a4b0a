"""A Diffusers pipeline with its transformer sharded by Diffusers' own tensor parallelism
(TensorParallelConfig over a DeviceMesh of every rank) on the neuron backend, the way the
TorchNeuron launch note's third example runs one (its text is cut off in the source).
Usage under torchrun: diffusers_tp.py PIPELINE_ID OUT.pt (rank 0 saves the image tensor, the
number of the transformer's parameters that are sharded DTensors, and its collectives).
With WORLD_SIZE unset it runs the same pipeline in one process on the CPU (the reference)."""

from __future__ import annotations

import os
import sys

import torch
from diffusers import DiffusionPipeline, TensorParallelConfig

pipeline_id, out = sys.argv[1], sys.argv[2]
distributed = "WORLD_SIZE" in os.environ

pipe = DiffusionPipeline.from_pretrained(pipeline_id, torch_dtype=torch.float32)
if distributed:
    import torch.distributed as dist
    from torch.distributed import DeviceMesh

    import torch_neuronx  # noqa: F401

    dist.init_process_group(backend="neuron")
    dev = torch.neuron
    mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
    pipe.to(torch.device("neuron", dev.current_device()))
    pipe.transformer.enable_parallelism(config=TensorParallelConfig(mesh=mesh))

with torch.no_grad():
    image = pipe(
        "a chip on a board in the morning",
        height=32,
        width=32,
        num_inference_steps=2,
        guidance_scale=3.5,
        generator=torch.Generator("cpu").manual_seed(0),
        output_type="pt",
    ).images

result = {"image": image.to("cpu"), "sharded": 0, "collectives": 0}
if distributed:
    from torch.distributed.tensor import DTensor

    import neuronsim.distributed

    result["sharded"] = sum(isinstance(p, DTensor) for p in pipe.transformer.parameters())
    result["collectives"] = neuronsim.distributed.all_groups_stats()["collectives"]
if not distributed or dist.get_rank() == 0:
    torch.save(result, out)
if distributed:
    dist.destroy_process_group()

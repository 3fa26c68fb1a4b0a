"""DTensor, tensor parallelism (parallelize_module) and FSDP2 (fully_shard) on the "neuron"
backend, against the same computation in one process on the CPU. Models come from PyTorch's
own distributed test helpers (torch.testing._internal). Run under torchrun with 4 ranks
(a 2 × 2 mesh: "dp" × "tp"); rank 0 prints one JSON object {check: null or what was wrong}.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.testing._internal.distributed._tensor.common_dtensor import (
    MLPStacked,
    ModelArgs,
    Transformer,
)

import neuronsim  # noqa: F401
from checks import Checks

dist.init_process_group("neuron")
R = dist.get_world_size()
me = dist.get_rank()
dev = torch.device("neuron", torch.neuron.current_device())
mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
flat = init_device_mesh("neuron", (R,))
checks = Checks()
check = checks.run
ATOL = 1e-4


def close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    got = got.full_tensor() if isinstance(got, DTensor) else got
    torch.testing.assert_close(got.cpu(), want.cpu(), atol=ATOL, rtol=ATOL, msg=what)


def redistributions():
    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(0))
    d = distribute_tensor(x.to(dev), flat, [Shard(0)])
    assert d.to_local().shape == (2, 12), d.to_local().shape
    for target in ([Replicate()], [Shard(1)], [Shard(0)]):
        close(d.redistribute(flat, target), x, f"Shard(0) -> {target}")
    # Partial: each rank holds a share; the sum is the value.
    share = x * (me + 1) / 10
    p = DTensor.from_local(share.to(dev), flat, [Partial()])
    whole = x * sum(r + 1 for r in range(R)) / 10
    close(p.redistribute(flat, [Replicate()]), whole, "Partial -> Replicate")
    close(p.redistribute(flat, [Shard(0)]), whole, "Partial -> Shard(0)")
    # Two mesh dimensions at once.
    d2 = distribute_tensor(x.to(dev), mesh, [Shard(0), Shard(1)])
    assert d2.to_local().shape == (4, 6), d2.to_local().shape
    close(d2.redistribute(mesh, [Replicate(), Shard(0)]), x, "(Shard(0), Shard(1)) -> (R, S0)")


def dtensor_ops():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(8, 6, generator=g), torch.randn(6, 4, generator=g)
    da = distribute_tensor(a.to(dev), flat, [Shard(0)])
    db = distribute_tensor(b.to(dev), flat, [Replicate()])
    close(da @ db, a @ b, "Shard(0) @ Replicate")
    close((da * 2 + 1).sum(dim=0), (a * 2 + 1).sum(dim=0), "sum over the sharded dim")
    dc = distribute_tensor(a.t().contiguous().to(dev), flat, [Shard(1)])
    close(dc @ da, a.t() @ a, "Shard(1) @ Shard(0) (a partial sum)")


def transformer_args():
    return ModelArgs(n_layers=2, vocab_size=16, max_seq_len=8, dim=16, n_heads=4, dropout_p=0.0)


def tensor_parallel_transformer(model, sequence_parallel: bool):
    """The helpers' TP plan with the attention on local heads (the helper divides the
    heads), as Megatron-style TP runs it and as Transformers' plans do: DTensor has no
    sharding rule for the math form of scaled_dot_product_attention, which is what devices
    without fused attention run."""
    return Transformer.parallelize(
        model, mesh["tp"], use_seq_parallel=sequence_parallel, local_output_for_attn=True
    )


def tokens(batch: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 16, (batch, 8), generator=torch.Generator().manual_seed(seed))


def tensor_parallel(sequence_parallel: bool):
    def run():
        torch.manual_seed(0)
        reference = Transformer(transformer_args())
        model = copy.deepcopy(reference).to(dev)
        model = tensor_parallel_transformer(model, sequence_parallel)
        ids = tokens(2, seed=3)
        want = reference(ids)
        got = model(ids.to(dev))
        close(got, want, "logits")
        want.sum().backward()
        got.sum().backward() if not isinstance(got, DTensor) else got.full_tensor().sum().backward()
        for (name, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
            close(q.grad, p.grad, f"grad of {name}")

    return run


def sgd_steps(model, batches, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        for ids in batches:
            loss = model(ids).float().pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()


def fsdp_mlp():
    torch.manual_seed(0)
    reference = MLPStacked("cpu", n_layers=2)
    model = copy.deepcopy(reference).to(dev)
    for layer in model.layers:
        fully_shard(layer, mesh=flat)
    fully_shard(model, mesh=flat)
    assert isinstance(model.layers[0].net1.weight, DTensor)
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(2, 10, generator=g) for _ in range(R)]
    # FSDP averages the ranks' gradients: the reference sees the mean loss of all batches.
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        sum(reference(x).pow(2).mean() for x in inputs).div(R).backward()
        opt_ref.step()
        opt_ref.zero_grad()
        model(inputs[me].to(dev)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    for (name, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        close(q, p, f"{name} after 3 steps")


def fsdp_with_tensor_parallel():
    torch.manual_seed(0)
    reference = Transformer(transformer_args())
    model = copy.deepcopy(reference).to(dev)
    model = tensor_parallel_transformer(model, False)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    dp_rank = mesh["dp"].get_local_rank()
    batches = [tokens(2, seed=10 + k) for k in range(2)]
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        sum(reference(b).pow(2).mean() for b in batches).div(2).backward()
        opt_ref.step()
        opt_ref.zero_grad()
        out = model(batches[dp_rank].to(dev))
        out = out.full_tensor() if isinstance(out, DTensor) else out
        out.pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    for (name, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        close(q, p, f"{name} after 2 steps")


check("dtensor/redistribute", redistributions)
check("dtensor/ops", dtensor_ops)
check("tp/transformer", tensor_parallel(False))
check("tp/transformer_sequence_parallel", tensor_parallel(True))
check("fsdp2/mlp", fsdp_mlp)
check("fsdp2+tp/transformer", fsdp_with_tensor_parallel)

checks.report()
dist.destroy_process_group()

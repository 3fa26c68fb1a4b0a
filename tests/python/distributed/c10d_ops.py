"""Every c10d operation of the "neuron" backend in every dtype, on neuron tensors, against
values each rank computes for itself from every rank's (deterministic) input. Run under
torchrun; rank 0 prints one JSON object: {check name: null when it passed, else what was
wrong}. Each rank checks its own results and the failures of all ranks are gathered.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import neuronsim
from checks import Checks

DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]
N = 6  # elements per rank's block

dist.init_process_group("neuron")
R = dist.get_world_size()
me = dist.get_rank()
dev = torch.device("neuron", torch.neuron.current_device())
checks = Checks()
check = checks.run


def values(rank: int, dtype: torch.dtype, n: int = N, salt: int = 0) -> torch.Tensor:
    """Small integers (exact in every dtype, products that do not overflow int8)."""
    base = (torch.arange(n) * (rank + 2) + salt + rank) % 3
    if dtype == torch.bool:
        return (base % 2).bool()
    return base.to(dtype) if not dtype.is_complex else torch.complex(base.float(), -base.float())


def on_cpu(t: torch.Tensor) -> torch.Tensor:
    return t.to("cpu")


def same(got: torch.Tensor, want: torch.Tensor) -> None:
    got, want = on_cpu(got), on_cpu(want)
    if got.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        got, want = got.float(), want.float()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"got {got.tolist()} ({got.dtype}), want {want.tolist()}")


def reference(op: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    """The reduction of rank-ordered tensors, as the backend defines it (exact, FP32 for
    low-precision floats, rounded once)."""
    dtype = tensors[0].dtype
    wide = torch.float32 if dtype.is_floating_point and dtype != torch.float64 else dtype
    acc = tensors[0].to(wide)
    for t in tensors[1:]:
        t = t.to(wide)
        if op in ("sum", "avg", "premul_sum"):
            acc = acc | t if dtype == torch.bool else acc + t
        elif op == "product":
            acc = acc & t if dtype == torch.bool else acc * t
        elif op == "max":
            acc = torch.maximum(acc, t)
        elif op == "min":
            acc = torch.minimum(acc, t)
        elif op == "band":
            acc = acc & t
        elif op == "bor":
            acc = acc | t
        elif op == "bxor":
            acc = acc ^ t
    if op == "avg":
        acc = acc / R
    return acc.to(dtype)


def reduce_ops(dtype: torch.dtype) -> list[str]:
    if dtype == torch.bool:
        return ["sum", "product", "max", "min", "band", "bor", "bxor"]
    if dtype.is_complex:
        return ["sum", "avg"]  # torch refuses products of complex tensors itself
    ops = ["sum", "product", "max", "min"]
    ops += ["avg"] if dtype.is_floating_point else ["band", "bor", "bxor"]
    return ops


OPS = {
    "sum": dist.ReduceOp.SUM,
    "product": dist.ReduceOp.PRODUCT,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "avg": dist.ReduceOp.AVG,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}


def dtype_checks(dtype: torch.dtype) -> None:
    d = str(dtype).removeprefix("torch.")
    mine = values(me, dtype)
    everyone = [values(r, dtype) for r in range(R)]

    for op in reduce_ops(dtype):

        def all_reduce(op=op):
            t = mine.to(dev)
            dist.all_reduce(t, op=OPS[op])
            same(t, reference(op, everyone))

        check(f"all_reduce/{op}/{d}", all_reduce)

    ordered = "sum" if dtype.is_complex else "max"  # complex numbers have no order

    def reduce_to_root():
        t = mine.to(dev)
        dist.reduce(t, dst=1, op=OPS[ordered])
        same(t, reference(ordered, everyone) if me == 1 else mine)

    check(f"reduce/{d}", reduce_to_root)

    def all_gather_list():
        outs = [torch.empty_like(mine, device=dev) for _ in range(R)]
        dist.all_gather(outs, mine.to(dev))
        for r in range(R):
            same(outs[r], everyone[r])

    check(f"all_gather/{d}", all_gather_list)

    def all_gather_into_tensor():
        out = torch.empty(R * N, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, mine.to(dev))
        same(out, torch.cat(everyone))

    check(f"all_gather_into_tensor/{d}", all_gather_into_tensor)

    def reduce_scatter_tensor():
        blocks = [values(r, dtype, R * N, salt=1) for r in range(R)]
        out = torch.empty(N, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, blocks[me].to(dev), op=dist.ReduceOp.SUM)
        same(out, reference("sum", [b[me * N : (me + 1) * N] for b in blocks]))

    check(f"reduce_scatter_tensor/{d}", reduce_scatter_tensor)

    def reduce_scatter_list():
        blocks = [values(r, dtype, R * N, salt=2) for r in range(R)]
        out = torch.empty(N, dtype=dtype, device=dev)
        lowest = "sum" if dtype.is_complex else "min"
        dist.reduce_scatter(out, [c.to(dev) for c in blocks[me].chunk(R)], op=OPS[lowest])
        same(out, reference(lowest, [b[me * N : (me + 1) * N] for b in blocks]))

    check(f"reduce_scatter/{d}", reduce_scatter_list)

    def reduce_scatter_one_tensor():
        # TorchNeuron's form: a list of one tensor holding every rank's block, R times the
        # output along the dim where their sizes differ (here the last).
        blocks = [values(r, dtype, R * N, salt=4).reshape(N, R) for r in range(R)]
        out = torch.empty(N, 1, dtype=dtype, device=dev)
        dist.reduce_scatter(out, [blocks[me].to(dev)], op=dist.ReduceOp.SUM)
        same(out, reference("sum", [b[:, me : me + 1] for b in blocks]))

    check(f"reduce_scatter_one_tensor/{d}", reduce_scatter_one_tensor)

    def reduce_scatter_one_tensor_of_another_size():
        out = torch.empty(N, 1, dtype=dtype, device=dev)
        try:
            dist.reduce_scatter(out, [torch.zeros(N, R + 1, dtype=dtype, device=dev)])
        except ValueError as e:  # the group's refusals: ValueError naming the op and rank
            assert "times the output along one dim" in str(e), e
        else:
            raise AssertionError("an input of another size was taken")

    check(f"reduce_scatter_one_tensor_refused/{d}", reduce_scatter_one_tensor_of_another_size)

    def all_to_all_single():
        ins = [values(r, dtype, R * N, salt=3) for r in range(R)]
        out = torch.empty(R * N, dtype=dtype, device=dev)
        dist.all_to_all_single(out, ins[me].to(dev))
        same(out, torch.cat([ins[s][me * N : (me + 1) * N] for s in range(R)]))

    check(f"all_to_all_single/{d}", all_to_all_single)

    def all_to_all_uneven():
        # rank s sends s + d + 1 rows of 2 to rank d
        def rows(s, d):
            return s + d + 1

        ins = [
            values(s, dtype, 2 * sum(rows(s, x) for x in range(R)), salt=4).reshape(-1, 2)
            for s in range(R)
        ]
        out = torch.empty(sum(rows(s, me) for s in range(R)), 2, dtype=dtype, device=dev)
        dist.all_to_all_single(
            out,
            ins[me].to(dev),
            output_split_sizes=[rows(s, me) for s in range(R)],
            input_split_sizes=[rows(me, x) for x in range(R)],
        )
        want = []
        for s in range(R):
            start = sum(rows(s, x) for x in range(me))
            want.append(ins[s][start : start + rows(s, me)])
        same(out, torch.cat(want))

    check(f"all_to_all_single_uneven/{d}", all_to_all_uneven)

    def all_to_all_list():
        ins = [[values(s, dtype, N + x, salt=5) for x in range(R)] for s in range(R)]
        outs = [torch.empty(N + me, dtype=dtype, device=dev) for _ in range(R)]
        dist.all_to_all(outs, [t.to(dev) for t in ins[me]])
        for s in range(R):
            same(outs[s], ins[s][me])

    check(f"all_to_all/{d}", all_to_all_list)

    def broadcast():
        t = mine.to(dev)
        dist.broadcast(t, src=R - 1)
        same(t, everyone[R - 1])

    check(f"broadcast/{d}", broadcast)

    def gather():
        outs = [torch.empty_like(mine, device=dev) for _ in range(R)] if me == 1 else None
        dist.gather(mine.to(dev), outs, dst=1)
        if me == 1:
            for r in range(R):
                same(outs[r], everyone[r])

    check(f"gather/{d}", gather)

    def scatter():
        pieces = [values(r, dtype, N, salt=6) for r in range(R)]
        out = torch.empty(N, dtype=dtype, device=dev)
        dist.scatter(out, [p.to(dev) for p in pieces] if me == 0 else None, src=0)
        same(out, pieces[me])

    check(f"scatter/{d}", scatter)

    def send_recv_ring():
        out = torch.empty(N, dtype=dtype, device=dev)
        ops = [
            dist.P2POp(dist.isend, mine.to(dev), (me + 1) % R),
            dist.P2POp(dist.irecv, out, (me - 1) % R),
        ]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        same(out, everyone[(me - 1) % R])

    check(f"send_recv_ring/{d}", send_recv_ring)


for dtype in DTYPES:
    dtype_checks(dtype)


def blocking_send_recv():
    t = torch.arange(4.0, device=dev) * (me + 1)
    if me % 2 == 0 and me + 1 < R:
        dist.send(t, dst=me + 1)
        dist.recv(t, src=me + 1)
        same(t, torch.arange(4.0) * (me + 2))
    elif me % 2 == 1:
        got = torch.empty(4, device=dev)
        dist.recv(got, src=me - 1)
        dist.send(t, dst=me - 1)
        same(got, torch.arange(4.0) * me)


check("send_recv/blocking", blocking_send_recv)


def receives_posted_before_sends():
    # Every rank waits for its peer's address before it publishes its own: the channels'
    # threads must not hold the store while they wait (they would never publish).
    import time

    out = torch.empty(3, device=dev)
    recv = dist.irecv(out, src=(me - 1) % R)
    time.sleep(0.5)
    send = dist.isend(torch.full((3,), float(me), device=dev), dst=(me + 1) % R)
    recv.wait()
    send.wait()
    same(out, torch.full((3,), float((me - 1) % R)))


check("send_recv/receives_posted_first", receives_posted_before_sends)


def premul_sum():
    t = values(me, torch.float32).to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    same(t, reference("sum", [values(r, torch.float32) * 0.5 for r in range(R)]))


check("all_reduce/premul_sum/float32", premul_sum)


def coalesced():
    ts = [values(me, torch.float32, salt=s).to(dev) for s in range(3)]
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for s, t in enumerate(ts):
        same(t, reference("sum", [values(r, torch.float32, salt=s) for r in range(R)]))


check("all_reduce_coalesced", coalesced)


def subgroups():
    # Even and odd ranks: two groups of the default group's ranks.
    groups = [dist.new_group([r for r in range(R) if r % 2 == k]) for k in range(2)]
    mine_group = groups[me % 2]
    members = [r for r in range(R) if r % 2 == me % 2]
    t = values(me, torch.float32).to(dev)
    dist.all_reduce(t, group=mine_group)
    same(t, reference("sum", [values(r, torch.float32) for r in members]))
    b = torch.full((3,), float(me), device=dev)
    dist.broadcast(b, src=members[-1], group=mine_group)
    same(b, torch.full((3,), float(members[-1])))


check("new_group", subgroups)


def object_collectives():
    objects = [None] * R
    dist.all_gather_object(objects, {"rank": me, "name": f"r{me}"})
    assert objects == [{"rank": r, "name": f"r{r}"} for r in range(R)], objects
    box = [f"from {me}"]
    dist.broadcast_object_list(box, src=1)
    assert box == ["from 1"], box


check("object_collectives", object_collectives)


def cpu_tensors():
    t = torch.ones(5) * (me + 1)
    dist.all_reduce(t)
    same(t, torch.ones(5) * sum(range(1, R + 1)))


check("cpu_tensors", cpu_tensors)


def sync_batch_norm():
    # nn.SyncBatchNorm over R ranks, each with 2 samples, against BatchNorm over all of them on
    # the CPU: output, running statistics and every gradient, with no op on the CPU.
    import copy

    torch.manual_seed(3)
    x = torch.randn(2 * R, 3, 5) * 2 + 1
    grad = torch.randn(2 * R, 3, 5)
    bn = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(3))
        bn.bias.copy_(torch.randn(3))
    sync = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(bn)).to(dev)
    xr = x.clone().requires_grad_()
    want = bn(xr)
    want.backward(grad)
    rows = slice(2 * me, 2 * me + 2)
    mine = x[rows].to(dev).requires_grad_()
    neuronsim.reset_fallback_counts()
    got = sync(mine)
    got.backward(grad[rows].to(dev))
    assert not neuronsim.fallback_counts(), neuronsim.fallback_counts()
    close = {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(got.detach().cpu(), want[rows].detach(), **close)
    torch.testing.assert_close(mine.grad.cpu(), xr.grad[rows], **close)
    for param in (sync.weight, sync.bias):  # each rank's share, summed as DDP sums them
        dist.all_reduce(param.grad)
    torch.testing.assert_close(sync.weight.grad.cpu(), bn.weight.grad, **close)
    torch.testing.assert_close(sync.bias.grad.cpu(), bn.bias.grad, **close)
    torch.testing.assert_close(sync.running_mean.cpu(), bn.running_mean, **close)
    torch.testing.assert_close(sync.running_var.cpu(), bn.running_var, **close)


check("sync_batch_norm", sync_batch_norm)


def functional_collectives():
    import torch.distributed._functional_collectives as fc

    t = values(me, torch.float32).to(dev)
    got = fc.all_reduce(t, "sum", dist.group.WORLD)
    same(got, reference("sum", [values(r, torch.float32) for r in range(R)]))
    gathered = fc.all_gather_tensor(t, 0, dist.group.WORLD)
    same(gathered, torch.cat([values(r, torch.float32) for r in range(R)]))


check("functional_collectives", functional_collectives)


def profile_shows_collectives():
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/trace.json"
        t = torch.ones(64, device=dev)
        with neuronsim.profile(path):
            t = t * 2
            dist.all_reduce(t)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    names = [e.get("name") for e in events if e.get("cat") == "Execution"]
    assert any(n.startswith("all_reduce") for n in names), names
    assert any("mul" in n for n in names), names


check("profile_shows_collectives", profile_shows_collectives)


def barrier():
    dist.barrier()


check("barrier", barrier)

checks.report(_stats=neuronsim.distributed.group_stats())
dist.destroy_process_group()

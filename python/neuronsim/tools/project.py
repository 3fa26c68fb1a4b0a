"""Projects a training step or a generation before it meets the chip:
``python -m neuronsim.tools.project``.

A job is a model (a Hugging Face config at its published size, a config.json, or the
nanochat-style GPT of ``nanochat.py``), a layout (``--tp``, ``--fsdp``, ``--dp`` as the seed's
``TP_SIZE``/``FSDP_SIZE``), an instance, and the work: a training step of ``--batch`` sequences of
``--seq`` tokens per rank and ``--accum`` micro-batches per update, or a generation (a prefill of
``--seq`` tokens, then ``--new-tokens`` decode steps). The job runs in timing-only mode: every
kernel and collective is timed as it would run, none computes a value, so a model of billions of
parameters runs on a laptop.

**Symmetric ranks.** A TP x FSDP job runs the same program on every rank, on shards of the same
shapes, so one process stands for all of them: it is rank 0 of a world of ``tp * fsdp * dp``
ranks (``NEURONSIM_SYMMETRIC_RANKS=1``), and each collective is timed on the fabric model for its
whole group, placed as torchrun places the ranks, with every rank arriving when rank 0 does. A
32-rank job costs one rank's host time. What this gives up: ranks that would arrive apart
(stragglers, uneven shards, data-dependent routing) arrive together, and the per-rank figures are
rank 0's.

A step is measured in phases, the last of ``--steps`` times (once kernels are built and graphs
compiled), each in a profile session of its own, one after the other as the loop runs them: a
training step is its first micro-batch (which writes the gradients), one more micro-batch counted
for each of the update's others (they run the same program on the same shapes and add to the
gradients) and the update. That is the step run in full (``--full-accum``) at a fraction of the
host time, to within what carries over from one micro-batch to the next (the host's lead, a
collective still running: 0.01 % on the tests' FSDP job); a generation is its prefill (time to
first token) and its decode.

The report gives the step time, tokens/s, model FLOPs utilisation (``6 N`` per token for the
weights' products, plus the causal attention's products, over the TensorE peak of every rank's
physical cores: with ``--lnc 2`` a rank's kernels are split over its two, as neuronx-cc's are),
the breakdown of the step (each engine's busy time, the runtime's launches, the host's dispatch of
the ops and how long the device waited for it, the collectives, kernels and idle), the peak HBM of
a rank against the HBM stack it allocates in, CPU fallbacks, the graph nodes that split compiled
programs, and the host time the projection took.
``--trace job.json`` writes a Perfetto trace per phase (``job.<phase>.json``: rank 0, standing
for every rank; with ``--every-rank`` the ranks' traces merged into one, each rank's row apart
and its collectives linked to the other ranks'), ``--json`` every figure, ``--csv`` the dashboard's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Published configurations at full depth: Qwen3-8B (the seed's SFT model), and the
# architecture sweep's real-size models (real_size.MODELS) with their published depths.
CONFIGS: dict[str, tuple[str, dict, str]] = {
    "Qwen3-8B": (
        "qwen3",
        {
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "max_position_embeddings": 40960,
            "tie_word_embeddings": False,
        },
        "Qwen/Qwen3-8B config.json",
    ),
}
DEPTHS = {  # num_hidden_layers of each model's config.json (real_size.MODELS names the file)
    "Llama-3.1-8B": 32,
    "Qwen3-0.6B": 28,
    "Qwen3-30B-A3B": 48,
    "Gemma-3-1B": 26,
    "Mistral-7B-v0.3": 32,
    "Phi-3-mini": 32,
    "SmolLM2-135M": 30,
    "OLMo-2-1B": 16,
}
NANOCHAT = "nanochat"


@dataclasses.dataclass
class Job:
    model: str = NANOCHAT
    layers: int | None = None  # None: the model's own depth
    tp: int = 1
    fsdp: int = 1
    dp: int = 1
    instance: str = "trn2.3xlarge"
    nproc_per_node: int | None = None  # None: the world, on one node
    lnc: int | None = None  # physical cores per rank; None: the runtime's default
    task: str = "train"  # train or generate
    batch: int = 1  # sequences per rank per micro-batch
    seq: int = 1024
    accum: int = 1  # micro-batches per update
    new_tokens: int = 16
    prefill_chunk: int | None = None  # prompt tokens per prefill forward (the seed's 512)
    dtype: str = "bfloat16"
    compile: bool = False
    checkpointing: bool = False  # activation checkpointing (TRL's SFTConfig turns it on)
    launch: bool = True  # the runtime's launch of each kernel or program (NEURONSIM_LAUNCH)
    host_dispatch: bool = True  # the host's dispatch of each op (NEURONSIM_HOST_DISPATCH)
    blocking: bool = False  # the host waits for each op (NEURON_LAUNCH_BLOCKING)
    steps: int = 2
    trace: str | None = None
    every_rank: bool = False  # run every rank as a process (torchrun) instead of symmetric ones
    full_accum: bool = False  # run every micro-batch of an update, not one counted --accum times

    @property
    def world(self) -> int:
        return self.tp * self.fsdp * self.dp


# ---- The worker: one rank, in timing-only mode ----------------------------------------------


def _hf_config(job: Job):
    from transformers import AutoConfig

    from .real_size import MODELS

    if job.model in CONFIGS:
        model_type, dims, _ = CONFIGS[job.model]
        config = AutoConfig.for_model(model_type, **dims)
    elif job.model in DEPTHS:
        model_type, dims, _ = MODELS[job.model]
        dims = {k: v for k, v in dims.items() if k != "layer_types"}  # the sweep keeps two
        config = AutoConfig.for_model(model_type, num_hidden_layers=DEPTHS[job.model], **dims)
    elif os.path.isfile(job.model):
        config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(job.model)))
    else:
        config = AutoConfig.from_pretrained(job.model)  # a model id in the local cache
    if job.layers is not None:
        config.num_hidden_layers = job.layers
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[: job.layers]
    return config


def _matmul_weights(model, config=None) -> float:
    """Weights that multiply each token, the N of 6 N FLOPs per token: every Linear's, and of a
    mixture of experts' routed experts (3-D parameters or Linears under ``experts``), the share
    a token is routed to (top-k of the experts)."""
    import torch.nn as nn

    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    dense = experts = 0
    for name, p in model.named_parameters():
        if "experts" in name.split(".") and (p.dim() == 3 or id(p) in linear):
            experts += p.numel()
        elif id(p) in linear:
            dense += p.numel()
    count = getattr(config, "num_experts", None) or getattr(config, "n_routed_experts", None)
    top_k = getattr(config, "num_experts_per_tok", None)
    return dense + (experts * top_k / count if experts and count and top_k else experts)


def _attention_flops_per_token(layers: int, heads: int, head_dim: int, seq: int) -> float:
    """Forward and backward of causal attention, per token: QK^T and PV, 2 FLOPs per
    multiply-add, half the positions (causal), three times for the backward's two products."""
    return 3 * 2 * 2 * layers * heads * head_dim * seq / 2


def _build(job: Job):
    """The model on the meta device, its FLOPs per trained token, and how to call it."""
    import torch

    dtype = getattr(torch, job.dtype)
    if job.model == NANOCHAT:
        from . import nanochat

        c = nanochat.Config(sequence=max(job.seq, 1024))
        if job.layers is not None:
            c = dataclasses.replace(c, layers=job.layers)
        with torch.device("meta"):
            model = nanochat.GPT(c).to(dtype)
        attention = _attention_flops_per_token(c.layers, c.heads, c.head_dim, job.seq)
        return model, 6 * _matmul_weights(model) + attention, c.vocab, None
    from transformers import AutoModelForCausalLM

    config = _hf_config(job)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    attention = _attention_flops_per_token(config.num_hidden_layers, heads, head_dim, job.seq)
    return model, 6 * _matmul_weights(model, config) + attention, config.vocab_size, config


def _distribute(model, job: Job):
    """The model sharded on the TP x FSDP grid as Transformers shards it at load time
    (``from_pretrained(distributed_config=...)``), then placed on the device. The nanochat GPT
    has no TP plan: FSDP2 shards each block and the rest, over DP x FSDP ranks (HSDP)."""
    if job.world > 1 and job.model == NANOCHAT:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        if job.tp > 1:
            raise SystemExit("project: the nanochat GPT has no tensor-parallel plan; use --fsdp")
        mesh = init_device_mesh("neuron", (job.dp, job.fsdp), mesh_dim_names=("dp", "fsdp"))
        mesh = mesh if job.dp > 1 else mesh["fsdp"]
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif job.world > 1:
        from transformers.distributed import DistributedConfig

        wanted = DistributedConfig(tp_size=job.tp, fsdp_size=job.fsdp, dp_replicate_size=job.dp)
        config, _, mesh = type(model).prepare_distribute_model(wanted)
        model = type(model).maybe_distribute_model(model, config, mesh)
    return model.to_empty(device="neuron")


def _progress(text: str) -> None:
    print(f"[project] {text}", file=sys.stderr, flush=True)


def _collective_ps() -> int:
    import torch.distributed as dist

    if not dist.is_initialized():
        return 0
    from neuronsim import distributed

    return distributed.all_groups_stats()["simulated_ps"]


def _summary(path: str) -> dict:
    """Each engine's busy seconds, the DMA queues', the launches', the host's dispatch and the
    device's wait for it, from a profile summary."""
    with open(path) as f:
        core = next(iter(json.load(f).values()), {})
    suffix = "_engine_active_time"
    return {
        "engines_s": {k[: -len(suffix)]: v for k, v in core.items() if k.endswith(suffix)},
        "dma_s": core.get("dma_packet_time", 0.0),
        "launch_s": core.get("launch_time", 0.0),
        "host_dispatch_s": core.get("host_dispatch_time", 0.0),
        "host_bound_s": core.get("host_bound_time", 0.0),
        "collective_exposed_s": core.get("collective_exposed_time", 0.0),
    }


def _trace_path(job: Job, phase: str) -> str | None:
    """Where a phase's trace goes: ``job.<phase>.json``; with --every-rank each rank writes
    ``job.<phase>.rank<r>.json`` (neuronsim.profile fills in the rank), merged after."""
    if not job.trace:
        return None
    path = Path(job.trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    phase = phase.replace(" ", "-")
    rank = ".rank{rank}" if job.every_rank and job.world > 1 else ""
    return str(path.with_name(f"{path.stem}.{phase}{rank}{path.suffix or '.json'}"))


def _merge_rank_traces(job: Job) -> None:
    """--every-rank: each phase's per-rank traces joined into one job trace per phase, the
    ranks' collectives linked (neuronsim.tools.merge_traces)."""
    from neuronsim.tools import merge_traces

    path = Path(job.trace)
    suffix = path.suffix or ".json"
    phases: dict[str, list[Path]] = {}
    for ranked in path.parent.glob(f"{path.stem}.*.rank*{suffix}"):
        phase = ranked.name[len(path.stem) + 1 : ranked.name.rindex(".rank")]
        phases.setdefault(phase, []).append(ranked)
    for phase, ranked in phases.items():
        merged = merge_traces.merge(sorted(ranked))
        path.with_name(f"{path.stem}.{phase}{suffix}").write_text(json.dumps(merged))


def _measure(phases: list, job: Job, tmp: str) -> dict:
    """Runs the phases, each a (name, call, weight), job.steps times: the last time each runs
    in a profile session of its own, and the step's figures are the phases' weighted sums (a
    micro-batch's times the micro-batches of an update, plus the update)."""
    import torch

    import neuronsim

    for i in range(job.steps - 1):
        start = time.perf_counter()
        for _, call, _ in phases:
            call()
        torch.neuron.synchronize()
        _progress(f"warm-up step {i + 1}/{job.steps - 1}: {time.perf_counter() - start:.1f} s host")
    out = {"step_s": 0.0, "step_host_s": 0.0, "collective_s": 0.0, "dma_s": 0.0}
    out.update(launch_s=0.0, host_dispatch_s=0.0, host_bound_s=0.0, collective_exposed_s=0.0)
    out.update(engines_s={}, phases_s={})
    # The step starts as a loop's does after a step whose loss was read (the host waited), and
    # its phases follow each other as in the loop: the host, running ahead of the device, does
    # not wait at their boundaries.
    torch.neuron.synchronize()
    for name, call, weight in phases:
        summary = os.path.join(tmp, f"{name.replace(' ', '-')}.json")
        begin, start, cc = neuronsim.simulated_time(), time.perf_counter(), _collective_ps()
        with neuronsim.profile(_trace_path(job, name), summary):
            call()
        took, host = neuronsim.simulated_time() - begin, time.perf_counter() - start
        _progress(f"{name}: {took * 1e3:.1f} ms simulated, {host:.1f} s host")
        out["phases_s"][name] = took
        out["step_s"] += weight * took
        out["step_host_s"] += host
        out["collective_s"] += weight * (_collective_ps() - cc) / 1e12
        figures = _summary(summary)
        out["dma_s"] += weight * figures["dma_s"]
        for key in ("launch_s", "host_dispatch_s", "host_bound_s", "collective_exposed_s"):
            out[key] += weight * figures[key]
        for engine, busy in figures["engines_s"].items():
            out["engines_s"][engine] = out["engines_s"].get(engine, 0.0) + weight * busy
    return out


def _train(job: Job, tmp: str) -> dict:
    import torch

    model, flops_per_token, vocab, config = _build(job)
    if job.checkpointing:
        if config is None:
            raise SystemExit("project: --checkpointing needs a Hugging Face model")
        # The recomputed forward is work the step does, but not model FLOPs (MFU leaves it out).
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = _distribute(model, job)
    _progress("model placed on rank 0")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    run = torch.compile(model, backend="neuron") if job.compile else model
    ids = torch.randint(0, vocab, (job.batch, job.seq), device="neuron")

    def micro_batch():
        loss = run(ids, ids) if config is None else run(input_ids=ids, labels=ids).loss
        (loss / job.accum).backward()

    def update():
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    # The micro-batches of an update after the first run the same program on the same shapes
    # (the first writes the gradients, the others add to them): the first and one other are
    # run, the other counted for the rest (--full-accum runs them all).
    def step():
        for _ in range(job.accum):
            micro_batch()
        update()

    if job.full_accum:
        phases = [("step", step, 1)]
    else:
        phases = [("first micro-batch", micro_batch, 1)]
        if job.accum > 1:
            phases.append(("micro-batch", micro_batch, job.accum - 1))
        phases.append(("update", update, 1))
    figures = _measure(phases, job, tmp)
    data_ranks = job.world // job.tp
    tokens = job.batch * job.seq * job.accum * data_ranks
    figures.update(tokens=tokens, flops=flops_per_token * tokens)
    return figures


def _generate(job: Job, tmp: str) -> dict:
    import torch
    from transformers import DynamicCache, StaticCache

    model, _, vocab, config = _build(job)
    if config is None:
        raise SystemExit("project: --task generate needs a Hugging Face model, not nanochat")
    model = _distribute(model, job).eval()
    # A compiled generation keeps its cache static, as the seed's does; an eager one grows it
    # (a static cache's offset is a device tensor that eager masking reads on the host).
    if job.compile:
        cache = StaticCache(config=config, max_cache_len=job.seq + job.new_tokens)
    else:
        cache = DynamicCache(config=config)
    ids = torch.randint(0, vocab, (job.batch, job.seq), device="neuron")
    forward = torch.compile(model, backend="neuron") if job.compile else model
    last = {}

    chunk = job.prefill_chunk or job.seq

    @torch.no_grad()
    def prefill():  # in chunks of the prompt, as generate(prefill_chunk_size=...) runs it
        cache.reset()
        for start in range(0, job.seq, chunk):
            end = min(start + chunk, job.seq)
            positions = torch.arange(start, end, device="neuron")
            out = forward(
                input_ids=ids[:, start:end], past_key_values=cache, cache_position=positions
            )
        last["token"] = out.logits[:, -1:].argmax(-1)

    @torch.no_grad()
    def decode():
        for n in range(job.new_tokens):
            position = torch.tensor([job.seq + n], device="neuron")
            out = forward(input_ids=last["token"], past_key_values=cache, cache_position=position)
            last["token"] = out.logits[:, -1:].argmax(-1)

    figures = _measure([("prefill", prefill, 1), ("decode", decode, 1)], job, tmp)
    decode_s = figures["phases_s"]["decode"]
    tokens = job.batch * job.new_tokens * (job.world // job.tp)
    figures.update(
        prefill_s=figures["phases_s"]["prefill"],
        decode_s=decode_s,
        tokens=tokens,
        tokens_per_s=tokens / decode_s if decode_s > 0 else 0.0,
    )
    return figures


def worker(job: Job) -> dict:
    import torch

    import neuronsim
    from neuronsim import _C, compiler

    host_start = time.perf_counter()
    if job.world > 1:
        import torch.distributed as dist

        if job.every_rank:  # torchrun's environment
            dist.init_process_group("neuron")
        else:
            dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=job.world)
    torch.neuron.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as tmp:
        error = None
        try:
            figures = (_train if job.task == "train" else _generate)(job, tmp)
        except torch.OutOfMemoryError as e:
            figures, error = {}, str(e).splitlines()[0]
    props = torch.neuron.get_device_properties(0)
    figures.update(
        # The allocator's peak, and the programs' buffers, which stay while they are loaded.
        peak_hbm_bytes=torch.neuron.max_memory_reserved() + _C.program_hbm_bytes(0),
        program_hbm_bytes=_C.program_hbm_bytes(0),
        hbm_stack_bytes=props.total_memory,
        cores_per_stack=_cores_per_stack(job, props),
        peak_flops_per_rank=props.peak_bf16_flops,  # of its physical cores together
        physical_cores_per_rank=props.physical_cores_per_device,
        out_of_memory=error,
        fallbacks=neuronsim.fallback_counts(),
        eager_nodes=dict(compiler.stats().eager_nodes),
        host_s=time.perf_counter() - host_start,
    )
    if job.world > 1:
        from neuronsim import distributed

        figures["collectives"] = distributed.all_groups_stats()  # since the job began
    return figures


def _cores_per_stack(job: Job, props) -> int:
    """How many ranks share the HBM stack of rank 0 when the job fills its node's cores in
    order (two physical cores per stack on Trn2: two ranks at LNC=1, one at LNC=2)."""
    per_stack = props.physical_cores_per_hbm_stack
    ranks_on_node = job.nproc_per_node or job.world
    return max(1, min(per_stack // props.physical_cores_per_device, ranks_on_node))


# ---- The driver -----------------------------------------------------------------------------


def _environment(job: Job) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        NEURONSIM_MODE="timing-only",
        NEURONSIM_INSTANCE=job.instance,
        HF_HUB_OFFLINE="1",
        TORCH_DEVICE_BACKEND_AUTOLOAD="1",
    )
    if job.lnc is not None:
        env["NEURON_RT_VIRTUAL_CORE_SIZE"] = str(job.lnc)
    env["NEURONSIM_LAUNCH"] = "1" if job.launch else "0"
    env["NEURONSIM_HOST_DISPATCH"] = "1" if job.host_dispatch else "0"
    env["NEURON_LAUNCH_BLOCKING"] = "1" if job.blocking else "0"
    if job.world > 1 and not job.every_rank:
        env.update(
            NEURONSIM_SYMMETRIC_RANKS="1",
            RANK="0",
            LOCAL_RANK="0",
            WORLD_SIZE=str(job.world),
            LOCAL_WORLD_SIZE=str(job.nproc_per_node or job.world),
            GROUP_RANK="0",
        )
    return env


def project(job: Job) -> dict:
    """Runs the job in a worker process (the environment picks the mode and the machine
    before the device opens) and returns its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "neuronsim.tools.project", "--worker", str(out)]
        if job.every_rank and job.world > 1:
            torchrun = ["-m", "torch.distributed.run", "--standalone"]
            command[1:1] = [*torchrun, f"--nproc-per-node={job.world}"]
        command += ["--job", json.dumps(dataclasses.asdict(job))]
        done = subprocess.run(command, env=_environment(job), check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"project: the worker failed (exit {done.returncode}); see above")
        result = json.loads(out.read_text())
    result["job"] = dataclasses.asdict(job)
    if job.trace and job.every_rank and job.world > 1:
        _merge_rank_traces(job)
    return result


def _capacity(result: dict) -> float:
    """The HBM a rank may hold: its stack shared by the ranks at it (the process sees only its
    own allocations, so a neighbour rank's share is taken here)."""
    return result["hbm_stack_bytes"] / result["cores_per_stack"]


def _fits(result: dict) -> bool:
    return not result.get("out_of_memory") and result["peak_hbm_bytes"] <= _capacity(result)


def _mfu(result: dict) -> float:
    """Model FLOPs of the step over the peak of every rank's cores for the step's time."""
    world = Job(**result["job"]).world
    return result["flops"] / (result["step_s"] * world * result["peak_flops_per_rank"])


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def report(result: dict) -> str:
    job = Job(**result["job"])
    lines = [
        f"{job.model} {job.task}, {job.instance}, TP {job.tp} x FSDP {job.fsdp} x DP {job.dp} "
        f"({job.world} rank{'s' if job.world > 1 else ''}), {job.batch} x {job.seq} tokens per rank"
        + (f", {job.accum} micro-batches per update" if job.task == "train" else "")
        + (f", prefill in chunks of {job.prefill_chunk}" if job.prefill_chunk else "")
        + (", compiled" if job.compile else ", eager")
        + (", activation checkpointing" if job.checkpointing else "")
    ]
    capacity = _capacity(result)
    peak = result["peak_hbm_bytes"]
    if result.get("out_of_memory"):
        lines.append(f"  does not fit: {result['out_of_memory']}")
        lines.append(f"  peak HBM before the failure {_gib(peak)} of {_gib(capacity)} per rank")
        return "\n".join(lines)
    step = result["step_s"]
    if job.task == "train":
        mfu = _mfu(result)
        lines.append(
            f"  step {step * 1e3:.1f} ms simulated; {result['tokens'] / step:,.0f} tokens/s; "
            f"MFU {100 * mfu:.1f} %"
        )
    else:
        lines.append(
            f"  time to first token {result['prefill_s'] * 1e3:.1f} ms; decode "
            f"{result['tokens_per_s']:,.1f} tokens/s ({job.new_tokens} tokens)"
        )
    collective_s = result["collective_s"]
    parts = [f"{name} {busy * 1e3:.1f}" for name, busy in result["engines_s"].items()]
    dma_ms = result["dma_s"] * 1e3
    lines.append(f"  busy ms: {', '.join(parts)}; DMA queues {dma_ms:.1f} (summed over queues)")
    launch_s = result["launch_s"]
    lines.append(
        f"  runtime launches {launch_s * 1e3:.1f} ms (the start of each kernel or program on "
        f"its core, {100 * launch_s / step:.0f} % of the step)"
    )
    bound_s = result.get("host_bound_s", 0.0)
    how = "waiting for each op" if job.blocking else "running ahead of the device"
    lines.append(
        f"  host dispatch {result.get('host_dispatch_s', 0.0) * 1e3:.1f} ms ({how}); the device "
        f"waited for it {bound_s * 1e3:.1f} ms ({100 * bound_s / step:.0f} % of the step)"
    )
    exposed_s = result.get("collective_exposed_s", collective_s)
    rest_ms = (step - exposed_s - launch_s - bound_s) * 1e3
    lines.append(
        f"  collectives {collective_s * 1e3:.1f} ms: {exposed_s * 1e3:.1f} exposed (no kernel "
        f"beside them), {(collective_s - exposed_s) * 1e3:.1f} hidden behind kernels; kernels "
        f"and idle {rest_ms:.1f} ms"
    )
    fits = "fits" if _fits(result) else "does NOT fit"
    programs = _gib(result["program_hbm_bytes"])
    lines.append(
        f"  peak HBM {_gib(peak)} per rank of {_gib(capacity)} ({programs} in the programs' "
        f"buffers): {fits}"
    )
    fallbacks = sum(result["fallbacks"].values())
    lines.append(f"  CPU fallbacks: {fallbacks}" + (f" {result['fallbacks']}" if fallbacks else ""))
    if job.compile and result["eager_nodes"]:
        eager = sum(result["eager_nodes"].values())
        lines.append(f"  graph nodes run eagerly on the device (the programs split there): {eager}")
    if result.get("physical_cores_per_rank", 1) > 1:
        lines.append(
            f"  a rank is {result['physical_cores_per_rank']} physical cores (LNC): each kernel "
            "is split evenly over them, with no imbalance or synchronisation between them "
            "(docs/cost-model.md §6.2), so its compute time is a lower bound"
        )
    lines.append(f"  host {result['host_s']:.0f} s")
    return "\n".join(lines)


def gate_rows(result: dict, name: str) -> list[tuple[str, str, float]]:
    """The figures a dashboard follows, as (benchmark, metric, value); names in the forms its
    gate reads as costs (_us_, peak_memory) or as gains (per_s, mfu)."""
    rows = [(name, "peak_memory_gib", result["peak_hbm_bytes"] / 2**30)]
    if result.get("out_of_memory"):
        return rows + [(name, "fits", 0.0)]
    job = Job(**result["job"])
    rows += [
        (name, "fits", 1.0 if _fits(result) else 0.0),
        (name, "simulated_us_per_step", result["step_s"] * 1e6),
        (name, "collectives_us_per_step", result["collective_s"] * 1e6),
        (name, "collectives_exposed_us_per_step", result.get("collective_exposed_s", 0.0) * 1e6),
        (name, "launch_us_per_step", result["launch_s"] * 1e6),
        (name, "host_bound_us_per_step", result.get("host_bound_s", 0.0) * 1e6),
        (name, "fallbacks", float(sum(result["fallbacks"].values()))),
    ]
    if job.task == "train":
        mfu = _mfu(result)
        rows += [(name, "tokens_per_s", result["tokens"] / result["step_s"]), (name, "mfu", mfu)]
    else:
        rows += [
            (name, "time_to_first_token_us", result["prefill_s"] * 1e6),
            (name, "decode_tokens_per_s", result["tokens_per_s"]),
        ]
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.project",
        description="Project a training step or a generation on a simulated Trainium instance.",
    )
    d = Job()
    p.add_argument(
        "--model",
        default=d.model,
        help=f"{NANOCHAT}, {', '.join(CONFIGS)}, a config.json or a cached model id",
    )
    p.add_argument("--layers", type=int, default=None, help="cut the model to this many layers")
    p.add_argument("--tp", type=int, default=int(os.environ.get("TP_SIZE", "1")))
    p.add_argument("--fsdp", type=int, default=int(os.environ.get("FSDP_SIZE", "1")))
    p.add_argument("--dp", type=int, default=1, help="FSDP replicas (HSDP)")
    p.add_argument("--instance", default=d.instance)
    p.add_argument("--nproc-per-node", type=int, default=None)
    p.add_argument("--lnc", type=int, default=None, help="physical cores per rank (1 or 2)")
    p.add_argument("--task", choices=("train", "generate"), default=d.task)
    p.add_argument("--batch", type=int, default=d.batch, help="sequences per rank")
    p.add_argument("--seq", type=int, default=d.seq, help="tokens per sequence (the prompt)")
    p.add_argument("--accum", type=int, default=d.accum, help="micro-batches per update")
    p.add_argument("--new-tokens", type=int, default=d.new_tokens)
    p.add_argument(
        "--prefill-chunk",
        type=int,
        default=None,
        help="prompt tokens per prefill forward (the seed's PREFILL_CHUNK_SIZE); default: all",
    )
    p.add_argument("--dtype", default=d.dtype)
    p.add_argument("--compile", action="store_true", help="torch.compile(backend='neuron')")
    p.add_argument(
        "--checkpointing",
        action="store_true",
        help="activation checkpointing (TRL's SFTConfig default)",
    )
    p.add_argument("--steps", type=int, default=d.steps, help="steps run; the last is reported")
    p.add_argument(
        "--no-launch",
        dest="launch",
        action="store_false",
        help="leave the runtime's launch of each kernel or program on its core out",
    )
    p.add_argument(
        "--no-host-dispatch",
        dest="host_dispatch",
        action="store_false",
        help="leave the host's dispatch of each op out (NEURONSIM_HOST_DISPATCH=0)",
    )
    p.add_argument(
        "--blocking",
        action="store_true",
        help="the host waits for each op before the next (NEURON_LAUNCH_BLOCKING=1)",
    )
    p.add_argument("--trace", default=None, help="write the step's Perfetto trace here")
    p.add_argument(
        "--full-accum",
        action="store_true",
        help="run every micro-batch of the update (by default one runs, counted --accum times)",
    )
    p.add_argument(
        "--every-rank",
        action="store_true",
        help="run every rank as a process (torchrun), not one standing for all: to check the "
        "symmetric projection on a small layout",
    )
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument(
        "--csv",
        nargs=2,
        metavar=("PATH", "NAME"),
        help="write the dashboard's figures as benchmark,metric,value rows named NAME",
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--job", default=None, help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        figures = worker(Job(**json.loads(args.job)))
        if os.environ.get("RANK", "0") == "0":
            Path(args.worker).write_text(json.dumps(figures))
        return 0
    fields = {f.name for f in dataclasses.fields(Job)}
    job = Job(**{k: v for k, v in vars(args).items() if k in fields})
    if job.steps < 1:
        raise SystemExit("project: --steps must be at least 1")
    result = project(job)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.csv:
        rows = gate_rows(result, args.csv[1])
        with open(args.csv[0], "w") as f:
            f.write("benchmark,metric,value\n")
            f.writelines(f"{b},{m},{v!r}\n" for b, m, v in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

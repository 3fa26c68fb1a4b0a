"""What sitecustomize.py installs: into a Trainer, a callback that measures each step and a
save_model that first gathers the full weights; around generate(), a measurement."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

import neuronsim
import neuronsim.distributed


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


class _StepMeasurements:
    """The step timing of a TrainerCallback (made one in instrument_trainer: importing
    Transformers' Trainer here could run in the middle of its own import)."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.steps: list[dict] = []

    def _now(self):
        torch.neuron.synchronize()
        return (
            time.perf_counter(),
            neuronsim.simulated_time(),
            neuronsim.distributed.all_groups_stats()["simulated_ps"] / 1e12,
        )

    def on_step_begin(self, args, state, control, **kwargs):
        self.start = self._now()

    def on_step_end(self, args, state, control, **kwargs):
        end = self._now()
        wall, simulated, collectives = (e - s for e, s in zip(end, self.start))
        self.steps.append(
            {"wall_s": wall, "simulated_s": simulated, "collectives_simulated_s": collectives}
        )

    def on_train_end(self, args, state, control, **kwargs):
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {
            "rank": _rank(),
            "steps": self.steps,
            "peak_memory_bytes": torch.neuron.max_memory_allocated(),
            "losses": [h["loss"] for h in state.log_history if "loss" in h],
        }
        (self.folder / f"rank{_rank()}.json").write_text(json.dumps(record))


def gathered_state(model) -> dict[str, torch.Tensor]:
    """Every parameter whole, on the CPU (the shards of DTensors gathered)."""
    out = {}
    for name, t in model.named_parameters():
        t = t.detach()
        if isinstance(t, torch.distributed.tensor.DTensor):
            t = t.full_tensor()
        out[name] = t.to("cpu").clone()
    return out


def instrument_trainer(trainer_class, folder: str) -> None:
    from transformers import TrainerCallback

    step_measurements = type("StepMeasurements", (_StepMeasurements, TrainerCallback), {})
    init, save_model = trainer_class.__init__, trainer_class.save_model

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.add_callback(step_measurements(folder))

    def save_model_gathering_first(self, output_dir=None, _internal_call=False):
        if not _internal_call:  # the script's own save (checkpoints are internal calls)
            state = gathered_state(self.accelerator.unwrap_model(self.model))
            if _rank() == 0:
                os.makedirs(folder, exist_ok=True)
                torch.save(state, Path(folder) / "gathered.pt")
        return save_model(self, output_dir, _internal_call)

    trainer_class.__init__ = __init__
    trainer_class.save_model = save_model_gathering_first


def instrument_generate(mixin, folder: str) -> None:
    generate = mixin.generate
    calls: list[dict] = []

    def measured_generate(self, inputs=None, *args, **kwargs):
        torch.neuron.synchronize()
        wall, simulated = time.perf_counter(), neuronsim.simulated_time()
        collectives = neuronsim.distributed.all_groups_stats()["simulated_ps"]
        out = generate(self, inputs, *args, **kwargs)
        torch.neuron.synchronize()
        prompt = inputs if inputs is not None else kwargs.get("input_ids")
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        calls.append(
            {
                "new_tokens": int(sequences.shape[-1] - prompt.shape[-1]),
                "wall_s": time.perf_counter() - wall,
                "simulated_s": neuronsim.simulated_time() - simulated,
                "collectives_simulated_s": (
                    neuronsim.distributed.all_groups_stats()["simulated_ps"] - collectives
                )
                / 1e12,
            }
        )
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"generate_rank{_rank()}.json").write_text(json.dumps(calls))
        return out

    mixin.generate = measured_generate

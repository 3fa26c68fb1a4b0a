"""Instruments the seed scripts without editing them: put this folder on PYTHONPATH and set
NEURONSIM_OBSERVE to a folder, and every process that imports Transformers' Trainer records,
per rank, into <folder>/rank<N>.json:
- per training step: host wall seconds, simulated seconds of the device clock, simulated
  seconds the rank's core spent in collectives (the neuron process groups' own count);
- the peak device memory (torch.neuron.max_memory_allocated);
and, before the Trainer saves the model, rank 0 writes the full weights gathered from the
shards (DTensor.full_tensor) to <folder>/gathered.pt, for comparison with the checkpoint.
Every process that generates with a Transformers model records, into
<folder>/generate_rank<N>.json, each generate() call's new tokens, host wall seconds and
simulated seconds. Processes that import neither (torchrun's agent) are untouched."""

from __future__ import annotations

import importlib.abc
import os
import sys

_FOLDER = os.environ.get("NEURONSIM_OBSERVE")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `callback(module)` once the module `name` has been executed."""

    def __init__(self, name, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        # Asks the other finders for the very import under way (importlib.util.find_spec
        # would start an import of its own, out of order: with peft installed, a circular
        # import of transformers.trainer_utils).
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            self.callback(module)

        spec.loader.exec_module = exec_module
        return spec


def _instrument_trainer(module) -> None:
    from observe_hooks import instrument_trainer

    instrument_trainer(module.Trainer, _FOLDER)


def _instrument_generation(module) -> None:
    from observe_hooks import instrument_generate

    instrument_generate(module.GenerationMixin, _FOLDER)


if _FOLDER:
    sys.meta_path.insert(0, _AfterImport("transformers.trainer", _instrument_trainer))
    sys.meta_path.insert(0, _AfterImport("transformers.generation.utils", _instrument_generation))

"""Offline stand-ins for the Hugging Face repositories that neuronsim's scripts load.

``python -m neuronsim.tools.hub [--cache-dir DIR] [--force]`` writes into a local Hugging Face
cache tiny, randomly initialised (fixed seeds and a single-threaded fit, so every run on
a machine writes the same bytes) repositories under the ids the scripts name, so that
these work with
``HF_HUB_OFFLINE=1`` and no network:

- ``Qwen/Qwen3-8B`` and ``Qwen/Qwen3.8-27B``: ``AutoModelForCausalLM`` and
  ``AutoTokenizer``. A Qwen3ForCausalLM of 2 layers (hidden 64, 4 heads, 2 key/value
  heads of 16) and a byte-level BPE tokenizer of 768 tokens trained here, with Qwen's
  special tokens and a ChatML chat template. The two ids differ in their seed and in
  what follows it: Qwen/Qwen3.8-27B, which generate_tp.py generates with, is then fitted
  for a few seconds to the built-in chat corpus (fit_qwen3), so that its greedy tokens
  do not hang on bfloat16 rounding and tensor-parallel generation can be compared with
  one process's (it answers "The future of AI is" with a memorised reply of 104
  tokens); Qwen/Qwen3-8B, which sft_neuron_example.py fine-tunes, stays random.
- ``HuggingFaceH4/ultrachat_200k``: ``datasets.load_dataset(id, split="train_sft")``.
  Short synthetic conversations with the real columns (prompt, prompt_id, messages)
  and splits (train_sft, test_sft, train_gen, test_gen).
- ``neuronsim/tiny-flux``: ``DiffusionPipeline.from_pretrained(id)`` gives a
  FluxPipeline (CLIP and T5 text encoders, a Flux transformer, a VAE) whose transformer
  Diffusers can shard with tensor parallelism (its ``_tp_plan``). Call it with
  ``height=32, width=32`` (Flux's default is 256x256) and a few steps.

The cache is the one huggingface_hub and datasets use: ``HF_HOME``, ``HF_HUB_CACHE``
and ``HF_DATASETS_CACHE`` as they read them, or ``--cache-dir DIR`` as ``HF_HOME``.
A repository already there is left alone unless ``--force``.

Models land as a real download would: ``<hub>/models--Qwen--Qwen3-8B/blobs``,
``snapshots/<commit>`` (links to the blobs) and ``refs/main`` naming the commit, a fake
40-hex commit derived from the files. The dataset is written twice: as its hub
repository (parquet files under ``data/`` and a README.md whose YAML names the splits),
and as the Arrow cache of datasets, because datasets 5.2 offline never reads the hub
snapshot of a dataset: it goes straight to its own cache
(``datasets/load.py: dataset_module_factory`` raises on offline mode before the hub
download and falls back to ``CachedDatasetModuleFactory``).

Using them:

- The Qwen weights are stored in bfloat16, the real checkpoints' dtype, which
  ``from_pretrained`` keeps unless told another; the pipeline's in float32.
- Generation is greedy unless asked otherwise (the real generation_config samples).
- The Qwen tokenizer pads on the right, as the real one does: batched generation wants
  ``tokenizer.padding_side = "left"``.
- As with the real dataset, give TRL's SFTTrainer only its ``messages`` column
  (``select_columns(["messages"])``): TRL 1.16 takes a ``prompt`` column for the prompt
  of prompt-completion rows and then looks for a ``completion`` one.
"""

from __future__ import annotations

from .cache import CachePaths, cache_paths, published_commit, repo_folder
from .command import main, write_all
from .errors import HubError
from .flux import DIFFUSION_ID, write_diffusion_pipeline
from .qwen3 import QWEN3_MODELS, write_qwen3
from .ultrachat import ULTRACHAT_ID, ULTRACHAT_SPLITS, write_ultrachat

__all__ = [
    "DIFFUSION_ID",
    "QWEN3_MODELS",
    "ULTRACHAT_ID",
    "ULTRACHAT_SPLITS",
    "CachePaths",
    "HubError",
    "cache_paths",
    "main",
    "published_commit",
    "repo_folder",
    "write_all",
    "write_diffusion_pipeline",
    "write_qwen3",
    "write_ultrachat",
]

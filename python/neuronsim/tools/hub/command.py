"""The command: ``python -m neuronsim.tools.hub [--cache-dir DIR] [--force]`` writes every
stand-in."""

from __future__ import annotations

import argparse
import os
import sys

from .cache import CachePaths, cache_paths
from .errors import HubError
from .flux import DIFFUSION_ID, write_diffusion_pipeline
from .qwen3 import QWEN3_MODELS, write_qwen3
from .ultrachat import ULTRACHAT_ID, write_ultrachat


def _quiet_libraries() -> None:
    """No network, no telemetry, no progress bars or advice while writing."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def write_all(cache_dir: str | os.PathLike | None = None, force: bool = False) -> CachePaths:
    """Write every stand-in into `cache_dir` (taken as HF_HOME; None: the environment's
    caches). Returns the caches written."""
    _quiet_libraries()
    paths = cache_paths(cache_dir)
    for folder in (paths.hub, paths.datasets):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise HubError(f"cannot create the cache folder {folder}: {error.strerror}") from None
    for model_id, seed in QWEN3_MODELS.items():
        write_qwen3(model_id, seed, paths=paths, force=force)
    write_ultrachat(paths=paths, force=force)
    write_diffusion_pipeline(paths=paths, force=force)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neuronsim.tools.hub",
        description="Write tiny offline stand-ins of the Hugging Face repositories that "
        f"neuronsim's scripts load: {', '.join(QWEN3_MODELS)}, {ULTRACHAT_ID} and "
        f"{DIFFUSION_ID}.",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="write into DIR as HF_HOME (DIR/hub, DIR/datasets); default: the caches that "
        "huggingface_hub and datasets use (HF_HOME, HF_HUB_CACHE, HF_DATASETS_CACHE)",
    )
    parser.add_argument(
        "--force", action="store_true", help="rewrite repositories that are already there"
    )
    args = parser.parse_args(argv)
    try:
        paths = write_all(args.cache_dir, force=args.force)
    except ImportError as error:
        print(
            f"hub: error: {error}: the stand-ins need transformers, tokenizers, datasets and "
            "diffusers (python/requirements.txt of neuronsim pins them)",
            file=sys.stderr,
        )
        return 1
    except (HubError, OSError) as error:
        print(f"hub: error: {error}", file=sys.stderr)
        return 1
    print(f"hub: done (hub cache {paths.hub}, datasets cache {paths.datasets})")
    return 0

"""The ultrachat_200k stand-in: short synthetic conversations with the real columns and
splits, as a hub repository and as the Arrow cache datasets reads offline."""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
from pathlib import Path

from .cache import (
    CachePaths,
    already_there,
    cache_paths,
    publish,
    published_commit,
    repo_folder,
    snapshot_folder,
)
from .corpus import conversation

ULTRACHAT_ID = "HuggingFaceH4/ultrachat_200k"
# The real dataset's four splits, a few hundred rows each for training and a tenth of
# that for testing (its own train/test ratio is about 9:1). 384 = 48 batches of 8.
ULTRACHAT_SPLITS = {"train_sft": 384, "test_sft": 48, "train_gen": 384, "test_gen": 48}


def ultrachat_features():
    """ultrachat_200k's columns."""
    from datasets import Features, List, Value

    return Features(
        {
            "prompt": Value("string"),
            "prompt_id": Value("string"),
            "messages": List({"content": Value("string"), "role": Value("string")}),
        }
    )


def ultrachat_rows(split: str) -> list[dict]:
    """ULTRACHAT_SPLITS[split] conversations, the same for the same split name. prompt_id
    is the sha256 of the prompt, as in the real dataset."""
    rng = random.Random(list(ULTRACHAT_SPLITS).index(split))
    rows = []
    for _ in range(ULTRACHAT_SPLITS[split]):
        messages = conversation(rng)
        prompt = messages[0]["content"]
        prompt_id = hashlib.sha256(prompt.encode()).hexdigest()
        rows.append({"prompt": prompt, "prompt_id": prompt_id, "messages": messages})
    return rows


def _parquet_name(split: str) -> str:
    return f"data/{split}-00000-of-00001.parquet"


def _ultrachat_readme(splits: dict[str, tuple[int, int]], download_size: int) -> str:
    """The dataset card: YAML `configs` (which files make which split) and `dataset_info`,
    as datasets reads them from a hub repository."""
    import yaml

    header = {
        "language": ["en"],
        "task_categories": ["text-generation"],
        "pretty_name": "UltraChat 200k (neuronsim stand-in)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": split, "path": f"data/{split}-*"} for split in ULTRACHAT_SPLITS
                ],
            }
        ],
        "dataset_info": {
            "features": ultrachat_features()._to_yaml_list(),
            "splits": [
                {"name": split, "num_bytes": size, "num_examples": rows}
                for split, (rows, size) in splits.items()
            ],
            "download_size": download_size,
            "dataset_size": sum(size for _, size in splits.values()),
        },
    }
    body = (
        "# UltraChat 200k (neuronsim stand-in)\n\n"
        "Short synthetic English conversations written by `python -m neuronsim.tools.hub`, with\n"
        "the columns and splits of HuggingFaceH4/ultrachat_200k. Not the real data.\n"
    )
    return f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n{body}"


def _write_ultrachat_repo(repo: Path) -> dict[str, int]:
    """The hub repository's files under `repo`: a parquet file per split and the card.
    Returns the rows of each split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = ultrachat_features().arrow_schema  # with datasets' feature metadata
    splits = {}
    for split in ULTRACHAT_SPLITS:
        table = pa.Table.from_pylist(ultrachat_rows(split), schema=schema)
        (repo / "data").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, repo / _parquet_name(split))
        splits[split] = (table.num_rows, table.nbytes)
    download_size = sum(p.stat().st_size for p in (repo / "data").iterdir())
    (repo / "README.md").write_text(_ultrachat_readme(splits, download_size))
    return {split: rows for split, (rows, _) in splits.items()}


def ultrachat_cache_folder(paths: CachePaths, commit: str) -> Path:
    """Where datasets keeps ULTRACHAT_ID prepared from `commit`:
    <datasets>/<owner>___<name>/<config>/<version>/<commit>."""
    owner, name = ULTRACHAT_ID.split("/")
    return paths.datasets / f"{owner}___{name}" / "default" / "0.0.0" / commit


def write_ultrachat_cache(paths: CachePaths, snapshot: Path, commit: str) -> Path:
    """The Arrow cache that `load_dataset(ULTRACHAT_ID)` reads offline, made from the
    snapshot's parquet files as datasets makes it after a download: one
    <name>-<split>.arrow per split, then dataset_info.json (last: datasets takes a folder
    with one as complete)."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, SplitDict, SplitInfo
    from datasets.arrow_writer import ArrowWriter

    name = ULTRACHAT_ID.split("/")[1]
    target = ultrachat_cache_folder(paths, commit)
    shutil.rmtree(target.parent.parent.parent, ignore_errors=True)  # other commits' too
    target.mkdir(parents=True)
    features = ultrachat_features()
    splits = SplitDict(dataset_name=name)
    for split in ULTRACHAT_SPLITS:
        table = pq.read_table(snapshot / _parquet_name(split))
        with ArrowWriter(features=features, path=str(target / f"{name}-{split}.arrow")) as out:
            out.write_table(table)
            rows, size = out.finalize()
        splits.add(SplitInfo(name=split, num_bytes=size, num_examples=rows))
    DatasetInfo(
        features=features,
        builder_name="parquet",
        dataset_name=name,
        config_name="default",
        version="0.0.0",
        splits=splits,
        download_size=sum(p.stat().st_size for p in (snapshot / "data").iterdir()),
        dataset_size=sum(s.num_bytes for s in splits.values()),
    ).write_to_directory(str(target))
    return target


def write_ultrachat(*, paths: CachePaths | None = None, force: bool = False) -> Path:
    """Write ULTRACHAT_ID: its hub repository, then the Arrow cache datasets reads offline
    (again from the repository when only the cache is missing). Returns the cache folder."""
    paths = paths or cache_paths()
    if already_there(paths, "dataset", ULTRACHAT_ID, force):
        commit = published_commit(repo_folder(paths, "dataset", ULTRACHAT_ID))
        target = ultrachat_cache_folder(paths, commit)
        if not (target / "dataset_info.json").is_file():
            write_ultrachat_cache(paths, snapshot_folder(paths, "dataset", ULTRACHAT_ID), commit)
            print(f"hub: wrote the Arrow cache of {ULTRACHAT_ID} ({target})")
        return target
    with tempfile.TemporaryDirectory() as tmp:
        rows = _write_ultrachat_repo(Path(tmp))
        snapshot, commit = publish(paths, "dataset", ULTRACHAT_ID, Path(tmp))
    target = write_ultrachat_cache(paths, snapshot, commit)
    counts = ", ".join(f"{split} {n}" for split, n in rows.items())
    print(f"hub: wrote {ULTRACHAT_ID} (dataset: {counts} rows; Arrow cache {target})")
    return target

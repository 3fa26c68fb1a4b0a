"""The cache layout: where huggingface_hub and datasets keep what the tool writes, and
how a repository is published there as a real download would be."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CachePaths:
    """Where huggingface_hub keeps repositories and datasets keeps its Arrow cache."""

    hub: Path
    datasets: Path


def cache_paths(cache_dir: str | os.PathLike | None = None) -> CachePaths:
    """The caches of `cache_dir` taken as HF_HOME, or, without it, those the libraries
    would use in this environment (HF_HUB_CACHE, HF_DATASETS_CACHE, HF_HOME, XDG)."""
    if cache_dir is not None:
        home = Path(cache_dir).expanduser().absolute()
        return CachePaths(hub=home / "hub", datasets=home / "datasets")
    from huggingface_hub import constants

    datasets_cache = os.getenv("HF_DATASETS_CACHE", os.path.join(constants.HF_HOME, "datasets"))
    return CachePaths(hub=Path(constants.HF_HUB_CACHE), datasets=Path(datasets_cache).expanduser())


def repo_folder(paths: CachePaths, repo_type: str, repo_id: str) -> Path:
    """huggingface_hub's folder of a repository: <hub>/<type>s--<owner>--<name>."""
    return paths.hub / f"{repo_type}s--{repo_id.replace('/', '--')}"


def published_commit(folder: Path) -> str | None:
    """The commit refs/main names when its snapshot is there. refs/main is written last,
    so a run that stopped half way leaves none and the next one writes the repository
    again."""
    ref = folder / "refs" / "main"
    if not ref.is_file():
        return None
    commit = ref.read_text().strip()
    return commit if (folder / "snapshots" / commit).is_dir() else None


def fake_commit(files: dict[str, Path]) -> str:
    """A 40-hex id of the content (a sha1 over the names and sha256es of the files), so the
    same files always make the same commit and changed ones another."""
    digest = hashlib.sha1(usedforsecurity=False)
    for name in sorted(files):
        digest.update(f"{name}\0{_sha256(files[name])}\n".encode())
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _link(link: Path, blob: Path) -> None:
    """A relative link as huggingface_hub makes them, or a copy where links fail."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(os.path.relpath(blob, link.parent))
    except OSError:
        shutil.copyfile(blob, link)


def publish(paths: CachePaths, repo_type: str, repo_id: str, source: Path) -> tuple[Path, str]:
    """Put every file under `source` into the repository's cache folder: blobs named by
    their sha256 (huggingface_hub's name for large files), snapshots/<commit>/ linking to
    them, then refs/main. Returns the snapshot folder and the commit."""
    files = {p.relative_to(source).as_posix(): p for p in source.rglob("*") if p.is_file()}
    commit = fake_commit(files)
    folder = repo_folder(paths, repo_type, repo_id)
    snapshot = folder / "snapshots" / commit
    for name, path in sorted(files.items()):
        blob = folder / "blobs" / _sha256(path)
        if not blob.is_file():
            _write_atomically(blob, path.read_bytes())
        _link(snapshot / name, blob)
    _write_atomically(folder / "refs" / "main", commit.encode())
    return snapshot, commit


def size_text(folder: Path) -> str:
    files = [p for p in folder.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return f"{len(files)} files, {size / 1e6:.2f} MB"


def already_there(paths: CachePaths, repo_type: str, repo_id: str, force: bool) -> bool:
    folder = repo_folder(paths, repo_type, repo_id)
    if force:
        shutil.rmtree(folder, ignore_errors=True)
        return False
    commit = published_commit(folder)
    if commit is None:
        return False
    print(f"hub: {repo_id} already there ({folder / 'snapshots' / commit}); --force rewrites it")
    return True


def snapshot_folder(paths: CachePaths, repo_type: str, repo_id: str) -> Path:
    folder = repo_folder(paths, repo_type, repo_id)
    return folder / "snapshots" / published_commit(folder)


def model_card(repo_id: str, library: str, what: str, weights: str = "random") -> str:
    """A README.md saying what the repository is, for whoever finds it in a cache."""
    return (
        f"---\nlibrary_name: {library}\ntags:\n- neuronsim\n- random-weights\n---\n\n"
        f"# {repo_id} (neuronsim stand-in)\n\n{what}\n\n"
        "Written by `python -m neuronsim.tools.hub` "
        f"so that code loading {repo_id} runs offline. Not the real model: its weights are "
        f"{weights} and its outputs mean nothing.\n"
    )

"""Model files from the Hugging Face Hub for ``Llama.from_pretrained``, through
``huggingface_hub`` (as llama-cpp-python) and its cache, offline included."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path


def download(
    repo_id: str,
    filename: str | None,
    additional_files: list[str] | None,
    local_dir: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
) -> Path:
    """The local path of the file of ``repo_id`` matching ``filename`` (a glob), with
    ``additional_files`` (split parts) beside it."""
    try:
        import huggingface_hub
    except ImportError as e:
        raise ImportError(
            f"Llama.from_pretrained({repo_id!r}, {filename!r}) needs huggingface_hub: "
            "pip install huggingface-hub"
        ) from e
    if filename is None:
        raise ValueError("from_pretrained needs filename (a name or glob of a .gguf file)")
    try:
        files = huggingface_hub.HfFileSystem().ls(repo_id, detail=False)
        names = [str(f).removeprefix(f"{repo_id}/") for f in files]
    except Exception:
        names = _cached_names(huggingface_hub, repo_id, cache_dir)
    matches = [n for n in names if fnmatch.fnmatch(n, filename)]
    if not matches:
        raise ValueError(
            f"no file of {repo_id!r} matches {filename!r} (the hub could not be reached "
            f"and its cache holds {sorted(names) or 'nothing'} for it)"
        )
    if len(matches) > 1:
        raise ValueError(f"{filename!r} matches several files of {repo_id!r}: {sorted(matches)}")

    def fetch(name: str) -> Path:
        try:
            path = huggingface_hub.hf_hub_download(
                repo_id=repo_id,
                filename=name,
                local_dir=None if local_dir is None else os.fspath(local_dir),
                cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            )
        except Exception as e:
            raise OSError(
                f"could not get {name!r} of {repo_id!r} from the Hugging Face Hub or its cache: {e}"
            ) from e
        return Path(path)

    for extra in additional_files or ():
        for name in [n for n in names if fnmatch.fnmatch(n, extra)] or [extra]:
            fetch(name)
    return fetch(matches[0])


def _cached_names(hub: object, repo_id: str, cache_dir: str | os.PathLike[str] | None) -> list[str]:
    """The files of ``repo_id``'s snapshots in the hub client's cache."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(None if cache_dir is None else os.fspath(cache_dir))
    except CacheNotFound:
        return []
    names: set[str] = set()
    for repo in info.repos:
        if repo.repo_id == repo_id:
            for revision in repo.revisions:
                for f in revision.files:
                    names.add(str(f.file_path.relative_to(revision.snapshot_path)))
    return sorted(names)

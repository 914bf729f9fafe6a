"""The Hugging Face Hub's cache as llama.cpp keeps it (common/hf-cache.cpp and the cache
half of common/download.cpp): ``models--ORG--REPO/`` with ``refs/main`` (the commit),
``blobs/`` (files by hash) and ``snapshots/COMMIT/`` (links to the blobs), under
``LLAMA_CACHE``, ``HF_HUB_CACHE``, ``HF_HOME``/hub or ~/.cache/huggingface/hub; and which
file of a repository a quantization tag means."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SIDECARS",
    "HfFile",
    "SplitInfo",
    "best_model",
    "best_sibling",
    "cache_directory",
    "cached_files",
    "finalize",
    "finalize_each",
    "hf_cache_directory",
    "inside",
    "list_cached_models",
    "remove_cached",
    "repo_path",
    "resolve_cached_path",
    "split_files",
    "split_info",
    "split_repo_tag",
    "valid_hex",
    "valid_repo",
    "write_atomic",
]

#: The GGUF files of a repository that are no model of their own.
SIDECARS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")


def cache_directory() -> Path:
    """fs_get_cache_directory: ``LLAMA_CACHE``, else the platform's cache folder's
    ``llama.cpp`` (``-mu`` and ``-dr`` files go here)."""
    if os.environ.get("LLAMA_CACHE"):
        return Path(os.environ["LLAMA_CACHE"])
    if os.name == "nt":
        return Path(os.environ["LOCALAPPDATA"]) / "llama.cpp"
    if os.uname().sysname == "Darwin":
        return Path.home() / "Library" / "Caches" / "llama.cpp"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llama.cpp"


def hf_cache_directory() -> Path:
    """hf_cache::get_cache_directory: the first of ``LLAMA_CACHE``, ``HF_HUB_CACHE``,
    ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``/hub, ``XDG_CACHE_HOME``/huggingface/hub,
    ~/.cache/huggingface/hub."""
    for var, sub in (
        ("LLAMA_CACHE", ""),
        ("HF_HUB_CACHE", ""),
        ("HUGGINGFACE_HUB_CACHE", ""),
        ("HF_HOME", "hub"),
        ("XDG_CACHE_HOME", "huggingface/hub"),
    ):
        if os.environ.get(var):
            return Path(os.environ[var]) / sub
    return Path.home() / ".cache" / "huggingface" / "hub"


def repo_path(repo: str) -> Path:
    return hf_cache_directory() / ("models--" + repo.replace("/", "--"))


_REPO = re.compile(r"[A-Za-z0-9_]+(?:[./-][A-Za-z0-9_]+)*")


def valid_repo(repo: str) -> bool:
    return 0 < len(repo) <= 256 and repo.count("/") == 1 and _REPO.fullmatch(repo) is not None


def valid_hex(text: str, *lengths: int) -> bool:
    return len(text) in lengths and re.fullmatch(r"[0-9a-fA-F]+", text) is not None


def inside(base: Path, sub: str) -> bool:
    if os.path.isabs(sub):
        return False
    b = os.path.normpath(os.path.abspath(base))
    t = os.path.normpath(os.path.join(b, sub))
    return t == b or t.startswith(b + os.sep)


def split_repo_tag(repo_with_tag: str) -> tuple[str, str]:
    """``org/repo:Q4_K_M`` as (``org/repo``, ``Q4_K_M``); a ValueError for anything but
    ``<user>/<model>[:quant]``."""
    parts = repo_with_tag.split(":")
    repo, tag = parts[0], (parts[-1] if len(parts) > 1 else "")
    if len(repo.split("/")) != 2:
        raise ValueError("invalid HF repo format, expected <user>/<model>[:quant]")
    return repo, tag


@dataclass(frozen=True)
class SplitInfo:
    prefix: str = ""  #: the name without ``.gguf`` and the shard suffix, tag included
    tag: str = ""  #: the quantization, upper case (``Q4_K_M``)
    index: int = 0
    count: int = 0


def split_info(path: str) -> SplitInfo:
    """get_gguf_split_info: a GGUF file name's shard and quantization tag."""
    if not path.endswith(".gguf"):
        return SplitInfo()
    prefix, index, count = path[: -len(".gguf")], 1, 1
    m = re.fullmatch(r"(.+)-([0-9]{5})-of-([0-9]{5})", prefix, re.IGNORECASE)
    if m:
        prefix, index, count = m.group(1), int(m.group(2)), int(m.group(3))
    t = re.search(r"[-.]([A-Z0-9_]+)$", prefix, re.IGNORECASE)
    return SplitInfo(prefix, t.group(1).upper() if t else "", index, count)


def quant_bits(name: str) -> int:
    m = re.search(r"[0-9]+", split_info(name).tag)
    return int(m.group(0)) if m else 0


@dataclass
class HfFile:
    """One file of a repository: where it is fetched from, where its bytes go
    (``local_path``: a blob, until it is linked into the snapshot at ``final_path``)."""

    repo_id: str
    path: str
    url: str = ""
    local_path: str = ""
    final_path: str = ""
    oid: str = ""


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _cached_ref(repo_dir: Path) -> str:
    refs = repo_dir / "refs"
    if not refs.is_dir():
        return ""
    fallback = ""
    for entry in sorted(refs.iterdir()):
        if not entry.is_file():
            continue
        lines = entry.read_text(errors="replace").splitlines()
        commit = lines[0] if lines else ""
        if not valid_hex(commit, 40):
            continue
        if entry.name == "main":
            return commit
        fallback = fallback or commit
    return fallback


def cached_files(repo: str = "") -> list[HfFile]:
    """hf_cache::get_cached_files: the snapshot files of one cached repository, or of
    all of them."""
    root = hf_cache_directory()
    if not root.is_dir() or (repo and not valid_repo(repo)):
        return []
    out = []
    for repo_dir in sorted(root.iterdir()):
        if not repo_dir.is_dir() or not repo_dir.name.startswith("models--"):
            continue
        repo_id = repo_dir.name[len("models--") :].replace("--", "/")
        if not valid_repo(repo_id) or (repo and repo_id != repo):
            continue
        commit = _cached_ref(repo_dir)
        snapshot = repo_dir / "snapshots" / commit
        if not commit or not snapshot.is_dir():
            continue
        for dirpath, _, names in os.walk(snapshot):
            for name in sorted(names):
                full = Path(dirpath) / name
                rel = full.relative_to(snapshot).as_posix()
                out.append(HfFile(repo_id, rel, local_path=str(full), final_path=str(full)))
    return out


def is_model(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.endswith(".gguf") and not any(s in name for s in SIDECARS)


def best_model(files: list[HfFile], tag: str) -> HfFile | None:
    """find_best_model: the first file of the tag (Q4_K_M, then Q8_0, when none is
    given; else the first model), its first shard."""
    for t in [tag] if tag else ["Q4_K_M", "Q8_0"]:
        pattern = re.compile(re.escape(t) + "[.-]", re.IGNORECASE)
        for f in files:
            s = split_info(f.path)
            if is_model(f.path) and pattern.search(f.path) and (s.count <= 1 or s.index == 1):
                return f
    if not tag:
        for f in files:
            s = split_info(f.path)
            if is_model(f.path) and (s.count <= 1 or s.index == 1):
                return f
    return None


def split_files(files: list[HfFile], primary: HfFile) -> list[HfFile]:
    s = split_info(primary.path)
    if s.count <= 1:
        return [primary]
    return [f for f in files if (t := split_info(f.path)).count == s.count and t.prefix == s.prefix]


def best_sibling(files: list[HfFile], model: str, keyword: str) -> HfFile | None:
    """find_best_sibling: the ``keyword`` file (a projector) in the model's folder or
    the deepest folder above it, of the closest quantization."""
    bits = quant_bits(model)
    model_dirs = model.split("/")[:-1]
    best: tuple[int, int] | None = None
    found = None
    for f in files:
        if not f.path.endswith(".gguf") or keyword not in f.path:
            continue
        dirs = f.path.split("/")[:-1]
        if dirs != model_dirs[: len(dirs)]:
            continue
        key = (-len(dirs), abs(quant_bits(f.path) - bits))
        if best is None or key < best:
            best, found = key, f
    return found


def finalize(f: HfFile) -> str:
    """hf_cache::finalize_file: link the blob into its snapshot (a relative symlink;
    a move where links cannot be made); the snapshot path."""
    local, final = Path(f.local_path), Path(f.final_path)
    if local == final or final.exists() or not local.exists():
        return f.final_path
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        final.symlink_to(os.path.relpath(local, final.parent))
    except OSError:
        shutil.move(str(local), str(final))
    return f.final_path


# ---- the cache -------------------------------------------------------------------------


def list_cached_models() -> list[str]:
    """common_list_cached_models: ``org/repo:TAG`` for each model file of the cache
    (first shards; projectors and draft heads left out)."""
    seen: dict[str, None] = {}
    for f in cached_files():
        s = split_info(f.path)
        if s.index != 1 or not s.tag or any(k in s.prefix for k in SIDECARS if k != "imatrix"):
            continue
        seen[f"{f.repo_id}:{s.tag}"] = None
    return list(seen)


def resolve_cached_path(repo_with_tag: str, hf_file: str = "") -> str:
    """common_download_resolve_path: the cached file ``-hf`` would load, or ""."""
    repo, tag = split_repo_tag(repo_with_tag)
    files = cached_files(repo)
    if hf_file:
        return next((f.local_path for f in files if f.path == hf_file), "")
    best = best_model(files, tag)
    return best.local_path if best else ""


def remove_cached(repo_with_tag: str) -> bool:
    """common_download_remove: a whole cached repository, or one tag's files (and the
    blobs nothing else links to)."""
    repo, tag = split_repo_tag(repo_with_tag)
    if not tag:
        if not valid_repo(repo) or not repo_path(repo).exists():
            return False
        shutil.rmtree(repo_path(repo), ignore_errors=True)
        return True
    files = [f for f in cached_files(repo) if split_info(f.path).tag == tag.upper()]
    if not files:
        return False
    blobs = set()
    for f in files:
        p = Path(f.local_path)
        if p.is_symlink():
            blobs.add(os.path.normpath(p.parent / os.readlink(p)))
        p.unlink(missing_ok=True)
    kept = {
        os.path.normpath(Path(f.local_path).parent / os.readlink(f.local_path))
        for f in cached_files(repo)
        if Path(f.local_path).is_symlink()
    }
    for b in blobs - kept:
        Path(b).unlink(missing_ok=True)
    return True


def finalize_each(files: Iterable[HfFile]) -> None:
    for f in files:
        finalize(f)

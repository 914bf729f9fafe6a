"""llama.cpp's model downloads (common/download.cpp), over Python's own HTTP(S), into the
caches of :mod:`llama_cy.hf_cache`: a Hugging Face repository (``-hf org/repo[:QUANT]``),
a plain URL (``-mu``, into ``LLAMA_CACHE``), or a Docker Hub model (``-dr``).

The same environment as llama.cpp: ``MODEL_ENDPOINT`` (or ``HF_ENDPOINT``) for the Hub,
``HF_TOKEN`` for its token, ``LLAMA_CACHE``, ``HF_HUB_CACHE``, ``HF_HOME``,
``XDG_CACHE_HOME`` for the caches. A file already cached is checked against the
server's ETag (a Hub file: used as it is); offline, only the cache is read. Every
network call has a timeout, so no network means an error, never a hang.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_cy.hf_cache import (
    HfFile,
    best_model,
    best_sibling,
    cache_directory,
    cached_files,
    finalize_each,
    inside,
    repo_path,
    split_files,
    split_info,
    split_repo_tag,
    valid_hex,
    valid_repo,
    write_atomic,
)

__all__ = [
    "DownloadError",
    "HfPlan",
    "Progress",
    "Resolved",
    "docker_resolve",
    "download_file",
    "hf_plan",
    "model_endpoint",
    "repo_files",
    "resolve",
]

_log = logging.getLogger("llama_cy.download")

TIMEOUT = 30.0  #: seconds a connection or a read may stall
ATTEMPTS = 3
RETRY_DELAY = 2  #: seconds before the second try, doubled before each next one


class DownloadError(RuntimeError):
    """A model that cannot be had: not found, no network, a failed transfer."""


#: (url, bytes so far, total bytes or 0) as a transfer goes; False cancels it.
Progress = Callable[[str, int, int], bool | None]


def _user_agent() -> str:
    from llama_cy._backend import LLAMA_CPP_BUILD

    return f"llama-cpp/{LLAMA_CPP_BUILD}"


# ---- the Hub's files -------------------------------------------------------------------


def model_endpoint() -> str:
    """common_get_model_endpoint: ``MODEL_ENDPOINT``, ``HF_ENDPOINT``, or the Hub; with
    a trailing slash."""
    url = os.environ.get("MODEL_ENDPOINT") or os.environ.get("HF_ENDPOINT")
    if not url:
        return "https://huggingface.co/"
    return url if url.endswith("/") else url + "/"


@dataclass
class HfPlan:
    """What ``-hf`` fetches: the model's files (its shards), a projector, or a
    repository's ``preset.ini`` instead (router mode)."""

    primary: HfFile | None = None
    model_files: list[HfFile] = field(default_factory=list)
    mmproj: HfFile | None = None
    preset: HfFile | None = None


def _open(req: urllib.request.Request | str, timeout: float = TIMEOUT) -> Any:
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        url = req.full_url if isinstance(req, urllib.request.Request) else req
        raise DownloadError(f"cannot reach {_masked(url)}: {reason}") from None


def _masked(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    return f"{p.scheme}://{p.hostname or ''}{':' + str(p.port) if p.port else ''}{p.path}"


def _api_get(url: str, token: str) -> Any:
    headers = {"User-Agent": _user_agent(), "Accept": "application/json"}
    if re.fullmatch(r"hf_[A-Za-z0-9]{34,253}", token or ""):
        headers["Authorization"] = f"Bearer {token}"
    elif token:
        _log.warning("invalid token, authentication disabled")
    try:
        with _open(urllib.request.Request(url, headers=headers)) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError, KeyError, TypeError):
            body = json.loads(body)["error"]
        raise DownloadError(f"GET failed ({e.code}): {body}") from None
    except ValueError as e:
        raise DownloadError(f"the Hub answered no JSON at {_masked(url)}: {e}") from None


def _repo_commit(repo: str, token: str) -> str:
    data = _api_get(f"{model_endpoint()}api/models/{repo}/refs", token)
    if not isinstance(data, dict) or not isinstance(data.get("branches"), list):
        _log.warning("missing 'branches' for '%s'", repo)
        return ""
    refs = repo_path(repo) / "refs"
    name = commit = ""
    for b in data["branches"]:
        if not isinstance(b, dict):
            continue
        n, c = b.get("name"), b.get("targetCommit")
        if not isinstance(n, str) or not isinstance(c, str) or not valid_hex(c, 40):
            continue
        if not inside(refs, n):
            continue
        if n == "main":
            name, commit = n, c
            break
        if not name:
            name, commit = n, c
    if not commit:
        return ""
    write_atomic(refs / name, commit)
    return commit


def repo_files(repo: str, token: str = "") -> list[HfFile]:
    """hf_cache::get_repo_files: the files of the repository's main branch, from the
    Hub's API (the commit is remembered in the cache's ``refs``)."""
    if not valid_repo(repo):
        _log.warning("invalid repository: %s", repo)
        return []
    commit = _repo_commit(repo, token)
    if not commit:
        _log.warning("failed to resolve commit for %s", repo)
        return []
    endpoint = model_endpoint()
    blobs = repo_path(repo) / "blobs"
    snapshot = repo_path(repo) / "snapshots" / commit
    tree = _api_get(f"{endpoint}api/models/{repo}/tree/{commit}?recursive=true", token)
    if not isinstance(tree, list):
        return []
    out = []
    for item in tree:
        if not isinstance(item, dict) or item.get("type") != "file":
            continue
        path = item.get("path")
        if not isinstance(path, str) or not inside(snapshot, path):
            continue
        lfs = item.get("lfs")
        oid = lfs.get("oid") if isinstance(lfs, dict) else item.get("oid")
        oid = oid if isinstance(oid, str) else ""
        if oid and not valid_hex(oid, 40, 64):
            continue
        final = snapshot / path
        local = blobs / oid if oid and not final.exists() else final
        out.append(
            HfFile(
                repo, path, f"{endpoint}{repo}/resolve/{commit}/{path}", str(local), str(final), oid
            )
        )
    return out


def hf_plan(
    repo_with_tag: str,
    hf_file: str = "",
    *,
    token: str = "",
    offline: bool = False,
    mmproj: bool = True,
) -> HfPlan:
    """common_download_get_hf_plan: which files ``-hf`` (with ``-hff``) means; the
    cache's when offline or when the Hub cannot be asked."""
    repo, tag = split_repo_tag(repo_with_tag)
    files: list[HfFile] = []
    if not offline:
        try:
            files = repo_files(repo, token)
        except DownloadError as exc:
            _log.error("%s", exc)
    if not files:
        files = cached_files(repo)
    plan = HfPlan()
    if not files:
        return plan
    preset = next((f for f in files if f.path == "preset.ini"), None)
    if preset is not None:
        plan.preset = preset
        return plan
    if hf_file:
        primary = next((f for f in files if f.path == hf_file), None)
        if primary is None:
            raise DownloadError(
                f"file '{hf_file}' not found in repository {repo}; its GGUF files: "
                + ", ".join(f.path for f in files if f.path.endswith(".gguf"))
            )
    else:
        primary = best_model(files, tag)
        if primary is None:
            raise DownloadError(
                f"no GGUF files found in repository {repo}" + (f" for the tag {tag}" if tag else "")
            )
    plan.primary = primary
    plan.model_files = split_files(files, primary)
    if mmproj:
        plan.mmproj = best_sibling(files, primary.path, "mmproj")
    return plan


# ---- one transfer ----------------------------------------------------------------------


def download_file(
    url: str,
    path: str,
    *,
    token: str = "",
    headers: dict[str, str] | None = None,
    offline: bool = False,
    skip_etag: bool = False,
    progress: Progress | None = None,
) -> None:
    """common_download_file_single: fetch ``url`` to ``path`` (through
    ``path.downloadInProgress``, resumed where the server takes ranges), unless the
    file is there and current: same ETag, or ``skip_etag`` (a Hub blob is named by
    its hash). Three tries, 2 s then 4 s apart."""
    exists = os.path.exists(path)
    if offline:
        if not exists:
            raise DownloadError(f"required file is not available in cache (offline mode): {path}")
        return
    if exists and skip_etag:
        return
    h = {"User-Agent": _user_agent(), **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    try:
        with _open(urllib.request.Request(url, headers=h, method="HEAD")) as r:
            etag = r.headers.get("ETag", "")
            total = int(r.headers.get("Content-Length") or 0)
            ranges = r.headers.get("Accept-Ranges", "none") != "none"
    except (urllib.error.HTTPError, DownloadError) as exc:
        if exists:
            return  # the cached copy, as llama.cpp does when HEAD fails
        raise DownloadError(f"cannot download {_masked(url)}: {exc}") from None
    if exists:
        if not etag or etag == _read(path + ".etag"):
            return
        os.remove(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".downloadInProgress"
    delay = RETRY_DELAY
    error = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            _log.warning("retrying after %d seconds...", delay)
            time.sleep(delay)
            delay *= RETRY_DELAY
        have = os.path.getsize(tmp) if os.path.exists(tmp) and ranges else 0
        if not ranges and os.path.exists(tmp):
            os.remove(tmp)
        try:
            _pull(url, tmp, h, have, total, progress)
        except _CancelledError:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise DownloadError(f"download of {_masked(url)} cancelled") from None
        except (DownloadError, urllib.error.HTTPError, OSError) as exc:
            error = str(exc)
            continue
        os.replace(tmp, path)
        if etag and not skip_etag:
            write_atomic(Path(path + ".etag"), etag)
        return
    raise DownloadError(f"download of {_masked(url)} failed after {ATTEMPTS} attempts: {error}")


class _CancelledError(Exception):
    pass


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def _pull(
    url: str, tmp: str, headers: dict[str, str], have: int, total: int, progress: Progress | None
) -> None:
    h = dict(headers)
    if have:
        h["Range"] = f"bytes={have}-"
    with _open(urllib.request.Request(url, headers=h)) as r:
        if have and r.status != 206:
            raise DownloadError(f"the server did not resume the download (status {r.status})")
        if not have and r.status != 200:
            raise DownloadError(f"status {r.status}")
        if not total and r.headers.get("Content-Length"):
            total = have + int(r.headers["Content-Length"])
        done = have
        with open(tmp, "ab") as out:
            if progress is not None and progress(url, done, total) is False:
                raise _CancelledError
            while chunk := r.read(1 << 20):
                out.write(chunk)
                done += len(chunk)
                if progress is not None and progress(url, done, total) is False:
                    raise _CancelledError
    if total and done != total:
        raise DownloadError(f"the transfer ended at {done} of {total} bytes")


def fetch_all(tasks: Iterable[tuple[HfFile, bool]], offline: bool, **kw: Any) -> None:
    """Download files in parallel (each once), as common_download_run_tasks; the bool
    says whether it is a Hub file (its blob never changes)."""
    unique = {f.local_path: (f, hub) for f, hub in tasks}
    if not unique:
        return

    def one(item: tuple[HfFile, bool]) -> None:
        f, hub = item
        download_file(f.url, f.local_path, offline=offline, skip_etag=hub, **kw)

    with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
        for result in pool.map(one, unique.values()):
            del result


# ---- Docker Hub (-dr) --------------------------------------------------------------------

DOCKER_AUTH = "https://auth.docker.io/token"
DOCKER_REGISTRY = "https://registry-1.docker.io/v2/"


def _get_json(url: str, headers: dict[str, str]) -> Any:
    try:
        with _open(
            urllib.request.Request(url, headers={"User-Agent": _user_agent(), **headers})
        ) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise DownloadError(f"GET {_masked(url)} failed with HTTP code {e.code}") from None
    except ValueError as e:
        raise DownloadError(f"no JSON at {_masked(url)}: {e}") from None


def docker_resolve(docker: str, *, offline: bool = False, progress: Progress | None = None) -> str:
    """common_docker_resolve_model: ``[ns/]name[:tag]`` (namespace ``ai``, tag
    ``latest`` by default) from Docker Hub's registry: its GGUF layer, into the cache as
    ``ns_name_tag.gguf``; the local path."""
    repo, _, tag = docker.partition(":")
    tag = tag or "latest"
    if "/" not in repo:
        repo = "ai/" + repo
    path = str(cache_directory() / f"{repo.replace('/', '_')}_{tag}.gguf")
    if offline:
        download_file("", path, offline=True)
        return path
    token = _get_json(
        f"{DOCKER_AUTH}?service=registry.docker.io&scope=repository:{repo}:pull", {}
    ).get("token")
    if not isinstance(token, str):
        raise DownloadError("Docker registry token response missing 'token' field")
    manifest = _get_json(
        f"{DOCKER_REGISTRY}{repo}/manifests/{tag}",
        {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.docker.distribution.manifest.v2+json,"
            "application/vnd.oci.image.manifest.v1+json",
        },
    )
    digest = next(
        (
            layer.get("digest")
            for layer in manifest.get("layers", [])
            if isinstance(layer, dict) and "gguf" in str(layer.get("mediaType", ""))
        ),
        None,
    )
    if not isinstance(digest, str):
        raise DownloadError("No GGUF layer found in Docker manifest")
    if not re.fullmatch(r"sha256:[a-fA-F0-9]{64}", digest):
        raise DownloadError(f"Invalid OCI digest format received in manifest: {digest}")
    url = f"{DOCKER_REGISTRY}{repo}/blobs/sha256:{digest[7:].lower()}"
    download_file(url, path, token=token, progress=progress)
    return path


# ---- what the model flags ask for --------------------------------------------------------


@dataclass
class Resolved:
    """The local files the model flags name once fetched: the model, its projector and
    draft model; or a repository's preset file (the server then runs as a router)."""

    model: str | None = None
    mmproj: str | None = None
    draft: str | None = None
    preset: str | None = None


def _default_path(url: str) -> str:
    name = url.split("#")[0].split("?")[0].rsplit("/", 1)[-1]
    return str(cache_directory() / name)


def _url_parts(url: str) -> list[str]:
    """common_download_get_all_parts: every shard's URL, from the first's."""
    s = split_info(url)
    if s.count <= 1:
        return [url]
    return [f"{s.prefix}-{i:05d}-of-{s.count:05d}.gguf" for i in range(1, s.count + 1)]


def resolve(
    *,
    model: str | None = None,
    hf_repo: str = "",
    hf_file: str = "",
    model_url: str = "",
    docker_repo: str = "",
    mmproj: str | None = None,
    mmproj_url: str = "",
    no_mmproj: bool = False,
    draft: str | None = None,
    hf_repo_draft: str = "",
    token: str = "",
    offline: bool = False,
    progress: Progress | None = None,
) -> Resolved:
    """common_models_handler_init and _apply: fetch what the flags name (in parallel,
    each file once) and say where it is."""
    out = Resolved(model, mmproj, draft)
    tasks: list[tuple[HfFile, bool]] = []
    finals: list[Callable[[], None]] = []
    if docker_repo:
        out.model = docker_resolve(docker_repo, offline=offline, progress=progress)
    if model_url:
        parts = _url_parts(model_url)
        base = os.path.dirname(model) if model and len(parts) > 1 else ""
        paths = [
            (model if model and len(parts) == 1 else "")
            or (
                os.path.join(base or ".", os.path.basename(_default_path(p)))
                if base
                else _default_path(p)
            )
            for p in parts
        ]
        tasks += [
            (HfFile("", p, p, path, path), False) for p, path in zip(parts, paths, strict=True)
        ]
        out.model = paths[0]
    if mmproj_url:
        path = mmproj or _default_path(mmproj_url)
        tasks.append((HfFile("", mmproj_url, mmproj_url, path, path), False))
        out.mmproj = path
    if hf_repo_draft:
        # -md names the file of the -hfd repository (common/arg.cpp)
        spec = hf_plan(hf_repo_draft, draft or "", token=token, offline=offline, mmproj=False)
        if spec.primary is None:
            raise DownloadError(f"nothing to load in repository {hf_repo_draft}")
        tasks += [(f, True) for f in spec.model_files]
        finals += [lambda: finalize_each(spec.model_files)]
        out.draft = spec.primary.final_path
    if hf_repo:
        want_mmproj = not no_mmproj and mmproj is None and not mmproj_url
        plan = hf_plan(hf_repo, hf_file, token=token, offline=offline, mmproj=want_mmproj)
        if plan.preset is not None:
            tasks.append((plan.preset, True))
            finals.append(lambda: finalize_each([plan.preset] if plan.preset else []))
            out.model, out.preset = None, plan.preset.final_path
        elif plan.primary is None:
            raise DownloadError(
                f"repository {hf_repo} has no files"
                + (" in the cache (offline mode)" if offline else "")
            )
        else:
            tasks += [(f, True) for f in plan.model_files]
            files = plan.model_files + ([plan.mmproj] if plan.mmproj else [])
            if plan.mmproj is not None:
                tasks.append((plan.mmproj, True))
                out.mmproj = plan.mmproj.final_path
            finals.append(lambda: finalize_each(files))
            out.model = plan.primary.final_path
    fetch_all(tasks, offline, token=token, progress=progress)
    for f in finals:
        f()
    return out

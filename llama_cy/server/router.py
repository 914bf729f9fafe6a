"""llama-server's router mode (tools/server/server-models.cpp): with no model given, the
server runs one child ``llama-cy serve`` per model it is asked for, on a loopback port
of its own, and forwards each request to the child its ``"model"`` names.

- The models: the presets of ``--models-preset``, the GGUF files of ``--models-dir``,
  and the demo model when its package is installed (:mod:`.presets`). The router's own
  flags are laid over every preset.
- At most ``--models-max`` children run; a request for another model waits in a FIFO
  queue (requests for one model share an entry) until an idle child, the least
  recently used, is stopped for it. A busy child is never stopped under a request.
- Children report their state on stdout and stop when told so on stdin, as
  llama-server's do (:mod:`.child`). Every change is broadcast to ``/models/sse``.
- For a server of another shape on the same machinery (llama-cpp-python's several-model
  server, in compat): ``command`` starts each child its own way, ``default_model`` takes
  a request that names no known model, and ``cached_models=False`` leaves the Hugging
  Face cache out of the list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from llama_cy import hf_cache
from llama_cy.server.child import CHILD_ADDR, CMD_EXIT, CMD_STATE, child_command
from llama_cy.server.modalities import from_projector
from llama_cy.server.presets import (
    LOAD_ON_STARTUP,
    STOP_TIMEOUT,
    Preset,
    PresetError,
    deduplicated,
    is_truthy,
    load_from_ini,
    load_from_models_dir,
)
from llama_cy.server.router_models import MODEL_ARGS, RESERVED, Model, names

__all__ = ["Model", "Router", "RouterError"]

_log = logging.getLogger("llama_cy.server.router")


class RouterError(Exception):
    """A router request that cannot be served; ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int = 400, type: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.type = type


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((CHILD_ADDR, 0))
        return int(s.getsockname()[1])


@dataclass
class _Waiting:
    """A FIFO queue entry: the requests waiting for one model (server_lru_sched)."""

    name: str
    waiters: int = 1
    loading: bool = False


class Router:
    """The models, their children, the queue for a free slot, and the SSE listeners.
    Everything runs on the server's event loop; ``changed`` wakes whoever waits on a
    model's state."""

    def __init__(
        self,
        base: Preset,
        *,
        models_dir: str | None = None,
        models_preset: str | None = None,
        models_max: int = 4,
        router_port: int = 0,
        extra: dict[str, Preset] | None = None,
        hf_token: str = "",
        command: Callable[[Model], list[str]] | None = None,
        default_model: str | None = None,
        cached_models: bool = True,
    ) -> None:
        self.base = base.copy()
        self.base.unset(*RESERVED, *MODEL_ARGS, "log_file")
        self.models_dir = models_dir
        self.models_preset = models_preset
        self.models_max = models_max
        self.router_port = router_port
        self.hf_token = hf_token  # for POST /models's look at the Hub
        self.extra = extra or {}  # the demo model, beside the folder and the presets
        #: how a model's child starts (its port is ``Model.port``); None: llama-cy serve
        #: over the model's preset
        self.command = command
        #: the model of a request that names none or an unknown one; None: refused
        self.default_model = default_model
        self.cached_models = cached_models  # the Hugging Face cache's models are listed
        self.models: dict[str, Model] = {}
        self.queue: list[_Waiting] = []
        self.listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self._changed: asyncio.Condition | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: a download ended: the cache is read again before the next answer
        self.need_reload = False
        self.startup: list[str] = []
        #: llama-server's test hook: loads and forwarded requests take 2 s longer, so
        #: that tests can see the queue at work
        self.fake_timing = bool(os.environ.get("LLAMA_SERVER_DEBUG_FAKE_TIMING"))
        self.load_models()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in the background, keeping a reference until it ends."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def changed(self) -> asyncio.Condition:
        if self._changed is None:  # made on the loop that uses it
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def broadcast(self, event: str, name: str, data: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"model": name, "event": event}
        if data is not None:
            message["data"] = data
        for q in self.listeners:
            q.put_nowait(message)

    # ---- the list of models --------------------------------------------------------

    def _presets(self) -> tuple[dict[str, Preset], dict[str, str], set[str]]:
        """Every model's preset (the sources cascaded, the router's flags over each),
        its source, and the models a preset's ``dedup-cache-models`` hides."""
        glob = Preset("*")
        custom: dict[str, Preset] = {}
        local: dict[str, Preset] = {}
        if self.models_dir:
            local = load_from_models_dir(self.models_dir)
        if self.models_preset:
            glob, custom = load_from_ini(self.models_preset)
        cached: dict[str, Preset] = {}
        if self.cached_models:
            cached = {n: Preset(n, {"hf_repo": n}) for n in hf_cache.list_cached_models()}
        final: dict[str, Preset] = {}
        source: dict[str, str] = {}
        for group, kind in ((cached, "cache"), (self.extra, "preset"), (local, "models_dir")):
            for name, p in group.items():
                final[name] = glob.copy(name)
                final[name].merge(p)
                source[name] = kind
        for name, p in custom.items():
            merged = glob.copy(name)
            merged.merge(p)
            if name in final:
                final[name].merge(merged)
            else:
                final[name] = merged
            source[name] = "preset"
        for p in final.values():
            p.merge(self.base)
        return final, source, deduplicated(custom, cached, source)

    def _model(self, name: str, source: str, preset: Preset) -> Model:
        m = Model(name, source, preset)
        m.aliases = names(preset.get("alias"))
        m.tags = names(preset.get("tags"))
        m.architecture = from_projector(preset.get("mmproj"))
        timeout = preset.get(STOP_TIMEOUT)
        if timeout is not None:
            try:
                m.stop_timeout = int(timeout)
            except ValueError:
                _log.warning("invalid stop-timeout value %r for model %r", timeout, name)
        m.args = self._args(m)
        return m

    def _args(self, m: Model) -> list[str]:
        return self._serve_args(m) if self.command is None else self.command(m)

    def _serve_args(self, m: Model) -> list[str]:
        """llama-cy serve over ``m``'s preset (a download worker's command too)."""
        p = m.preset.copy()
        p.unset(*RESERVED)
        p.options.update({"host": CHILD_ADDR, "port": str(m.port), "alias": m.name})
        return [*child_command(), *p.to_args()]

    def _checknames(self, models: dict[str, Model]) -> None:
        seen: dict[str, str] = {}
        for name in models:
            seen[name] = name
        for name, m in models.items():
            for alias in m.aliases:
                if alias in seen and seen[alias] != name:
                    raise PresetError(
                        f"alias '{alias}' for model '{name}' conflicts with model '{seen[alias]}'"
                    )
                seen[alias] = name

    def load_models(self) -> list[str]:
        """Read the sources (again): returns the running models whose preset changed or
        that left the sources, which the caller must stop (:meth:`reload`)."""
        self.need_reload = False
        final, source, hidden = self._presets()
        first = not self.models
        fresh = {n: self._model(n, source[n], p) for n, p in final.items()}
        self._checknames(fresh)
        stale: list[str] = []
        for name, old in list(self.models.items()):
            new = fresh.get(name)
            if old.running:
                if new is None or new.preset.options != old.preset.options:
                    stale.append(name)
                continue
            if old.status == "downloading":
                continue  # its worker still runs
            if new is None or old.status == "downloaded":
                del self.models[name]
        for name, new in fresh.items():
            known = self.models.get(name)
            if known is None:
                self.models[name] = new
            elif not known.running:
                known.preset, known.aliases, known.tags = new.preset, new.aliases, new.tags
                known.stop_timeout, known.args, known.exit_code = new.stop_timeout, new.args, 0
        for name, m in self.models.items():
            m.hidden = name in hidden
        if first:
            self.startup = [
                n for n, m in self.models.items() if is_truthy(m.preset.get(LOAD_ON_STARTUP) or "")
            ]
            if self.models_max > 0 and len(self.startup) > self.models_max:
                raise PresetError(
                    f"number of models to load on startup ({len(self.startup)}) exceeds "
                    f"models_max ({self.models_max})"
                )
        self._log_models()
        return stale

    async def reload(self) -> None:
        """``GET /models?reload=1``: re-read the sources, stopping the running models
        whose preset changed or went away."""
        for name in self.load_models():
            await self.unload(name)
            await self.wait(name, lambda m: not m.running)
        self.load_models()  # now stopped, the stale ones are updated or dropped
        self.broadcast("models_reload", "*")

    def _log_models(self) -> None:
        _log.info("available models (%d):", len(self.models))
        for name, m in self.models.items():
            _log.info("  [%10s] %s", m.source, name)

    def get(self, name: str) -> Model | None:
        if self.need_reload:
            self.load_models()
        if name in self.models:
            return self.models[name]
        return next((m for m in self.models.values() if name in m.aliases), None)

    def route(self, name: str) -> Model | None:
        """The model a request for ``name`` goes to: that one, else the default model."""
        m = self.get(name) if name else None
        if m is None and self.default_model is not None:
            m = self.get(self.default_model)
        return m

    # ---- children ------------------------------------------------------------------

    def _running(self) -> int:
        return sum(m.running for m in self.models.values())

    def has_capacity(self) -> bool:
        return self.models_max <= 0 or self._running() < self.models_max

    async def download(self, name: str) -> None:
        """``POST /models``: a worker child downloads the repository ``name`` into the
        cache (it takes no slot); its progress goes to /models/sse."""
        m = Model(name, "cache", Preset(name), status="downloading")
        self.models[name] = m
        m.port = _free_port()
        m.args = self._serve_args(m)
        env = {
            **os.environ,
            "LLAMA_SERVER_ROUTER_PORT": str(self.router_port),
            "LLAMA_SERVER_CHILD_MODE": "download",
            "LLAMA_ARG_HF_REPO": name,
        }
        await self._spawn_child(m, env)

    async def _spawn_child(self, m: Model, env: dict[str, str]) -> None:
        try:
            m.proc = await asyncio.create_subprocess_exec(
                *m.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # a Ctrl-C reaches the router, which stops them
            )
        except OSError as exc:
            m.status = "unloaded"
            raise RouterError(
                f"failed to spawn server instance: {exc}", 500, "server_error"
            ) from None
        self.broadcast("model_status", m.name, {"status": m.status})
        self._spawn(self._watch(m, m.proc))
        await self._notify()

    async def remove(self, name: str) -> None:
        """``DELETE /models``: stop a cache model (or its download) and delete its
        files from the cache."""
        m = self.models.get(name)
        if m is None:
            raise RouterError(f"model name={name} is not found", 404, "not_found_error")
        if m.source != "cache":
            raise RouterError(f"model name={name} is not removable (not from cache)")
        if m.proc is not None:
            self.request_stop(m, force=m.status in ("loading", "downloading"))
            await self.wait(name, lambda x: x.proc is None)
        ok = await asyncio.to_thread(hf_cache.remove_cached, name)
        if not ok:
            _log.warning("removing model name=%s from disk returned false", name)
        self.models.pop(name, None)
        self.broadcast("model_remove", name, {})

    async def load(self, name: str) -> None:
        """Start ``name``'s child (a no-op if one runs). Over the limit, the least
        recently used idle model is stopped first; with none idle, a RouterError."""
        if self.fake_timing:
            await asyncio.sleep(2)
        m = self.models[name]
        if m.status != "unloaded":
            return
        if not self.has_capacity():
            victim = self.pick_victim()
            if victim:
                _log.info("models_max limit reached, removing LRU name=%s", victim)
                await self.unload(victim)
                await self.wait(victim, lambda v: not v.running)
        if m.status != "unloaded":
            return
        if not self.has_capacity():
            raise RouterError("model limit reached, try again later", 500, "server_error")
        m.port = _free_port()
        m.args = self._args(m)
        m.status, m.loaded_info, m.exit_code = "loading", {}, 0
        m.last_used = time.monotonic()
        m.stopping = False
        env = {**os.environ, "LLAMA_SERVER_ROUTER_PORT": str(self.router_port)}
        _log.info("spawning server instance with name=%s on port %d", name, m.port)
        await self._spawn_child(m, env)

    async def _watch(self, m: Model, proc: asyncio.subprocess.Process) -> None:
        """Read a child's state lines and log, until it exits."""

        async def states() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                if line.startswith(CMD_STATE):
                    await self._child_state(m, proc, line[len(CMD_STATE) :])
                else:
                    _log.warning("[%5d] unexpected output on the command pipe: %s", m.port, line)

        async def logs() -> None:
            assert proc.stderr is not None
            async for raw in proc.stderr:
                sys.stderr.write(f"[{m.port:5d}] {raw.decode('utf-8', 'replace')}")

        await asyncio.gather(states(), logs())
        code = await proc.wait()
        _log.info("instance name=%s exited with status %d", m.name, code)
        if m.proc is not proc:
            return
        if m.status in ("downloading", "downloaded"):  # a download worker
            m.status, m.proc, m.stopping = "downloaded", None, False
            self.need_reload = True
            await self._notify()
        else:
            await self._set_status(m, "unloaded", exit_code=code)

    async def _child_state(self, m: Model, proc: Any, text: str) -> None:
        try:
            data = json.loads(text)
            state = data.get("state")
            payload = data.get("payload") or {}
        except (ValueError, AttributeError):
            _log.error("failed to parse child state update for name=%s", m.name)
            return
        if m.proc is not proc:
            return
        if state == "downloading":
            result = payload.get("result")
            if result in ("download_finished", "download_failed"):
                m.status = "downloaded"
                self.need_reload = True
                self.broadcast(result, m.name, {})
                self.request_stop(m)
                await self._notify()
            elif isinstance(payload.get("url"), str):
                progress = m.loaded_info.setdefault("progress", {})
                progress[payload["url"]] = {
                    "done": payload.get("downloaded", 0),
                    "total": payload.get("total", 0),
                }
                self.broadcast("download_progress", m.name, dict(m.loaded_info))
        elif state == "loading":
            await self._set_status(m, "loading", progress=payload)
        elif state == "ready":
            await self._set_status(m, "loaded", info=payload or None)
        elif state == "sleeping":
            await self._set_status(m, "sleeping")

    async def _set_status(
        self,
        m: Model,
        status: str,
        *,
        exit_code: int = 0,
        info: dict[str, Any] | None = None,
        progress: dict[str, Any] | None = None,
    ) -> None:
        m.status, m.exit_code = status, exit_code
        if status == "unloaded":
            m.stopping, m.proc = False, None
        if info is not None:
            m.loaded_info = info
        data: dict[str, Any] = {"status": status}
        if status == "unloaded":
            data["exit_code"] = exit_code
        if info is not None:
            data["info"] = info
        if progress:
            data["progress"] = progress
        self.broadcast("status_change", m.name, data)
        self.tick()
        await self._notify()

    async def unload(self, name: str) -> None:
        """Ask ``name``'s child to exit (kill it if it is still loading, or once its
        ``stop-timeout`` has passed)."""
        m = self.models.get(name)
        if m is None or not m.running or m.proc is None:
            return
        self.request_stop(m, force=m.status == "loading")

    def request_stop(self, m: Model, force: bool = False) -> None:
        if m.stopping or m.proc is None:
            return
        m.stopping = True
        proc = m.proc
        if force:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                proc.stdin.write(f"{CMD_EXIT}\n".encode())

        async def deadline() -> None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), m.stop_timeout)
                return
            _log.warning("force-killing model instance name=%s after timeout", m.name)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

        self._spawn(deadline())

    async def unload_all(self) -> None:
        for m in self.models.values():
            if m.running:
                self.request_stop(m, force=m.status == "loading")
        for m in list(self.models.values()):
            if m.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    await m.proc.wait()

    async def wait(self, name: str, done: Callable[[Model], bool]) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: name not in self.models or done(self.models[name]))

    # ---- the queue for a free slot (server_lru_sched) ------------------------------

    def _entry(self, name: str) -> _Waiting | None:
        return next((e for e in self.queue if e.name == name), None)

    def pick_victim(self) -> str:
        """The least recently used model that is up, idle, not stopping, and not
        wanted by a queued request; "" if there is none."""
        best: Model | None = None
        for m in self.models.values():
            if m.requests or m.status not in ("loaded", "sleeping") or m.stopping:
                continue
            if self._entry(m.name) is not None:
                continue
            if best is None or m.last_used < best.last_used:
                best = m
        return best.name if best else ""

    def tick(self) -> None:
        """Stop idle models while the queued requests outnumber the slots that are free
        or being freed."""
        if self.models_max <= 0 or not self.queue:
            return
        running = [m for m in self.models.values() if m.running]
        stopping = sum(m.stopping for m in running)
        needed = sum(not e.loading for e in self.queue)
        claimed = sum(
            e.loading and e.name in self.models and not self.models[e.name].running
            for e in self.queue
        )
        free = self.models_max - len(running) + stopping - claimed
        while free < needed:
            victim = self.pick_victim()
            if not victim:
                return
            _log.info("evicting idle LRU name=%s for a queued request", victim)
            self.request_stop(self.models[victim])
            free += 1

    def _join(self, name: str) -> None:
        entry = self._entry(name)
        if entry is not None:
            entry.waiters += 1
        else:
            self.queue.append(_Waiting(name))

    def _leave(self, name: str) -> None:
        entry = self._entry(name)
        if entry is not None:
            entry.waiters -= 1
            if entry.waiters <= 0:
                self.queue.remove(entry)

    def _try_claim(self, name: str) -> bool:
        if not self.queue or self.queue[0].name != name or self.queue[0].loading:
            return False
        if not self.has_capacity():
            return False
        self.queue[0].loading = True
        return True

    async def ensure_ready(
        self, name: str, gone: Callable[[], Awaitable[bool]] | None = None
    ) -> bool:
        """Wait until ``name``'s child takes requests, loading it when its turn in the
        queue comes. True if it waited. ``gone``: whether the client left (then the
        wait ends with a RouterError and the slot goes to the next in line)."""
        m = self.models[name]
        if not m.stopping and m.status in ("loaded", "sleeping"):
            return False
        queued = False
        if m.status == "unloaded" or m.stopping:
            self._join(name)
            self.tick()
            queued = True
        loaded = saw_loading = False
        try:
            while True:
                if name not in self.models:
                    break
                m = self.models[name]
                if m.stopping:
                    if not queued:
                        self._join(name)
                        self.tick()
                        queued = True
                elif m.status in ("loaded", "sleeping", "downloading", "downloaded"):
                    break  # up, or a download worker: nothing to wait for
                elif m.status == "loading":
                    saw_loading = True
                elif m.status == "unloaded":
                    if loaded or saw_loading:
                        if m.failed:
                            raise RouterError(
                                f"model name={name} failed to load", 500, "server_error"
                            )
                        break
                    if not queued:
                        break
                    if self._try_claim(name):
                        ok = True
                        try:
                            _log.info("slot available, loading queued model name=%s", name)
                            await self.load(name)
                            loaded = True
                        except RouterError as exc:
                            _log.warning("queued load of name=%s did not go through: %s", name, exc)
                            ok = False
                        if not ok:
                            entry = self._entry(name)
                            if entry is not None:
                                entry.loading = False
                        self.tick()
                        continue
                if gone is not None and await gone():
                    raise RouterError(f"request cancelled while waiting for model name={name}")
                async with self.changed:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self.changed.wait(), 0.2)
        except BaseException:
            if queued:
                self._leave(name)
            self.tick()  # a slot freed for this waiter goes to the next one
            raise
        # No tick here: the caller takes the model (its request count) before any other
        # task runs, so the model just loaded is not given up under it.
        if queued:
            self._leave(name)
        return True

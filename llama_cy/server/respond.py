"""A request's jobs run in the engine and their answer sent: one JSON response, or
server-sent events as the chunks come, each shaped by its route's shaper. A client that
goes away cancels its request at the engine's next step, streaming or not, unless the
request names a conversation (``X-Conversation-Id``: a resumable stream,
:mod:`.stream_sessions`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llama_cy.completion import CompletionChunk, join_chunks
from llama_cy.errors import LlamaError
from llama_cy.generation import Job
from llama_cy.openai_shapes import Shaper
from llama_cy.server import worker
from llama_cy.server.core import Server
from llama_cy.server.engine import Engine
from llama_cy.server.event_stream import EventStream, Last
from llama_cy.server.llama_server_shapes import LlamaServerShaper
from llama_cy.server.requests import lora_for, verbose
from llama_cy.server.schema import ApiError
from llama_cy.server.stream_sessions import StreamSession, conversation_id
from llama_cy.server.task import Task

__all__ = ["GoneError", "log_prompt", "run", "sse"]

_log = logging.getLogger("llama_cy.server")


def log_prompt(folder: str, job: Job, body: Mapping[str, Any]) -> None:
    """--log-prompts-dir: the request's prompt (a chat's, rendered) in a file named by
    the milliseconds since the start, as llama-server writes it; a failure is logged."""
    chat = job.chat
    prompt = chat.prompt if chat is not None else body.get("prompt")
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, indent=2)
    path = os.path.join(folder, f"{int(time.monotonic() * 1000):012d}.txt")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        _log.error("failed to create %s: %s", path, exc.strerror)


async def run(
    server: Server,
    request: Request,
    jobs: Sequence[tuple[Job, Shaper]],
    body: Mapping[str, Any],
    combine: Callable[[list[dict[str, Any]]], Any] | None = None,
    done_marker: bool = True,
    verbose_view: bool = True,
) -> Response:
    """Generate ``jobs`` in the engine, each shaped by its shaper: one response (the
    one job's dict, or ``combine`` of them all), or server-sent events of them all
    as they come. ``verbose_view``: a verbose request's answer carries llama-server's
    view of it (``__verbose``), unless the answer already is that view."""
    engine = server.generating()
    if server.settings.log_prompts_dir and jobs:
        log_prompt(server.settings.log_prompts_dir, jobs[0][0], body)
    # llama-server's stream extras, asked per request
    per_token = bool(body.get("timings_per_token"))
    progress = bool(body.get("return_progress")) and bool(body.get("stream"))
    # llama-server's per-request backend_sampling (its default: -bs)
    backend = body.get("backend_sampling")
    if per_token or progress or backend is not None:
        jobs = [
            (
                dataclasses.replace(
                    job,
                    timings_per_token=per_token,
                    progress=progress,
                    backend_sampling=backend,
                ),
                sh,
            )
            for job, sh in jobs
        ]
    conv = conversation_id(request)
    # llama-server's resumable stream: this request outlives its client, until it ends
    # or a stop cancels its session
    session = server.streams.create(conv) if conv else None
    try:
        # Every job's samplers first (grammars compile off the loop), then the jobs queued
        # together: a request's prompts start in the same step, as llama-server's tasks.
        built = [
            (
                job,
                engine.samplers(job)
                if _cheap(job)
                else await asyncio.to_thread(engine.samplers, job),
            )
            for job, _ in jobs
        ]
        tasks = engine.submit_all(
            built,
            cache_prompt=body.get("cache_prompt", server.settings.cache_prompt),
            cache_reuse=_cache_reuse(server, body),
            id_slot=body.get("id_slot", -1),
            lora=lora_for(server, body.get("lora")),
            whole=not body.get("stream"),
        )
    except BaseException:
        if session is not None:
            server.streams.evict(session)
        raise
    shapers = [shaper for _, shaper in jobs]
    if body.get("stream"):
        events = _events(
            _stopper(request, session),
            engine,
            tasks,
            shapers,
            done_marker,
            body.get("sse_ping_interval", server.settings.sse_ping_interval),
            heavy=max((job.n_logprobs or 0) for job, _ in jobs) > _HEAVY_PROBS,
            interrupt=server.settings.interrupt_requests,
        )
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if session is None:
            return EventStream(events, headers=headers)
        # A resumable stream's client may leave while its generation goes on: Starlette's
        # response stops reading the session's copy then.
        return StreamingResponse(
            server.streams.tee(session, events), media_type="text/event-stream", headers=headers
        )
    stop = _stopper(request, session)
    watchers = [asyncio.create_task(stop(engine, t)) for t in tasks]
    try:
        done = await asyncio.gather(*(_collect(engine, t) for t in tasks))
    except GoneError:  # nobody reads this answer; 499 is nginx's "client closed"
        return Response(status_code=499)
    finally:
        for w in watchers:
            w.cancel()
        for task in tasks:
            engine.cancel(task)
        if session is not None:  # an answer in one piece leaves no session behind
            server.streams.evict(session)

    def answer() -> Any:
        out = []
        for (job, shaper), task, chunks in zip(jobs, tasks, done, strict=True):
            shaper.slot = task.slot
            whole = join_chunks(chunks)
            shaped = shaper.whole(whole)
            if verbose_view and verbose(server, body):
                # llama-server's debugging extra: the request as /completion shows it.
                view = LlamaServerShaper(server, job, body, index=shaper.index)
                view.slot = task.slot
                shaped["__verbose"] = view.whole(whole)
            out.append(shaped)
        if combine is not None:
            return combine(out)
        return out[0] if len(out) == 1 else out

    # Log-probabilities can make an answer of many megabytes (top_logprobs up to the
    # vocabulary): such an answer is shaped and encoded off the event loop.
    n_probs = max((job.n_logprobs or 0) for job, _ in jobs)
    if sum(len(c) for c in done) * (1 + n_probs) <= _LARGE_ANSWER:
        return JSONResponse(answer())
    encoded = await worker.run(lambda: worker.dumps(answer()))
    return Response(encoded, media_type="application/json")


def _cheap(job: Job) -> bool:
    """Whether ``job``'s samplers build in microseconds, on the loop: no grammar to
    compile, no DRY sampler (its set-up scans the vocabulary: milliseconds), no long
    logit bias. A trip to a thread costs the loop a wake-up for each request."""
    p = job.params
    return (
        p.grammar is None
        and p.dry_multiplier == 0.0
        and len(p.logit_bias or ()) <= 256
        and job.reasoning_budget is None
    )


#: Chunks times (1 + top log-probabilities) above which an answer is built off the loop.
_LARGE_ANSWER = 20_000
#: Top log-probabilities per token above which each streamed chunk is built off the loop.
_HEAVY_PROBS = 1_000


async def _events(
    stop: Stopper,
    engine: Engine,
    tasks: list[Task],
    shapers: list[Shaper],
    done_marker: bool,
    ping: float,
    *,
    heavy: bool = False,
    interrupt: bool = False,
) -> AsyncIterator[str]:
    """The server-sent events of ``tasks``; ``heavy``: each chunk carries so many
    log-probabilities that its events are built off the event loop; ``interrupt``: the
    stream ends once another request waits for a slot (llama-cpp-python's
    ``interrupt_requests``, which ends a stream when a request waits for its lock)."""

    def events_of(shaper: Shaper, chunk: CompletionChunk) -> list[str]:
        named = shaper.sse_event_names
        return [sse(d, d["type"] if named else None, pieces=heavy) for d in shaper.chunk(chunk)]

    watchers = [asyncio.create_task(stop(engine, t)) for t in tasks]
    n_open = len(tasks)  # tasks whose last chunk has not come yet
    try:
        async for ready in _merge(engine, tasks, ping if ping > 0 else None):
            if not ready:  # quiet for a while: some clients time out without this
                yield ":\n\n"
                continue
            # What came in one step (or while the loop was busy) goes out in one write.
            events: list[str] = []
            for i, chunk in ready:
                shaper = shapers[i]
                shaper.slot = tasks[i].slot
                if heavy:
                    events += await worker.run(events_of, shaper, chunk)
                else:
                    events += events_of(shaper, chunk)
                if chunk.stop_reason is not None:
                    n_open -= 1
            if not n_open:  # the last events, [DONE] and the end of the body: one write
                yield Last("".join(events) + ("data: [DONE]\n\n" if done_marker else ""))
                continue  # the tasks' iterators end by themselves
            yield "".join(events)
            if interrupt and engine.n_waiting:
                break
        if n_open:
            yield Last("data: [DONE]\n\n" if done_marker else "")
    except GoneError:
        return
    except Exception as exc:  # the status line is sent: the error goes in the stream
        status = 400 if isinstance(exc, ValueError) else 500
        kind = "invalid_request_error" if status == 400 else "server_error"
        yield Last(sse(ApiError(status, str(exc), kind).body()))
    finally:
        for w in watchers:
            w.cancel()
        for task in tasks:
            engine.cancel(task)


class GoneError(LlamaError):
    """The client went away; its request was cancelled."""


Stopper = Callable[[Engine, Task], Coroutine[Any, Any, None]]


def _stopper(request: Request, session: StreamSession | None) -> Stopper:
    """What cancels a request's tasks: its client leaving, or for a resumable stream
    only a stop (DELETE /v1/stream, or a newer request on the conversation)."""

    async def on_disconnect(engine: Engine, task: Task) -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                break
        engine.cancel(task)
        task.put(GoneError("the client disconnected"))

    async def on_stop(engine: Engine, task: Task) -> None:
        assert session is not None
        await session.cancelled.wait()
        engine.cancel(task)
        task.put(GoneError("the stream was stopped"))

    return on_disconnect if session is None else on_stop


async def _collect(engine: Engine, task: Task) -> list[CompletionChunk]:
    return [c async for ready in engine.ready(task, None) for c in ready]


async def _merge(
    engine: Engine, tasks: list[Task], ping: float | None
) -> AsyncIterator[list[tuple[int, CompletionChunk]]]:
    """The chunks of several tasks as they come, with the task's index, in lists of
    those ready at once; an empty list after ``ping`` seconds without any."""
    if len(tasks) == 1:
        async for ready in engine.ready(tasks[0], ping):
            yield [(0, chunk) for chunk in ready]
        return
    streams = {i: engine.ready(t, None) for i, t in enumerate(tasks)}  # pings: below
    pending: dict[asyncio.Task[list[CompletionChunk] | None], int] = {}
    try:
        for i, it in streams.items():
            pending[asyncio.create_task(_next(it))] = i
        while pending:
            done, _ = await asyncio.wait(pending, timeout=ping, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                yield []
                continue
            out = []
            for fut in sorted(done, key=lambda f: pending[f]):
                i = pending.pop(fut)
                chunks = fut.result()
                if chunks is None:  # that task has ended
                    continue
                out += [(i, chunk) for chunk in chunks]
                pending[asyncio.create_task(_next(streams[i]))] = i
            if out:
                yield out
    finally:
        for fut in pending:
            fut.cancel()
        for it in streams.values():
            await it.aclose()


async def _next(it: AsyncIterator[list[CompletionChunk]]) -> list[CompletionChunk] | None:
    try:
        return await anext(it)
    except StopAsyncIteration:
        return None


#: json.dumps with arguments builds an encoder per call; a streamed token needs one call
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def sse(obj: Any, event: str | None = None, *, pieces: bool = False) -> str:
    """One server-sent event with ``obj`` as JSON (and a name, as Anthropic's events);
    ``pieces``: encoded in short C calls (:func:`worker.dumps`), for a large ``obj``."""
    data = worker.dumps(obj, allow_nan=True).decode("utf-8") if pieces else _encode(obj)
    return f"event: {event}\ndata: {data}\n\n" if event else f"data: {data}\n\n"


def _cache_reuse(server: Server, body: Mapping[str, Any]) -> int:
    """A request's ``n_cache_reuse`` (llama-server's task field), else --cache-reuse;
    media in the server's prompts turn it off, as in llama-server."""
    value = body.get("n_cache_reuse")
    if value is None:
        value = server.settings.cache_reuse
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ApiError(400, "n_cache_reuse must be an integer >= 0", param="n_cache_reuse")
    return 0 if server.mtmd is not None else value

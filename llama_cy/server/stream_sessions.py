"""llama-server's resumable streams (tools/server/server-stream.cpp): a generation asked
with an ``X-Conversation-Id`` header writes its server-sent events into a session as
well as to its client, and goes on when the client leaves, until it ends or a
``DELETE /v1/stream`` stops it. ``GET /v1/stream?conv_id=&from=N`` replays the session
from byte N and follows it live; ``POST /v1/streams/lookup`` tells the state of the
sessions whose ids the caller names. One session per conversation id: a new request
cancels the one before. A session keeps its last 4 MiB, and is dropped 5 minutes after
it ends.

Beyond llama-server, for hostile clients: a reader is handed the session's bytes
:data:`READ_CHUNK` at a time (a reader that reads nothing holds one chunk, not a copy of
the whole buffer), a session takes at most :data:`MAX_READERS` readers, and a lookup
finds each id's sessions through an index, not a scan of them all."""

from __future__ import annotations

import asyncio
import itertools
import time
import types
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Any

from starlette.requests import Request

__all__ = [
    "MAX_BYTES",
    "MAX_READERS",
    "READ_CHUNK",
    "TTL_SECONDS",
    "ConvModels",
    "StreamSession",
    "StreamSessions",
    "conversation_id",
]

MAX_BYTES = 4 * 1024 * 1024  #: STREAM_SESSION_MAX_BYTES: the bytes a session keeps
TTL_SECONDS = 300  #: STREAM_SESSION_TTL_SECONDS: how long an ended session is kept
MAX_READERS = 16  #: readers one session serves at once (llama-server: no limit)
READ_CHUNK = 64 * 1024  #: the most bytes a reader is handed at a time


def conversation_id(request: Request) -> str:
    """The request's ``X-Conversation-Id`` ("" without one: no session)."""
    return request.headers.get("x-conversation-id", "")


class StreamSession:
    """One generation's event bytes: the last :data:`MAX_BYTES` of them, counted from the
    first (``dropped`` bytes fell off the front)."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.started_at = int(time.time())
        self.completed_at = 0  #: unix seconds once it ended, else 0
        self.dropped = 0
        self.cancelled = asyncio.Event()  #: a stop, or a newer request on the conversation
        self._buffer = bytearray()
        self._changed = asyncio.Event()
        self._readers: weakref.WeakSet[types.AsyncGeneratorType[bytes, None]] = weakref.WeakSet()

    @property
    def done(self) -> bool:
        return self.completed_at != 0

    @property
    def total(self) -> int:
        """The bytes that ever entered the session."""
        return self.dropped + len(self._buffer)

    def append(self, data: bytes) -> None:
        if self.done or not data:
            return
        self._buffer += data
        if len(self._buffer) > MAX_BYTES:
            cut = len(self._buffer) - MAX_BYTES
            del self._buffer[:cut]
            self.dropped += cut
        self._wake()

    def finish(self) -> None:
        if not self.done:
            self.completed_at = int(time.time())
            self._wake()

    def cancel(self) -> None:
        self.cancelled.set()
        self.finish()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    @property
    def readers(self) -> int:
        """The readers that :meth:`read` has handed out and that have not ended (a reader
        whose client left ends at its next wait; whoever still holds the object)."""
        return sum(1 for r in self._readers if r.ag_frame is not None)

    def read(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from ``offset`` on, as they come, until the session ends (or the
        reader falls behind what is kept: then it stops). A reader counts from this
        call until it is gone, begun or not."""
        reader = self._read(offset)
        assert isinstance(reader, types.AsyncGeneratorType)
        self._readers.add(reader)
        return reader

    async def _read(self, offset: int) -> AsyncGenerator[bytes, None]:
        while offset >= self.dropped:
            if offset < self.total:
                start = offset - self.dropped
                with memoryview(self._buffer) as view:  # released before the buffer moves
                    chunk = view[start : start + READ_CHUNK].tobytes()
                offset += len(chunk)
                yield chunk
                continue
            if self.done:
                return
            await self._changed.wait()

    def state(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "is_done": self.done,
            "total_bytes": self.total,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }


class StreamSessions:
    """The live sessions by conversation id (server-stream.cpp's session manager)."""

    def __init__(self) -> None:
        self._sessions: dict[str, StreamSession] = {}
        #: id -> the keys "<id>::<model>..." of its sessions (a dict keeps their order)
        self._variants: dict[str, dict[str, None]] = {}
        self._pumps: set[asyncio.Task[None]] = set()

    def _bases(self, key: str) -> list[str]:
        """The ids whose lookup finds ``key`` besides itself: each prefix before a
        ``::``."""
        out, at = [], key.find("::")
        while at != -1:
            out.append(key[:at])
            at = key.find("::", at + 1)
        return out

    def _add(self, key: str, session: StreamSession) -> None:
        if key not in self._sessions:
            for base in self._bases(key):
                self._variants.setdefault(base, {})[key] = None
        self._sessions[key] = session

    def _drop(self, key: str) -> StreamSession | None:
        session = self._sessions.pop(key, None)
        if session is not None:
            for base in self._bases(key):
                variants = self._variants.get(base)
                if variants is not None:
                    variants.pop(key, None)
                    if not variants:
                        del self._variants[base]
        return session

    def _sweep(self) -> None:
        cutoff = time.time() - TTL_SECONDS
        for key, s in list(self._sessions.items()):
            if s.done and s.completed_at <= cutoff:
                self._drop(key)

    def create(self, conversation_id: str) -> StreamSession:
        """A new session for the conversation; the one it had is cancelled."""
        self._sweep()
        previous = self._sessions.get(conversation_id)
        session = StreamSession(conversation_id)
        self._add(conversation_id, session)
        if previous is not None:
            previous.cancel()
        return session

    def get(self, conversation_id: str) -> StreamSession | None:
        self._sweep()
        return self._sessions.get(conversation_id)

    def lookup(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """The sessions of ``ids``: each id's own, and those of ``<id>::<model>``."""
        self._sweep()
        out = []
        for rid in ids:
            exact = self._sessions.get(rid)
            if exact is not None:
                out.append(exact.state())
            out += [self._sessions[key].state() for key in self._variants.get(rid, ())]
        return out

    def evict(self, session: StreamSession) -> None:
        """Drop ``session`` (if it is still its conversation's)."""
        if self._sessions.get(session.conversation_id) is session:
            self._drop(session.conversation_id)
        session.finish()

    def stop(self, conversation_id: str) -> None:
        """DELETE /v1/stream: cancel the conversation's generation and drop its session
        (nothing to do for one it does not hold)."""
        session = self._drop(conversation_id)
        if session is not None:
            session.cancel()

    def tee(self, session: StreamSession, events: AsyncIterator[str]) -> AsyncIterator[bytes]:
        """The answer of the request that opened ``session``: its ``events`` go into the
        session from a task of their own, which goes on when the client leaves, and to
        the client while it stays."""
        live: asyncio.Queue[bytes | None] = asyncio.Queue()
        attached = True

        async def pump() -> None:
            try:
                async for text in events:
                    data = text.encode("utf-8")
                    session.append(data)
                    if attached:
                        live.put_nowait(data)
            finally:
                session.finish()
                live.put_nowait(None)

        task = asyncio.create_task(pump())
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

        async def client() -> AsyncIterator[bytes]:
            nonlocal attached
            try:
                while (data := await live.get()) is not None:
                    yield data
            finally:
                attached = False

        return client()

    def close(self) -> None:
        """The server stops: no reader waits on."""
        for task in self._pumps:
            task.cancel()
        for s in self._sessions.values():
            s.finish()
        self._sessions.clear()
        self._variants.clear()


class ConvModels:
    """The router's conversation -> model map (server-models.h's conv_model_tracker):
    written when a request with a conversation id is routed, read by the stream routes
    to find the child that holds the session."""

    def __init__(self) -> None:
        self._map: dict[str, tuple[str, int]] = {}
        self._tickets = itertools.count(1)

    def remember(self, conversation_id: str, model: str) -> int:
        """The registration's ticket (0: nothing registered). A stop, or a newer request
        on the conversation, ends it (:meth:`alive` turns false)."""
        if not conversation_id or not model:
            return 0
        ticket = next(self._tickets)
        self._map[conversation_id] = (model, ticket)
        return ticket

    def alive(self, conversation_id: str, ticket: int) -> bool:
        entry = self._map.get(conversation_id)
        return entry is not None and entry[1] == ticket

    def lookup(self, conversation_id: str) -> str | None:
        entry = self._map.get(conversation_id)
        return entry[0] if entry is not None else None

    def forget(self, conversation_id: str) -> None:
        self._map.pop(conversation_id, None)

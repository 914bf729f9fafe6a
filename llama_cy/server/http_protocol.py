"""The HTTP/1.1 protocol the server runs: uvicorn's on httptools (llhttp, in C) where it
is installed, with llama-server's header names, a bound on a request's head and writes
that leave the GIL to the engine (:class:`GilFreeWrites`); else uvicorn's on h11 (pure
Python).

At GPU token rates a request's fixed cost decides its time to first token, and h11's
parsing and framing were a large part of what the event loop spends on a request: on
the tiny model (``bench/results/2026-11-28-cpu-http.md``), 8 streamed clients' first
token came in 12.2 ms on h11 and 10.5 on httptools (llama-server 8.7).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, cast

__all__ = ["HEAD_LIMIT", "HOLD_HEAD", "CasedName", "GilFreeWrites", "gil_free", "http_protocol"]

#: The most bytes a request's line and headers may take (h11's bound in uvicorn; llama-
#: server's cpp-httplib allows 8 KiB a line): a client that sends more, or keeps sending
#: a head that never ends, gets 400 and the connection is closed.
HEAD_LIMIT = 16 * 1024
#: The ASGI scope extension (``scope["extensions"][HOLD_HEAD]``) through which a response
#: asks that its head go out in one write with its first body: the connection's
#: :meth:`GilFreeWrites.hold`. Present only where the protocol below runs.
HOLD_HEAD = "llama_cy.hold_head"


class CasedName(bytes):
    """A response header name sent as spelled (``Access-Control-Allow-Origin``, as
    llama-server spells it; some clients and llama-server's own tests compare names
    exactly). uvicorn's protocols take ``name.lower()`` of each name they send; this
    name's lowercase is itself. Used only for names the protocol does not act on itself
    (never Content-Length, Transfer-Encoding or Connection)."""

    __slots__ = ()

    def lower(self) -> bytes:
        return self


class GilFreeWrites:
    """A connection's transport whose writes make their system call without the GIL.

    uvloop's ``transport.write`` sends at once, holding the GIL through the system call.
    A streamed token is one such write per client, and on the bench machine the writes
    were 60% of the time the event loop held the GIL at 8 streams (py-spy ``--gil``):
    time in which the engine thread could not take it between two steps. ``os.write``
    releases it.

    Bytes go to the socket directly only while the transport holds none queued, so their
    order is kept; what the socket does not take, and any error, goes to the transport,
    which queues it or closes the connection as it would have. Everything else is the
    transport's own. Not for TLS, whose bytes the transport encrypts.
    """

    __slots__ = ("_fd", "_held", "_holding", "_transport")

    def __init__(self, transport: asyncio.Transport, fd: int) -> None:
        self._transport = transport
        self._fd = fd
        self._holding = False
        self._held = b""

    def hold(self) -> None:
        """Keep the next write and send it with the one after it: a streamed response's
        head with its first event, one system call and one wake-up of the client where
        there would be two (the caller writes again at once)."""
        self._holding = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._holding:
            self._holding = False
            self._held = bytes(data)
            return
        if self._held:
            data, self._held = self._held + data, b""
        transport = self._transport
        if not transport.get_write_buffer_size() and not transport.is_closing():
            try:
                n = os.write(self._fd, data)
            except OSError:  # full (EAGAIN) or broken: the transport handles it
                n = 0
            if n == len(data):
                return
            data = memoryview(data)[n:]
        transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def gil_free(transport: asyncio.Transport) -> asyncio.Transport:
    """``transport`` with :class:`GilFreeWrites` where its socket is a POSIX descriptor
    carrying plain bytes (TCP or a UNIX socket, not TLS)."""
    sock = transport.get_extra_info("socket")
    # TLS as uvicorn tells it (its is_ssl; not imported: the app itself runs without uvicorn)
    if os.name != "posix" or sock is None or transport.get_extra_info("sslcontext"):
        return transport
    # uvicorn calls only what a transport has: write here, the rest delegated
    return cast(asyncio.Transport, GilFreeWrites(transport, sock.fileno()))


def http_protocol() -> Any:
    """What ``uvicorn.Config(http=...)`` takes: the httptools protocol class below, or
    ``"h11"`` where httptools is not installed."""
    try:  # the module imports httptools
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return "h11"

    class HttpProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol with a request's head bounded (llhttp and
        uvicorn keep a head's bytes as they come, with no limit of their own) and its
        writes made without the GIL."""

        _in_head = False
        _head_size = 0  #: the head's parsed bytes
        _head_read = 0  #: the bytes read while the head was incomplete

        def _grow_head(self, n: int) -> None:
            self._head_size += n
            if self._head_size > HEAD_LIMIT:
                # raised in a parser callback: uvicorn answers 400 and closes
                raise ValueError("the request's head is too large")

        # typed as uvicorn's own: a Transport, where asyncio.Protocol says BaseTransport
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(gil_free(transport))

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head, self._head_size, self._head_read = True, 0, 0

        def on_url(self, url: bytes) -> None:
            self._grow_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._grow_head(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            if isinstance(self.transport, GilFreeWrites):  # before uvicorn starts the app
                extensions = self.scope.setdefault("extensions", {})
                extensions[HOLD_HEAD] = {"hold": self.transport.hold}
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            # A head still incomplete after this read: llhttp holds its last header
            # until the header ends, so a client that never ends one is stopped here.
            super().data_received(data)
            if self._in_head and not self.transport.is_closing():
                self._head_read += len(data)
                if self._head_read > HEAD_LIMIT:
                    self._in_head = False
                    self.logger.warning("Invalid HTTP request received.")
                    self.send_400_response("Invalid HTTP request received.")

    return HttpProtocol

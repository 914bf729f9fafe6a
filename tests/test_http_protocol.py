"""The server's transport writes without the GIL (llama_cy.server.http_protocol): bytes
arrive whole and in order when the socket fills, a write the socket refuses closes the
connection as before, and TLS keeps its own transport."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from llama_cy.server.http_protocol import GilFreeWrites, gil_free

uvloop = pytest.importorskip("uvloop")

LOOPS: list[Callable[[], asyncio.AbstractEventLoop]] = [
    asyncio.new_event_loop,
    uvloop.new_event_loop,
]
#: 16 MiB in 256 writes: more than a local socket's buffers take, so the transport
#: queues the rest
PIECES = [bytes([i]) * 65536 for i in range(256)]


def _run(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
    main: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    loop = loop_factory()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("loop_factory", LOOPS, ids=["asyncio", "uvloop"])
def test_writes_arrive_whole_and_in_order_when_the_socket_fills(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """The sender writes piece by piece while the reader drains the socket slowly: some
    writes go straight to the socket, some queue in the transport behind others."""
    queued: list[int] = []

    class Sender(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            plain = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
            writes = gil_free(plain)
            assert isinstance(writes, GilFreeWrites)

            async def send() -> None:
                for i, piece in enumerate(PIECES):
                    writes.write(piece)
                    queued.append(plain.get_write_buffer_size())
                    if i % 16 == 15:
                        await asyncio.sleep(0.001)  # the reader drains some meanwhile
                writes.close()  # the transport's: it sends what it queued first

            self.sending = asyncio.ensure_future(send())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Sender, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
        data = bytearray()
        while piece := await asyncio.wait_for(reader.read(1 << 16), 60):
            data += piece
            await asyncio.sleep(0.001)  # slower than the sender: the socket fills
        writer.close()
        server.close()
        assert max(queued) > 0, "the socket took everything: the transport queued nothing"
        assert bytes(data) == b"".join(PIECES)

    _run(loop_factory, main)


@pytest.mark.parametrize("loop_factory", LOOPS, ids=["asyncio", "uvloop"])
def test_a_write_the_socket_refuses_closes_the_connection(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """os.write fails (EPIPE here); the transport, given the bytes, meets the same error
    and closes the connection as it would have without the direct write."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[tuple[GilFreeWrites, int]] = loop.create_future()
        lost: asyncio.Future[Exception | None] = loop.create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                plain = cast(asyncio.Transport, transport)
                writes = gil_free(plain)
                assert isinstance(writes, GilFreeWrites)
                made.set_result((writes, plain.get_extra_info("socket").fileno()))

            def connection_lost(self, exc: Exception | None) -> None:
                lost.set_result(exc)

        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        writes, fd = await asyncio.wait_for(made, 10)
        # The server's own sending side shut: the loop is not told, the next write fails.
        shut = socket.socket(fileno=os.dup(fd))
        shut.shutdown(socket.SHUT_WR)
        shut.close()
        writes.write(b"data: {}\n\n")  # raises nothing here
        assert isinstance(await asyncio.wait_for(lost, 10), OSError)
        client.close()
        server.close()

    _run(loop_factory, main)


@pytest.mark.parametrize("loop_factory", LOOPS, ids=["asyncio", "uvloop"])
def test_a_held_write_goes_out_with_the_next_one(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """hold(): the next write is kept (nothing reaches the client) and sent in front of
    the one after it; later writes go out as they come."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[GilFreeWrites] = loop.create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                writes = gil_free(cast(asyncio.Transport, transport))
                assert isinstance(writes, GilFreeWrites)
                made.set_result(writes)

        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        client.setblocking(False)
        writes = await asyncio.wait_for(made, 10)

        async def received() -> bytes:
            await asyncio.sleep(0.05)
            try:
                return client.recv(65536)
            except BlockingIOError:
                return b""

        writes.hold()
        writes.write(b"HTTP/1.1 200 OK\r\n\r\n")
        assert await received() == b""
        writes.write(b"data: 1\n\n")
        assert await received() == b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\n"
        writes.write(b"data: 2\n\n")
        assert await received() == b"data: 2\n\n"
        client.close()
        server.close()

    _run(loop_factory, main)


def test_tls_keeps_its_transport(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)),
            *("-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    client_ctx.check_hostname = False

    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen: list[asyncio.Transport] = []

        class Sender(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                writes = gil_free(cast(asyncio.Transport, transport))
                seen.append(writes)
                writes.write(b"hello over TLS")
                writes.close()

        server = await loop.create_server(Sender, "127.0.0.1", 0, ssl=served)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx)
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        server.close()
        assert not isinstance(seen[0], GilFreeWrites)
        assert data == b"hello over TLS"

    _run(uvloop.new_event_loop, main)

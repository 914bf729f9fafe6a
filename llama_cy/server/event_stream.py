"""The response that sends a request's server-sent events: each text its events iterator
gives goes out in one write, the first with the status line and headers (where the
server's protocol offers :data:`~llama_cy.server.http_protocol.HOLD_HEAD`), and the one
marked :class:`Last` also ends the body, in the same write. At GPU token rates a
request's fixed cost is counted in writes: Starlette's ``StreamingResponse`` ends every
body with an empty write of its own, after the ``[DONE]`` event's, and (under ASGI
before 2.4) runs each response in a task group beside a second reader of the client's
messages; a request's stopper (``respond._stopper``) already reads them."""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from llama_cy.server.http_protocol import HOLD_HEAD

__all__ = ["EventStream", "Last"]


class Last(str):
    """The stream's closing text: what follows it is not sent."""

    __slots__ = ()


class EventStream(StreamingResponse):
    """Server-sent events (``text/event-stream``) from an async iterator of text.

    The iterator must end once its client is gone (the request's stopper sees the
    disconnect and cancels its tasks): no reader of the client's messages runs here.
    """

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        hold = scope.get("extensions", {}).get(HOLD_HEAD, {}).get("hold")
        closed = False
        try:
            async for text in self.body_iterator:
                if closed:  # the iterator's own ending, after the closing text
                    continue
                closed = isinstance(text, Last)
                body = text.encode("utf-8") if isinstance(text, str) else bytes(text)
                if start is not None:  # the head goes with the first event, in one write
                    if hold is not None:
                        hold()
                    await send(start)
                    start = None
                await send({"type": "http.response.body", "body": body, "more_body": not closed})
            if start is not None:
                await send(start)
            if not closed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # ASGI 2.4: a write to a client that is gone
            raise ClientDisconnect() from None
        if self.background is not None:  # taken by the constructor: run, as Starlette does
            await self.background()

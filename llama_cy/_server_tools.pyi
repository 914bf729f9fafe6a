from collections.abc import Iterable, Mapping
from typing import Self, final

from llama_cy._handle import Handle
from llama_cy.errors import LlamaError

class ToolsError(LlamaError):
    """llama-server would refuse to start with these tools or MCP servers."""

@final
class ToolResponse:
    """One answer of ``/tools``: a body, or a stream read with ``next_chunk()``."""

    def __init__(self, *args: object, **kwargs: object) -> None: ...
    @property
    def status(self) -> int: ...
    @property
    def content_type(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def stream(self) -> bool: ...
    def next_chunk(self) -> bytes | None: ...
    def close(self) -> None: ...

@final
class ServerTools(Handle):
    """llama-server's agent tools and MCP servers."""

    def __new__(
        cls,
        tools: Iterable[str] = (),
        runtime: str = "",
        mcp_servers_config: str = "",
        mcp_servers_json: str = "",
    ) -> Self: ...
    @property
    def active(self) -> bool: ...
    def shutdown(self) -> None: ...
    def get(self) -> ToolResponse: ...
    def post(self, body: bytes, headers: Mapping[str, str] | None = None) -> ToolResponse: ...

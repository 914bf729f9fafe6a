"""``/tools``: llama-server's built-in agent tools and its MCP servers (``--tools``,
``--mcp-servers-json``, ``--mcp-servers-config``, ``--agent``), run by llama-server's own
code through :class:`llama_cy._server_tools.ServerTools`; plain HTTP, as llama-server's web UI
calls them. The MCP server is a small NDJSON JSON-RPC program the tests write."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import Server, sse_events
from tiny_model import write_tiny_llama

from llama_cy import cli
from llama_cy._server_tools import ServerTools, ToolsError
from llama_cy.errors import ClosedError
from llama_cy.server.flag_settings import settings_from_args

# An MCP server over stdio: echo(message), add(a, b) and sleep(seconds).
MCP_SERVER = r"""
import json, sys, time
TOOLS = [
    {"name": "echo", "description": "echo a message",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                     "required": ["message"]}},
    {"name": "add", "description": "add two numbers",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"},
                                                      "b": {"type": "number"}}}},
    {"name": "sleep", "description": "sleep a while",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
]
def text(s):
    return {"content": [{"type": "text", "text": s}]}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue  # a notification
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "test", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        args = params.get("arguments") or {}
        if params["name"] == "echo":
            result = text("echo: " + args["message"])
        elif params["name"] == "add":
            result = text(str(args["a"] + args["b"]))
        else:
            time.sleep(args["seconds"])
            result = text("slept")
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, llama_cpp_source: Path) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("m") / "tiny.gguf")


@pytest.fixture(scope="module")
def mcp_json(tmp_path_factory: pytest.TempPathFactory) -> str:
    script = tmp_path_factory.mktemp("mcp") / "mcp_server.py"
    script.write_text(MCP_SERVER)
    return json.dumps({"mcpServers": {"t": {"command": sys.executable, "args": [str(script)]}}})


@pytest.fixture(scope="module")
def server(tiny: Path, mcp_json: str) -> Iterator[Server]:
    tools = "read_file,exec_shell_command,get_info"
    with Server(
        tiny, "-t", "2", "--no-warmup", "--tools", tools, "--mcp-servers-json", mcp_json
    ) as s:
        yield s


def names(listing: Any) -> set[str]:
    assert isinstance(listing, list)
    return {t["definition"]["function"]["name"] for t in listing}


def test_tools_are_off_without_flags(tiny: Path) -> None:
    with Server(tiny, "-t", "2", "--no-warmup") as s:
        for method in ("GET", "POST"):
            status, _, body = s.request(method, "/tools", {"tool": "get_info"})
            assert status == 403
            assert body["error"]["type"] == "feature_disabled"
        assert s.request("GET", "/health")[0] == 200


def test_listing_names_the_enabled_tools_and_the_mcp_ones(server: Server) -> None:
    status, _, body = server.request("GET", "/tools")
    assert status == 200
    # the three built-in tools asked for, and the MCP server's as "<server>_<tool>"
    assert names(body) == {
        "read_file",
        "exec_shell_command",
        "get_info",
        "t_echo",
        "t_add",
        "t_sleep",
    }
    echo = next(t for t in body if t["tool"] == "t_echo")
    assert echo["definition"]["function"]["parameters"]["required"] == ["message"]


def test_read_file_in_the_requests_working_directory(server: Server, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    status, _, body = server.request(
        "POST",
        "/tools",
        {"tool": "read_file", "params": {"path": "notes.txt"}},
        headers={"x-tool-cwd": str(tmp_path)},
    )
    assert status == 200, body
    assert "second line" in json.dumps(body)
    # relative to another folder, the file is not there
    status, _, body = server.request(
        "POST", "/tools", {"tool": "read_file", "params": {"path": "notes.txt"}},
        headers={"x-tool-cwd": str(tmp_path / "nowhere")},
    )  # fmt: skip
    assert "second line" not in json.dumps(body)


def test_shell_command_streams_its_output(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = {"tool": "exec_shell_command", "params": {"command": "echo one; echo two"}}
    conn.request("POST", "/tools", json.dumps({**body, "stream": True}))
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type", "").startswith("text/event-stream")
    events = sse_events(resp.read().splitlines())
    conn.close()
    assert events[-1]["done"] is True
    assert "one\ntwo" in "".join(e.get("chunk", "") for e in events)


def test_mcp_tools_are_called(server: Server) -> None:
    status, _, body = server.request(
        "POST", "/tools", {"tool": "t_echo", "params": {"message": "hello"}}
    )
    assert status == 200, body
    assert "echo: hello" in json.dumps(body)
    status, _, body = server.request(
        "POST", "/tools", {"tool": "t_add", "params": {"a": 2, "b": 40}}
    )
    assert status == 200, body
    assert "42" in json.dumps(body)


def test_bad_tool_requests_get_json_errors(server: Server) -> None:
    # llama-server's /tools answers its errors as bare {"code", "message", "type"}
    status, _, body = server.request("POST", "/tools", {"tool": "write_file", "params": {}})
    assert status == 404  # not enabled
    assert body["message"] == 'unknown tool "write_file"'
    for bad in (b"{not json", b'{"params": {}}', b'{"tool": "read_file", "params": {}}'):
        status, _, body = server.request("POST", "/tools", raw=bad)
        assert status == 400, bad
        assert body["type"] == "invalid_request_error"
    # and the server still serves tools and completions
    assert server.request("GET", "/tools")[0] == 200
    status, _, done = server.request("POST", "/completion", {"prompt": "Hi", "n_predict": 2})
    assert status == 200, done


def test_tools_keep_cors_to_local_origins(server: Server) -> None:
    local = {"Origin": "http://localhost:5173"}
    _, headers, _ = server.request("GET", "/health", headers=local)
    assert headers.get("access-control-allow-origin") == "http://localhost:5173"
    _, headers, _ = server.request("GET", "/health", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers


def test_agent_and_cors_flags() -> None:
    def settings(*argv: str) -> Any:
        return settings_from_args(cli.parser().parse_args(["serve", *argv]), "m.gguf")

    agent = settings("--agent")
    assert (agent.tools, agent.ui_mcp_proxy, agent.cors_origins) == (("all",), True, "localhost")
    off = settings("--tools", "read_file", "--ui-mcp-proxy", "--no-agent")
    assert (off.tools, off.ui_mcp_proxy) == ((), False)
    assert settings("--tools", "read_file,get_info").tools == ("read_file", "get_info")
    assert settings("--mcp-servers-json", "{}").cors_origins == "localhost"
    assert settings("--tools", "all", "--cors-origins", "*").cors_origins == "*"  # as told
    assert settings().cors_origins == "*"


def test_bad_tool_setups_stop_the_server(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="failed to parse MCP config JSON"):
        Server(tiny, "--mcp-servers-json", "not json")
    with pytest.raises(RuntimeError, match="failed to open MCP config file"):
        Server(tiny, "--mcp-servers-config", str(tmp_path / "missing.json"))
    with pytest.raises(RuntimeError, match='unknown tool "no_such_tool"'):
        Server(tiny, "--tools", "no_such_tool")
    with pytest.raises(ToolsError, match="unknown tool"):
        ServerTools(["read_file", "no_such_tool"])


def test_mcp_config_file_and_shutdown_ends_a_call_in_flight(mcp_json: str, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(mcp_json)
    tools = ServerTools(mcp_servers_config=str(config))
    try:
        assert tools.active
        listing = json.loads(tools.get().body)
        assert names(listing) == {"t_echo", "t_add", "t_sleep"}  # no built-in tool asked for
        answers: list[Any] = []
        call = json.dumps({"tool": "t_sleep", "params": {"seconds": 30}}).encode()
        worker = threading.Thread(target=lambda: answers.append(tools.post(call)))
        worker.start()
        time.sleep(1.0)  # the call is waiting on the MCP server
        t0 = time.monotonic()
        tools.shutdown()  # what the server does first when it stops
        worker.join(10)
        assert not worker.is_alive()
        assert time.monotonic() - t0 < 5  # not the 30 s of the call
        answer = answers[0]
        assert "slept" not in answer.body.decode()
    finally:
        tools.close()
    assert tools.closed


def test_a_stream_outlives_close() -> None:
    """close() while a streamed tool runs: the stream is a user, so it finishes on live
    memory and the tools are freed after it."""
    tools = ServerTools(["exec_shell_command"])
    call = {"tool": "exec_shell_command", "params": {"command": "sleep 0.5; echo late"}}
    answer = tools.post(json.dumps({**call, "stream": True}).encode())
    assert answer.stream
    tools.close()
    assert tools.closed
    chunks = []
    while (chunk := answer.next_chunk()) is not None:
        chunks.append(chunk)
    events = sse_events(b"".join(chunks).splitlines())
    assert "late" in "".join(e.get("chunk", "") for e in events)
    assert events[-1]["done"] is True
    with pytest.raises(ClosedError):
        tools.get()

"""ServerTools: llama-server's ``/tools`` (its built-in agent tools and MCP servers).

The code is llama-server's own (``server-tools.cpp``, ``server-mcp.cpp``, linked from
llama.cpp's ``server-context`` library); requests and answers cross as JSON text
(``_server_tools_shim.h``), exactly as they cross HTTP in llama-server.
"""

cimport cython

from libcpp cimport bool as cbool
from libcpp.map cimport map as cmap
from libcpp.string cimport string
from libcpp.vector cimport vector

from llama_cy._handle cimport Handle

from llama_cy.errors import LlamaError


cdef extern from "_server_tools_shim.h" namespace "lcy" nogil:
    cdef cppclass Tools:
        Tools() except +
        void start(const vector[string] &enabled, const string &runtime,
                   const string &mcp_config, const string &mcp_json) except +
        void shutdown()
        cbool active

    cdef cppclass ToolCall:
        pass

    ToolCall *tools_get(Tools *t) except +
    ToolCall *tools_post(Tools *t, const cmap[string, string] &headers, const string &body) except +
    int call_status(const ToolCall *c)
    string call_content_type(const ToolCall *c) except +
    string call_data(const ToolCall *c) except +
    cbool call_is_stream(const ToolCall *c)
    cbool call_next(ToolCall *c, string &out) except +
    void call_free(ToolCall *c)


class ToolsError(LlamaError):
    """llama-server would refuse to start with these tools or MCP servers."""


@cython.final
@cython.no_gc_clear  # close() releases the ServerTools it points to
cdef class ToolResponse:
    """One answer of ``/tools``: ``status``, ``content_type`` and either ``body`` or, for a
    stream, the server-sent event chunks that ``next_chunk()`` gives until it returns None.

    ``close()`` ends a stream early: the tool is told to stop and its worker is joined.
    """

    cdef ToolCall *ptr
    cdef Handle owner  # its ServerTools: a user until the answer is freed
    cdef readonly int status
    cdef readonly str content_type
    cdef readonly bytes body
    cdef readonly bint stream

    def __cinit__(self):
        self.ptr = NULL

    def __init__(self):
        raise TypeError("ToolResponse comes from ServerTools.get() or ServerTools.post()")

    @staticmethod
    cdef ToolResponse _from(Handle owner, ToolCall *call):
        cdef ToolResponse r = ToolResponse.__new__(ToolResponse)
        r.ptr = call
        r.owner = owner
        owner._acquire()
        r.status = call_status(call)
        r.content_type = call_content_type(call).decode("utf-8", "replace")
        r.stream = call_is_stream(call)
        r.body = b"" if r.stream else bytes(call_data(call))
        if not r.stream:
            r._close()
        return r

    def next_chunk(self):
        """The next chunk of a stream (bytes), or None once it has ended."""
        if self.ptr == NULL:
            return None
        cdef string out
        cdef cbool more
        with nogil:
            more = call_next(self.ptr, out)
        chunk = bytes(out)
        if not more:
            self._close()
        return chunk

    def close(self):
        """Stop the tool if it is still streaming and free the answer; idempotent."""
        self._close()

    def __dealloc__(self):
        self._close()

    cdef void _close(self) noexcept:
        cdef ToolCall *call = self.ptr
        self.ptr = NULL
        if call != NULL:
            with nogil:
                call_free(call)  # joins a streaming worker: without the GIL
            self.owner._release()


@cython.final
cdef class ServerTools(Handle):
    """llama-server's agent tools (``--tools``: ``all`` or names such as ``read_file``,
    ``exec_shell_command``), its ``--tools-runtime`` isolate and its MCP servers
    (``--mcp-servers-config`` file, ``--mcp-servers-json`` text, Cursor's format).

    Construction spawns the MCP servers and lists their tools, as llama-server's start
    does; what would stop llama-server from starting raises :class:`ToolsError`.
    ``active`` says whether any tool is served (otherwise ``/tools`` answers 403).
    """

    cdef Tools *ptr

    def __cinit__(self, tools=(), str runtime="", str mcp_servers_config="",
                  str mcp_servers_json=""):
        self.ptr = NULL
        cdef vector[string] enabled = [t.encode() for t in tools]
        cdef string c_runtime = runtime.encode()
        cdef string c_config = mcp_servers_config.encode()
        cdef string c_json = mcp_servers_json.encode()
        self.ptr = new Tools()
        try:
            with nogil:
                self.ptr.start(enabled, c_runtime, c_config, c_json)
        except Exception as exc:
            self._dispose()
            raise ToolsError(str(exc)) from None
        self._closed = False

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        # Stops the MCP servers' processes (llama-server's shutdown).
        cdef Tools *t = self.ptr
        self.ptr = NULL
        if t != NULL:
            with nogil:
                del t

    @property
    def active(self):
        self._ensure_alive()
        return self.ptr.active

    def shutdown(self):
        """Stop talking to the MCP servers, as llama-server does when it stops: an MCP
        call in flight (another thread's ``post``) returns with an error at once, and
        later ones fail. The built-in tools keep working."""
        self._ensure_alive()
        self.ptr.shutdown()

    def get(self):
        """``GET /tools``: the tools' definitions (a JSON list)."""
        cdef ToolCall *call
        self._enter()
        try:
            with nogil:
                call = tools_get(self.ptr)
            # The answer counts as a user before this call stops being one: a close()
            # from another thread meanwhile must not free what a stream still uses.
            return ToolResponse._from(self, call)
        finally:
            self._release()

    def post(self, bytes body not None, headers=None):
        """``POST /tools``: run one tool (``{"tool", "params", "stream"}``), with the
        request's ``x-tool-cwd``, ``x-tool-runtime`` and ``x-resp-type`` headers. A tool
        that is not streamed runs to its end here, without the GIL."""
        cdef cmap[string, string] c_headers
        for key, value in (headers or {}).items():
            c_headers[key.encode("latin-1")] = value.encode("latin-1")
        cdef string c_body = body
        cdef ToolCall *call
        self._enter()
        try:
            with nogil:
                call = tools_post(self.ptr, c_headers, c_body)
            # The answer counts as a user before this call stops being one: a close()
            # from another thread meanwhile must not free what a stream still uses.
            return ToolResponse._from(self, call)
        finally:
            self._release()

# cython: language_level=3
"""llama.cpp's chat engine (its ``common`` library, what llama-server runs): chat
templates in its own Jinja engine, tool-call and reasoning parsers, JSON schema to
grammar, and the built-in (non-Jinja) templates of ``llama.h``.

Requests and results cross as JSON text (``_chat_shim.h``); :mod:`llama_cy.chat` gives
them types. Every C++ exception becomes a Python exception (``except +``): a template
that does not parse, a message list of the wrong shape, a schema with a bad ``$ref``.
"""

import json
import os

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libcpp cimport bool as cbool
from libcpp.string cimport string
from libcpp.vector cimport vector

cimport llama_cy._c.llama as c
from llama_cy._model cimport LlamaModel
from llama_cy._sampler cimport _wrap


cdef extern from "_chat_shim.h" nogil:
    cdef cppclass common_chat_templates:
        pass

    common_chat_templates *templates_init "lcy::templates_init"(
        const c.llama_model *model, const string &source) except +
    void templates_free "lcy::templates_free"(common_chat_templates *tmpls)
    string templates_source "lcy::templates_source"(
        const common_chat_templates *tmpls, const string &variant) except +
    string templates_caps "lcy::templates_caps"(const common_chat_templates *tmpls) except +
    string templates_apply "lcy::templates_apply"(
        const common_chat_templates *tmpls, const string &request) except +
    string schema_to_grammar "lcy::schema_to_grammar"(const string &schema) except +
    void log_verbosity "lcy::log_verbosity"(int level)
    c.llama_sampler *reasoning_budget "lcy::reasoning_budget"(
        const c.llama_vocab *vocab, const vector[vector[int32_t]] &start,
        const vector[vector[int32_t]] &end, const vector[int32_t] &forced,
        int32_t budget) except +

    cdef cppclass delta "lcy::delta":
        string content
        string reasoning_content
        int64_t index
        string name
        string arguments
        string id

    cdef cppclass parser "lcy::parser":
        parser(const string &config) except +
        string parse(const string &text, cbool is_partial) except +
        vector[delta] update(const string &text, cbool is_partial) except +
        string message() except +


cdef extern from "_render_pool.h" nogil:
    cdef cppclass render_done "lcy::render_done":
        uint64_t ticket
        cbool ok
        string out

    cdef cppclass render_pool "lcy::render_pool":
        render_pool(int n_threads, int wake_fd) except +
        void submit(uint64_t ticket, const common_chat_templates *tmpls, string request) except +
        vector[render_done] collect() except +


def common_log_verbosity(int level):
    """How much of llama.cpp's ``common`` library logs to stderr (its own log, not
    llama.cpp's callback): 0, the default here, nothing; 2 warnings; 3 information."""
    log_verbosity(level)


common_log_verbosity(0)


cdef inline string _utf8(str s):
    return s.encode("utf-8")


cdef inline str _str(const string &s):
    return s.decode("utf-8", "replace")


cdef class ChatTemplates:
    """A model's chat templates as llama.cpp's common library holds them.

    ``source`` replaces the model's template: Jinja text, or ``"chatml"``. Used with
    ``use_jinja=False`` in :meth:`apply`, the source may also be a built-in template's
    name (see :func:`chat_builtin_templates`). ValueError if the template does not parse.
    With no model (``source`` required), ``bos_token`` and ``eos_token`` render empty.
    The model is read here only: the templates keep nothing of it.
    """

    cdef common_chat_templates *ptr

    def __cinit__(self, LlamaModel model, str source=None):
        self.ptr = NULL
        cdef const c.llama_model *m = NULL
        if model is not None:
            model._ensure_alive()
            m = model.ptr
        elif not source:
            raise ValueError("a chat template needs a model or a template source")
        cdef string src = _utf8(source or "")
        try:
            with nogil:
                self.ptr = templates_init(m, src)
        except Exception as exc:
            raise ValueError(f"the chat template does not parse: {exc}") from None

    def __dealloc__(self):
        if self.ptr != NULL:
            templates_free(self.ptr)
            self.ptr = NULL

    def source(self, str variant=""):
        """The template's Jinja source (``variant="tool_use"``: the tool-use one, if any)."""
        return _str(templates_source(self.ptr, _utf8(variant)))

    def caps(self):
        """What the template supports (``supports_tools``, ``supports_system_role``, ...)."""
        return json.loads(_str(templates_caps(self.ptr)))

    def apply(self, request):
        """Render one request (a mapping of llama-server's chat inputs); a dict of
        ``common_chat_params``. ValueError for a request the engine refuses."""
        cdef string req = _utf8(json.dumps(request, ensure_ascii=False))
        cdef string out
        try:
            with nogil:
                out = templates_apply(self.ptr, req)
        except Exception as exc:
            raise ValueError(str(exc)) from None
        return json.loads(_str(out))


cdef class ChatRenderPool:
    """:meth:`ChatTemplates.apply` on native threads, for an event loop: a render
    neither waits for the GIL to start nor holds it to finish.

    :meth:`submit` queues a request and gives its ticket; when :meth:`fileno` is
    readable, :meth:`collect` gives every finished render as ``(ticket, result)``, the
    result being what ``apply`` returns or the ValueError it raises. The templates stay
    alive until their render is collected. RuntimeError where the platform has no pipe
    to wake a loop with (Windows).
    """

    cdef render_pool *ptr
    cdef int read_fd
    cdef int write_fd
    cdef uint64_t next_ticket
    cdef dict rendering  # ticket -> ChatTemplates: alive while a thread reads them

    def __cinit__(self, int n_threads):
        self.ptr = NULL
        self.read_fd = self.write_fd = -1
        if n_threads < 1:
            raise ValueError(f"a render pool needs at least 1 thread, not {n_threads}")
        if os.name == "nt":  # the pipe would not wake a proactor loop
            raise RuntimeError("chat renders on native threads need a POSIX pipe")
        self.rendering = {}
        self.next_ticket = 0
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        try:
            self.ptr = new render_pool(n_threads, self.write_fd)
        except Exception as exc:
            raise RuntimeError(str(exc)) from None

    def __dealloc__(self):
        del self.ptr  # drops what has not started, joins after what has (its templates are held)
        self.ptr = NULL
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)

    def fileno(self):
        """The pipe end that is readable once a render has finished."""
        return self.read_fd

    def submit(self, ChatTemplates templates not None, request):
        """Queue ``templates.apply(request)``; its ticket."""
        cdef string req = _utf8(json.dumps(request, ensure_ascii=False))
        cdef uint64_t ticket = self.next_ticket
        self.next_ticket += 1
        self.rendering[ticket] = templates
        try:
            self.ptr.submit(ticket, templates.ptr, req)
        except BaseException:
            del self.rendering[ticket]
            raise
        return ticket

    def collect(self):
        """The renders finished since the last call: ``(ticket, dict or ValueError)``."""
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        cdef vector[render_done] done = self.ptr.collect()
        out = []
        for d in done:
            del self.rendering[d.ticket]
            if d.ok:
                out.append((d.ticket, json.loads(_str(d.out))))
            else:
                out.append((d.ticket, ValueError(_str(d.out))))
        return out


cdef class ChatOutputParser:
    """One generation's output parser (``common_chat_parse``), built from the ``format``,
    ``parser``, ``generation_prompt``, ``reasoning_format`` and ``parse_tool_calls`` of a
    render. :meth:`update` also gives the deltas since the previous call."""

    cdef parser *ptr

    def __cinit__(self, config):
        self.ptr = NULL
        cdef string cfg = _utf8(json.dumps(config, ensure_ascii=False))
        try:
            self.ptr = new parser(cfg)
        except Exception as exc:
            raise ValueError(f"bad chat parser configuration: {exc}") from None

    def __dealloc__(self):
        del self.ptr
        self.ptr = NULL

    def parse(self, str text, bint partial=False):
        """The message in ``text`` (``partial``: more text may follow)."""
        cdef string t = _utf8(text)
        cdef string out
        try:
            with nogil:
                out = self.ptr.parse(t, partial)
        except Exception as exc:
            raise ValueError(f"the output does not parse: {exc}") from None
        return json.loads(_str(out))

    def update(self, str text, bint partial=True):
        """The deltas from the previous call's message to that of ``text``, the whole
        output so far: ``(content, reasoning_content, index, id, name, arguments)``
        tuples, ``index`` None unless the delta is a tool call's. No JSON crosses: at
        GPU token rates a streamed token should not pay for the whole reply's."""
        cdef string t = _utf8(text)
        cdef vector[delta] out
        try:
            with nogil:
                out = self.ptr.update(t, partial)
        except Exception as exc:
            raise ValueError(f"the output does not parse: {exc}") from None
        return [
            (_str(d.content), _str(d.reasoning_content), None if d.index < 0 else d.index,
             _str(d.id), _str(d.name), _str(d.arguments))
            for d in out
        ]

    def message(self):
        """The message of the last :meth:`update`, as a dict."""
        return json.loads(_str(self.ptr.message()))


def json_schema_to_grammar(schema):
    """GBNF for a JSON schema (a mapping, or its JSON text), by llama.cpp's converter;
    ValueError for a schema it cannot convert."""
    text = schema if isinstance(schema, str) else json.dumps(schema, ensure_ascii=False)
    cdef string s = _utf8(text)
    cdef string out
    try:
        with nogil:
            out = schema_to_grammar(s)
    except Exception as exc:
        raise ValueError(f"the JSON schema cannot be turned into a grammar: {exc}") from None
    return _str(out)


def reasoning_budget_sampler(start, end, forced, int32_t budget):
    """llama.cpp's reasoning-budget sampler (its ``common`` library's, as llama-server
    uses it), over token sequences: once one of ``start`` has been accepted, at most
    ``budget`` tokens pass (-1: no limit) before it forces ``forced``, unless one of
    ``end`` comes first. Put it first in a chain; feed it the prompt's opening of the
    reply with ``accept`` if that may already have started the block."""
    if not end or not all(end) or not all(start):
        raise ValueError("the reasoning budget needs non-empty start and end sequences")
    cdef vector[vector[int32_t]] s = [[int(t) for t in seq] for seq in start]
    cdef vector[vector[int32_t]] e = [[int(t) for t in seq] for seq in end]
    cdef vector[int32_t] f = [int(t) for t in forced]
    # No vocabulary: the sampler would keep a pointer into the model without keeping
    # the model alive; without one it forces at the budget, not at the next character.
    return _wrap(reasoning_budget(NULL, s, e, f, budget))


def chat_builtin_templates():
    """The names of the templates llama.cpp knows without Jinja (``chatml``, ``gemma``, ...)."""
    cdef int32_t n = c.llama_chat_builtin_templates(NULL, 0)
    cdef const char **names = <const char **>malloc(max(1, n) * sizeof(char *))
    if names == NULL:
        raise MemoryError()
    try:
        n = c.llama_chat_builtin_templates(names, n)
        return [names[i].decode() for i in range(n)]
    finally:
        free(names)

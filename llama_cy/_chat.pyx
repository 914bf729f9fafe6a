# cython: language_level=3
"""llama.cpp's built-in chat template engine (the fallback when Jinja2 cannot render)."""

from libc.stdint cimport int32_t
from libc.stdlib cimport free, malloc

cimport llama_cy._c.llama as c


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


def chat_apply_template(str template, messages, bint add_generation_prompt=True):
    """Render ``messages`` (``role``/``content`` mappings) with a built-in template.

    ``template`` is a name from :func:`chat_builtin_templates` or a Jinja source that
    llama.cpp recognises by its markers. ValueError if it recognises neither.
    """
    cdef list items = [(str(m["role"]).encode(), str(m.get("content") or "").encode())
                       for m in messages]
    cdef bytes tmpl = template.encode()
    cdef size_t n = len(items)
    cdef c.llama_chat_message *chat = <c.llama_chat_message *>malloc(max(1, n) * sizeof(c.llama_chat_message))
    if chat == NULL:
        raise MemoryError()
    cdef size_t i
    cdef int32_t size = 256
    cdef int32_t needed
    cdef bytearray buf
    try:
        for i in range(n):
            chat[i].role = <bytes>items[i][0]
            chat[i].content = <bytes>items[i][1]
        for i in range(n):
            size += len(items[i][0]) + len(items[i][1]) + 64
        while True:
            buf = bytearray(size)
            needed = c.llama_chat_apply_template(tmpl, chat, n, add_generation_prompt, <char *>buf, size)
            if needed < 0:
                raise ValueError(f"llama.cpp has no built-in chat template matching {template[:60]!r}")
            if needed <= size:
                return bytes(buf[:needed]).decode("utf-8", "replace")
            size = needed
    finally:
        free(chat)

"""LlamaSampler: llama.cpp's samplers and chains, and Python samplers inside them."""

import numpy as np

from cpython.ref cimport Py_INCREF, Py_DECREF
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.math cimport INFINITY
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memset, strcmp
from libcpp.vector cimport vector

from llama_cy._c cimport llama as c
from llama_cy._handle cimport Handle
from llama_cy._c.llama cimport llama_token, llama_token_data, llama_token_data_array
from llama_cy._context cimport LlamaContext
from llama_cy._model cimport LlamaModel

from llama_cy.errors import GrammarError, InvalidTokenError, LlamaError
from llama_cy.perf import SamplerPerf

# Compiled as C++ so that C++ exceptions escaping llama.cpp's C API become Python
# exceptions instead of std::terminate: a bad trigger regex (std::regex_error), a grammar
# made to accept a token it forbids (std::runtime_error), a token id outside the
# vocabulary (std::out_of_range), a window too large to allocate (std::bad_alloc). The
# checks in this module stop each of these before the call; this is the second line.
cdef extern from "llama.h" nogil:
    void _accept "llama_sampler_accept"(c.llama_sampler *smpl, llama_token token) except +
    void _apply "llama_sampler_apply"(c.llama_sampler *smpl, llama_token_data_array *cur_p) except +
    c.llama_sampler *_init_penalties "llama_sampler_init_penalties"(
        int32_t n_vocab, int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
        float penalty_present) except +
    c.llama_sampler *_init_dry "llama_sampler_init_dry"(
        const c.llama_vocab *vocab, float dry_multiplier, float dry_base,
        int32_t dry_allowed_length, int32_t dry_penalty_last_n, const char **seq_breakers,
        size_t num_breakers) except +
    c.llama_sampler *_init_grammar "llama_sampler_init_grammar"(
        const c.llama_vocab *vocab, const char *grammar_str, const char *grammar_root) except +
    c.llama_sampler *_init_grammar_lazy_patterns "llama_sampler_init_grammar_lazy_patterns"(
        const c.llama_vocab *vocab, const char *grammar_str, const char *grammar_root,
        const char **trigger_patterns, size_t num_trigger_patterns,
        const llama_token *trigger_tokens, size_t num_trigger_tokens) except +

# A greedy-only chain's pick, with llama.cpp's greedy answer (see the header).
# token_only and llama.cpp's greedy with a split argmax on devices (see the header).
cdef extern from "_backend_samplers.h" nogil:
    c.llama_sampler *llama_cy_token_only_init()
    c.llama_sampler *llama_cy_split_greedy_init()
    const c.llama_sampler_i *llama_cy_token_only_iface "&llama_cy_token_only_i"
    int64_t llama_cy_split_greedy_min
    bint llama_cy_split_greedy_on_host
    int64_t llama_cy_split_greedy_built


def _split_greedy_setup(int64_t min_logits, bint on_host):
    """Tests: split rows of at least ``min_logits``, on the host too; the old setup."""
    global llama_cy_split_greedy_min, llama_cy_split_greedy_on_host
    old = (llama_cy_split_greedy_min, bool(llama_cy_split_greedy_on_host))
    llama_cy_split_greedy_min, llama_cy_split_greedy_on_host = min_logits, on_host
    return old


def _split_greedy_built():
    """Tests: how many split-greedy graphs have been built in this process."""
    return llama_cy_split_greedy_built


cdef extern from "_argmax.h" nogil:
    int32_t _argmax "llama_cy_argmax"(const float *x, int32_t n)

cdef extern from "_candidates.h" nogil:
    void _fill_candidates "llama_cy_fill_candidates"(
        llama_token_data *cur, const float *logits, const llama_token *ids, const float *probs,
        int32_t n)

# sample_rows(): every row sampled in one call without the GIL. A C++ exception from a
# sampler leaves that row's token at -1 (sample() then raises it with its type).
cdef extern from *:
    """
    #include <exception>
    struct lcy_row {
        Py_ssize_t index;
        llama_sampler *smpl;
        const float *logits;
        llama_token_data *cur;  // NULL: a lone greedy sampler, the argmax taken directly
        size_t size;
        llama_token token;
    };
    static void lcy_sample_all(lcy_row *rows, size_t n, int32_t n_vocab) {
        for (size_t k = 0; k < n; ++k) {
            lcy_row &r = rows[k];
            try {
                if (r.cur == NULL) {
                    llama_token t = llama_cy_argmax(r.logits, n_vocab);
                    llama_sampler_accept(r.smpl, t);
                    r.token = t;
                    r.size = 0;
                    continue;
                }
                llama_cy_fill_in_order(r.cur, r.logits, n_vocab);
                llama_token_data_array cur_p = {r.cur, (size_t) n_vocab, -1, false};
                llama_sampler_apply(r.smpl, &cur_p);
                if (cur_p.selected < 0 || (size_t) cur_p.selected >= cur_p.size) {
                    continue;
                }
                llama_token t = cur_p.data[cur_p.selected].id;
                llama_sampler_accept(r.smpl, t);
                r.cur = cur_p.data;
                r.size = cur_p.size;
                r.token = t;
            } catch (const std::exception &) {
                r.token = -1;
            }
        }
    }
    """
    ctypedef struct _Row "lcy_row":
        Py_ssize_t index
        c.llama_sampler *smpl
        const float *logits
        llama_token_data *cur
        size_t size
        llama_token token
    void _sample_all "lcy_sample_all"(_Row *rows, size_t n, int32_t n_vocab) noexcept nogil

# The candidates as NumPy sees them: llama_token_data {int32 id; float logit; float p}.
CANDIDATE_DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


cdef class _PythonSampler:
    """The state behind a Python sampler in a native chain."""
    cdef object obj
    cdef bytes name
    cdef object error
    # The vocabulary size of the call in progress (0: unknown): ids written outside it
    # would send the samplers after this one out of bounds.
    cdef int n_vocab


cdef _PythonSampler _py(const c.llama_sampler *smpl):
    return <_PythonSampler>smpl.ctx


cdef object _candidates_view(llama_token_data_array *cur_p):
    if cur_p.size == 0:
        return np.empty(0, dtype=CANDIDATE_DTYPE)
    cdef char[::1] raw = <char[:cur_p.size * sizeof(llama_token_data)]><char *>cur_p.data
    return np.frombuffer(raw, dtype=CANDIDATE_DTYPE)


cdef const char *_py_name(const c.llama_sampler *smpl) noexcept with gil:
    return _py(smpl).name


cdef void _py_accept(c.llama_sampler *smpl, llama_token token) noexcept with gil:
    cdef _PythonSampler s = _py(smpl)
    accept = getattr(s.obj, "accept", None)
    if accept is None or s.error is not None:
        return
    try:
        accept(token)
    except BaseException as exc:
        s.error = exc


cdef void _py_apply(c.llama_sampler *smpl, llama_token_data_array *cur_p) noexcept with gil:
    cdef _PythonSampler s = _py(smpl)
    if s.error is None:
        try:
            # The view is only valid during this call: the candidates live in llama.cpp.
            view = _candidates_view(cur_p)
            selected = s.obj.apply(view)
            # One pass: a negative id is a huge one as uint32.
            if cur_p.size and s.n_vocab > 0 and view["id"].view(np.uint32).max() >= s.n_vocab:
                raise InvalidTokenError(
                    f"{s.name.decode()}: wrote a candidate id outside [0, {s.n_vocab})")
            if selected is not None:
                if not 0 <= selected < <long>cur_p.size:
                    raise IndexError(f"{s.name.decode()}: selected index {selected} not in [0, {cur_p.size})")
                cur_p.selected = selected
        except BaseException as exc:
            s.error = exc
    if s.error is not None and cur_p.size:
        # The samplers after this one still run before the error is raised: leave them
        # one harmless candidate rather than whatever the failed call left behind.
        cur_p.data[0].id = 0
        cur_p.data[0].logit = 0.0
        cur_p.data[0].p = 1.0
        cur_p.size = 1
        cur_p.selected = 0


cdef void _py_reset(c.llama_sampler *smpl) noexcept with gil:
    cdef _PythonSampler s = _py(smpl)
    reset = getattr(s.obj, "reset", None)
    if reset is not None:
        try:
            reset()
        except BaseException as exc:
            s.error = exc


cdef c.llama_sampler *_py_clone(const c.llama_sampler *smpl) noexcept with gil:
    # A clone shares the Python object: Python samplers carry their own state.
    cdef _PythonSampler s = _py(smpl)
    Py_INCREF(s)
    return c.llama_sampler_init(&_PY_IFACE, <void *>s)


cdef void _py_free(c.llama_sampler *smpl) noexcept with gil:
    Py_DECREF(<object>smpl.ctx)


cdef c.llama_sampler_i _PY_IFACE
memset(&_PY_IFACE, 0, sizeof(_PY_IFACE))
_PY_IFACE.name = _py_name
_PY_IFACE.accept = _py_accept
_PY_IFACE.apply = _py_apply
_PY_IFACE.reset = _py_reset
_PY_IFACE.clone = _py_clone
_PY_IFACE.free = _py_free


cdef LlamaSampler _wrap(c.llama_sampler *ptr, list python=None, int n_vocab=0):
    if ptr == NULL:
        raise LlamaError("llama.cpp could not create the sampler (invalid parameters?)")
    cdef LlamaSampler s = LlamaSampler.__new__(LlamaSampler)
    s.ptr = ptr
    s._closed = False
    s._python = python if python is not None else []
    s._has_grammar = False
    s._greedy_only = False
    s._n_vocab = n_vocab
    s._is_chain = False
    s._backend_bound = False
    return s


# The longest penalty or DRY window accepted (tokens). llama.cpp allocates the whole
# window up front; 2**31-1 asks for gigabytes and throws std::bad_alloc. Callers that
# know their context (Llama, the server) clamp windows to it first.
MAX_WINDOW = 1 << 24
# The deepest parenthesis nesting accepted in a GBNF grammar: llama.cpp's parser
# recurses once per level and overflows the stack (a segfault) at a few thousand.
MAX_GRAMMAR_DEPTH = 256


cdef int _grammar_depth(str text) except -1:
    """The deepest ``(`` nesting of a GBNF text, outside strings, classes and comments."""
    cdef Py_ssize_t i = 0, n = len(text)
    cdef int depth = 0, deepest = 0
    cdef Py_UCS4 ch, close
    while i < n:
        ch = text[i]
        if ch == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif ch == "\"" or ch == "[":
            close = "\"" if ch == "\"" else "]"
            i += 1
            while i < n and text[i] != close:
                i += 2 if text[i] == "\\" else 1
        elif ch == "(":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch == ")":
            depth -= 1
        i += 1
    return deepest


cdef int _check_grammar(str grammar) except -1:
    if "\0" in grammar:
        raise GrammarError("the grammar contains a NUL character")
    if _grammar_depth(grammar) > MAX_GRAMMAR_DEPTH:
        raise GrammarError(f"the grammar nests parentheses deeper than {MAX_GRAMMAR_DEPTH} levels")
    return 0


cdef int _check_window(str name, int32_t n, int32_t lowest) except -1:
    if not lowest <= n <= MAX_WINDOW:
        raise ValueError(f"{name} must be in [{lowest}, {MAX_WINDOW}], got {n}")
    return 0


cdef class LlamaSampler(Handle):
    """A llama.cpp sampler, or a chain of them (``LlamaSampler.chain([...])``).

    ``sample(ctx, i)`` picks a token from the logits of batch entry ``i`` and, like
    ``llama_sampler_sample``, accepts it (updating penalties, grammar, mirostat state).
    Samplers given to ``chain`` move into it and cannot be used on their own afterwards.
    """

    def __cinit__(self):
        self.ptr = NULL
        self._cur = NULL
        self._cur_cap = 0
        self._last = NULL
        self._last_size = 0

    def __init__(self):
        raise TypeError("use a constructor such as LlamaSampler.greedy() or LlamaSampler.chain([...])")

    def __dealloc__(self):
        self._dispose()
        free(self._cur)
        self._cur = NULL

    cdef void _dispose(self) noexcept:
        # A sample() in progress (a Python sampler closing its own chain, another
        # thread) is a user: close() gets here after it.
        self._python = []
        if self.ptr != NULL:
            c.llama_sampler_free(self.ptr)
            self.ptr = NULL

    cdef int _raise_pending(self) except -1:
        cdef _PythonSampler s
        for s in self._python:
            if s.error is not None:
                exc, s.error = s.error, None
                raise exc
        return 0

    def __repr__(self):
        return "<LlamaSampler closed>" if self._closed else f"<LlamaSampler {self.name!r}>"

    # ---- use ----------------------------------------------------------------------

    def sample(self, LlamaContext ctx not None, int32_t idx=-1, *, bint accept=True,
               LlamaSampler grammar=None, bint candidates=False):
        """Pick a token from the logits of batch entry ``idx`` (and accept it).

        With ``grammar`` (a grammar sampler kept outside this chain) the pick is made as
        llama.cpp's common sampler makes it: the chain picks freely, and only when the
        grammar rejects that token is the grammar applied to the whole vocabulary and
        the chain run again. Both samplers accept the token.

        ``candidates=True`` runs the chain over a candidate array even where a lone
        greedy sampler needs none, so that :meth:`candidates` has it afterwards.
        """
        if grammar is self:
            raise ValueError("grammar= must be a sampler other than this one")
        self._enter()
        try:
            if grammar is not None:
                grammar._enter()
            try:
                ctx._lock_acquire()  # no decode moves the logits, no close frees them
                try:
                    return self._sample(ctx, idx, accept, grammar, candidates)
                finally:
                    ctx._lock_release()
            finally:
                if grammar is not None:
                    grammar._release()
        finally:
            self._release()

    cdef llama_token _sample(self, LlamaContext ctx, int32_t idx, bint accept,
                             LlamaSampler grammar, bint full) except -1:
        cdef const float *logits = NULL
        cdef const float *probs = NULL
        cdef const llama_token *ids = NULL
        cdef llama_token token
        cdef int n = ctx.n_vocab
        cdef _PythonSampler py
        for py in self._python:
            py.n_vocab = n
        if ctx._n_outputs and ctx._samplers:
            # A row that a backend chain sampled: as llama_sampler_sample, a token picked
            # on the backend is only accepted, and a candidate list left by the chain's
            # backend prefix is finished by the chain's CPU stages.
            token = c.llama_get_sampled_token_ith(ctx.ptr, idx)
            if token != c.LLAMA_TOKEN_NULL:
                if grammar is not None or self._has_grammar:
                    raise GrammarError(
                        "this row's token was picked by a backend sampler, which cannot apply "
                        "a grammar (llama.cpp turns backend sampling off for grammars)")
                self._last_size = 0
                if accept:
                    _accept_checked(self.ptr, token)
                    self._raise_pending()
                return token
            probs = c.llama_get_sampled_probs_ith(ctx.ptr, idx)
            logits = c.llama_get_sampled_logits_ith(ctx.ptr, idx)
            if logits != NULL:
                n = c.llama_get_sampled_logits_count_ith(ctx.ptr, idx)
                ids = c.llama_get_sampled_candidates_ith(ctx.ptr, idx)
                if probs != NULL and c.llama_get_sampled_probs_count_ith(ctx.ptr, idx) != <uint32_t>n:
                    probs = NULL
            else:
                probs = NULL
        if logits == NULL:
            logits = c.llama_get_logits_ith(ctx.ptr, idx) if ctx._n_outputs else NULL
            n = ctx.n_vocab
        if logits == NULL or n <= 0:
            raise IndexError(f"batch entry {idx} has no logits (set its output flag and decode)")
        self._last_size = 0
        if self._greedy_only and not full:
            with nogil:
                token = _argmax(logits, n)
                if ids != NULL:
                    token = ids[token]
        else:
            token = self._pick(logits, n, None, ids, probs)
        if grammar is not None and not _grammar_allows(grammar.ptr, token):
            token = self._pick(logits, n, grammar, ids, probs)
            if not _grammar_allows(grammar.ptr, token):
                # The grammar was applied, then a later stage (a -inf or NaN bias, a
                # negative penalty, a Python sampler) left it no token it allows.
                raise GrammarError(
                    f"the samplers after the grammar picked token {token}, which the grammar "
                    "forbids here: a bias, penalty or Python sampler removed every allowed token")
        if self._has_grammar and not _grammar_allows(self.ptr, token):
            raise GrammarError(
                f"the chain picked token {token}, which its grammar forbids here: a stage "
                "before the grammar (top_k, a bias, a Python sampler) removed every allowed token")
        if accept:
            if grammar is not None:
                _accept_checked(grammar.ptr, token)
            _accept_checked(self.ptr, token)
            self._raise_pending()
        return token

    @staticmethod
    def sample_rows(LlamaContext ctx not None, chains, rows):
        """Pick and accept a token for each chain of ``chains`` from its row of ``rows``
        (batch entries of ``ctx``'s last decode), releasing the GIL once for all of
        them: a server's step samples every slot, and a GIL released once a slot is
        handed to the event loop and waited for once a slot. A chain this cannot run
        (Python samplers or a grammar in it, a row a backend sampler picked, a sampler
        that raised) gets -1, untouched or to be sampled again with :meth:`sample`."""
        cdef Py_ssize_t n = len(chains)
        if len(rows) != n:
            raise ValueError(f"{n} chains for {len(rows)} rows")
        if n == 0:
            return []
        cdef vector[_Row] work
        cdef _Row r
        cdef LlamaSampler chain
        cdef list entered = []
        cdef Py_ssize_t i
        cdef int32_t n_vocab
        cdef list out = [-1] * n
        ctx._lock_acquire()  # no decode moves the logits, no close frees them
        try:
            n_vocab = ctx.n_vocab
            # A row a backend sampler worked on is finished by sample() alone.
            if not (ctx._n_outputs and ctx._samplers):
                work.reserve(n)
                for i in range(n):
                    chain = chains[i]
                    chain._enter()  # a closed chain raises, as in sample()
                    entered.append(chain)
                    if chain._python or chain._has_grammar:
                        continue
                    r.logits = c.llama_get_logits_ith(ctx.ptr, rows[i]) if ctx._n_outputs else NULL
                    if r.logits == NULL:
                        continue
                    if not chain._greedy_only and chain._cur_cap < n_vocab:
                        chain._cur = <llama_token_data *>realloc(
                            chain._cur, n_vocab * sizeof(llama_token_data))
                        if chain._cur == NULL:
                            chain._cur_cap = 0
                            raise MemoryError()
                        chain._cur_cap = n_vocab
                    r.index = i
                    r.smpl = chain.ptr
                    r.cur = chain._cur
                    if chain._greedy_only:
                        r.cur = NULL
                    r.token = -1
                    work.push_back(r)
                with nogil:
                    _sample_all(work.data(), work.size(), n_vocab)
                for r in work:
                    chain = chains[r.index]
                    chain._last = r.cur if r.token >= 0 else NULL
                    chain._last_size = r.size if r.token >= 0 else 0
                    out[r.index] = r.token
        finally:
            for chain in entered:
                chain._release()
            ctx._lock_release()
        return out

    cdef llama_token _pick(self, const float *logits, int n, LlamaSampler first,
                           const llama_token *ids=NULL, const float *probs=NULL) except -1:
        """Run the chain (after ``first``, if given) over ``n`` logits; the selected id.
        The caller (``_sample``) has told the Python samplers the vocabulary's size.

        ``ids`` names the token of each logit (a backend sampler's candidates; NULL: the
        whole vocabulary in order), ``probs`` their probabilities where the backend
        computed them.
        """
        if self._cur_cap < n:
            self._cur = <llama_token_data *>realloc(self._cur, n * sizeof(llama_token_data))
            if self._cur == NULL:
                self._cur_cap = 0
                raise MemoryError()
            self._cur_cap = n
        cdef llama_token_data_array cur_p
        cdef c.llama_sampler *before = first.ptr if first is not None else NULL
        # Without Python samplers the whole chain runs in the one GIL release that fills
        # the array: each release hands the GIL to another thread (a server's event loop)
        # and waits to get it back.
        cdef bint native = not self._python
        try:
            with nogil:
                _fill_candidates(self._cur, logits, ids, probs, n)
                cur_p.data = self._cur
                cur_p.size = n
                cur_p.selected = -1
                cur_p.sorted = False
                if before != NULL:
                    _apply(before, &cur_p)
                if native:
                    _apply(self.ptr, &cur_p)
        except (IndexError, RuntimeError) as exc:
            _raise_mapped(exc)
        if not native:
            _apply_checked(self.ptr, &cur_p)
            self._raise_pending()
        if cur_p.selected < 0 or <size_t>cur_p.selected >= cur_p.size:
            raise LlamaError(f"sampler {self.name!r} selected no token: end the chain with "
                             "greedy(), dist(), mirostat() or mirostat_v2()")
        self._last = cur_p.data
        self._last_size = cur_p.size
        return cur_p.data[cur_p.selected].id

    def candidates(self):
        """What the chain left of the vocabulary at the last :meth:`sample`: a copy, as a
        ``CANDIDATE_DTYPE`` array sorted by probability (``p``, as the chain's last
        stage set it), most likely first; llama-server's post-sampling probabilities.
        Empty before any sample, and after a greedy pick made without the array (pass
        ``candidates=True`` to :meth:`sample`)."""
        self._ensure_alive()
        cdef size_t n = self._last_size
        out = np.empty(n, dtype=CANDIDATE_DTYPE)
        cdef unsigned char[::1] raw = out.view(np.uint8)
        if n:
            memcpy(&raw[0], self._last, n * sizeof(llama_token_data))
        return out[np.argsort(-out["p"], kind="stable")]

    cdef int _check_token(self, llama_token token) except -1:
        if token < 0 or (self._n_vocab > 0 and token >= self._n_vocab):
            raise InvalidTokenError(
                f"token {token} is out of range [0, {self._n_vocab or 'n_vocab'})")
        return 0

    def allows(self, llama_token token):
        """Whether every grammar in this sampler accepts ``token`` in its current state."""
        self._ensure_alive()
        self._check_token(token)
        return _grammar_allows(self.ptr, token)

    def accept(self, llama_token token):
        """Tell the sampler which token was chosen (penalties, grammar, mirostat).

        GrammarError if a grammar in the sampler does not allow the token here.
        """
        self._check_token(token)
        self._enter()
        try:
            if self._has_grammar and not _grammar_allows(self.ptr, token):
                raise GrammarError(f"token {token} is not allowed by the grammar at this point")
            _accept_checked(self.ptr, token)
            self._raise_pending()
        finally:
            self._release()

    def apply(self, candidates):
        """Apply to a ``CANDIDATE_DTYPE`` array in place; returns ``(size, selected)``.

        Samplers may reorder the array and shrink the valid prefix to ``size``;
        ``selected`` is an index into it, or -1.
        """
        self._ensure_alive()
        if not isinstance(candidates, np.ndarray) or candidates.dtype != CANDIDATE_DTYPE:
            raise TypeError("candidates must be a NumPy array of llama_cy.CANDIDATE_DTYPE")
        if candidates.ndim != 1 or not candidates.flags.c_contiguous or not candidates.flags.writeable:
            raise ValueError("candidates must be one-dimensional, C-contiguous and writable")
        if candidates.shape[0] == 0:
            # Most of llama.cpp's samplers assert a non-empty array (an abort).
            raise ValueError("candidates is empty: a sampler needs at least one token")
        ids = candidates["id"]
        if ids.view(np.uint32).max() >= (<unsigned int>self._n_vocab if self._n_vocab else 2**31):
            raise InvalidTokenError(
                f"candidate ids must be in [0, {self._n_vocab or 'n_vocab'}): "
                f"got {int(ids.min())}..{int(ids.max())}")
        cdef unsigned char[::1] raw = candidates.view(np.uint8)
        cdef llama_token_data_array cur_p
        cdef llama_token_data *start = <llama_token_data *>&raw[0]
        cdef _PythonSampler py
        cur_p.data = start
        cur_p.size = candidates.shape[0]
        cur_p.selected = -1
        cur_p.sorted = False
        for py in self._python:
            py.n_vocab = self._n_vocab
        self._enter()
        try:
            _apply_checked(self.ptr, &cur_p)
            if cur_p.data != start:
                # Some samplers (XTC) drop a prefix by moving the pointer: bring the
                # survivors back to the start of the caller's array.
                memmove(start, cur_p.data, cur_p.size * sizeof(llama_token_data))
            self._raise_pending()
        finally:
            self._release()
        return int(cur_p.size), int(cur_p.selected)

    def reset(self):
        """Forget accepted history (penalties, grammar state, mirostat mu)."""
        self._enter()
        try:
            c.llama_sampler_reset(self.ptr)
            self._raise_pending()
        finally:
            self._release()

    def clone(self):
        """An independent copy with the same state."""
        self._ensure_alive()
        cdef LlamaSampler result = _wrap(c.llama_sampler_clone(self.ptr), list(self._python), self._n_vocab)
        result._has_grammar = self._has_grammar
        result._greedy_only = self._greedy_only
        result._is_chain = self._is_chain
        return result

    @property
    def name(self):
        self._ensure_alive()
        return c.llama_sampler_name(self.ptr).decode()

    @property
    def seed(self):
        """The seed in use (the drawn one when created with the default seed)."""
        self._ensure_alive()
        return c.llama_sampler_get_seed(self.ptr)

    def __len__(self):
        """Number of samplers in a chain (0 for a single sampler)."""
        self._ensure_alive()
        return max(0, c.llama_sampler_chain_n(self.ptr)) if self.name == "chain" else 0

    def perf(self):
        """Sampling time and count (chains only)."""
        self._ensure_alive()
        if self.name != "chain":
            raise TypeError("perf() is only available on chains")
        cdef c.llama_perf_sampler_data d = c.llama_perf_sampler(self.ptr)
        return SamplerPerf(d.t_sample_ms, d.n_sample)

    def perf_reset(self):
        self._ensure_alive()
        if self.name != "chain":
            raise TypeError("perf_reset() is only available on chains")
        c.llama_perf_sampler_reset(self.ptr)

    # ---- constructors -------------------------------------------------------------

    @staticmethod
    def chain(samplers, *, bint no_perf=False):
        """A chain applying ``samplers`` in order; they move into it.

        Items that are not LlamaSampler objects are wrapped with ``from_python``.
        """
        members = [m if isinstance(m, LlamaSampler) else LlamaSampler.from_python(m) for m in samplers]
        cdef LlamaSampler s
        for s in members:
            s._ensure_alive()
        if len({id(s) for s in members}) != len(members):
            raise ValueError("the same sampler appears twice in the chain")
        for s in members:
            if s._backend_bound:
                # The context still runs it in its graph: moving it would let the new
                # chain free it under the context.
                raise ValueError("a sampler attached to a context as a backend sampler cannot "
                                 "move into another chain: clone() it")
        cdef int n_vocab = 0
        for s in members:
            if s._n_vocab and n_vocab and s._n_vocab != n_vocab:
                raise ValueError("the samplers were made for vocabularies of different sizes")
            n_vocab = n_vocab or s._n_vocab
        # greedy alone, or followed by token_only (a no-op on the CPU)
        cdef bint greedy_only = (
            1 <= len(members) <= 2 and (<LlamaSampler>members[0])._greedy_only
            and (len(members) == 1 or _is_token_only(<LlamaSampler>members[1])))
        cdef c.llama_sampler_chain_params p = c.llama_sampler_chain_default_params()
        p.no_perf = no_perf
        cdef c.llama_sampler *chain = c.llama_sampler_chain_init(p)
        python = []
        has_grammar = False
        for s in members:
            c.llama_sampler_chain_add(chain, s.ptr)  # the chain owns it from here
            python.extend(s._python)
            has_grammar |= s._has_grammar
            s.ptr = NULL
            s._free()
        result = _wrap(chain, python, n_vocab)
        result._has_grammar = has_grammar
        result._greedy_only = greedy_only
        result._is_chain = True
        return result

    @staticmethod
    def from_python(obj):
        """A sampler calling ``obj.apply(candidates)`` (and ``accept``/``reset`` if present).

        ``candidates`` is a writable ``CANDIDATE_DTYPE`` view of llama.cpp's array, valid
        during the call; ``apply`` may change logits/probabilities in place and may return
        the index of the selected candidate. Exceptions reach the caller of ``sample``.
        """
        if not callable(getattr(obj, "apply", None)):
            raise TypeError("a Python sampler needs an apply(candidates) method")
        cdef _PythonSampler s = _PythonSampler()
        s.obj = obj
        s.name = str(getattr(obj, "name", type(obj).__name__)).encode()
        s.error = None
        Py_INCREF(s)  # released by _py_free when llama.cpp frees the sampler
        return _wrap(c.llama_sampler_init(&_PY_IFACE, <void *>s), [s])

    @staticmethod
    def greedy():
        """Always the most likely token (the first one on ties).

        llama.cpp's greedy sampler; attached to a context on a device, a row of 100,000
        logits or more is searched in two steps (see ``_backend_samplers.h``).
        """
        cdef LlamaSampler s = _wrap(llama_cy_split_greedy_init())
        s._greedy_only = True
        return s

    @staticmethod
    def token_only():
        """Last in a backend chain (``LlamaContext(samplers=...)``, ``set_sampler``): once
        the chain has picked a token in the graph, only the token comes back to the host.

        llama.cpp otherwise also copies what the chain's last stage left: a greedy chain
        the whole row of logits (n_vocab floats a token), a dist chain the
        probabilities. With it, ``sampled_logits``/``sampled_probs``/
        ``sampled_candidates`` of a picked row raise IndexError. A chain whose backend
        stages pick no token keeps its candidates; on the CPU it does nothing. A
        llama_cy sampler: llama.cpp has none like it.
        """
        return _wrap(llama_cy_token_only_init())

    @staticmethod
    def dist(uint32_t seed=c.LLAMA_DEFAULT_SEED):
        """Draw from the distribution (softmax of the logits) with a seeded RNG."""
        return _wrap(c.llama_sampler_init_dist(seed))

    @staticmethod
    def top_k(int32_t k):
        return _wrap(c.llama_sampler_init_top_k(k))

    @staticmethod
    def top_p(float p, size_t min_keep=1):
        return _wrap(c.llama_sampler_init_top_p(p, min_keep))

    @staticmethod
    def min_p(float p, size_t min_keep=1):
        return _wrap(c.llama_sampler_init_min_p(p, min_keep))

    @staticmethod
    def typical(float p, size_t min_keep=1):
        return _wrap(c.llama_sampler_init_typical(p, min_keep))

    @staticmethod
    def temp(float t):
        return _wrap(c.llama_sampler_init_temp(t))

    @staticmethod
    def temp_ext(float t, float delta, float exponent):
        return _wrap(c.llama_sampler_init_temp_ext(t, delta, exponent))

    @staticmethod
    def xtc(float p, float t, size_t min_keep=1, uint32_t seed=c.LLAMA_DEFAULT_SEED):
        return _wrap(c.llama_sampler_init_xtc(p, t, min_keep, seed))

    @staticmethod
    def top_n_sigma(float n):
        return _wrap(c.llama_sampler_init_top_n_sigma(n))

    @staticmethod
    def mirostat(int32_t n_vocab, uint32_t seed=c.LLAMA_DEFAULT_SEED, float tau=5.0,
                 float eta=0.1, int32_t m=100):
        if n_vocab < 1:
            raise ValueError(f"n_vocab must be positive, got {n_vocab}")
        return _wrap(c.llama_sampler_init_mirostat(n_vocab, seed, tau, eta, m), None, n_vocab)

    @staticmethod
    def mirostat_v2(uint32_t seed=c.LLAMA_DEFAULT_SEED, float tau=5.0, float eta=0.1):
        return _wrap(c.llama_sampler_init_mirostat_v2(seed, tau, eta))

    @staticmethod
    def grammar(LlamaModel model not None, str grammar, str root="root"):
        """Constrain tokens to a GBNF grammar; GrammarError if it does not parse."""
        model._ensure_alive()
        _check_grammar(grammar)
        cdef c.llama_sampler *ptr
        try:
            ptr = _init_grammar(model.vocab, grammar.encode(), root.encode())
        except (RuntimeError, IndexError) as exc:
            raise GrammarError(f"the grammar does not parse: {exc}") from None
        return _wrap_grammar(ptr, model.n_vocab)

    @staticmethod
    def grammar_lazy_patterns(LlamaModel model not None, str grammar, str root="root",
                              trigger_patterns=(), trigger_tokens=()):
        """A grammar that only applies once a trigger pattern or token appears."""
        model._ensure_alive()
        _check_grammar(grammar)
        patterns = [p.encode() for p in trigger_patterns]
        cdef const int32_t[::1] toks = model._token_array(list(trigger_tokens))
        cdef const char **cpat = <const char **>malloc(max(1, len(patterns)) * sizeof(char *))
        for i, b in enumerate(patterns):
            cpat[i] = b
        cdef c.llama_sampler *ptr
        try:
            ptr = _init_grammar_lazy_patterns(
                model.vocab, grammar.encode(), root.encode(), cpat, len(patterns),
                &toks[0] if toks.shape[0] else NULL, toks.shape[0])
        except (RuntimeError, IndexError) as exc:
            raise GrammarError(f"the grammar or a trigger pattern does not parse: {exc}") from None
        finally:
            free(cpat)
        return _wrap_grammar(ptr, model.n_vocab)

    @staticmethod
    def penalties(int32_t n_vocab, int32_t last_n=64, float repeat=1.0, float freq=0.0,
                  float present=0.0):
        """Repeat, frequency and presence penalties over the last ``last_n`` tokens.

        ``last_n`` is in ``[0, MAX_WINDOW]`` (0 disables); this sampler does not know the
        context, so llama-server's -1 ("the context size") is resolved by the caller.
        """
        if n_vocab < 1:
            raise ValueError(f"n_vocab must be positive, got {n_vocab}")
        _check_window("last_n", last_n, 0)
        return _wrap(_init_penalties(n_vocab, last_n, repeat, freq, present), None, n_vocab)

    @staticmethod
    def dry(LlamaModel model not None, float multiplier=0.0, float base=1.75,
            int32_t allowed_length=2, int32_t penalty_last_n=-1,
            seq_breakers=("\n", ":", "\"", "*")):
        """DRY ("don't repeat yourself") penalties; ``penalty_last_n=-1`` means the whole context."""
        model._ensure_alive()
        _check_window("penalty_last_n", penalty_last_n, -1)
        if penalty_last_n < 0:
            # llama.cpp reads a negative window as "disabled"; its tools mean "context size".
            penalty_last_n = min(model.n_ctx_train, MAX_WINDOW)
        breakers = [b.encode() for b in seq_breakers]
        cdef const char **cb = <const char **>malloc(max(1, len(breakers)) * sizeof(char *))
        for i, b in enumerate(breakers):
            cb[i] = b
        try:
            return _wrap(_init_dry(model.vocab, multiplier, base, allowed_length,
                                   penalty_last_n, cb, len(breakers)), None, model.n_vocab)
        finally:
            free(cb)

    @staticmethod
    def adaptive_p(float target, float decay, uint32_t seed=c.LLAMA_DEFAULT_SEED):
        return _wrap(c.llama_sampler_init_adaptive_p(target, decay, seed))

    @staticmethod
    def logit_bias(int32_t n_vocab, biases):
        """Add ``biases[token]`` to each listed token's logit."""
        if n_vocab < 1:
            raise ValueError(f"n_vocab must be positive, got {n_vocab}")
        items = list(dict(biases).items())
        cdef c.llama_logit_bias *b = <c.llama_logit_bias *>malloc(max(1, len(items)) * sizeof(c.llama_logit_bias))
        try:
            for i, (tok, bias) in enumerate(items):
                if not 0 <= tok < n_vocab:
                    raise ValueError(f"logit_bias token {tok} is out of range [0, {n_vocab})")
                b[i].token = tok
                b[i].bias = bias
            return _wrap(c.llama_sampler_init_logit_bias(n_vocab, len(items), b), None, n_vocab)
        finally:
            free(b)

    @staticmethod
    def infill(LlamaModel model not None):
        model._ensure_alive()
        return _wrap(c.llama_sampler_init_infill(model.vocab), None, model.n_vocab)


cdef LlamaSampler _wrap_grammar(c.llama_sampler *ptr, int n_vocab):
    if ptr == NULL:
        raise GrammarError("the grammar or a trigger pattern does not parse (see the 'llama_cy' log)")
    cdef LlamaSampler result = _wrap(ptr, None, n_vocab)
    result._has_grammar = True
    return result


cdef int _accept_checked(c.llama_sampler *smpl, llama_token token) except -1:
    try:
        _accept(smpl, token)
    except (RuntimeError, IndexError) as exc:
        raise GrammarError(f"a sampler refused token {token}: {exc}") from None
    return 0


cdef int _apply_checked(c.llama_sampler *smpl, llama_token_data_array *cur_p) except -1:
    try:
        _apply(smpl, cur_p)
    except (IndexError, RuntimeError) as exc:
        _raise_mapped(exc)
    return 0


cdef int _raise_mapped(exc) except -1:
    """A C++ exception from a sampler (already a Python one) as a LlamaError."""
    if isinstance(exc, IndexError):
        raise InvalidTokenError(f"a candidate id is outside the vocabulary: {exc}") from None
    raise LlamaError(f"a sampler failed: {exc}") from None


cdef bint _grammar_allows(c.llama_sampler *smpl, llama_token token) except -1:
    """Whether every grammar sampler in ``smpl`` accepts ``token`` in its current state.

    llama.cpp aborts the process (or throws through its C API) when a grammar is made
    to accept a token it forbids, so ``accept`` asks the grammar's ``apply`` first.
    """
    cdef const char *name = c.llama_sampler_name(smpl)
    cdef int32_t i
    cdef llama_token_data one
    cdef llama_token_data_array cur_p
    if strcmp(name, "chain") == 0:
        for i in range(c.llama_sampler_chain_n(smpl)):
            if not _grammar_allows(c.llama_sampler_chain_get(smpl, i), token):
                return False
        return True
    if strcmp(name, "grammar") != 0:
        return True
    one.id = token
    one.logit = 0.0
    one.p = 0.0
    cur_p.data = &one
    cur_p.size = 1
    cur_p.selected = -1
    cur_p.sorted = False
    _apply_checked(smpl, &cur_p)
    return cur_p.size == 1 and one.logit != -INFINITY


cdef bint _is_token_only(LlamaSampler s) noexcept:
    return s.ptr != NULL and s.ptr.iface == llama_cy_token_only_iface


# ---- backend sampling: chains attached to a context (llama_set_sampler) -------------
# Here rather than in _context: these need both types, and _sampler already imports
# _context (LlamaContext calls them through a lazy import).

cdef int _check_backend_chain(LlamaSampler s, int seq_id) except -1:
    s._ensure_alive()
    if not s._is_chain:
        raise TypeError("a backend sampler must be a chain: LlamaSampler.chain([...])")
    if c.llama_sampler_chain_n(s.ptr) < 1:
        raise ValueError("a backend sampler chain needs at least one sampler")
    if s._backend_bound:
        raise ValueError(
            "this chain has been attached to a context before, and llama.cpp sets a chain "
            "up for the backend once: attach chain.clone() instead")
    return 0


def _backend_configs(samplers, int n_seq_max):
    """Check ``{seq_id: chain}`` for a new context; ``[(seq_id, chain, address)]``."""
    cdef LlamaSampler s
    cdef int seq_id
    if not hasattr(samplers, "items"):
        raise TypeError("samplers must be a mapping {seq_id: LlamaSampler chain}")
    out = []
    seen = set()
    for key, s in samplers.items():
        if s is None:
            raise TypeError(f"samplers[{key!r}] is None: leave the sequence out instead")
        seq_id = key
        if seq_id < 0 or seq_id >= n_seq_max:
            raise ValueError(f"samplers: sequence id {seq_id} is outside [0, {n_seq_max})")
        if id(s) in seen:
            raise ValueError("samplers: one chain given for two sequences; clone() it")
        seen.add(id(s))
        _check_backend_chain(s, seq_id)
        out.append((seq_id, s, <size_t>s.ptr))
    for _, s, _ in out:
        # llama_init_from_model sets each up on the backend, whether it then succeeds.
        s._backend_bound = True
    return out


def _set_backend_sampler(LlamaContext ctx not None, int seq_id, LlamaSampler sampler):
    """``LlamaContext.set_sampler``: attach ``sampler`` to ``seq_id`` (None: detach)."""
    ctx._ensure_alive()
    if seq_id < 0 or seq_id >= ctx.n_seq_max:
        raise ValueError(f"seq_id {seq_id} is outside [0, {ctx.n_seq_max})")
    cdef LlamaSampler old = ctx._samplers.get(seq_id)
    if sampler is not None:
        if sampler is old:
            return True
        _check_backend_chain(sampler, seq_id)
    cdef bint ok
    ctx._lock_acquire()
    try:
        ok = c.llama_set_sampler(ctx.ptr, seq_id, sampler.ptr if sampler is not None else NULL)
    finally:
        ctx._lock_release()
    ctx._samplers_changed = True
    if old is not None:
        del ctx._samplers[seq_id]
        old._release()
    if sampler is not None and ok:
        sampler._backend_bound = True
        sampler._acquire()  # freed after the context lets go of it, whatever close() says
        ctx._samplers[seq_id] = sampler
    return bool(ok)

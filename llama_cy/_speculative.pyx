"""Speculator: llama.cpp's speculative drafting (``common_speculative``, as llama-server runs it).

A speculator proposes the next few tokens of a sequence cheaply: from a smaller draft
model (``draft-simple``) or from n-grams of the sequence's own history (``ngram-simple``,
``ngram-map-k``, ``ngram-map-k4v``, ``ngram-mod``, ``ngram-cache``). The caller decodes
its last sampled token and the draft in one batch of the target model, samples each
output row in turn while the samples match the draft, and keeps that prefix: the output
is what decoding one token at a time would give, in fewer decodes.
"""

import json

cimport cython
import numpy as np

from libc.stdint cimport int32_t, uint32_t
from libcpp.string cimport string
from libcpp.vector cimport vector

from llama_cy._c.llama cimport llama_batch, llama_context, llama_pos, llama_token, llama_token_data
from llama_cy._batch cimport LlamaBatch
from llama_cy._context cimport LlamaContext
from llama_cy._handle cimport Handle
from llama_cy._model cimport LlamaModel

from llama_cy.errors import LlamaError


cdef extern from "_speculative_shim.h" namespace "lcy" nogil:
    cdef cppclass Speculative:
        Speculative(const string &config, llama_context *tgt, llama_context *dft,
                    uint32_t n_seq) except +
        int32_t n_max()
        string types() except +
        const vector[double] &synth_probs()
        void begin(int32_t seq, const llama_token *tokens, size_t n) except +
        void process(const llama_batch &b) except +
        void request(int32_t seq, int32_t n_max, llama_pos pos, llama_token id_last,
                     const llama_token *tokens, size_t n, float temp, uint32_t seed,
                     bint want_q) except +
        void draft() except +
        const vector[llama_token] &get_result(int32_t seq) except +
        const vector[vector[llama_token_data]] &get_result_q(int32_t seq) except +
        bint probabilistic()
        void accept(int32_t seq, int32_t n) except +


# The types llama_cy runs: the draft-model ones (draft-simple; draft-eagle3, whose draft
# reads the target's hidden states), MTP (the target model's own NextN layers) and the
# n-gram ones (draft-dflash and -dspark are not built here).
SPEC_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp", "ngram-simple", "ngram-map-k",
              "ngram-map-k4v", "ngram-mod", "ngram-cache")


cdef int _quiet(LlamaContext ctx) except -1:
    """Let ``ctx``'s pool workers sleep until its next decode: the target's and the draft's
    pools take turns, and one spinning beside the other's compute slows both (on two
    cores, a draft model ran 60x slower)."""
    ctx._lock_acquire()
    try:
        ctx._pause_threadpools()
    finally:
        ctx._lock_release()
    return 0


def _check_eagle3(LlamaContext target, LlamaModel draft):
    """An EAGLE3 draft for ``target``'s model: what llama.cpp asserts, checked first."""
    if draft is None:
        raise ValueError("draft-eagle3 needs its EAGLE3 draft model")
    arch = draft.meta_val("general.architecture")
    if arch != "eagle3":
        raise ValueError(f"draft-eagle3: the draft model is a {arch!r} model, not an EAGLE3 one")
    hidden = draft.meta_val("eagle3.target_hidden_size")
    if hidden is None or int(hidden) != target.model.n_embd:
        raise ValueError(f"draft-eagle3: the draft reads {hidden}-wide hidden states; the "
                         f"target's are {target.model.n_embd} wide")


cdef const llama_token *_tokens(const int32_t[::1] view) noexcept:
    return &view[0] if view.shape[0] > 0 else NULL


@cython.final
@cython.no_gc_clear  # _dispose closes the draft context it owns
cdef class Speculator(Handle):
    """Drafting for the sequences of ``target`` (one state per sequence id).

    ``types``: one llama-server ``--spec-type`` name or several (comma-separated or a
    sequence; llama.cpp tries them in its own order of preference); default
    ``draft-simple`` with a ``draft_model``, else ``ngram-simple``. ``draft_model``: a
    :class:`~llama_cy.LlamaModel` with the target's vocabulary; the speculator makes its
    own context on it, sized as ``target`` (``draft_context`` adds
    :class:`~llama_cy.LlamaContext` keywords, such as ``type_k`` or ``n_threads``).
    ``draft-eagle3`` takes an EAGLE3 ``draft_model``, whose context reads three of the
    target's layers; ``draft-mtp`` takes none: the target model (loaded with
    ``load_mtp=True``) drafts with its own NextN layers, in an MTP context on ``target``.
    Both want an output at every prompt position (:attr:`all_outputs`).

    ``n_max``/``n_min``/``p_min`` are llama-server's ``--spec-draft-n-max``/``-n-min``/
    ``-p-min`` (the most and fewest tokens a draft model proposes, and the probability
    under which it stops). ``ngram_simple``, ``ngram_map_k``, ``ngram_map_k4v`` take
    ``{"size_n", "size_m", "min_hits"}``, ``ngram_mod`` ``{"n_match", "n_min", "n_max"}``,
    ``ngram_cache`` ``{"static", "dynamic"}`` (lookup-cache files). ``synth_len`` and
    ``synth_rates`` are llama-server's synthetic acceptance (benchmarking: see
    :attr:`synth_probs`). ``probabilistic`` is ``--spec-draft-sampling probabilistic``
    (:attr:`probabilistic`). ``backend_sampling`` (``--spec-draft-backend-sampling``)
    samples the draft-eagle3 and draft-mtp drafts inside the draft's graph (llama.cpp
    ignores it for the other types). Defaults are llama.cpp's.

    One generation on sequence ``s``: :meth:`begin` with its prompt; each step
    :meth:`draft` (or :meth:`request` for several sequences, then :meth:`draft_all` and
    :meth:`result`), decode the draft, :meth:`accept` what matched. With a draft model,
    every batch the target decodes goes through :meth:`process` too, and a cut of the
    target's cache is made with :meth:`seq_rm` as well: the draft context holds what the
    target holds.
    """

    cdef Speculative *ptr
    cdef readonly LlamaContext target
    cdef LlamaContext _draft
    cdef readonly int n_seq
    # draft-mtp and draft-eagle3 read the target's hidden states at every prompt
    # position: the caller asks for an output at each (llama-server's need_embd).
    cdef readonly bint all_outputs

    def __cinit__(self, LlamaContext target not None, types=None, *,
                  LlamaModel draft_model=None, dict draft_context=None, n_max=None,
                  n_min=None, p_min=None, ngram_simple=None, ngram_map_k=None,
                  ngram_map_k4v=None, ngram_mod=None, ngram_cache=None, synth_len=None,
                  synth_rates=None, backend_sampling=None, probabilistic=None):
        self.ptr = NULL
        target._ensure_alive()
        if types is None:
            names = ["draft-simple" if draft_model is not None else "ngram-simple"]
        elif isinstance(types, str):
            names = [t.strip() for t in types.split(",") if t.strip()]
        else:
            names = [str(t) for t in types]
        if not names:
            raise ValueError("no speculative type given")
        for name in names:
            if name not in SPEC_TYPES:
                raise ValueError(f"unknown or unsupported speculative type {name!r}; "
                                 f"expected one of {', '.join(SPEC_TYPES)}")
        if draft_model is not None and "draft-simple" not in names \
                and "draft-eagle3" not in names:
            raise ValueError("a draft model is used by the draft-simple and draft-eagle3 "
                             f"types only; the types given are {', '.join(names)}")
        mtp = "draft-mtp" in names  # the target model's own MTP layers draft
        eagle3 = "draft-eagle3" in names
        if eagle3:
            _check_eagle3(target, draft_model)
        if mtp and not target.model.mtp:
            raise ValueError("draft-mtp: the target model's MTP layers are not loaded "
                             "(LlamaModel.load(load_mtp=True)); it has "
                             f"{target.model.n_layer_nextn} NextN layers")
        config = {"types": names}
        for key, value in (("n_max", n_max), ("n_min", n_min)):
            if value is not None:
                config[key] = int(value)
        if p_min is not None:
            if not 0.0 <= float(p_min) <= 1.0:
                raise ValueError(f"p_min must be in [0, 1], got {p_min}")
            config["p_min"] = float(p_min)
        for key, value in (("ngram_simple", ngram_simple), ("ngram_map_k", ngram_map_k),
                           ("ngram_map_k4v", ngram_map_k4v), ("ngram_mod", ngram_mod)):
            if value is not None:
                config[key] = {k: int(v) for k, v in dict(value).items()}
        if ngram_cache is not None:
            config["ngram_cache"] = {k: str(v) for k, v in dict(ngram_cache).items()}
        if synth_len is not None:
            config["synth_len"] = float(synth_len)
        if synth_rates is not None:
            config["synth_rates"] = [float(r) for r in synth_rates]
        if backend_sampling is not None:
            config["backend_sampling"] = bool(backend_sampling)
        if probabilistic is not None:
            config["probabilistic"] = bool(probabilistic)
        cdef LlamaContext draft = None
        # Sized as the target, as common_speculative_init_from_params sizes them; the MTP
        # and EAGLE3 contexts read the target's states (ctx_other, which sets their n_ctx).
        kwargs = dict(n_batch=target.n_batch, n_ubatch=target.n_ubatch,
                      n_seq_max=target.n_seq_max)
        kwargs.update(draft_context or {})
        if mtp:
            draft = LlamaContext(target.model, ctx_type="mtp", ctx_other=target, **kwargs)
        elif eagle3:
            draft = LlamaContext(draft_model, ctx_other=target, **kwargs)
        elif draft_model is not None:
            draft = LlamaContext(draft_model, **{"n_ctx": target.n_ctx, **kwargs})
            if draft.n_ctx_seq < target.n_ctx_seq or draft.n_batch < target.n_batch:
                draft.close()
                raise ValueError("the draft context must hold as much per sequence, and "
                                 "take batches as large, as the target's")
        cdef string c_config = json.dumps(config).encode()
        cdef llama_context *dft = draft.ptr if draft is not None else NULL
        try:
            with nogil:
                self.ptr = new Speculative(c_config, target.ptr, dft, <uint32_t>target.n_seq_max)
        except Exception as exc:
            if draft is not None:
                draft.close()
            raise ValueError(f"speculative decoding: {exc}") from None
        self.target = target
        self._draft = draft
        self.all_outputs = mtp or eagle3
        self.n_seq = target.n_seq_max
        self._closed = False

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        cdef Speculative *p = self.ptr
        self.ptr = NULL
        if p != NULL:
            del p
        if self._draft is not None:
            self._draft._free()
            self._draft = None

    def __repr__(self):
        if self._closed:
            return "<Speculator closed>"
        return f"<Speculator types={self.types!r} n_max={self.n_max}>"

    # ---- what it is -------------------------------------------------------------

    @property
    def types(self):
        """The types in use, comma-separated (llama-server's ``speculative.types``)."""
        self._ensure_alive()
        return self.ptr.types().decode()

    @property
    def n_max(self):
        """The most tokens one draft can hold."""
        self._ensure_alive()
        return self.ptr.n_max()

    @property
    def has_draft_model(self):
        self._ensure_alive()
        return self._draft is not None

    @property
    def draft_context(self):
        """The context the drafts are computed in (a draft model's, or the MTP or EAGLE3
        one), which holds what the target holds; None for the n-gram types. Its state
        goes with the target's into checkpoints and the prompt cache, as llama-server's
        ``ctx_dft``."""
        self._ensure_alive()
        return self._draft

    @property
    def can_shift(self):
        """Whether the draft context can shift positions (a context shift); True
        without a draft model."""
        self._ensure_alive()
        return self._draft is None or self._draft.can_shift

    @property
    def synth_probs(self):
        """Synthetic acceptance (``synth_len``/``synth_rates``): the probability that draft
        token ``i`` is accepted given that the ones before it were, whatever the target
        samples. Empty when off. It makes throughput measurable at a chosen acceptance
        rate; the text it gives is not the model's."""
        self._ensure_alive()
        return tuple(self.ptr.synth_probs())

    # ---- one generation ------------------------------------------------------------

    cdef int _check_seq(self, int seq_id) except -1:
        if not 0 <= seq_id < self.n_seq:
            raise ValueError(f"seq_id {seq_id} is out of range [0, {self.n_seq})")
        return 0

    def begin(self, tokens, int seq_id=0):
        """A new generation on ``seq_id``, whose prompt is ``tokens``."""
        self._ensure_alive()
        self._check_seq(seq_id)
        cdef const int32_t[::1] toks = self.target.model._token_array(tokens)
        self.ptr.begin(seq_id, _tokens(toks), toks.shape[0])

    def process(self, LlamaBatch batch not None):
        """Decode ``batch``, which the target has just decoded, into the draft context
        (nothing to do without a draft model). Raises if the draft model fails on it."""
        self._ensure_alive()
        if self._draft is None:
            return
        batch._ensure_alive()
        if batch.embd:
            raise ValueError("speculative decoding takes batches of tokens, not embeddings")
        _quiet(self.target)
        self._draft._lock_acquire()
        batch._acquire()
        try:
            with nogil:
                self.ptr.process(batch.batch)
            self._draft._pause_threadpools()
        except RuntimeError as exc:
            raise LlamaError(str(exc)) from None
        finally:
            batch._release()
            self._draft._lock_release()

    def request(self, tokens, int last, int seq_id=0, *, n_max=None, pos=None,
                float temp=1.0, uint32_t seed=0xFFFFFFFF, bint distributions=False):
        """Ask for a draft on ``seq_id`` that follows ``last``: the token just sampled and
        not yet decoded, at position ``pos`` (default ``len(tokens)``), after ``tokens``
        (what the sequence holds). At most ``n_max`` tokens (default: :attr:`n_max`).
        :meth:`draft_all` drafts for every requested sequence. ``distributions`` (with
        :attr:`probabilistic`): the drafter samples at ``temp`` from ``seed`` and
        reports each token's distribution (:meth:`result_q`), for the target to verify
        by rejection sampling."""
        self._ensure_alive()
        self._request(self.target.model._token_array(tokens), last, seq_id, n_max, pos,
                      temp, seed, distributions)

    cdef int _request(self, const int32_t[::1] toks, int last, int seq_id, n_max, pos,
                      float temp, uint32_t seed, bint want_q=False) except -1:
        # ``toks`` are checked against the vocabulary already.
        self._check_seq(seq_id)
        self.target.model._check_token(last)
        cdef int limit = self.ptr.n_max() if n_max is None else n_max
        if limit < 1:
            raise ValueError(f"n_max must be at least 1, got {limit}")
        cdef llama_pos p = toks.shape[0] if pos is None else pos
        if p < 0:
            raise ValueError(f"pos must be >= 0, got {p}")
        self.ptr.request(seq_id, limit, p, last, _tokens(toks), toks.shape[0], temp, seed,
                         want_q)
        return 0

    def draft_all(self):
        """Draft for every sequence given to :meth:`request` since the last call."""
        self._ensure_alive()
        if self._draft is None:
            self.ptr.draft()
            return
        _quiet(self.target)
        self._draft._lock_acquire()
        try:
            with nogil:
                self.ptr.draft()
            self._draft._pause_threadpools()
        finally:
            self._draft._lock_release()

    def result(self, int seq_id=0):
        """The last draft of ``seq_id`` (int32 array, possibly empty)."""
        self._ensure_alive()
        self._check_seq(seq_id)
        cdef const vector[llama_token] *r = &self.ptr.get_result(seq_id)
        out = np.empty(r.size(), dtype=np.intc)
        cdef int32_t[::1] view = out
        cdef size_t i
        for i in range(r.size()):
            view[i] = r[0][i]
        return out

    def result_q(self, int seq_id=0):
        """Each token of the last draft of ``seq_id``: the distribution the drafter
        sampled it from, as ``(ids, probs)`` (int32 and float32 arrays); an empty list
        where none was reported (greedy drafting, the n-gram types, a drafter that
        reports none)."""
        self._ensure_alive()
        self._check_seq(seq_id)
        cdef const vector[vector[llama_token_data]] *q = &self.ptr.get_result_q(seq_id)
        cdef size_t i, j, n
        cdef int32_t[::1] ids
        cdef float[::1] probs
        out = []
        for i in range(q.size()):
            n = q[0][i].size()
            a = np.empty(n, dtype=np.intc)
            b = np.empty(n, dtype=np.float32)
            ids = a
            probs = b
            for j in range(n):
                ids[j] = q[0][i][j].id
                probs[j] = q[0][i][j].p
            out.append((a, b))
        return out

    @property
    def probabilistic(self):
        """``--spec-draft-sampling probabilistic``: drafts are sampled, and verified by
        rejection sampling (at a temperature above 0), instead of argmax and match."""
        self._ensure_alive()
        return self.ptr.probabilistic()

    def draft(self, tokens, int seq_id=0, *, n_max=None):
        """A draft that continues ``tokens`` (everything so far; the last one sampled and
        not yet decoded) on ``seq_id``: an int32 array of at most ``n_max`` tokens, empty
        when nothing is proposed. Then :meth:`accept` how many of them the target kept."""
        self._ensure_alive()
        cdef const int32_t[::1] toks = self.target.model._token_array(tokens)
        cdef Py_ssize_t n = toks.shape[0]
        if n == 0:
            raise ValueError("draft() needs at least the last sampled token")
        self._request(toks[:n - 1], toks[n - 1], seq_id, n_max, None, 1.0, 0xFFFFFFFF)
        self.draft_all()
        return self.result(seq_id)

    def accept(self, int n, int seq_id=0):
        """The target kept the first ``n`` tokens of the last draft of ``seq_id``."""
        self._ensure_alive()
        self._check_seq(seq_id)
        self.ptr.accept(seq_id, n)

    # ---- the draft context's cache --------------------------------------------------

    def seq_rm(self, int seq_id, int p0=-1, int p1=-1):
        """Drop positions [p0, p1) of ``seq_id`` (-1: all) from the draft context, as
        the caller drops them from the target's. Nothing to do without a draft model."""
        self._ensure_alive()
        if self._draft is not None:
            return self._draft.seq_rm(seq_id, p0, p1)
        return True

    def seq_add(self, int seq_id, int p0, int p1, int delta):
        """Shift positions [p0, p1) of ``seq_id`` by ``delta`` in the draft context."""
        self._ensure_alive()
        if self._draft is not None:
            self._draft.seq_add(seq_id, p0, p1, delta)

    def clear(self):
        """Empty the draft context's cache (the target's was cleared)."""
        self._ensure_alive()
        if self._draft is not None:
            self._draft.clear()

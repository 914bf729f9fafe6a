from llama_cy._handle cimport Handle
from libc.stdint cimport int32_t

from llama_cy._c.llama cimport llama_sampler, llama_token, llama_token_data
from llama_cy._context cimport LlamaContext


cdef class LlamaSampler(Handle):
    cdef llama_sampler *ptr
    # Python samplers inside this one: their errors are re-raised after each call.
    cdef list _python
    # Contains a grammar sampler: accept() checks the grammar allows the token first.
    cdef bint _has_grammar
    # Nothing but llama.cpp's greedy sampler: sample() takes the argmax of the logits
    # directly, with no n_vocab candidate array (the same token, first maximum on ties).
    cdef bint _greedy_only
    # Reused candidate array (n_vocab entries) for sample(): no allocation per token.
    cdef llama_token_data *_cur
    cdef int _cur_cap
    # What the chain left of _cur at the last sample() (llama-server's post-sampling
    # probabilities): its first entry and size; 0 after the greedy shortcut.
    cdef llama_token_data *_last
    cdef size_t _last_size
    # The vocabulary size of the samplers that index by token id (0: none does): ids
    # given to accept/allows/apply are checked against it before llama.cpp sees them.
    cdef int _n_vocab
    # Made by chain(): the only kind llama.cpp can attach to a context as a backend sampler.
    cdef bint _is_chain
    # Attached to a context once: llama.cpp initialises a chain's backend state once
    # (a second llama_set_sampler of it asserts), so it is never attached again.
    cdef bint _backend_bound

    cdef int _raise_pending(self) except -1
    cdef llama_token _pick(self, const float *logits, int n, LlamaSampler first,
                           const llama_token *ids=*, const float *probs=*) except -1
    cdef llama_token _sample(self, LlamaContext ctx, int32_t idx, bint accept,
                             LlamaSampler grammar, bint full) except -1
    cdef int _check_token(self, llama_token token) except -1
    cdef void _dispose(self) noexcept


# A LlamaSampler owning ``ptr`` (LlamaError for NULL): for modules that make samplers
# of their own (the chat engine's reasoning budget).
cdef LlamaSampler _wrap(llama_sampler *ptr, list python=*, int n_vocab=*)

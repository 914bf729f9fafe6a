# cython: language_level=3
"""Common prefixes of token sequences, in C: a sequence's start measures its cache
against the prompt, the server measures every idle slot against each new prompt, and
its prompt cache every cached prompt (as llama-server's ``server_prompt_cache`` does in
C++). In Python each token of a shared prefix cost the engine thread tens of
nanoseconds and each cached entry about a microsecond: 64 slots holding a 1,500-token
system prompt took 3.3 ms of each new request.

The prompt cache's keys are token sequences as int64 bytes
(``np.asarray(tokens, np.int64).tobytes()``); an entry costs a ``memcmp`` or two.
"""

cimport cython
from libc.string cimport memcmp


cdef Py_ssize_t _lcp(const char *a, const char *b, Py_ssize_t n) noexcept nogil:
    """The common prefix, in tokens, of two keys of at least ``n`` tokens each: one
    ``memcmp``, then halves of the range still in doubt."""
    if memcmp(a, b, 8 * n) == 0:
        return n
    cdef Py_ssize_t lo = 0, hi = n, mid  # the first lo tokens are equal, the first hi not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if memcmp(a + 8 * lo, b + 8 * lo, 8 * (mid - lo)) == 0:
            lo = mid
        else:
            hi = mid
    return lo


@cython.boundscheck(False)
@cython.wraparound(False)
def common_prefix(a, b):
    """The length of the longest common prefix of two token sequences (lists, or any
    sequence of ints)."""
    cdef list x = <list>(a if isinstance(a, list) else list(a))
    cdef list y = <list>(b if isinstance(b, list) else list(b))
    cdef Py_ssize_t i, n = min(len(x), len(y))
    for i in range(n):
        if <long long>x[i] != <long long>y[i]:
            return i
    return n


def key_prefix(bytes a, bytes b):
    """The length in tokens of the longest common prefix of two keys."""
    return _lcp(a, b, min(len(a), len(b)) // 8)


def best_match(list keys, bytes asked, double keep_best, double sim_best):
    """The index in ``keys`` of the cached prompt to load for ``asked``, -1 if none:
    llama-server's rule, in the keys' order, from a slot that keeps ``keep_best`` of its
    own tokens and ``sim_best`` of the prompt's: the entry must keep at least a quarter of
    itself, and more of itself and of the prompt than the best before it."""
    cdef Py_ssize_t n_p = len(asked) // 8, n_s, least, n, best = -1, i
    cdef double keep, sim
    cdef const char *p = asked
    cdef bytes key
    if n_p == 0:
        return -1
    for i in range(len(keys)):
        key = keys[i]
        n_s = len(key) // 8
        if n_s == 0:
            continue
        # The fewest common tokens that could win (rounded down): one memcmp rules out
        # most entries before their common prefix is measured.
        least = max((n_s + 3) // 4, <Py_ssize_t>(sim_best * n_p))
        least = min(max(least, <Py_ssize_t>(keep_best * n_s)), n_p, n_s)
        if memcmp(p, <const char *>key, 8 * least) != 0:
            continue
        n = _lcp(p, key, min(n_p, n_s))
        keep = <double>n / n_s
        sim = <double>n / n_p
        if keep >= 0.25 and keep_best < keep and sim_best < sim:
            keep_best, sim_best, best = keep, sim, i
    return best


def holder_of(list keys, bytes key):
    """The index of the first of ``keys`` that holds ``key`` whole (starts with it), -1
    if none."""
    cdef Py_ssize_t n = len(key), i
    cdef bytes k
    for i in range(len(keys)):
        k = keys[i]
        if len(k) >= n and memcmp(<const char *>k, <const char *>key, n) == 0:
            return i
    return -1


def prefixes_of(list keys, bytes key):
    """The indexes of ``keys`` that ``key`` holds whole (prefixes of it, itself too)."""
    cdef Py_ssize_t n = len(key), i
    cdef bytes k
    out = []
    for i in range(len(keys)):
        k = keys[i]
        if len(k) <= n and memcmp(<const char *>k, <const char *>key, len(k)) == 0:
            out.append(i)
    return out

"""LlamaBatch: the tokens (or embeddings) of one ``llama_decode`` call."""

import numpy as np

from libc.stdint cimport int8_t, int32_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from llama_cy._c cimport llama as c
from llama_cy._view cimport ViewOwner, array_view
from llama_cy.errors import InvalidBatchError


cdef class LlamaBatch(ViewOwner):
    """A ``llama_batch`` with a fixed capacity, filled token by token or in bulk.

    ``LlamaBatch(capacity, n_seq_max=1)`` holds token ids; ``LlamaBatch(capacity,
    embd=n_embd)`` holds input embeddings instead. ``capacity`` and ``n_seq_max`` (the
    most sequence ids one token may belong to) are fixed; adding past the capacity raises
    ``OverflowError``. ``token``, ``pos``, ``output`` (and ``embeddings``) are writable
    NumPy views of the C arrays, for vectorised filling followed by ``set_n_tokens``.
    """

    def __cinit__(self, int capacity, int n_seq_max=1, *, int embd=0):
        self._allocated = False
        self._raw = False
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        if n_seq_max <= 0:
            raise ValueError(f"n_seq_max must be positive, got {n_seq_max}")
        if embd < 0:
            raise ValueError(f"embd must be >= 0, got {embd}")
        _batch_alloc(&self.batch, capacity, embd, n_seq_max)
        self._allocated = True
        self._closed = False
        self.capacity = capacity
        self.n_seq_max = n_seq_max
        self.embd = embd

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        # A decode on another thread (a user) or a live view delays this past close().
        if self._allocated:
            _batch_free(&self.batch)
            self._allocated = False

    cdef int _count_outputs(self) noexcept nogil:
        cdef int32_t i, n = 0
        for i in range(self.batch.n_tokens):
            n += self.batch.logits[i] != 0
        return n

    def __len__(self):
        return self.batch.n_tokens if not self._closed else 0

    @property
    def address(self):
        """The address of this batch's ``llama_batch`` struct, for a ctypes view
        (``llama_batch.from_address``); valid until ``close()``. From then on, each
        decode checks the token count and each token's sequence count written there."""
        self._ensure_alive()
        self._raw = True
        return <size_t>&self.batch

    cdef int _check_raw_counts(self) except -1:
        """Counts written through ``address`` that would make llama.cpp read past the
        arrays (the methods keep them right: a batch never handed out is not scanned)."""
        if not self._raw:
            return 0
        cdef int32_t i, n = self.batch.n_tokens
        if n < 0 or n > self.capacity:
            raise InvalidBatchError(
                f"the batch says it holds {n} tokens; its capacity is {self.capacity}", -1)
        for i in range(n):
            if not 1 <= self.batch.n_seq_id[i] <= self.n_seq_max:
                raise InvalidBatchError(
                    f"token {i} belongs to {self.batch.n_seq_id[i]} sequences; the batch "
                    f"holds 1 to n_seq_max={self.n_seq_max}", -1)
        return 0

    @property
    def n_tokens(self):
        self._ensure_alive()
        return self.batch.n_tokens

    @property
    def n_outputs(self):
        """How many tokens ask for logits/embeddings."""
        self._ensure_alive()
        return self._count_outputs()

    def clear(self):
        """Empty the batch (capacity is kept)."""
        self._ensure_alive()
        self.batch.n_tokens = 0

    def add(self, int32_t token, int32_t pos, seq_ids=(0,), bint logits=False):
        """Append one token at position ``pos`` of the sequences ``seq_ids``."""
        self._ensure_alive()
        cdef int32_t i = self.batch.n_tokens
        if i >= self.capacity:
            raise OverflowError(f"batch is full ({self.capacity} tokens)")
        if self.embd:
            raise TypeError("this batch holds embeddings; use add_embedding()")
        self._set_seq_ids(i, seq_ids)
        self.batch.token[i] = token
        self.batch.pos[i] = pos
        self.batch.logits[i] = logits
        self.batch.n_tokens = i + 1

    def add_embedding(self, embedding, int32_t pos, seq_ids=(0,), bint logits=False):
        """Append one input embedding (length ``embd``) at position ``pos``."""
        self._ensure_alive()
        cdef int32_t i = self.batch.n_tokens
        if not self.embd:
            raise TypeError("this batch holds token ids; create it with embd=n_embd")
        if i >= self.capacity:
            raise OverflowError(f"batch is full ({self.capacity} tokens)")
        cdef const float[::1] e = np.ascontiguousarray(embedding, dtype=np.float32)
        if e.shape[0] != self.embd:
            raise ValueError(f"embedding has {e.shape[0]} values, the batch expects {self.embd}")
        self._set_seq_ids(i, seq_ids)
        memcpy(&self.batch.embd[i * self.embd], &e[0], self.embd * sizeof(float))
        self.batch.pos[i] = pos
        self.batch.logits[i] = logits
        self.batch.n_tokens = i + 1

    cdef int _set_seq_ids(self, int32_t i, seq_ids) except -1:
        cdef int32_t n = 0
        if isinstance(seq_ids, int):
            seq_ids = (seq_ids,)
        for s in seq_ids:
            if n >= self.n_seq_max:
                raise ValueError(f"a token may belong to at most {self.n_seq_max} sequences in this batch")
            if s < 0:
                raise ValueError(f"seq_id must be >= 0, got {s}")
            self.batch.seq_id[i][n] = s
            n += 1
        if n == 0:
            raise ValueError("a token needs at least one seq_id")
        self.batch.n_seq_id[i] = n
        return 0

    def add_sequence(self, tokens, int32_t pos=0, int32_t seq_id=0, *, bint logits_last=True):
        """Append ``tokens`` at positions ``pos, pos+1, ...`` of one sequence.

        Only the last token asks for logits unless ``logits_last`` is false.
        """
        self._ensure_alive()
        if self.embd:
            raise TypeError("this batch holds embeddings; use add_embedding()")
        cdef const int32_t[::1] toks = np.ascontiguousarray(tokens, dtype=np.int32)
        cdef int32_t n = toks.shape[0], start = self.batch.n_tokens, j
        if n == 0:
            return
        if start + n > self.capacity:
            raise OverflowError(f"{n} tokens do not fit: {start} of {self.capacity} already used")
        if seq_id < 0:
            raise ValueError(f"seq_id must be >= 0, got {seq_id}")
        memcpy(&self.batch.token[start], &toks[0], n * sizeof(int32_t))
        memset(&self.batch.logits[start], 0, n * sizeof(int8_t))
        for j in range(n):
            self.batch.pos[start + j] = pos + j
            self.batch.n_seq_id[start + j] = 1
            self.batch.seq_id[start + j][0] = seq_id
        if logits_last:
            self.batch.logits[start + n - 1] = 1
        self.batch.n_tokens = start + n

    def set_n_tokens(self, int32_t n):
        """Declare how many entries are filled, after writing the NumPy views directly.

        Entries filled this way belong to the sequences already set for them (sequence
        0 for a new batch) unless ``set_seq_ids`` says otherwise.
        """
        self._ensure_alive()
        if not 0 <= n <= self.capacity:
            raise ValueError(f"n_tokens must be in [0, {self.capacity}], got {n}")
        cdef int32_t j
        for j in range(self.batch.n_tokens, n):
            if self.batch.n_seq_id[j] == 0:
                self.batch.n_seq_id[j] = 1
                self.batch.seq_id[j][0] = 0
        self.batch.n_tokens = n

    def set_seq_ids(self, int32_t i, seq_ids):
        """Set the sequences of entry ``i``."""
        self._ensure_alive()
        if not 0 <= i < self.capacity:
            raise IndexError(f"entry {i} is outside the batch capacity {self.capacity}")
        self._set_seq_ids(i, seq_ids)

    @property
    def token(self):
        """Writable int32 view of the token ids (length ``capacity``)."""
        self._ensure_alive()
        if self.embd:
            raise TypeError("this batch holds embeddings")
        return array_view(self, self.batch.token, b"i", sizeof(int32_t), self.capacity, -1, False)

    @property
    def pos(self):
        """Writable int32 view of the positions (length ``capacity``)."""
        self._ensure_alive()
        return array_view(self, self.batch.pos, b"i", sizeof(int32_t), self.capacity, -1, False)

    @property
    def output(self):
        """Writable int8 view of the output flags (llama.cpp's ``logits`` array)."""
        self._ensure_alive()
        return array_view(self, self.batch.logits, b"b", sizeof(int8_t), self.capacity, -1, False)

    @property
    def embeddings(self):
        """Writable float32 view ``(capacity, embd)`` of an embedding batch."""
        self._ensure_alive()
        if not self.embd:
            raise TypeError("this batch holds token ids")
        return array_view(self, self.batch.embd, b"f", sizeof(float), self.capacity, self.embd, False)

    def __repr__(self):
        if self._closed:
            return "<LlamaBatch closed>"
        return f"<LlamaBatch {self.batch.n_tokens}/{self.capacity} tokens>"


cdef int _batch_alloc(c.llama_batch *b, int capacity, int embd, int n_seq_max) except -1:
    """What ``llama_batch_init`` makes, with every allocation checked and zeroed.

    llama_batch_init neither checks malloc nor guards its size arithmetic: a huge
    capacity writes through NULL. The sequence ids live in one block here (one
    allocation instead of ``capacity``); :func:`_batch_free` is the matching free.
    """
    memset(b, 0, sizeof(c.llama_batch))
    cdef size_t n = capacity
    cdef size_t limit = (<size_t>-1) // 8
    if n_seq_max > 0 and n > limit // <size_t>n_seq_max or embd > 0 and n > limit // <size_t>embd:
        raise MemoryError(f"a batch of {capacity} tokens is too large to allocate")
    if embd:
        b.embd = <float *>calloc(n * embd, sizeof(float))
    else:
        b.token = <int32_t *>calloc(n, sizeof(int32_t))
    b.pos = <int32_t *>calloc(n, sizeof(int32_t))
    b.n_seq_id = <int32_t *>calloc(n, sizeof(int32_t))
    b.seq_id = <int32_t **>calloc(n + 1, sizeof(int32_t *))
    b.logits = <int8_t *>calloc(n, sizeof(int8_t))
    cdef int32_t *ids = <int32_t *>calloc(n * n_seq_max, sizeof(int32_t))
    if (b.embd == NULL and b.token == NULL) or b.pos == NULL or b.n_seq_id == NULL \
            or b.seq_id == NULL or b.logits == NULL or ids == NULL:
        free(ids)
        _batch_free(b)
        raise MemoryError(f"cannot allocate a batch of {capacity} tokens")
    cdef size_t i
    for i in range(n):
        b.seq_id[i] = ids + i * n_seq_max
    return 0


cdef void _batch_free(c.llama_batch *b) noexcept:
    if b.seq_id != NULL:
        free(b.seq_id[0])
    free(b.token)
    free(b.embd)
    free(b.pos)
    free(b.n_seq_id)
    free(b.seq_id)
    free(b.logits)
    memset(b, 0, sizeof(c.llama_batch))

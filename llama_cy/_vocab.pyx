# cython: language_level=3
"""The vocabulary (``llama_vocab_*``, ``llama_tokenize``, ``llama_detokenize``): text to
tokens and back, token attributes and special tokens.

:class:`LlamaVocab` holds a model's ``const llama_vocab *``; :class:`~llama_cy.LlamaModel`
is one, so its tokenizer calls are these. The vocabulary lives as long as its model: the
model's lifetime rule (:class:`~llama_cy._handle.Handle`) covers both.
"""

import numpy as np

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t

from llama_cy._c cimport llama as c
from llama_cy._c.llama cimport llama_token

from llama_cy.errors import InvalidTokenError

cdef dict _VOCAB_TYPES = {
    c.LLAMA_VOCAB_TYPE_NONE: "none",
    c.LLAMA_VOCAB_TYPE_SPM: "spm",
    c.LLAMA_VOCAB_TYPE_BPE: "bpe",
    c.LLAMA_VOCAB_TYPE_WPM: "wpm",
    c.LLAMA_VOCAB_TYPE_UGM: "ugm",
    c.LLAMA_VOCAB_TYPE_RWKV: "rwkv",
    c.LLAMA_VOCAB_TYPE_PLAMO2: "plamo2",
    c.LLAMA_VOCAB_TYPE_TEST: "test",
}


cdef class LlamaVocab(Handle):
    """A model's vocabulary: tokenization, token pieces and attributes, special tokens."""

    def __cinit__(self):
        self.vocab = NULL
        self.n_vocab = 0

    cdef int _check_token(self, llama_token token) except -1:
        if token < 0 or token >= self.n_vocab:
            raise InvalidTokenError(f"token {token} is out of range [0, {self.n_vocab})")
        return 0

    @property
    def vocab_type(self):
        """``spm``, ``bpe``, ``wpm``, ``ugm``, ``rwkv``, ``plamo2``, ``test`` or ``none``."""
        self._ensure_alive()
        return _VOCAB_TYPES.get(c.llama_vocab_get_type(self.vocab), "unknown")

    def tokenize(self, text, *, bint add_special=True, bint parse_special=False):
        """Tokens of ``text`` (str or UTF-8 bytes) as an int32 NumPy array."""
        self._ensure_alive()
        cdef bytes data = text.encode() if isinstance(text, str) else bytes(text)
        if len(data) > 2**31 - 9:
            raise OverflowError("the text is too long for llama_tokenize (2 GiB at most)")
        cdef const char *ptr = data
        cdef int32_t n_text = len(data)
        # A token covers at least one byte, plus the specials llama.cpp may add.
        cdef int32_t cap = n_text + 8
        out = np.empty(cap, dtype=np.int32)
        cdef int32_t[::1] view = out
        cdef int32_t n
        self._enter()  # close() from another thread waits for the vocabulary's last user
        try:
            with nogil:
                n = c.llama_tokenize(self.vocab, ptr, n_text, &view[0], cap, add_special, parse_special)
            if n < 0:
                if n == -2147483648:
                    raise OverflowError("tokenization result exceeds int32")
                cap = -n
                out = np.empty(cap, dtype=np.int32)
                view = out
                with nogil:
                    n = c.llama_tokenize(self.vocab, ptr, n_text, &view[0], cap, add_special, parse_special)
        finally:
            self._release()
        return out[:n].copy() if n < cap // 2 else out[:n]

    def token_to_piece(self, llama_token token, *, bint special=False, int32_t lstrip=0):
        """The bytes of one token (a piece may be part of a UTF-8 character)."""
        self._ensure_alive()
        self._check_token(token)
        cdef char small[64]
        cdef int32_t n = c.llama_token_to_piece(self.vocab, token, small, sizeof(small), lstrip, special)
        if n >= 0:
            return PyBytes_FromStringAndSize(small, n)
        buf = bytearray(-n)
        n = c.llama_token_to_piece(self.vocab, token, buf, len(buf), lstrip, special)
        return bytes(buf[:n])

    def detokenize(self, tokens, *, bint remove_special=False, bint unparse_special=False):
        """Text of a token sequence (invalid UTF-8 is replaced)."""
        self._ensure_alive()
        cdef int32_t[::1] toks = self._token_array(tokens)
        cdef int32_t n_tok = toks.shape[0]
        cdef const int32_t *tp = &toks[0] if n_tok else NULL
        if n_tok > (2**31 - 17) // 8:
            raise OverflowError("too many tokens for llama_detokenize")
        cdef int32_t cap = n_tok * 8 + 16
        buf = bytearray(cap)
        cdef char *out = buf
        cdef int32_t n
        self._enter()
        try:
            with nogil:
                n = c.llama_detokenize(self.vocab, tp, n_tok, out, cap, remove_special, unparse_special)
            if n < 0:
                cap = -n
                buf = bytearray(cap)
                out = buf
                with nogil:
                    n = c.llama_detokenize(self.vocab, tp, n_tok, out, cap, remove_special, unparse_special)
        finally:
            self._release()
        return bytes(buf[:n]).decode("utf-8", "replace")

    cdef int32_t[::1] _token_array(self, tokens):
        """Tokens as a contiguous int32 array, every id checked against the vocabulary."""
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError("tokens must be a one-dimensional sequence of ints")
        if arr.size:
            if arr.dtype.kind not in "iu":
                raise TypeError(f"tokens must be integers, not {arr.dtype}")
            lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= self.n_vocab:
                raise InvalidTokenError(
                    f"token {lo if lo < 0 else hi} is out of range [0, {self.n_vocab})")
        return np.ascontiguousarray(arr, dtype=np.int32)

    def token_text(self, llama_token token):
        """The token's text as stored in the vocabulary."""
        self._ensure_alive()
        self._check_token(token)
        return c.llama_vocab_get_text(self.vocab, token).decode("utf-8", "replace")

    def token_score(self, llama_token token):
        self._ensure_alive()
        self._check_token(token)
        return c.llama_vocab_get_score(self.vocab, token)

    def token_attr(self, llama_token token):
        """The ``llama_token_attr`` bit flags of a token (see :data:`TOKEN_ATTRS`)."""
        self._ensure_alive()
        self._check_token(token)
        return <int>c.llama_vocab_get_attr(self.vocab, token)

    def is_eog(self, llama_token token):
        """Whether the token ends generation (EOS, EOT, ...)."""
        self._ensure_alive()
        self._check_token(token)
        return c.llama_vocab_is_eog(self.vocab, token)

    def is_control(self, llama_token token):
        self._ensure_alive()
        self._check_token(token)
        return c.llama_vocab_is_control(self.vocab, token)

    @property
    def add_bos(self):
        self._ensure_alive()
        return c.llama_vocab_get_add_bos(self.vocab)

    @property
    def add_eos(self):
        self._ensure_alive()
        return c.llama_vocab_get_add_eos(self.vocab)

    @property
    def add_sep(self):
        self._ensure_alive()
        return c.llama_vocab_get_add_sep(self.vocab)

    # Special tokens: -1 (LLAMA_TOKEN_NULL) where the vocabulary has none.
    @property
    def token_bos(self):
        self._ensure_alive()
        return c.llama_vocab_bos(self.vocab)

    @property
    def token_eos(self):
        self._ensure_alive()
        return c.llama_vocab_eos(self.vocab)

    @property
    def token_eot(self):
        self._ensure_alive()
        return c.llama_vocab_eot(self.vocab)

    @property
    def token_sep(self):
        self._ensure_alive()
        return c.llama_vocab_sep(self.vocab)

    @property
    def token_nl(self):
        self._ensure_alive()
        return c.llama_vocab_nl(self.vocab)

    @property
    def token_pad(self):
        self._ensure_alive()
        return c.llama_vocab_pad(self.vocab)

    @property
    def token_mask(self):
        self._ensure_alive()
        return c.llama_vocab_mask(self.vocab)

    @property
    def token_fim_pre(self):
        self._ensure_alive()
        return c.llama_vocab_fim_pre(self.vocab)

    @property
    def token_fim_suf(self):
        self._ensure_alive()
        return c.llama_vocab_fim_suf(self.vocab)

    @property
    def token_fim_mid(self):
        self._ensure_alive()
        return c.llama_vocab_fim_mid(self.vocab)

    @property
    def token_fim_pad(self):
        self._ensure_alive()
        return c.llama_vocab_fim_pad(self.vocab)

    @property
    def token_fim_rep(self):
        self._ensure_alive()
        return c.llama_vocab_fim_rep(self.vocab)

    @property
    def token_fim_sep(self):
        self._ensure_alive()
        return c.llama_vocab_fim_sep(self.vocab)


TOKEN_ATTRS = {
    "undefined": c.LLAMA_TOKEN_ATTR_UNDEFINED,
    "unknown": c.LLAMA_TOKEN_ATTR_UNKNOWN,
    "unused": c.LLAMA_TOKEN_ATTR_UNUSED,
    "normal": c.LLAMA_TOKEN_ATTR_NORMAL,
    "control": c.LLAMA_TOKEN_ATTR_CONTROL,
    "user_defined": c.LLAMA_TOKEN_ATTR_USER_DEFINED,
    "byte": c.LLAMA_TOKEN_ATTR_BYTE,
    "normalized": c.LLAMA_TOKEN_ATTR_NORMALIZED,
    "lstrip": c.LLAMA_TOKEN_ATTR_LSTRIP,
    "rstrip": c.LLAMA_TOKEN_ATTR_RSTRIP,
    "single_word": c.LLAMA_TOKEN_ATTR_SINGLE_WORD,
}

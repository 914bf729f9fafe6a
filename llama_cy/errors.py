"""The exceptions of llama_cy: one hierarchy rooted at :class:`LlamaError`.

C return codes become exceptions here and nowhere else, so the meaning of each code
is written down once.
"""

from __future__ import annotations

__all__ = [
    "AbortedError",
    "BusyError",
    "ClosedError",
    "ContextCreationError",
    "ContextOverflowError",
    "DecodeError",
    "EncodeError",
    "GrammarError",
    "InvalidBatchError",
    "InvalidTokenError",
    "KVCacheFullError",
    "LlamaError",
    "MediaError",
    "ModelLoadError",
    "StateError",
    "call_error",
    "decode_error",
    "quantize_error",
]


class LlamaError(Exception):
    """Base class of every error raised by llama_cy."""


class ClosedError(LlamaError, ValueError):
    """A method was called on a handle after ``close()``."""


class ModelLoadError(LlamaError, OSError):
    """A model file is missing, empty, corrupt, truncated or of an unknown architecture."""


class ContextCreationError(LlamaError):
    """llama.cpp could not create a context (out of memory, invalid parameters)."""


class DecodeError(LlamaError):
    """``llama_decode`` failed; ``code`` is its return value."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class KVCacheFullError(DecodeError):
    """No free slot in the KV cache for the batch (return code 1): the context is full."""


class AbortedError(DecodeError):
    """The computation was stopped by the abort callback (return code 2)."""


class InvalidBatchError(DecodeError, ValueError):
    """llama.cpp rejected the batch (return code -1): bad token, position or sequence id."""


class EncodeError(DecodeError):
    """``llama_encode`` failed."""


class InvalidTokenError(LlamaError, ValueError):
    """A token id outside ``[0, n_vocab)``."""


class StateError(LlamaError, OSError):
    """Saving or restoring a context or sequence state failed."""


class ContextOverflowError(LlamaError, ValueError):
    """A prompt does not fit in the context; ``n_tokens`` and ``n_ctx`` say by how much."""

    def __init__(self, n_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"the prompt has {n_tokens} tokens but the context holds {n_ctx} "
            f"(prompt and at least one generated token must fit): shorten the prompt or "
            "raise n_ctx"
        )
        self.n_tokens = n_tokens
        self.n_ctx = n_ctx


class MediaError(LlamaError, ValueError):
    """An image or clip of audio that cannot be used: not decodable, cut short, too
    large, or of a kind the multimodal projector does not take."""


class BusyError(LlamaError, RuntimeError):
    """The object is in use by an unfinished call in this same thread (an open stream)."""


class GrammarError(LlamaError, ValueError):
    """A GBNF grammar (or a lazy-grammar pattern) did not parse."""


def decode_error(code: int, what: str = "llama_decode") -> DecodeError:
    """The exception for a non-zero return code of ``llama_decode``/``llama_encode``.

    The meanings are those documented in ``llama.h``: 1 no KV slot, 2 aborted,
    -1 invalid input batch, < -1 a fatal error in the computation.
    """
    if code == 1:
        return KVCacheFullError(
            f"{what}: no KV cache slot for the batch (context full; "
            "free space with seq_rm or use a larger n_ctx)",
            code,
        )
    if code == 2:
        return AbortedError(f"{what}: aborted", code)
    if code == -1:
        return InvalidBatchError(f"{what}: invalid batch (token, position or seq_id)", code)
    cls = EncodeError if what == "llama_encode" else DecodeError
    return cls(f"{what} failed with code {code}", code)


def call_error(code: int, what: str) -> LlamaError:
    """The exception for a non-zero return code of a ``llama.h`` call that documents no
    codes of its own (``llama_set_adapters_lora``, ``llama_set_adapter_cvec``): llama.cpp
    logs the reason, which reaches the ``llama_cy`` logger."""
    return LlamaError(f"{what} failed with code {code} (see the 'llama_cy' log)")


def quantize_error(code: int, path: str) -> ModelLoadError:
    """The exception for a non-zero return code of ``llama_model_quantize``: it returns
    1 for any failure (unreadable input, unsupported type, write error) and logs why."""
    return ModelLoadError(
        f"llama_model_quantize failed on {path!r} with code {code} (see the 'llama_cy' log)"
    )

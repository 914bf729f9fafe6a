"""llama-cpp-python's ``llama_cpp.llama_tokenizer``."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, Protocol

import llama_cy

__all__ = ["BaseLlamaTokenizer", "LlamaHFTokenizer", "LlamaTokenizer"]


class _Tokenizes(Protocol):
    """What LlamaTokenizer wraps: a ``Llama`` (llama_cpp's, or a vocabulary-only one)."""

    def tokenize(self, text: bytes, add_bos: bool = ..., special: bool = ...) -> list[int]: ...

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = ..., special: bool = ...
    ) -> bytes: ...


def without_bos_space(tokens: Sequence[int], text: bytes, bos: int) -> bytes:
    """llama-cpp-python's detokenize: without the space SentencePiece puts before the
    first word when ``tokens`` start with BOS."""
    if len(tokens) and tokens[0] == bos and text[:1] == b" ":
        return text[1:]
    return text


class _Vocabulary(llama_cy.Llama):
    """A GGUF's vocabulary alone (``vocab_only``), detokenizing as ``llama_cpp.Llama``."""

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        out = super().detokenize(tokens, prev_tokens, special)
        return out if prev_tokens else without_bos_space(tokens, out, self.token_bos())


class BaseLlamaTokenizer(abc.ABC):
    @abc.abstractmethod
    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]: ...

    @abc.abstractmethod
    def detokenize(
        self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False
    ) -> bytes: ...


class LlamaTokenizer(BaseLlamaTokenizer):
    """The model's own tokenizer (llama.cpp's)."""

    def __init__(self, llama: _Tokenizes) -> None:
        self._llama = llama

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        return self._llama.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(
        self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False
    ) -> bytes:
        return self._llama.detokenize(tokens, prev_tokens=prev_tokens, special=special)

    def encode(self, text: str, add_bos: bool = True, special: bool = True) -> list[int]:
        return self.tokenize(
            text.encode("utf-8", errors="ignore"), add_bos=add_bos, special=special
        )

    def decode(self, tokens: list[int]) -> str:
        return self.detokenize(tokens).decode("utf-8", errors="ignore")

    @classmethod
    def from_ggml_file(cls, path: str) -> LlamaTokenizer:
        return cls(_Vocabulary(path, vocab_only=True))


class LlamaHFTokenizer(BaseLlamaTokenizer):
    """A Hugging Face ``transformers`` tokenizer (for models whose GGUF vocabulary
    differs from the original's)."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self.hf_tokenizer = hf_tokenizer

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        tokens: list[int] = self.hf_tokenizer.encode(
            text.decode("utf-8", errors="ignore"), add_special_tokens=special
        )
        return tokens

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        skip = not special
        if prev_tokens is None:
            text: str = self.hf_tokenizer.decode(list(tokens), skip_special_tokens=skip)
            return text.encode("utf-8", errors="ignore")
        before: str = self.hf_tokenizer.decode(list(prev_tokens), skip_special_tokens=skip)
        whole: str = self.hf_tokenizer.decode([*prev_tokens, *tokens], skip_special_tokens=skip)
        return whole[len(before) :].encode("utf-8", errors="ignore")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str) -> LlamaHFTokenizer:
        try:
            from transformers import AutoTokenizer
        except ImportError as e:
            raise ImportError(
                "LlamaHFTokenizer needs transformers: pip install transformers"
            ) from e
        return cls(AutoTokenizer.from_pretrained(pretrained_model_name_or_path))

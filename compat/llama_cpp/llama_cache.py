"""llama-cpp-python's prompt caches: states of finished completions, found again by the
longest prefix they share with a new prompt (``Llama.set_cache``)."""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_cy.generation import common_prefix

if TYPE_CHECKING:
    from ._state import LlamaState

__all__ = ["BaseLlamaCache", "LlamaCache", "LlamaDiskCache", "LlamaRAMCache"]


class BaseLlamaCache(ABC):
    """States keyed by token sequences, up to ``capacity_bytes`` of state data."""

    def __init__(self, capacity_bytes: int = 2 << 30) -> None:
        self.capacity_bytes = capacity_bytes

    @property
    @abstractmethod
    def cache_size(self) -> int:
        """Bytes of state held."""

    def _find_longest_prefix_key(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best, best_len = None, 0
        for k in self._keys():
            n = common_prefix(list(k), list(key))
            if n > best_len:
                best, best_len = k, n
        return best

    @abstractmethod
    def _keys(self) -> list[tuple[int, ...]]: ...

    @abstractmethod
    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        """The state whose tokens share the longest prefix with ``key``; KeyError if none."""

    @abstractmethod
    def __contains__(self, key: Sequence[int]) -> bool: ...

    @abstractmethod
    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None: ...


class LlamaRAMCache(BaseLlamaCache):
    """States in memory; the least recently used go first when over capacity."""

    def __init__(self, capacity_bytes: int = 2 << 30) -> None:
        super().__init__(capacity_bytes)
        self.cache_state: OrderedDict[tuple[int, ...], LlamaState] = OrderedDict()

    @property
    def cache_size(self) -> int:
        return sum(state.llama_state_size for state in self.cache_state.values())

    def _keys(self) -> list[tuple[int, ...]]:
        return list(self.cache_state)

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_longest_prefix_key(tuple(key))
        if found is None:
            raise KeyError("no cached state shares a prefix with this prompt")
        self.cache_state.move_to_end(found)
        return self.cache_state[found]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_longest_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        key = tuple(key)
        self.cache_state.pop(key, None)
        self.cache_state[key] = value
        while self.cache_size > self.capacity_bytes and len(self.cache_state) > 0:
            self.cache_state.popitem(last=False)


LlamaCache = LlamaRAMCache


class LlamaDiskCache(BaseLlamaCache):
    """States in files under ``cache_dir`` (pickled, as llama-cpp-python's); the least
    recently used go first when over capacity."""

    def __init__(
        self, cache_dir: str = ".cache/llama_cache", capacity_bytes: int = 2 << 30
    ) -> None:
        super().__init__(capacity_bytes)
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._index = self.cache_dir / "index.pickle"
        self._entries: OrderedDict[tuple[int, ...], tuple[str, int]] = OrderedDict()
        if self._index.is_file():
            self._entries = pickle.loads(self._index.read_bytes())

    @property
    def cache_size(self) -> int:
        return sum(size for _, size in self._entries.values())

    def _keys(self) -> list[tuple[int, ...]]:
        return list(self._entries)

    def _save_index(self) -> None:
        self._index.write_bytes(pickle.dumps(self._entries))

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_longest_prefix_key(tuple(key))
        if found is None:
            raise KeyError("no cached state shares a prefix with this prompt")
        name, _ = self._entries[found]
        self._entries.move_to_end(found)
        self._save_index()
        state: Any = pickle.loads((self.cache_dir / name).read_bytes())
        return state  # type: ignore[no-any-return]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_longest_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        key = tuple(key)
        name = f"{abs(hash(key)):x}.state"
        (self.cache_dir / name).write_bytes(pickle.dumps(value))
        self._entries.pop(key, None)
        self._entries[key] = (name, value.llama_state_size)
        while self.cache_size > self.capacity_bytes and self._entries:
            _, (old, _) = self._entries.popitem(last=False)
            (self.cache_dir / old).unlink(missing_ok=True)
        self._save_index()

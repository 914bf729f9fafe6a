"""``llama_cpp``: llama-cpp-python's package name, running on llama_cy.

Installed by the ``llama-cy-llama-cpp`` distribution, for programs written for
llama-cpp-python: ``import llama_cpp`` gives its high-level API (``Llama``,
``LlamaGrammar``, caches, chat formats) on llama_cy and its ctypes layer
(:mod:`llama_cpp.llama_cpp`) on llama_cy's own libllama.
"""

from __future__ import annotations

from importlib import metadata as _metadata


def _refuse_shadowing() -> None:
    """Both this package and llama-cpp-python install ``llama_cpp/``: the later one's
    files overwrite the earlier one's. Say so rather than run a mix."""
    try:
        _metadata.distribution("llama-cpp-python")
    except _metadata.PackageNotFoundError:
        return
    raise ImportError(
        "llama-cpp-python and llama-cy-llama-cpp are both installed and both provide the "
        "llama_cpp package, so its files are a mix of the two. Keep one: "
        "pip uninstall -y llama-cpp-python llama-cy-llama-cpp, then install the one you want"
    )


_refuse_shadowing()

from .llama import *  # noqa: E402, F403
from .llama_cpp import *  # noqa: E402, F403
from .llama_types import *  # noqa: E402, F403

#: The llama-cpp-python API level this package follows.
__version__ = "0.3.36"

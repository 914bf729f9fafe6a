from typing_extensions import disjoint_base

from llama_cy._handle import Handle

@disjoint_base
class ViewOwner(Handle):
    """Base of types that lend zero-copy NumPy views of their C memory."""

from typing_extensions import disjoint_base

@disjoint_base
class ViewOwner:
    """Base of types that lend zero-copy NumPy views of their C memory."""

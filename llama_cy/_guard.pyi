"""A GGML_ASSERT during a model load or a context's creation becomes a failed call.

Nothing here is for Python: the module installs ggml's abort callback on import and
lends its guarded calls to the other extension modules (``cimport``).
"""

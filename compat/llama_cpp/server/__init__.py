"""llama-cpp-python's ``llama_cpp.server``: ``python -m llama_cpp.server`` runs
llama-cy's server."""

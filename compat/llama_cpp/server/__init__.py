"""llama-cpp-python's ``llama_cpp.server``: ``python -m llama_cpp.server`` runs llama-cy's
server; :func:`llama_cpp.server.app.create_app` is the same server as an ASGI app, and
:mod:`llama_cpp.server.settings` its settings classes."""

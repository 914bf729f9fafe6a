"""The server's routes, one module per API: each has ``routes(server)``, the
:data:`~llama_cy.server.core.RouteSpec` list that :mod:`llama_cy.server.app` mounts."""

"""``python -m llama_cy``: the ``llama-cy`` command."""

import sys

from llama_cy.cli import main

sys.exit(main())

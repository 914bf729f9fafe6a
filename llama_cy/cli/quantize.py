"""``llama-cy quantize``: write a GGUF model again in another weight type
(``llama_model_quantize``, llama-quantize's flags), with a progress bar."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time

from llama_cy.cli.common import Bar

__all__ = ["main"]


class _TensorProgress(logging.Handler):
    """Turns llama_model_quantize's ``[ i/ n] name ...`` log lines into a progress bar."""

    _LINE = re.compile(r"\[\s*(\d+)/\s*(\d+)\]")

    def __init__(self, bar: Bar) -> None:
        super().__init__(logging.INFO)
        self.bar = bar
        self.done = 0

    def emit(self, record: logging.LogRecord) -> None:
        m = self._LINE.search(record.getMessage())
        if m:
            self.done = int(m.group(1))
            self.bar(self.done / int(m.group(2)))


def main(args: argparse.Namespace) -> int:
    from llama_cy._quantize import QUANT_TYPES, quantize

    if args.type.upper() not in QUANT_TYPES:
        raise SystemExit(
            f"llama-cy quantize: unknown type {args.type!r}; one of {', '.join(QUANT_TYPES)}"
        )
    logger = logging.getLogger("llama_cy")
    handler = _TensorProgress(Bar(f"quantizing to {args.type.upper()}"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if not args.verbose else logging.DEBUG)
    if not args.verbose:
        logger.propagate = False
    t0 = time.perf_counter()
    try:
        quantize(
            args.input,
            args.output,
            args.type,
            args.nthread,
            allow_requantize=args.allow_requantize,
            quantize_output_tensor=not args.leave_output_tensor,
            pure=args.pure,
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = True
    a, b = os.path.getsize(args.input), os.path.getsize(args.output)
    print(
        f"{args.input} ({a / 2**20:.1f} MiB) -> {args.output} ({b / 2**20:.1f} MiB, "
        f"{args.type.upper()}): {handler.done} tensors in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0

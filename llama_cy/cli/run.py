"""``llama-cy run``: complete one prompt, streamed to stdout (llama-cli's and
llama-mtmd-cli's flags)."""

from __future__ import annotations

import argparse
import sys

from llama_cy.cli.common import llama, read_media, sampling, set_priority, timings_line, verbose
from llama_cy.flags.parser import process_escapes

__all__ = ["main", "process_escapes"]


def main(args: argparse.Namespace) -> int:
    verbose(args.verbose)
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            prompt = f.read()
    elif args.prompt is not None:
        prompt = args.prompt
    elif not sys.stdin.isatty():
        prompt = sys.stdin.read()
    else:
        raise SystemExit("llama-cy run: give a prompt with -p TEXT or -f FILE (or on stdin)")
    if args.escape:
        prompt = process_escapes(prompt)
    set_priority(args)
    with llama(args) as llm:
        if args.display_prompt:
            sys.stdout.write(prompt)
            sys.stdout.flush()
        last = None
        files = [read_media(f) for f in [*(args.image or ()), *(args.audio or ())]]
        if files:
            # As llama-mtmd-cli: media without markers in the prompt go before it.
            assert llm.mtmd is not None  # mtmd() refused media without --mmproj
            marker = llm.mtmd.marker
            if marker not in prompt:
                prompt = marker * len(files) + prompt
            tokens, media = llm.preparer.media_prompt(prompt, llm.preparer.bitmaps(files))
            chunks = llm.generate(
                llm.preparer.completion(tokens, media=media, **sampling(args, llm.model))
            )
        else:
            chunks = llm.stream(prompt, **sampling(args, llm.model))
        for chunk in chunks:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
            last = chunk
        sys.stdout.write("\n")
        if last is not None and last.timings is not None:
            print(timings_line(last.timings), file=sys.stderr)
    return 0

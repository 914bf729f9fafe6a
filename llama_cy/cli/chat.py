"""``llama-cy chat``: talk with the model through its chat template, with history
(llama-cli's flags); ``/clear`` forgets, ``/exit`` ends, ``/image`` and ``/audio`` add
media to the next message."""

from __future__ import annotations

import argparse
import base64
import sys
from typing import Any

from llama_cy.cli.common import llama, read_media, sampling, set_priority, verbose
from llama_cy.flags.values import chat_template

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    verbose(args.verbose)
    tty = sys.stdin.isatty()
    set_priority(args)
    with llama(args, **chat_template(args)) as llm:
        history: list[dict[str, Any]] = []
        if args.system_prompt:
            history.append({"role": "system", "content": args.system_prompt})
        if tty:
            print(
                "chat: /clear forgets the conversation, /exit (or Ctrl-D) ends it"
                + (
                    ", /image FILE and /audio FILE add media to the next message"
                    if args.mmproj
                    else ""
                ),
                file=sys.stderr,
            )
        params = sampling(args, llm.model)
        pending: list[dict[str, Any]] = []  # media parts for the next message
        while True:
            if tty:
                try:
                    line = input("> ")
                except EOFError:
                    break
            else:
                raw = sys.stdin.readline()
                if not raw:
                    break
                line = raw.rstrip("\n")
            if not line.strip():
                continue
            if line.strip() == "/exit":
                break
            if line.strip() == "/clear":
                del history[1 if args.system_prompt else 0 :]
                pending.clear()
                continue
            command, _, arg = line.strip().partition(" ")
            if command in ("/image", "/audio"):
                if not args.mmproj:
                    print(f"llama-cy chat: {command} needs --mmproj", file=sys.stderr)
                    continue
                try:
                    data = base64.b64encode(read_media(arg.strip())).decode()
                except SystemExit as exc:
                    print(exc, file=sys.stderr)
                    continue
                if command == "/image":
                    url = f"data:image/*;base64,{data}"
                    pending.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    pending.append({"type": "input_audio", "input_audio": {"data": data}})
                print(f"({arg.strip()} added to the next message)", file=sys.stderr)
                continue
            if pending:
                history.append(
                    {"role": "user", "content": [*pending, {"type": "text", "text": line}]}
                )
                pending = []
            else:
                history.append({"role": "user", "content": line})
            reply = []
            try:
                for chunk in llm.create_chat_completion(history, stream=True, **params):
                    text = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
                    if text:
                        reply.append(text)
                        sys.stdout.write(text)
                        sys.stdout.flush()
            except KeyboardInterrupt:
                sys.stdout.write(" [interrupted]")
            except ValueError as exc:  # the conversation outgrew the context
                history.pop()
                print(f"\nllama-cy chat: {exc}; /clear starts over", file=sys.stderr)
                continue
            sys.stdout.write("\n")
            sys.stdout.flush()
            history.append({"role": "assistant", "content": "".join(reply)})
    return 0

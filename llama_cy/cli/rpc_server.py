"""``llama-cy rpc-server``: lend this machine's devices to llama.cpp's RPC backend
(rpc-server's flags). Unauthenticated: keep it on loopback or a private network."""

from __future__ import annotations

import argparse
import os
import sys

from llama_cy.cli.common import verbose
from llama_cy.flags.values import threads

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    import threading

    from llama_cy._backend import default_n_threads, devices
    from llama_cy._rpc import rpc_start_server

    verbose(args.verbose)
    local = [d for d in devices() if not d.backend.startswith("RPC")]
    if args.device:
        names = [n.strip() for n in args.device.split(",") if n.strip()]
        chosen = [d for d in local if d.name in names]
        missing = set(names) - {d.name for d in chosen}
        if missing:
            known = ", ".join(d.name for d in local)
            raise SystemExit(
                f"llama-cy rpc-server: no device {sorted(missing)}; there are: {known}"
            )
    else:  # the GPUs if there are any, else the CPU (as llama.cpp's rpc-server)
        chosen = [d for d in local if d.type in ("gpu", "igpu")] or [
            d for d in local if d.type == "cpu"
        ]
    endpoint = f"{args.host}:{args.port}"
    print(
        "llama-cy rpc-server: WARNING: the RPC protocol has no authentication and no "
        "encryption: anyone who reaches this port can run code on these devices"
        + (
            ""
            if args.host in ("127.0.0.1", "localhost", "::1")
            else "; never expose it to an untrusted network"
        ),
        file=sys.stderr,
    )
    served = ", ".join(d.name for d in chosen)
    print(f"llama-cy rpc-server: serving {served} on {endpoint}", file=sys.stderr, flush=True)
    n_threads = threads(args.threads) or default_n_threads()
    cache = os.path.expanduser(args.cache_dir) if args.cache_dir else None
    # ggml's server loop never returns: it runs in a daemon thread so that Ctrl-C and
    # SIGTERM end the process.
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            rpc_start_server(endpoint, chosen, n_threads, cache)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve, name="llama_cy-rpc-server", daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return 1

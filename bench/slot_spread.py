"""Why a server's slot choice decides its tokens/s: N streamed clients pinned to N
adjacent slots, then to N slots spread over the whole range (``id_slot``), on a running
server (``llama-cy serve`` or llama-server, ``-np`` at least the highest slot + 1).

usage: python bench/slot_spread.py PORT [--clients 8] [--slots 64] [--rounds 2]

llama.cpp gives each sequence its own KV stream (unless ``--kv-unified``), and a step's
attention reads every stream from its lowest sequence to its highest: 8 sequences on
slots 0 and 63 read 64 streams' caches. On this CPU (tiny llama, ``-np 64 -c 32768``)
slots 0-7 gave 1,990 tok/s and slots 0, 9, ..., 63 gave 1,025 on llama-cy serve, and
2,000 against 1,130-1,283 on llama-server.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server_rates


def pinned(port: int, slots: list[int], n_predict: int) -> float:
    """Tokens/s of one streamed client per slot, each on its own slot."""
    load = server_rates.Load("/completion", True, len(slots), 2, n_predict, tuple(slots))
    out = server_rates.run(port, load)
    if out.failed:
        raise RuntimeError(out.failed[0])
    return out.tokens_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n-predict", type=int, default=256)
    args = parser.parse_args()
    step = max(1, (args.slots - 1) // max(1, args.clients - 1))
    layouts = {
        "adjacent": list(range(args.clients)),
        "spread": [min(i * step, args.slots - 1) for i in range(args.clients)],
    }
    for _ in range(args.rounds):
        for name, slots in layouts.items():
            rate = pinned(args.port, slots, args.n_predict)
            print(f"{name} {slots}: {rate:.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()

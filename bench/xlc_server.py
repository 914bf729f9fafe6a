"""xllamacpp's in-process server (llama-server's C++ engine and HTTP layer inside a
Python process), started as a user of that package starts it; run in its own virtual
environment by the bench.

usage: python xlc_server.py MODEL PORT N_PARALLEL N_CTX THREADS
"""

from __future__ import annotations

import signal
import sys
import threading

import xllamacpp as xlc  # type: ignore[import-not-found]


def main() -> None:
    model, port, n_parallel, n_ctx, threads = sys.argv[1:6]
    params = xlc.CommonParams()
    params.model.path = model
    params.port = int(port)
    params.n_parallel = int(n_parallel)
    params.n_ctx = int(n_ctx)
    params.cpuparams.n_threads = int(threads)
    params.cpuparams_batch.n_threads = int(threads)
    server = xlc.Server(params)
    print(f"xllamacpp {xlc.__version__} listening on {server.listening_address}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    del server


if __name__ == "__main__":
    main()

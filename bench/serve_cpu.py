"""CPU time per request of each thread of a running server, from /proc (Linux): where a
server's per-request work goes (its event loop, its engine, llama.cpp's pool threads).

usage: python bench/serve_cpu.py PORT PID [--requests 600] [--n-predict 1] [--plain]

One client sends the requests one after another (bench/server_rates.py's load, on
``/completion``); the threads' utime+stime before and after, divided by the requests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server_rates


def thread_cpu(pid: int) -> dict[str, float]:
    """Seconds of CPU each thread of ``pid`` has used, by ``name:tid`` (a thread that
    ends while they are read is left out)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[f"{name}:{tid}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def settle(pids: list[int], limit_s: float = 3.0) -> None:
    """Wait until the processes ``pids`` are idle together (under 5 ms of CPU in 0.1 s),
    at most ``limit_s``: llama.cpp's pool threads poll for work a while after a
    server's last step, on the CPUs the next server's load would use."""

    def used() -> float:
        return sum(sum(thread_cpu(pid).values()) for pid in pids)

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = used()
        time.sleep(0.1)
        if used() - before < 0.005:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("pid", type=int)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--n-predict", type=int, default=1)
    parser.add_argument("--plain", action="store_true", help="not streamed")
    args = parser.parse_args()
    load = server_rates.Load("/completion", not args.plain, 1, args.requests, args.n_predict)
    server_rates.run(args.port, server_rates.Load("/completion", True, 1, 50, args.n_predict))
    before, t0 = thread_cpu(args.pid), time.perf_counter()
    outcome = server_rates.run(args.port, load)
    wall, after = time.perf_counter() - t0, thread_cpu(args.pid)
    per_request = wall / args.requests * 1e3
    print(f"TTFT p50 {outcome.quantile(0.5):.2f} ms, wall {per_request:.2f} ms a request")
    for name, seconds in after.items():
        used = seconds - before.get(name, 0.0)
        if used > 0.01:
            print(f"  {name}: {used / args.requests * 1e6:.0f} us a request")


if __name__ == "__main__":
    main()

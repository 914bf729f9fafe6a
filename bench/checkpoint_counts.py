"""The prompt tokens a server decodes for a second turn: native llama-server against
``llama-cy serve``, with the same flags (``-c 2048 -np 1 -ub 64``).

usage: python -P bench/checkpoint_counts.py SERVER_COMMAND MODEL [extend|drop]

``extend``: the second prompt is the first, its 6-token reply and new text (decoded:
the new tokens). ``drop``: the second prompt is the first and new text, after a reply of
``$NREPLY`` tokens (default 80) that it drops; where the cache cannot be cut back to the
first prompt (SWA layers, recurrent or hybrid models), a context checkpoint is restored.
Prints the first prompt's length, both turns' decoded counts and the second reply. The
figures in ``tests/test_checkpoints.py`` were read with it from both servers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

STORY = " ".join(f"Day {i}: the fox ran to the river and back." for i in range(70))


def main() -> None:
    server_cmd, model = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "extend"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = ["-m", model, "--port", str(port), "-c", "2048", "-np", "1", "-t", "2"]
    proc = subprocess.Popen(
        [*server_cmd.split(), *flags, "--no-warmup", "-ub", "64"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def req(path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", data, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(r, timeout=600) as f:
            return json.loads(f.read())

    try:
        for _ in range(600):
            try:
                if req("/health").get("status") == "ok":
                    break
            except OSError:
                time.sleep(0.2)
        first = req("/tokenize", {"content": STORY, "add_special": True})["tokens"]
        if "gemma" not in model:
            first = first[:300]
        more = req("/tokenize", {"content": " Then it slept.", "add_special": False})["tokens"]
        n_reply = int(os.environ.get("NREPLY", "80")) if mode == "drop" else 6
        out = req("/completion", {"prompt": first, "n_predict": n_reply, "temperature": 0,
                                  "return_tokens": True})  # fmt: skip
        second = first + more if mode == "drop" else first + out["tokens"] + more
        out2 = req("/completion", {"prompt": second, "n_predict": 6, "temperature": 0})
        print(json.dumps({
            "len_first": len(first), "n1": out["timings"]["prompt_n"],
            "len_second": len(second), "n2": out2["timings"]["prompt_n"],
            "text2": out2["content"],
        }))  # fmt: skip
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()

"""A video through native llama-server and ``llama-cy serve`` with the same flags: the
prompt's token count (frames and timestamps as llama-server reads them) and the greedy
reply must be the same. Not a timing: a check against the native server, which the tests
cannot start (it is built by ``bench/run.py``, in ``build/bench/native``).

usage: python bench/video_native.py TINY_MODEL PROJECTOR (the tests' tiny llama and
LLaVA projector, from ``.pytest_cache/d/models``); needs ffmpeg and ffprobe.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))  # as bench/run.py
import server_load
from common import ROOT, WORK

VIDEO = ROOT / "subprojects" / "llama.cpp" / "tools" / "mtmd" / "test-3.mp4"
PROGRAMS = {
    "llama-server": [str(WORK / "native" / "bin" / "llama-server")],
    "llama-cy serve": [sys.executable, "-P", "-m", "llama_cy", "serve"],
}


def main() -> None:
    model, projector = sys.argv[1:3]
    data = base64.b64encode(VIDEO.read_bytes()).decode()
    port = 18480
    for fps, ts in ((1, 4000), (2, 2000), (4, 5000)):
        seen = set()
        for name, cmd in PROGRAMS.items():
            flags = ["-m", model, "--mmproj", projector, "--port", str(port), "-c", "4096",
                     "-t", "2", "-np", "1", "--video-fps", str(fps),
                     "--video-timestamp-interval", str(ts)]  # fmt: skip
            server = server_load.ServerProcess([*cmd, *flags], port, WORK / "video.log")
            try:
                url = f"http://127.0.0.1:{port}/props"
                marker = json.load(urllib.request.urlopen(url))["media_marker"]
                prompt = {
                    "prompt_string": f"Watch: {marker} What happens?",
                    "multimodal_data": [data],
                }
                body = {"prompt": prompt, "n_predict": 8, "temperature": 0}
                out = server_load.post(port, "/completion", body)
            finally:
                server.stop()
            seen.add((out["tokens_evaluated"], out["content"]))
            n, reply = out["tokens_evaluated"], out["content"]
            print(f"--video-fps {fps} --video-timestamp-interval {ts}: {name}: {n} prompt "
                  f"tokens, reply {reply!r}", flush=True)  # fmt: skip
        if len(seen) != 1:
            raise SystemExit(f"the servers differ: {seen}")


if __name__ == "__main__":
    main()

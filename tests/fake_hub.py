"""A Hugging Face Hub on loopback, for the download tests: the three API calls llama.cpp
makes (``refs``, ``tree``, ``resolve``) over repositories held in memory, plus plain
files under ``/files/``; with ETags, ranges, and a log of what was asked."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.files: dict[str, bytes] = {}
        #: Docker Hub's models: (repo, tag) -> GGUF bytes
        self.docker: dict[tuple[str, str], bytes] = {}
        self.log: list[tuple[str, str]] = []  #: (method, path)
        self.auth: list[str] = []  #: the Authorization headers sent
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.answer(self, head=True)

            def do_GET(self) -> None:
                hub.answer(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def gets(self, needle: str) -> int:
        """How many GETs of a path containing ``needle`` were made."""
        return sum(1 for m, p in self.log if m == "GET" and needle in p)

    def answer(self, req: BaseHTTPRequestHandler, head: bool) -> None:
        path = req.path
        self.log.append(("HEAD" if head else "GET", path))
        if req.headers.get("Authorization"):
            self.auth.append(req.headers["Authorization"])
        if path.startswith("/token?"):
            return self.send(req, b'{"token": "docker-token"}', head)
        for (repo, tag), data in self.docker.items():
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            if path == f"/v2/{repo}/manifests/{tag}":
                layer = {"mediaType": "application/vnd.docker.ai.gguf.v3", "digest": digest}
                return self.send(req, json.dumps({"layers": [layer]}).encode(), head)
            if path == f"/v2/{repo}/blobs/{digest}":
                return self.send_file(req, data, head)
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/") :]
            for repo, files in self.repos.items():
                if rest == f"{repo}/refs":
                    body = {"branches": [{"name": "main", "targetCommit": COMMIT}]}
                    return self.send(req, json.dumps(body).encode(), head)
                if rest.startswith(f"{repo}/tree/{COMMIT}"):
                    tree = [
                        {
                            "type": "file",
                            "path": p,
                            "oid": hashlib.sha1(data).hexdigest(),
                            "lfs": {"oid": hashlib.sha256(data).hexdigest()},
                        }
                        for p, data in files.items()
                    ]
                    return self.send(req, json.dumps(tree).encode(), head)
            return self.send(req, b'{"error": "Repository not found"}', head, 404)
        path = path.split("?")[0]
        for repo, files in self.repos.items():
            prefix = f"/{repo}/resolve/{COMMIT}/"
            if path.startswith(prefix) and path[len(prefix) :] in files:
                return self.send_file(req, files[path[len(prefix) :]], head)
        if path.startswith("/files/") and path[len("/files/") :] in self.files:
            return self.send_file(req, self.files[path[len("/files/") :]], head)
        return self.send(req, b"not found", head, 404)

    def send(self, req: BaseHTTPRequestHandler, body: bytes, head: bool, status: int = 200) -> None:
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if not head:
            req.wfile.write(body)

    def send_file(self, req: BaseHTTPRequestHandler, data: bytes, head: bool) -> None:
        start = 0
        rng = req.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes=") : -1])
        req.send_response(206 if start else 200)
        req.send_header("ETag", f'"{hashlib.md5(data).hexdigest()}"')
        req.send_header("Accept-Ranges", "bytes")
        req.send_header("Content-Length", str(len(data) - start))
        req.end_headers()
        if not head:
            req.wfile.write(data[start:])

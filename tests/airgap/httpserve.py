"""A bounded local HTTP file server on 127.0.0.1 with Range support and optional throttling (tests, benchmark)."""

from __future__ import annotations

import http.server
import os
import threading
import time
from pathlib import Path


def make_handler(root: Path, rate: float | None = None, simple_index: bool = False):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def do_GET(self):  # noqa: N802
            from urllib.parse import unquote

            rel = unquote(self.path.split("?")[0]).lstrip("/")  # pip asks for `torch-2.10.0%2Bcpu-...`
            if simple_index and rel.startswith("simple/"):
                return self._index(rel[len("simple/") :].strip("/"))
            path = root / rel
            if ".." in rel.split("/") or not path.is_file():
                self.send_error(404)
                return
            size = path.stat().st_size
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes="):
                start = int(rng[6:].split("-")[0] or 0)
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(size - start))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            with open(path, "rb") as fh:
                fh.seek(start)
                while chunk := fh.read(64 * 1024 if rate else 1 << 20):
                    try:
                        self.wfile.write(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        return
                    if rate:
                        time.sleep(len(chunk) / rate)

        def _index(self, project: str):
            from envkit.artifacts.closure import normalize

            if not project:
                body = "".join(
                    f'<a href="/simple/{n}/">{n}</a>\n' for n in sorted({normalize(f.name.split("-")[0]) for f in root.iterdir()})
                )
            else:
                import hashlib

                files = [
                    f
                    for f in sorted(root.iterdir())
                    if f.name.endswith((".whl", ".tar.gz")) and normalize(f.name.split("-")[0]) == project
                ]
                if not files:
                    self.send_error(404)
                    return
                if "application/vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or ""):
                    return self._json(project, files, hashlib)
                links = []
                for f in files:
                    sha = _sha(f, hashlib)
                    links.append(f'<a href="/{f.name}#sha256={sha}">{f.name}</a>\n')
                body = "<html><body>\n" + "".join(links) + "</body></html>\n"
            self._send(body.encode(), "text/html")

        def _json(self, project: str, files: list, hashlib):
            """PEP 691 (with PEP 700 sizes, PEP 714 core-metadata where `<wheel>.metadata` exists)."""
            import json

            rows = []
            for f in files:
                row = {"filename": f.name, "url": f"/{f.name}", "hashes": {"sha256": _sha(f, hashlib)}, "size": f.stat().st_size}
                meta = f.with_name(f.name + ".metadata")
                if meta.is_file():
                    row["core-metadata"] = {"sha256": _sha(meta, hashlib)}
                rows.append(row)
            body = {"meta": {"api-version": "1.1"}, "name": project, "versions": [], "files": rows}
            self._send(json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json")

        def _send(self, data: bytes, content_type: str):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return H


_SHA: dict[str, str] = {}


def _sha(f: Path, hashlib) -> str:
    key = f"{f}:{f.stat().st_mtime_ns}"
    if key not in _SHA:
        _SHA[key] = hashlib.sha256(f.read_bytes()).hexdigest()
    return _SHA[key]


class Threaded:
    """An HTTP server on 127.0.0.1 (a free port, or `port`) answering with `handler` in a thread, while the `with`
    lasts."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], port: int = 0) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Threaded:  # a subclass gets itself
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Server(Threaded):
    def __init__(self, root: Path, rate: float | None = None, simple_index: bool = False, port: int = 0) -> None:
        super().__init__(make_handler(Path(root), rate, simple_index), port)


if __name__ == "__main__":  # serve a folder for a bounded time: python httpserve.py DIR SECONDS RATE
    import sys

    with Server(Path(sys.argv[1]), float(sys.argv[3]) if len(sys.argv) > 3 else None) as s:
        print(s.url, flush=True)
        time.sleep(float(sys.argv[2]))
        os._exit(0)

"""`envkit bundle serve`: a verified bundle folder as a read-only HTTP mirror (what pull-mode hosts fetch from).

A mirror is just files: the URL of a file is the bundle's root URL and its manifest path (`vendor/X.run`,
`wheels/target/Y.whl`, ...), so any static web server that serves the folder is the same mirror. This one is
the stdlib's `ThreadingHTTPServer` with only what a mirror needs:

- it starts only on a bundle that verifies (`airgap.verify`: every file the manifest's sha256, nothing else);
- it serves only the manifest's paths and manifest.json itself (no listing, no other file: a `..`, `.`, an
  empty segment, a backslash or a NUL in a path is a 400, any other unknown path a 404);
- GET and HEAD, with single byte ranges (`bytes=a-b`, `bytes=a-`, `bytes=-n`: 206 with Content-Range; a range
  that starts past the end: 416 with `Content-Range: bytes */SIZE`; several ranges or a malformed one: the
  whole file, 200, as RFC 9110 allows), so a client can resume a partial download;
- it binds only the address given (default 127.0.0.1) and counts the bytes it sent per client address.

The hosts check every file's sha256 before they use it; this server does not re-hash per request.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from envkit.errors import BadInput, CannotRun, CheckFailed, Where

CHUNK = 1 << 20
CLIENT_TIMEOUT = 60  # seconds a client may stay silent on its connection
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class ServedFile:
    path: Path
    size: int
    sha256: str


@dataclass
class MirrorStats:
    """Bytes of file content sent, per client address (what the benchmark reads)."""

    sent: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, client: str, n: int) -> None:
        with self.lock:
            self.sent[client] = self.sent.get(client, 0) + n

    def count(self) -> None:
        with self.lock:
            self.requests += 1


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """The inclusive (first, last) byte of a single-range `Range` header; None: serve it whole (no header, a
    malformed or multi-range one); "unsatisfiable": 416 (it starts at or past the end, or asks for no byte)."""
    if header is None:
        return None
    m = _RANGE.match(header.strip())
    if not m:
        return None
    first, last = m.group(1), m.group(2)
    if first == "" and last == "":
        return None
    if first == "":  # the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    start = int(first)
    if last != "" and int(last) < start:
        return None  # invalid: ignored, as RFC 9110 says
    if start >= size:
        return "unsatisfiable"
    return start, min(int(last) if last != "" else size - 1, size - 1)


def _clean_path(raw: str) -> str | None:
    """The request's path as a manifest path, or None when it is not a plain relative path (refused with 400)."""
    if not raw.startswith("/"):
        return None
    path = unquote(raw.split("?", 1)[0].split("#", 1)[0], errors="strict")
    rel = path[1:]
    if rel == "":
        return ""
    if "\\" in rel or "\x00" in rel or any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    return rel


class _Handler(BaseHTTPRequestHandler):
    server: BundleServer
    protocol_version = "HTTP/1.1"
    server_version = "envkit-bundle-serve"
    sys_version = ""
    timeout = CLIENT_TIMEOUT

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Logged when the answer is complete (`_serve`, `_error`), with the bytes of content sent."""

    def _log(self, code: int, sent: int) -> None:
        self.log_message('"%s" %s %d', self.requestline, code, sent)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.log is not None:
            self.server.log.write(f"{self.client_address[0]} {format % args}\n")
            self.server.log.flush()

    def _error(self, code: int, message: str, extra: dict[str, str] | None = None) -> None:
        body = (message + "\n").encode()
        self.send_response(code)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log(code, 0)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        self.server.stats.count()
        try:
            rel = _clean_path(self.path)
        except UnicodeDecodeError:
            rel = None
        if rel is None:
            self._error(400, "not a plain path inside the bundle")
            return
        f = self.server.files.get(rel)
        if f is None:
            self._error(404, "not a file of this bundle's manifest")
            return
        try:
            fh: IO[bytes] = open(f.path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            self._error(404, "not readable")
            return
        with fh:
            size = f.size
            rng = parse_range(self.headers.get("Range"), size)
            if rng == "unsatisfiable":
                self._error(416, "range not satisfiable", {"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"})
                return
            if isinstance(rng, tuple):
                first, last = rng
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            else:
                first, last = 0, size - 1
                self.send_response(200)
            length = last - first + 1
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{f.sha256}"')
            self.end_headers()
            status = 206 if isinstance(rng, tuple) else 200
            if head or length <= 0:
                self._log(status, 0)
                return
            fh.seek(first)
            left = length
            while left > 0:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    break  # the file shrank since the start: the client sees a short body and its hash fails
                try:
                    self.wfile.write(chunk)
                except OSError:
                    break
                self.server.stats.add(self.client_address[0], len(chunk))
                left -= len(chunk)
            self._log(status, length - left)


class BundleServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], files: dict[str, ServedFile], log: IO[str] | None) -> None:
        self.files, self.log, self.stats = files, log, MirrorStats()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        addr = self.server_address
        host = addr[0].decode() if isinstance(addr[0], bytes) else str(addr[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{addr[1]}/"


@dataclass(frozen=True)
class ServeRequest:
    bundle: Path
    bind: str = "127.0.0.1"
    port: int = 8080
    expect_digest: str | None = None


def check_bind(bind: str, port: int) -> None:
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        raise BadInput(
            f"--bind {bind!r}: not an IP address",
            hint="Give the address of the interface the hosts reach, e.g. --bind 10.0.0.5 (0.0.0.0: every interface).",
        ) from None
    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port}: not a TCP port (0-65535; 0 picks a free one)")


def open_mirror(req: ServeRequest, log: IO[str] | None = sys.stderr) -> BundleServer:
    """Verify the bundle folder, then bind a server for it (not yet serving: call serve_forever()).

    BadInput (exit 2): not a bundle folder, a bad address; CheckFailed (exit 1): the bundle does not verify;
    CannotRun (exit 2): the address cannot be bound."""
    from envkit import airgap
    from envkit.airgap.verify import MANIFEST
    from envkit.fsutil import sha256_file
    from envkit.models.bundle import BundleManifest

    check_bind(req.bind, req.port)
    root = Path(req.bundle)
    if not root.is_dir():
        raise BadInput(
            f"{root}: not a bundle folder",
            where=Where(str(root)),
            hint="Serve the folder `envkit bundle build -o DIR` writes (extract an archive first: tar -xf).",
        )
    rep = airgap.verify(root, req.expect_digest)
    if not rep.ok:
        bad = [*(f"missing {p}" for p in rep.missing), *(f"modified {m['path']}" for m in rep.modified)]
        bad += [f"extra {p}" for p in rep.extra]
        raise CheckFailed(
            f"{root}: the bundle does not verify ({'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}); not serving it",
            where=Where(str(root)),
            hint="Run `envkit bundle verify` on it, then get the bundle again from its source.",
        )
    manifest = BundleManifest.model_validate_json((root / MANIFEST).read_bytes())
    files = {f.path: ServedFile(root / f.path, f.size, f.sha256) for f in manifest.files}
    files[MANIFEST] = ServedFile(root / MANIFEST, (root / MANIFEST).stat().st_size, sha256_file(root / MANIFEST))
    try:
        return BundleServer((req.bind, req.port), files, log)
    except OSError as exc:
        raise CannotRun(
            f"cannot listen on {req.bind}:{req.port} ({exc.strerror or exc})",
            hint="Pick another --port, or an address of this machine for --bind.",
        ) from None

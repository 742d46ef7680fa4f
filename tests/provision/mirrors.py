"""Mirrors on the fleet's bridge for pull-mode tests and the benchmark: `envkit bundle serve` as a process, a
mirror that drips, and a sealed bundle folder (real files: a mirror serves no link)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from tests.airgap.mirror import seal
from tests.provision.fleet import envkit_bin, envkit_env, wheelhouse, write_vendor

BRIDGE = "10.231.2.1"  # this machine on the fleet's bridge (tests/integration/setup/nspawn.sh)
_LOG = re.compile(r'^(\S+) "(\S+) (\S+) [^"]*" (\d+) (\d+)$')


def sealed_bundle(dest: Path, lock: Path, pad_mb: int = 0) -> Path:
    """dest/vendor (fixture installers, each .run padded to `pad_mb` MB of random bytes after its `exit 0`, as a
    makeself archive carries its payload: a bundle of a realistic size), dest/wheels (a copy of the wheelhouse) and
    dest/manifest.json."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    vendor = dest / "vendor"
    write_vendor(lock, vendor)
    if pad_mb:
        import hashlib
        import os

        runs = sorted(vendor.glob("*.run"))
        for run in runs:
            with open(run, "ab") as fh:
                fh.write(b"\nexit 0\n")
                for _ in range(pad_mb):
                    fh.write(os.urandom(1 << 20))
        sums = [
            f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(vendor.iterdir()) if p.name != "SHA256SUMS"
        ]
        (vendor / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    shutil.copytree(wheelhouse(), dest / "wheels")
    return seal(dest)


class Serve:
    """`envkit bundle serve DIR --bind BRIDGE --port 0` in its own process; its access log gives the bytes sent."""

    def __init__(self, bundle: Path, log: Path, bind: str = BRIDGE) -> None:
        self.log = log
        self.err = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [envkit_bin(), "bundle", "serve", str(bundle), "--bind", bind, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            env=envkit_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r" at (http://\S+?)/?$", line.strip())
        if not m:
            self.stop()
            raise RuntimeError(f"envkit bundle serve did not start: {line!r} {log.read_text()}")
        self.url = m.group(1)

    def sent(self) -> dict[str, int]:
        """Bytes of content sent per client address so far."""
        out: dict[str, int] = defaultdict(int)
        for line in self.log.read_text().splitlines():
            m = _LOG.match(line)
            if m:
                out[m.group(1)] += int(m.group(5))
        return dict(out)

    def requests(self) -> list[tuple[str, str, int]]:
        """(client, path, status) of every request so far."""
        return [(m[1], m[3], int(m[4])) for m in map(_LOG.match, self.log.read_text().splitlines()) if m]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.err.close()


class _Quiet(BaseHTTPRequestHandler):
    """HTTP/1.1, no log on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002, ANN001, ANN002
        pass


def _start(handler: type[BaseHTTPRequestHandler], bind: str) -> tuple[ThreadingHTTPServer, str]:
    """A threading HTTP server of `handler` on `bind` (a free port), serving in a daemon thread, and its URL."""
    server = ThreadingHTTPServer((bind, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://{bind}:{server.server_address[1]}"


class Drip:
    """A mirror that answers every GET with a large file's headers, then one byte a second, for ever (until the
    client goes away): only a deadline on the whole download stops it. With `root`, a file under it is announced
    with its own size and its own bytes are dripped (a client that knows the size from the manifest cannot refuse
    it up front: only the deadline stops it, and what it got is a true start for the next mirror to resume)."""

    def __init__(self, bind: str = BRIDGE, root: Path | None = None) -> None:
        self.clients: list[str] = []
        drip = self

        class Handler(_Quiet):
            def do_GET(self) -> None:
                drip.clients.append(self.client_address[0])
                body = None
                if root is not None:
                    path = (root / unquote(self.path.split("?", 1)[0]).lstrip("/")).resolve()
                    if not path.is_file() or not path.is_relative_to(root.resolve()):
                        self.send_error(404)
                        return
                    body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) if body is not None else 1 << 30))
                self.end_headers()
                try:
                    sent = 0
                    while not drip.stopping.is_set() and (body is None or sent < len(body)):
                        self.wfile.write(body[sent : sent + 1] if body is not None else b"x")
                        self.wfile.flush()
                        sent += 1
                        time.sleep(1)
                except OSError:
                    pass

        self.stopping = threading.Event()
        self.server, self.url = _start(Handler, bind)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def free_port(bind: str = BRIDGE) -> int:
    with socket.socket() as s:
        s.bind((bind, 0))
        return s.getsockname()[1]


class RangeMirror:
    """A mirror of the files under `root` on `bind` that logs every request (path, its Range header, the status and
    the bytes of body sent) and can misbehave: `cut_after=N` ends the first answer for each path after N bytes of
    body (the connection closed; a later request is served whole, or from the range asked for); `ignore_range`
    answers every request with the whole file (200); `drip` (bytes a second) sends each body slowly, for ever if
    `endless`. Ranges `bytes=N-` are answered 206 with `Content-Range: bytes N-END/SIZE`, 416 from the end on."""

    def __init__(
        self,
        root: Path,
        bind: str = "127.0.0.1",
        cut_after: int | None = None,
        ignore_range: bool = False,
        drip: float = 0.0,
        endless: bool = False,
    ) -> None:
        self.log: list[dict] = []
        self.stopping = threading.Event()
        self.active = self.peak = 0  # answers being sent now, and the most at once
        lock = threading.Lock()
        cut: set[str] = set()
        mirror = self

        class Handler(_Quiet):
            def do_HEAD(self) -> None:
                from urllib.parse import unquote

                target = (root / unquote(self.path.lstrip("/"))).resolve()
                mirror.log.append({"path": unquote(self.path.lstrip("/")), "method": "HEAD", "range": None, "sent": 0})
                if not target.is_file() or not target.is_relative_to(root.resolve()):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(target.stat().st_size))
                self.end_headers()

            def do_GET(self) -> None:
                with lock:
                    mirror.active += 1
                    mirror.peak = max(mirror.peak, mirror.active)
                try:
                    self._get()
                finally:
                    with lock:
                        mirror.active -= 1

            def _get(self) -> None:
                from urllib.parse import unquote

                rel = unquote(self.path.lstrip("/"))
                entry = {"path": rel, "range": self.headers.get("Range"), "status": 404, "sent": 0}
                mirror.log.append(entry)
                target = (root / rel).resolve()
                if ".." in rel or not target.is_file() or not target.is_relative_to(root.resolve()):
                    self.send_error(404)
                    return
                data = target.read_bytes()
                start = 0
                m = re.fullmatch(r"bytes=(\d+)-", entry["range"] or "")
                if m and not ignore_range and int(m.group(1)) >= len(data):  # as `envkit bundle serve` answers it
                    entry["status"] = 416
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if m and not ignore_range:
                    start = int(m.group(1))
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                entry["status"] = 206 if start else 200
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if cut_after is not None and rel not in cut:
                    cut.add(rel)
                    body = body[:cut_after]
                    self.close_connection = True
                try:
                    if drip:
                        for i in range(len(body) if not endless else 1 << 40):
                            if mirror.stopping.wait(1 / drip):
                                return
                            self.wfile.write(body[i % len(body) : i % len(body) + 1])
                            self.wfile.flush()
                            entry["sent"] += 1
                    else:
                        self.wfile.write(body)
                        entry["sent"] = len(body)
                except OSError:
                    pass

        self.server, self.url = _start(Handler, bind)

    def sent(self) -> int:
        return sum(e["sent"] for e in self.log)

    def __enter__(self) -> RangeMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

"""`envkit bundle serve`: a verified bundle folder as a read-only HTTP mirror (what pull-mode hosts fetch from).

A mirror is just files: the URL of a file is the bundle's root URL and its manifest path (`vendor/X.run`,
`wheels/target/Y.whl`, ...), so any static web server that serves the folder is the same mirror. This one is
the stdlib's `ThreadingHTTPServer` with only what a mirror needs:

- it starts only on a bundle that verifies (`airgap.verify`: every file the manifest's sha256, nothing else), and
  holds that folder open from then on: it serves the folder it verified, whatever the folder's path names later;
- it serves only the manifest's paths and manifest.json itself (no listing, no other file: a `..`, `.`, an
  empty segment, a backslash or a NUL in a path is a 400, any other unknown path a 404);
- each file is opened for each request under the folder it holds, one path component at a time, never following
  a link (`O_NOFOLLOW`, a link anywhere on the way is refused) and without blocking (`O_NONBLOCK`: a FIFO swapped
  in cannot hold a thread); it is served from that descriptor only when it is a regular file of exactly the size
  the manifest lists, else refused (500; 404 when it is gone) and logged with the reason;
- GET and HEAD, with single byte ranges (`bytes=a-b`, `bytes=a-`, `bytes=-n`: 206 with Content-Range; a range
  that starts past the end: 416 with `Content-Range: bytes */SIZE`; several ranges, a malformed one, or a number
  of more than 19 digits: the whole file, 200, as RFC 9110 allows), so a client can resume a partial download;
- `Limits`: at most `max_connections` at once (one more is answered 503 and closed), a deadline for each request's
  line and headers, an idle keep-alive connection closed, a client silent or taking nothing for `client_timeout`
  dropped, each answer bounded in time by its length;
- it binds only the address given (default 127.0.0.1), counts the bytes it sent per client address, and logs one
  line per request in which every character a client chose is escaped (printable ASCII only, one line, bounded).

The hosts check every file's sha256 before they use it; this server does not re-hash per request (the size is
checked on every open: a file swapped in with the same size and other bytes is served, and the host refuses it).
"""

from __future__ import annotations

import errno
import hashlib
import io
import ipaddress
import math
import os
import re
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from envkit.errors import BadInput, CannotRun, CheckFailed, Where

CHUNK = 1 << 20
CLIENT_TIMEOUT = 60  # seconds a client may stay silent, or take no byte of an answer
MAX_RANGE_DIGITS = 19  # a Range number of more digits is not read: the header is ignored (the whole file, 200)
_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")  # fullmatch; [0-9], not \d (which takes any Unicode digit)
MAX_LOGGED_LINE = 1024  # characters of a request line logged; a longer one is cut, its length given
MAX_LOG_MESSAGE = 8192  # characters of one log line's message once escaped
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Limits:
    """What the clients may hold of the server (the defaults are `envkit bundle serve`'s).

    max_connections: connections served at once; one more is answered 503 and closed at once.
    header_timeout: seconds for a request's line and headers, from the connection's accept (its first request) or
        from the first byte of a later one; past it the connection is dropped.
    idle_timeout: seconds a kept-alive connection may wait for its next request; then it is closed.
    client_timeout: seconds any one read or write may wait (a client silent, or taking no byte of its answer).
    response_grace, min_rate: an answer of N bytes must be taken within response_grace + N / min_rate seconds
        (64 KiB/s: 38 min for a 146 MB wheel; envkit's own fetch gives a download 30 min); past it, dropped."""

    max_connections: int = 256
    header_timeout: float = 10.0
    idle_timeout: float = 15.0
    client_timeout: float = CLIENT_TIMEOUT
    response_grace: float = 60.0
    min_rate: float = 64 << 10

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise BadInput(f"max_connections must be at least 1, not {self.max_connections}")
        for name in ("header_timeout", "idle_timeout", "client_timeout", "response_grace", "min_rate"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise BadInput(f"{name} must be a number of seconds (bytes a second) above 0, not {value}")

    def answer_seconds(self, length: int) -> float:
        return self.response_grace + length / self.min_rate


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
    malformed or multi-range one, a number of more than MAX_RANGE_DIGITS ASCII digits); "unsatisfiable": 416 (it
    starts at or past the end, or asks for no byte)."""
    if header is None:
        return None
    m = _RANGE.fullmatch(header.strip(" \t"))
    if not m:
        return None
    first, last = m.group(1), m.group(2)
    if first == "" and last == "":
        return None
    if len(first) > MAX_RANGE_DIGITS or len(last) > MAX_RANGE_DIGITS:
        return None  # ignored, as RFC 9110 allows: no number that long is read
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


def printable(text: str) -> str:
    """`text` as one line of printable ASCII for a log or a terminal: every other character (control characters,
    CR and LF included, and anything past ASCII) and the backslash escaped as Python's `unicode_escape` writes them;
    cut at MAX_LOG_MESSAGE characters, with its length."""
    out = text.encode("unicode_escape").decode("ascii")
    if len(out) > MAX_LOG_MESSAGE:
        out = f"{out[:MAX_LOG_MESSAGE]}... ({len(out)} characters)"
    return out


def _shorten(text: str, most: int = MAX_LOGGED_LINE) -> str:
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


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


_REFUSED = {404: "not in the bundle folder", 500: "not as the bundle was verified: not served", 503: "the server is closing"}


class Refused(Exception):
    """A listed file not served as it is now: `status` for the client, `why` for the log."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status, self.why = status, why


def _kind(mode: int) -> str:
    kinds = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device"}
    kinds.update({stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a link"})
    return kinds.get(stat.S_IFMT(mode), "not a file")


def open_under(root_fd: int, rel: str) -> int:
    """A descriptor of the regular file `rel` under the folder `root_fd`, opened one component at a time without
    following a link (O_NOFOLLOW on each) and without blocking (O_NONBLOCK: a FIFO opens at once, and is refused).
    Refused: 404 when a component is missing, 500 for a link on the way, a component of another kind, another error."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise Refused(404, "not a plain relative path")
    dfd = os.dup(root_fd)
    fd = -1
    try:
        for i, name in enumerate(parts):
            where, last = "/".join(parts[: i + 1]), i == len(parts) - 1
            try:
                # lstat first: a link or a device is refused before it is opened at all; the descriptor's own fstat
                # below is what decides (a swap between the two is seen there, or refused by O_NOFOLLOW)
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise Refused(500, f"a link at {where} (not followed)")
                if not last:
                    if not stat.S_ISDIR(st.st_mode):
                        raise Refused(500, f"{where} is {_kind(st.st_mode)}, not a folder")
                    nfd = os.open(name, _OPEN_DIR, dir_fd=dfd)
                    os.close(dfd)
                    dfd = nfd
                elif not stat.S_ISREG(st.st_mode):
                    raise Refused(500, f"not a regular file ({_kind(st.st_mode)})")
                else:
                    fd = os.open(name, _OPEN_FILE, dir_fd=dfd)
            except FileNotFoundError:
                raise Refused(404, f"{where} is missing") from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link since the lstat
                    raise Refused(500, f"a link at {where} (not followed)") from None
                raise Refused(500, f"{where}: {exc.strerror or exc}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(500, f"not a regular file ({_kind(st.st_mode)})")
        opened, fd = fd, -1
        return opened
    finally:
        os.close(dfd)
        if fd >= 0:
            os.close(fd)


class _DeadlineReader(io.RawIOBase):
    """The connection's reads (under the handler's buffered rfile): each waits at most the silence timeout and
    never past the deadline armed (the request's headers, or the idle wait); past either, TimeoutError(why)."""

    def __init__(self, sock: socket.socket, silence: float) -> None:
        super().__init__()
        self.sock, self.silence = sock, silence
        self.deadline, self.why = math.inf, ""

    def arm(self, deadline: float, why: str) -> None:
        self.deadline, self.why = deadline, why

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(self.why)
        silent = self.silence < left
        self.sock.settimeout(min(self.silence, left))
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            raise TimeoutError(f"the client was silent for {self.silence:g} s" if silent else self.why) from None


class _Handler(BaseHTTPRequestHandler):
    server: BundleServer
    protocol_version = "HTTP/1.1"
    server_version = "envkit-bundle-serve"
    sys_version = ""
    timeout = CLIENT_TIMEOUT

    def setup(self) -> None:
        self.accepted = time.monotonic()
        self.limits = self.server.limits
        super().setup()
        self.connection.settimeout(self.limits.client_timeout)
        self.rfile.close()
        self.reader = _DeadlineReader(self.connection, self.limits.client_timeout)
        self.buffered = io.BufferedReader(self.reader)
        self.rfile = self.buffered
        self.responded = False

    def handle(self) -> None:
        """Requests while the connection is kept alive: the first one's headers within header_timeout of the
        accept; a later one must start within idle_timeout (else the connection is closed without a word) and
        its headers end within header_timeout of its first byte."""
        lim = self.limits
        late = f"the request line and headers were not complete within {lim.header_timeout:g} s"
        self.close_connection = True
        try:
            self.reader.arm(self.accepted + lim.header_timeout, late)
            self.handle_one_request()
            while not self.close_connection:
                self.reader.arm(time.monotonic() + lim.idle_timeout, "idle")
                try:
                    if not self.buffered.peek(1):
                        return  # closed by the client
                except TimeoutError:
                    return  # idle past idle_timeout
                self.reader.arm(time.monotonic() + lim.header_timeout, late)
                self.handle_one_request()
        except OSError as exc:  # the client went away (a timeout is the stdlib's: "Request timed out")
            self.close_connection = True
            self.log_message("connection lost (%s)", exc.strerror or type(exc).__name__)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Logged when the answer is complete (`_serve`, `_error`), with the bytes of content sent."""

    def _log(self, code: int | str, sent: int, note: str = "") -> None:
        self.log_message('"%s" %s %d%s', _shorten(self.requestline), code, sent, f" {note}" if note else "")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        self.server.write_log(f"{self.client_address[0]} {printable(format % args)}")

    def send_response(self, code: int, message: str | None = None) -> None:
        self.responded = True
        super().send_response(code, message)

    def _error(self, code: int, message: str, extra: dict[str, str] | None = None, note: str = "") -> None:
        body = (message + "\n").encode()
        self.connection.settimeout(self.limits.client_timeout)
        self.send_response(code)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log(code, 0, note)

    def do_HEAD(self) -> None:
        self._guarded(head=True)

    def do_GET(self) -> None:
        self._guarded(head=False)

    def _guarded(self, head: bool) -> None:
        """One answer, and never a traceback: a failure closes the connection with one line in the log (and a 500
        when nothing was sent yet)."""
        self.responded = False
        try:
            self._serve(head)
        except OSError as exc:
            self.close_connection = True
            self._log("-", 0, f"connection lost ({exc.strerror or type(exc).__name__})")
        except Exception as exc:  # noqa: BLE001 - answered and logged, not raised
            self.close_connection = True
            if not self.responded:
                try:
                    self._error(500, "internal error", note=f"internal error: {exc!r}")
                    return
                except OSError:
                    pass
            self._log("-", 0, f"internal error: {exc!r}")

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
            fd = self.server.open_file(rel, f.size)
        except Refused as exc:
            self._error(exc.status, _REFUSED.get(exc.status, "not served"), note=f"refused: {rel}: {exc.why}")
            return
        try:
            self._answer(fd, f, head)
        finally:
            os.close(fd)

    def _answer(self, fd: int, f: ServedFile, head: bool) -> None:
        size = f.size
        rng = parse_range(self.headers.get("Range"), size)
        if rng == "unsatisfiable":
            self._error(416, "range not satisfiable", {"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"})
            return
        if isinstance(rng, tuple):
            first, last = rng
            status = 206
        else:
            first, last = 0, size - 1
            status = 200
        length = last - first + 1
        seconds = self.limits.answer_seconds(0 if head else length)
        deadline = time.monotonic() + seconds
        self.connection.settimeout(min(self.limits.client_timeout, seconds))
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{f.sha256}"')
        self.end_headers()
        if head or length <= 0:
            self._log(status, 0)
            return
        sent, why = self._send_body(fd, first, length, deadline, seconds)
        if why:
            self.close_connection = True  # the body is short of its Content-Length: nothing more on this connection
        self._log(status, sent, why)

    def _send_body(self, fd: int, first: int, length: int, deadline: float, seconds: float) -> tuple[int, str]:
        """(bytes sent, why it stopped short or ""): read from the descriptor opened for this request, sent as the
        client takes it, each send waiting at most client_timeout and never past the answer's deadline."""
        silence, sent = self.limits.client_timeout, 0
        while sent < length:
            try:
                chunk = os.pread(fd, min(CHUNK, length - sent), first + sent)
            except OSError as exc:
                return sent, f"stopped: read error ({exc.strerror or exc})"
            if not chunk:
                return sent, "stopped: the file is shorter than when it was opened"
            view = memoryview(chunk)
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    return sent, f"dropped: the answer was not taken within {seconds:.3g} s"
                self.connection.settimeout(min(silence, left))
                try:
                    n = self.connection.send(view)
                except TimeoutError:
                    if silence < left:
                        return sent, f"dropped: the client took nothing for {silence:g} s"
                    return sent, f"dropped: the answer was not taken within {seconds:.3g} s"
                except OSError as exc:
                    return sent, f"connection lost ({exc.strerror or type(exc).__name__})"
                view = view[n:]
                sent += n
                self.server.stats.add(self.client_address[0], n)
        return sent, ""


class BundleServer(ThreadingHTTPServer):
    """Serves the listed files under `root_fd` (the verified folder, held open; closed by server_close)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # connections the kernel holds before they are accepted (a burst of hosts)

    def __init__(
        self,
        address: tuple[str, int],
        files: dict[str, ServedFile],
        log: IO[str] | None,
        root_fd: int,
        limits: Limits | None = None,
    ) -> None:
        self.files, self.log, self.stats = files, log, MirrorStats()
        self.limits = limits or Limits()
        self.open_connections = 0
        self._root_fd, self._root_lock = root_fd, threading.Lock()
        self._conn_lock, self._log_lock = threading.Lock(), threading.Lock()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        addr = self.server_address
        host = addr[0].decode() if isinstance(addr[0], bytes) else str(addr[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{addr[1]}/"

    def write_log(self, line: str) -> None:
        if self.log is None:
            return
        with self._log_lock:
            self.log.write(line + "\n")
            self.log.flush()

    def open_file(self, rel: str, size: int) -> int:
        """The listed file `rel` opened under the verified folder (`open_under`), a regular file of `size` bytes.
        Refused otherwise."""
        try:
            with self._root_lock:
                if self._root_fd < 0:
                    raise Refused(503, "the server is closing")
                fd = open_under(self._root_fd, rel)  # dups the folder's descriptor under the lock: never a reused number
            try:
                st_size = os.fstat(fd).st_size
            except OSError:
                os.close(fd)
                raise
        except OSError as exc:
            raise Refused(500, f"{exc.strerror or exc}") from None
        if st_size != size:
            os.close(fd)
            raise Refused(500, f"{st_size} bytes, not the manifest's {size}")
        return fd

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            full = self.open_connections >= self.limits.max_connections
            if not full:
                self.open_connections += 1
        if full:
            self._refuse(request, client_address)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._conn_lock:
            self.open_connections -= 1

    def _refuse(self, request: socket.socket, client_address: Any) -> None:
        """One connection past the cap: a 503 sent without waiting (the accepting thread never blocks), closed."""
        body = b"too many connections: try again later\n"
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 5\r\nConnection: close\r\n\r\n"
        )
        try:
            request.setblocking(False)
            request.send(head.encode() + body)
            request.shutdown(socket.SHUT_WR)
            request.recv(1 << 16)  # what the client sent already: closing on it unread would reset the connection
        except OSError:
            pass
        request.close()
        self.write_log(f"{client_address[0]} refused: {self.limits.max_connections} connections open, the most served at once")

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One escaped line, not a traceback on stderr."""
        self.write_log(f"{client_address[0]} internal error: {printable(repr(sys.exc_info()[1]))}")

    def server_close(self) -> None:
        super().server_close()
        with self._root_lock:
            if self._root_fd >= 0:
                os.close(self._root_fd)
                self._root_fd = -1


@dataclass(frozen=True)
class ServeRequest:
    bundle: Path
    bind: str = "127.0.0.1"
    port: int = 8080
    expect_digest: str | None = None
    limits: Limits = field(default_factory=Limits)


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


def _read_manifest(root_fd: int, root: Path, digest: str) -> bytes:
    """manifest.json as it is under the folder held open, which must be the one `airgap.verify` just read."""
    from envkit.jobs.bundle.verify import MANIFEST

    try:
        fd = open_under(root_fd, MANIFEST)
    except Refused as exc:
        raise CheckFailed(f"{root}: {MANIFEST}: {exc.why}; not serving it", where=Where(str(root))) from None
    with open(fd, "rb") as fh:
        data = fh.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise CheckFailed(
            f"{root}: the bundle folder changed while it was verified; not serving it",
            where=Where(str(root)),
            hint="Serve a bundle folder nothing writes to.",
        )
    return data


def open_mirror(req: ServeRequest, log: IO[str] | None = sys.stderr) -> BundleServer:
    """Verify the bundle folder, then bind a server for it (not yet serving: call serve_forever()).

    BadInput (exit 2): not a bundle folder, a bad address; CheckFailed (exit 1): the bundle does not verify;
    CannotRun (exit 2): the address cannot be bound."""
    from envkit.jobs import bundle as airgap
    from envkit.jobs.bundle.verify import MANIFEST
    from envkit.models.bundle import BundleManifest

    check_bind(req.bind, req.port)
    root = Path(req.bundle)
    if not root.is_dir():
        raise BadInput(
            f"{root}: not a bundle folder",
            where=Where(str(root)),
            hint="Serve the folder `envkit bundle build -o DIR` writes (extract an archive first: tar -xf).",
        )
    # held from before the check to the end: what is served is under the folder that was verified
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"{root}: cannot open the bundle folder ({exc.strerror or exc})", where=Where(str(root))) from None
    try:
        rep = airgap.verify(root, req.expect_digest)
        if not rep.ok:
            bad = [*(f"missing {p}" for p in rep.missing), *(f"modified {m['path']}" for m in rep.modified)]
            bad += [f"extra {p}" for p in rep.extra]
            raise CheckFailed(
                f"{root}: the bundle does not verify ({'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}); not serving it",
                where=Where(str(root)),
                hint="Run `envkit bundle verify` on it, then get the bundle again from its source.",
            )
        if not os.path.samestat(os.fstat(root_fd), os.stat(root)):
            raise CheckFailed(
                f"{root}: another folder took its path while it was verified; not serving it", where=Where(str(root))
            )
        data = _read_manifest(root_fd, root, rep.digest)
        manifest = BundleManifest.model_validate_json(data)
        files = {f.path: ServedFile(root / f.path, f.size, f.sha256) for f in manifest.files}
        files[MANIFEST] = ServedFile(root / MANIFEST, len(data), rep.digest)
        try:
            return BundleServer((req.bind, req.port), files, log, root_fd, req.limits)
        except OSError as exc:
            raise CannotRun(
                f"cannot listen on {req.bind}:{req.port} ({exc.strerror or exc})",
                hint="Pick another --port, or an address of this machine for --bind.",
            ) from None
    except BaseException:
        os.close(root_fd)
        raise

"""The hostile HTTP corpus: a stand-in server on 127.0.0.1 that plays one hostile behaviour per request.

`HostileServer(case=None)`: the request's path names the case (`/drip-body`, `/sized/100`, ...); with `case`, every
request (any path, GET or POST) plays that case, for a client whose paths are fixed (the smoke server client).
`tls=True` serves HTTPS with a self-signed certificate for 127.0.0.1 (`cert_file()`: trust it with SSL_CERT_FILE).

Every loop is bounded and stops by itself: a drip sends at most DRIP_MAX bytes, an endless body at most
ENDLESS_MAX, and all of them stop when the client goes away or the server is closed (`stop` is set).

| case | what the server does |
|---|---|
| `ok.json`, `ok` | a small JSON document / body, promptly (the control) |
| `drip-head` | the status line and headers, one byte a second |
| `drip-body` | headers at once (Content-Length 1000), then the body one byte a second |
| `drip-html` | the same as an HTML page (an index page, as uv wants it) |
| `drip-chunked` | a chunked body of one-byte chunks, one a second |
| `drip-sse` | an event stream whose first line comes one byte a second (never a newline) |
| `huge-length` | `Content-Length: 10**12`, then bytes for as long as the client reads |
| `endless-chunked` | a chunked body that never ends |
| `endless-close` | a body without length, ended by closing, that never ends |
| `endless-sse` | an event stream of keep-alive comments (short, valid lines) that never ends |
| `sized/N`, `sized-chunked/N`, `sized-close/N` | exactly N bytes: with a Content-Length, chunked, ended by closing |
| `deep-json/N` | a JSON array nested N levels (`[[[...]]]`) |
| `nan-json` | `{"a": NaN}` |
| `redirect-loop` | 302 to itself |
| `chain/N` | 302 to `chain/N-1`; `chain/0` answers like `ok.json` (N redirects in all) |
| `to-http` | 302 to the same server's `ok.json` over plain `http:` (on a TLS server: a downgrade) |
| `to-file` | 302 to `file:///etc/passwd` |
| `gzip` | a gzip-encoded body nobody asked for |
| `bad-length` | two different Content-Length headers |
| `negative-length` | `Content-Length: -1`, then a body ended by closing |
| `bad-range` | 206 with a `Content-Range` of bytes 0-1 of a 100-byte file, to any request |
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import socket
import socketserver
import ssl
import tempfile
import threading
from pathlib import Path

DRIP_INTERVAL = 1.0  # seconds between two bytes of a drip
DRIP_MAX = 60  # bytes a drip sends at most (a minute)
ENDLESS_MAX = 1 << 30  # bytes an endless body sends at most
OK_JSON = b'{"ok": true, "data": [{"id": "m"}]}'


@functools.lru_cache(maxsize=1)
def cert_file() -> tuple[str, str]:
    """(certificate, key) files of a self-signed certificate for 127.0.0.1 and localhost, made once per session."""
    import atexit
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)  # valid on any day a test runs
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=365 * 200))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = Path(tempfile.mkdtemp(prefix="envkit-hostile-tls-"))
    atexit.register(shutil.rmtree, folder, True)  # made once per test process: nothing left behind
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(folder / "cert.pem"), str(folder / "key.pem")


class _Handler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            if isinstance(sock, ssl.SSLSocket):
                sock.settimeout(10)
                sock.do_handshake()
                sock.settimeout(None)
            method, path = self._read_request(sock)
            self.server.owner.requests.append((method, path))
            self.server.owner.play(sock, path)
        except (OSError, ValueError):  # the client went away, or sent garbage: this request is over
            pass

    @staticmethod
    def _read_request(sock: socket.socket) -> tuple[str, str]:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk or len(data) > 65536:
                raise ValueError("no request")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length"), 0)
        while len(rest) < min(length, 1 << 20):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return method, path


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: HostileServer


class HostileServer:
    def __init__(self, case: str | None = None, *, tls: bool = False) -> None:
        self.case = case
        self.tls = tls
        self.stop = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self.sent = 0  # body bytes sent, all requests together
        self._srv = _TCPServer(("127.0.0.1", 0), _Handler)
        self._srv.owner = self
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*cert_file())
            self._srv.socket = ctx.wrap_socket(self._srv.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self._srv.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._srv.shutdown()
        self._srv.server_close()

    # --- the cases -------------------------------------------------------------------------------------
    def play(self, sock: socket.socket, path: str) -> None:
        case = (self.case or path).strip("/")
        name, _, arg = case.partition("/")
        plain_url = f"http://127.0.0.1:{self.port}"
        if name in ("ok.json", "ok"):
            self._send(sock, 200, OK_JSON, "application/json")
        elif name == "drip-head":
            self._drip(sock, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        elif name == "drip-body":
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
            )
            self._drip(sock, b"[" * 1000)
        elif name == "drip-html":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
            self._drip(sock, b"<html><body>" + b"<" * 988)
        elif name == "drip-chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(DRIP_MAX):
                if self.stop.wait(DRIP_INTERVAL):
                    return
                sock.sendall(b"1\r\n:\r\n")
        elif name == "drip-sse":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            self._drip(sock, b"data: " + b"x" * DRIP_MAX)
        elif name == "huge-length":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n")
            self._endless(sock, chunked=False)
        elif name == "endless-chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            self._endless(sock, chunked=True)
        elif name == "endless-close":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            self._endless(sock, chunked=False)
        elif name == "endless-sse":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            self._endless(sock, chunked=False, block=b": keep-alive\n" * 5000)
        elif name == "sized":
            self._send(sock, 200, b"x" * int(arg), "application/octet-stream")
        elif name == "sized-chunked":
            body = b"x" * int(arg)
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(body), 1000):
                piece = body[i : i + 1000]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
            self.sent += len(body)
        elif name == "sized-close":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
            sock.sendall(b"x" * int(arg))
            self.sent += int(arg)
        elif name == "deep-json":
            depth = int(arg)
            self._send(sock, 200, b"[" * depth + b"]" * depth, "application/json")
        elif name == "nan-json":
            self._send(sock, 200, b'{"a": NaN}', "application/json")
        elif name == "redirect-loop":
            self._redirect(sock, "/redirect-loop")
        elif name == "chain" and int(arg) > 0:
            self._redirect(sock, f"/chain/{int(arg) - 1}")
        elif name == "chain":
            self._send(sock, 200, OK_JSON, "application/json")
        elif name == "to-http":
            self._redirect(sock, f"{plain_url}/ok.json")
        elif name == "to-file":
            self._redirect(sock, "file:///etc/passwd")
        elif name == "gzip":
            body = gzip.compress(json.dumps({"a": 1}).encode())
            self._send(sock, 200, body, "application/json", extra=b"Content-Encoding: gzip\r\n")
        elif name == "bad-length":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}")
        elif name == "negative-length":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\nConnection: close\r\n\r\n" + b"x" * 100)
            self.sent += 100
        elif name == "bad-range":
            sock.sendall(
                b"HTTP/1.1 206 Partial\r\nContent-Range: bytes 0-1/100\r\nContent-Length: 2\r\nConnection: close\r\n\r\nxx"
            )
            self.sent += 2
        else:
            self._send(sock, 404, b"no such case", "text/plain")

    def _send(self, sock: socket.socket, status: int, body: bytes, ctype: str, extra: bytes = b"") -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n".encode()
        sock.sendall(head + extra + b"\r\n" + body)
        self.sent += len(body)

    def _redirect(self, sock: socket.socket, location: str) -> None:
        sock.sendall(f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())

    def _drip(self, sock: socket.socket, data: bytes) -> None:
        for byte in data[:DRIP_MAX]:
            if self.stop.wait(DRIP_INTERVAL):
                return
            sock.sendall(bytes([byte]))
            self.sent += 1

    def _endless(self, sock: socket.socket, *, chunked: bool, block: bytes = b"[" * 65536) -> None:
        frame = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block
        while self.sent < ENDLESS_MAX and not self.stop.is_set():
            sock.sendall(frame)
            self.sent += len(block)

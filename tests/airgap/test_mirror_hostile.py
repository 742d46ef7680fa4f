"""`envkit bundle serve` against a hostile folder and hostile clients (issue #35): a link, FIFO or file of another
size swapped into the bundle after the start, more connections than the cap, a client that drips its headers,
one that stays idle or reads its answer too slowly, a huge `Range`, control characters for the log.

Every server here is real, on 127.0.0.1, with small limits; every loop is bounded and every wait is "the server
dropped it" within a generous bound."""

from __future__ import annotations

import errno
import http.client
import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from envkit.jobs.bundle.mirror import Limits, ServeRequest, open_mirror, parse_range
from tests.airgap.mirror import seal

SIZE = 1000
WHEEL = "/wheels/target/x-1.0-py3-none-any.whl"


class Log:
    """A log the handler threads write to: its lines, read while they write."""

    def __init__(self) -> None:
        self.text = ""
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        with self.lock:
            self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def lines(self) -> list[str]:
        with self.lock:
            return self.text.splitlines()

    def wait_for(self, pattern: str, seconds: float = 20) -> str:
        """The first line matching `pattern` once it is there (polled, at most `seconds`); "" when none came."""
        end = time.monotonic() + seconds
        while True:
            hit = next((line for line in self.lines() if re.search(pattern, line)), "")
            if hit or time.monotonic() > end:
                return hit
            time.sleep(0.05)


@pytest.fixture
def bundle(tmp_path) -> Path:
    root = tmp_path / "bundle"
    (root / "vendor").mkdir(parents=True)
    (root / "wheels" / "target").mkdir(parents=True)
    (root / "vendor" / "a.run").write_bytes(bytes(i % 251 for i in range(SIZE)))
    (root / "wheels" / "target" / "x-1.0-py3-none-any.whl").write_bytes(b"wheel")
    return seal(root)


def start(bundle: Path, log: Log | None = None, **limits):
    server = open_mirror(ServeRequest(bundle=bundle, port=0, limits=Limits(**limits)), log=log)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def mirror(bundle, log):
    server = start(bundle, log)
    yield server
    server.shutdown()
    server.server_close()


def get(server, path: str, headers: dict | None = None, timeout: float = 10) -> tuple[int, dict, bytes]:
    """Status, headers, body (what arrived of it: a short body is returned, not raised)."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=timeout)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        try:
            body = r.read()
        except http.client.IncompleteRead as exc:
            body = exc.partial
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        conn.close()


def raw(server, data: bytes, timeout: float = 10) -> bytes:
    """Send `data` on a new connection and read until the server closes it."""
    with socket.create_connection(server.server_address[:2], timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


# --- the bundle folder changed under the server -------------------------------------------------------------


def _swap_for_link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def test_a_link_swapped_in_for_a_listed_file_is_not_served(mirror, bundle, tmp_path, log):
    run = bundle / "vendor" / "a.run"
    outside = tmp_path / "outside.run"
    outside.write_bytes(b"S" * SIZE)  # the listed file's size: only the link itself can give it away
    _swap_for_link(run, outside)
    status, _, body = get(mirror, "/vendor/a.run")
    assert status == 500 and b"S" not in body
    assert log.wait_for(r'"GET /vendor/a\.run HTTP/1\.1" 500 0 refused: vendor/a\.run: a link')
    _swap_for_link(run, Path("/etc/passwd"))
    status, _, body = get(mirror, "/vendor/a.run", {"Range": "bytes=0-"})
    assert status == 500 and b"root" not in body
    assert get(mirror, WHEEL)[::2] == (200, b"wheel")  # the others are served still


def test_a_link_on_the_way_to_a_listed_file_is_not_followed(mirror, bundle, log):
    """`wheels` swapped for a link to a copy of itself (the same files, the same sizes): refused all the same."""
    (bundle / "wheels").rename(bundle / "wheels.real")
    (bundle / "wheels").symlink_to("wheels.real")
    assert (bundle / "wheels" / "target" / "x-1.0-py3-none-any.whl").read_bytes() == b"wheel"
    assert get(mirror, WHEEL)[0] == 500
    assert log.wait_for(r"refused: wheels/target/x-1\.0-py3-none-any\.whl: a link")
    assert get(mirror, "/vendor/a.run")[0] == 200


def test_the_bundle_folder_swapped_after_the_start_is_not_followed(mirror, bundle, tmp_path):
    """The folder the server verified is the one it serves (it holds it open), whatever its path names later."""
    data = (bundle / "vendor" / "a.run").read_bytes()
    bundle.rename(tmp_path / "verified")
    other = tmp_path / "other"
    (other / "vendor").mkdir(parents=True)
    (other / "vendor" / "a.run").write_bytes(b"E" * SIZE)
    bundle.symlink_to(other)
    assert get(mirror, "/vendor/a.run")[::2] == (200, data)


def test_a_fifo_swapped_in_is_refused_without_blocking_and_the_others_are_served(mirror, bundle, log):
    fifo = bundle / "vendor" / "a.run"
    fifo.unlink()
    os.mkfifo(fifo)
    try:
        assert get(mirror, "/vendor/a.run")[0] == 500  # answered (a blocked server would time the client out)
        assert log.wait_for(r"refused: vendor/a\.run: not a regular file")
        assert get(mirror, WHEEL)[::2] == (200, b"wheel")
    finally:
        try:  # a server that opened it to read is blocked there: let it go
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader: nothing is blocked on it


@pytest.mark.parametrize("size", [SIZE - 1, SIZE + 1])
def test_a_file_of_another_size_swapped_in_is_refused(mirror, bundle, log, size):
    run = bundle / "vendor" / "a.run"
    run.unlink()
    run.write_bytes(b"T" * size)
    for headers in ({}, {"Range": "bytes=0-9"}):
        status, _, body = get(mirror, "/vendor/a.run", headers)
        assert status == 500 and b"T" not in body
    assert log.wait_for(rf"refused: vendor/a\.run: {size} bytes, not the manifest's {SIZE}")
    assert get(mirror, WHEEL)[0] == 200


# --- connections and deadlines -------------------------------------------------------------------------------

REQUEST = f"GET {WHEEL} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


def test_connections_beyond_the_cap_are_refused_while_the_others_are_served(bundle, log):
    cap = 4
    server = start(bundle, log, max_connections=cap, header_timeout=60)
    held = []
    try:
        # the cap, held open without a request yet (the server accepts in order: these come first)
        held = [socket.create_connection(server.server_address[:2], timeout=10) for _ in range(cap)]
        try:
            beyond = raw(server, REQUEST)
        except (ConnectionResetError, BrokenPipeError):
            beyond = b""
        assert not beyond.startswith(b"HTTP/1.1 200")
        assert beyond == b"" or beyond.startswith(b"HTTP/1.1 503")
        assert log.wait_for(rf"refused: {cap} connections open")
        for s in held:  # the cap's connections, all open at once, are each served
            s.sendall(REQUEST)
        for s in held:
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\nwheel")
        # their slots are free again once the server has closed them (bounded retries, not a timing)
        for _ in range(200):
            answer = raw(server, REQUEST)
            if answer.startswith(b"HTTP/1.1 200"):
                break
            time.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()
        server.shutdown()
        server.server_close()


def _dropped(s: socket.socket) -> bool:
    """Whether the server has closed `s` (it sends nothing else to a client it drops)."""
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_client_dripping_its_headers_is_dropped_at_the_deadline_while_another_is_served(bundle, log):
    server = start(bundle, log, header_timeout=1.0)
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as s:
            t0 = time.monotonic()
            s.sendall(f"GET {WHEEL} HTTP/1.1\r\nHost: x\r\n".encode())
            s.settimeout(0.25)
            dropped = False
            for i in range(80):  # a byte every 0.25 s: 20 s at most
                try:
                    s.sendall(b"X")
                except (BrokenPipeError, ConnectionResetError):
                    dropped = True
                    break
                if i == 1:
                    assert get(server, WHEEL)[::2] == (200, b"wheel")  # meanwhile
                if _dropped(s):
                    dropped = True
                    break
            assert dropped, "the dripping client was not dropped"
            assert time.monotonic() - t0 > 0.5
        assert log.wait_for(r"not complete within 1 s")
        # the other end: headers sent slowly but complete within the deadline are answered
        server.limits = Limits(header_timeout=5.0)
        with socket.create_connection(server.server_address[:2], timeout=10) as s:
            for i in range(0, len(REQUEST), 8):
                s.sendall(REQUEST[i : i + 8])
                time.sleep(0.02)
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        server.shutdown()
        server.server_close()


def test_an_idle_keep_alive_connection_is_closed(bundle, log):
    server = start(bundle, log, idle_timeout=0.5)
    try:
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
        for _ in range(2):  # kept alive: the second request goes on the same connection
            conn.request("GET", WHEEL)
            r = conn.getresponse()
            assert (r.status, r.read()) == (200, b"wheel")
        s = conn.sock
        assert s is not None
        s.settimeout(10)
        assert s.recv(1) == b""  # closed by the server, idle past idle_timeout
        conn.close()
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def big_bundle(tmp_path) -> Path:
    root = tmp_path / "big"
    root.mkdir()
    (root / "big.run").write_bytes(os.urandom(1 << 20) * 24)  # past what the sockets' buffers hold
    return seal(root)


def test_an_answer_past_its_deadline_is_dropped(big_bundle, log):
    """deadline = response_grace + length / min_rate: a client that reads nothing is dropped once it has passed,
    one that reads is served in full."""
    server = start(big_bundle, log, response_grace=2.0, min_rate=1 << 40)
    whole = (big_bundle / "big.run").read_bytes()
    try:
        assert get(server, "/big.run")[::2] == (200, whole)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(10)
            s.connect(server.server_address[:2])
            s.sendall(b"GET /big.run HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert log.wait_for(r"/big\.run HTTP/1\.1\" 200 \d+ dropped: the answer was not taken within"), log.text
            got = b""
            while chunk := s.recv(1 << 20):
                got += chunk
            assert got.startswith(b"HTTP/1.1 200") and len(got) < len(whole)
    finally:
        server.shutdown()
        server.server_close()


# --- Range: bounded ASCII digits -----------------------------------------------------------------------------

N19, N20 = "9" * 19, "9" * 20


@pytest.mark.parametrize(
    ("header", "status", "content_range"),
    [
        (f"bytes=0-{N19}", 206, f"bytes 0-{SIZE - 1}/{SIZE}"),  # the most digits read: the end is clipped
        (f"bytes={N19}-", 416, f"bytes */{SIZE}"),
        (f"bytes=-{N19}", 206, f"bytes 0-{SIZE - 1}/{SIZE}"),
        ("bytes=0000000000000000005-", 206, f"bytes 5-{SIZE - 1}/{SIZE}"),  # 19 digits, leading zeros
        (f"bytes=0-{N20}", 200, None),  # one more: the header is ignored, the whole file
        (f"bytes={N20}-", 200, None),
        (f"bytes=-{N20}", 200, None),
        ("bytes=00000000000000000005-", 200, None),
        (f"bytes={'7' * 5000}-", 200, None),
        (f"bytes=0-{'7' * 5000}", 200, None),
        (f"bytes=-{'7' * 5000}", 200, None),
    ],
)
def test_range_numbers_are_bounded_ascii_digits(mirror, bundle, log, header, status, content_range):
    data = (bundle / "vendor" / "a.run").read_bytes()
    got, headers, body = get(mirror, "/vendor/a.run", {"Range": header})
    assert (got, headers.get("content-range")) == (status, content_range)
    if status == 200:
        assert body == data
    assert not any("Traceback" in line for line in log.lines())


def test_parse_range_digit_cap():
    assert parse_range(f"bytes=0-{N19}", 10) == (0, 9)
    assert parse_range(f"bytes=0-{N20}", 10) is None
    assert parse_range("bytes=1-2", 10) == (1, 2)
    assert parse_range("bytes=\u0661-\u0662", 10) is None


# --- the log -----------------------------------------------------------------------------------------------


def test_client_text_is_escaped_and_bounded_in_the_log(mirror, log):
    requests = [
        b"GET /vendor/\x1b[31mred\x00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /a\rb\x9b2J HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /vendor/\x1b]0;title\x07 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]
    for request in requests:
        assert raw(mirror, request).startswith(b"HTTP/1.1 4")
    lines = log.lines()
    assert len(lines) == len(requests), lines  # one line each: no CR or LF of a client's got through
    for line in lines:
        assert all(" " <= c <= "~" for c in line), line  # printable ASCII only
        assert len(line) < 1200
    assert "/vendor/\\x1b[31mred\\x00 HTTP/1.1" in lines[0]
    assert "\\r" in lines[1] and "\\x9b2J" in lines[1]
    assert "\\x1b]0;title\\x07" in lines[2]
    assert "a" * 1000 in lines[3] and "a" * 1100 not in lines[3] and "(10014 characters)" in lines[3]


def test_the_logged_request_line_is_whole_up_to_the_cap(mirror, log):
    """The request line is logged whole up to 1,024 characters; one more is cut with its length."""
    for n in (1024, 1025):
        path = "/" + "b" * (n - len("GET / HTTP/1.1"))
        assert len(f"GET {path} HTTP/1.1") == n
        assert raw(mirror, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()).startswith(b"HTTP/1.1 404")
    whole, cut = log.lines()
    assert f'"GET /{"b" * (1024 - 14)} HTTP/1.1" 404 0' in whole
    assert f'"GET /{"b" * (1025 - 14)} HTTP/1.... (1025 characters)" 404 0' in cut  # its last character cut


@pytest.mark.parametrize("args", [["--max-connections", "0"], ["--header-timeout", "0"], ["--header-timeout", "nan"]])
def test_the_servers_caps_from_the_command_line_are_checked_before_it_starts(args, run_cli, tmp_path):
    """The caps' lower ends: no connection at all or no time for headers is bad input (exit 2), before the bundle is
    read or a port bound."""
    res = run_cli("bundle", "serve", str(tmp_path / "no-bundle"), "--port", "0", *args)
    assert res.code == 2 and "Traceback" not in res.err, (args, res.err)
    assert "must be" in res.err, res.err

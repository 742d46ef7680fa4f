"""`envkit bundle serve`: a verified bundle as a read-only HTTP mirror (envkit/jobs/bundle/mirror.py)."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed
from envkit.jobs.bundle.mirror import ServeRequest, open_mirror, parse_range
from tests.airgap.mirror import seal

SIZE = 1000


@pytest.fixture
def bundle(tmp_path) -> Path:
    root = tmp_path / "bundle"
    (root / "vendor").mkdir(parents=True)
    (root / "wheels" / "target").mkdir(parents=True)
    (root / "vendor" / "a.run").write_bytes(bytes(i % 251 for i in range(SIZE)))
    (root / "wheels" / "target" / "x-1.0-py3-none-any.whl").write_bytes(b"wheel")
    (root / "wheels" / "target" / "empty.txt").write_bytes(b"")
    (tmp_path / "secret").write_text("outside the bundle\n")
    return seal(root)


@pytest.fixture
def mirror(bundle):
    server = open_mirror(ServeRequest(bundle=bundle, port=0), log=None)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


def get(server, path: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_whole_file_and_head(mirror, bundle):
    data = (bundle / "vendor" / "a.run").read_bytes()
    status, headers, body = get(mirror, "/vendor/a.run")
    assert (status, body, headers["content-length"], headers["accept-ranges"]) == (200, data, str(SIZE), "bytes")
    status, headers, body = get(mirror, "/vendor/a.run", method="HEAD")
    assert (status, body, headers["content-length"]) == (200, b"", str(SIZE))
    assert get(mirror, "/manifest.json")[0] == 200
    assert get(mirror, "/wheels/target/empty.txt")[:3:2] == (200, b"")
    want = SIZE + len((bundle / "manifest.json").read_bytes())
    # counted after each write returns: the client may have the bytes a moment before the count does
    deadline = time.monotonic() + 5
    while mirror.stats.sent.get("127.0.0.1") != want and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mirror.stats.sent["127.0.0.1"] == want


@pytest.mark.parametrize(
    ("header", "status", "content_range", "span"),
    [
        ("bytes=0-0", 206, f"bytes 0-0/{SIZE}", (0, 1)),
        (f"bytes={SIZE - 1}-{SIZE - 1}", 206, f"bytes {SIZE - 1}-{SIZE - 1}/{SIZE}", (SIZE - 1, SIZE)),  # the last byte
        (f"bytes={SIZE - 1}-", 206, f"bytes {SIZE - 1}-{SIZE - 1}/{SIZE}", (SIZE - 1, SIZE)),
        (f"bytes=10-{SIZE}", 206, f"bytes 10-{SIZE - 1}/{SIZE}", (10, SIZE)),  # an end past the end is clipped
        (f"bytes={SIZE}-", 416, f"bytes */{SIZE}", None),  # one past the last byte
        (f"bytes={SIZE}-{SIZE + 5}", 416, f"bytes */{SIZE}", None),
        ("bytes=-1", 206, f"bytes {SIZE - 1}-{SIZE - 1}/{SIZE}", (SIZE - 1, SIZE)),
        (f"bytes=-{SIZE}", 206, f"bytes 0-{SIZE - 1}/{SIZE}", (0, SIZE)),
        (f"bytes=-{SIZE + 1}", 206, f"bytes 0-{SIZE - 1}/{SIZE}", (0, SIZE)),
        ("bytes=-0", 416, f"bytes */{SIZE}", None),
        ("bytes=0-1,5-6", 200, None, (0, SIZE)),  # several ranges: the whole file
        ("bytes=5-4", 200, None, (0, SIZE)),  # an invalid range is ignored
        ("items=0-1", 200, None, (0, SIZE)),
    ],
)
def test_ranges_both_sides_of_the_end(mirror, bundle, header, status, content_range, span):
    data = (bundle / "vendor" / "a.run").read_bytes()
    got, headers, body = get(mirror, "/vendor/a.run", {"Range": header})
    assert got == status
    assert headers.get("content-range") == content_range
    if span:
        assert body == data[span[0] : span[1]] and headers["content-length"] == str(span[1] - span[0])


def test_parse_range_on_an_empty_file():
    assert parse_range("bytes=0-", 0) == "unsatisfiable"
    assert parse_range("bytes=-1", 0) == "unsatisfiable"
    assert parse_range(None, 0) is None


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/vendor/b.run", 404),  # not in the manifest
        ("/", 404),  # no listing
        ("/vendor/", 400),
        ("/vendor", 404),
        ("/../secret", 400),
        ("/vendor/../../secret", 400),
        ("/vendor/%2e%2e/%2e%2e/secret", 400),
        ("/vendor/./a.run", 400),
        ("/vendor//a.run", 400),
        ("/vendor%5ca.run", 400),
        ("/vendor/a.run%00", 400),
        ("/vendor/%ff", 400),
        ("/vendor/a.run?x=1", 200),  # a query is not part of the path
    ],
)
def test_only_the_manifest_paths_are_served(mirror, path, status):
    assert get(mirror, path)[0] == status


def test_a_file_added_after_the_start_is_not_served(mirror, bundle):
    (bundle / "vendor" / "new.run").write_text("x")
    assert get(mirror, "/vendor/new.run")[0] == 404


def test_other_methods_are_refused(mirror):
    assert get(mirror, "/vendor/a.run", method="PUT")[0] == 501
    assert get(mirror, "/vendor/a.run", method="DELETE")[0] == 501


def test_a_tampered_or_unsealed_bundle_does_not_start(bundle, tmp_path):
    p = bundle / "vendor" / "a.run"
    data = bytearray(p.read_bytes())
    data[SIZE // 2] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(CheckFailed, match="does not verify .*modified vendor/a.run"):
        open_mirror(ServeRequest(bundle=bundle, port=0), log=None)
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInput, match="not an envkit bundle"):
        open_mirror(ServeRequest(bundle=tmp_path / "plain", port=0), log=None)
    with pytest.raises(BadInput, match="not a bundle folder"):
        open_mirror(ServeRequest(bundle=tmp_path / "secret", port=0), log=None)


@pytest.mark.parametrize(("bind", "port"), [("localhost", 8080), ("10.0.0.300", 8080), ("127.0.0.1", -1), ("127.0.0.1", 65536)])
def test_bad_addresses_are_bad_input(bundle, bind, port):
    with pytest.raises(BadInput):
        open_mirror(ServeRequest(bundle=bundle, bind=bind, port=port), log=None)


def _cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "envkit", "bundle", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_the_cli_serves_until_sigterm_and_refuses_a_tampered_bundle(bundle):
    p = _cli(str(bundle), "--bind", "127.0.0.1", "--port", "0")
    try:
        line = p.stdout.readline()
        assert line.startswith(f"serving {bundle} (4 files) at http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/wheels/target/x-1.0-py3-none-any.whl", headers={"Range": "bytes=1-"})
        r = conn.getresponse()
        assert (r.status, r.read()) == (206, b"heel")
        conn.close()
        # logged once the answer is complete (a line per request, with the bytes sent)
        assert p.stderr.readline() == '127.0.0.1 "GET /wheels/target/x-1.0-py3-none-any.whl HTTP/1.1" 206 4\n'
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    (bundle / "wheels" / "target" / "x-1.0-py3-none-any.whl").write_bytes(b"wheeL")
    p = _cli(str(bundle), "--port", "0")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and "does not verify" in err and "serving" not in out
    p = _cli(str(bundle), "--bind", "nowhere", "--port", "0")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "not an IP address" in err


def test_a_silent_client_is_dropped_after_the_client_timeout(bundle):
    """client_timeout (CLIENT_TIMEOUT, 60 s, by default) on both sides: a client that sends its request within it is
    served, one silent past it is dropped (the thread serving it is freed)."""
    import socket

    from envkit.jobs.bundle import mirror

    server = open_mirror(ServeRequest(bundle=bundle, port=0, limits=mirror.Limits(client_timeout=0.5)), log=None)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as s:
            time.sleep(0.2)  # within the timeout
            s.sendall(b"GET /wheels/target/x-1.0-py3-none-any.whl HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        with socket.create_connection(server.server_address[:2], timeout=10) as s:
            t0 = time.monotonic()
            assert s.recv(4096) == b""  # silent past the timeout: closed by the server
            assert 0.4 < time.monotonic() - t0 < 10
    finally:
        server.shutdown()
        server.server_close()

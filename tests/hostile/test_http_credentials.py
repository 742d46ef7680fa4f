"""Credentials in an index URL (`http://user:password@host/simple/`) across redirects (issue #35).

Held, through `envkit.io.httpclient.open_url` (every index page, download and HEAD goes through it) and
`simpleindex.read_page`: the URL's `user:password` is sent as `Authorization: Basic` to the URL's own origin, on the
first request and on each redirect that stays there (absolute or relative Location, a chain); it is not sent on a
redirect to another origin: another host (127.0.0.2), another port of the same host (another server), another
scheme on other ports. The rule is requests' `SessionRedirectMixin.should_strip_auth` (pip's): same scheme, host and
port, except an http->https upgrade on the default ports, which keeps them (checked where 127.0.0.1:80 and :443 can
be bound). Real servers on 127.0.0.0/8 record the Authorization header of every request they receive."""

from __future__ import annotations

import base64
import http.server
import ssl
import threading
from urllib.parse import urlsplit

import pytest

from envkit.io import httpclient as H
from tests.hostile.servers import cert_file

LIMITS = H.Limits("a test document", 1 << 20, deadline=10.0)
BASIC = "Basic " + base64.b64encode(b"user:pa ss@x").decode()
CREDS = "user:pa%20ss%40x@"  # percent-encoded in the URL, decoded in the header


class Recorder:
    """An HTTP(S) server on `host`:`port` (0: a free one) that records (path, Authorization) of each request and
    answers a path of `redirects` with a 302 to its Location, any other path with 200 `ok`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: bool = False) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.redirects: dict[str, str] = {}
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                rec.seen.append((self.path, self.headers.get("Authorization")))
                location = rec.redirects.get(self.path)
                self.send_response(302 if location else 200)
                if location:
                    self.send_header("Location", location)
                body = b"" if location else b"ok"
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*cert_file())
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        scheme = "https" if tls else "http"
        default = 443 if tls else 80
        self.origin = f"{scheme}://{host}" + ("" if self.port == default else f":{self.port}")
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str, creds: str = "") -> str:
        scheme, rest = self.origin.split("://")
        return f"{scheme}://{creds}{rest}{path}"

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """127.0.0.2 is not among the client's loopback names: no proxy from the environment may take the request."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", cert_file()[0])


def _get(url: str) -> tuple[int, str, bytes]:
    """Status, the URL that answered (without its userinfo: `Response.url` keeps the one of the URL given) and body."""
    with H.open_url(url, LIMITS) as resp:
        parts = urlsplit(resp.url)
        return resp.status, parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl(), resp.body()


def test_the_credentials_go_to_the_url_given():
    with Recorder() as a:
        assert _get(a.url("/final", CREDS)) == (200, a.url("/final"), b"ok")
    assert a.seen == [("/final", BASIC)]


@pytest.mark.parametrize("location", ["absolute", "relative", "chain"])
def test_a_redirect_within_the_origin_keeps_them(location):
    with Recorder() as a:
        if location == "chain":
            a.redirects = {"/start": a.url("/middle"), "/middle": "final"}
        else:
            a.redirects = {"/start": a.url("/final") if location == "absolute" else "/final"}
        assert _get(a.url("/start", CREDS)) == (200, a.url("/final"), b"ok")
    assert [auth for _, auth in a.seen] == [BASIC] * len(a.seen) and a.seen[-1][0] == "/final"


@pytest.mark.parametrize("other", ["host", "port", "scheme"])
def test_a_redirect_to_another_origin_drops_them(other):
    """Another host (127.0.0.2), another port of 127.0.0.1 (another server: the reported case, kept when only the
    host was compared), https on another port."""
    host = "127.0.0.2" if other == "host" else "127.0.0.1"
    with Recorder() as a, Recorder(host, tls=other == "scheme") as b:
        a.redirects = {"/start": b.url("/final")}
        assert _get(a.url("/start", CREDS)) == (200, b.url("/final"), b"ok")
    assert a.seen == [("/start", BASIC)]
    assert b.seen == [("/final", None)], f"{other}: the credentials of {a.origin} were sent to {b.origin}"


def test_a_redirect_back_to_the_origin_after_another_sends_them_there_only():
    """A -> B -> A: B never gets them; A, the origin they were given for, does."""
    with Recorder() as a, Recorder(port=0) as b:
        a.redirects = {"/start": b.url("/away")}
        b.redirects = {"/away": a.url("/final")}
        assert _get(a.url("/start", CREDS))[0] == 200
    assert b.seen == [("/away", None)]
    assert a.seen == [("/start", BASIC), ("/final", BASIC)]


def test_the_index_page_reader_drops_them_on_another_port():
    """Through `read_page`: a credentialed index whose project page redirects to another server of the same host."""
    from envkit.artifacts.index import read_page

    with Recorder() as a, Recorder() as b:
        a.redirects = {"/simple/pkg/": b.url("/simple/pkg/")}
        assert read_page(a.url("/simple/pkg/", CREDS)) == {}  # text/plain: not a page
    assert (a.seen, b.seen) == ([("/simple/pkg/", BASIC)], [("/simple/pkg/", None)])


def _bindable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.skipif(not (_bindable(80) and _bindable(443)), reason="127.0.0.1:80 and :443 cannot be bound here")
def test_an_upgrade_to_https_on_the_default_ports_keeps_them():
    """http://host/ (port 80) -> https://host/ (port 443): the same site, as requests and pip keep them. (CI runs a
    second session beside this one: a port it holds at this moment skips the test rather than failing it.)"""
    try:
        a_server = Recorder(port=80)
    except OSError as exc:
        pytest.skip(f"127.0.0.1:80 is in use: {exc}")
    try:
        b_server = Recorder(port=443, tls=True)
    except OSError as exc:
        a_server.httpd.server_close()
        pytest.skip(f"127.0.0.1:443 is in use: {exc}")
    with a_server as a, b_server as b:
        assert (a.origin, b.origin) == ("http://127.0.0.1", "https://127.0.0.1")
        a.redirects = {"/start": b.url("/final")}
        assert _get(a.url("/start", CREDS)) == (200, b.url("/final"), b"ok")
    assert (a.seen, b.seen) == ([("/start", BASIC)], [("/final", BASIC)])


def test_a_failure_never_shows_the_credentials_of_the_url():
    """An index URL's user:password goes to its server only: the message of a failed request shows `***@` (the
    request itself keeps them: `url` is the URL as given)."""
    from envkit.io.httpclient import JSON_DOCUMENT, HTTPFailure, open_url

    url = "http://alice:s3cret@127.0.0.1:9/simple/pkg/"
    with pytest.raises(HTTPFailure) as info:
        with open_url(url, JSON_DOCUMENT):
            pass
    assert "s3cret" not in info.value.message and "alice" not in info.value.message
    assert "http://***@127.0.0.1:9/simple/pkg/" in info.value.message and info.value.url == url


def test_the_one_redaction_rule_hides_a_password_holding_an_at_sign():
    """One rule for every message (the client's and matrix refresh's): up to the authority's last `@`."""
    from envkit.io.httpclient import redacted
    from envkit.jobs.matrix.refresh import redact

    for text, shown in (
        ("http://u:p@ss@h/x", "http://***@h/x"),
        (
            "see https://a:b@idx.example/simple/ and https://plain.example/a@b",
            "see https://***@idx.example/simple/ and https://plain.example/a@b",
        ),
        ("no url here: user@example.com", "no url here: user@example.com"),
    ):
        assert redacted(text) == shown == redact(text)

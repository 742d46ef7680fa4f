"""Hostile servers (`servers.py`, on 127.0.0.1) against envkit's HTTP client and every path that uses it: `matrix
refresh` (PyPI's JSON API and range requests), bundle downloads, the `smoke --serve` client and its readiness wait,
and `envkit lock`'s uv. A drip is cut at its deadline (the elapsed time bounded loosely), a body stops at its cap
(each cap tested at the cap and one byte over), JSON too deep or with NaN is refused, redirects are bounded and
never drop TLS; every failure is an envkit error (exit 2) naming the URL, never a traceback or a hang."""

from __future__ import annotations

import hashlib
import time

import pytest

from envkit.errors import BadInput, CannotRun, CheckFailed
from envkit.io import httpclient as H

from .servers import DRIP_INTERVAL, OK_JSON, HostileServer, cert_file

DEADLINE = 2.0  # the deadline given to each request that meets a drip
SLACK = 8.0  # how much later than its deadline a cut request may end (CI's year-ahead pass runs niced beside the suite)
SMALL = H.JSON_DOCUMENT.but(deadline=DEADLINE)
# requests that must end for another reason (a cap, a redirect, a refusal) before any deadline: a starved process
# must not turn them into deadline failures (CI's year-ahead pass, niced on 2 busy cores, once took over 2 s for one)
LIVE = H.JSON_DOCUMENT.but(deadline=60.0)


def timed(fn, *args, **kwargs):
    """(the exception `fn` raised, seconds it took); fails when it raised none."""
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:  # noqa: B017 - each test checks the type
        fn(*args, **kwargs)
    return info.value, time.monotonic() - t0


@pytest.fixture
def server():
    """`server(case=None, tls=False)`: a running HostileServer, closed (its loops stopped) after the test."""
    made = []

    def make(case: str | None = None, tls: bool = False) -> HostileServer:
        srv = HostileServer(case, tls=tls).__enter__()
        made.append(srv)
        return srv

    yield make
    for srv in made:
        srv.__exit__(None, None, None)


@pytest.fixture
def trust_tls(monkeypatch):
    """The client trusts the stand-in server's self-signed certificate (and nothing else)."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", cert_file()[0])


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


# --- the client: deadlines ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["drip-head", "drip-body", "drip-chunked"])
def test_a_drip_is_cut_at_the_deadline_for_the_whole_request(server, case):
    srv = server()
    exc, took = timed(H.get, f"{srv.url}/{case}", SMALL)
    assert isinstance(exc, H.HTTPFailure) and exc.transient, exc
    assert f"{srv.url}/{case}: no complete answer within 2 s (the deadline for the whole request)" == exc.message
    assert exc.hint
    assert DEADLINE - 0.1 <= took <= DEADLINE + SLACK
    assert srv.sent <= DEADLINE / DRIP_INTERVAL + 2  # it was not read on after the deadline


def test_a_drip_over_tls_is_cut_at_the_deadline(server, trust_tls):
    srv = server(tls=True)
    assert H.get_json(f"{srv.url}/ok.json", LIVE)["ok"] is True  # the TLS stand-in works
    exc, took = timed(H.get, f"{srv.url}/drip-body", SMALL)
    assert isinstance(exc, H.HTTPFailure) and "within 2 s" in exc.message
    assert DEADLINE - 0.1 <= took <= DEADLINE + SLACK


def test_a_download_must_keep_a_minimum_rate_after_its_grace(server):
    srv = server()
    limits = H.DOWNLOAD.but(deadline=1.0, min_rate=10_000.0, idle=None)
    exc, took = timed(H.get, f"{srv.url}/drip-body", limits)
    assert isinstance(exc, H.HTTPFailure) and exc.transient
    assert "slower than 9.76562 KiB/s on average after 1 s (cut)" in exc.message
    assert 0.9 <= took <= 1.0 + SLACK
    # the same limits take a body of 2 MB (200 s at the minimum rate) that comes fast: the deadline moved on
    assert len(H.get(f"{srv.url}/sized/{2_000_000}", limits)) == 2_000_000


def test_no_byte_for_the_idle_time_cuts_a_download(server):
    srv = server()
    limits = H.DOWNLOAD.but(deadline=30.0, idle=0.5)
    exc, took = timed(H.get, f"{srv.url}/drip-body", limits)
    assert isinstance(exc, H.HTTPFailure) and exc.message.endswith("no data for 0.5 s")
    assert took <= 0.5 + SLACK


# --- the client: sizes ----------------------------------------------------------------------------------
def test_a_content_length_over_the_cap_is_refused_before_the_body(server):
    srv = server()
    exc, took = timed(H.get, f"{srv.url}/huge-length", LIVE)
    assert isinstance(exc, H.TooLarge) and exc.announced == 10**12 and not exc.transient
    assert "announces 1000000000000 bytes, more than the 67108864 allowed for a JSON document; nothing was read" in exc.message
    assert took < DEADLINE + SLACK  # the cap stopped it, long before the deadline (LIVE: 60 s)


@pytest.mark.parametrize("case", ["endless-chunked", "endless-close"])
def test_an_endless_body_stops_at_the_cap(server, case):
    srv = server()
    exc, took = timed(H.get, f"{srv.url}/{case}", LIVE.but(max_bytes=1 << 20))
    assert isinstance(exc, H.TooLarge) and exc.announced is None
    assert f"sends more than {1 << 20} bytes, the cap for a JSON document; stopped there" in exc.message
    assert took < DEADLINE + SLACK  # the cap stopped it, long before the deadline (LIVE: 60 s)


@pytest.mark.parametrize("case", ["sized", "sized-chunked", "sized-close"])
def test_each_cap_takes_its_size_and_refuses_one_byte_more(server, case):
    srv = server()
    cap = LIVE.but(max_bytes=5000)
    assert len(H.get(f"{srv.url}/{case}/5000", cap)) == 5000
    with pytest.raises(H.TooLarge):
        H.get(f"{srv.url}/{case}/5001", cap)


def test_an_encoded_body_or_a_double_length_is_refused(server):
    srv = server()
    with pytest.raises(H.HTTPFailure, match="sends a gzip-encoded body, which was not asked for"):
        H.get(f"{srv.url}/gzip", LIVE)
    with pytest.raises(H.HTTPFailure, match="malformed Content-Length"):
        H.get(f"{srv.url}/bad-length", LIVE)


# --- the client: JSON -----------------------------------------------------------------------------------
def test_json_depth_is_capped_at_64_levels_without_recursion(server):
    srv = server()
    doc, depth = H.get_json(f"{srv.url}/deep-json/64"), 0  # at the cap: parsed
    while isinstance(doc, list):
        doc, depth = doc[0] if doc else None, depth + 1
    assert depth == 64
    for depth in (65, 100_000):
        exc, took = timed(H.get_json, f"{srv.url}/deep-json/{depth}")
        assert isinstance(exc, BadInput) and exc.message.endswith(f"/deep-json/{depth}: nested deeper than 64 levels")
        assert not isinstance(exc.__context__, RecursionError)
    assert H.get_json(f"{srv.url}/deep-json/200", max_depth=200) is not None


def test_nan_is_not_a_json_number(server):
    srv = server()
    with pytest.raises(BadInput, match="NaN is not a JSON number"):
        H.get_json(f"{srv.url}/nan-json")


# --- the client: redirects ------------------------------------------------------------------------------
def test_redirects_are_bounded(server):
    srv = server()
    assert H.get_json(f"{srv.url}/chain/{H.MAX_REDIRECTS}")["ok"] is True
    with pytest.raises(H.HTTPFailure, match=f"more than {H.MAX_REDIRECTS} redirects"):
        H.get(f"{srv.url}/chain/{H.MAX_REDIRECTS + 1}", LIVE)
    exc, took = timed(H.get, f"{srv.url}/redirect-loop", LIVE)
    assert isinstance(exc, H.HTTPFailure) and "more than 5 redirects (the last to /redirect-loop)" in exc.message
    assert len(srv.requests) == 3 * (H.MAX_REDIRECTS + 1)  # each: the first request and its redirects, no more


def test_a_redirect_never_goes_from_https_to_http_or_off_http(server, trust_tls):
    srv = server(tls=True)
    assert H.get_json(f"{srv.url}/chain/2")["ok"] is True  # https to https
    with pytest.raises(H.HTTPFailure, match="from https to plain http, refused") as err:
        H.get(f"{srv.url}/to-http", LIVE)
    assert err.value.url == f"{srv.url}/to-http" and "TLS" in err.value.hint
    assert [p for _, p in srv.requests][-1] == "/to-http"  # nothing was asked over http
    plain = server()
    assert H.get_json(f"{plain.url}/to-http")["ok"] is True  # http to http is fine
    with pytest.raises(H.HTTPFailure, match="redirects to file:///etc/passwd, not an http"):
        H.get(f"{plain.url}/to-file", LIVE)


def test_an_untrusted_certificate_is_refused_with_what_to_do(server, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    srv = server(tls=True)
    with pytest.raises(H.HTTPFailure, match="the TLS certificate is not trusted") as err:
        H.get(f"{srv.url}/ok.json", LIVE)
    assert "SSL_CERT_FILE" in err.value.hint and not err.value.transient


def test_a_ca_bundle_that_cannot_be_read_is_cannot_run(server, monkeypatch, tmp_path):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    srv = server(tls=True)
    with pytest.raises(CannotRun, match="the CA bundle .*missing.pem cannot be read") as err:
        H.get(f"{srv.url}/ok.json", LIVE)
    assert "REQUESTS_CA_BUNDLE" in err.value.hint


def test_not_an_http_url_is_bad_input():
    for url in ("file:///etc/passwd", "ftp://example.org/x", "http://", "http://host:99999/"):
        with pytest.raises(BadInput):
            H.get(url, LIVE)


def test_the_proxy_of_the_environment_is_used_and_loopback_bypasses_it(server, monkeypatch):
    proxy = server("ok.json")
    monkeypatch.setenv("http_proxy", proxy.url)
    assert H.get_json("http://pypi.invalid/pypi/x/json")["ok"] is True
    assert proxy.requests == [("GET", "http://pypi.invalid/pypi/x/json")]
    direct = server()
    assert H.get(f"{direct.url}/ok.json", LIVE) == OK_JSON  # 127.0.0.1: not through the proxy
    assert len(proxy.requests) == 1


# --- matrix refresh (PyPI's JSON API, range requests) ---------------------------------------------------
@pytest.fixture
def pypi(server, monkeypatch):
    """`pypi(case)`: refresh's PyPI is a hostile server playing `case` on every path."""
    from envkit.jobs.matrix import refresh

    def make(case: str) -> HostileServer:
        srv = server(case)
        monkeypatch.setattr(refresh, "PYPI", srv.url)
        return srv

    return make


@pytest.mark.parametrize("case", ["drip-head", "drip-body"])
def test_refresh_is_cut_at_its_deadline(pypi, case):
    from envkit.jobs.matrix import refresh

    pypi(case)
    exc, took = timed(refresh.Source(timeout=DEADLINE).project, "numpy", "1.24.0")
    assert isinstance(exc, CannotRun) and "within 2 s" in exc.message and "/pypi/numpy/json" in exc.message
    assert "--snapshot" in exc.hint
    assert took <= DEADLINE + SLACK


@pytest.mark.parametrize(
    "case, error, message",
    [
        ("deep-json/100000", BadInput, "nested deeper than 64 levels"),
        ("nan-json", BadInput, "NaN is not a JSON number"),
        ("huge-length", CannotRun, "announces 1000000000000 bytes"),
        ("ok.json", BadInput, "is not a PyPI JSON document"),
        ("redirect-loop", CannotRun, "more than 5 redirects"),
    ],
)
def test_refresh_refuses_a_hostile_document(pypi, case, error, message):
    from envkit.jobs.matrix import refresh

    pypi(case)
    with pytest.raises(error, match=message):
        refresh.Source().project("numpy", "1.24.0")


def test_refresh_through_the_command_is_exit_2_without_a_traceback(pypi, run_cli, tmp_path):
    pypi("deep-json/100000")
    r = run_cli("matrix", "refresh")
    assert r.code == 2 and "nested deeper than 64 levels" in r.err and "Traceback" not in r.err + r.out


def test_a_range_request_answered_with_the_whole_file_is_refused(pypi):
    from envkit.jobs.matrix import refresh

    srv = pypi(f"sized/{refresh.ZIP_TAIL + 1}")  # a server that ignores Range
    with pytest.raises(CannotRun, match=f"announces {refresh.ZIP_TAIL + 1} bytes, more than the {refresh.ZIP_TAIL}"):
        refresh._read_zip_member(refresh.Source(), f"{srv.url}/x.whl", ".dist-info/METADATA")
    server_at_cap = pypi(f"sized/{refresh.ZIP_TAIL}")  # at the cap: read, and found no zip in it
    with pytest.raises(CannotRun, match="not a zip"):
        refresh._read_zip_member(refresh.Source(), f"{server_at_cap.url}/x.whl", ".dist-info/METADATA")


# --- bundle downloads ------------------------------------------------------------------------------------
def _download(url: str, tmp_path, size: int | None = 1000, **kw):
    from envkit.artifacts.download import Downloader, Fetch, WheelCache

    cache = WheelCache(tmp_path / "cache")
    return Downloader(cache, retries=1, backoff=0, **kw).fetch_all([Fetch(url, "1" * 64, size, "x.whl")]), cache


def test_a_dripping_download_is_cut_by_the_minimum_rate(server, tmp_path):
    srv = server()
    exc, took = timed(_download, f"{srv.url}/drip-body", tmp_path, grace=1.0)
    assert isinstance(exc, CannotRun)
    assert "could not download x.whl after 1 attempts" in exc.message and "slower than 16 KiB/s" in exc.message
    assert took <= 1.0 + SLACK


def test_a_download_stops_at_the_recorded_size(server, tmp_path):
    srv = server()
    for case in ("endless-chunked", "endless-close"):
        with pytest.raises(CheckFailed, match="holds more than the 10 bytes the lock records"):
            _download(f"{srv.url}/{case}", tmp_path, size=10)
    with pytest.raises(CheckFailed, match="sends 1000000000000 bytes, more than the 10 the lock records"):
        _download(f"{srv.url}/huge-length", tmp_path, size=10)
    with pytest.raises(CheckFailed, match="sends 11 bytes, more than the 10"):  # one byte over the size
        _download(f"{srv.url}/sized/11", tmp_path, size=10)
    data = b"x" * 10  # at the size: fetched
    from envkit.artifacts.download import Downloader, Fetch, WheelCache

    sha = hashlib.sha256(data).hexdigest()
    got = Downloader(WheelCache(tmp_path / "c2"), retries=1).fetch_all([Fetch(f"{srv.url}/sized/10", sha, 10, "x.whl")])
    assert got == {sha: "fetched"}


def test_a_download_of_unknown_size_stops_at_the_large_cap(server, tmp_path, monkeypatch):
    monkeypatch.setattr(H, "DOWNLOAD", H.DOWNLOAD.but(max_bytes=1 << 20))
    srv = server()
    with pytest.raises(H.TooLarge, match=f"sends more than {1 << 20} bytes"):
        _download(f"{srv.url}/endless-chunked", tmp_path, size=None)


def test_a_download_is_not_redirected_from_https_to_http(server, trust_tls, tmp_path):
    srv = server(tls=True)
    with pytest.raises(CannotRun, match="from https to plain http, refused"):
        _download(f"{srv.url}/to-http", tmp_path)


# --- the smoke --serve client -----------------------------------------------------------------------------
def _answer(fn):
    from envkit.jobs.smoke import serving as S

    req = S.REQUESTS[0]
    t0 = time.monotonic()
    answer = S._guarded_answer(fn, req, True)
    return answer, time.monotonic() - t0


@pytest.mark.parametrize("case", ["drip-head", "drip-body"])
def test_a_dripping_answer_is_cut_at_the_request_timeout(server, case):
    from envkit.jobs.smoke import serving as S

    srv = server(case)
    answer, took = _answer(lambda: S.complete(srv.port, S.REQUESTS[0], "m", 4, DEADLINE))
    assert not answer.ok and "within 2 s" in answer.error
    assert took <= DEADLINE + SLACK


@pytest.mark.parametrize("case", ["drip-sse", "drip-chunked"])
def test_a_dripping_stream_is_cut_at_the_request_timeout(server, case):
    from envkit.jobs.smoke import serving as S

    srv = server(case)
    answer, took = _answer(lambda: S.stream(srv.port, S.REQUESTS[0], "m", 4, DEADLINE, expects_done=True))
    assert not answer.ok and "within 2 s" in answer.error, answer.error
    assert took <= DEADLINE + SLACK


def test_an_answer_at_the_cap_is_read_and_one_byte_more_is_refused(server, monkeypatch):
    from envkit.jobs.smoke import serving as S

    monkeypatch.setattr(S, "MAX_BODY", 5000)
    for case, expected in [("sized/5000", "not JSON envkit accepts"), ("sized/5001", "announces 5001 bytes")]:
        srv = server(case)
        answer, _ = _answer(lambda srv=srv: S.complete(srv.port, S.REQUESTS[0], "m", 4, 10.0))
        assert not answer.ok and expected in answer.error, answer.error
    srv = server("endless-sse")
    answer, _ = _answer(lambda: S.stream(srv.port, S.REQUESTS[0], "m", 4, 10.0, expects_done=True))
    assert not answer.ok and "sends more than 5000 bytes" in answer.error, answer.error


def test_readiness_is_bounded_by_serve_timeout_as_a_whole(server, tmp_path):
    from envkit.jobs.smoke import serving as S

    srv = server("drip-head")
    process = S.ServerProcess(S.ServerCommand("transformers", ["true"], {}, False), tmp_path / "server.log")
    process.exited = lambda: None  # a server that runs on and answers one byte a second
    exc, took = timed(S.wait_ready, process, srv.port, DEADLINE, None, poll=0.05)
    assert isinstance(exc, CannotRun) and "not ready within 2 s" in exc.message and "--serve-timeout" in exc.hint
    assert took <= DEADLINE + SLACK


def test_readiness_refuses_deep_or_oversized_model_lists(server, tmp_path):
    from envkit.jobs.smoke import serving as S

    process = S.ServerProcess(S.ServerCommand("transformers", ["true"], {}, False), tmp_path / "server.log")
    process.exited = lambda: None
    for case in ("deep-json/100000", "endless-chunked"):
        srv = server(case)
        with pytest.raises(CannotRun, match="not ready within 1 s"):
            S.wait_ready(process, srv.port, 1.0, None, poll=0.05)
    srv = server("ok.json")  # the control: {"data": [{"id": "m"}]} on every path
    assert S.wait_ready(process, srv.port, 5.0, None, poll=0.05)[0] == "m"


# --- envkit lock: uv reads the index pages ------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_a_dripping_index_stops_uv_at_its_deadline(server, tmp_path, monkeypatch):
    from envkit.artifacts import closure

    try:
        closure.find_uv()
    except CannotRun:
        pytest.skip("uv is not installed")
    # 30 s: uv must have started and asked the index before the deadline, also niced on 2 cores busy with the whole
    # suite (CI's year-ahead pass: 8 s were once too few for uv to ask at all)
    monkeypatch.setattr(closure, "UV_DEADLINE", 30.0)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # uv_env drops UV_*: its own cache is used
    srv = server("drip-html")
    plan = closure.ClosurePlan(roots=("numpy",), target=closure.make_target("3.10", "x86_64"), index_url=f"{srv.url}/simple")
    exc, took = timed(closure.run_uv, plan, tmp_path / "work")
    assert isinstance(exc, CannotRun) and "within 30 s (stopped)" in exc.message and srv.url in exc.message
    assert took <= 30.0 + 10.0
    assert srv.requests  # uv was reading the dripping index when it was stopped


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("9" * 20, True), ("9" * 21, False), ("²", False), (" 12 ", True)])
def test_a_content_length_is_ascii_digits_of_at_most_20_on_both_sides(value, ok):
    import http.client
    from types import SimpleNamespace

    headers = http.client.HTTPMessage()
    headers["Content-Length"] = value
    resp = SimpleNamespace(headers=headers, url="http://127.0.0.1/x", _hint="hint")
    if ok:
        assert H._content_length(resp) == int(value)
    else:
        with pytest.raises(H.HTTPFailure, match="malformed Content-Length"):
            H._content_length(resp)

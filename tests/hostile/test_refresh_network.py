"""`envkit matrix refresh` against an index that fails the way a real network does (issue #37 item 2).

`FakePyPI` is PyPI's JSON API on 127.0.0.1, answered from the recorded snapshot (tests/fixtures/pypi-snapshot), the
files' URLs relative (``../../files/NAME``, as a mirror may answer them) and the files themselves small wheels that
honour Range. `faults[path]` lists what the next requests of that path get instead (a status, with headers, or a
connection reset mid-answer), one each, then the document. `/old/REST` redirects to `PREFIX/pypi/REST`.

The retries' waits go to an injected `sleep` (a list: the waits asked for, never waited), with the jitter fixed
(`rand` 1.0: the full back-off, 0.5 s, 1 s, 2 s, 4 s), so nothing here depends on time. A name that does not resolve is
a real `.invalid` host (RFC 6761), no proxy in between. No request leaves 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import json
import socket
import struct
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from envkit.errors import CannotRun
from envkit.io import httpclient
from envkit.jobs.matrix import refresh, retry

from . import snapshot_files

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"
RESET = "reset"  # a fault: the headers and part of the body, then a TCP reset


class FakePyPI:
    """PyPI's JSON API (``PREFIX/pypi/...``) and its files (``PREFIX/files/...``) on 127.0.0.1, with faults."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.faults: dict[str, list[object]] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urlsplit(self.path).path
                with fake._lock:
                    fake.requests.append(path)
                    queued = fake.faults.get(path)
                    fault = queued.pop(0) if queued else None
                if fault is not None:
                    fake.fail(self, fault)
                else:
                    fake.answer(self, path)

        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self.url = f"{self.origin}{prefix}/pypi"  # the JSON API base, as --index-url takes it
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakePyPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def count(self, path: str) -> int:
        return sum(1 for p in self.requests if p == path)

    # --- answers -------------------------------------------------------------------------------------------
    @staticmethod
    def send(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        for k, v in {"Content-Type": "application/json", **(headers or {}), "Content-Length": str(len(body))}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def fail(self, h: http.server.BaseHTTPRequestHandler, fault: object) -> None:
        if fault == RESET:
            h.wfile.write(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"info": ')
            h.wfile.flush()
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            for f in (h.rfile, h.wfile, h.connection):  # the last reference: closed with a linger of 0, a reset
                f.close()
            return
        status, headers = fault if isinstance(fault, tuple) else (fault, {})
        self.send(h, int(status), b'{"message": "a fault"}', headers)

    def answer(self, h: http.server.BaseHTTPRequestHandler, path: str) -> None:
        if path.startswith("/old/"):
            h.send_response(302)
            h.send_header("Location", f"{self.prefix}/pypi/{path.removeprefix('/old/')}")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if path.startswith(f"{self.prefix}/files/"):
            name = path.rsplit("/", 1)[1]
            self.send_range(h, snapshot_files.file_body(name))
            return
        parts = path.removeprefix(f"{self.prefix}/pypi/").removesuffix("/json").split("/")
        if not path.startswith(f"{self.prefix}/pypi/") or not path.endswith("/json") or len(parts) > 2:
            self.send(h, 404, b"{}")
            return
        if len(parts) == 1 and (SNAPSHOT / f"{parts[0]}.json").is_file():
            doc = json.loads((SNAPSHOT / f"{parts[0]}.json").read_text())
            for files in doc["releases"].values():
                for f in files:
                    f["url"] = f"../../files/{f['filename']}"  # relative to the document's URL
            self.send(h, 200, json.dumps(doc).encode())
        elif len(parts) == 2 and (SNAPSHOT / parts[0] / f"{parts[1]}.json").is_file():
            self.send(h, 200, (SNAPSHOT / parts[0] / f"{parts[1]}.json").read_bytes())
        else:
            self.send(h, 404, b'{"message": "Not Found"}')

    def send_range(self, h: http.server.BaseHTTPRequestHandler, data: bytes) -> None:
        spec = (h.headers.get("Range") or "").removeprefix("bytes=")
        if not spec:
            self.send(h, 200, data)
            return
        first, _, last = spec.partition("-")
        start = max(0, len(data) - int(last)) if not first else int(first)
        end = len(data) - 1 if not first or not last else min(int(last), len(data) - 1)
        self.send(h, 206, data[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})


@pytest.fixture
def pypi():
    """`pypi(prefix="")`: a running FakePyPI, closed after the test."""
    made: list[FakePyPI] = []

    def make(prefix: str = "") -> FakePyPI:
        made.append(FakePyPI(prefix).__enter__())
        return made[-1]

    yield make
    for srv in made:
        srv.__exit__()


@pytest.fixture
def sleeps(monkeypatch):
    """The waits the retries ask for (none is waited), the jitter fixed at its top (the full back-off)."""
    asked: list[float] = []
    monkeypatch.setattr(refresh, "Retrier", functools.partial(retry.Retrier, sleep=asked.append, rand=lambda: 1.0))
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return asked


def _refresh(run_cli, index: str, *extra: str):
    return run_cli("matrix", "refresh", "--index-url", index, *extra)


# --- the whole run against a flaky index -----------------------------------------------------------------
def test_a_refresh_against_the_index_completes_and_says_so_on_stderr(pypi, sleeps, run_cli):
    srv = pypi()
    r = _refresh(run_cli, srv.url)
    assert r.code == 0, r.err + r.out[-2000:]
    assert r.out.endswith("matrix up to date: 32 derived rules, 0 row(s) with other wheel facts\n")
    assert sleeps == []
    assert f"refresh: reading {srv.url} (8 request(s) at a time)" in r.err
    assert "refresh: 8/8 projects (0 retried)" in r.err
    assert "transformers metadata documents (0 retried)" in r.err
    assert f"documents read from {srv.url}, 0 retried" in r.err.splitlines()[-1]
    quiet = run_cli("--quiet", "matrix", "refresh", "--index-url", srv.url)
    assert quiet.code == 0 and "refresh:" not in quiet.err


def test_503_twice_then_the_document_is_retried_and_the_run_completes(pypi, sleeps, run_cli):
    srv = pypi()
    srv.faults["/pypi/numpy/json"] = [503, 503]
    r = _refresh(run_cli, srv.url)
    assert r.code == 0, r.err
    assert srv.count("/pypi/numpy/json") == 3
    assert sleeps == [0.5, 1.0]  # the back-off: base, doubled
    assert f"refresh: HTTP 503 Service Unavailable ({srv.url}/numpy/json); try 2 of 5 in 0.5 s" in r.err
    assert "try 3 of 5 in 1.0 s" in r.err
    assert r.err.splitlines()[-1].endswith(", 2 retried")


def test_429_with_retry_after_is_waited_for_as_asked(pypi, sleeps, run_cli):
    srv = pypi()
    srv.faults["/pypi/accelerate/1.2.0/json"] = [(429, {"Retry-After": "1"})]
    srv.faults["/pypi/transformers/json"] = [(503, {"Retry-After": "3"})]
    r = _refresh(run_cli, srv.url)
    assert r.code == 0, r.err
    assert sorted(sleeps) == [1.0, 3.0]  # the answers' own waits, not the back-off (0.5 s)
    assert srv.count("/pypi/accelerate/1.2.0/json") == 2 and srv.count("/pypi/transformers/json") == 2


def test_a_retry_after_past_the_cap_is_refused_at_once(pypi, sleeps, run_cli):
    srv = pypi()
    srv.faults["/pypi/numpy/json"] = [(429, {"Retry-After": "3600"})]
    r = _refresh(run_cli, srv.url)
    assert r.code == 2 and "Traceback" not in r.err
    assert "HTTP 429 asks to come back in 3600 s (Retry-After), more than the 30 s a refresh waits" in r.err
    assert sleeps == [] and srv.count("/pypi/numpy/json") == 1


def test_a_connection_reset_mid_answer_is_retried(pypi, sleeps, run_cli):
    srv = pypi()
    srv.faults["/pypi/torch-npu/json"] = [RESET]
    srv.faults["/pypi/numpy/2.0.0/json"] = [RESET]
    r = _refresh(run_cli, srv.url)
    assert r.code == 0, r.err
    assert sleeps == [0.5, 0.5]  # one retry of each
    assert srv.count("/pypi/torch-npu/json") == 2 and srv.count("/pypi/numpy/2.0.0/json") == 2


def test_a_name_that_does_not_resolve_is_tried_to_the_bound_then_exit_2(sleeps, run_cli):
    r = _refresh(run_cli, "http://pypi.invalid/pypi", "--jobs", "1")  # one request at a time: the first one fails the run
    assert r.code == 2 and "Traceback" not in r.err
    assert "pypi.invalid: 5 tries of http://pypi.invalid/pypi/transformers/json failed; the last: gaierror" in r.err
    assert sleeps == [0.5, 1.0, 2.0, 4.0]
    assert "pypi.invalid did not answer in 5 tries" in r.err  # the hint


@pytest.mark.parametrize(
    ("status", "path"), [(404, "/pypi/numpy/json"), (400, "/pypi/numpy/json"), (400, "/pypi/numpy/2.0.0/json")]
)
def test_a_permanent_status_is_not_retried(pypi, sleeps, run_cli, status, path):
    srv = pypi()
    srv.faults[path] = [status, status]
    r = _refresh(run_cli, srv.url)
    assert r.code == 2 and f"{srv.url}{path.removeprefix('/pypi')}: HTTP {status}" in r.err
    assert srv.count(path) == 1 and sleeps == []


def test_a_5xx_that_stays_fails_the_run_after_its_tries(pypi, sleeps, run_cli):
    """A release's metadata answered 500 every time is a failure of the index, not a release without metadata (the
    fallback to the wheel is for a 404)."""
    srv = pypi()
    srv.faults["/pypi/numpy/2.0.0/json"] = [500] * 5
    r = _refresh(run_cli, srv.url)
    assert r.code == 2 and f"127.0.0.1: 5 tries of {srv.url}/numpy/2.0.0/json failed; the last: HTTP 500" in r.err
    assert srv.count("/pypi/numpy/2.0.0/json") == 5 and not any(p.startswith("/files/") for p in srv.requests)


# --- --jobs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jobs", ["1", "32"])
def test_jobs_at_both_ends_are_accepted_and_bound_the_requests_at_a_time(pypi, sleeps, run_cli, monkeypatch, jobs):
    srv = pypi()
    lock, now, most = threading.Lock(), [0], [0]
    fetch = refresh.Source._fetch

    def counted(self, *args):  # the requests the client has open at once
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return fetch(self, *args)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(refresh.Source, "_fetch", counted)
    r = _refresh(run_cli, srv.url, "--jobs", jobs)
    assert r.code == 0, r.err
    assert f"({jobs} request(s) at a time)" in r.err
    assert 1 <= most[0] <= int(jobs)
    if jobs == "1":
        assert most[0] == 1


@pytest.mark.parametrize("jobs", ["0", "33", "-1"])
def test_jobs_out_of_range_is_refused_before_any_request(pypi, run_cli, jobs):
    srv = pypi()
    r = _refresh(run_cli, srv.url, "--jobs", jobs)
    assert r.code == 2 and "Invalid value for '--jobs'" in r.err
    assert srv.requests == []


def test_a_source_refuses_jobs_out_of_range():
    for jobs in (0, refresh.MAX_JOBS + 1):
        with pytest.raises(Exception, match="requests at a time are 1 to 32"):
            refresh.Source(jobs=jobs)


# --- --index-url: relative URLs, redirects, credentials ---------------------------------------------------
def test_relative_file_urls_resolve_against_the_url_that_answered_after_a_redirect(pypi, sleeps):
    srv = pypi(prefix="/v2")
    src = refresh.open_source(index=f"{srv.origin}/old")
    doc = src.project("numpy", "1.24.0")
    assert srv.requests[:2] == ["/old/numpy/json", "/v2/pypi/numpy/json"]
    files = doc["releases"]["1.24.0"]
    assert files and all(f["url"] == f"{srv.origin}/v2/files/{f['filename']}" for f in files)
    # the release's metadata document is gone (404, not retried): its wheel's METADATA is read from that URL
    srv.faults["/v2/pypi/numpy/1.24.0/json"] = [404]
    meta = src.metadata("numpy", "1.24.0", files)
    assert meta["info"]["requires_python"] == ">=3.99" and meta["info"]["requires_dist"] == ["torch>=9.0"]
    assert any(p.startswith("/v2/files/numpy-1.24.0-") for p in srv.requests) and sleeps == []


@pytest.mark.parametrize(
    "url",
    [
        "ftp://user:secret@127.0.0.1/pypi",
        "https://user:secret@/pypi",
        "http://user:secret@127.0.0.1:99999/pypi",
        "https://user:secret@127.0.0.1/pypi?x=1",
        "file:///etc/passwd",
    ],
)
def test_an_index_url_that_is_not_an_http_api_base_is_refused_without_its_credentials(run_cli, url):
    r = _refresh(run_cli, url)
    assert r.code == 2 and "--index-url" in r.err and "secret" not in r.err + r.out
    assert "https://pypi.org/pypi" in r.err  # what to give instead


def test_the_credentials_of_an_index_url_are_never_shown(pypi, sleeps, run_cli):
    srv = pypi()
    secret_url = srv.url.replace("http://", "http://user:s3cret@")
    srv.faults["/pypi/numpy/json"] = [503, 404]
    r = _refresh(run_cli, secret_url)
    assert r.code == 2 and "s3cret" not in r.err + r.out
    assert "http://***@127.0.0.1" in r.err  # the retry line and the failure, the URL without them
    assert "HTTP 404" in r.err and sleeps == [0.5]


def test_index_url_and_snapshot_are_one_source_or_the_other(run_cli, tmp_path):
    r = _refresh(run_cli, "https://pypi.org/pypi", "--snapshot", str(tmp_path))
    assert r.code == 2 and "--index-url and --snapshot name two sources" in r.err


def test_new_reads_the_index_url_with_the_same_retries(pypi, sleeps, run_cli):
    srv = pypi()
    srv.faults["/pypi/torch/json"] = [502]
    r = run_cli("matrix", "refresh", "--new", "--index-url", srv.url, "--jobs", "2")
    assert r.code in (0, 1), r.err
    assert "release(s) on PyPI the matrix lacks" in r.out and sleeps == [0.5] and srv.count("/pypi/torch/json") == 2


def test_a_record_from_a_flaky_index_is_the_snapshot_the_tests_replay(pypi, sleeps, run_cli, tmp_path):
    """`--record` from the index (a retry on the way) writes documents a `--snapshot` run reads to the same result."""
    srv = pypi()
    srv.faults["/pypi/vllm-ascend/json"] = [RESET]
    out = tmp_path / "snap"
    r = _refresh(run_cli, srv.url, "--record", str(out))
    assert r.code == 0, r.err
    for rel in ("numpy.json", "transformers/4.52.1.json", "vllm-ascend.json"):
        assert json.loads((out / rel).read_text()) == json.loads((SNAPSHOT / rel).read_text()), rel
    # the sdist of each release without wheels is read whole, its versioning table's row recorded (none: no row)
    for rel in ("vllm-ascend/0.30.0rc1.docs.json", "vllm-ascend/0.30.0rc2.docs.json"):
        assert (out / rel).read_text() == (SNAPSHOT / rel).read_text(), rel
    assert json.loads((out / "vllm-ascend/0.8.5rc1.docs.json").read_text()) == {
        "file": "vllm_ascend-0.8.5rc1.tar.gz",
        "row": None,
        "python": None,
    }
    assert srv.count("/files/vllm_ascend-0.30.0rc1.tar.gz") == 1 and not (out / "vllm-ascend/0.23.0.docs.json").exists()
    again = run_cli("matrix", "refresh", "--snapshot", str(out))
    assert again.code == 0 and again.out == r.out


# --- the run's deadline -------------------------------------------------------------------------------
def test_the_runs_deadline_stops_the_tries_and_bounds_each_request(pypi, sleeps):
    srv = pypi()
    srv.faults["/pypi/numpy/json"] = [503] * 5
    clock = [0.0]
    timeouts: list[float] = []

    def wait(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    retrier = retry.Retrier(retry.RetryPolicy(deadline=2.0), sleep=wait, clock=lambda: clock[0], rand=lambda: 1.0)
    src = refresh.open_source(index=srv.url, retry=retrier)
    fetch = src._fetch
    src._fetch = lambda url, headers, limit, left: timeouts.append(left) or fetch(url, headers, limit, left)  # type: ignore[method-assign]
    with pytest.raises(CannotRun) as info:
        src.project("numpy", "1.24.0")
    # tries at 0 s and 0.5 s, a wait of 1 s, a try at 1.5 s: the next wait (2 s) would end past the deadline
    assert sleeps == [0.5, 1.0] and srv.count("/pypi/numpy/json") == 3
    assert timeouts == [2.0, 1.5, 0.5]  # each request is given the time the run has left
    assert "the refresh's deadline of 2 s ends before" in info.value.message and "after 3 tries" in info.value.message
    assert "--deadline" in (info.value.hint or "")


def test_deadline_must_be_positive(run_cli):
    assert run_cli("matrix", "refresh", "--deadline", "0").code == 2
    with pytest.raises(Exception, match="above 0"):
        refresh.open_source(deadline=0.0)


def test_without_a_retrier_a_source_tries_once(pypi):
    srv = pypi()
    srv.faults["/pypi/numpy/json"] = [503]
    with pytest.raises(httpclient.HTTPStatus) as info:
        refresh.Source(index=srv.url).project("numpy", "1.24.0")
    assert info.value.status == 503 and info.value.transient and srv.count("/pypi/numpy/json") == 1


@pytest.mark.parametrize("jobs", [1, 2])
def test_after_a_failure_no_worker_starts_another_item(jobs):
    """The worker that fails marks the run failing before it can take the next item, so what runs after a failure
    never depends on how soon the main thread wakes up (CI once saw three names tried at --jobs 1)."""
    started: list[int] = []
    second_running, raising = threading.Event(), threading.Event()

    def fn(i: int) -> int:
        started.append(i)
        if i == 0:
            if jobs == 2:
                second_running.wait(5)  # item 1 runs alongside and finishes after the failure
            raising.set()
            raise CannotRun("item 0 failed")
        second_running.set()
        raising.wait(5)
        time.sleep(0.1)  # the failing worker has marked the run by now (microseconds after its raise)
        return i

    with pytest.raises(CannotRun, match="item 0 failed"):
        refresh.Source(jobs=jobs).map("items", fn, list(range(6)))
    assert sorted(started) == list(range(jobs))  # the failing one, and at --jobs 2 the one already running

"""The retries of `envkit matrix refresh` (envkit.jobs.matrix.retry) and its --index-url, without a network: the tries
are functions that fail as told, the waits are recorded (never waited) and the clocks are numbers."""

from __future__ import annotations

import email.utils
import math

import pytest

from envkit.errors import BadInput, CannotRun
from envkit.io.httpclient import HTTPFailure, HTTPStatus, TooLarge
from envkit.jobs.matrix import refresh
from envkit.jobs.matrix.retry import Retrier, RetryPolicy, StatusError, retry_after

URL = "https://pypi.example/pypi/numpy/json"


def _status(status: int, retry_after_value: str | None = None) -> StatusError:
    return StatusError(
        f"{URL}: HTTP {status}",
        url=URL,
        status=status,
        transient=status == 429 or status >= 500,
        retry_after=retry_after_value,
    )


def _flaky(*failures: BaseException):
    """A try that raises each of `failures` in turn, then returns "ok"; `calls` counts the tries."""
    left = list(failures)

    def attempt(_left: float | None) -> str:
        attempt.calls += 1  # type: ignore[attr-defined]
        if left:
            raise left.pop(0)
        return "ok"

    attempt.calls = 0  # type: ignore[attr-defined]
    return attempt


def _retrier(policy: RetryPolicy = RetryPolicy(), rand: float = 1.0, **kw) -> tuple[Retrier, list[float]]:  # noqa: B008
    waits: list[float] = []
    return Retrier(policy, sleep=waits.append, rand=lambda: rand, **kw), waits


def _reset() -> HTTPFailure:
    return HTTPFailure(f"{URL}: ConnectionResetError: [Errno 104] Connection reset by peer", url=URL, transient=True)


def test_transient_failures_are_retried_with_exponential_back_off():
    r, waits = _retrier()
    attempt = _flaky(_reset(), _status(503), _status(502))
    assert r.call(URL, attempt) == "ok"
    assert attempt.calls == 4 and waits == [0.5, 1.0, 2.0] and r.retried == 3


def test_the_jitter_takes_at_most_half_off_and_the_cap_bounds_every_wait():
    low, waits = _retrier(rand=0.0)
    low.call(URL, _flaky(_reset(), _reset()))
    assert waits == [0.25, 0.5]
    capped, waits = _retrier(RetryPolicy(tries=6, base=10.0, cap=30.0))
    capped.call(URL, _flaky(*[_reset()] * 5))
    assert waits == [10.0, 20.0, 30.0, 30.0, 30.0]


def test_the_tries_are_bounded_and_the_failure_names_the_host_and_the_tries():
    r, waits = _retrier()
    gai = HTTPFailure(f"{URL}: gaierror: [Errno -2] Name or service not known", url=URL, transient=True)
    attempt = _flaky(*[gai] * 9)
    with pytest.raises(HTTPFailure) as info:
        r.call(URL, attempt)
    assert attempt.calls == 5 and waits == [0.5, 1.0, 2.0, 4.0]
    assert (
        info.value.message == f"pypi.example: 5 tries of {URL} failed; the last: gaierror: [Errno -2] Name or service not known"
    )
    assert info.value.exit_code == 2 and "--index-url" in (info.value.hint or "")
    with pytest.raises(HTTPStatus) as status:  # a status that stays is still a status (its code kept)
        _retrier()[0].call(URL, _flaky(*[_status(503)] * 5))
    assert status.value.status == 503 and "5 tries" in status.value.message


@pytest.mark.parametrize(
    "failure",
    [
        _status(404),
        _status(400),
        _status(403),
        HTTPFailure("a redirect to file:", url=URL),
        TooLarge("too large", url=URL),
        BadInput("not JSON"),
    ],
)
def test_a_permanent_failure_is_raised_at_its_first_try(failure):
    r, waits = _retrier()
    attempt = _flaky(failure)
    with pytest.raises(type(failure)) as info:
        r.call(URL, attempt)
    assert info.value is failure and attempt.calls == 1 and waits == [] and r.retried == 0


def test_retry_after_in_seconds_or_an_http_date_is_waited_for():
    r, waits = _retrier(now=lambda: 1_000_000.0)
    date = email.utils.formatdate(1_000_007.0, usegmt=True)
    r.call(URL, _flaky(_status(429, "1"), _status(503, date), _status(429, "0")))
    assert waits == [1.0, 7.0, 0.0]


def test_retry_after_of_another_status_or_unreadable_is_the_back_off():
    r, waits = _retrier()
    r.call(URL, _flaky(_status(500, "9"), _status(429, "soon"), _status(503, "-3")))
    assert waits == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("value", ["31", "3600", "9" * 40, email.utils.formatdate(1_000_100.0, usegmt=True)])
def test_a_retry_after_past_the_cap_is_refused_without_waiting(value):
    r, waits = _retrier(now=lambda: 1_000_000.0)
    attempt = _flaky(_status(429, value))
    with pytest.raises(HTTPStatus) as info:
        r.call(URL, attempt)
    assert attempt.calls == 1 and waits == [] and not info.value.transient
    assert "(Retry-After), more than the 30 s a refresh waits between tries" in info.value.message
    at_cap, waits = _retrier(now=lambda: 1_000_000.0)
    at_cap.call(URL, _flaky(_status(429, "30")))
    assert waits == [30.0]


def test_retry_after_parsing():
    assert retry_after(None, 0.0) is None
    assert retry_after(" 12 ", 0.0) == 12.0
    assert retry_after("1" * 13, 0.0) == math.inf
    assert retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 2e9) == 0.0  # past: now
    assert retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111772.0) == 5.0
    assert retry_after("Sun, 06 Nov 1994 08:49:37 -0000", 784111772.0) == 5.0
    for bad in ("", "1.5", "-1", "tomorrow", "x" * 100, "١٢"):
        assert retry_after(bad, 0.0) is None, bad


def test_the_runs_deadline_bounds_each_try_and_stops_the_waits():
    clock = [100.0]
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    r = Retrier(RetryPolicy(deadline=3.0), sleep=wait, clock=lambda: clock[0], rand=lambda: 1.0)
    given: list[float | None] = []

    def attempt(left: float | None) -> str:
        given.append(left)
        raise _status(503)

    with pytest.raises(CannotRun) as info:
        r.call(URL, attempt)
    assert given == [3.0, 2.5, 1.5] and waits == [0.5, 1.0]  # the next wait, 2 s, would end past the deadline
    assert info.value.message.startswith(f"the refresh's deadline of 3 s ends before {URL} is read (after 3 tries")
    clock[0] += 10.0
    late = _flaky()
    with pytest.raises(CannotRun, match="before its first try"):
        r.call(URL, late)
    assert late.calls == 0
    assert Retrier(RetryPolicy()).left() is None


def test_a_stopped_retrier_gives_up_its_waits():
    r, waits = _retrier()
    attempt = _flaky(_reset(), _reset())
    r.stop()
    with pytest.raises(HTTPFailure):
        r.call(URL, attempt)
    assert attempt.calls == 1 and waits == []
    with pytest.raises(ValueError):
        Retrier(RetryPolicy(tries=0))


def test_each_retry_is_a_progress_line():
    lines: list[str] = []
    r, _ = _retrier(note=lines.append)
    r.call(URL, _flaky(_status(503)))
    assert lines == [f"refresh: HTTP 503 ({URL}); try 2 of 5 in 0.5 s"]


# --- --index-url -------------------------------------------------------------------------------------------
def test_the_index_url_defaults_to_pypis_json_api_and_takes_a_mirror():
    assert refresh.Source().index == "https://pypi.org/pypi"
    assert refresh.Source(index="https://mirror.example/pypi/").index == "https://mirror.example/pypi"
    assert refresh.Source(index="http://127.0.0.1:8080/json-api").index == "http://127.0.0.1:8080/json-api"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://u:secret@mirror.example/pypi",
        "mirror.example/pypi",
        "https://u:secret@/pypi",
        "https://u:secret@mirror.example:port/pypi",
        "https://u:secret@mirror.example/pypi?token=secret",
        "https://u:secret@mirror.example/pypi#x",
        "https://u:secret@mirror.example/py pi",
    ],
)
def test_an_index_url_that_is_no_http_api_base_is_refused_without_its_credentials(url):
    with pytest.raises(BadInput) as info:
        refresh.index_url(url)
    assert info.value.message.startswith("--index-url ") and "https://pypi.org/pypi" in (info.value.hint or "")
    assert "secret" not in info.value.message


def test_redact_hides_every_urls_credentials():
    text = "https://u:p@a.example/x: failed; http://tok@b.example:81/y and https://c.example/z@w"
    assert refresh.redact(text) == "https://***@a.example/x: failed; http://***@b.example:81/y and https://c.example/z@w"
    assert refresh.redact("http://u:p@ss@h/") == "http://***@h/"


def test_an_error_of_a_run_has_its_credentials_hidden(tmp_path):
    with pytest.raises(BadInput) as info:
        refresh.refresh(tmp_path, index="gopher://user:hunter2@mirror.example/pypi")
    assert "hunter2" not in info.value.message and "gopher://***@mirror.example/pypi" in info.value.message

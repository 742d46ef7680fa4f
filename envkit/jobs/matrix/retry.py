"""The retries of `envkit matrix refresh`: every request to the index gets a few tries, with back-off.

A failure `envkit.io.httpclient` marks transient (``HTTPFailure.transient``: a name that does not resolve, a connection
refused or reset, an answer cut short, a request past its deadline, HTTP 429 or 5xx) is tried again, at most
``RetryPolicy.tries`` times in all, after an exponential back-off with jitter (``base * 2**(n-1)`` capped at ``cap``
seconds, then a random half of it taken off). A 429 or 503 that says when to come back (``Retry-After``: seconds or an
HTTP-date) is waited for exactly that long, up to ``cap``; one that asks for more is refused at once (the failure, with
the time it asked for). Any other failure (404, 400, a document refused) is raised at its first try.

``RetryPolicy.deadline``: seconds for the whole run. Each request is given at most the time left, and a try that
would start after it (a back-off that ends past it) is not made: CannotRun naming the deadline and the last failure.

The waiting is `sleep` (default: an event's wait, cut short by `Retrier.stop` when the run is failing anyway), the time
is `clock` (monotonic) and `now` (wall time, for an HTTP-date), the jitter `rand`: all injectable, so a test asserts
the waits asked for and never waits.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from envkit.errors import CannotRun
from envkit.io.httpclient import HTTPFailure, HTTPStatus

TRIES = 5
BASE = 0.5  # seconds before the second try
CAP = 30.0  # seconds: the longest wait between two tries, Retry-After included
RETRY_AFTER_STATUSES = (429, 503)
_T = TypeVar("_T")
_SECONDS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long: `tries` in all per request, back-off from `base` seconds doubling up to `cap`, and an
    optional `deadline` (seconds) for the whole run."""

    tries: int = TRIES
    base: float = BASE
    cap: float = CAP
    deadline: float | None = None


class StatusError(HTTPStatus):
    """An HTTPStatus with the answer's ``Retry-After`` header (None: not sent)."""

    def __init__(self, message: str, *args: Any, retry_after: str | None = None, **kw: Any) -> None:
        super().__init__(message, *args, **kw)
        self.retry_after = retry_after


def status_error(url: str, status: int, reason: str, headers: Any, hint: str) -> StatusError:
    """The failure of an answer with a status that is not the one asked for (transient: 429 and 5xx)."""
    return StatusError(
        f"{url}: HTTP {status} {reason}".rstrip(),
        url=url,
        status=status,
        transient=status == 429 or status >= 500,
        hint=hint,
        retry_after=headers.get("Retry-After"),
    )


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` asks to wait: its seconds, or the time until its HTTP-date (0 when past); None when
    absent or not either form. A number of more than 12 digits is infinite (refused as over the cap)."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return float(text) if len(text) <= 12 else math.inf
    if len(text) > 64:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, as HTTP-dates are
        import datetime

        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - now)


def _reason(exc: HTTPFailure, url: str) -> str:
    """The failure's message without the URL it begins with."""
    for prefix in (f"{exc.url}: ", f"{url}: "):
        if exc.url and exc.message.startswith(prefix):
            return exc.message[len(prefix) :]
    return exc.message


class Retrier:
    """Runs each request with the policy's tries; counts the retries (thread-safe); `note` gets a line per retry."""

    def __init__(
        self,
        policy: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen
        *,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        note: Callable[[str], None] | None = None,
    ) -> None:
        if policy.tries < 1:
            raise ValueError("a retry policy needs at least one try")
        self.policy = policy
        self._stopped = threading.Event()
        self._sleep = sleep if sleep is not None else self._stopped.wait
        self._clock, self._now, self._rand = clock, now, rand
        self.note = note
        self._start = clock()
        self._lock = threading.Lock()
        self.retried = 0  # tries made again, all requests together

    def stop(self) -> None:
        """The run is failing: a request waiting for its next try gives up (its last failure is raised)."""
        self._stopped.set()

    def left(self) -> float | None:
        """Seconds left of the run's deadline (None: no deadline)."""
        if self.policy.deadline is None:
            return None
        return self.policy.deadline - (self._clock() - self._start)

    def delay(self, tries: int, exc: HTTPFailure, url: str) -> float:
        """Seconds to wait after `tries` failed tries, the last `exc`: its Retry-After (429, 503), else the back-off."""
        p = self.policy
        if isinstance(exc, StatusError) and exc.status in RETRY_AFTER_STATUSES:
            asked = retry_after(exc.retry_after, self._now())
            if asked is not None and asked > p.cap:
                shown = "more than a day" if asked > 86400 else f"{asked:.0f} s"
                raise HTTPStatus(
                    f"{exc.url or url}: HTTP {exc.status} asks to come back in {shown} (Retry-After), more than the "
                    f"{p.cap:g} s a refresh waits between tries; stopped",
                    url=exc.url or url,
                    status=exc.status,
                    hint="The index is limiting this client: run it again later, or use a mirror (--index-url URL).",
                )
            if asked is not None:
                return asked
        wait = min(p.cap, p.base * 2 ** (tries - 1))
        return wait * (0.5 + 0.5 * self._rand())

    def call(self, url: str, attempt: Callable[[float | None], _T]) -> _T:
        """`attempt(left)` (left: the run's seconds left, None without a deadline) until it returns, tried again
        after a transient HTTPFailure; what it raises otherwise, at once."""
        tries = self.policy.tries
        last: HTTPFailure | None = None
        for n in range(1, tries + 1):
            left = self.left()
            if left is not None and left <= 0:
                raise self._past_deadline(url, n - 1, last)
            try:
                return attempt(left)
            except HTTPFailure as exc:
                if not exc.transient or self._stopped.is_set():
                    raise
                last = exc
            if n == tries:
                break
            wait = self.delay(n, last, url)
            left = self.left()
            if left is not None and wait >= left:
                raise self._past_deadline(url, n, last)
            with self._lock:
                self.retried += 1
            if self.note is not None:
                self.note(f"refresh: {_reason(last, url)} ({url}); try {n + 1} of {tries} in {wait:.1f} s")
            self._sleep(wait)
            if self._stopped.is_set():
                raise last
        assert last is not None
        raise self._gave_up(url, tries, last)

    def _gave_up(self, url: str, tries: int, last: HTTPFailure) -> HTTPFailure:
        host = urlsplit(url).hostname or url
        message = f"{host}: {tries} tries of {url} failed; the last: {_reason(last, url)}"
        hint = (
            f"{host} did not answer in {tries} tries: run it again later, where {host} answers, with a mirror "
            "(--index-url URL), or offline (--snapshot DIR)."
        )
        if isinstance(last, HTTPStatus):
            return HTTPStatus(message, url=last.url, status=last.status, transient=True, hint=hint)
        return HTTPFailure(message, url=last.url, transient=True, hint=hint)

    def _past_deadline(self, url: str, tries: int, last: HTTPFailure | None) -> CannotRun:
        deadline = self.policy.deadline
        said = f"after {tries} tries; the last: {_reason(last, url)}" if last is not None else "before its first try"
        return CannotRun(
            f"the refresh's deadline of {deadline:g} s ends before {url} is read ({said})",
            hint="Give the run more time (--deadline SECONDS), or run it where the index answers promptly.",
        )

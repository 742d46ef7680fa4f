"""The HTTP client for every server envkit does not control: PyPI and its mirrors, an index a lock names, the
server `envkit smoke --serve` starts.

What a server can do to a client, and what this one does about it:

- **drip** (one byte a second, forever): every request has a deadline for the whole of it (connect, TLS,
  request, status line, headers, body, redirects included), enforced at each socket read and write: the read
  timeout is the time left, so a request ends at its deadline however the bytes come. A download instead
  earns time with its bytes (``Limits.min_rate``): it is cut when it has received less than ``min_rate`` bytes
  a second since its start, after a grace of ``Limits.deadline`` seconds, or when no byte came for
  ``Limits.idle`` seconds; a file of known size thus ends within ``deadline + size / min_rate`` seconds;
- **send too much**: every kind of body has a size cap (``Limits.max_bytes``); a ``Content-Length`` over it is
  refused before the body is read, a body without one (chunked, or until the connection closes) is stopped one
  byte past it. ``Accept-Encoding: identity``: an encoded body is refused, never inflated;
- **nest JSON** 100,000 levels deep, or send ``NaN``: ``get_json`` parses with ``jsonread.parse_json``;
- **redirect** in a loop, to ``http:`` from ``https:``, or to another scheme: at most ``Limits.max_redirects``
  hops, only to ``http(s):``, never from https to http; credentials of the URL are not sent to another host;
- **a bad certificate**: TLS is always verified (``REQUESTS_CA_BUNDLE`` or ``SSL_CERT_FILE`` when set, else
  certifi's bundle, else the system's).

Proxies: ``https_proxy``/``http_proxy``/``no_proxy`` as requests and urllib read them (CONNECT for https; a
loopback host never goes through one). Each failure is ``HTTPFailure`` (``CannotRun``, exit 2) naming the URL,
with what to do next; ``HTTPStatus`` carries the status. Host name resolution is the system's, outside the
deadline.
"""

from __future__ import annotations

import base64
import functools
import http.client
import os
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from envkit import __version__
from envkit.errors import BadInput, CannotRun
from envkit.io import bounded
from envkit.io.jsonread import MAX_DEPTH as MAX_JSON_DEPTH
from envkit.io.jsonread import parse_json

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

CONNECT_TIMEOUT = 15.0  # seconds to open the TCP connection (within the request's deadline)
MAX_REDIRECTS = 5
USER_AGENT = f"envkit/{__version__}"
_REDIRECTS = (301, 302, 303, 307, 308)
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    """The limits of one kind of request: what an error calls its body, the body's size cap, and its time.

    ``deadline``: seconds for the whole request. With ``min_rate`` (bytes/s) the deadline moves on by one
    second per ``min_rate`` bytes received (a grace of ``deadline`` seconds, then at least ``min_rate`` on
    average). ``idle``: seconds without a byte that end it (None: only the deadline)."""

    what: str
    max_bytes: int
    deadline: float
    idle: float | None = None
    min_rate: float | None = None
    max_redirects: int = MAX_REDIRECTS

    def but(self, **changes: Any) -> Limits:
        """These limits with some changed (``JSON_DOCUMENT.but(deadline=5)``)."""
        return replace(self, **changes)


JSON_DOCUMENT = Limits("a JSON document", 64 << 20, deadline=120.0)  # PyPI's /pypi/NAME/json: torch's is a few MB
PART = Limits("a byte range", 16 << 20, deadline=120.0)  # a range request: the cap is the range's length
SERVER_ANSWER = Limits("an answer", 16 << 20, deadline=120.0)  # the smoke server's JSON answers and streams
DOWNLOAD = Limits("a file", 64 << 30, deadline=60.0, idle=60.0, min_rate=16 << 10)  # the cap: a file of unknown size


class HTTPFailure(CannotRun):
    """A request failed: the server cannot be reached, it broke the connection, it missed the deadline, or
    its answer is refused (too large, encoded, redirected where it may not go). Exit 2. `transient`: another try
    may work (a broken connection, a deadline, HTTP 429 or 5xx)."""

    def __init__(self, message: str, *args: Any, url: str = "", transient: bool = False, **kw: Any) -> None:
        super().__init__(redacted(message), *args, **kw)
        self.url = url  # as requested (a caller retries it); the message never shows its credentials
        self.transient = transient


_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")  # up to the authority's last `@`: `u:p@ss@host` hides `p@ss` too


def redacted(text: str) -> str:
    """`text` with the `user:password@` of every URL in it written as `***@` (an index URL's credentials go to its
    server, never into a message, a log or a terminal)."""
    return _USERINFO.sub("***@", text)


class HTTPStatus(HTTPFailure):
    """The server answered with a status that is not success (after redirects)."""

    def __init__(self, message: str, *args: Any, status: int = 0, **kw: Any) -> None:
        super().__init__(message, *args, **kw)
        self.status = status


class TooLarge(HTTPFailure):
    """The body is over its cap: ``announced`` is the Content-Length when it said so (None: it went past)."""

    def __init__(self, message: str, *args: Any, limit: int = 0, announced: int | None = None, **kw: Any) -> None:
        super().__init__(message, *args, **kw)
        self.limit = limit
        self.announced = announced


DEFAULT_HINT = "Check the URL and the network (a proxy: https_proxy, no_proxy), then run the command again."


# --- time ------------------------------------------------------------------------------------------------
class _Expired(TimeoutError):
    pass


class _Idle(TimeoutError):
    pass


class _Budget:
    """The time a request has left: its deadline (moved on by the bytes received, with a min_rate)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.start = time.monotonic()
        self.received = 0
        self.idle_bound = False  # whether the last timeout given was the idle one

    def deadline(self) -> float:
        extra = self.received / self.limits.min_rate if self.limits.min_rate else 0.0
        return self.start + self.limits.deadline + extra

    def timeout(self) -> float:
        """Seconds the next socket operation may take; _Expired when none are left."""
        left = self.deadline() - time.monotonic()
        if left <= 0:
            raise _Expired()
        idle = self.limits.idle
        self.idle_bound = idle is not None and idle < left
        return idle if idle is not None and idle < left else left

    def timed_out(self) -> TimeoutError:
        return _Idle() if self.idle_bound else _Expired()


_R = TypeVar("_R")


class _Bounded:
    """What both socket classes share: every read and write first takes the time its request's budget has left,
    and a read counts its bytes (a minimum rate moves the deadline on)."""

    budget: _Budget | None = None

    def _bounded(self, call: Callable[..., _R], *args: Any, received: Callable[[_R], int] | None = None) -> _R:
        """`call(*args)` within the budget; `received` counts the bytes a read returned."""
        if self.budget is not None:
            self.settimeout(self.budget.timeout())  # type: ignore[attr-defined]  # the socket class's own
        try:
            out = call(*args)
        except TimeoutError:
            raise (self.budget.timed_out() if self.budget is not None else _Expired()) from None
        if self.budget is not None and received is not None:
            self.budget.received += received(out)
        return out


class _Socket(_Bounded, socket.socket):
    """A TCP socket whose every read and write is bounded by its request's budget."""

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0, flags: int = 0) -> int:
        return self._bounded(super().recv_into, buffer, nbytes, flags, received=int)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        return self._bounded(super().recv, bufsize, flags, received=len)

    def sendall(self, data: ReadableBuffer, flags: int = 0) -> None:
        self._bounded(super().sendall, data, flags)


class _TLSSocket(_Bounded, ssl.SSLSocket):
    """The TLS socket of a request: every read and write bounded by its budget (set after the handshake,
    which the plain socket's timeout bounds as a whole)."""

    def recv_into(self, buffer: WriteableBuffer, nbytes: int | None = None, flags: int = 0) -> int:
        return self._bounded(super().recv_into, buffer, nbytes, flags, received=int)

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        return self._bounded(super().recv, buflen, flags, received=len)

    def send(self, data: ReadableBuffer, flags: int = 0) -> int:
        return self._bounded(super().send, data, flags)

    def sendall(self, data: ReadableBuffer, flags: int = 0) -> None:
        self._bounded(super().sendall, data, flags)


def tls_context() -> ssl.SSLContext:
    """TLS, always verified: an explicit CA bundle from the environment, else certifi's, else the system's."""
    cafile = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE") or None
    if cafile is None:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with requests
            cafile = None
    return _tls_context(cafile)


@functools.lru_cache(maxsize=8)
def _tls_context(cafile: str | None) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise CannotRun(
            f"the CA bundle {cafile} cannot be read: {exc}",
            hint="Point REQUESTS_CA_BUNDLE or SSL_CERT_FILE at a PEM file of CA certificates, or unset them.",
        ) from None
    ctx.sslsocket_class = _TLSSocket
    return ctx


class _Connection(http.client.HTTPConnection):
    """One connection for one request, every step within the budget; TLS when `tls` is given."""

    def __init__(self, host: str, port: int, budget: _Budget, tls: ssl.SSLContext | None, server_name: str) -> None:
        super().__init__(host, port, timeout=CONNECT_TIMEOUT)
        self.budget, self.tls, self.server_name = budget, tls, server_name

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), min(self.budget.timeout(), CONNECT_TIMEOUT))
        sock = _Socket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        sock.budget = self.budget
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        if self._tunnel_host:  # type: ignore[attr-defined]  # CONNECT through a proxy
            self._tunnel()  # type: ignore[attr-defined]
        if self.tls is not None:
            sock.settimeout(self.budget.timeout())  # the handshake, as a whole
            tls = self.tls.wrap_socket(sock, server_hostname=self.server_name)
            assert isinstance(tls, _TLSSocket)
            tls.budget = self.budget
            self.sock = tls


# --- requests --------------------------------------------------------------------------------------------
def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment names for this scheme and host (None: direct)."""
    from urllib.request import getproxies_environment, proxy_bypass_environment  # type: ignore[attr-defined]

    if host.strip("[]") in _LOOPBACK:
        return None
    proxies = getproxies_environment()
    proxy = proxies.get(scheme)
    if not proxy or proxy_bypass_environment(host, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _basic(userinfo: str) -> str:
    user, _, password = userinfo.partition(":")
    return "Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")


def _split(url: str) -> tuple[str, str, int, str, str | None]:
    """(scheme, host, port, path?query, userinfo) of an http(s) URL; BadInput for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadInput(f"{url} is not a valid URL: {exc}", hint="Give an http:// or https:// URL.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{url} is not an http:// or https:// URL", hint="Give an http:// or https:// URL.")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), target, userinfo


def _connect(url: str, budget: _Budget, auth: str | None) -> tuple[_Connection, str, dict[str, str]]:
    """A connection for `url` (through a proxy where the environment says), the request target and the
    headers the route needs (Authorization: the URL's credentials, else `auth`; Proxy-Authorization)."""
    scheme, host, port, target, userinfo = _split(url)
    authorization = _basic(userinfo) if userinfo else auth
    extra = {"Authorization": authorization} if authorization else {}
    proxy = _proxy_for(scheme, host)
    if proxy is None:
        conn = _Connection(host, port, budget, tls_context() if scheme == "https" else None, host)
        return conn, target, extra
    pscheme, phost, pport, _, puser = _split(proxy)
    pauth = {"Proxy-Authorization": _basic(puser)} if puser else {}
    if scheme == "https":  # a tunnel: TLS to the host itself, through the proxy
        conn = _Connection(phost, pport, budget, tls_context(), host)
        conn.set_tunnel(host, port, headers=pauth)
        return conn, target, extra
    conn = _Connection(phost, pport, budget, tls_context() if pscheme == "https" else None, phost)
    bare = url if not userinfo else url.replace(f"{userinfo}@", "", 1)
    return conn, bare, {**extra, **pauth}


def _redirect(url: str, location: str | None, status: int, hops: int, limits: Limits, first: str, hint: str) -> str:
    """Where a redirect leads, refused when it may not go there."""
    if not location:
        raise HTTPFailure(f"{url}: HTTP {status} redirect without a Location", url=url, hint=hint)
    if hops >= limits.max_redirects:
        raise HTTPFailure(
            f"{first}: more than {limits.max_redirects} redirects (the last to {location[:200]})",
            url=first,
            hint="The server redirects in a loop or too far: give the final URL, or fix the server.",
        )
    target = urljoin(url, location.strip())
    scheme = urlsplit(target).scheme
    if scheme not in ("http", "https"):
        raise HTTPFailure(f"{url} redirects to {target[:200]}, not an http(s) URL", url=url, hint=hint)
    if url.startswith("https:") and scheme == "http":
        raise HTTPFailure(
            f"{url} redirects to {target[:200]}: from https to plain http, refused",
            url=url,
            hint="A redirect may not drop TLS: give an https URL that stays https, or the http URL itself.",
        )
    return target


class Response:
    """A response being read: ``status``, ``headers``, ``url`` (after redirects); ``read``/``readline``/``body``
    stop at the cap and the deadline (HTTPFailure)."""

    def __init__(self, url: str, conn: _Connection, resp: http.client.HTTPResponse, limits: Limits, hint: str) -> None:
        self.url, self.status, self.reason, self.headers = url, resp.status, resp.reason, resp.headers
        self._conn, self._resp, self._limits, self._hint = conn, resp, limits, hint
        self._read = 0
        self.length = _content_length(self)

    def _io(self, op: Any) -> bytes:
        try:
            data: bytes = op()
        except Exception as exc:  # noqa: BLE001 - every transport error becomes an HTTPFailure
            raise failure(self.url, exc, self._limits, self._hint) from None
        self._read += len(data)
        if self._read > self._limits.max_bytes:
            raise TooLarge(
                f"{self.url} sends more than {self._limits.max_bytes} bytes, the cap for {self._limits.what}; stopped there",
                url=self.url,
                limit=self._limits.max_bytes,
                hint="This is not the document envkit expects: check the URL.",
            )
        return data

    def read(self, n: int) -> bytes:
        """Up to `n` bytes (b"" at the end); one byte past the cap is TooLarge."""
        left = self._limits.max_bytes + 1 - self._read
        return self._io(lambda: self._resp.read(max(0, min(n, left))))

    def readline(self, limit: int) -> bytes:
        """One line of at most `limit` bytes (the caller checks for the newline)."""
        left = self._limits.max_bytes + 1 - self._read
        return self._io(lambda: self._resp.readline(max(0, min(limit, left))))

    def body(self) -> bytes:
        """The whole body, at most the cap."""
        chunks = []
        while chunk := self.read(_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._resp.close()
        self._conn.close()


def _content_length(resp: Response) -> int | None:
    values = resp.headers.get_all("Content-Length") or []
    if not values:
        return None
    if len(set(values)) != 1 or not bounded.is_digits(values[0].strip(), 20):
        raise HTTPFailure(f"{resp.url} sends a malformed Content-Length {values!r}"[:300], url=resp.url, hint=resp._hint)
    return int(values[0])


def failure(url: str, exc: BaseException, limits: Limits, hint: str = DEFAULT_HINT) -> HTTPFailure:
    """The HTTPFailure of a transport error (a deadline, a broken connection, a bad certificate)."""
    if isinstance(exc, HTTPFailure):
        return exc
    if isinstance(exc, _Idle):
        return HTTPFailure(f"{url}: no data for {limits.idle:g} s", url=url, transient=True, hint=hint)
    if isinstance(exc, TimeoutError):
        if limits.min_rate:
            rate = f"{limits.min_rate / 1024:g} KiB/s"
            message = f"{url}: slower than {rate} on average after {limits.deadline:g} s (cut)"
        else:
            message = f"{url}: no complete answer within {limits.deadline:g} s (the deadline for the whole request)"
        return HTTPFailure(message, url=url, transient=True, hint=hint)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return HTTPFailure(
            f"{url}: the TLS certificate is not trusted: {exc.verify_message or exc}",
            url=url,
            hint="Set SSL_CERT_FILE (or REQUESTS_CA_BUNDLE) to the CA bundle that signs the server's certificate.",
        )
    if isinstance(exc, (http.client.InvalidURL, UnicodeError)):
        return HTTPFailure(f"{url} cannot be requested: {exc}", url=url, hint="Check the URL.")
    return HTTPFailure(f"{url}: {type(exc).__name__}: {exc}"[:500], url=url, transient=True, hint=hint)


@contextmanager
def open_url(
    url: str,
    limits: Limits,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    hint: str = DEFAULT_HINT,
    redirect_check: Callable[[str], str | None] | None = None,
) -> Iterator[Response]:
    """The response to one request, redirects followed, with its headers read; any status (the caller judges
    it). A 2xx answer that announces more than ``limits.max_bytes`` is TooLarge before its body is read.
    ``redirect_check(url)``: why a redirect may not go to ``url`` (None: it may), for a caller whose sources are
    restricted (a lock's closure: https, or under a mirror it records); a refusal is an HTTPFailure."""
    budget = _Budget(limits)
    base = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
    first, current = url, url
    origin, userinfo = _split(url)[:3], _split(url)[4]
    for hops in range(limits.max_redirects + 1):
        # the first URL's credentials go to a redirect to the same origin only: scheme, host and port (another
        # port is another server), as requests' should_strip_auth; an http->https upgrade on the default ports
        # keeps them
        here = _split(current)[:3]
        same_origin = here == origin or (origin == ("http", here[1], 80) and here == ("https", origin[1], 443))
        conn, target, route = _connect(current, budget, _basic(userinfo) if userinfo and same_origin else None)
        try:
            conn.request(method, target, body=body, headers={**base, **route})
            raw = conn.getresponse()
        except Exception as exc:  # noqa: BLE001 - every transport error becomes an HTTPFailure
            conn.close()
            raise failure(current, exc, limits, hint) from None
        if raw.status in _REDIRECTS:
            location = raw.getheader("Location")
            conn.close()
            target = _redirect(current, location, raw.status, hops, limits, first, hint)
            refusal = redirect_check(target) if redirect_check is not None else None
            if refusal is not None:
                raise HTTPFailure(
                    f"{current} redirects to {target[:200]}, which {refusal}; refused",
                    url=current,
                    hint="Give that host as a source too (e.g. --find-links or --extra-index-url), or use an index "
                    "whose files stay where it was given.",
                )
            current = target
            if raw.status == 303 or (raw.status in (301, 302) and method == "POST"):
                method, body = "GET", None
            continue
        try:
            resp = Response(current, conn, raw, limits, hint)
            encoding = (resp.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding != "identity":
                raise HTTPFailure(
                    f"{current} sends a {encoding}-encoded body, which was not asked for; refused",
                    url=current,
                    hint="Use a server or mirror that serves files as they are.",
                )
            if 200 <= resp.status < 300 and resp.length is not None and resp.length > limits.max_bytes:
                raise TooLarge(
                    f"{current} announces {resp.length} bytes, more than the {limits.max_bytes} allowed for "
                    f"{limits.what}; nothing was read",
                    url=current,
                    limit=limits.max_bytes,
                    announced=resp.length,
                    hint="This is not the document envkit expects: check the URL.",
                )
        except HTTPFailure:
            conn.close()
            raise
        try:
            yield resp
        finally:
            resp.close()
        return
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _status(resp: Response, hint: str) -> HTTPStatus:
    transient = resp.status == 429 or resp.status >= 500
    return HTTPStatus(
        f"{resp.url}: HTTP {resp.status} {resp.reason}".rstrip(),
        url=resp.url,
        status=resp.status,
        transient=transient,
        hint=hint,
    )


def get(
    url: str,
    limits: Limits,
    *,
    headers: dict[str, str] | None = None,
    hint: str = DEFAULT_HINT,
    ok: tuple[int, ...] = (200,),
) -> bytes:
    """The body of a GET answered with a status in `ok`; HTTPStatus for another status."""
    with open_url(url, limits, headers=headers, hint=hint) as resp:
        if resp.status not in ok:
            raise _status(resp, hint)
        return resp.body()


def get_json(
    url: str,
    limits: Limits = JSON_DOCUMENT,
    *,
    headers: dict[str, str] | None = None,
    hint: str = DEFAULT_HINT,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """A JSON document (``jsonread.parse_json``: a depth cap, no NaN/Infinity; BadInput otherwise)."""
    raw = get(url, limits, headers={"Accept": "application/json", **(headers or {})}, hint=hint)
    return parse_json(raw, url, max_depth=max_depth)


def raise_for_status(resp: Response, hint: str = DEFAULT_HINT) -> None:
    """HTTPStatus unless the response is a success (2xx)."""
    if not 200 <= resp.status < 300:
        raise _status(resp, hint)

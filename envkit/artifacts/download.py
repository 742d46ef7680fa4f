"""Content-addressed download cache: parallel, resumable, atomic, sha256-verified, TLS verified.

Layout: `$ENVKIT_CACHE_DIR` (default `~/.cache/envkit`) `/wheels/sha256/<hash>`; a download in
progress is `<hash>.part` (resumed with an HTTP Range request), and a file only takes its final
name after its sha256 matched, by an atomic rename. So a build killed at any point leaves either
nothing, a resumable `.part`, or a complete verified entry; never a corrupt entry.

`<hash>.ok` records the size, mtime and inode the entry had when it was last hashed (like git's
index): a warm rebuild trusts an unchanged entry without re-reading it; any change to the file
(a write, a replacement) makes it hashed again, and a mismatch deletes it and fetches it again.

Time: a download is streamed to disk and hashed as it comes (`envkit.io.httpclient`, `httpclient.DOWNLOAD`): it
has a grace of `grace` seconds (60) and must then have averaged at least `min_rate` bytes a second (16 KiB/s)
since it started, and is cut after `timeout` seconds (60) without a byte. A file of known size therefore ends
within 60 s + size / 16 KiB/s; a server that drips is cut after about a minute, and the next attempt resumes
from the `.part`. Size: never more than the lock records (a `Content-Length` over it is refused before the
body; a body without one stops one byte past it), a file of unknown size at most `httpclient.DOWNLOAD.max_bytes`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import CannotRun, CheckFailed
from envkit.io import httpclient
from envkit.io.outputs import sha256_file as _sha256_file

CHUNK = 1 << 20
_HINT = "Check the network or the index; rerun to resume where it stopped."


@dataclass(frozen=True)
class Fetch:
    url: str
    sha256: str
    size: int | None
    name: str


def cache_root() -> Path:
    base = os.environ.get("ENVKIT_CACHE_DIR")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "envkit"
    return root


def sha256_file(path: Path, chunk: int = CHUNK) -> str:
    return _sha256_file(path, chunk)


def _stamp_of(st: os.stat_result) -> str:
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {st.st_dev}"


class HashStamps:
    """Remember the sha256 of files by (size, mtime, inode, device) so unchanged files are not re-read."""

    def __init__(self, root: Path) -> None:
        self.root = root / "stamps"

    def _key(self, path: Path) -> Path:
        return self.root / hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()

    def sha256(self, path: Path) -> str:
        st = os.stat(path)
        key = self._key(path)
        try:
            stamp, digest = key.read_text().split("\n")[:2]
            if stamp == _stamp_of(st):
                return digest
        except (OSError, ValueError):
            pass
        digest = sha256_file(path)
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            tmp = key.with_name(f".{key.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(f"{_stamp_of(st)}\n{digest}\n")
            os.replace(tmp, key)
        except OSError:
            pass
        return digest


class WheelCache:
    def __init__(self, root: Path | None = None) -> None:
        self.base = root or cache_root()
        self.root = self.base / "wheels" / "sha256"

    def path(self, sha256: str) -> Path:
        return self.root / sha256

    def valid(self, sha256: str, size: int | None = None) -> bool:
        """True for a complete, verified entry. A changed entry is re-hashed; a corrupt one is deleted."""
        p = self.path(sha256)
        try:
            st = p.stat()
        except FileNotFoundError:
            return False
        if size is not None and st.st_size != size:
            self._drop(sha256)
            return False
        ok = p.with_name(sha256 + ".ok")
        try:
            if ok.read_text() == _stamp_of(st):
                return True
        except OSError:
            pass
        if sha256_file(p) != sha256:
            self._drop(sha256)
            return False
        self._stamp(sha256)
        return True

    def _stamp(self, sha256: str) -> None:
        p = self.path(sha256)
        ok = p.with_name(sha256 + ".ok")
        tmp = p.with_name(f".{sha256}.ok.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(_stamp_of(p.stat()))
        os.replace(tmp, ok)

    def _drop(self, sha256: str) -> None:
        for suffix in ("", ".ok"):
            try:
                self.path(sha256).with_name(sha256 + suffix).unlink()
            except FileNotFoundError:
                pass


class _Retry(Exception):
    pass


class Downloader:
    """Fetch files into the cache. `jobs` threads; `retries` attempts each with exponential back-off. Each
    attempt: no byte for `timeout` seconds cuts it, and so does an average under `min_rate` bytes/s once its
    `grace` seconds are over (module docstring)."""

    def __init__(
        self,
        cache: WheelCache,
        jobs: int = 8,
        retries: int = 5,
        backoff: float = 0.5,
        timeout: float = 60.0,
        *,
        grace: float = httpclient.DOWNLOAD.deadline,
        min_rate: float | None = httpclient.DOWNLOAD.min_rate,
    ) -> None:
        self.cache = cache
        self.jobs = jobs
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self.limits = httpclient.DOWNLOAD.but(deadline=grace, idle=timeout, min_rate=min_rate)

    def fetch_all(self, items: Iterable[Fetch], on_bytes: Callable[[int], None] | None = None) -> dict[str, str]:
        """Every item into the cache; returns {sha256: 'cached'|'fetched'}. Raises on the first hard failure."""
        uniq: dict[str, Fetch] = {}
        for it in items:
            uniq.setdefault(it.sha256, it)
        self.cache.root.mkdir(parents=True, exist_ok=True)
        todo = []
        result: dict[str, str] = {}
        for sha, it in uniq.items():
            if self.cache.valid(sha, it.size):
                result[sha] = "cached"
                if on_bytes and it.size:
                    on_bytes(it.size)
            else:
                todo.append(it)
        if not todo:
            return result
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            futs = {pool.submit(self._fetch_one, it, on_bytes): it for it in todo}
            for fut in as_completed(futs):
                try:
                    fut.result()
                    result[futs[fut].sha256] = "fetched"
                except BaseException as exc:  # noqa: BLE001 - collected, first one raised
                    errors.append(exc)
        if errors:
            raise errors[0]
        return result

    def _fetch_one(self, it: Fetch, on_bytes: Callable[[int], None] | None) -> Path:
        import fcntl

        final = self.cache.path(it.sha256)
        part = final.with_name(it.sha256 + ".part")
        lock_path = final.with_name(it.sha256 + ".lock")
        with open(lock_path, "a") as lockf:
            fcntl.flock(lockf, fcntl.LOCK_EX)  # one writer per entry, across processes too
            if self.cache.valid(it.sha256, it.size):
                return final
            last: BaseException | None = None
            for attempt in range(self.retries):
                try:
                    self._attempt(it, part, on_bytes)
                    os.chmod(part, 0o444)
                    os.replace(part, final)
                    self.cache._stamp(it.sha256)
                    return final
                except _Retry as exc:
                    last = exc.__cause__ or exc
                    time.sleep(self.backoff * (2**attempt))
            raise CannotRun(
                f"could not download {it.name} after {self.retries} attempts: {last}",
                hint=_HINT,
            )

    def _attempt(self, it: Fetch, part: Path, on_bytes: Callable[[int], None] | None) -> None:
        h = hashlib.sha256()
        have = part.stat().st_size if part.exists() else 0
        if it.size is not None and have > it.size:
            part.unlink()
            have = 0
        if have:  # resume: hash what is there, then append
            with open(part, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    h.update(chunk)
            if on_bytes:
                on_bytes(have)
        if it.url.startswith("file://"):
            with _open_local(it) as fin, open(part, "r+b" if have else "wb") as fout:
                if have:
                    fin.seek(have)
                fout.seek(have)
                _copy_capped(it, fin.read, fout, h, have, on_bytes, part)
        elif it.size is None or have < it.size:
            headers = {"User-Agent": "envkit-bundle", **({"Range": f"bytes={have}-"} if have else {})}
            # the cap: one byte past the whole file (a 200 to a resumed request sends all of it), so that
            # _copy_capped, which reads one byte past what is left, says what is wrong; a 206 is checked below
            limits = self.limits.but(max_bytes=it.size + 1) if it.size is not None else self.limits
            try:
                with httpclient.open_url(it.url, limits, headers=headers, hint=_HINT) as r:
                    if r.status == 416:
                        part.unlink(missing_ok=True)
                        raise _Retry("range not satisfiable")
                    if r.status in (429, 500, 502, 503, 504):
                        raise _Retry(f"HTTP {r.status}")
                    if r.status == 404:
                        raise CannotRun(f"{it.name}: HTTP 404 at {it.url}", hint="The lock names a file the index no longer has.")
                    httpclient.raise_for_status(r, _HINT)
                    if have and r.status == 200:  # the server ignored Range: start again
                        have = 0
                        h = hashlib.sha256()
                    if it.size is not None and r.length is not None and have + r.length > it.size:
                        raise _too_big(it, have + r.length)
                    with open(part, "ab" if have else "wb") as fout:
                        _copy_capped(it, r.read, fout, h, have, on_bytes, part)
                        fout.flush()
                        os.fsync(fout.fileno())
            except httpclient.TooLarge as exc:
                if exc.announced is None or it.size is None:
                    raise
                raise _too_big(it, exc.announced) from None
            except httpclient.HTTPFailure as exc:
                if not exc.transient:
                    raise
                raise _Retry(exc.message) from exc
        digest = h.hexdigest()
        if digest != it.sha256:
            part.unlink(missing_ok=True)
            mismatch = CheckFailed(f"{it.name}: sha256 {digest} does not match the lock's {it.sha256}")
            raise _Retry(str(mismatch)) from mismatch


def _too_big(it: Fetch, sends: int) -> CheckFailed:
    return CheckFailed(
        f"{it.name}: {it.url} sends {sends} bytes, more than the {it.size} the lock records; nothing was kept",
        hint="The index serves another file than the lock names.",
    )


def _open_local(it: Fetch):  # noqa: ANN202 - a binary file object
    """The file a `file:` URL names (its path decoded and checked as the lock's URL policy checks it: `envkit.io.urlpath`),
    opened without blocking on a FIFO (refused, with sockets: no size to cap)."""
    import stat

    from envkit.io.urlpath import decoded_path

    try:
        src = Path(decoded_path(it.url))
    except ValueError as exc:
        raise CheckFailed(f"{it.name}: the URL {it.url[:120]!r} is refused: {exc}", hint="The lock's URL is wrong.") from None
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise CannotRun(f"{it.name}: cannot read {src}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISDIR(mode):
        os.close(fd)
        raise CheckFailed(f"{it.name}: {src} is not a file (a FIFO, socket or folder)", hint="The lock's URL is wrong.")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _copy_capped(
    it: Fetch,
    read: Callable[[int], bytes],
    fout,
    h,
    have: int,  # noqa: ANN001
    on_bytes: Callable[[int], None] | None,
    part: Path,
) -> None:
    """Copy from `read` into `fout` (and the hash) until the end, never more than the size the lock records: a
    source that goes on past it (`file:///dev/zero`, a server sending another file) stops one byte after it and
    fails the check, the partial file removed."""
    left = None if it.size is None else it.size - have
    while True:
        chunk = read(CHUNK if left is None else min(CHUNK, left + 1))
        if not chunk:
            return
        if left is not None and len(chunk) > left:
            fout.close()
            part.unlink(missing_ok=True)
            raise CheckFailed(
                f"{it.name}: {it.url} holds more than the {it.size} bytes the lock records; nothing was kept",
                hint="The source is not the file the lock names (or the lock's size was edited).",
            )
        fout.write(chunk)
        h.update(chunk)
        if left is not None:
            left -= len(chunk)
        if on_bytes:
            on_bytes(len(chunk))


def fetch_with_progress(items: list[Fetch], cache: WheelCache, jobs: int = 8) -> dict[str, str]:
    """Fetch with a byte progress bar on stderr (silenced by --quiet)."""
    from envkit import console

    total = sum(i.size or 0 for i in {i.sha256: i for i in items}.values())
    if console.is_quiet():
        return Downloader(cache, jobs=jobs).fetch_all(items)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    lock = threading.Lock()
    with Progress(
        TextColumn("wheels"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console.err,
        transient=True,
    ) as prog:
        task = prog.add_task("wheels", total=total)

        def on_bytes(n: int) -> None:
            with lock:
                prog.advance(task, n)

        return Downloader(cache, jobs=jobs).fetch_all(items, on_bytes)


# --- a file whose sha256 or size the index did not publish (`envkit lock` from an HTML index) -------------
# the hash algorithms an index may publish in a `#algo=hex` fragment that a download is checked against
CHECKED_ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b")


@dataclass(frozen=True)
class Measured:
    """A file downloaded into the cache because its index did not publish its sha256 or size: what it is, and
    which of the index's published hashes it was checked against (`md5`: a Nexus or bandersnatch fragment)."""

    sha256: str
    size: int
    checked: tuple[str, ...]


def _fetch_measuring(
    url: str,
    name: str,
    published: dict[str, str],
    cache: WheelCache,
    limits: httpclient.Limits,
    redirect_check: Callable[[str], str | None] | None,
) -> Measured:
    """One attempt: the file at `url` streamed into a temporary file of the cache while every algorithm of
    `published` (and sha256) is computed, then checked and moved to its content address."""
    algos = [a for a in CHECKED_ALGORITHMS if a in published]
    hashers = {a: hashlib.new(a) for a in dict.fromkeys(["sha256", *algos])}
    cache.root.mkdir(parents=True, exist_ok=True)
    tmp = cache.root / f".measure.{os.getpid()}.{threading.get_ident()}.part"
    size = 0
    try:
        with open(tmp, "wb") as fout, contextlib.ExitStack() as stack:
            if url.startswith("file://"):
                fin = stack.enter_context(_open_local(Fetch(url, "0" * 64, None, name)))
                if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):  # /dev/zero: no end, no size
                    raise CheckFailed(f"{name}: {url} is not a regular file", hint="Give a folder of wheel files.")
                read: Callable[[int], bytes] = fin.read
            else:
                r = stack.enter_context(httpclient.open_url(url, limits, hint=_HINT, redirect_check=redirect_check))
                if r.status == 404:
                    raise CannotRun(f"{name}: HTTP 404 at {url}", hint="The index lists a file it does not serve.")
                httpclient.raise_for_status(r, _HINT)
                read = r.read  # the client caps the body at limits.max_bytes
            while chunk := read(CHUNK):
                size += len(chunk)
                if size > limits.max_bytes:
                    raise CheckFailed(f"{name}: {url} holds more than {limits.max_bytes} bytes; refused")
                fout.write(chunk)
                for h in hashers.values():
                    h.update(chunk)
            fout.flush()
            os.fsync(fout.fileno())
        for algo in algos:
            got, want = hashers[algo].hexdigest(), published[algo].strip().lower()
            if got != want:
                raise CheckFailed(
                    f"{name}: the index publishes {algo} {want[:128]} but {url} serves a file whose {algo} is {got}",
                    hint="The index or a proxy in between serves another file than it lists: check the mirror.",
                )
        sha = hashers["sha256"].hexdigest()
        if cache.valid(sha, size):
            tmp.unlink()
        else:
            os.chmod(tmp, 0o444)
            os.replace(tmp, cache.path(sha))
            cache._stamp(sha)
        return Measured(sha, size, tuple(algos))
    finally:
        tmp.unlink(missing_ok=True)


def measure(
    url: str,
    name: str,
    published: dict[str, str],
    cache: WheelCache | None = None,
    *,
    retries: int = 3,
    backoff: float = 0.5,
    redirect_check: Callable[[str], str | None] | None = None,
) -> Measured:
    """Download `url` (a file the index gave without a sha256, or without a size) into the content-addressed
    cache, so that `bundle build` finds it there, and return its sha256 and size; every hash the index did
    publish (`published`: {algorithm: hex}, e.g. an md5 fragment) must match the file (CheckFailed otherwise).
    Transient failures are tried `retries` times; the time limits are those of a bundle download."""
    cache = cache or WheelCache()
    last: BaseException | None = None
    for attempt in range(retries):
        try:
            return _fetch_measuring(url, name, published, cache, httpclient.DOWNLOAD, redirect_check)
        except httpclient.HTTPFailure as exc:
            if not exc.transient:
                raise
            last = exc
            time.sleep(backoff * (2**attempt))
    raise CannotRun(f"could not download {name} after {retries} attempts: {last}", hint=_HINT)


HEAD = httpclient.Limits("the headers of a file", httpclient.DOWNLOAD.max_bytes, deadline=60.0)


def head_size(url: str, redirect_check: Callable[[str], str | None] | None = None) -> int | None:
    """The size a server announces for `url` (a HEAD request's Content-Length), None when it does not say (no
    HEAD, no Content-Length, not 200): the caller then downloads the file. Not trusted beyond a size: a download
    of a different length fails its size or sha256 check (`Downloader`)."""
    if not url.startswith(("http://", "https://")):
        return None
    try:
        with httpclient.open_url(url, HEAD, method="HEAD", hint=_HINT, redirect_check=redirect_check) as r:
            return r.length if r.status == 200 else None
    except httpclient.HTTPFailure as exc:
        if exc.transient:  # the download that follows has its retries
            return None
        raise

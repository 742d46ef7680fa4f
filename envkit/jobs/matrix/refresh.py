"""`envkit matrix refresh`: derive the Python-package rules from the packages' own metadata on PyPI.

Reads PyPI's JSON API (``/pypi/NAME/json``: every release with its files' ``requires_python`` and
wheel names) and each release's core metadata (``/pypi/NAME/VERSION/json``, or, where that answers
404 (or 410), the wheel's METADATA read with HTTP range requests) for Transformers, Accelerate and numpy, and
derives `matrices/python_packages.yaml` rules: Requires-Python, the torch and numpy bounds of
Requires-Dist, and for numpy the Python range and glibc of its wheel tags. Consecutive releases
with the same value make one rule (``when: {transformers: ">=4.48.0,<4.52.0"}``), so a bound that
changes inside a minor series starts a new rule there. Every rule names its releases and the
metadata field as its source, with the date read.

The derived rules live between ``# BEGIN derived <package>`` / ``# END derived <package>`` markers in
python_packages.yaml; everything outside the markers is hand-written and left alone. A rule whose
content is unchanged keeps its existing text (and date), so refreshing a correct matrix changes
nothing. The result is a unified diff; ``write=True`` applies it.

The rows that pin a PyPI package (torch_npu in torch_npu.yaml, vllm-ascend and triton-ascend in serving.yaml:
`ROW_KINDS`) get their wheel facts the same way: each release's file list gives its Pythons (the ``cpXY`` tags;
a torch_npu row gets them per arch too, ``python_by_arch``, where its arches' wheels differ: 2.10.0.post6 has cp312
on aarch64 only) and, per arch, the lowest glibc of its manylinux tags; a row that says otherwise has those keys rewritten in place
(`envkit.jobs.matrix.yamlrows`) with one source line naming the files and the day read. A vllm-ascend release without
wheels (an sdist, whose Requires-Python may state no ceiling) gets `python_documented` from its own versioning table
(`VERSIONING_DOC` in the sdist, read whole, capped: the upper bounds of its row's Python cell); a release the table
has no row for keeps what its row says. `find_new` lists the releases PyPI has
that the matrix lacks (``envkit matrix refresh --new``).

Offline: ``snapshot`` reads the same documents from a folder (``NAME.json``, ``NAME/VERSION.json``, and the
``.build.json`` / ``.docs.json`` of a vllm-ascend release: its device build, its versioning table's row),
as written by ``record`` (the documents stripped to the fields read here). ``record`` also writes
``_recorded.json`` (``{"date": ...}``, the day they were read; no PyPI name starts with ``_``), and a
refresh from a snapshot dates its sources by it: a source says when its fact was read from PyPI, not when
a copy of it was. Online, the date is `envkit.io.clock.today()` (``SOURCE_DATE_EPOCH`` fixes it).

Online, the documents come from ``index_url`` (PyPI's JSON API base, ``https://pypi.org/pypi``, or a mirror's: http(s),
its credentials never shown), `jobs` requests at a time (1 to `MAX_JOBS`). Each request is tried again after a
transient failure (`envkit.jobs.matrix.retry`: back-off with jitter, Retry-After honoured up to its cap, an optional
deadline for the whole run), and the files' URLs a project document gives are resolved against the URL that answered
it (after redirects: a mirror answers relative URLs). Progress goes to stderr (`envkit.console.progress`, silenced by
``--quiet``): ``refresh: 37/120 transformers metadata documents (2 retried)``, a line per retry, and the total.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

from pydantic import BaseModel, ConfigDict

from envkit import console, versions
from envkit.errors import BadInput, CannotRun, EnvkitError, Where
from envkit.io import httpclient, jsonread
from envkit.io.buildinfo import BUILD_INFO, build_facts
from envkit.jobs.matrix.retry import Retrier, RetryPolicy, status_error

PYPI = "https://pypi.org"  # the default index: its JSON API is PYPI + "/pypi"
TORCH_SINCE = "2.6.0"  # the oldest torch release read
JOBS = 8  # requests at a time (--jobs)
MAX_JOBS = 32
# package -> (display name, first release derived: older ones are refused by the NPU-support rules)
PACKAGES: dict[str, tuple[str, str]] = {
    "transformers": ("Transformers", "4.32.0"),
    "accelerate": ("Accelerate", "0.21.0"),
    "numpy": ("numpy", "1.24.0"),
}
RECORDED = "_recorded.json"
BUILD_DOC = ".build.json"  # in a snapshot: NAME/VERSION.build.json, the device build of a release's wheels
DOCS_DOC = ".docs.json"  # in a snapshot: NAME/VERSION.docs.json, the Python of a release's row of its versioning table
VERSIONING_DOC = "docs/source/community/versioning_policy.md"  # vllm-ascend's release table, in each sdist
SDIST_MAX = 64 << 20  # an sdist read whole (a tar.gz has no index to read a member by range)
TAR_SCAN_MAX = 512 << 20  # the member bytes an sdist's scan for one file may pass through (a tar bomb stops there)
DOC_MAX = 1 << 20
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # in a snapshot: the day its documents were read
_KEPT_DIST = re.compile(r"^(torch|numpy|nvidia-[a-z0-9-]+)\b", re.I)
_HINT = "Run it where the index answers (pypi.org, or a mirror: --index-url URL), or pass --snapshot DIR (a recorded snapshot)."
_X = TypeVar("_X")
_Y = TypeVar("_Y")
ZIP_TAIL = 1 << 16  # the last bytes of a wheel, where its zip directory's end record is
MAX_ZIP_PART = 16 << 20  # a wheel's central directory, or its METADATA (compressed), read with a range request


@dataclass
class Release:
    version: str
    requires_python: str | None
    requires_dist: list[str]
    wheels: list[str]


class _Snapshot(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class _SnapshotDate(_Snapshot):
    """_recorded.json"""

    date: str


class _SnapshotFile(_Snapshot):
    filename: str
    packagetype: str | None
    requires_python: str | None


class _SnapshotInfo(_Snapshot):
    version: str


class _SnapshotProject(_Snapshot):
    """NAME.json"""

    info: _SnapshotInfo
    releases: dict[str, list[_SnapshotFile]]


class _SnapshotReleaseInfo(_Snapshot):
    version: str
    requires_python: str | None
    requires_dist: list[str]


class _SnapshotRelease(_Snapshot):
    """NAME/VERSION.json"""

    info: _SnapshotReleaseInfo


class _SnapshotDocs(_Snapshot):
    """NAME/VERSION.docs.json"""

    file: str | None
    row: str | None
    python: str | None


class _SnapshotBuild(_Snapshot):
    """NAME/VERSION.build.json"""

    file: str | None
    device_type: str | None
    soc_version: str | None


@dataclass
class RefreshResult:
    diff: str
    changed: bool
    rules: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    path: Path | None = None
    report: list[str] = field(default_factory=list)
    rows: list[RowChange] = field(default_factory=list)  # the rows whose wheel facts were (or would be) rewritten


# --- reading PyPI ------------------------------------------------------------------------------
def redact(text: str) -> str:
    """`text` with the credentials of every URL in it (``https://user:password@host``) shown as ``***``: the HTTP
    client's one rule (`envkit.io.httpclient.redacted`)."""
    from envkit.io.httpclient import redacted

    return redacted(text)


def index_url(value: str) -> str:
    """A JSON API base (``https://pypi.org/pypi``, a mirror's) checked: http(s), a host, no query or fragment; without
    its trailing slash. BadInput otherwise (the URL shown without its credentials)."""
    shown = redact(re.split(r"[?#]", value, maxsplit=1)[0])[:200]  # neither credentials nor a query's token shown
    hint = "Give the JSON API base of PyPI or of a mirror of it, e.g. https://pypi.org/pypi (NAME/json is read under it)."
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise BadInput(f"--index-url {shown} is not a valid URL", hint=hint) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--index-url {shown} is not an http:// or https:// URL", hint=hint)
    if parts.query or parts.fragment or any(c.isspace() or ord(c) < 0x20 for c in value):
        raise BadInput(f"--index-url {shown} has a query, a fragment or a blank; a JSON API base has none", hint=hint)
    return value.rstrip("/")


@contextmanager
def _redacted() -> Iterator[None]:
    """An error raised inside has the credentials of the URLs in its message and hint hidden."""
    try:
        yield
    except EnvkitError as exc:
        exc.message, exc.hint = redact(exc.message), None if exc.hint is None else redact(exc.hint)
        exc.args = (exc.message,)
        raise


class Source:
    """PyPI or a mirror of its JSON API (online), or a recorded snapshot folder; optionally records what it reads.

    Online: `index` (default ``PYPI + "/pypi"``), `jobs` requests at a time in `map`, each through `retry` (None: one
    try), `progress` lines (a snapshot read is silent)."""

    def __init__(
        self,
        snapshot: Path | None = None,
        record: Path | None = None,
        timeout: float = 120.0,
        *,
        index: str | None = None,
        jobs: int = JOBS,
        retry: Retrier | None = None,
        progress: Callable[[str], None] | None = console.progress,
    ) -> None:
        if not 1 <= jobs <= MAX_JOBS:
            raise BadInput(f"--jobs {jobs}: requests at a time are 1 to {MAX_JOBS}")
        self.snapshot, self.record, self.timeout = snapshot, record, timeout
        self.index = index_url(index) if index is not None else f"{PYPI}/pypi"
        self.jobs, self.retry, self.progress = jobs, retry, progress
        self.recorded: dict[str, str] = {}  # relative path -> document: written into `record` when the run ends
        self._projects: dict[tuple[str, str, bool], dict[str, Any]] = {}  # one read of a project per run
        self.answered: dict[str, str] = {}  # URL asked -> the URL that answered it (after redirects)
        self.read = 0  # documents and ranges read from the index
        self._lock = threading.Lock()

    @property
    def retried(self) -> int:
        return 0 if self.retry is None else self.retry.retried

    def note(self, line: str) -> None:
        """A progress line (online only), its URLs' credentials hidden."""
        if self.progress is not None and self.snapshot is None:
            self.progress(redact(line))

    def map(self, what: str, fn: Callable[[_X], _Y], items: list[_X]) -> list[_Y]:
        """`fn` of each item, in order: online `jobs` at a time (the first failure stops the rest and is raised),
        with a progress line each tenth; from a snapshot one after the other."""
        if self.snapshot is not None or len(items) <= 1:
            return [fn(item) for item in items]
        results: dict[int, _Y] = {}
        step = max(1, len(items) // 10)
        failed = threading.Event()  # set by the worker that fails, before any other worker starts its next item

        def one(item: _X) -> _Y | None:
            if failed.is_set():
                return None  # the run is failing: not started (the failure is what is raised)
            try:
                return fn(item)
            except BaseException:
                failed.set()
                if self.retry is not None:
                    self.retry.stop()
                raise

        with ThreadPoolExecutor(max_workers=min(self.jobs, len(items))) as pool:
            futures = {pool.submit(one, item): i for i, item in enumerate(items)}
            try:
                for fut in as_completed(futures):
                    if fut.exception() is None and failed.is_set():
                        continue  # an item that was not started, or finished while another failed
                    results[futures[fut]] = fut.result()  # type: ignore[assignment]  # None only when failed
                    if len(results) % step == 0 or len(results) == len(items):
                        self.note(f"refresh: {len(results)}/{len(items)} {what} ({self.retried} retried)")
            except BaseException:
                failed.set()
                if self.retry is not None:
                    self.retry.stop()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        return [results[i] for i in range(len(items))]

    def _load(self, rel: str) -> dict[str, Any] | None:
        """A snapshot document (a regular file inside the snapshot folder, capped), read strictly and of the exact
        shape `record` writes (`_SnapshotDate`, `_SnapshotProject`, `_SnapshotRelease`): BadInput naming the file and
        the key otherwise; None when there is none."""
        from envkit.io.jsonread import checked

        assert self.snapshot is not None
        if not os.path.lexists(self.snapshot / rel):
            return None
        path = self.snapshot / rel
        doc = jsonread.read_json(rel, what="PyPI snapshot document", root=self.snapshot)
        model: type[_Snapshot] = (
            _SnapshotDate
            if rel == RECORDED
            else _SnapshotBuild
            if rel.endswith(BUILD_DOC)
            else _SnapshotDocs
            if rel.endswith(DOCS_DOC)
            else _SnapshotRelease
            if "/" in rel
            else _SnapshotProject
        )
        checked(doc, model, path, what=f"PyPI snapshot document ({model.__doc__})")
        if model is _SnapshotProject:
            for version in doc["releases"]:
                if not versions.is_valid(version) and doc["releases"][version]:
                    raise BadInput(
                        f"{path}: releases.{version[:40]}: not a version",
                        where=Where(str(path), None, f"releases.{version[:40]}"),
                    )
        return doc

    def _recorded(self, rel: str) -> dict[str, Any]:
        """The snapshot document `rel`, which a snapshot run needs: BadInput naming it where the snapshot lacks it."""
        doc = self._load(rel)
        if doc is None:
            raise BadInput(f"the snapshot {self.snapshot} has no {rel}")
        return doc

    def _save(self, rel: str, doc: dict[str, Any]) -> None:
        if self.record is not None:
            self.recorded[rel] = json.dumps(doc, indent=1, sort_keys=True) + "\n"

    def read_date(self) -> str:
        """The day the documents were read from PyPI: a snapshot's recorded date, else today (recorded too)."""
        from envkit.io.clock import today

        if self.snapshot is None:
            day = today()
            self._save(RECORDED, {"date": day})
            return day
        doc = self._load(RECORDED)
        if doc is None:
            return today()  # a snapshot recorded before the date was kept
        recorded = doc.get("date") if isinstance(doc, dict) else None
        if not (isinstance(recorded, str) and _ISO_DATE.fullmatch(recorded)):
            raise BadInput(f"the snapshot's {RECORDED} has no date YYYY-MM-DD", where=Where(file=str(self.snapshot / RECORDED)))
        return recorded

    def _get(self, url: str, headers: dict[str, str] | None = None, limit: int | None = None) -> bytes:
        """A body from the index within `self.timeout` seconds for each request (and the run's deadline): a JSON
        document (capped at httpclient.JSON_DOCUMENT's size), or a byte range (`limit`: its length), tried again after
        a transient failure (`self.retry`). HTTPStatus for a status that is not success, HTTPFailure (CannotRun) when
        the index cannot be read; the URL that answered is kept in `answered`."""
        if self.retry is None:
            return self._fetch(url, headers, limit, None)
        return self.retry.call(url, lambda left: self._fetch(url, headers, limit, left))

    def _fetch(self, url: str, headers: dict[str, str] | None, limit: int | None, left: float | None) -> bytes:
        """One try of `_get`, within `left` seconds too where given."""
        limits = httpclient.JSON_DOCUMENT if limit is None else httpclient.PART.but(max_bytes=limit)
        deadline = self.timeout if left is None else min(self.timeout, left)
        ok = (200,) if limit is None else (200, 206)
        headers = {"User-Agent": "envkit-matrix-refresh", **(headers or {})}
        with httpclient.open_url(url, limits.but(deadline=deadline), headers=headers, hint=_HINT) as resp:
            if resp.status not in ok:
                raise status_error(resp.url, resp.status, resp.reason, resp.headers, _HINT)
            body = resp.body()
            self.answered[url] = resp.url
        with self._lock:
            self.read += 1
        return body

    def _get_json(self, url: str) -> dict[str, Any]:
        doc = jsonread.parse_json(self._get(url, {"Accept": "application/json"}), url, what="PyPI JSON document")
        if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict):
            raise BadInput(f"{url} is not a PyPI JSON document (no 'info' object)", hint=_HINT)
        return doc

    def project(self, name: str, since: str, *, prereleases: bool = False) -> dict[str, Any]:
        """``/pypi/NAME/json`` stripped: info.version, releases keys, and the files of releases >= since."""
        key = (name, since, prereleases)
        if key not in self._projects:
            self._projects[key] = self._project(name, since, prereleases)
        return self._projects[key]

    def _project(self, name: str, since: str, prereleases: bool) -> dict[str, Any]:
        if self.snapshot is not None:
            doc = self._load(f"{name}.json")
            if doc is None:
                raise BadInput(
                    f"the snapshot {self.snapshot} has no {name}.json",
                    hint="Record one with `tools/matrix_refresh.py --record DIR`.",
                )
            return doc
        url = f"{self.index}/{name}/json"
        raw = self._get_json(url)
        base = self.answered.get(url, url)  # a relative file URL is relative to the document's own URL
        keep = ("filename", "packagetype", "requires_python")
        releases = raw.get("releases")
        shaped = isinstance(releases, dict) and all(
            isinstance(files, list) and all(isinstance(f, dict) and isinstance(f.get("url"), str) for f in files)
            for files in releases.values()
        )
        if not shaped or not isinstance(releases, dict) or not isinstance(raw["info"].get("version"), str):
            raise BadInput(f"{url} is not a PyPI project document (releases: lists of files with a url)", hint=_HINT)
        doc = {
            "info": {"version": raw["info"]["version"]},
            "releases": {
                v: (
                    [{**{k: f.get(k) for k in keep}, "url": urljoin(base, f["url"])} for f in files if not f.get("yanked")]
                    if _wanted(v, since, prereleases)
                    else []
                )
                for v, files in releases.items()
            },
        }
        # the snapshot keeps what is read, not where it was downloaded from
        self._save(
            f"{name}.json",
            {
                "info": doc["info"],
                "releases": {v: [{k: f[k] for k in keep} for f in files] for v, files in doc["releases"].items()},
            },
        )
        return doc

    def metadata(self, name: str, version: str, files: list[dict[str, Any]]) -> dict[str, Any]:
        """``/pypi/NAME/VERSION/json`` stripped to info.version/requires_python/requires_dist (torch, numpy)."""
        rel = f"{name}/{version}.json"
        if self.snapshot is not None:
            return self._recorded(rel)
        try:
            info = self._get_json(f"{self.index}/{name}/{version}/json")["info"]
            dist, rp = info.get("requires_dist") or [], info.get("requires_python")
        except httpclient.HTTPStatus as exc:
            if exc.status not in (404, 410):  # only a release without this document falls back; else the index failed
                raise
            dist, rp = self._wheel_metadata(files)
        if not (isinstance(dist, list) and all(isinstance(d, str) for d in dist) and isinstance(rp, (str, type(None)))):
            raise BadInput(f"PyPI's metadata of {name} {version} is malformed (requires_dist, requires_python)", hint=_HINT)
        doc = {
            "info": {
                "version": version,
                "requires_python": rp or None,
                "requires_dist": sorted(d for d in dist if _KEPT_DIST.match(d)),
            }
        }
        self._save(rel, doc)
        return doc

    def build_info(self, name: str, version: str, files: list[dict[str, Any]]) -> dict[str, Any]:
        """The device build of a release's wheels: ``{"file", "device_type", "soc_version"}`` from the
        `BUILD_INFO` module of its first wheel (`_wheel_rank`), read with range requests; all None without a wheel or
        without that module (a build for any device)."""
        rel = f"{name}/{version}{BUILD_DOC}"
        if self.snapshot is not None:
            return self._recorded(rel)
        wheel = _first_wheel(files)
        doc: dict[str, Any] = {"file": None, "device_type": None, "soc_version": None}
        if wheel is not None:
            text = _read_zip_member(self, wheel["url"], BUILD_INFO, missing_ok=True)
            doc = {"file": wheel["filename"], **build_facts(text or "", wheel["filename"])}
        self._save(rel, doc)
        return doc

    def versioning_row(self, name: str, version: str, files: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The row of a release in the versioning table of its own sdist (`VERSIONING_DOC`): ``{"file", "row",
        "python"}`` (the table's first cell and its Python cell; both None where the table has no row for it, or the
        sdist no table; all None without an sdist), the sdist read whole (capped at `SDIST_MAX`). From a snapshot:
        None where it holds no such document (recorded before the refresh read sdists)."""
        rel = f"{name}/{version}{DOCS_DOC}"
        if self.snapshot is not None:
            return self._load(rel)
        sdists = [f for f in files if f["filename"].endswith(".tar.gz")]
        doc: dict[str, Any] = {"file": None, "row": None, "python": None}
        if sdists:
            body = self._get(sdists[0]["url"], None, SDIST_MAX)
            text = _tar_member(body, VERSIONING_DOC, redact(sdists[0]["url"]))
            row, python = versioning_python(text or "", version)
            doc = {"file": sdists[0]["filename"], "row": row, "python": python}
        self._save(rel, doc)
        return doc

    def _wheel_metadata(self, files: list[dict[str, Any]]) -> tuple[list[str], str | None]:
        """Requires-Dist and Requires-Python from a wheel's METADATA, read with range requests."""
        wheel = _first_wheel(files)
        if wheel is None:
            return [], None
        text = _read_zip_member(self, wheel["url"], ".dist-info/METADATA") or ""
        dist = [v.strip() for k, v in _headers(text) if k == "requires-dist"]
        rp = next((v.strip() for k, v in _headers(text) if k == "requires-python"), None)
        return dist, rp


def _wheel_rank(filename: str) -> tuple[int, str]:
    return (0 if "none-any" in filename else 1 if "manylinux" in filename and "x86_64" in filename else 2, filename)


def _first_wheel(files: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The wheel of a release whose files the refresh reads (a pure-Python one first, then manylinux x86_64)."""
    return min((f for f in files if f["filename"].endswith(".whl")), key=lambda f: _wheel_rank(f["filename"]), default=None)


def _headers(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if ":" in line and not line.startswith(" "):
            k, _, v = line.partition(":")
            out.append((k.strip().lower(), v))
    return out


def _read_zip_member(src: Source, url: str, suffix: str, *, missing_ok: bool = False) -> str | None:
    """One member of a remote zip (a wheel), from its central directory, with three range requests; None where the
    zip has none and `missing_ok` (else CannotRun)."""
    tail = src._get(url, {"Range": f"bytes=-{ZIP_TAIL}"}, ZIP_TAIL)
    eocd = tail.rfind(b"PK\x05\x06")
    if eocd < 0 or len(tail) < eocd + 20:
        raise CannotRun(f"not a zip: {url}")
    cd_size, cd_offset = struct.unpack("<II", tail[eocd + 12 : eocd + 20])
    if not 0 < cd_size <= MAX_ZIP_PART:
        raise CannotRun(f"{url}: a zip directory of {cd_size} bytes (at most {MAX_ZIP_PART} are read)", hint=_HINT)
    cd = src._get(url, {"Range": f"bytes={cd_offset}-{cd_offset + cd_size - 1}"}, cd_size)
    pos = 0
    while pos + 46 <= len(cd) and cd[pos : pos + 4] == b"PK\x01\x02":
        (method,) = struct.unpack("<H", cd[pos + 10 : pos + 12])
        csize, _usize, nlen, elen, clen = struct.unpack("<IIHHH", cd[pos + 20 : pos + 34])
        (offset,) = struct.unpack("<I", cd[pos + 42 : pos + 46])
        name = cd[pos + 46 : pos + 46 + nlen].decode()
        if name.endswith(suffix) and name.count("/") == 1:
            if csize > MAX_ZIP_PART:
                raise CannotRun(f"{url}: {name} is {csize} bytes compressed (at most {MAX_ZIP_PART} are read)", hint=_HINT)
            span = 30 + 1024 + csize + 1
            blob = src._get(url, {"Range": f"bytes={offset}-{offset + span - 1}"}, span)
            n2, e2 = struct.unpack("<HH", blob[26:30])
            data = blob[30 + n2 + e2 : 30 + n2 + e2 + csize]
            try:
                raw = _inflate(data, MAX_ZIP_PART) if method == 8 else data
            except zlib.error as exc:
                raise CannotRun(f"{url}: {name} cannot be inflated: {exc}", hint=_HINT) from None
            return raw.decode("utf-8", "replace")
        pos += 46 + nlen + elen + clen
    if missing_ok:
        return None
    raise CannotRun(f"no {suffix} in {url}")


def _tar_member(data: bytes, suffix: str, where: str) -> str | None:
    """The text of `TOP/suffix` in a gzipped tar (an sdist), scanned as a stream: None where it has none; CannotRun
    for what is no tar.gz, a member over `DOC_MAX`, or more than `TAR_SCAN_MAX` member bytes before it."""
    import tarfile

    scanned = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
            for member in tar:
                scanned += max(0, member.size)
                if scanned > TAR_SCAN_MAX:
                    raise CannotRun(f"{where}: more than {TAR_SCAN_MAX} bytes of members before {suffix}", hint=_HINT)
                if not (member.isfile() and member.name.split("/", 1)[1:] == [suffix]):
                    continue
                if member.size > DOC_MAX:
                    raise CannotRun(f"{where}: {member.name} is {member.size} bytes (at most {DOC_MAX} are read)", hint=_HINT)
                fh = tar.extractfile(member)
                return None if fh is None else fh.read(DOC_MAX).decode("utf-8", "replace")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise CannotRun(f"{where}: not a readable sdist (tar.gz): {exc}", hint=_HINT) from None
    return None


def versioning_python(text: str, version: str) -> tuple[str | None, str | None]:
    """(first cell, Python cell) of the row of `version` (``v0.30.0rc1``) in a Markdown table with a Python column
    (vllm-ascend's release compatibility matrix); (None, None) where no table has a row for it."""
    key = versions.parse(version).key
    header: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if not set(line) - set("|-: "):  # the separator line
            continue
        column = next((i for i, h in enumerate(header) if h == "python"), None)
        first = cells[0].strip("`* ")
        cand = first[1:] if first[:1] in "vV" else first
        if column is None or column >= len(cells) or not versions.is_valid(cand) or versions.parse(cand).key != key:
            continue
        return first[:40], cells[column][:80] or None
    return None, None


def _ceiling(python: str | None) -> str | None:
    """``<3.13`` of a Python cell ``>= 3.10, < 3.13`` (its upper bounds); None where it states none."""
    bounds = re.findall(r"(<=|<)\s*([0-9]{1,3}(?:\.[0-9]{1,3}){0,2})", python or "")
    return ",".join(op + v for op, v in bounds) or None


def _inflate(data: bytes, limit: int) -> bytes:
    """Raw deflate data inflated to at most `limit` bytes (a zip bomb stops there: CannotRun)."""
    inflater = zlib.decompressobj(-15)
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit:
        raise CannotRun(f"a zip member inflates to more than {limit} bytes")
    return out


def _wanted(v: str, since: str, prereleases: bool) -> bool:
    return (prereleases and versions.is_valid(v) or _final(v)) and versions.parse(v) >= versions.parse(since)


def _final(v: str) -> bool:
    try:
        p = versions.parse(v)
    except versions.InvalidVersion:
        return False
    return not p.is_prerelease and not any(kind == 0 for kind, _ in p.key)


# --- deriving ------------------------------------------------------------------------------------
def releases(src: Source, name: str) -> list[Release]:
    """The final releases since the package's floor, oldest first, with their metadata."""
    since = PACKAGES[name][1]
    doc = src.project(name, since)
    chosen = sorted((v for v, files in doc["releases"].items() if files), key=versions.sort_key)
    metas = src.map(f"{name} metadata documents", lambda v: src.metadata(name, v, doc["releases"][v]), chosen)
    out = []
    for v, meta in zip(chosen, metas, strict=True):
        files = doc["releases"][v]
        rp = meta["info"].get("requires_python") or next((f["requires_python"] for f in files if f.get("requires_python")), None)
        out.append(
            Release(
                v,
                rp,
                list(meta["info"].get("requires_dist") or []),
                [f["filename"] for f in files if f["filename"].endswith(".whl")],
            )
        )
    return out


def _lower(spec: str | None) -> str | None:
    """``>=3.9.0`` -> ``>=3.9`` (the Requires-Python lower bound, trailing .0 dropped)."""
    if not spec:
        return None
    m = re.search(r">=\s*([0-9.]+)", spec)
    if not m:
        return None
    parts = m.group(1).rstrip(".").split(".")
    while len(parts) > 2 and parts[-1] == "0":
        parts.pop()
    return ">=" + ".".join(parts)


def _dist_spec(dist: list[str], name: str, extra: str | None) -> str | None:
    """The specifier of `name` in Requires-Dist (in `extra` where given), normalised: ``>=2.1,<2.7``."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() != name:
            continue
        in_extra = req.marker is not None and "extra" in str(req.marker)
        if (
            extra is None
            and in_extra
            or extra is not None
            and not (in_extra and req.marker is not None and req.marker.evaluate({"extra": extra}))
        ):
            continue
        specs = sorted(req.specifier, key=lambda s: (s.operator not in (">=", ">"), s.version))
        return ",".join(f"{s.operator}{s.version}" for s in specs) or None
    return None


def _cp_range(wheels: list[str]) -> tuple[str, str] | None:
    tags = sorted({int(m.group(1)) for w in wheels if (m := re.search(r"-cp3([0-9]{1,3})-cp3[0-9]{1,3}-", w))})
    return (f"3.{tags[0]}", f"3.{tags[-1] + 1}") if tags else None


def _glibc(wheels: list[str]) -> str | None:
    """The lowest glibc any Linux wheel of the release needs, where it is above manylinux2014's 2.17."""
    lows = [(int(a), int(b)) for w in wheels for a, b in re.findall(r"manylinux_([0-9]{1,3})_([0-9]{1,3})_(?:x86_64|aarch64)", w)]
    lows += [(2, 17) for w in wheels if re.search(r"manylinux2014_(x86_64|aarch64)", w)]
    if not lows:
        return None
    low = min(lows)
    return f">={low[0]}.{low[1]}" if low > (2, 17) else None


def _spans(rels: list[Release], value) -> list[tuple[str, str | None, str, Any]]:
    """(first, next first or None, last, value) for each run of consecutive releases with one value."""
    out: list[list[Any]] = []
    for r in rels:
        v = value(r)
        if out and out[-1][3] == v:
            out[-1][2] = r.version
        else:
            out.append([r.version, None, r.version, v])
    for i in range(len(out) - 1):
        out[i][1] = out[i + 1][0]
    return [tuple(s) for s in out if s[3] is not None]


def _when(name: str, first: str, nxt: str | None) -> dict[str, str]:
    return {name: f">={first},<{nxt}" if nxt else f">={first}"}


def _source(name: str, first: str, last: str, fieldname: str, today: str) -> str:
    span = first if first == last else f"{first} … {last}"
    return f"PyPI {name} {span} metadata {fieldname} (https://pypi.org/project/{name}/{first}/), read {today}"


def derive(name: str, rels: list[Release], today: str) -> list[dict[str, Any]]:
    """The rule rows of one package, in a stable order: Python, then torch, then numpy bounds."""
    title = PACKAGES[name][0]
    rules: list[dict[str, Any]] = []
    if name == "numpy":

        def pyval(r: Release):
            lo, cp = _lower(r.requires_python), _cp_range(r.wheels)
            if not (lo or cp):
                return None
            if not lo and cp:
                lo = f">={cp[0]}"
            return (f"{lo},<{cp[1]}" if cp else lo, _glibc(r.wheels))

        for first, nxt, last, (py, glibc) in _spans(rels, pyval):
            requires = {"python": py, **({"glibc": glibc} if glibc else {})}
            extra = f" and glibc {glibc}" if glibc else ""
            rules.append(
                {
                    "id": f"numpy/python-{first}",
                    "when": _when(name, first, nxt),
                    "requires": requires,
                    "message": f"numpy {{numpy}} needs Python {py}{extra} (Requires-Python and wheel tags)",
                    "source": _source(name, first, last, "Requires-Python and wheel tags", today),
                    "confidence": "derived",
                }
            )
        return rules
    for first, nxt, last, requires_py in _spans(rels, lambda r: _lower(r.requires_python)):
        rules.append(
            {
                "id": f"{name}/python-{first}",
                "when": _when(name, first, nxt),
                "requires": {"python": requires_py},
                "message": f"{title} {{{name}}} requires Python {requires_py} (Requires-Python)",
                "source": _source(name, first, last, "Requires-Python", today),
                "confidence": "derived",
            }
        )
    torch_extra = "torch" if name == "transformers" else None
    for first, nxt, last, spec in _spans(rels, lambda r: _dist_spec(r.requires_dist, "torch", torch_extra)):
        rules.append(
            {
                "id": f"{name}/torch-{first}",
                "when": _when(name, first, nxt),
                "requires": {"torch": spec},
                "message": f"{title} {{{name}}} requires torch {spec} (Requires-Dist)",
                "source": _source(name, first, last, "Requires-Dist torch", today),
                "confidence": "derived",
            }
        )

    def numpy_upper(r: Release) -> str | None:
        spec = _dist_spec(r.requires_dist, "numpy", None)
        return ",".join(p for p in spec.split(",") if p.startswith("<")) or None if spec else None

    for first, nxt, last, spec in _spans(rels, numpy_upper):
        rules.append(
            {
                "id": f"{name}/numpy-{first}",
                "when": _when(name, first, nxt),
                "requires": {"numpy": spec},
                "message": f"{title} {{{name}}} requires numpy {spec} (Requires-Dist)",
                "source": _source(name, first, last, "Requires-Dist numpy", today),
                "confidence": "derived",
            }
        )
    return rules


# --- torch and torch_npu: a report of what PyPI has that the matrix rows do not say --------------
def torch_build(dist: list[str], arch: str) -> str:
    """``cuda`` when an nvidia-* requirement applies on `arch` (Linux), else ``cpu``: the build PyPI serves there."""
    from packaging.requirements import InvalidRequirement, Requirement

    env = {"platform_machine": arch, "platform_system": "Linux", "sys_platform": "linux", "extra": ""}
    for line in dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower().startswith("nvidia-") and (req.marker is None or req.marker.evaluate(env)):
            return "cuda"
    return "cpu"


def _arch_files(files: list[dict[str, Any]], arch: str, cp: str | None = None) -> list[dict[str, Any]]:
    return [f for f in files if f["filename"].endswith(f"_{arch}.whl") and (cp is None or f"-{cp}-" in f["filename"])]


def torch_report(src: Source, lm: Any) -> list[str]:
    """Per torch it pins: the build PyPI serves on each arch (CPU or CUDA, from Requires-Dist markers of the cp310
    wheel). (What torch_npu's wheels say is derived into its rows: `wheel_rows`.)"""
    lines: list[str] = []
    tdoc = src.project("torch", TORCH_SINCE)
    pinned = sorted({t.torch for t in lm.model.torch_npu if t.cann is not None}, key=versions.sort_key)
    served = [(v, files) for v in pinned if (files := _arch_files(tdoc["releases"].get(v) or [], "aarch64", "cp310"))]
    metas = src.map("torch metadata documents", lambda vf: src.metadata("torch", *vf), served)
    for (v, _), meta in zip(served, metas, strict=True):
        dist = meta["info"].get("requires_dist") or []
        lines.append(
            f"torch {v}: PyPI serves a {torch_build(dist, 'aarch64')} build on aarch64, a "
            f"{torch_build(dist, 'x86_64')} build on x86_64 (https://pypi.org/project/torch/{v}/ metadata "
            "Requires-Dist)"
        )
    return lines


# --- the rows of the pip packages the matrix pins: what their wheel files say ------------------------
ARCHES = ("x86_64", "aarch64")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# bounded ASCII digits: a 5,000-digit tag in a snapshot or an index answer is no tag (int() refuses past 4,300 digits)
_MANYLINUX = re.compile(r"^(manylinux1|manylinux2010|manylinux2014|manylinux_([0-9]{1,3})_([0-9]{1,3}))_(x86_64|aarch64)$")
_CP = re.compile(r"^cp3([0-9]{1,3})$")
DERIVED_PREFIX = "PyPI wheel files of "  # the source line refresh writes (and replaces) on a row it derived


@dataclass(frozen=True)
class RowKind:
    """A matrix list whose rows pin a PyPI package: where they are, and how a row spells its wheel facts."""

    package: str  # the PyPI name
    file: str  # under the matrices folder
    section: str  # the top-level list
    since: str  # the oldest release read
    python_list: bool  # python as the wheels' Pythons (`["3.10", "3.11"]`), else a range (`">=3.10,<3.12"`)
    pypi_only: bool  # only rows with `index: pypi` (others come from another index)
    device_build: bool = False  # its wheels say the device they are built for (`BUILD_INFO`: `device_build`)
    documented_python: bool = False  # a release without wheels: its sdist's versioning table's Python ceiling
    news: bool = True  # `--new` lists its releases the matrix lacks (Ray's: no, its rows pin the release the vendor bounds)


ROW_KINDS = (
    RowKind("torch-npu", "torch_npu.yaml", "torch_npu", "2.1.0", python_list=True, pypi_only=False),
    RowKind(
        "vllm-ascend",
        "serving.yaml",
        "vllm_ascend",
        "0.7.0",
        python_list=False,
        pypi_only=False,
        device_build=True,
        documented_python=True,
    ),
    RowKind("triton-ascend", "serving.yaml", "triton_ascend", "3.0.0", python_list=False, pypi_only=True),
    # Ray of multi-node serving: one row per range of vllm-ascend releases, so one release may have two rows
    RowKind("ray", "serving.yaml", "ray", "2.40.0", python_list=False, pypi_only=False, news=False),
)


@dataclass(frozen=True)
class WheelFacts:
    """What one release's files on PyPI say: the CPython minors of its wheels, the lowest glibc of its manylinux
    wheels per arch, and how many wheels it has."""

    pythons: tuple[int, ...]
    manylinux: dict[str, str]
    wheels: int
    by_arch: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the CPython minors of each arch's wheels

    def python_by_arch(self) -> dict[str, list[str]] | None:
        """The Pythons of each arch's wheels (``{x86_64: ["3.10", "3.11"], aarch64: ["3.10", "3.11", "3.12"]}``)
        where two arches have wheels for different Pythons; None where they agree (`pythons` says it)."""
        if len(self.by_arch) < 2 or len(set(self.by_arch.values())) < 2:
            return None
        return {arch: [f"3.{m}" for m in minors] for arch, minors in self.by_arch.items()}

    def python_range(self) -> str | None:
        """`>=3.10,<3.13` from the wheels (cp310 … cp312); None without a cp wheel."""
        return f">=3.{self.pythons[0]},<3.{self.pythons[-1] + 1}" if self.pythons else None

    def python_list(self) -> list[str] | None:
        return [f"3.{m}" for m in self.pythons] or None

    def said(self) -> str:
        if not self.wheels:
            return "no wheel (sdist only)"
        py = ", ".join(f"cp3{m}" for m in self.pythons) or "no cp tag"
        if self.python_by_arch() is not None:
            py = "; ".join(
                f"{', '.join(f'cp3{m}' for m in minors) or 'no cp tag'} on {arch}" for arch, minors in self.by_arch.items()
            )
        ml = "; ".join(f"manylinux_{g.replace('.', '_')} on {arch}" for arch, g in self.manylinux.items())
        return f"{py}; {ml}" if ml else py


def wheel_facts(files: list[dict[str, Any]]) -> WheelFacts:
    """The facts of a release's files (their `filename`); a tag set compressed in one file name
    (`manylinux_2_27_x86_64.manylinux_2_28_x86_64`) counts by its lowest tag."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    pythons: set[int] = set()
    per_arch: dict[str, set[int]] = {}
    lows: dict[str, tuple[int, int]] = {}
    wheels = 0
    for f in files:
        name = f["filename"]
        if not name.endswith(".whl"):
            continue
        try:
            tags = parse_wheel_filename(name)[3]
        except InvalidWheelFilename:
            continue
        wheels += 1
        for tag in tags:
            cp = (m := _CP.match(tag.interpreter)) and tag.abi == tag.interpreter
            if cp and m:
                pythons.add(int(m.group(1)))
            if ml := _MANYLINUX.match(tag.platform):
                glibc = _LEGACY.get(ml.group(1)) or (int(ml.group(2)), int(ml.group(3)))
                arch = ml.group(4)
                lows[arch] = min(lows.get(arch, glibc), glibc)
                minors = per_arch.setdefault(arch, set())
                if cp and m:
                    minors.add(int(m.group(1)))
    return WheelFacts(
        tuple(sorted(pythons)),
        {arch: "{}.{}".format(*lows[arch]) for arch in ARCHES if arch in lows},
        wheels,
        {arch: tuple(sorted(per_arch[arch])) for arch in ARCHES if arch in per_arch},
    )


@dataclass(frozen=True)
class RowChange:
    """One matrix row whose wheel facts differ from PyPI's: the fields to set (None: remove)."""

    kind: RowKind
    version: str
    fields: dict[str, Any]
    was: dict[str, Any]
    facts: WheelFacts
    nth: int = 0  # which of the section's rows with this version (0: the first)

    def line(self) -> str:
        parts = [f"{k} {_shown(self.was.get(k))} -> {_shown(v)}" for k, v in self.fields.items()]
        return f"{self.kind.package} {self.version}: {'; '.join(parts)} (PyPI: {self.facts.said()})"


def _shown(value: Any) -> str:
    from envkit.jobs.matrix.yamlrows import flow

    if isinstance(value, dict) and "spec" in value or hasattr(value, "spec"):  # a documented bound: its spec
        return str(value["spec"] if isinstance(value, dict) else value.spec)
    if value is not None and (isinstance(value, dict) and "confidence" in value or hasattr(value, "confidence")):
        return "/".join(v for v in _build_fact(value) if v)  # a device build: its fact, not its source
    return "absent" if value is None else flow(value)


def _wanted_fields(kind: RowKind, facts: WheelFacts) -> dict[str, Any]:
    """The fields a row should have by its release's files. The Pythons only where there are cp wheels (a release
    without wheels keeps its own range: the release table's, or Requires-Python), and a torch_npu row's per arch
    where its arches' wheels differ (`python_by_arch`, removed where they agree); the glibc per arch of the
    manylinux wheels: a framework release without any wheel is an sdist (`manylinux` removed); a torch_npu row keeps
    its own there (the field is required: its wheels are on another index). A framework release without any wheel is
    `sdist_only` (resolve never picks it unpinned; `matrix check` holds such rows to `manylinux: null`); one with
    wheels is not."""
    out: dict[str, Any] = {}
    if facts.pythons:
        out["python"] = facts.python_list() if kind.python_list else facts.python_range()
        if kind.python_list:  # per arch where the arches' wheels differ (None: the key removed)
            out["python_by_arch"] = facts.python_by_arch()
    if facts.manylinux or not kind.python_list:
        out["manylinux"] = facts.manylinux or None
    if kind.device_build:
        out["sdist_only"] = not facts.wheels
    return out


def wheel_rows(src: Source, lm: Any) -> tuple[list[RowChange], list[str]]:
    """Each row of ROW_KINDS against its release's files on PyPI: the rows whose python/manylinux differ, and a
    line per row that PyPI does not have (a release from another index, or withdrawn)."""
    changes: list[RowChange] = []
    missing: list[str] = []
    day = src.read_date()
    for kind in ROW_KINDS:
        doc = src.project(kind.package, kind.since, prereleases=True)
        on_pypi = {versions.parse(v).key: files for v, files in doc["releases"].items() if files and versions.is_valid(v)}
        rows = []
        nths: list[int] = []  # per row kept: how many earlier rows of the section have its version
        counted: dict[tuple[Any, ...], int] = {}
        for row in getattr(lm.model, kind.section):
            vkey = versions.parse(row.version).key
            nth = counted[vkey] = counted.get(vkey, -1) + 1
            if kind.pypi_only and getattr(row, "index", "pypi") != "pypi":
                continue
            files = on_pypi.get(versions.parse(row.version).key)
            if files is None:
                missing.append(f"{kind.package} {row.version}: a matrix row with no file on PyPI")
                continue
            rows.append((row, files))
            nths.append(nth)
        builds: list[dict[str, Any] | None] = [None] * len(rows)
        if kind.device_build:
            builds = src.map(
                f"{kind.package} build infos",
                lambda rf: src.build_info(kind.package, rf[0].version, rf[1]),  # noqa: B023 - map runs it now
                rows,
            )
        tables: list[dict[str, Any] | None] = [None] * len(rows)
        if kind.documented_python:  # a release without wheels: Requires-Python alone may not say its ceiling
            tables = src.map(
                f"{kind.package} versioning tables",
                lambda rf: None if wheel_facts(rf[1]).wheels else src.versioning_row(kind.package, rf[0].version, rf[1]),  # noqa: B023
                rows,
            )
        for (row, files), build, table, nth in zip(rows, builds, tables, nths, strict=True):
            facts = wheel_facts(files)
            if not kind.python_list and facts.python_by_arch() is not None:  # a range row has one Python range
                missing.append(
                    f"{kind.package} {row.version}: its wheels' Pythons differ per arch ({facts.said()}); the row's one "
                    "python range cannot say it (a row with python_by_arch is torch_npu's form)"
                )
            want = _wanted_fields(kind, facts)
            was = {k: getattr(row, k, None) for k in want}
            diff = {k: v for k, v in want.items() if was.get(k) != v}
            if build is not None and _build_fact(build) != _build_fact(getattr(row, "device_build", None)):
                diff["device_build"] = _device_build(kind, row.version, build, day)
                was["device_build"] = getattr(row, "device_build", None)
            documented = _documented(kind, row.version, table, day)
            had = getattr(row, "python_documented", None)
            if documented is not None and (had is None or had.spec != documented["spec"]):
                diff["python_documented"], was["python_documented"] = documented, had
            if diff:
                changes.append(RowChange(kind, row.version, diff, {k: was.get(k) for k in diff}, facts, nth))
    return changes, missing


def _documented(kind: RowKind, version: str, table: dict[str, Any] | None, day: str) -> dict[str, Any] | None:
    """A row's `python_documented` from its sdist's versioning table (the ceiling of its Python cell), with the file
    and row it was read from; None where the table has no row for it or states no ceiling (a hand-written one stays)."""
    spec = _ceiling(table.get("python")) if table else None
    if table is None or spec is None:
        return None
    return {
        "spec": spec,
        "source": f"{VERSIONING_DOC} in {table['file']} (https://pypi.org/project/{kind.package}/{version}/#files): "
        f"its {table['row']} row, Python {table['python']}, read {day}",
        "confidence": "derived",
    }


def _build_fact(build: Any) -> tuple[str | None, str | None]:
    """(device_type, soc_version) of a build document or a row's `device_build` (None: none)."""
    if build is None:
        return (None, None)
    if isinstance(build, dict):
        return (build.get("device_type"), build.get("soc_version"))
    return (build.device_type, build.soc_version)


def _device_build(kind: RowKind, version: str, build: dict[str, Any], day: str) -> dict[str, Any] | None:
    """A row's `device_build` from its build document, with the file it was read from; None: no device build."""
    device, soc = _build_fact(build)
    if device is None and soc is None:
        return None
    said = " and ".join(f"{k} = '{v}'" for k, v in (("__device_type__", device), ("__soc_version__", soc)) if v)
    out: dict[str, Any] = {"device_type": device} if device else {}
    if soc:
        out["soc_version"] = soc
    out["source"] = (
        f"{BUILD_INFO} in {build['file']} (https://pypi.org/project/{kind.package}/{version}/#files): {said}, read {day}"
    )
    out["confidence"] = "derived"
    return out


def apply_row_changes(matrix_dir: Path, changes: list[RowChange], day: str) -> dict[str, tuple[str, str]]:
    """file name -> (old text, new text) with every change written into its row, each row's derived source line
    set; every edited file is loaded again and each changed row must read back as its fields (else BadInput)."""
    from envkit.io.yamlio import fast_load_text
    from envkit.jobs.matrix.yamlrows import set_fields

    texts: dict[str, tuple[str, str]] = {}
    for ch in changes:
        path = matrix_dir / ch.kind.file
        old, text = texts.get(ch.kind.file) or (path.read_bytes().decode("utf-8"),) * 2
        line = f"{DERIVED_PREFIX}{ch.kind.package} {ch.version}: {ch.facts.said()} (https://pypi.org/project/{ch.kind.package}/{ch.version}/#files), read {day}"
        text = set_fields(
            text,
            str(path),
            ch.kind.section,
            ch.version,
            ch.fields,
            after="python",
            source=(DERIVED_PREFIX, line),
            nth=ch.nth,
        )
        texts[ch.kind.file] = (old, text)
    for ch in changes:
        rows = fast_load_text(texts[ch.kind.file][1])[ch.kind.section]
        row = [
            r
            for r in rows
            if versions.is_valid(str(r.get("version")))
            and versions.parse(str(r["version"])).key == versions.parse(ch.version).key
        ][ch.nth]
        if any(row.get(k) != v for k, v in ch.fields.items()):
            raise BadInput(
                f"{matrix_dir / ch.kind.file}: {ch.kind.section}[{ch.version}] did not read back as written",
                where=Where(str(matrix_dir / ch.kind.file), None, ch.kind.section),
            )
    return texts


def new_releases(src: Source, lm: Any) -> list[str]:
    """Releases on PyPI (final and pre-releases, with files) that the matrix has no row for, newer than its oldest
    row of the package (torch: its newest): one line each, newest first per package. A pre-release the matrix has a row of the same
    release for (its final, a post, a later rc: 2.9.0rc1 beside 2.9.0) is superseded, not missing."""
    lines: list[str] = []
    pinned = [
        (k.package, src.project(k.package, k.since, prereleases=True), [r.version for r in getattr(lm.model, k.section)], min)
        for k in ROW_KINDS
        if k.news
    ]
    # torch: the matrix has a torch_builds row for each torch a torch_npu pins (not every torch): a torch newer than
    # the newest of them is news (torch_npu will follow it), an older one it skipped (2.7.0 beside 2.7.1) is not
    pinned.append(("torch", src.project("torch", TORCH_SINCE), [b.torch for b in lm.model.torch_builds], max))
    for package, doc, pins, floor in pinned:
        rows = [versions.parse(v) for v in pins]
        have = {r.key for r in rows}
        carried = {_release(r) for r in rows}
        oldest = floor(rows, default=None)
        found = []
        for v, files in doc["releases"].items():
            if not (files and versions.is_valid(v)):
                continue
            p = versions.parse(v)
            if p.key in have or (oldest is not None and p <= oldest) or (not _final(v) and _release(p) in carried):
                continue
            found.append(v)
        for v in sorted(found, key=versions.sort_key, reverse=True):
            pre = "pre-release" if not _final(v) else "release"
            said = wheel_facts(doc["releases"][v]).said()
            lines.append(f"{package} {v}: a {pre} on PyPI the matrix lacks ({said}; https://pypi.org/project/{package}/{v}/)")
    return lines


def _release(v: versions.Version) -> tuple[int, ...]:
    """2.9.0rc1, 2.9.0 and 2.9.0.post2 -> (2, 9, 0): the release they are versions of (trailing zeros dropped)."""
    r = list(v.release)
    while len(r) > 1 and r[-1] == 0:
        r.pop()
    return tuple(r)


# --- writing -------------------------------------------------------------------------------------
def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _row_yaml(rule: dict[str, Any]) -> str:
    flow = lambda d: "{" + ", ".join(f"{k}: {_q(v)}" for k, v in d.items()) + "}"  # noqa: E731
    return (
        f"  - id: {rule['id']}\n    when: {flow(rule['when'])}\n    requires: {flow(rule['requires'])}\n"
        f"    message: {_q(rule['message'])}\n    source: {_q(rule['source'])}\n    confidence: {rule['confidence']}\n"
    )


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("id", "when", "requires", "message")
    return all(a.get(k) == b.get(k) for k in keys)


def _block(text: str, name: str) -> tuple[int, int]:
    begin, end = f"  # BEGIN derived {name}", f"  # END derived {name}"
    try:
        i = text.index(begin)
        j = text.index(end, i)
    except ValueError:
        raise BadInput(
            f"python_packages.yaml has no '{begin.strip()}' … '{end.strip()}' block",
            hint="The derived rules of each package live between these markers.",
        ) from None
    return text.index("\n", i) + 1, j


def render(text: str, derived: dict[str, list[dict[str, Any]]]) -> str:
    """python_packages.yaml with each package's derived block replaced; unchanged rules keep their text."""
    from envkit.io.yamlio import fast_load_text

    for name, rules in derived.items():
        i, j = _block(text, name)
        old_rows = fast_load_text("rules:\n" + text[i:j]).get("rules") or []
        by_id = {r["id"]: r for r in old_rows}
        parts = []
        for rule in rules:
            old = by_id.get(rule["id"])
            parts.append(_row_yaml(old if old is not None and _same(old, rule) else rule))
        text = text[:i] + "".join(parts) + text[j:]
    return text


def open_source(
    snapshot: Path | None = None,
    record: Path | None = None,
    *,
    index: str | None = None,
    jobs: int = JOBS,
    deadline: float | None = None,
    retry: Retrier | None = None,
) -> Source:
    """The Source of a run: a snapshot, or the index (`index`, default PyPI) read `jobs` at a time with retries
    (`retry`, default the `RetryPolicy` with `deadline` seconds for the run), its retries noted as progress."""
    if snapshot is not None and index is not None:
        raise BadInput(
            "--index-url and --snapshot name two sources; give one", hint="--snapshot reads a recorded folder, offline."
        )
    if deadline is not None and not deadline > 0:
        raise BadInput(f"--deadline {deadline:g}: the run's deadline is a number of seconds above 0")
    retrier = retry if retry is not None else Retrier(RetryPolicy(deadline=deadline))
    src = Source(snapshot=snapshot, record=record, index=index, jobs=jobs, retry=retrier)
    if retrier.note is None:
        retrier.note = src.note
    return src


def _read_projects(src: Source, keys: list[tuple[str, str, bool]]) -> None:
    """The project documents a run reads, read first (online: `jobs` at a time)."""
    src.note(f"refresh: reading {src.index} ({src.jobs} request(s) at a time)")
    src.map("projects", lambda k: src.project(k[0], k[1], prereleases=k[2]), keys)


def _done(src: Source) -> None:
    src.note(f"refresh: {src.read} documents read from {src.index}, {src.retried} retried")


def _folder(matrix_dir: Path | None) -> Path:
    """The matrices folder to refresh: `matrix_dir`, else the shipped one."""
    from envkit.resources import matrices_dir

    return matrix_dir or matrices_dir()


def refresh(
    matrix_dir: Path | None,
    *,
    snapshot: Path | None = None,
    record: Path | None = None,
    write: bool = False,
    today: str | None = None,
    packages: list[str] | None = None,
    index: str | None = None,
    jobs: int = JOBS,
    deadline: float | None = None,
    retry: Retrier | None = None,
) -> RefreshResult:
    """Derive the rules and the rows' wheel facts, diff them against the matrix files, and write them when asked.

    The rules of `packages` (default: all of PACKAGES) go into python_packages.yaml; with the default, the rows of
    ROW_KINDS also get the Pythons and manylinux glibc their wheel files on PyPI say (`wheel_rows`), and the
    report says what torch PyPI serves per arch and which rows PyPI lacks.

    `record`: a folder claimed before anything is read (`envkit.io.outputs.claim_output`: an earlier snapshot's, or
    new), given the documents read when the run succeeds. `write`: only the matrix files that change are replaced,
    each when it is still the regular file that was read (never written through a link).

    `matrix_dir`: the matrices folder (None: the shipped one). `index`, `jobs`, `deadline`, `retry`: where and how the
    documents are read online (`open_source`); an error's URLs are shown without their credentials."""
    folder = _folder(matrix_dir)
    with _redacted():
        return _refresh(
            folder,
            snapshot,
            record,
            write,
            today,
            packages,
            open_source(snapshot, record, index=index, jobs=jobs, deadline=deadline, retry=retry),
        )


def _refresh(
    matrix_dir: Path,
    snapshot: Path | None,
    record: Path | None,
    write: bool,
    today: str | None,
    packages: list[str] | None,
    src: Source,
) -> RefreshResult:
    from envkit.io.outputs import PYPI_SNAPSHOT, claim_output, replace_file

    path = matrix_dir / "python_packages.yaml"
    claim = None if record is None else claim_output(record, PYPI_SNAPSHOT, inputs=[snapshot, matrix_dir])
    day = today or src.read_date()
    names = packages or list(PACKAGES)
    keys = [(name, PACKAGES[name][1], False) for name in names]
    if packages is None:
        keys += [(k.package, k.since, True) for k in ROW_KINDS] + [("torch", TORCH_SINCE, False)]
    _read_projects(src, keys)
    derived = {name: derive(name, releases(src, name), day) for name in names}
    report: list[str] = []
    changes: list[RowChange] = []
    was = path.read_bytes()
    old = was.decode("utf-8")
    texts = {path.name: (old, render(old, derived))}
    if packages is None:
        from envkit.core.matrix import load_matrix_from

        lm = load_matrix_from(matrix_dir)
        report = torch_report(src, lm)
        changes, missing = wheel_rows(src, lm)
        report += [ch.line() for ch in changes] + missing
        texts.update(apply_row_changes(matrix_dir, changes, day))
    diff = "".join(
        "".join(
            difflib.unified_diff(io.StringIO(a).readlines(), io.StringIO(b).readlines(), fromfile=f"a/{name}", tofile=f"b/{name}")
        )
        for name, (a, b) in sorted(texts.items())
    )
    if claim is not None and src.recorded:  # read from PyPI (a snapshot read records nothing)
        writer = claim.writer()
        for rel, text in sorted(src.recorded.items()):
            writer.text(rel, text)
        writer.commit()
    changed = any(a != b for a, b in texts.values())
    if write:
        for name, (a, b) in sorted(texts.items()):
            if a != b:
                replace_file(matrix_dir / name, b.encode("utf-8"), was=a.encode("utf-8"))
    _done(src)
    return RefreshResult(diff=diff, changed=changed, rules=derived, path=path, report=report, rows=changes)


def find_new(
    matrix_dir: Path | None,
    *,
    snapshot: Path | None = None,
    index: str | None = None,
    jobs: int = JOBS,
    deadline: float | None = None,
    retry: Retrier | None = None,
) -> list[str]:
    """`envkit matrix refresh --new`: the releases on PyPI of the packages the matrix pins that it has no row for
    (`new_releases`) in `matrix_dir` (None: the shipped matrices); the documents read as `refresh` reads them."""
    from envkit.core.matrix import load_matrix_from

    folder = _folder(matrix_dir)
    with _redacted():
        src = open_source(snapshot, index=index, jobs=jobs, deadline=deadline, retry=retry)
        lm = load_matrix_from(folder)
        _read_projects(src, [(k.package, k.since, True) for k in ROW_KINDS] + [("torch", TORCH_SINCE, False)])
        found = new_releases(src, lm)
        _done(src)
        return found

"""Checking a bundle folder or archive against its manifest, without extracting anything.

An archive is read as `tar -xf` would extract it, with PEP 706's `data` filter as the reference and stricter:
every member must be a regular file or a folder under one top folder, with a canonical relative name (no
absolute path, no `..`), owned by root, without setuid/setgid/sticky bits, not writable by group or others,
without extended attributes, ACLs or flags, and with no duplicate or shadowed path (a later member of the same
path, a member under a path an earlier one made a file, a folder replacing a file); the listing must end where
tar's does (no damaged header that tar would skip to extract what follows). Then what extraction would create
must be exactly the manifest: every listed file with its sha256 and size, nothing else. A folder must hold
regular files and folders only (no link, FIFO or device). Files are hashed in parallel where the bytes can be
read so (a folder, an uncompressed archive); a compressed archive is read once, as a stream.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import stat
import tarfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.artifacts.wheels import LAYOUT
from envkit.errors import BadInput, CheckFailed, Where
from envkit.jobs.bundle.archive import is_archive

if TYPE_CHECKING:
    from envkit.models.bundle import BundleManifest

MANIFEST = str(LAYOUT.manifest)
SUMS = str(LAYOUT.sums)  # `sha256sum -c` input install.sh checks; the manifest records its digest
MAX_MEMBERS = 100_000  # an envkit bundle has a few hundred; more is a bomb, not a bundle
MAX_MANIFEST = 64 << 20
NOT_HASHED = "not hashed: the size differs"
# pax records tar applies beyond the name, size and times would change what extraction creates (xattrs, ACLs, flags)
_PAX_KEYS = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname", "hdrcharset", "comment"})
_FILE_TYPES = frozenset(tarfile.REGULAR_TYPES)  # regular, contiguous and sparse files: tar -xf makes a regular file
_READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error)


@dataclass
class VerifyReport:
    bundle: str
    files: int = 0
    bytes: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    modified: list[dict] = field(default_factory=list)
    digest: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.modified)

    def to_dict(self) -> dict:
        return {
            "bundle": self.bundle,
            "ok": self.ok,
            "files": self.files,
            "bytes": self.bytes,
            "manifest_sha256": self.digest,
            "missing": self.missing,
            "extra": self.extra,
            "modified": self.modified,
        }


def _parse_manifest(data: bytes, where: str) -> BundleManifest:
    from pydantic import ValidationError

    from envkit.models.bundle import BundleManifest

    try:
        return BundleManifest.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:
        raise CheckFailed(
            f"{where}: manifest.json is not a valid bundle manifest ({str(exc).splitlines()[0]})",
            where=Where(where),
            hint="The manifest was altered or truncated; get the bundle again from its source.",
        ) from None


def _refused(archive: str, name: str, why: str) -> CheckFailed:
    return CheckFailed(
        f"{archive}: refused: member {name!r} is unsafe ({why}); nothing was extracted",
        where=Where(archive, key=name),
        hint="Do not extract this archive; get the bundle again from a trusted source.",
    )


def _unreadable(archive: str, name: str | None, exc: BaseException | str, where: str = "at") -> BadInput:
    at = f"{where} member {name!r}" if name else "at its start"
    return BadInput(
        f"{archive}: unreadable archive {at} ({exc}); nothing was extracted",
        where=Where(archive, key=name),
        hint="The archive is truncated or damaged; get the bundle again.",
    )


def _kind(m: tarfile.TarInfo) -> str:
    if m.issym():
        return "a symbolic link"
    if m.islnk():
        return "a hard link"
    if m.ischr() or m.isblk():
        return "a device"
    if m.isfifo():
        return "a FIFO"
    return f"a member of type {m.type!r}, which tar does not extract as a file"


class _Extraction:
    """What `tar -xf` creates, member by member, in archive order; what it must not create is refused."""

    def __init__(self, archive: str) -> None:
        self.archive = archive
        self.kinds: dict[str, bool] = {}  # every path made so far -> it is a folder
        self.dirs: list[str] = []  # folder members, relative to the top folder
        self.root: str | None = None
        self.count = 0
        self.last: str | None = None
        self.filt = getattr(tarfile, "data_filter", None)  # Python >= 3.10.12 / 3.11.4: a second opinion
        self.dest = os.path.realpath("/nonexistent-envkit-verify-root")

    def _why(self, m: tarfile.TarInfo) -> str | None:
        name = m.name
        if m.type not in _FILE_TYPES and not m.isdir():
            return _kind(m)
        if name.startswith("/") or "\x00" in name:
            return "an absolute path"
        if ".." in name.split("/"):
            return "a '..' in its path"
        if name in ("", ".") or posixpath.normpath(name) != name:
            return "a path that is not plain (empty, './', '//' or a trailing '/'): tar and envkit could read it differently"
        if m.mode & 0o7000:
            return f"setuid, setgid or sticky bits (mode {m.mode:o})"
        if m.mode & 0o022:
            return f"writable by group or others (mode {m.mode:o})"
        if m.uid or m.gid or m.uname not in ("", "root") or m.gname not in ("", "root"):
            return f"owned by {m.uname or m.uid}:{m.gname or m.gid}, not root: tar -xf as root would give it to that owner"
        records = sorted(k for k in m.pax_headers if k not in _PAX_KEYS and not k.startswith("GNU.sparse."))
        if records:
            return f"extended header records {', '.join(records[:3])} (attributes, ACLs or flags tar can apply)"
        if self.filt is not None:
            try:
                if self.filt(m, self.dest).name != name:
                    return "a path tar's data filter would rewrite"
            except tarfile.FilterError as exc:
                return str(exc)
        return None

    def add(self, m: tarfile.TarInfo) -> str | None:
        """The path of a regular file member inside the top folder; None for a folder. Raises when refused."""
        self.count += 1
        if self.count > MAX_MEMBERS:
            raise _refused(self.archive, m.name, f"more than {MAX_MEMBERS} members: an envkit bundle has a few hundred")
        why = self._why(m)
        if why:
            raise _refused(self.archive, m.name, why)
        name, is_dir = m.name, m.isdir()
        parts = name.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            made = self.kinds.setdefault(above, True)
            if not made:
                raise _refused(self.archive, name, f"it lies under {above!r}, which an earlier member made a file")
        before = self.kinds.get(name)
        if before is not None and not (before and is_dir):
            why = (
                "a duplicate of an earlier member: tar -xf would keep the later one"
                if not before and not is_dir
                else "a folder replacing the file an earlier member made"
                if is_dir
                else "a file where an earlier member made a folder"
            )
            raise _refused(self.archive, name, why)
        self.kinds[name] = is_dir
        self.last = name
        if self.root is None:
            self.root = parts[0]
        elif parts[0] != self.root:
            raise BadInput(
                f"{self.archive}: not an envkit bundle (more than one top folder: {self.root!r}, {parts[0]!r})",
                where=Where(self.archive, key=name),
            )
        if is_dir:
            if len(parts) > 1:
                self.dirs.append("/".join(parts[1:]))
            return None
        if len(parts) == 1:
            raise BadInput(
                f"{self.archive}: not an envkit bundle (the file {name!r} lies outside a top folder)",
                where=Where(self.archive, key=name),
            )
        return "/".join(parts[1:])

    def members(self, tf: tarfile.TarFile):  # noqa: ANN201 - a generator of TarInfo
        """The archive's members in order, a read error being BadInput (exit 2) naming the last good member."""
        while True:
            try:
                m = tf.next()
            except _READ_ERRORS as exc:
                raise _unreadable(self.archive, self.last, exc) from None
            if m is None:
                return
            yield m

    def check_end(self, tf: tarfile.TarFile, drain: bool) -> None:
        """tarfile stops listing at the first block it cannot read as a header, tar -xf skips such a block and goes
        on: the listing must end at the end-of-archive marker (two zero blocks) or at the end of the data.
        `drain`: read on to the end of a compressed stream, so that its checksum is checked too."""
        try:
            tf.fileobj.seek(tf.offset)
            end = tf.fileobj.read(2 * tarfile.BLOCKSIZE)
            if drain:
                left = 1 << 20
                while left > 0 and (chunk := tf.fileobj.read(min(left, 1 << 16))):
                    left -= len(chunk)
        except _READ_ERRORS as exc:
            raise _unreadable(self.archive, self.last, exc) from None
        if end.strip(b"\0"):
            raise _unreadable(
                self.archive,
                self.last,
                f"a damaged header at byte {tf.offset}, which tar -xf would skip to extract what follows",
                where="after",
            )
        if self.root is None:
            raise BadInput(f"{self.archive}: not an envkit bundle (an empty archive)", where=Where(self.archive))


def check_members(tf: tarfile.TarFile, archive: str) -> tuple[str, list[tarfile.TarInfo]]:
    """Refuse unsafe members before any file's bytes are read; returns the top folder and the regular files."""
    ex = _Extraction(archive)
    files = [m for m in ex.members(tf) if ex.add(m) is not None]
    ex.check_end(tf, drain=False)
    assert ex.root is not None  # check_end refuses an archive without one
    return ex.root, files


def _hash_stream(fh) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    while chunk := fh.read(1 << 20):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def _jobs(jobs: int | None) -> int:
    return jobs or min(8, (os.cpu_count() or 2))


def _check_digest(path: Path, mdata: bytes, expect_digest: str | None) -> str:
    digest = hashlib.sha256(mdata).hexdigest()
    if expect_digest is not None and expect_digest.removeprefix("sha256:") != digest:
        raise CheckFailed(
            f"{path}: manifest.json has sha256 {digest}, not the expected {expect_digest.removeprefix('sha256:')}",
            hint="The bundle is not the one that was published; do not install it.",
        )
    return digest


def _needs_hash(expected: dict, rel: str, size: int) -> bool:
    """Only a listed file of the listed size is worth reading: anything else is extra or modified as it is."""
    f = expected.get(rel)
    return f is not None and f.size == size


def _read_small(tf: tarfile.TarFile, m: tarfile.TarInfo, archive: str) -> bytes:
    """The bytes of manifest.json or SHA256SUMS (read whole, so capped)."""
    if m.size > MAX_MANIFEST:
        raise CheckFailed(f"{archive}: {m.name} is {m.size} bytes, more than any bundle's", where=Where(archive, key=m.name))
    try:
        fh = tf.extractfile(m)
        assert fh is not None  # a regular member (the callers pick them)
        return fh.read()
    except _READ_ERRORS as exc:
        raise _unreadable(archive, m.name, exc) from None


def _verify_folder(path: Path, expect_digest: str | None, jobs: int | None):  # noqa: ANN202
    """A folder bundle: only regular files and folders (a link, FIFO, device or socket is refused), then hashed."""
    present: dict[str, int] = {}
    dirs: list[str] = []
    todo = [""]
    while todo:
        here = todo.pop()
        try:
            entries = [(e, e.stat(follow_symlinks=False)) for e in os.scandir(path / here)]
        except OSError as exc:
            raise BadInput(f"{path}: cannot read {here or '.'}: {exc.strerror or exc}", where=Where(str(path))) from None
        for e, st in entries:
            rel = f"{here}/{e.name}" if here else e.name
            why = None
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(e.path)
                leaves = not Path(os.path.realpath(e.path)).is_relative_to(path.resolve())
                why = f"a symbolic link to {target!r}{', out of the bundle' if leaves else ''}: a bundle holds none"
            elif stat.S_ISDIR(st.st_mode):
                todo.append(rel)
                dirs.append(rel)
                continue
            elif not stat.S_ISREG(st.st_mode):
                why = "a FIFO, device or socket: a bundle holds regular files only"
            elif st.st_mode & 0o7000:
                why = f"setuid, setgid or sticky bits (mode {stat.S_IMODE(st.st_mode):o})"
            if why:
                raise CheckFailed(
                    f"{path}: refused: {rel} is unsafe ({why})",
                    where=Where(str(path), key=rel),
                    hint="Do not install from this folder; get the bundle again from a trusted source.",
                )
            present[rel] = st.st_size
    if MANIFEST not in present:
        raise BadInput(f"{path}: not an envkit bundle (no {MANIFEST})", where=Where(str(path)))
    if present[MANIFEST] > MAX_MANIFEST:
        raise CheckFailed(f"{path}: manifest.json is {present[MANIFEST]} bytes, more than any bundle's", where=Where(str(path)))
    mdata = (path / MANIFEST).read_bytes()
    _check_digest(path, mdata, expect_digest)
    manifest = _parse_manifest(mdata, str(path))
    expected = {f.path: f for f in manifest.files}
    sums = (path / SUMS).read_bytes() if SUMS in present and present[SUMS] <= MAX_MANIFEST else None

    def h(rel: str) -> tuple[str, tuple[str, int]]:
        try:  # no link, no FIFO swapped in since the walk: opened without following, never blocking
            fd = os.open(path / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return rel, ("not a regular file", -1)
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder: open() would raise IsADirectoryError
            os.close(fd)
            return rel, ("not a regular file", -1)
        with open(fd, "rb", buffering=0) as fh:
            return rel, _hash_stream(fh)

    actual = {rel: (NOT_HASHED, size) for rel, size in present.items() if rel != MANIFEST}
    order = sorted((r for r, (_, size) in actual.items() if _needs_hash(expected, r, size)), key=lambda r: -expected[r].size)
    with ThreadPoolExecutor(max_workers=_jobs(jobs)) as pool:  # biggest first keeps every worker busy to the end
        actual.update(pool.map(h, order))
    return mdata, manifest, actual, dirs, sums


def _verify_plain(tf: tarfile.TarFile, path: Path, expect_digest: str | None, jobs: int | None):  # noqa: ANN202
    """An uncompressed archive: every header first (cheap: a seek each), then each member's bytes, at a known
    offset, hashed in parallel."""
    archive = str(path)
    ex = _Extraction(archive)
    files = [(rel, m) for m in ex.members(tf) if (rel := ex.add(m)) is not None]
    ex.check_end(tf, drain=False)
    mfile = next((m for rel, m in files if rel == MANIFEST), None)
    if mfile is None:
        raise BadInput(f"{path}: not an envkit bundle (no {ex.root}/{MANIFEST})", where=Where(archive))
    mdata = _read_small(tf, mfile, archive)
    _check_digest(path, mdata, expect_digest)
    manifest = _parse_manifest(mdata, archive)
    expected = {f.path: f for f in manifest.files}
    sfile = next((m for rel, m in files if rel == SUMS and m.size <= MAX_MANIFEST), None)
    sums = None if sfile is None else _read_small(tf, sfile, archive)
    actual: dict[str, tuple[str, int]] = {}
    todo = []
    for rel, m in files:
        if rel == MANIFEST:
            continue
        if not _needs_hash(expected, rel, m.size):
            actual[rel] = (NOT_HASHED, m.size)
        elif m.issparse():
            actual[rel] = _hash_member(tf, m, archive)
        else:
            todo.append((rel, m))
    fd = tf.fileobj.fileno()  # type: ignore[attr-defined]  # a TarFile opened on a file: the stubs' _Fileobj omits fileno

    def h_member(item: tuple[str, tarfile.TarInfo]) -> tuple[str, tuple[str, int]]:
        rel, m = item
        hm, off, end = hashlib.sha256(), m.offset_data, m.offset_data + m.size
        while off < end:
            chunk = os.pread(fd, min(1 << 20, end - off), off)
            if not chunk:
                raise _unreadable(archive, m.name, "the archive ends inside this member")
            hm.update(chunk)
            off += len(chunk)
        return rel, (hm.hexdigest(), m.size)

    if todo:
        with ThreadPoolExecutor(max_workers=_jobs(jobs)) as pool:  # biggest first keeps every worker busy
            actual.update(pool.map(h_member, sorted(todo, key=lambda t: -t[1].size)))
    return mdata, manifest, actual, ex.dirs, sums


def _hash_member(tf: tarfile.TarFile, m: tarfile.TarInfo, archive: str) -> tuple[str, int]:
    try:
        return _hash_stream(tf.extractfile(m))
    except _READ_ERRORS as exc:
        raise _unreadable(archive, m.name, exc) from None


def _verify_stream(tf: tarfile.TarFile, path: Path, expect_digest: str | None):  # noqa: ANN202
    """A compressed archive, read once: each member checked and hashed as it comes (after the manifest, only the
    listed files of the listed size); the manifest's digest is checked as soon as it is read."""
    archive = str(path)
    ex = _Extraction(archive)
    mdata = manifest = expected = sums = None
    actual: dict[str, tuple[str, int]] = {}
    for m in ex.members(tf):
        rel = ex.add(m)
        if rel is None:
            continue
        if rel == MANIFEST:
            mdata = _read_small(tf, m, archive)
            _check_digest(path, mdata, expect_digest)
            manifest = _parse_manifest(mdata, archive)
            expected = {f.path: f for f in manifest.files}
        elif expected is not None and not _needs_hash(expected, rel, m.size):
            actual[rel] = (NOT_HASHED, m.size)
        elif rel == SUMS and m.size <= MAX_MANIFEST:
            sums = _read_small(tf, m, archive)
            actual[rel] = (hashlib.sha256(sums).hexdigest(), len(sums))
        else:
            actual[rel] = _hash_member(tf, m, archive)
    ex.check_end(tf, drain=True)
    if mdata is None:
        raise BadInput(f"{path}: not an envkit bundle (no {ex.root}/{MANIFEST})", where=Where(archive))
    return mdata, manifest, actual, ex.dirs, sums


def verify(path: Path, expect_digest: str | None = None, jobs: int | None = None) -> VerifyReport:
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: no such bundle", where=Where(str(path)))
    rep = VerifyReport(bundle=str(path))
    if path.is_dir():
        mdata, manifest, actual, dirs, sums = _verify_folder(path, expect_digest, jobs)
    else:
        if not (is_archive(path) and path.is_file()):
            raise BadInput(f"{path}: not a bundle folder or a .tar/.tar.gz archive", where=Where(str(path)))
        try:
            tf = tarfile.open(path, "r:*")
        except _READ_ERRORS as exc:
            raise _unreadable(str(path), None, exc) from None
        with tf:
            if isinstance(tf.fileobj, io.BufferedReader):
                mdata, manifest, actual, dirs, sums = _verify_plain(tf, path, expect_digest, jobs)
            else:
                mdata, manifest, actual, dirs, sums = _verify_stream(tf, path, expect_digest)
    rep.digest = hashlib.sha256(mdata).hexdigest()  # checked against expect_digest before any file was hashed
    expected = {f.path: f for f in manifest.files}
    for rel, f in sorted(expected.items()):
        if rel not in actual:
            rep.missing.append(rel)
            continue
        sha, size = actual[rel]
        if sha != f.sha256 or size != f.size:
            rep.modified.append(
                {"path": rel, "expected_sha256": f.sha256, "actual_sha256": sha, "expected_size": f.size, "actual_size": size}
            )
        rep.files += 1
        rep.bytes += max(size, 0)
    needed = {posixpath.dirname(rel) for rel in [*expected, MANIFEST]}
    needed |= {d for n in list(needed) for d in _ancestors(n)}
    rep.extra = sorted(set(actual) - set(expected)) + sorted(f"{d}/" for d in set(dirs) - needed)
    if rep.ok:  # every file is the manifest's: then SHA256SUMS must say the same (else the report names the files)
        _check_sums(path, manifest, sums)
    return rep


def _check_sums(path: Path, manifest: BundleManifest, sums: bytes | None) -> None:
    """SHA256SUMS (what install.sh checks with `sha256sum -c`) must say what the manifest says, file for file:
    a forger who re-hashed a file in the manifest alone is caught here. A bundle without it is reported missing."""
    from envkit.artifacts.wheels import sha256sums

    if manifest.sha256sums is None or sums is None:
        return
    try:
        want = sha256sums((f.path, f.sha256) for f in manifest.files if f.path != SUMS)
    except BadInput as exc:
        raise CheckFailed(f"{path}: the manifest lists a path install.sh cannot check ({exc})", where=Where(str(path))) from None
    if hashlib.sha256(sums).hexdigest() != manifest.sha256sums or sums != want:
        raise CheckFailed(
            f"{path}: SHA256SUMS does not list the manifest's files with the manifest's sha256 (one of them was edited "
            "alone); do not install this bundle",
            where=Where(str(path), key=SUMS),
            hint="Get the bundle again from its source and check its manifest digest (--expect-digest).",
        )


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def is_bundle(path: Path) -> bool:
    """Is `path` a bundle envkit wrote: a folder or an archive whose manifest.json is a bundle manifest? (The
    ownership test of `bundle build -o`: what it may replace without --force.)"""
    path = Path(path)
    try:
        if path.is_dir():
            st = os.lstat(path / MANIFEST)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST:
                return False
            _parse_manifest((path / MANIFEST).read_bytes(), str(path))
            return True
        if not is_archive(path) or not path.is_file():
            return False
        with tarfile.open(path, "r:*") as tf:
            for i, m in enumerate(tf):
                if i > MAX_MEMBERS:
                    return False
                if m.isreg() and m.name.count("/") == 1 and m.name.endswith("/" + MANIFEST) and m.size <= MAX_MANIFEST:
                    fh = tf.extractfile(m)
                    assert fh is not None  # m.isreg()
                    _parse_manifest(fh.read(), str(path))
                    return True
    except (*_READ_ERRORS, CheckFailed):
        return False
    return False

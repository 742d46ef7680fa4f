"""Checking a bundle folder or archive against its manifest, without extracting anything: unsafe archive members
are refused before a byte is read, and every file is hashed (in parallel where the bytes can be read so)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.airgap.archive import is_archive
from envkit.errors import BadInput, CannotRun, CheckFailed, Where
from envkit.wheels import LAYOUT

if TYPE_CHECKING:
    from envkit.models.bundle import BundleManifest

MANIFEST = str(LAYOUT.manifest)


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
        return {"bundle": self.bundle, "ok": self.ok, "files": self.files, "bytes": self.bytes,
                "manifest_sha256": self.digest, "missing": self.missing, "extra": self.extra, "modified": self.modified}


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


def check_members(tf: tarfile.TarFile, archive: str) -> tuple[str, list[tarfile.TarInfo]]:
    """Refuse unsafe members before anything is read or written; returns the root folder and the files."""
    filt = getattr(tarfile, "data_filter", None)
    if filt is None:  # pragma: no cover - Python < 3.10.12 / 3.11.4
        raise CannotRun("this Python's tarfile has no extraction filters (PEP 706)", hint="Use Python >= 3.11.4 or 3.10.12.")
    dest = os.path.realpath("/nonexistent-envkit-verify-root")
    files, roots = [], set()
    for m in tf.getmembers():
        why = None
        if m.islnk():
            why = "a hard link"
        elif m.isdev() or m.isfifo():
            why = "a device or special file"
        else:
            try:
                safe = filt(m, dest)
                if safe.name != m.name or (safe.linkname or "") != (m.linkname or ""):
                    why = "an absolute path"  # the filter would rewrite it: refuse rather than guess
            except tarfile.FilterError as exc:
                why = str(exc)
        if why:
            raise CheckFailed(
                f"{archive}: refused: member {m.name!r} is unsafe ({why}); nothing was extracted",
                where=Where(archive, key=m.name),
                hint="Do not extract this archive; get the bundle again from a trusted source.",
            )
        parts = posixpath.normpath(m.name).split("/")
        roots.add(parts[0])
        if m.isfile() and len(parts) > 1:
            files.append(m)
    if len(roots) != 1:
        raise BadInput(f"{archive}: not an envkit bundle (expected one top folder, found {sorted(roots)[:5]})")
    return roots.pop(), files


def _hash_stream(fh) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    while chunk := fh.read(1 << 20):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def verify(path: Path, expect_digest: str | None = None, jobs: int | None = None) -> VerifyReport:
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: no such bundle", where=Where(str(path)))
    rep = VerifyReport(bundle=str(path))
    actual: dict[str, tuple[str, int]] = {}
    if path.is_dir():
        mpath = path / MANIFEST
        if not mpath.is_file():
            raise BadInput(f"{path}: not an envkit bundle (no {MANIFEST})", where=Where(str(path)))
        mdata = mpath.read_bytes()
        manifest_obj = _parse_manifest(mdata, str(path))
        present = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in filenames:
                full = Path(dirpath) / fn
                rel = full.relative_to(path).as_posix()
                if rel != MANIFEST:
                    present.append(rel)
        expected = {f.path: f for f in manifest_obj.files}

        def h(rel: str) -> tuple[str, tuple[str, int]]:
            full = path / rel
            if full.is_symlink() or not full.is_file():
                return rel, ("not a regular file", -1)
            with open(full, "rb", buffering=0) as fh:
                return rel, _hash_stream(fh)

        with ThreadPoolExecutor(max_workers=jobs or min(8, (os.cpu_count() or 2))) as pool:
            # biggest first keeps every worker busy to the end
            order = sorted(present, key=lambda r: -(expected[r].size if r in expected else 0))
            for rel, res in pool.map(h, order):
                actual[rel] = res
    else:
        if not is_archive(path):
            raise BadInput(f"{path}: not a bundle folder or a .tar/.tar.gz archive", where=Where(str(path)))
        try:
            tf = tarfile.open(path, "r:*")
        except tarfile.TarError as exc:
            raise CheckFailed(f"{path}: not a readable archive ({exc})", where=Where(str(path))) from None
        with tf:
            root, members = check_members(tf, str(path))
            mdata = None
            # an uncompressed archive: each member's bytes lie at a known offset, so they hash in parallel
            plain = isinstance(tf.fileobj, io.BufferedReader)
            todo = []
            for m in members:
                rel = m.name[len(root) + 1:]
                if rel == MANIFEST:
                    mdata = tf.extractfile(m).read()
                elif plain and not m.issparse():
                    todo.append((rel, m))
                else:
                    actual[rel] = _hash_stream(tf.extractfile(m))
            if todo:
                fd = tf.fileobj.fileno()

                def h_member(m: tarfile.TarInfo) -> tuple[str, int]:
                    hm, off, end = hashlib.sha256(), m.offset_data, m.offset_data + m.size
                    while off < end:
                        chunk = os.pread(fd, min(1 << 20, end - off), off)
                        if not chunk:
                            raise CheckFailed(f"{path}: truncated archive (member {m.name!r})", where=Where(str(path)))
                        hm.update(chunk)
                        off += len(chunk)
                    return hm.hexdigest(), m.size

                with ThreadPoolExecutor(max_workers=jobs or min(8, (os.cpu_count() or 2))) as pool:
                    order = sorted(todo, key=lambda t: -t[1].size)  # biggest first keeps every worker busy
                    done = dict(zip((id(m) for _, m in order), pool.map(h_member, (m for _, m in order))))
                for rel, m in todo:  # in archive order: a later member of the same name wins, as before
                    actual[rel] = done[id(m)]
            if mdata is None:
                raise BadInput(f"{path}: not an envkit bundle (no {root}/{MANIFEST})", where=Where(str(path)))
            manifest_obj = _parse_manifest(mdata, str(path))
            expected = {f.path: f for f in manifest_obj.files}
    rep.digest = hashlib.sha256(mdata).hexdigest()
    if expect_digest is not None and expect_digest.removeprefix("sha256:") != rep.digest:
        raise CheckFailed(
            f"{path}: manifest.json has sha256 {rep.digest}, not the expected {expect_digest.removeprefix('sha256:')}",
            hint="The bundle is not the one that was published; do not install it.",
        )
    for rel, f in sorted(expected.items()):
        if rel not in actual:
            rep.missing.append(rel)
            continue
        sha, size = actual[rel]
        if sha != f.sha256 or size != f.size:
            rep.modified.append({"path": rel, "expected_sha256": f.sha256, "actual_sha256": sha,
                                 "expected_size": f.size, "actual_size": size})
        rep.files += 1
        rep.bytes += max(size, 0)
    rep.extra = sorted(set(actual) - set(expected))
    return rep

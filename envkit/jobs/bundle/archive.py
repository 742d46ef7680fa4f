"""Writing a bundle plan: a folder (cache entries hard-linked) or a reproducible archive, and the records that
let an unchanged archive be kept rather than written again."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from envkit import __version__
from envkit.errors import CannotRun
from envkit.io.outputs import atomic_dir, atomic_stream, atomic_write_bytes, plain_relpath
from envkit.jobs.bundle.uptodate import archive_stamp, output_key

if TYPE_CHECKING:  # the writers take a plan; importing them (is_archive) must not cost the models
    from envkit.jobs.bundle.plan import BundlePlan, Entry

ARCHIVES = (".tar", ".tar.gz", ".tgz")  # what `bundle build -o` writes as an archive (anything else: a folder)
MTIME = 315532800  # 1980-01-01, the zip epoch: every entry gets it, so archives are reproducible


def write_dir(plan: BundlePlan, out: Path) -> None:
    """A folder bundle; cache entries are hard-linked when on the same file system (read-only), else copied.

    Every entry's path is a plain relative path (no `..`, not absolute): nothing is written outside `out`."""
    import shutil

    with atomic_dir(out) as tmp:
        for e in plan.all_entries():
            dest = tmp / plain_relpath(e.path, str(out))
            dest.parent.mkdir(parents=True, exist_ok=True)
            if e.data is not None:
                dest.write_bytes(e.data)
                os.chmod(dest, e.mode)
            elif e.link:
                try:
                    os.link(e.file(), dest)
                except OSError:
                    shutil.copyfile(e.file(), dest)
                    os.chmod(dest, 0o444)
            else:
                shutil.copyfile(e.file(), dest)
                os.chmod(dest, e.mode)


class _HashingWriter:
    """A write-only file that hashes what passes through it (the archive's sha256 without reading it back)."""

    def __init__(self, raw) -> None:
        self.raw, self.h, self.n = raw, hashlib.sha256(), 0

    def write(self, b) -> int:
        self.h.update(b)
        self.n += len(b)
        return self.raw.write(b)

    def tell(self) -> int:
        return self.n

    def flush(self) -> None:
        self.raw.flush()


def _tar_mode(e: Entry) -> int:
    return 0o755 if e.mode & 0o111 else 0o644


def archive_key(plan: BundlePlan, out: Path) -> str:
    """Everything the bytes of `write_tar(plan, out)` depend on: equal keys, byte-identical archives.

    Each entry by path, sha256, size and mode (the manifest's digest among them), the root folder, the
    compression, and the writers (envkit's, Python's tarfile, zlib's deflate)."""
    import sys
    import zlib

    gz = out.name.endswith((".tar.gz", ".tgz"))
    doc = {
        "v": 1,
        "envkit": __version__,
        "python": sys.version,
        "zlib": zlib.ZLIB_RUNTIME_VERSION if gz else None,
        "gzip": gz,
        "root": plan.root,
        "entries": [[e.path, e.sha256, e.size, _tar_mode(e)] for e in plan.all_entries()],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _record_path(plan: BundlePlan, out: Path) -> Path | None:
    if plan.state is None:
        return None
    return plan.state / output_key(out)


def _reusable(plan: BundlePlan, out: Path, key: str) -> str | None:
    """The sha256 of `out` when envkit wrote it from an identical plan and it has not changed since; else None."""
    rec = _record_path(plan, out)
    if rec is None:
        return None
    try:
        lines = rec.read_text().split("\n")
        st = os.stat(out)
    except OSError:
        return None
    if len(lines) >= 3 and lines[0] == key and lines[1] == archive_stamp(st) and len(lines[2]) == 64:
        return lines[2]
    return None


def _remember(plan: BundlePlan, out: Path, key: str, digest: str) -> None:
    rec = _record_path(plan, out)
    if rec is None:
        return
    try:
        atomic_write_bytes(rec, f"{key}\n{archive_stamp(os.stat(out))}\n{digest}\n".encode(), fsync=False)
    except (OSError, CannotRun):
        pass  # without the record, the next build writes the archive again


def write_tar(plan: BundlePlan, out: Path) -> str:
    """A reproducible archive: sorted entries, fixed times and owners, no directories; gzip without a timestamp.

    Returns the archive's sha256. When `out` is an archive this envkit wrote from an identical plan (same
    `archive_key`) and it is unchanged since (size, mtime, ctime, inode, device, recorded in the cache like the
    wheel entries' `.ok`), it is kept as it is: writing it again would give the same bytes."""
    import gzip

    key = archive_key(plan, out)
    digest = _reusable(plan, out, key)
    if digest is not None:
        return digest
    with atomic_stream(out) as raw:
        hashing = _HashingWriter(raw)
        gz = (
            gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6)
            if out.name.endswith((".tar.gz", ".tgz"))
            else None
        )
        fileobj = gz if gz is not None else hashing
        # typeshed's tarfile.open overloads lack copybufsize (a TarFile argument open passes on)
        with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT, copybufsize=1 << 20) as tf:  # type: ignore[call-overload]
            for e in plan.all_entries():
                info = tarfile.TarInfo(str(plain_relpath(f"{plan.root}/{e.path}", str(out))))
                info.size, info.mtime, info.mode = e.size, MTIME, _tar_mode(e)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if e.data is not None:
                    tf.addfile(info, io.BytesIO(e.data))
                else:
                    with open(e.file(), "rb") as fh:
                        tf.addfile(info, fh)
        if gz is not None:
            gz.close()
    digest = hashing.h.hexdigest()
    _remember(plan, out, key, digest)
    return digest


def is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVES)

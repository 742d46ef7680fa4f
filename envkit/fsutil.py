"""Atomic writes: a temp file in the same folder, fsync, then rename. A failed run leaves nothing half-written."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from envkit.errors import CannotRun, Where


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644, *, fsync: bool = True) -> None:
    """Write `data` to `path` all at once or not at all; an unwritable place is CannotRun (exit 2).

    A path that is a device or a pipe (`-o /dev/null`, `-o /dev/stdout`) is written in place: renaming a file
    over it would replace the device itself (as root, /dev/null would become a regular file)."""
    import stat

    path = Path(path)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise CannotRun(f"cannot write {path}: {exc.strerror or exc}", where=Where(str(path))) from None
        return
    with atomic_stream(path, mode, fsync=fsync) as fh:
        fh.write(data)


@contextmanager
def atomic_stream(path: Path, mode: int = 0o644, *, fsync: bool = True) -> Iterator[BinaryIO]:
    """A file written as a stream into a temp file beside `path`, then renamed over it: all or nothing.

    The temp file is removed when the body raises; an unwritable place is CannotRun (exit 2)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise CannotRun(
            f"cannot write {path}: {exc.strerror or exc}", where=Where(str(path)),
            hint="Choose a writable output path.",
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """A folder filled beside `path`, then swapped into its place (what was there is removed after the swap).

    The body fills the folder it is given; when it raises, that folder is removed and `path` is untouched."""
    import shutil

    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if os.path.lexists(path):
            os.replace(path, old)
        os.replace(tmp, path)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        elif os.path.lexists(old):
            old.unlink()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link a large input into place when possible (same file system), else copy it.

    A symlink is resolved first: a hard link to the link itself would dangle in a build context.
    """
    import shutil

    src = Path(src).resolve()
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a file, read in chunks into one reused buffer."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(chunk)
        view = memoryview(buf)
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    return h.hexdigest()

"""Atomic writes (a temp file in the same folder, fsync, then rename: a failed run leaves nothing half-written) and
the ownership of outputs: envkit replaces only what it made itself (a marker, or the caller's own test), or what
`--force` hands over, and never writes outside the output it was given."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from envkit.errors import BadInput, CannotRun, Where

OUTPUT_MARKER = ".envkit-output"  # in every folder output envkit writes (but bundles: their manifest says it)
BUNDLE, IMAGE_CONTEXT, LAUNCH_SET = "bundle", "image-context", "launch-set"  # the kinds of outputs
KINDS = {BUNDLE: "bundle", IMAGE_CONTEXT: "image build context", LAUNCH_SET: "launch set"}


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644, *, fsync: bool = True) -> None:
    """Write `data` to `path` all at once or not at all; an unwritable place is CannotRun (exit 2).

    A path that is a device or a pipe (`-o /dev/null`, `-o /dev/stdout`) is written in place: renaming a file
    over it would replace the device itself (as root, /dev/null would become a regular file)."""
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


def _temp_prefix(path: Path) -> str:
    """The name a temp file beside `path` starts with: the writer's pid in it tells debris from work in progress."""
    return f".{path.name}.{os.getpid()}-"


@contextmanager
def atomic_stream(path: Path, mode: int = 0o644, *, fsync: bool = True) -> Iterator[BinaryIO]:
    """A file written as a stream into a temp file beside `path`, then renamed over it: all or nothing.

    The temp file is removed when the body raises; an unwritable place is CannotRun (exit 2)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise CannotRun(
            f"cannot write {path}: {exc.strerror or exc}",
            where=Where(str(path)),
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
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from None
        raise


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """A folder filled beside `path`, then swapped into its place (what was there is removed after the swap).

    The body fills the folder it is given; when it raises, that folder is removed and `path` is untouched.
    Whether what is at `path` may be replaced is the caller's question (`claim_output`)."""
    import shutil

    path = Path(path).absolute()
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    try:
        _remove(tmp)
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise CannotRun(
            f"cannot write {path}: {exc.strerror or exc}", where=Where(str(path)), hint="Choose a writable output path."
        ) from None
    try:
        yield tmp
        if os.path.lexists(path):
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from None
        raise
    try:
        _remove(old)  # the new folder is in place; what was there goes
    except OSError:
        pass


def _cannot_write(path: Path, exc: OSError) -> CannotRun:
    """An OSError while writing `path`: exit 2, naming the other file when it was another (a source being read)."""
    other = str(exc.filename or "")
    about = f" ({other})" if other and other != str(path) and not Path(other).name.startswith(f".{path.name}.") else ""
    return CannotRun(
        f"cannot write {path}: {exc.strerror or exc}{about}",
        where=Where(str(path)),
        hint="Choose a writable output path with room for it.",
    )


def atomic_write_text(path: Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link a large input into place when possible (same file system), else copy it; all or nothing.

    A symlink is resolved first: a hard link to the link itself would dangle in a build context. The source is
    never removed, even when it already lies at `dst` (an input handed in from inside the output folder): the
    link or copy is made beside `dst` and renamed over it."""
    import shutil

    src = Path(src).resolve()
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        if not dst.is_symlink() and os.path.samefile(src, dst):
            return  # already in place: it is the source itself
    except OSError:
        pass  # no dst yet
    tmp = dst.with_name(f"{_temp_prefix(dst)}link.tmp")
    _remove(tmp)
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        _remove(tmp)
        raise


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


# --- outputs are ours alone ----------------------------------------------------------------------
def plain_relpath(rel: str, where: str | None = None) -> PurePosixPath:
    """A relative POSIX path with no `..`, no empty name, no NUL or newline: what may be joined under an output."""
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or not p.parts or any(c in rel for c in "\x00\n\r"):
        raise BadInput(
            f"{rel!r} is not a plain relative path: refusing to write it",
            where=Where(where) if where else None,
            hint="A lock or manifest names files outside the output; get it again from its source.",
        )
    return p


def inside(base: Path, rel: str) -> Path:
    """`base/rel`, once checked to stay under `base` with every link on the way resolved (else BadInput, exit 2)."""
    dest = Path(base) / plain_relpath(rel, str(base))
    if not dest.resolve().is_relative_to(Path(base).resolve()):
        raise BadInput(
            f"{dest} leads outside {base} (a link on the way): refusing to write it",
            where=Where(str(dest)),
            hint=f"Remove the link from {base}, or pass another output.",
        )
    return dest


def mark_output(folder: Path, kind: str) -> None:
    """Record in `folder` that envkit wrote it as an output of `kind` (see `claim_output`)."""
    atomic_write_text(Path(folder) / OUTPUT_MARKER, kind + "\n")


def is_marked(folder: Path, kind: str) -> bool:
    marker = Path(folder) / OUTPUT_MARKER
    try:
        st = os.lstat(marker)
        return stat.S_ISREG(st.st_mode) and st.st_size < 256 and marker.read_text().strip() == kind
    except (OSError, UnicodeDecodeError):
        return False


def claim_output(
    path: Path, kind: str, *, force: bool = False, folder: bool = True, is_ours: Callable[[Path], bool] | None = None
) -> None:
    """May envkit replace what is at `path` with its output of `kind`? The one ownership check of every command.

    Yes when nothing is there, an empty folder, a previous output of the same kind (a folder with its
    `OUTPUT_MARKER`, or what `is_ours` recognizes: a bundle by its manifest) or when `force` is given; else
    BadInput (exit 2) and nothing is touched. A folder where a file goes (or the reverse without `force`), a
    device or a pipe is never replaced. Debris of an earlier run that was killed is removed first."""
    path = Path(path)
    label = KINDS.get(kind, kind)
    clean_debris(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CannotRun(f"cannot look at {path}: {exc.strerror or exc}", where=Where(str(path))) from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        if not folder:
            raise BadInput(
                f"{path} is a folder; the {label} written there is a file",
                where=Where(str(path)),
                hint="Pass an archive path that is not a folder.",
            )
        try:
            empty = not any(os.scandir(path))
        except OSError:
            empty = False
        ours = empty or is_marked(path, kind) or (is_ours is not None and is_ours(path))
        what = "a folder envkit did not write"
        if ours and not empty:
            clean_debris_inside(path)
    elif stat.S_ISREG(mode):
        ours = not folder and is_ours is not None and is_ours(path)
        what = "a file envkit did not write" if not folder else "a file"
    elif stat.S_ISLNK(mode):
        ours, what = False, "a symbolic link"
    else:
        raise BadInput(f"{path} is a device, pipe or socket: envkit writes no {label} there", where=Where(str(path)))
    if ours or force:
        return
    raise BadInput(
        f"{path} exists and is {what} (not an earlier envkit {label}): refusing to replace it",
        where=Where(str(path)),
        hint="Choose another output path, move it away yourself, or pass --force to let envkit replace it.",
    )


def _debris_pid(name: str, base: str) -> int | None:
    """The pid of the envkit run that left `name` beside `base` (a .partial-/.old- folder or a temp file), else None."""
    m = re.fullmatch(re.escape(f".{base}.") + r"(?:(?:partial|old)-(\d+)|(\d+)-[^/]*\.tmp)", name)
    return int(m[1] or m[2]) if m else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this run is not writing that output yet: what it left is from an earlier call
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid <= 1 << 22  # another user's live process (pid_max is at most 2**22)
    return True


def clean_debris(path: Path) -> list[Path]:
    """Remove what a killed envkit run left beside `path` (`.NAME.partial-PID`, `.NAME.old-PID`, `.NAME.PID-*.tmp`)
    when that run is no longer alive; returns what was removed."""
    path = Path(path).absolute()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for e in entries:
        pid = _debris_pid(e.name, path.name) if e.name.startswith(f".{path.name}.") else None
        if pid is not None and not _alive(pid):
            _remove(Path(e.path))
            removed.append(Path(e.path))
    return removed


def clean_debris_inside(folder: Path) -> None:
    """Temp files of a killed run inside an output envkit writes in place (`.NAME.PID-*.tmp`)."""
    for dirpath, _dirs, files in os.walk(folder):
        for fn in files:
            m = re.fullmatch(r"\.(.+)\.(\d+)-[^/]*\.tmp", fn)
            if m and not _alive(int(m[2])):
                _remove(Path(dirpath) / fn)


def _remove(p: Path) -> None:
    """Remove a file, a link (never what it points at) or a whole folder; nothing there is fine."""
    import shutil

    try:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    except FileNotFoundError:
        pass

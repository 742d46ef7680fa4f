"""Atomic writes (a temp file in the same folder, fsync, then rename: a failed run leaves nothing half-written) and
the ownership of outputs: envkit replaces only what it made itself (a marker, or the caller's own test), or what
`--force` hands over, and never writes outside the output it was given."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NoReturn

from envkit.errors import BadInput, CannotRun, Where

OUTPUT_MARKER = ".envkit-output"  # the manifest of every folder output envkit writes (but bundles: their manifest.json)
BUNDLE, IMAGE_CONTEXT, LAUNCH_SET = "bundle", "image-context", "launch-set"  # the kinds of outputs
LAUNCH_PROFILE, PROVISION, SMOKE, PYPI_SNAPSHOT = "launch-profile", "provision", "smoke-run", "pypi-snapshot"
K8S_BASE = "kubernetes-base"  # a kind is [a-z-] only
KINDS = {
    BUNDLE: "bundle",
    IMAGE_CONTEXT: "image build context",
    LAUNCH_SET: "launch set",
    LAUNCH_PROFILE: "launch profile",
    PROVISION: "provision work folder",
    SMOKE: "smoke run",
    PYPI_SNAPSHOT: "PyPI snapshot",
    K8S_BASE: "Kubernetes base",
}


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


# --- outputs owned by a manifest ---------------------------------------------------------------------
# Every folder envkit writes holds OUTPUT_MARKER, a manifest: the kind of output and every file envkit wrote
# there (relative path, sha256, size; a symbolic link envkit made by its target), written atomically last. A
# rerun replaces or removes only a listed file whose content is still what envkit wrote; a file the user added
# or changed is never deleted (refused, listed: exit 2), nor an input named on the command line (by resolved path
# or by device and inode). The manifest is untrusted input: a strict parse, a size cap, plain relative paths, no
# link followed; a planted one can make envkit remove only a file that matches what it lists, inside the output.
MANIFEST_FORMAT = 1
MAX_MANIFEST = 8 << 20  # bytes
MAX_FILES = 100_000  # files in an output folder (and entries in its manifest)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LIST_AT_MOST = 20

# What an output of each kind held before the manifest (a marker holding only the kind): a folder holding
# nothing else is taken over as envkit's (its files recorded as they are); anything else refuses the folder.
_LEGACY = {
    IMAGE_CONTEXT: re.compile(
        r"(Dockerfile|envkit\.lock|\.dockerignore|python/((torch|rest|serving)/)?requirements\.txt"
        r"|python/((torch|rest|serving)/)?wheels/[^/]+\.whl|artifacts/[^/]+)"
    ),
    LAUNCH_SET: re.compile(
        r"(rank_table\.json|rank_table\.schema\.json|launch\.json|hosts/[^/]+/(accelerate_config\.yaml|hccl_env\.sh|torchrun\.sh))"
    ),
}
_WHOLE = {BUNDLE}  # kinds replaced whole (a folder swapped in): nothing but envkit's files may be in them


def _entry_problem(e: object) -> str | None:
    """Why `e` is not a manifest entry ({path, sha256, size} or {path, link}), or None."""
    if not isinstance(e, dict):
        return "an entry is not an object"
    path = e.get("path")
    if not isinstance(path, str) or not 0 < len(path) <= 4096:
        return "an entry has no path"
    p = PurePosixPath(path)
    if (
        not p.parts  # "."
        or p.is_absolute()
        or str(p) != path
        or any(part in ("", ".", "..") for part in p.parts)
        or any(c in path for c in "\x00\n\r\\")
        or p.parts[0] == OUTPUT_MARKER
    ):
        return f"{path!r} is not a plain relative path"
    if set(e) == {"path", "link"}:
        link = e["link"]
        return None if isinstance(link, str) and 0 < len(link) <= 4096 and "\x00" not in link else f"{path!r}: a bad link"
    if set(e) != {"path", "sha256", "size"}:
        return f"{path!r}: keys {sorted(e)} (path, sha256, size or path, link)"
    sha, size = e["sha256"], e["size"]
    if not (isinstance(sha, str) and _SHA256.fullmatch(sha)) or type(size) is not int or not 0 <= size < 1 << 50:
        return f"{path!r}: a bad sha256 or size"
    return None


def _entries(items: object, key: str) -> dict[str, dict]:
    if not isinstance(items, list) or len(items) > MAX_FILES:
        raise ValueError(f"{key} is not a list of at most {MAX_FILES} entries")
    out: dict[str, dict] = {}
    for e in items:
        why = _entry_problem(e)
        if why:
            raise ValueError(why)
        assert isinstance(e, dict)
        if out and e["path"] <= next(reversed(out)):
            raise ValueError(f"{key} is not sorted by path, each path once")
        out[e["path"]] = dict(e)
    paths = set(out)
    for path in out:
        parent = PurePosixPath(path).parent
        while str(parent) != ".":
            if str(parent) in paths:
                raise ValueError(f"{str(parent)!r} is listed as a file and as a folder")
            parent = parent.parent
    return out


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("a key appears twice")
    return dict(pairs)


@dataclass
class Manifest:
    kind: str
    files: dict[str, dict] = field(default_factory=dict)
    pending: dict[str, dict] = field(default_factory=dict)  # what a run was writing when it stopped
    legacy: bool = False  # a marker of an earlier envkit: the kind only

    def to_bytes(self) -> bytes:
        doc: dict[str, object] = {
            "envkit_output": MANIFEST_FORMAT,
            "kind": self.kind,
            "files": [self.files[p] for p in sorted(self.files)],
        }
        if self.pending:
            doc["pending"] = [self.pending[p] for p in sorted(self.pending)]
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def parse_manifest(data: bytes) -> Manifest:
    """The manifest of an output folder, strictly (ValueError says what is wrong)."""
    if len(data) > MAX_MANIFEST:
        raise ValueError(f"larger than {MAX_MANIFEST} bytes")
    text = data.decode("utf-8")
    if re.fullmatch(r"[a-z-]{1,40}\n", text):  # an earlier envkit's marker: the kind alone
        return Manifest(kind=text.strip(), legacy=True)
    doc = json.loads(text, object_pairs_hook=_no_duplicates)
    if not isinstance(doc, dict) or type(doc.get("envkit_output")) is not int or doc["envkit_output"] != MANIFEST_FORMAT:
        raise ValueError(f"not an envkit output manifest (format {MANIFEST_FORMAT})")
    if not set(doc) <= {"envkit_output", "kind", "files", "pending"} or "files" not in doc:
        raise ValueError(f"keys {sorted(doc)}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not re.fullmatch(r"[a-z-]{1,40}", kind):
        raise ValueError("no kind")
    return Manifest(kind=kind, files=_entries(doc["files"], "files"), pending=_entries(doc.get("pending", []), "pending"))


def _read_manifest(folder: Path) -> tuple[Manifest | None, str]:
    """The folder's manifest, or None and why there is no valid one."""
    marker = folder / OUTPUT_MARKER
    try:
        st = os.lstat(marker)
    except FileNotFoundError:
        return None, f"no {OUTPUT_MARKER}"
    except OSError as exc:
        return None, f"{OUTPUT_MARKER} cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{OUTPUT_MARKER} is not a regular file"
    if st.st_size > MAX_MANIFEST:
        return None, f"{OUTPUT_MARKER} is larger than {MAX_MANIFEST} bytes"
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_MANIFEST + 1)
        return parse_manifest(data), ""
    except OSError as exc:
        return None, f"{OUTPUT_MARKER} cannot be read ({exc.strerror})"
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None, f"{OUTPUT_MARKER} is not a valid manifest ({(str(exc).splitlines() or ['nested too deep'])[0][:200]})"


_HASHES: dict[tuple[int, int, int, int, int], str] = {}  # (dev, ino, size, mtime_ns, ctime_ns) -> sha256


def _hash_fd(fd: int, st: os.stat_result) -> str:
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with os.fdopen(os.dup(fd), "rb", buffering=0) as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def _entry_of(full: Path, rel: str) -> dict | None:
    """What is at `full` as a manifest entry (a regular file by sha256 and size, a link by its target), never
    following a link; None for anything else (a folder, a FIFO, a device) or what cannot be read."""
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            return {"path": rel, "link": os.readlink(full)}
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            return {"path": rel, "sha256": _hash_fd(fd, st), "size": st.st_size}
        finally:
            os.close(fd)
    except OSError:
        return None


def _matches(full: Path, e: dict) -> bool:
    """Is what is at `full` what the entry records (a regular file of that size and sha256, or that link)?"""
    try:
        st = os.lstat(full)
    except OSError:
        return False
    if "link" in e:
        return stat.S_ISLNK(st.st_mode) and _entry_of(full, e["path"]) == e
    if "sha256" not in e or not stat.S_ISREG(st.st_mode) or st.st_size != e["size"]:
        return False
    return _entry_of(full, e["path"]) == e


class _Inputs:
    """The inputs named on the command line: files and folders, by resolved path and by device and inode."""

    def __init__(self, paths: Iterable[Path | str | None]) -> None:
        self.files: set[Path] = set()
        self.dirs: set[Path] = set()
        self.ids: set[tuple[int, int]] = set()
        self.dir_ids: set[tuple[int, int]] = set()
        for p in paths:
            if p is None or str(p) in ("", "-"):
                continue
            try:
                st = os.stat(p)
                resolved = Path(p).resolve()
            except (OSError, RuntimeError):
                continue
            if stat.S_ISDIR(st.st_mode):
                self.dirs.add(resolved)
                self.dir_ids.add((st.st_dev, st.st_ino))
            else:
                self.files.add(resolved)
                self.ids.add((st.st_dev, st.st_ino))

    def by_path(self, full: Path) -> bool:
        try:
            r = full.resolve()
        except (OSError, RuntimeError):
            return False
        return r in self.files or any(r == d or r.is_relative_to(d) for d in self.dirs)

    def by_inode(self, full: Path) -> bool:
        try:
            st = os.stat(full)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in (self.dir_ids if stat.S_ISDIR(st.st_mode) else self.ids)


def _debris_inside(name: str) -> tuple[str, int] | None:
    """(NAME, pid) of `.NAME.PID-*.tmp`, the temp file of an atomic write of NAME; else None."""
    m = re.fullmatch(r"\.(.+)\.(\d{1,12})-[^/]*\.tmp", name)
    return (m[1], int(m[2])) if m else None


def _scan(folder: Path, under: tuple[tuple[int, int], ...] = ()) -> Iterator[tuple[str, os.DirEntry, bool]]:
    """Every entry of `folder` that is not a folder (files, links, FIFOs...), as (relative path, entry, whether a
    folder on the way is an input folder by device and inode); links are never followed."""
    stack: list[tuple[str, str, bool]] = [(str(folder), "", False)]
    while stack:
        path, rel, in_input = stack.pop()
        with os.scandir(path) as it:
            for e in sorted(it, key=lambda e: e.name):
                r = f"{rel}{e.name}"
                if e.is_dir(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    stack.append((e.path, r + "/", in_input or (st.st_dev, st.st_ino) in under))
                else:
                    yield r, e, in_input


def _listing(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:_LIST_AT_MOST])
    return shown + (f" and {len(names) - _LIST_AT_MOST} more" if len(names) > _LIST_AT_MOST else "")


@dataclass
class Claim:
    """An output envkit may write: what is there, and whose it is (`claim_output`)."""

    path: Path
    kind: str
    force: bool = False
    ours: dict[str, dict] = field(default_factory=dict)  # listed and unchanged: envkit may replace or remove them
    theirs: dict[str, str] = field(default_factory=dict)  # a file envkit did not write (or changed since) -> why
    inputs_inside: list[str] = field(default_factory=list)  # inputs of this command inside the output: kept
    inputs: _Inputs = field(default_factory=lambda: _Inputs(()))
    _stage: Path | None = None

    @property
    def label(self) -> str:
        return KINDS.get(self.kind, self.kind)

    def writer(self) -> OutputWriter:
        return OutputWriter(self)

    def stage(self) -> Path:
        """A folder beside the output (`.NAME.partial-PID`) for what a run writes before it is known to succeed
        (logs, fetched files), moved into the output by `OutputWriter.staged`; removed by `unstage`, at exit,
        or (a killed run's) by the next run of the same output."""
        tmp = self.path.with_name(f".{self.path.name}.partial-{os.getpid()}")
        if self._stage != tmp:
            try:
                _remove(tmp)
                tmp.mkdir(parents=True)
            except OSError as exc:
                raise _cannot_write(self.path, exc) from None
            self._stage = tmp
            atexit.register(_remove_quietly, tmp)
        return tmp

    def unstage(self) -> None:
        if self._stage is not None:
            _remove_quietly(self._stage)
            self._stage = None

    @contextmanager
    def staging(self) -> Iterator[Path]:
        try:
            yield self.stage()
        finally:
            self.unstage()


def _remove_quietly(p: Path) -> None:
    try:
        _remove(p)
    except OSError:
        pass


def claim_output(
    path: Path,
    kind: str,
    *,
    force: bool | None = None,
    folder: bool = True,
    is_ours: Callable[[Path], bool] | None = None,
    listing: Callable[[Path], dict[str, dict] | None] | None = None,
    inputs: Iterable[Path | str | None] = (),
    written: Iterable[str] = (),
) -> Claim:
    """May envkit write its output of `kind` at `path`? The one ownership check of every writing command.

    A folder output: yes when nothing is there, an empty folder, or a folder whose manifest (of this kind) lists
    every file in it with its content unchanged, but for the `inputs` of the command (never touched). A file
    the user added or changed is refused (BadInput, exit 2, each named); `force` lets envkit write beside such
    files (None: the command has no --force), never replacing or deleting one (`OutputWriter.commit` refuses a write onto one). A folder of another
    kind, a file, a link, a device or a pipe where the folder goes is refused, `force` or not. `listing` reads a
    folder's own record instead of the manifest (a bundle's manifest.json); a bundle is replaced whole, so it may
    hold nothing else, inputs included. A file output (`folder=False`, an archive) is replaced only when `is_ours`
    recognizes it (a bundle archive) and it is no input. `written`: paths (files or folders) this very run wrote
    in place since it claimed the folder, to be recorded (`OutputWriter.adopt`), not refused. Debris of an earlier
    run that was killed is removed."""
    path = Path(path).absolute()
    label = KINDS.get(kind, kind)
    ins = _Inputs(inputs)
    claim = Claim(path=path, kind=kind, force=bool(force), inputs=ins)
    never = "" if force is None else " (--force never replaces what envkit did not write.)"
    clean_debris(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return claim
    except OSError as exc:
        raise CannotRun(f"cannot look at {path}: {exc.strerror or exc}", where=Where(str(path))) from None
    if not folder:
        _claim_file(path, st.st_mode, label, ins, is_ours, never)
        return claim
    if not stat.S_ISDIR(st.st_mode):
        mode = st.st_mode
        what = "a symbolic link" if stat.S_ISLNK(mode) else "a file" if stat.S_ISREG(mode) else "a device, pipe or socket"
        raise BadInput(
            f"{path} exists and is {what}, where the {label} folder goes: refusing to replace it",
            where=Where(str(path)),
            hint=_ELSEWHERE + never,
        )
    recorded, own, why = _recorded(path, kind, label, listing, never)
    debris = _sort_entries(claim, _folder_entries(path, ins, label), recorded, own, listing is not None, written)
    whole = kind in _WHOLE
    if whole and claim.inputs_inside:
        raise BadInput(
            f"{path} holds inputs of this command ({_listing(claim.inputs_inside)}), and the {label} there is replaced "
            "whole: refusing to replace it",
            where=Where(str(path)),
            hint=f"Move the inputs out of {path}, or choose another output path.",
        )
    if claim.theirs and (whole or not force):
        _refuse_theirs(claim, label, recorded, own, why, whole, force)
    for p in debris:
        _remove(p)
    return claim


_ELSEWHERE = "Choose another output path, or move it away yourself."


def _claim_file(path: Path, mode: int, label: str, ins: _Inputs, is_ours: Callable[[Path], bool] | None, never: str) -> None:
    """A file output (an archive) at `path`, where something is: replaced only when `is_ours` recognizes it and it
    is no input of the command; BadInput otherwise."""
    if stat.S_ISDIR(mode):
        raise BadInput(
            f"{path} is a folder; the {label} written there is a file",
            where=Where(str(path)),
            hint="Pass an archive path that is not a folder.",
        )
    if stat.S_ISREG(mode) and (ins.by_path(path) or ins.by_inode(path)):
        raise BadInput(
            f"{path} is an input of this command: refusing to replace it with the {label}",
            where=Where(str(path)),
            hint=_ELSEWHERE,
        )
    if stat.S_ISREG(mode) and is_ours is not None and is_ours(path):
        return
    what = (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a file envkit did not write"
        if stat.S_ISREG(mode)
        else "a device, pipe or socket"
    )
    raise BadInput(
        f"{path} exists and is {what} (not an earlier envkit {label}): refusing to replace it",
        where=Where(str(path)),
        hint=_ELSEWHERE + never,
    )


def _recorded(
    path: Path, kind: str, label: str, listing: Callable[[Path], dict[str, dict] | None] | None, never: str
) -> tuple[Manifest, dict[str, dict] | None, str]:
    """The folder's own record: (its manifest, the files it lists or None when it has none, why it has none). A
    manifest of another kind is BadInput."""
    if listing is not None:
        own = listing(path)
        return Manifest(kind=kind, files=own or {}), own, "no bundle manifest.json"
    manifest, why = _read_manifest(path)
    if manifest is not None and manifest.kind != kind:
        other = KINDS.get(manifest.kind, repr(manifest.kind[:40]))
        raise BadInput(
            f"{path} is an envkit {other}, not a {label}: refusing to replace it",
            where=Where(str(path)),
            hint=f"Choose another output path for the {label}." + never,
        )
    own = None if manifest is None else {**manifest.files, **manifest.pending}
    return manifest or Manifest(kind=kind), own, why


def _folder_entries(path: Path, ins: _Inputs, label: str) -> list[tuple[str, os.DirEntry, bool]]:
    """Every entry of the folder (`_scan`), at most MAX_FILES of them (BadInput past it)."""
    entries: list[tuple[str, os.DirEntry, bool]] = []
    try:
        for n, item in enumerate(_scan(path, tuple(ins.dir_ids))):
            if n >= MAX_FILES:
                raise BadInput(
                    f"{path} holds more than {MAX_FILES} files: refusing to write the {label} there",
                    where=Where(str(path)),
                    hint=_ELSEWHERE,
                )
            entries.append(item)
    except OSError as exc:
        raise CannotRun(f"cannot look into {path}: {exc.strerror or exc}", where=Where(str(path))) from None
    return entries


def _sort_entries(
    claim: Claim,
    entries: list[tuple[str, os.DirEntry, bool]],
    recorded: Manifest,
    own: dict[str, dict] | None,
    listed_by_caller: bool,
    written: Iterable[str],
) -> list[Path]:
    """Each entry into the claim: envkit's (`ours`, listed and unchanged), an input inside, or someone else's
    (`theirs`, with why); the debris of an earlier killed run is returned for removal. CannotRun when another run is
    writing the folder now."""
    path, kind, ins = claim.path, claim.kind, claim.inputs
    debris: list[Path] = []
    legacy_ok = recorded.legacy and kind in _LEGACY
    fresh = tuple(str(plain_relpath(w, str(path))) for w in written)
    for rel, e, in_input_dir in entries:
        full = Path(e.path)
        if rel == OUTPUT_MARKER and not listed_by_caller:
            continue
        is_input = in_input_dir or ins.by_path(full)
        if is_input:
            claim.inputs_inside.append(rel)
        if own is not None and not recorded.legacy:
            listed = [x for x in (recorded.files.get(rel), recorded.pending.get(rel)) if x is not None]
            hit = next((x for x in listed if _matches(full, x)), None)
            if hit is not None:
                claim.ours[rel] = hit
                continue
            if is_input:
                continue
            d = _debris_inside(e.name)
            target = None if d is None else str(PurePosixPath(rel).parent / d[0])
            if d is not None and (target in own or target == OUTPUT_MARKER):
                if _alive(d[1]):
                    raise CannotRun(
                        f"{path} is being written by another envkit run (process {d[1]}): {rel}",
                        where=Where(str(path)),
                        hint="Wait for it to end, or choose another output path.",
                    )
                debris.append(full)
                continue
            if ins.by_inode(full):
                claim.inputs_inside.append(rel)
                continue
            if any(rel == w or rel.startswith(w + "/") for w in fresh):
                continue  # this run's, recorded by its writer
            claim.theirs[rel] = "changed since envkit wrote it" if listed else "not written by envkit"
        elif is_input:
            continue
        elif legacy_ok and _LEGACY[kind].fullmatch(rel) and e.is_file(follow_symlinks=False):
            got = _entry_of(full, rel)
            if got is None:
                claim.theirs[rel] = "cannot be read"
            else:
                claim.ours[rel] = got
        elif legacy_ok and (d := _debris_inside(e.name)) is not None and not _alive(d[1]):
            debris.append(full)
        elif ins.by_inode(full):
            claim.inputs_inside.append(rel)
        else:
            claim.theirs[rel] = "not written by envkit"
    if recorded.legacy and claim.theirs and claim.ours:
        # an earlier envkit's marker, and files it would not have written beside its own: none is taken for envkit's
        claim.theirs.update(dict.fromkeys(claim.ours, "not known to be envkit's (a marker of an earlier envkit, no file list)"))
        claim.ours.clear()
    return debris


def _refuse_theirs(
    claim: Claim, label: str, recorded: Manifest, own: dict[str, dict] | None, why: str, whole: bool, force: bool | None
) -> NoReturn:
    """BadInput naming each file envkit did not write (or that changed), and what --force can and cannot do."""
    if recorded.legacy:
        what = "holds the marker of an earlier envkit (no file list) and files it would not have written there"
    elif own is None:
        what = f"is a folder envkit did not write ({why})"
    else:
        what = "holds files envkit did not write or that were changed since"
    listed_files = _listing(f"{rel} ({how})" for rel, how in sorted(claim.theirs.items()))
    raise BadInput(
        f"{claim.path} {what}: {listed_files}; refusing to replace it",
        where=Where(str(claim.path)),
        hint=f"Move them out of {claim.path}, or choose another output path."
        + (
            ""
            if force is None
            else f" --force cannot help: the {label} is replaced whole."
            if whole
            else " --force writes beside them, never replacing or deleting one."
        ),
    )


@dataclass
class _Planned:
    rel: str
    entry: dict | None = None  # None: computed when committed (adopt)
    data: bytes | None = None
    source: Path | None = None  # copy (link_or_copy) or move (staged) from here
    move: bool = False
    mode: int | None = None
    adopt: bool = False


class OutputWriter:
    """The files of one write into a claimed folder: each planned, then `commit` writes them all."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.plan: dict[str, _Planned] = {}
        self.drop: set[str] = set()  # with `commit(keep=True)`: listed files to remove all the same

    def _add(self, p: _Planned) -> None:
        plain_relpath(p.rel, str(self.claim.path))
        if PurePosixPath(p.rel).parts[0] == OUTPUT_MARKER or str(PurePosixPath(p.rel)) != p.rel:
            raise BadInput(f"{p.rel!r} is not a path envkit writes into an output", where=Where(str(self.claim.path)))
        self.plan[p.rel] = p

    def bytes(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        self._add(
            _Planned(rel, {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}, data=data, mode=mode)
        )

    def text(self, rel: str, text: str, mode: int = 0o644) -> None:
        self.bytes(rel, text.encode("utf-8"), mode)

    def copy(self, rel: str, source: Path) -> None:
        """A large input linked (or copied) into place (`link_or_copy`)."""
        src = Path(source).resolve()
        got = _entry_of(src, rel)
        if got is None or "link" in got:
            raise CannotRun(f"cannot read {source}: not a regular file", where=Where(str(source)))
        self._add(_Planned(rel, got, source=src))

    def staged(self, rel: str, path: Path, mode: int = 0o644) -> None:
        """A file written in the staging folder (`Claim.staging`), moved into place."""
        got = _entry_of(Path(path), rel)
        if got is None or "link" in got:
            raise CannotRun(f"{path} is not a regular file: it cannot be moved into {self.claim.path}")
        self._add(_Planned(rel, got, source=Path(path), move=True, mode=mode))

    def symlink(self, rel: str, target: str) -> None:
        self._add(_Planned(rel, {"path": rel, "link": str(target)}))

    def remove(self, rel: str) -> None:
        """With `commit(keep=True)`: remove this listed file (when unchanged and no input) all the same."""
        self.drop.add(rel)

    def adopt(self, rel: str) -> None:
        """A file this run wrote in place (a child process's log, a fetched report): recorded as it is now."""
        if rel not in self.claim.theirs and rel not in self.claim.inputs_inside:
            self._add(_Planned(rel, adopt=True))

    def adopt_tree(self, rel: str) -> None:
        base = self.claim.path / plain_relpath(rel, str(self.claim.path))
        if base.is_dir() and not base.is_symlink():
            for r, _e, _in in _scan(base):
                self.adopt(f"{rel}/{r}")

    def _problem(self, p: _Planned, stale: set[str]) -> str | None:
        """Why `p` cannot be written (a file of the user's or an input in the way, a link on the way), or None."""
        out = self.claim.path
        parts = PurePosixPath(p.rel).parts
        for i in range(1, len(parts)):
            rel = "/".join(parts[:i])
            try:
                st = os.lstat(out / rel)
            except (FileNotFoundError, NotADirectoryError):  # not there, or under a file (stale, or not ours: below)
                break
            if stat.S_ISLNK(st.st_mode):
                outside = not (out / rel).resolve().is_relative_to(out.resolve())
                return f"{p.rel}: {rel} is a symbolic link on the way" + (" (it leads outside the output)" if outside else "")
            if not stat.S_ISDIR(st.st_mode) and rel not in stale:
                return f"{p.rel}: {rel} is a file where envkit writes a folder"
        full = out / p.rel
        try:
            st = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):  # under a stale file of ours, or the output is gone: commit says
            return None
        if stat.S_ISDIR(st.st_mode):
            return f"{p.rel} is a folder where envkit writes a file"
        if p.rel in self.claim.inputs_inside or (p.rel not in self.claim.ours and self.claim.inputs.by_inode(full)):
            return (
                None
                if _matches(full, p.entry or {})
                else f"{p.rel} is an input of this command, where envkit writes another file"
            )
        if p.rel in self.claim.ours:
            return None
        why = self.claim.theirs.get(p.rel, "not written by envkit")
        return f"{p.rel} ({why}): --force never replaces a file envkit did not write"

    def commit(self, *, keep: bool = False) -> list[Path]:
        """Write the planned files: refused whole (nothing written) when one cannot be; then the manifest.

        `keep`: the output's other files stay listed (a run adding to its output); otherwise the planned files
        are the output, and a listed file not planned is removed (when unchanged; an input is kept, unlisted)."""
        claim, out = self.claim, self.claim.path
        for p in self.plan.values():
            if p.adopt:
                p.entry = _entry_of(out / p.rel, p.rel)
        planned = {rel: p for rel, p in self.plan.items() if p.entry is not None}
        stale = {rel for rel in claim.ours if rel not in planned and (not keep or rel in self.drop)}
        problems = [why for p in planned.values() if not p.adopt and (why := self._problem(p, stale))]
        if problems:
            raise BadInput(
                f"{out}: refusing to write the {claim.label}: {_listing(problems)}",
                where=Where(str(out)),
                hint=f"Move these out of {out}, or choose another output path.",
            )
        # an input where envkit writes the same content stays as it is (listed only when envkit wrote it before)
        skip = {
            rel
            for rel, p in planned.items()
            if not p.adopt and (rel in claim.inputs_inside or (rel not in claim.ours and claim.inputs.by_inode(out / rel)))
        }
        new: dict[str, dict] = {rel: p.entry for rel, p in planned.items() if p.entry and (rel not in skip or rel in claim.ours)}
        kept_inputs = {rel for rel in stale if rel in claim.inputs_inside or claim.inputs.by_inode(out / rel)}
        remove = stale - kept_inputs
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _cannot_write(out, exc) from None
        marker = out / OUTPUT_MARKER
        # first: a run killed half-way leaves every file it wrote listed (pending), the folder still envkit's
        atomic_write_bytes(marker, Manifest(claim.kind, dict(claim.ours), new).to_bytes())
        written: list[Path] = []
        try:
            for rel in sorted(remove):
                full = out / rel
                if _matches(full, claim.ours[rel]):
                    _remove(full)
                    _prune(out, PurePosixPath(rel).parent)
            for rel, p in sorted(planned.items()):
                dest = out / rel
                if rel not in skip and not p.adopt:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if p.data is not None:
                        atomic_write_bytes(dest, p.data, p.mode or 0o644)
                    elif p.move:
                        assert p.source is not None
                        _move(p.source, dest, p.mode or 0o644)
                    elif p.source is not None:
                        link_or_copy(p.source, dest)
                    elif p.entry is not None:
                        _remove(dest)
                        os.symlink(p.entry["link"], dest)
                written.append(dest)
        except OSError as exc:
            raise _cannot_write(out, exc) from None
        files = ({} if not keep else {r: e for r, e in claim.ours.items() if r not in planned and r not in stale}) | new
        atomic_write_bytes(marker, Manifest(claim.kind, files).to_bytes())
        claim.ours = dict(files)
        claim.theirs = {r: w for r, w in claim.theirs.items() if r not in files}
        return written


def _move(src: Path, dest: Path, mode: int) -> None:
    """Rename `src` over `dest`; across file systems (the output is a mount point), copied atomically."""
    import errno
    import shutil

    os.chmod(src, mode)
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open(src, "rb") as fh, atomic_stream(dest, mode) as out:
            shutil.copyfileobj(fh, out, 1 << 20)


def _prune(out: Path, rel: PurePosixPath) -> None:
    """Remove the folders on the way to a removed file that it left empty (never `out` itself)."""
    while str(rel) != ".":
        try:
            os.rmdir(out / rel)
        except OSError:
            return
        rel = rel.parent


def write_output(
    path: Path, kind: str, files: dict[str, bytes | str], *, force: bool = False, inputs: Iterable[Path | str | None] = ()
) -> list[Path]:
    """Claim the folder at `path` and make `files` (relative path -> content) its whole content as envkit's."""
    w = claim_output(path, kind, force=force, inputs=inputs).writer()
    for rel, content in sorted(files.items()):
        w.bytes(rel, content.encode("utf-8") if isinstance(content, str) else content, 0o755 if rel.endswith(".sh") else 0o644)
    return w.commit()


def update_output(
    path: Path,
    kind: str,
    files: dict[str, bytes | str],
    *,
    adopt: Iterable[str] = (),
    inputs: Iterable[Path | str | None] = (),
) -> list[Path]:
    """Add to a folder envkit wrote (claimed again: still envkit's), its other files kept: `files` written, and
    what this run wrote there in place (`adopt`: a file or a folder, say a child process's log) recorded."""
    adopt = tuple(adopt)
    w = claim_output(path, kind, inputs=inputs, written=adopt).writer()
    for rel in adopt:
        w.adopt(rel)
        w.adopt_tree(rel)
    for rel, content in sorted(files.items()):
        w.bytes(rel, content.encode("utf-8") if isinstance(content, str) else content)
    return w.commit(keep=True)


def replace_file(path: Path, data: bytes, *, was: bytes) -> None:
    """Replace the one regular file at `path`, atomically, when it still holds `was` (what the caller read):
    a link, a folder or a file changed meanwhile is refused (BadInput, exit 2), never written through."""
    path = Path(path)
    try:
        st = os.lstat(path)
        same = stat.S_ISREG(st.st_mode) and _entry_of(path, "x") == {
            "path": "x",
            "sha256": hashlib.sha256(was).hexdigest(),
            "size": len(was),
        }
    except OSError:
        same = False
    if not same:
        raise BadInput(
            f"{path} is not the regular file that was read (a link, or changed meanwhile): refusing to write it",
            where=Where(str(path)),
            hint="Pass the folder that holds the file itself, and run again.",
        )
    atomic_write_bytes(path, data, stat.S_IMODE(st.st_mode))


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

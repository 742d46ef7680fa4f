"""Reading files and JSON that someone else made: bounded, never blocking, never leaving a given root.

A path a user, an inventory, a snapshot or a model folder names may be anything: a FIFO (an ``open`` that waits
forever for a writer), ``/dev/zero`` (a read that never ends), a device whose ``open`` has side effects, a folder,
a 10 GB file, or a link out of the folder it was meant to stay in. ``read_bytes``/``read_text`` read it only when it is a regular file of at most its kind's size:

- the name is resolved first (links followed) and, with ``root``, must stay inside ``root`` (resolved too);
- what it resolves to is ``stat``-ed before any ``open``: a FIFO, device, socket or folder is refused unopened;
- the ``open`` is ``O_NONBLOCK | O_NOFOLLOW | O_NOCTTY`` (a FIFO swapped in meanwhile does not block, a link
  swapped in fails), and the opened descriptor is ``fstat``-ed again, and with ``root`` its real path
  (``/proc/self/fd``) checked to be inside ``root``;
- at most ``kind.max_bytes + 1`` bytes are read: one byte more is "too large".

Every refusal is ``BadInput`` (exit 2) naming the file, what it is and what to do next. JSON is parsed by
``envkit.io.jsonread`` (the one JSON reader), which reads its files through here.

Usage::

    from envkit.io import untrusted

    text = untrusted.read_text(path, untrusted.CONFIG)                       # a user's config (1 MiB)
    raw = untrusted.read_bytes("numpy.json", untrusted.CONFIG, root=snapshot)  # inside the snapshot folder only
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import BadInput, Where


@dataclass(frozen=True)
class Kind:
    """A kind of file: what an error calls it, and its size cap in bytes."""

    what: str
    max_bytes: int


CONFIG = Kind("a configuration file", 1 << 20)  # hccn.conf, an inventory's host file: a few kB
MODEL_CONFIG = Kind("a model's JSON configuration", 16 << 20)  # config.json, tokenizer_config.json (templates inside)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def not_regular(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((why for test, why in _KINDS if test(mode)), "not a regular file")


def _refuse(path: Path, message: str, hint: str) -> BadInput:
    return BadInput(message, where=Where(file=str(path)), hint=hint)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _resolve(path: Path, root: Path | None) -> tuple[Path, Path | None]:
    """The real path (links followed) and the real root; a path that leaves the root is refused."""
    real_root = None
    if root is not None:
        try:
            real_root = Path(root).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise _refuse(Path(root), f"{root} cannot be read: {_reason(exc)}", "Check the folder's path.") from None
        if not path.is_absolute():
            path = real_root / path
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        raise _refuse(path, f"{path} does not exist", "Check the path.") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop on Python 3.10-3.12
        raise _refuse(path, f"{path} cannot be read: {_reason(exc)}", "Check the path and its links.") from None
    if real_root is not None and not _inside(real, real_root):
        raise _refuse(
            path,
            f"{path} leads out of {root} (to {real})",
            f"Only files inside {root} are read: copy the file into it instead of linking to it.",
        )
    return real, real_root


def _shown(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    """The path as errors name it: a relative path inside `root` joined to it."""
    given = Path(path)
    return Path(root) / given if root is not None and not given.is_absolute() else given


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


def open_regular(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> int:
    """A read-only descriptor of the regular file `path` names (inside `root` where given), opened without
    blocking and checked after the open; BadInput otherwise. The caller closes it (``os.close``) and caps its
    reads: ``read_bytes`` does both."""
    given = _shown(path, root)
    real, real_root = _resolve(Path(path), None if root is None else Path(root))
    hint = "Give the path of a regular file (a copy, not a FIFO, device or folder)."
    try:
        what = not_regular(os.stat(real).st_mode)
    except OSError as exc:
        raise _refuse(given, f"{given} cannot be read: {_reason(exc)}", hint) from None
    if what:
        raise _refuse(given, f"{given} is {what}, not a regular file", hint)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:  # ELOOP: the name was made a link since it was resolved
        raise _refuse(given, f"{given} cannot be opened: {_reason(exc)}", hint) from None
    try:
        what = not_regular(os.fstat(fd).st_mode)  # what was opened, should the name have changed meanwhile
        if what:
            raise _refuse(given, f"{given} is {what}, not a regular file", hint)
        if real_root is not None:
            try:
                opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # no /proc: the checks on the resolved name stand
                opened = real
            if not _inside(opened, real_root):
                raise _refuse(given, f"{given} leads out of {root} (to {opened})", "Only files inside the folder are read.")
    except BadInput:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | os.PathLike[str], kind: Kind, *, root: str | os.PathLike[str] | None = None) -> bytes:
    """The bytes of a regular file of at most `kind.max_bytes` (inside `root` where given); BadInput (exit 2)
    for anything else: missing, a FIFO, device, socket or folder, a link out of `root`, over the cap."""
    shown = _shown(path, root)
    fd = open_regular(path, root=root)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= kind.max_bytes:
            chunk = os.read(fd, min(1 << 20, kind.max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _refuse(shown, f"{shown} cannot be read: {_reason(exc)}", "Check the file.") from None
    finally:
        os.close(fd)
    if size > kind.max_bytes:
        raise _refuse(
            shown,
            f"{shown} is too large for {kind.what} (over {kind.max_bytes} bytes)",
            f"{kind.what[0].upper()}{kind.what[1:]} is at most {kind.max_bytes} bytes: is it the right file?",
        )
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], kind: Kind, *, root: str | os.PathLike[str] | None = None) -> str:
    """``read_bytes`` decoded as UTF-8 (a BOM dropped); BadInput for bytes that are not UTF-8."""
    raw = read_bytes(path, kind, root=root)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refuse(
            _shown(path, root), f"{_shown(path, root)} is not UTF-8 text (byte {exc.start})", "Save it as UTF-8."
        ) from None

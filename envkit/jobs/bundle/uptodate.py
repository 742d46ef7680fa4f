"""Is a bundle archive up to date? The light check `envkit bundle build` makes before anything else.

As make does: every input of the build but the content-addressed cache (the lock's bytes, envkit itself,
the vendor files by name and stat, the options, the writers) goes into one key; when the archive was
written from the same key and is unchanged since (size, mtime, ctime, inode, device), the recorded result
stands and nothing is planned, fetched or written. This module imports no pydantic, so the check costs
little more than the interpreter's start.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from envkit import __version__


def envkit_sources() -> list[tuple[str, Path]]:
    """(name in the wheel, file) for envkit's package and its data folders, sorted."""
    from envkit.resources import DATA_FOLDERS, PACKAGE_DIR, data_dir

    out: list[tuple[str, Path]] = []

    def add_tree(src: Path, prefix: str) -> None:
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__",) and not d.startswith("."))
            if Path(dirpath) == PACKAGE_DIR:
                dirnames[:] = [d for d in dirnames if d != "_data"]
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")) or fn.startswith("."):
                    continue
                full = Path(dirpath) / fn
                out.append((f"{prefix}/{full.relative_to(src).as_posix()}", full))

    add_tree(PACKAGE_DIR, "envkit")
    for name in DATA_FOLDERS:
        try:
            add_tree(data_dir(name), f"envkit/_data/{name}")
        except FileNotFoundError:
            pass
    return out


def envkit_metadata(dist) -> tuple[str, str]:  # noqa: ANN001
    meta = dist.read_text("METADATA") or f"Metadata-Version: 2.1\nName: envkit\nVersion: {__version__}\n"
    entry_points = dist.read_text("entry_points.txt") or "[console_scripts]\nenvkit = envkit.cli:main\n"
    return meta, entry_points


def envkit_key(sources: list[tuple[str, Path]] | None = None, dist=None) -> str:  # noqa: ANN001
    """What envkit's own wheel (and so every file envkit puts in a bundle) depends on: its version, metadata,
    and each source file's name, size and mtime."""
    from importlib.metadata import distribution

    dist = dist or distribution("envkit")
    meta, entry_points = envkit_metadata(dist)
    sources = envkit_sources() if sources is None else sources
    return hashlib.sha256(
        json.dumps(
            [
                __version__,
                meta,
                entry_points,
                [[arc, str(p), st.st_size, st.st_mtime_ns] for arc, p in sources for st in [p.stat()]],
            ]
        ).encode()
    ).hexdigest()


def archive_stamp(st: os.stat_result) -> str:
    # ctime too: unlike mtime it cannot be set back after an in-place write
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}"


# --- up to date: a rebuild with every input unchanged keeps the archive and reports what it reported ---------
def _stat_list(folder: Path | None) -> list:
    if folder is None:
        return []
    out = []
    for p in sorted(Path(folder).iterdir()):
        try:
            st = p.stat()
        except OSError:
            continue
        if p.is_file():
            out.append([p.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


def inputs_key(lock_bytes: bytes, *, out: Path, artifacts: Path | None, options: dict) -> str:
    """Every input of an archive build but the cache: the lock's bytes, envkit itself (its wheel, templates,
    playbooks), the vendor files by name and stat (as HashStamps trusts them), the options, and the writers."""
    import sys
    import zlib

    doc = {
        "v": 1,
        "lock": hashlib.sha256(lock_bytes).hexdigest(),
        "envkit": envkit_key(),
        "out": out.name,
        "python": sys.version,
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
        "artifacts": _stat_list(artifacts),
        "options": options,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def output_key(out: Path) -> str:
    """The name under which the cache keeps records about one output path."""
    return hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()


def _result_path(state: Path, out: Path) -> Path:
    return state / (output_key(out) + ".result")


def up_to_date(state: Path, out: Path, key: str) -> dict | None:
    """The recorded result of the build that wrote `out` from the same inputs, when `out` is unchanged since."""
    try:
        rec = json.loads(_result_path(state, out).read_text())
        st = os.stat(out)
    except (OSError, ValueError):
        return None
    if rec.get("key") == key and rec.get("stamp") == archive_stamp(st):
        return rec.get("result")
    return None


def remember_result(state: Path, out: Path, key: str, result: dict) -> None:
    from envkit.errors import CannotRun
    from envkit.io.outputs import atomic_write_bytes

    record = {"key": key, "stamp": archive_stamp(os.stat(out)), "result": result}
    try:
        atomic_write_bytes(_result_path(state, out), json.dumps(record, sort_keys=True).encode(), fsync=False)
    except (OSError, CannotRun):
        pass  # without the record, the next build is a full one

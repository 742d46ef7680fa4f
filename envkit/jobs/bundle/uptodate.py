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

from envkit.artifacts.own_wheel import envkit_key


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

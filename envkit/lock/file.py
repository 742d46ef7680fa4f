"""Read and write the lock: canonical text, atomic writes, strict parsing. Models only: deriving a lock from the
matrix is `envkit.core.derive`; the jobs import this module and the lock model, never the matrix or the resolver.

The check. `read_lock` holds every lock to the schema (a grammar for every string, `envkit.models.safe`) and then
to the `LockCheck` its caller passes (`envkit.lock.gate`): a gate `(lock, filename) -> Edited | None` that names the
fields an edit changed, the upgrade of older schemas, and whether an edit is refused or only warned about.
The jobs cannot compare a lock with the matrix themselves (they never import it); the side that can builds the
check (dependency inversion): the `envkit` command line passes `envkit.core.derive`'s matrix gate to every lock a
command reads, so an edited lock is refused (`EditedLock`, exit 2, naming the fields) unless
`--accept-edited-lock` turns that into a warning. A library caller chooses:

    from envkit.lock import file as lockfile
    from envkit.core import derive as locking
    lock = lockfile.read_lock(path, check=locking.matrix_check())   # held to the matrix as the CLI does
    lock = lockfile.read_lock(path)                                   # the schema alone (SCHEMA_ONLY)

A lock's closures (python.closure, python.controller: wheels, URLs, hashes resolved from an index) are not
derivable: the schema and its URL policy (https, or under a mirror the closure records) are all that holds them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from envkit.errors import BadInput, Where
from envkit.io.outputs import atomic_write_text
from envkit.io.yamlio import load_text
from envkit.lock.gate import (  # re-exported: the check is part of this module's interface
    SCHEMA_ONLY,
    Edited,
    EditedLock,
    LockCheck,
    LockGate,
    LockUpgrade,
)
from envkit.lock.text import lock_text, plain
from envkit.models.lock import LOCK_SCHEMA_VERSION, Lock

# --- text --------------------------------------------------------------------------------------
# the plain dump and the canonical text (envkit.lock.text: no pydantic, so that `envkit resolve` writes its lock
# records with the very same code)
_plain = plain


def dump_lock(lock: Lock) -> str:
    return lock_text(plain(lock))


def write_lock(lock: Lock, path: Path) -> None:
    atomic_write_text(path, dump_lock(lock))


# The schemas an upgrade may lift to the current one: their new fields are derived from the lock's own stack.
UPGRADABLE = (2,)


def upgrade_lock(data: dict[str, Any], filename: str, upgrade: LockUpgrade | None) -> tuple[dict[str, Any], str | None]:
    """The migration seam: a lock of an UPGRADABLE schema read as the current one, and the notice naming what was
    derived (`parse_lock` prints it once the lifted lock holds to the schema), where an upgrade is given (the
    command line's check carries `envkit.core.derive.upgrade`); else (data, None)."""
    found = data.get("schema_version")
    if upgrade is None or type(found) is not int or found not in UPGRADABLE:
        return data, None
    lifted = upgrade(data, filename)
    if lifted is None:
        return data, None
    new, derived = lifted
    made_by = data.get("generated_by")  # not yet checked by the schema: named only when it is a plain command line
    redo = made_by if isinstance(made_by, str) and re.fullmatch(r"envkit [ -~]{1,300}", made_by) else "envkit resolve"
    notice = (
        f"notice: {filename} is a lock of schema {found}; read as schema {LOCK_SCHEMA_VERSION} with "
        f"{', '.join(derived)} derived from its stack (re-lock to write it: `{redo}`)"
    )
    return new, notice


def parse_lock(data: Any, lines: dict[str, int], filename: str, *, upgrade: LockUpgrade | None = None) -> Lock:
    """The lock in `data`, held to the schema; an older lock is lifted by `upgrade` (None: refused)."""
    if not isinstance(data, dict):
        raise BadInput(f"{filename} is not a lock (a YAML mapping)", where=Where(filename, 1))
    data, notice = upgrade_lock(data, filename, upgrade)
    found = data.get("schema_version")
    if found != LOCK_SCHEMA_VERSION:
        older = isinstance(found, int) and not isinstance(found, bool) and 0 < found < LOCK_SCHEMA_VERSION
        made_by = data.get("generated_by")
        made_by = made_by if isinstance(made_by, str) and re.fullmatch(r"envkit [ -~]{1,300}", made_by) else None
        redo = f"`{made_by}`" if made_by and older else "`envkit resolve` (and `envkit lock` for a closure)"
        raise BadInput(
            (
                f"{filename} is a lock of schema {found}, made by an older envkit: re-lock it"
                if older
                else f"{filename}: unsupported lock schema_version {found!r}"
            ),
            where=Where(filename, lines.get("schema_version"), "schema_version"),
            hint=f"This envkit reads lock schema {LOCK_SCHEMA_VERSION}; re-lock with {redo} "
            "(schema 2 records the HDK and platform facts the jobs need; schema 3 the chip's device-plugin resource "
            "and HCCL facts).",
        )
    try:
        lock = Lock.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        line = None
        while loc and line is None:
            line = lines.get(".".join(loc))
            if line is None:
                loc.pop()
        key = ".".join(str(p) for p in err["loc"])
        raise BadInput(
            f"{filename} is not a valid lock: {key}: {err['msg']}",
            where=Where(filename, line, key),
            hint="Regenerate it with `envkit resolve`; do not edit a lock by hand.",
        ) from None
    if notice:  # once, for a lifted lock that holds (load_lock's fast path fails silently and parses again)
        from envkit import console

        console.err.print(notice, markup=False)
    return lock


def read_lock(path: Path, check: LockCheck = SCHEMA_ONLY) -> Lock:
    """The lock at `path`, held to the schema and then to `check` (default: the schema alone)."""
    from envkit.io.yamlio import read_text

    return load_lock(read_text(Path(path)), str(path), check)


def load_lock(text: str, filename: str, check: LockCheck = SCHEMA_ONLY) -> Lock:
    """A lock from its text (for callers that keep the very bytes they validated, e.g. to copy them into a
    bundle). A valid lock parses with the C loader; only a bad one is parsed again with line tracking, so that
    the error names file:line."""

    from envkit.errors import EnvkitError
    from envkit.io.yamlio import fast_load_text

    lock: Lock | None = None
    if getattr(yaml, "CSafeLoader", None) is not None:
        try:  # the C loader; anything yamlio's caps would look at (aliases, tags, size) falls back
            lock = parse_lock(fast_load_text(text), {}, filename, upgrade=check.upgrade)
        except (yaml.YAMLError, EnvkitError):
            lock = None
    if lock is None:
        data, lines = load_text(text, filename)
        lock = parse_lock(data, lines, filename, upgrade=check.upgrade)
    check.run(lock, filename)
    return lock


__all__ = [
    "SCHEMA_ONLY",
    "Edited",
    "EditedLock",
    "LockCheck",
    "LockGate",
    "LockUpgrade",
    "dump_lock",
    "load_lock",
    "parse_lock",
    "read_lock",
    "upgrade_lock",
    "write_lock",
]

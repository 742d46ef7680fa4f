"""The lock check: what `envkit.lock.file.read_lock` holds a lock to after its schema, passed in by the caller.

A `LockCheck` is plain data: a gate (`(lock, filename) -> Edited | None`, naming the fields an edit changed), an
upgrade for locks of an older schema, and whether an edit is accepted (a warning) or refused (`EditedLock`, exit 2).
No state is kept in this module: the command line builds the check of each invocation (`envkit.cli.lockcheck`,
the matrix gate of `envkit.core.derive` and `--accept-edited-lock`) and passes it to every lock it reads; a library
caller chooses its own (`envkit.core.derive.matrix_check()`, or `SCHEMA_ONLY`). Nothing heavy is imported here, so
that building a check loads neither the lock model nor the matrix: those load only when a lock is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from envkit.errors import BadInput, Where

if TYPE_CHECKING:
    from envkit.models.lock import Lock


@dataclass(frozen=True)
class Edited:
    """What a gate found: the dotted paths of the fields that differ (`artifacts.driver.zip.sha256`), and a note
    (e.g. that the lock comes from another matrix)."""

    fields: tuple[str, ...]
    note: str = ""


LockGate = Callable[["Lock", str], "Edited | None"]
# An upgrade: the data of a lock of an older schema -> that of the current one (what it derived, for the notice), or
# None where the new fields cannot be derived. The side that can derive (envkit.core.derive) provides it, as the gate.
LockUpgrade = Callable[[dict[str, Any], str], "tuple[dict[str, Any], list[str]] | None"]


class EditedLock(BadInput):
    """A lock whose derived fields differ from what its check derives for its stack (exit 2); `edited` names
    them, so that a library caller can tell this refusal from any other bad input."""

    def __init__(self, message: str, *, edited: Edited, where: Where | None = None, hint: str | None = None) -> None:
        super().__init__(message, where=where, hint=hint, details={"fields": list(edited.fields)})
        self.edited = edited


@dataclass(frozen=True)
class LockCheck:
    """What a lock is held to after its schema: `gate` (None: nothing more), `upgrade` (None: an older schema is
    refused), and `accept_edited` (an edit the gate finds is a warning on stderr instead of `EditedLock`)."""

    gate: LockGate | None = None
    upgrade: LockUpgrade | None = None
    accept_edited: bool = False

    def accepting(self, accept: bool = True) -> LockCheck:
        """The same check with edits accepted (or not)."""
        return replace(self, accept_edited=accept)

    def run(self, lock: Lock, filename: str) -> Edited | None:
        """The gate on `lock`: None when nothing derivable was edited; the finding, warned about, when edits are
        accepted; `EditedLock` otherwise."""
        edited = None if self.gate is None else self.gate(lock, filename)
        if edited is None or not edited.fields:
            return None
        shown = ", ".join(edited.fields[:24])
        more = f" and {len(edited.fields) - 24} more" if len(edited.fields) > 24 else ""
        what = f"{filename} was edited: {shown}{more} differ from what the matrix derives for its stack"
        what += f"; {edited.note}" if edited.note else ""
        if self.accept_edited:
            from envkit import console

            console.err.print(f"warning: {what} (accepted: --accept-edited-lock)", markup=False)
            return edited
        raise EditedLock(
            what,
            edited=edited,
            where=Where(filename, None, edited.fields[0]),
            hint=f"Re-lock with `{lock.generated_by}` (or pass --accept-edited-lock if you edited it on purpose).",
        )


SCHEMA_ONLY = LockCheck()  # the schema alone: no gate, no upgrade of older locks

"""The registry of lock gates: checks that `envkit.lockfile.read_lock` runs on every lock after its schema.

A module of its own, with nothing heavy imported, so that the command line can register the gate (and
`--accept-edited-lock`) for every command without loading the lock model or the matrix: those load only when a
command really reads a lock. `envkit.lockfile` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
# None where the new fields cannot be derived. The side that can derive (envkit.locking) registers it, as the gate.
LockUpgrade = Callable[[dict[str, Any], str], "tuple[dict[str, Any], list[str]] | None"]
_gates: list[LockGate] = []
_upgrades: list[LockUpgrade] = []
_accept = {"edited": False}


def set_upgrade(upgrade: LockUpgrade | None) -> None:
    """The one upgrade `read_lock` applies to a lock of an older schema (None: refuse older locks)."""
    _upgrades[:] = [] if upgrade is None else [upgrade]


def registered_upgrade() -> LockUpgrade | None:
    return _upgrades[0] if _upgrades else None


def add_gate(gate: LockGate) -> None:
    """Run `gate` on every lock `read_lock` reads from now on (once, however often it is added)."""
    if gate not in _gates:
        _gates.append(gate)


def remove_gate(gate: LockGate) -> None:
    if gate in _gates:
        _gates.remove(gate)


def accepting_edited() -> bool:
    """Whether `--accept-edited-lock` is in force (provision passes it on to the hosts' `envkit doctor`)."""
    return _accept["edited"]


def accept_edited(value: bool) -> None:
    """`--accept-edited-lock`: a gate's finding is a warning on stderr, not a refusal."""
    _accept["edited"] = value


@contextmanager
def gated(gate: LockGate, *, accept: bool = False, upgrade: LockUpgrade | None = None) -> Iterator[None]:
    """`gate` registered (and edits accepted or not, and `upgrade` in force where given) for the block; what was
    registered before is kept."""
    had, was, before = gate in _gates, _accept["edited"], list(_upgrades)
    add_gate(gate)
    accept_edited(accept)
    if upgrade is not None:
        set_upgrade(upgrade)
    try:
        yield
    finally:
        accept_edited(was)
        _upgrades[:] = before
        if not had:
            remove_gate(gate)


def check_gates(lock: Lock, filename: str) -> None:
    """Each registered gate on `lock`: BadInput (exit 2) naming the edited fields, or a warning when accepted."""
    for gate in list(_gates):
        edited = gate(lock, filename)
        if edited is None or not edited.fields:
            continue
        fields = ", ".join(edited.fields[:24]) + (f" and {len(edited.fields) - 24} more" if len(edited.fields) > 24 else "")
        what = f"{filename} was edited: {fields} differ from what the matrix derives for its stack"
        what += f"; {edited.note}" if edited.note else ""
        if _accept["edited"]:
            from envkit import console

            console.err.print(f"warning: {what} (accepted: --accept-edited-lock)", markup=False)
            continue
        raise BadInput(
            what,
            where=Where(filename, None, edited.fields[0]),
            hint=f"Re-lock with `{lock.generated_by}` (or pass --accept-edited-lock if you edited it on purpose).",
        )

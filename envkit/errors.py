"""The error hierarchy. Every error owns its exit code; the CLI turns them into messages in one place.

Exit codes, everywhere: 0 ok, 1 a check failed or the stack is invalid, 2 bad input or cannot run, 3 an internal
error (a bug in envkit: the CLI writes the traceback to a file and names it), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Where:
    """Where a problem is: a file, a line (1-based) and a dotted key, each optional."""

    file: str | None = None
    line: int | None = None
    key: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key:
            parts.append(f"key '{self.key}'")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "key": self.key}


@dataclass
class EnvkitError(Exception):
    """Base error: what went wrong, where, and what to do next."""

    message: str
    where: Where | None = None
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    exit_code: int = EXIT_BAD_INPUT

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type(self).__name__, "message": self.message, "exit_code": self.exit_code}
        if self.where:
            out["where"] = self.where.to_dict()
        if self.hint:
            out["hint"] = self.hint
        if self.details:
            out["details"] = self.details
        return out


@dataclass
class BadInput(EnvkitError):
    """The user's input is wrong: malformed file, unknown key, unknown version (exit 2)."""

    exit_code: int = EXIT_BAD_INPUT


@dataclass
class CannotRun(EnvkitError):
    """The command cannot run here: a missing device, engine, tool or file (exit 2)."""

    exit_code: int = EXIT_BAD_INPUT


@dataclass
class CheckFailed(EnvkitError):
    """A check ran and failed (exit 1)."""

    exit_code: int = EXIT_FAILED


@dataclass
class InternalError(EnvkitError):
    """A bug in envkit (exit 3): never raised; the CLI reports an unexpected exception as one (`--json` included)."""

    exit_code: int = EXIT_INTERNAL


@dataclass
class MatrixError(EnvkitError):
    """The shipped compatibility matrix itself is inconsistent (exit 1 from `matrix check`)."""

    exit_code: int = EXIT_FAILED


def shown(value: object, limit: int = 60) -> str:
    """A value from untrusted input as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(str(value))} characters)"

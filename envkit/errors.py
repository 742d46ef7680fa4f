"""The error hierarchy. Every error owns its exit code; the CLI turns them into messages in one place.

Exit codes, everywhere: 0 ok, 1 a check failed or the stack is invalid, 2 bad input or cannot run, 3 an internal
error (a bug in envkit: the CLI writes the traceback to a file and names it), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from typing import Any

from envkit.records import Value

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


# Plain classes, not dataclasses: `dataclasses` imports `inspect` (with ast, dis, tokenize), some 15-25 ms that every
# command paid at start-up, `envkit resolve` and `envkit validate` included (issue 26). They keep what @dataclass gave
# them: the same constructor, repr, equality, and (Where, a frozen record of envkit.records) frozen and hashable.
class Where(Value):
    """Where a problem is: a file, a line (1-based) and a dotted key, each optional."""

    __slots__ = ("file", "line", "key")
    _fields = ("file", "line", "key")
    file: str | None
    line: int | None
    key: str | None

    def __init__(self, file: str | None = None, line: int | None = None, key: str | None = None) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "key", key)

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key:
            parts.append(f"key '{self.key}'")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "key": self.key}


_NO_DETAILS: Any = object()


class EnvkitError(Exception):
    """Base error: what went wrong, where, and what to do next. Each subclass sets its own `exit_code` default."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(
        self,
        message: str,
        where: Where | None = None,
        hint: str | None = None,
        details: dict[str, Any] = _NO_DETAILS,
        exit_code: int | None = None,
    ) -> None:
        self.message = message
        self.where = where
        self.hint = hint
        self.details = {} if details is _NO_DETAILS else details
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(self.message)

    def _fields(self) -> tuple[Any, ...]:
        return (self.message, self.where, self.hint, self.details, self.exit_code)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # as @dataclass left it: compared by value, so not hashable

    def __repr__(self) -> str:
        return (
            f"{type(self).__qualname__}(message={self.message!r}, where={self.where!r}, hint={self.hint!r}, "
            f"details={self.details!r}, exit_code={self.exit_code!r})"
        )

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


class BadInput(EnvkitError):
    """The user's input is wrong: malformed file, unknown key, unknown version (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class CannotRun(EnvkitError):
    """The command cannot run here: a missing device, engine, tool or file (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(EnvkitError):
    """A check ran and failed (exit 1)."""

    exit_code = EXIT_FAILED


class InternalError(EnvkitError):
    """A bug in envkit (exit 3): never raised; the CLI reports an unexpected exception as one (`--json` included)."""

    exit_code = EXIT_INTERNAL


class MatrixError(EnvkitError):
    """The shipped compatibility matrix itself is inconsistent (exit 1 from `matrix check`)."""

    exit_code = EXIT_FAILED


def shown(value: object, limit: int = 60) -> str:
    """A value from untrusted input as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(str(value))} characters)"

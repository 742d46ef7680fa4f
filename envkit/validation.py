"""Validate a file: a stack file (partial or full) or a lock (its stack, and that it is current)."""

from __future__ import annotations

from pathlib import Path

from envkit.lockfile import build_artifacts, lock_pins, parse_lock
from envkit.matrix import load_matrix
from envkit.models.report import Conflict, Fact, ValidationReport
from envkit.resolve import pins_from_mapping, validate_pins
from envkit.stackfile import stack_from_data
from envkit.yamlio import load_text, read_text


def validate_file(path: Path) -> ValidationReport:
    """Read the file once (it may be a pipe), then judge it as a lock or as a stack file."""
    lm = load_matrix()
    text = read_text(path)
    data, lines = load_text(text, str(path), scalars_as_str=False)
    if isinstance(data, dict) and "schema_version" in data and "stack" in data:
        lock = parse_lock(data, lines, str(path))
        report = validate_pins(lm, lock_pins(lm, lock, str(path)))
        if not report.valid:
            return report
        extra: list[Conflict] = []
        hints = list(report.hints)
        if lock.matrix_digest != lm.digest:
            hints.append(
                f"the lock was made from another matrix ({lock.matrix_digest[:19]}…, this envkit has {lm.digest[:19]}…): "
                "re-run the command in its header to refresh it"
            )
        rebuilt = build_artifacts(lm, lock.stack.model_dump() | {"torch": lock.stack.torch})
        if [a.model_dump() for a in rebuilt] != [a.model_dump() for a in lock.artifacts]:
            extra.append(
                Conflict(
                    summary="the lock's artifacts differ from what the matrix gives for its stack",
                    pins=[],
                    chain=[
                        Fact(fact="artifacts (installer names, hashes, flags) were edited or come from another matrix",
                             rule="lock/artifacts", source=str(path), kind="observed"),
                        Fact(fact=f"regenerate with `{lock.generated_by}`", rule="lock/artifacts", source="derived",
                             kind="derived"),
                    ],
                )
            )
        return ValidationReport(
            valid=not extra, input=report.input, stack=report.stack, conflicts=extra, hints=hints
        )
    data, lines = load_text(text, str(path), scalars_as_str=True)
    values, where = stack_from_data(data, lines, str(path))
    return validate_pins(lm, pins_from_mapping(lm, values, where=where))

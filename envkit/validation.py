"""Validate a file: a stack file (partial or full) or a lock (its stack, and that every field the matrix derives
from it is what the matrix gives: the same check the command line's lock gate runs, `envkit.locking.check_lock`)."""

from __future__ import annotations

from pathlib import Path

from envkit.lockfile import parse_lock
from envkit.locking import check_lock, lock_pins, upgrade
from envkit.matrix import load_matrix
from envkit.models.report import Conflict, Fact, ValidationReport
from envkit.resolve import pins_from_mapping, validate_pins
from envkit.stackfile import stack_from_data
from envkit.yamlio import load_text, read_text


def validate_file(path: Path) -> ValidationReport:
    """Read the file once (it may be a pipe), then judge it as a lock or as a stack file."""
    lm = load_matrix()
    text = read_text(path)
    # every scalar as written first: a stack file's `cann: 2024-13-45` is a value to judge, not a broken timestamp
    data, lines = load_text(text, str(path), scalars_as_str=True)
    if isinstance(data, dict) and "schema_version" in data and "stack" in data:
        data, lines = load_text(text, str(path), scalars_as_str=False)  # a lock has typed fields
        lock = parse_lock(data, lines, str(path), upgrade=upgrade)
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
        sections: dict[str, list[str]] = {}
        for field in check_lock(lock, str(path), lm):
            section, _, rest = field.partition(".")
            if section == "artifacts":  # `cann-toolkit: zip.sha256`
                component, _, rest = rest.partition(".")
                rest = f"{component}: {rest or '(all)'}"
            sections.setdefault(section, []).append(rest or section)
        for section, fields in sections.items():
            what = ("artifact fields " if section == "artifacts" else f"{section} fields ") + ", ".join(fields)
            extra.append(_edited(lock, path, section, what))
        return ValidationReport(valid=not extra, input=report.input, stack=report.stack, conflicts=extra, hints=hints)
    values, where = stack_from_data(data, lines, str(path))
    return validate_pins(lm, pins_from_mapping(lm, values, where=where))


def _edited(lock, path: Path, section: str, what: str) -> Conflict:
    """A lock section that is not what the matrix gives for the lock's stack."""
    return Conflict(
        summary=f"the lock's {section} section differs from what the matrix gives for its stack",
        pins=[],
        chain=[
            Fact(fact=f"{what}: edited, or from another matrix", rule=f"lock/{section}", source=str(path), kind="observed"),
            Fact(fact=f"regenerate with `{lock.generated_by}`", rule=f"lock/{section}", source="derived", kind="derived"),
        ],
    )

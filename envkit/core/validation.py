"""Validate a file: a stack file (partial or full) or a lock (its stack, and that every field the matrix derives
from it is what the matrix gives: the same check the command line's lock gate runs, `envkit.core.derive.check_lock`).

A lock that holds is judged without pydantic (`_valid_lock`: the C YAML loader, the strict plain reader
`envkit.lock.read`, the plain core, a report record), which is the start-up path of `envkit validate LOCK`. Anything
else (a stack file, a lock the plain reader does not take as it is, an older schema, a stack that is not valid, an
edited lock, a lock of another matrix) is judged by `_validate_text` through the pydantic models, which give the
messages: the plain path only ever answers "valid", with the very report `_validate_text` gives for that lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envkit.io.yamlio import read_text
from envkit.lock.text import plain

if TYPE_CHECKING:
    from envkit.core.report_records import ValidationReport as ValidReport
    from envkit.models.report import Conflict, ValidationReport


def validate_file(path: Path) -> ValidationReport:
    """Read the file once (it may be a pipe), then judge it as a lock or as a stack file: the pydantic report."""
    from envkit.models.report import ValidationReport

    report = judge_file(path)
    return report if isinstance(report, ValidationReport) else ValidationReport.model_validate(plain(report))


def judge_file(path: Path) -> ValidationReport | ValidReport:
    """`validate_file` for `envkit validate`: the same report, as the plain record where a lock holds (its start-up
    path: no pydantic), else as the pydantic model. Both dump alike with `envkit.lock.text.plain`."""
    from envkit.core.matrix import load_matrix

    load_matrix()  # first, as ever: a broken matrix is said before anything about the file
    text = read_text(path)
    valid = _valid_lock(text, str(path))
    return valid if valid is not None else _validate_text(text, path)


def _valid_lock(text: str, filename: str) -> ValidReport | None:
    """The report of a lock that holds (schema 3, taken as it is by the strict plain reader, from this matrix, a
    valid stack, nothing derivable edited), or None: `_validate_text` judges it."""
    import yaml

    from envkit.core.derive import check_lock, lock_pins
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import valid_report, valid_resolution
    from envkit.errors import EnvkitError
    from envkit.io.yamlio import fast_load_text
    from envkit.lock.read import read_lock_records

    try:
        data = fast_load_text(text, as_written=True)
    except yaml.YAMLError:
        return None
    if not (isinstance(data, dict) and "schema_version" in data and "stack" in data):
        return None  # a stack file
    lock = read_lock_records(data)
    if lock is None:
        return None
    try:
        lm = load_matrix()
        if lock.matrix_digest != lm.digest:
            return None  # said with a hint
        pins = lock_pins(lm, lock, filename)
        res = valid_resolution(lm, pins)
        if res is None or check_lock(lock, filename, lm, res):
            return None
        return valid_report(lm, pins, res)
    except EnvkitError:  # a version this matrix does not know: said with its message
        return None


def _validate_text(text: str, path: Path) -> ValidationReport:
    """The file judged through the pydantic models: a stack file, or a lock with every message the schema, the
    resolver and the matrix gate give."""
    from envkit.core.derive import check_lock, lock_pins, upgrade
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import pins_from_mapping, validate_pins
    from envkit.core.stackfile import stack_from_data
    from envkit.io.yamlio import load_text
    from envkit.lock.file import parse_lock
    from envkit.models.report import ValidationReport

    lm = load_matrix()
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


def _edited(lock, path: Path, section: str, what: str) -> Conflict:  # noqa: ANN001 - the pydantic Lock
    """A lock section that is not what the matrix gives for the lock's stack."""
    from envkit.models.report import Conflict, Fact

    return Conflict(
        summary=f"the lock's {section} section differs from what the matrix gives for its stack",
        pins=[],
        chain=[
            Fact(fact=f"{what}: edited, or from another matrix", rule=f"lock/{section}", source=str(path), kind="observed"),
            Fact(fact=f"regenerate with `{lock.generated_by}`", rule=f"lock/{section}", source="derived", kind="derived"),
        ],
    )

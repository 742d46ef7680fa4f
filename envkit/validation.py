"""Validate a file: a stack file (partial or full) or a lock (its stack, and that it is current)."""

from __future__ import annotations

from pathlib import Path

from envkit.lockfile import parse_lock
from envkit.locking import build_artifacts, build_platform, lock_pins
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
        stack = lock.stack.model_dump() | {"torch": lock.stack.torch}
        want = {a.component: a.model_dump() for a in build_artifacts(lm, stack)}
        have = {a.component: a.model_dump() for a in lock.artifacts}
        fields = [f"{c}: {f}" for c in sorted(want.keys() | have.keys()) for f in _differ(want.get(c), have.get(c))]
        if fields:
            extra.append(_edited(lock, path, "artifacts", "artifact fields " + ", ".join(fields)))
        fields = _differ(build_platform(lm, stack).model_dump(), lock.platform.model_dump())
        if fields:
            extra.append(_edited(lock, path, "platform", "platform fields " + ", ".join(fields)))
        return ValidationReport(
            valid=not extra, input=report.input, stack=report.stack, conflicts=extra, hints=hints
        )
    data, lines = load_text(text, str(path), scalars_as_str=True)
    values, where = stack_from_data(data, lines, str(path))
    return validate_pins(lm, pins_from_mapping(lm, values, where=where))


def _differ(want: object, have: object, at: str = "") -> list[str]:
    """The dotted paths where two dumped models differ (`zip.sha256`, `run.file`); the whole path if one is missing."""
    if isinstance(want, dict) and isinstance(have, dict):
        return [p for k in sorted(want.keys() | have.keys())
                for p in _differ(want.get(k), have.get(k), f"{at}.{k}" if at else str(k))]
    return [] if want == have else [at or "(all)"]


def _edited(lock, path: Path, section: str, what: str) -> Conflict:
    """A lock section that is not what the matrix gives for the lock's stack."""
    return Conflict(
        summary=f"the lock's {section} differ from what the matrix gives for its stack",
        pins=[],
        chain=[
            Fact(fact=f"{what}: edited, or from another matrix", rule=f"lock/{section}", source=str(path),
                 kind="observed"),
            Fact(fact=f"regenerate with `{lock.generated_by}`", rule=f"lock/{section}", source="derived", kind="derived"),
        ],
    )

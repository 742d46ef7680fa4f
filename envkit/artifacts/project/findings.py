"""What a scan reports: findings (a rule at a place, with its severity, the Ascend way and the source) and the
project's dependencies as read from its files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.artifacts.project.table import Table

SEVERITIES = ("block", "warn", "info")


@dataclass
class Finding:
    kind: str  # "code" | "dependency"
    path: str  # relative to the project, POSIX separators
    line: int | None
    rule: str
    severity: str
    message: str
    fix: str
    source: str
    confidence: str
    column: int | None = None
    sources: list[str] = field(default_factory=list, repr=False)  # `source`, one entry each

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.path, self.line or 0, self.column or 0, self.rule, self.message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "line": self.line,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "source": self.source,
            "confidence": self.confidence,
        }


def make(
    table: Table,
    rule_id: str,
    kind: str,
    path: str,
    line: int | None,
    message: str,
    *,
    severity: str | None = None,
    fix: str | None = None,
    fill: dict[str, str] | None = None,
    source: list[str] | None = None,
    confidence: str | None = None,
    column: int | None = None,
) -> Finding:
    """A finding of `rule_id`: the row's severity, fix (its {placeholders} filled from `fill`) and sources unless given."""
    row = table.rule(rule_id)
    text = fix if fix is not None else row.fix
    for key, value in (fill or {}).items():
        text = text.replace("{" + key + "}", value)
    return Finding(
        kind=kind,
        path=path,
        line=line,
        rule=rule_id,
        severity=severity or row.severity,
        message=message,
        fix=text,
        source="; ".join(source or row.source),
        confidence=confidence or row.confidence,
        column=column,
        sources=list(source or row.source),
    )


@dataclass
class Dependency:
    name: str  # normalized (PEP 503)
    spec: str  # as written
    path: str
    line: int
    group: str  # requirements, constraint, project, optional:X, group:X, install_requires, extras:X, conda-pip, poetry
    optional: bool = False
    locked: str | None = None
    klass: str = "unlisted"  # no-ascend-build | ascend-route | fine | unlisted
    requirement: Any = field(default=None, repr=False, compare=False)  # packaging Requirement, when it parses

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "from": self.where,
            "locked": self.locked,
            "group": self.group,
            "class": self.klass,
        }

"""The migration table's schema (matrices/migration.yaml): the rules `envkit scan` reports and the classification of
a project's dependencies, every row sourced. Data only: the checks live in envkit.artifacts.project (and the code rules in envkit.jobs.scan)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from envkit.models.base import Confidence, StrictModel

Severity = Literal["block", "warn", "info"]
RuleId = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,63}$")]
# a normalized project name (PEP 503), or a glob of them (nvidia-*, cupy-cuda*)
NamePattern = Annotated[str, Field(pattern=r"^[a-z0-9*][a-z0-9*.-]{0,99}$")]
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")]
Line = Annotated[str, Field(min_length=1, max_length=1000)]


class SourcedRow(StrictModel):
    """Where the fact comes from (the page or file and what it says) and how sure it is."""

    source: list[Line] = Field(min_length=1, max_length=8)
    confidence: Confidence


class ScanRule(SourcedRow):
    id: RuleId
    kind: Literal["code", "dependency", "lock", "scan"]
    severity: Severity
    with_ttn: Severity | None = Field(None, description="the severity where the file enables transfer_to_npu")
    npu_aware: bool = Field(False, description="not reported inside a scope that also handles npu")
    title: Line
    message: Line
    fix: Line = Field(description="the Ascend way; {npu}, {api}, {fix} are filled in per finding")
    reason: Line = Field(description="why this severity")


class DependencyRow(SourcedRow):
    name: NamePattern
    aliases: list[NamePattern] = Field([], max_length=16)
    modules: list[ModuleName] = Field([], max_length=16, description="the import names")
    class_: Literal["no-ascend-build", "ascend-route", "fine"] = Field(alias="class")
    severity: Severity | None = Field(None, description="the finding's severity; none: no finding (a fine dependency)")
    since: Line | None = Field(None, description="a PEP 440 specifier of the releases with Ascend support")
    python: Line | None = Field(None, description="a PEP 440 specifier of the Pythons the Ascend route supports")
    message: Line
    fix: Line
    note: Line | None = None


class MigrationTable(StrictModel):
    schema_version: Literal[1] = 1
    severities: dict[Severity, Line]
    rules: list[ScanRule] = Field(max_length=500)
    dependencies: list[DependencyRow] = Field(max_length=2000)

    @model_validator(mode="after")
    def _unique(self) -> MigrationTable:
        ids = [r.id for r in self.rules]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"rule ids appear twice: {', '.join(twice)}")
        names = [n for d in self.dependencies for n in (d.name, *d.aliases)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"dependency names appear twice: {', '.join(twice)}")
        if set(self.severities) != {"block", "warn", "info"}:
            raise ValueError("severities must define block, warn and info")
        return self

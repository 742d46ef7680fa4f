"""`envkit scan`: what a CUDA project needs to move to Ascend, read statically from its code and its dependency files.

    scan(ScanRequest(path=Path("my-project"), lock=Path("envkit.lock"))) -> ScanResult

The project folder is untrusted: nothing in it is imported or run, every file is read through `envkit.io.untrusted`
(envkit.jobs.scan.walk), caps bound what is read, and what cannot be read is an `info` finding. The rules and the
dependency classification are data (matrices/migration.yaml, envkit.jobs.scan.table); the code rules are in
`code`, the dependency readers in `deps`, the lock checks in `lockcheck`, the JSON/SARIF/text forms in `report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.jobs.scan.findings import SEVERITIES, Dependency, Finding, make

if TYPE_CHECKING:
    from envkit.jobs.scan.table import Table
    from envkit.lock.gate import LockCheck

__all__ = ["Dependency", "Finding", "ScanRequest", "ScanResult", "scan"]


@dataclass(frozen=True)
class ScanRequest:
    path: Path
    lock: Path | None = None
    lock_check: LockCheck | None = None  # the command line's (the lock compared with what the matrix derives)
    table: str | None = None  # another migration table (tests)


@dataclass
class ScanResult:
    project: str
    findings: list[Finding] = field(default_factory=list)
    dependencies: list[Dependency] = field(default_factory=list)
    python_files: int = 0
    dependency_files: list[str] = field(default_factory=list)
    lock: str | None = None
    table: Any = None

    @property
    def blocked(self) -> bool:
        return any(f.severity == "block" for f in self.findings)

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "findings": [f.to_dict() for f in self.findings],
            "dependencies": [d.to_dict() for d in self.dependencies],
            "summary": {**self.counts(), "python_files": self.python_files, "dependency_files": self.dependency_files},
            "lock": self.lock,
        }


def scan(request: ScanRequest) -> ScanResult:
    """Scan the project at `request.path` (a folder or one file); BadInput (exit 2) when it is neither, or when the
    lock is bad."""
    from envkit.errors import BadInput
    from envkit.jobs.scan.code import scan_file
    from envkit.jobs.scan.deps import read_dependencies
    from envkit.jobs.scan.table import load_table
    from envkit.jobs.scan.walk import PYTHON, walk

    table = load_table(request.table)
    locked = None
    if request.lock is not None:  # before the scan: a bad lock is bad input, whatever the project holds
        from envkit.lock.file import SCHEMA_ONLY, read_lock

        locked = read_lock(Path(request.lock), request.lock_check or SCHEMA_ONLY)
    project = walk(request.path)
    result = ScanResult(project=str(request.path), lock=None if request.lock is None else str(request.lock), table=table)
    findings: list[Finding] = []
    setup_sources: dict[str, bytes] = {}
    for rel in project.python:
        try:
            source = project.read(rel, PYTHON)
        except BadInput as exc:
            findings.append(make(table, "scan-unreadable", "code", rel, None, f"{rel}: {exc.message}"))
            continue
        result.python_files += 1
        if rel.rsplit("/", 1)[-1] == "setup.py":
            setup_sources[rel] = source
        findings += scan_file(rel, source, table)
    for rel, why in project.skipped:
        kind = "code" if rel.endswith(".py") else "dependency"
        findings.append(make(table, "scan-unreadable", kind, rel, None, f"{rel}: {why}"))
    for message in project.limits:
        findings.append(make(table, "scan-limit", "code", ".", None, message))
    deps = read_dependencies(project, table, setup_sources)
    findings += deps.findings
    result.dependency_files = [rel for rel, _ in project.dependency]
    off_target: set[int] = set()
    if locked is not None:
        from envkit.jobs.scan.lockcheck import check

        findings += check(deps.dependencies, deps.requires_python, locked, Path(request.lock or "").name, table, off_target)
    findings += classify(deps.dependencies, table, off_target)
    result.dependencies = deps.dependencies
    result.findings = sorted(findings, key=Finding.sort_key)
    return result


def classify(deps: list[Dependency], table: Table, off_target: set[int]) -> list[Finding]:
    """Each dependency's class from the table, and a finding for one with no Ascend build or an Ascend route (warn
    where it sits in an optional group, info where its marker keeps it off the lock's target); a constraint
    installs nothing and is not classified."""
    out: list[Finding] = []
    for i, dep in enumerate(deps):
        row = table.dependency(dep.name)
        if row is None:
            continue
        dep.klass = row.class_
        if dep.group == "constraint":
            continue
        where = f" ({_group_label(dep.group)}: optional)" if dep.optional else ""
        off = " (not installed on the lock's target)" if i in off_target else ""
        if row.severity is not None and row.class_ != "fine":
            rule = "dep-no-ascend-build" if row.class_ == "no-ascend-build" else "dep-ascend-route"
            severity = row.severity
            if i in off_target:
                severity = "info"
            elif dep.optional and severity == "block":
                severity = "warn"
            out.append(
                make(
                    table,
                    rule,
                    "dependency",
                    dep.path,
                    dep.line,
                    f"{dep.spec}{where}{off}: {row.message}",
                    severity=severity,
                    fill={"fix": row.fix},
                    source=list(row.source),
                    confidence=row.confidence,
                )
            )
        if (
            row.since
            and dep.requirement is not None
            and i not in off_target
            and not _allows(dep.requirement.specifier, row.since)
        ):
            out.append(
                make(
                    table,
                    "dep-version-too-old",
                    "dependency",
                    dep.path,
                    dep.line,
                    f"{dep.spec}{where}: no release it allows has Ascend support ({row.name} {row.since}: {row.message})",
                    fill={"fix": row.fix},
                    source=list(row.source),
                    confidence=row.confidence,
                )
            )
    return out


def _group_label(group: str) -> str:
    kind, _, name = group.partition(":")
    label = {"optional": "extra", "extras": "extra", "group": "dependency group", "poetry": "Poetry group"}.get(kind, kind)
    return f"{label} '{name}'" if name else label


def _allows(spec: Any, since: str) -> bool:
    """Whether `spec` and `since` have a version in common, judged on the versions either names and the next
    releases after them (no index is asked)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not spec:
        return True
    try:
        other = SpecifierSet(since)
    except InvalidSpecifier:
        return True
    candidates: set[str] = set()
    for s in [*spec, *other]:
        try:
            v = Version(s.version.replace(".*", ""))
        except InvalidVersion:
            continue
        rel = list(v.release) + [0] * (3 - len(v.release))
        candidates.add(str(v))
        candidates.add(f"{rel[0]}.{rel[1]}.{rel[2] + 1}")
        candidates.add(f"{rel[0]}.{rel[1] + 1}.0")
        candidates.add(f"{rel[0] + 1}.0.0")
    return any(spec.contains(c, prereleases=True) and other.contains(c, prereleases=True) for c in candidates)

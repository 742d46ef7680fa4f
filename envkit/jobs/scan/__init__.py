"""`envkit scan`: what a CUDA project needs to move to Ascend, read statically from its code and its dependency files.

    scan(ScanRequest(path=Path("my-project"), lock=Path("envkit.lock"))) -> ScanResult

The project folder is untrusted: nothing in it is imported or run, every file is read through `envkit.io.untrusted`
(envkit.artifacts.project.walk), caps bound what is read, and what cannot be read is an `info` finding. The rules and
the dependency classification are data (matrices/migration.yaml, envkit.artifacts.project.table). The code rules are
in `code`, the JSON/SARIF/text forms in `report`; the project's dependency files are read, classified and held to a
lock by `envkit.artifacts.project`, which `envkit lock --project` shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.artifacts.project.findings import SEVERITIES, Dependency, Finding, make

if TYPE_CHECKING:
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
    from envkit.artifacts.project.classify import classify
    from envkit.artifacts.project.deps import read_dependencies
    from envkit.artifacts.project.table import load_table
    from envkit.artifacts.project.walk import PYTHON, walk
    from envkit.errors import BadInput
    from envkit.jobs.scan.code import scan_file

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
        from envkit.artifacts.project.lockcheck import check

        findings += check(deps.dependencies, deps.requires_python, locked, Path(request.lock or "").name, table, off_target)
    findings += classify(deps.dependencies, table, off_target)
    result.dependencies = deps.dependencies
    result.findings = sorted(findings, key=Finding.sort_key)
    return result

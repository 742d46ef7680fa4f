"""The dependencies of a user's project classified by the migration table (matrices/migration.yaml): no Ascend
build, an Ascend route, or a version too old for one; what `envkit scan` reports and `envkit lock --project` refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envkit.artifacts.project.findings import Dependency, Finding, make

if TYPE_CHECKING:
    from envkit.artifacts.project.table import Table


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

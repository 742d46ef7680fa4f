"""`envkit lock --project PATH`: the project's dependencies as the lock records them, read by the scan's own reader
(`envkit.artifacts.project.deps`) and judged by its own rules before anything is resolved.

    lock_requirements(Path("my-trainer"), lock, "envkit.lock", exclude=("flash-attn",)) -> ProjectDependencies

What joins the closure: every dependency the project installs (its requirements files, `[project]` dependencies,
`install_requires`, an environment.yml's pip section, Poetry's main table), and the optional groups chosen: `extras`
(`[project.optional-dependencies]`, `extras_require` of setup.cfg/setup.py) and `groups` (PEP 735
`[dependency-groups]` with the groups they include, Poetry's groups); a name the project does not declare is bad
input (exit 2) naming those it does. What the files a requirements file's `-c` line names pin constrains the
resolution (never installed for its own sake; recorded in `constraint_files` and `constraints`); such a file that
cannot be read (outside the project, a link out of it, too large, a URL) is bad input. A dependency the migration table knows to have no Ascend build, one whose
spec excludes a version the stack pins (torch beside torch_npu), a project whose requires-python excludes the lock's
Python: refused (CheckFailed, exit 1) with the scan's finding (the chain, the Ascend way, its source), unless it is
left out with `--exclude NAME`. A dependency that is a URL or a local path is bad input (exit 2): a lock records
index wheels with their hashes. What the resolver then finds (no wheel for the target, a dependency that needs
another torch) is `envkit.artifacts.closure`'s to explain (`project_conflict`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envkit.artifacts.project.findings import Dependency, Finding
from envkit.artifacts.project.table import normalize
from envkit.errors import BadInput, CheckFailed, Where

if TYPE_CHECKING:
    from envkit.artifacts.project.deps import DepScan
    from envkit.models.lock import Lock, ProjectDependencies, ProjectRequirement

# the groups a plain `pip install` of the project installs (envkit.artifacts.project.findings.Dependency.group)
INSTALLED = ("requirements", "project", "install_requires", "conda-pip", "poetry")
EXTRA_KINDS = ("optional", "extras")  # Dependency.group's kinds of an extra; "group", "poetry": of a dependency group
MAX_SHOWN = 12


def installed(dep: Dependency) -> bool:
    return not dep.optional and dep.group.split(":", 1)[0] in INSTALLED


def chosen_groups(deps: DepScan, extras: tuple[str, ...], groups: tuple[str, ...], path: Path) -> set[str]:
    """The Dependency.group labels of the chosen extras and groups (a PEP 735 group's included groups too);
    BadInput naming what the project declares for a name it does not."""
    declared: dict[tuple[str, str], list[str]] = {}
    for label in deps.declared:
        kind, _, name = label.partition(":")
        declared.setdefault(("extra" if kind in EXTRA_KINDS else "group", normalize(name)), []).append(label)
    includes = {normalize(k): [normalize(x) for x in v] for k, v in deps.group_includes.items()}
    chosen: set[str] = set()
    for kind, names, option in (("extra", extras, "--project-extra"), ("group", groups, "--project-group")):
        todo = [normalize(n) for n in names]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            labels = declared.get((kind, name))
            if labels is None:
                have = sorted({n for k, n in declared if k == kind})
                raise BadInput(
                    f"{option} {name}: the project {path} declares no {kind} {name!r}; its {kind}s: "
                    + (", ".join(have) if have else "none"),
                    where=Where(str(path)),
                    hint=f"Give one of the {kind}s it declares"
                    + (
                        " (an extra: [project.optional-dependencies], extras_require or [tool.poetry.extras])"
                        if kind == "extra"
                        else " (a group: [dependency-groups] or [tool.poetry.group.NAME])"
                    ),
                )
            chosen.update(labels)
            if kind == "group":
                todo += includes.get(name, [])
    return chosen


def lock_requirements(
    path: Path,
    lock: Lock,
    lock_name: str,
    exclude: tuple[str, ...] = (),
    extras: tuple[str, ...] = (),
    groups: tuple[str, ...] = (),
) -> ProjectDependencies:
    """The project's installed dependencies at `path` (versions not yet resolved), with those of the chosen `extras`
    and `groups`, and the constraints its `-c` lines name, held to the scan's dependency and lock rules for `lock`'s
    target; CheckFailed naming every blocking finding, BadInput for what a lock cannot record. `exclude`: names left
    out (the scan's findings about them too)."""
    from envkit.artifacts.project.classify import classify
    from envkit.artifacts.project.deps import read_dependencies
    from envkit.artifacts.project.lockcheck import check
    from envkit.artifacts.project.table import load_table
    from envkit.artifacts.project.walk import PYTHON, walk
    from envkit.models.lock import ProjectDependencies

    table = load_table()
    project = walk(path)
    if not project.dependency:
        raise BadInput(
            f"{path} has no dependency file (requirements*.txt, pyproject.toml, setup.cfg, setup.py, environment.yml)",
            where=Where(str(path)),
            hint="Give the project's folder (or its requirements file) to --project.",
        )
    sources: dict[str, bytes] = {}
    for rel, kind in project.dependency:
        if kind == "setup.py":
            try:
                sources[rel] = project.read(rel, PYTHON)
            except BadInput:
                pass  # the reader says it was not read
    deps = read_dependencies(project, table, sources)
    chosen = chosen_groups(deps, extras, groups, path)
    for dep in deps.dependencies:
        if dep.group in chosen:
            dep.optional = False  # installed now: the scan's rules hold it to what an installed dependency is held to
    if deps.constraints_unread:
        rel, line, why = deps.constraints_unread[0]
        raise BadInput(
            f"{rel}:{line}: {why}: a constraint the lock would not apply",
            where=Where(rel, line),
            hint="Keep constraint files inside the project (no link out of it, no URL), then lock again.",
        )
    if deps.includes_unread:  # its requirements would be missing from the lock, and from the bundle offline
        rel, line, why = deps.includes_unread[0]
        raise BadInput(
            f"{rel}:{line}: {why}: requirements the lock would leave out",
            where=Where(rel, line),
            hint="Keep included requirements files inside the project (no link out of it, no URL), then lock again.",
        )
    # the stack's pins and CANN's, not an earlier closure's: the closure is resolved again, project included
    fresh = lock.model_copy(update={"python": lock.python.model_copy(update={"closure": None})})
    off_target: set[int] = set()
    findings = list(deps.findings)
    findings += check(deps.dependencies, deps.requires_python, fresh, Path(lock_name).name, table, off_target)
    findings += classify(deps.dependencies, table, off_target)
    gone = {normalize(x) for x in exclude}
    kept = [d for d in deps.dependencies if installed(d) or d.group in chosen]  # `exclude`: recorded, not resolved
    applied = set(deps.constraint_files)
    constraining = [d for d in deps.dependencies if d.group == "constraint" and d.path in applied and d.name not in gone]
    left_out = {(d.path, d.line) for d in deps.dependencies if d.name in gone}
    blocking = [f for f in findings if f.severity == "block" and (f.path, f.line) not in left_out]
    if blocking:
        raise refusal(blocking, str(path), lock_name)
    return ProjectDependencies(
        path=str(path),
        files=[rel for rel, _ in project.dependency],
        requirements=_records(kept, gone),
        extras=sorted({normalize(x) for x in extras}),
        groups=sorted({normalize(x) for x in groups}),
        constraint_files=list(deps.constraint_files),
        constraints=_records(constraining, gone),
    )


def _records(deps: list[Dependency], gone: set[str]) -> list[ProjectRequirement]:
    """Each dependency as the lock records it; BadInput for a URL, a path or what the lock's model refuses."""
    from pydantic import ValidationError

    from envkit.models.lock import ProjectRequirement

    records: list[ProjectRequirement] = []
    for dep in deps:
        req = dep.requirement
        if (req is None or req.url) and dep.name in gone:
            continue  # left out, and not a requirement the lock could name
        if req is None or req.url:
            raise BadInput(
                f"{dep.spec[:200]} ({dep.where}) is a URL or a path, not a requirement on an index: a lock records "
                "index wheels with their hashes",
                where=Where(dep.path, dep.line),
                hint=f"Publish it on an index (or a --find-links folder) and require it by name, or leave it out "
                f"with --exclude {dep.name}.",
            )
        try:
            records.append(ProjectRequirement(name=dep.name, spec=str(req), source=dep.where, version=None))
        except ValidationError as exc:
            raise BadInput(
                f"{dep.spec[:200]} ({dep.where}) cannot be recorded in the lock: {exc.errors()[0]['msg']}",
                where=Where(dep.path, dep.line),
                hint=f"Write it as name, version clauses and a simple marker, or leave it out with --exclude {dep.name}.",
            ) from None
    return records


def refusal(blocking: list[Finding], project: str, lock_name: str) -> CheckFailed:
    """The blocking findings as one CheckFailed: each with its place, rule, chain, the Ascend way and its source."""
    lines = []
    for f in blocking[:MAX_SHOWN]:
        at = f.path if f.line is None else f"{f.path}:{f.line}"
        lines.append(f"  {at} [{f.rule}] {f.message}\n      Ascend way: {f.fix}\n      source: {f.source}")
    more = f"\n  ... and {len(blocking) - MAX_SHOWN} more" if len(blocking) > MAX_SHOWN else ""
    n = len(blocking)
    return CheckFailed(
        f"the project {project} cannot join {lock_name}'s closure: {n} blocking finding{'s' if n != 1 else ''}\n"
        + "\n".join(lines)
        + more,
        hint="Change the dependency as the Ascend way says, or leave it out with --exclude NAME (recorded in the lock); "
        f"`envkit scan {project} --lock {lock_name}` shows every finding.",
        details={"findings": [f.to_dict() for f in blocking]},
    )

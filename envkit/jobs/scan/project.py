"""`envkit lock --project PATH`: the project's dependencies as the lock records them, read by the scan's own reader
(`envkit.jobs.scan.deps`) and judged by its own rules before anything is resolved.

    lock_requirements(Path("my-trainer"), lock, "envkit.lock", exclude=("flash-attn",)) -> ProjectDependencies

What joins the closure: every dependency the project installs (its requirements files, `[project]` dependencies,
`install_requires`, an environment.yml's pip section, Poetry's main table), never an optional group (extras,
dependency groups) nor a constraint. A dependency the migration table knows to have no Ascend build, one whose
spec excludes a version the stack pins (torch beside torch_npu), a project whose requires-python excludes the lock's
Python: refused (CheckFailed, exit 1) with the scan's finding (the chain, the Ascend way, its source), unless it is
left out with `--exclude NAME`. A dependency that is a URL or a local path is bad input (exit 2): a lock records
index wheels with their hashes. What the resolver then finds (no wheel for the target, a dependency that needs
another torch) is `envkit.artifacts.closure`'s to explain (`project_conflict`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput, CheckFailed, Where
from envkit.jobs.scan.findings import Dependency, Finding
from envkit.jobs.scan.table import normalize

if TYPE_CHECKING:
    from envkit.models.lock import Lock, ProjectDependencies

# the groups a plain `pip install` of the project installs (envkit.jobs.scan.findings.Dependency.group)
INSTALLED = ("requirements", "project", "install_requires", "conda-pip", "poetry")
MAX_SHOWN = 12


def installed(dep: Dependency) -> bool:
    return not dep.optional and dep.group.split(":", 1)[0] in INSTALLED


def lock_requirements(path: Path, lock: Lock, lock_name: str, exclude: tuple[str, ...] = ()) -> ProjectDependencies:
    """The project's installed dependencies at `path` (versions not yet resolved), held to the scan's dependency and
    lock rules for `lock`'s target; CheckFailed naming every blocking finding, BadInput for what a lock cannot
    record. `exclude`: names left out (the scan's findings about them too)."""
    from pydantic import ValidationError

    from envkit.jobs.scan import classify
    from envkit.jobs.scan.deps import read_dependencies
    from envkit.jobs.scan.lockcheck import check
    from envkit.jobs.scan.table import load_table
    from envkit.jobs.scan.walk import PYTHON, walk
    from envkit.models.lock import ProjectDependencies, ProjectRequirement

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
    # the stack's pins and CANN's, not an earlier closure's: the closure is resolved again, project included
    fresh = lock.model_copy(update={"python": lock.python.model_copy(update={"closure": None})})
    off_target: set[int] = set()
    findings = list(deps.findings)
    findings += check(deps.dependencies, deps.requires_python, fresh, Path(lock_name).name, table, off_target)
    findings += classify(deps.dependencies, table, off_target)
    gone = {normalize(x) for x in exclude}
    kept = [d for d in deps.dependencies if installed(d)]  # those `exclude` names are recorded, not resolved
    left_out = {(d.path, d.line) for d in deps.dependencies if d.name in gone}
    blocking = [f for f in findings if f.severity == "block" and (f.path, f.line) not in left_out]
    if blocking:
        raise refusal(blocking, str(path), lock_name)
    records: list[ProjectRequirement] = []
    for dep in kept:
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
    return ProjectDependencies(path=str(path), files=[rel for rel, _ in project.dependency], requirements=records)


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

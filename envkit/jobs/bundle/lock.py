"""`envkit lock`: the lock completed with the full Python closure of its target and of the controller, and with the
dependencies of the user's project where one is given (`envkit.artifacts.closure.lock_python`, the project read by
`envkit.artifacts.project.requirements`, as `envkit scan` reads it).

    complete_lock(LockRequest(lock=Path("envkit.lock"), project=Path("my-trainer")), on_progress) -> LockedPython
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.artifacts.closure import PYPI
from envkit.errors import BadInput
from envkit.lock.gate import SCHEMA_ONLY, LockCheck

if TYPE_CHECKING:
    from envkit.artifacts.closure import LockedPython
    from envkit.models.lock import Lock, ProjectDependencies


@dataclass(frozen=True)
class LockRequest:
    """What `envkit lock` was asked for (its options, as given)."""

    lock: Path
    output: Path | None = None  # default: the lock itself
    target_python: str | None = None  # default: the lock's
    target_arch: str | None = None
    glibc: str | None = None  # default: from the lock's OS
    controller_python: str | None = None  # default: this machine's
    controller_arch: str | None = None
    controller_glibc: str | None = None
    only: tuple[str, ...] = ()  # keep only these of the lock's requirements
    exclude: tuple[str, ...] = ()  # left out, with what only they need (recorded)
    index_url: str = PYPI
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    torch_index_url: str | None = None
    index_for: tuple[str, ...] = ()  # "ID=URL": a mirror of the lock's index ID
    project: Path | None = None  # the user's project folder or requirements file
    project_extras: tuple[str, ...] = ()
    project_groups: tuple[str, ...] = ()
    build_image: str | None = None  # build sdists in containers of this image (`envkit.jobs.bundle.place`)
    lock_check: LockCheck = SCHEMA_ONLY  # what the lock is held to after its schema (the CLI: the matrix's gate)


def complete_lock(request: LockRequest, on_progress: Callable[[str], None] | None = None) -> LockedPython:
    """Resolve and write the closures `request` asks for; BadInput when a project's extra or group is chosen with
    no project, or when --build-image is no image reference, before the lock is read."""
    from envkit.artifacts.closure import lock_python
    from envkit.jobs.bundle.place import build_place

    r = request
    say = on_progress or (lambda _line: None)
    place = build_place(r.build_image)
    if r.project is None and (r.project_extras or r.project_groups):
        raise BadInput("--project-extra and --project-group choose a project's groups: give --project PATH too")
    return lock_python(
        r.lock,
        output=r.output,
        target_python=r.target_python,
        target_arch=r.target_arch,
        glibc=r.glibc,
        controller_python=r.controller_python,
        controller_arch=r.controller_arch,
        controller_glibc=r.controller_glibc,
        only=list(r.only),
        exclude=list(r.exclude),
        index_url=r.index_url,
        extra_index_urls=r.extra_index_urls,
        find_links=r.find_links,
        torch_index_url=r.torch_index_url,
        index_for=r.index_for,
        lock_check=r.lock_check,
        on_progress=say,
        project=_project_reader(r, say) if r.project is not None else None,
        build_place=place,
    )


def _project_reader(r: LockRequest, say: Callable[[str], None]) -> Callable[[Lock], ProjectDependencies]:
    """What reads the project's dependencies for the lock `lock_python` has read, and says what it read."""
    from envkit.artifacts.project.requirements import lock_requirements

    assert r.project is not None
    project = r.project

    def read(lk: Lock) -> ProjectDependencies:
        deps = lock_requirements(project, lk, str(r.lock), r.exclude, r.project_extras, r.project_groups)
        chosen = [f"extra {x}" for x in deps.extras] + [f"group {x}" for x in deps.groups]
        say(
            f"the project {project}: {len(deps.requirements)} dependencies from {', '.join(deps.files)}"
            + (f" ({', '.join(chosen)})" if chosen else "")
            + (f"; constrained by {', '.join(deps.constraint_files)}" if deps.constraint_files else "")
        )
        return deps

    return read

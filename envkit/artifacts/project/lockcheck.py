"""The project's dependencies against a lock, statically: each spec against the version the lock pins (the stack's
pins, `envkit lock`'s closure, CANN's own Python dependencies), each environment marker against the lock's target
(its Python, arch, Linux), the project's Python range against the lock's Python, and an Ascend route's Pythons.

No resolver runs: a dependency the lock does not pin is not resolved against the pins' own requirements (`envkit
lock` does that for the stack). Conflicts are explained as a chain: the spec and where it is written, the pin and
where the lock has it, the contradiction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envkit.artifacts.project.findings import Dependency, Finding, make
from envkit.artifacts.project.table import Table, normalize
from envkit.artifacts.wheels import marker_environment

if TYPE_CHECKING:
    from envkit.models.lock import Lock

_STACK_KEYS = {
    "torch": "torch",
    "torch-npu": "torch-npu",
    "numpy": "numpy",
    "transformers": "transformers",
    "accelerate": "accelerate",
}


@dataclass(frozen=True)
class Pin:
    version: str
    where: str  # where the lock has it
    kind: str  # stack | closure | cann


def pins(lock: Lock) -> dict[str, Pin]:
    """Every version the lock fixes, by normalized project name (the stack's pins win over the closure's)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: dict[str, Pin] = {}
    for item in lock.python.cann_runtime:
        try:
            req = Requirement(item)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if len(exact) == 1:
            out[normalize(req.name)] = Pin(exact[0], f"python.cann_runtime: {item}, from CANN's install guide", "cann")
    closure = lock.python.closure
    if closure is not None:
        for pkg in closure.packages:
            out[normalize(pkg.name)] = Pin(pkg.version, "python.closure (envkit lock)", "closure")
    for pin in lock.python.requirements:
        out[normalize(pin.name)] = Pin(pin.version, f"python.requirements, from stack.{pin.name}", "stack")
    return out


def target_environment(lock: Lock) -> dict[str, str]:
    """PEP 508 marker values of the lock's target (`envkit.artifacts.wheels.marker_environment`)."""
    closure = lock.python.closure
    return marker_environment(lock.python.python, closure.target.arch if closure is not None else lock.stack.arch)


def python_allowed(spec: str, python: str) -> bool | None:
    """Whether some release of Python `python` (a minor, 3.10) satisfies `spec`; None when `spec` does not parse."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specs = SpecifierSet(spec)
    except InvalidSpecifier:
        return None
    patches = {0, 99}
    for s in specs:
        m = re.match(rf"^{re.escape(python)}\.(\d+)", s.version)
        if m:
            n = int(m.group(1))
            patches |= {n, n + 1, max(n - 1, 0)}
    return any(specs.contains(f"{python}.{p}", prereleases=True) for p in patches)


def check(
    deps: list[Dependency],
    requires_python: list[tuple[str, str, int]],
    lock: Lock,
    lock_name: str,
    table: Table,
    off_target: set[int],
) -> list[Finding]:
    """Findings of the lock rules; sets each dependency's `locked`; adds to `off_target` the index of each dependency
    whose marker is false on the lock's target."""
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

    found: list[Finding] = []
    pinned = pins(lock)
    env = target_environment(lock)
    python = lock.python.python
    for spec, path, line in requires_python:
        ok = python_allowed(spec, python)
        if ok is False:
            found.append(
                make(
                    table,
                    "lock-python",
                    "dependency",
                    path,
                    line,
                    f"requires-python {spec!r} ({path}:{line}) → the lock's Python is {python} ({lock_name}: python.python) "
                    f"→ {python} is not in {spec}: pip refuses to install the project",
                )
            )
    for i, dep in enumerate(deps):
        pin = pinned.get(dep.name)
        if pin is not None:
            dep.locked = pin.version
        req: Any = dep.requirement
        if req is None:
            continue
        if req.marker is not None:
            try:
                on_target = req.marker.evaluate(dict(env, extra=dep.group.split(":", 1)[1] if ":" in dep.group else ""))
            except (UndefinedComparison, UndefinedEnvironmentName, ValueError):
                on_target = True
            if not on_target:
                off_target.add(i)
                found.append(
                    make(
                        table,
                        "not-on-target",
                        "dependency",
                        dep.path,
                        dep.line,
                        f"{dep.spec}: its marker ({req.marker}) is false for the lock's target "
                        f"(Python {python}, {env['platform_machine']}, Linux): not installed there",
                    )
                )
                continue
        if pin is not None and req.specifier:
            if not req.specifier.contains(pin.version, prereleases=True):
                rule = "lock-cann-runtime" if pin.kind == "cann" else "lock-conflict"
                how = (
                    f"envkit resolve --{dep.name} VERSION (a stack whose {dep.name} the spec allows)"
                    if pin.kind == "stack" and dep.name in _STACK_KEYS
                    else "envkit lock again with the project's requirements"
                    if pin.kind == "closure"
                    else "keep the project's dependency in its own environment"
                )
                found.append(
                    make(
                        table,
                        rule,
                        "dependency",
                        dep.path,
                        dep.line,
                        f"{dep.spec} ({dep.where}) → {lock_name} pins {dep.name} {pin.version} ({pin.where}) → "
                        f"{pin.version} is not in {req.specifier}: contradiction",
                        fix=f"allow {dep.name} {pin.version} in the spec, or {how}",
                    )
                )
        row = table.dependency(dep.name)
        if row is not None and row.python and row.severity is not None:
            ok = python_allowed(row.python, python)
            if ok is False:
                found.append(
                    make(
                        table,
                        "lock-route-python",
                        "dependency",
                        dep.path,
                        dep.line,
                        f"{dep.spec}: its Ascend route supports Python {row.python}, the lock's Python is {python}",
                        source=list(row.source),
                        confidence=row.confidence,
                    )
                )
    return found

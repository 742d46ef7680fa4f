"""The full Python closure of a lock: plan the resolution (data), run uv once (thin executor), pick wheels.

`plan_closure` turns a lock's python section into a `ClosurePlan` (roots, target, indexes,
exclusions); `run_uv` is the only function here that runs a process; `closure_from_pylock`
turns uv's `pylock.toml` into the lock's `PythonClosure`, choosing for each package the one wheel
the target's pip would choose (by tag preference).

Cross-platform resolution is uv's (`uv pip compile --python-platform`): pip's `--platform`
evaluates environment markers against the machine it runs on, so a closure for aarch64 resolved
on x86_64 would be wrong.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, CannotRun
from envkit.models.lock import ClosurePackage, ClosureTarget, Lock, PythonClosure
from envkit.wheels import normalize, tag_order, wheel_rank

DEFAULT_GLIBC = "2.28"
PYPI = "https://pypi.org/simple"


def req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    if not m:
        raise BadInput(f"not a requirement: {req!r}")
    return normalize(m.group(1))


@dataclass(frozen=True)
class ClosurePlan:
    """What to resolve and for which target; pure data."""

    roots: tuple[str, ...]
    target: ClosureTarget
    index_url: str = PYPI
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    overrides: tuple[str, ...] = field(default=())

    def requirements_in(self) -> str:
        return "".join(f"{r}\n" for r in self.roots)

    def overrides_in(self) -> str:
        # an override with a marker that is never true removes the project and what only it needs
        lines = list(self.overrides) + [f"{n} ; sys_platform == 'never'" for n in self.excluded]
        return "".join(f"{x}\n" for x in lines)


def make_target(python: str, arch: str, glibc: str = DEFAULT_GLIBC) -> ClosureTarget:
    if not re.fullmatch(r"3\.[0-9]+", python):
        raise BadInput(f"--target-python {python!r} is not a Python minor version like 3.10")
    if arch not in ("aarch64", "x86_64"):
        raise BadInput(f"--target-arch {arch!r}: use aarch64 or x86_64")
    minor = glibc.split(".")[1] if re.fullmatch(r"2\.[0-9]+", glibc) else None
    if minor is None:
        raise BadInput(f"--glibc {glibc!r} is not a glibc version like 2.28")
    return ClosureTarget(python=python, arch=arch, glibc=glibc, platform=f"manylinux_2_{minor}_{arch}")  # type: ignore[arg-type]


def target_roots(lock: Lock, only: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
    """The lock's pinned requirements and CANN's runtime dependencies, as requirement strings."""
    roots: list[str] = [f"{p.name}=={p.version}" for p in lock.python.requirements]
    pinned = {req_name(r) for r in roots}
    for r in lock.python.cann_runtime:
        if req_name(r) not in pinned:  # `numpy` in CANN's list is the lock's numpy
            roots.append(r)
    if only:
        wanted = {normalize(n) for n in only}
        unknown = wanted - {req_name(r) for r in roots}
        if unknown:
            raise BadInput(
                f"--only names {', '.join(sorted(unknown))}, which the lock does not require",
                hint="Use names from the lock's python.requirements or python.cann_runtime.",
            )
        roots = [r for r in roots if req_name(r) in wanted]
    if exclude:
        gone = {normalize(n) for n in exclude}
        roots = [r for r in roots if req_name(r) not in gone]
    return roots


def envkit_roots() -> list[str]:
    """envkit's own runtime requirements (no extras); envkit itself is added to a bundle as a wheel.

    The controller needs them to run `envkit provision`; every target needs them too, because the smoke
    role runs `envkit smoke` and `envkit doctor` from the stack's venv."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        reqs = requires("envkit") or []
    except PackageNotFoundError as exc:  # pragma: no cover - envkit always installed when it runs
        raise CannotRun("envkit is not installed as a distribution; cannot read its requirements") from exc
    return sorted(r for r in reqs if "extra ==" not in r)


def envkit_supports(python: str) -> bool:
    """Whether envkit itself installs on `python` (its Requires-Python); older targets get the stack without it."""
    from importlib.metadata import PackageNotFoundError, metadata

    from packaging.specifiers import SpecifierSet

    try:
        spec = metadata("envkit").get("Requires-Python") or ""
    except PackageNotFoundError:  # pragma: no cover - envkit always installed when it runs
        return True
    return SpecifierSet(spec).contains(f"{python}.0", prereleases=True)


def host_python() -> str:
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def host_arch() -> str:
    import platform

    m = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(m, m)


def host_glibc() -> str:
    import platform

    lib, ver = platform.libc_ver()
    return ver if lib == "glibc" and ver else DEFAULT_GLIBC


# --- choosing the wheel ------------------------------------------------------------------------
def closure_from_pylock(data: dict[str, Any], plan: ClosurePlan, resolver: str) -> PythonClosure:
    order = tag_order(plan.target)
    packages: list[ClosurePackage] = []
    for pkg in data.get("packages", []):
        name, version = normalize(pkg["name"]), str(pkg["version"])
        best: tuple[int, dict[str, Any]] | None = None
        for w in pkg.get("wheels", []):
            fname = w.get("name") or w["url"].rsplit("/", 1)[-1].split("#")[0]
            rank = wheel_rank(fname, order)
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, {**w, "name": fname})
        if best is None:
            raise CannotRun(
                f"{name} {version} has no wheel for Python {plan.target.python} on {plan.target.platform}",
                hint="An offline bundle installs wheels only; pick another version or target, or exclude it.",
            )
        w = best[1]
        sha = (w.get("hashes") or {}).get("sha256")
        if not sha or w.get("size") is None:
            raise CannotRun(f"the index gave no sha256 or size for {w['name']}", hint="Use an index that serves PEP 691/700 metadata.")
        url = w["url"]
        if "://" not in url:  # a find-links file: record an absolute file URL
            url = Path(url).resolve().as_uri()
        packages.append(ClosurePackage(name=name, version=version, filename=w["name"], url=url, sha256=sha, size=int(w["size"])))
    packages.sort(key=lambda p: (p.name, p.version, p.filename))
    return PythonClosure(
        target=plan.target,
        roots=list(plan.roots),
        index_url=plan.index_url,
        extra_index_urls=list(plan.extra_index_urls),
        find_links=list(plan.find_links),
        excluded=sorted(plan.excluded),
        resolver=resolver,
        packages=packages,
    )


# --- the executor ------------------------------------------------------------------------------
def find_uv() -> str:
    import shutil

    env = os.environ.get("ENVKIT_UV")
    if env:
        return env
    try:
        from uv import find_uv_bin  # the `uv` wheel

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    raise CannotRun(
        "`envkit lock` needs uv for cross-platform resolution, and uv is not installed",
        hint="pip install uv   (or set ENVKIT_UV to its path)",
    )


def uv_env() -> dict[str, str]:
    """uv without the machine's config files or index variables: the plan alone decides the sources."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["UV_NO_CONFIG"] = "1"
    # uv reads SSL_CERT_FILE only when told to use native/explicit roots
    if env.get("SSL_CERT_FILE") or env.get("REQUESTS_CA_BUNDLE"):
        env.setdefault("SSL_CERT_FILE", env.get("REQUESTS_CA_BUNDLE", ""))
    return env


def run_uv(plan: ClosurePlan, workdir: Path) -> PythonClosure:
    import subprocess

    uv = find_uv()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "requirements.in").write_text(plan.requirements_in())
    (workdir / "overrides.txt").write_text(plan.overrides_in())
    out = workdir / "pylock.toml"
    cmd = [
        uv, "pip", "compile", str(workdir / "requirements.in"),
        "--overrides", str(workdir / "overrides.txt"),
        "--python-platform", f"{plan.target.arch}-manylinux_{plan.target.glibc.replace('.', '_')}",
        "--python-version", plan.target.python,
        "--only-binary", ":all:",
        "--format", "pylock.toml", "--no-header", "--quiet",
        "--index-url", plan.index_url,
        "-o", str(out),
    ]
    for u in plan.extra_index_urls:
        cmd += ["--extra-index-url", u]
    for f in plan.find_links:
        cmd += ["--find-links", f]
    if plan.extra_index_urls:
        cmd += ["--index-strategy", "unsafe-best-match"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=uv_env(), check=False)
    if proc.returncode != 0:
        raise CannotRun(
            f"uv could not resolve the closure for Python {plan.target.python} on {plan.target.platform}",
            hint=(proc.stderr.strip() or proc.stdout.strip())[-2000:],
        )
    version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False).stdout.split()
    resolver = " ".join(version[:2]) if version else "uv"
    return closure_from_pylock(_read_toml(out), plan, resolver)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    with open(path, "rb") as fh:
        return tomllib.load(fh)


# --- `envkit lock`: the lock's python section completed with both closures ------------------------
@dataclass(frozen=True)
class LockedPython:
    """What `lock_python` wrote: the lock's path, and per side its platform, Python, wheels and bytes."""

    lock: Path
    target: ClosureTarget
    controller: ClosureTarget
    target_closure: PythonClosure
    controller_closure: PythonClosure

    def to_dict(self) -> dict[str, Any]:
        t, c = self.target_closure, self.controller_closure
        return {
            "lock": str(self.lock),
            "target": {"platform": self.target.platform, "python": self.target.python, "wheels": len(t.packages),
                       "bytes": sum(p.size for p in t.packages), "excluded": list(t.excluded)},
            "controller": {"platform": self.controller.platform, "python": self.controller.python, "wheels": len(c.packages),
                           "bytes": sum(p.size for p in c.packages)},
        }


def lock_python(
    lock_path: Path,
    *,
    output: Path | None = None,
    target_python: str | None = None,
    target_arch: str | None = None,
    glibc: str | None = None,
    controller_python: str | None = None,
    controller_arch: str | None = None,
    controller_glibc: str | None = None,
    only: list[str] | None = None,
    exclude: list[str] | None = None,
    index_url: str = PYPI,
    extra_index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
    on_progress: Callable[[str], None] | None = None,
) -> LockedPython:
    """`envkit lock`: resolve the full closure for the lock's target and envkit's for the controller, and write
    the lock with both (`output`, default the lock itself)."""
    import tempfile

    from envkit.lockfile import read_lock, write_lock

    say = on_progress or (lambda _line: None)
    lk = read_lock(lock_path)
    py = target_python or lk.stack.python
    arch = target_arch or lk.stack.arch
    if py != lk.stack.python or arch != lk.stack.arch:
        raise BadInput(
            f"--target-python/--target-arch ({py}, {arch}) differ from the lock's stack ({lk.stack.python}, {lk.stack.arch})",
            hint=f"Resolve for that target first: envkit resolve --python {py} --arch {arch} -o {lock_path}",
        )
    target = make_target(py, arch, glibc or lk.platform.glibc)
    ctl_target = make_target(
        controller_python or host_python(), controller_arch or host_arch(),
        controller_glibc or (host_glibc() if controller_arch in (None, host_arch()) else DEFAULT_GLIBC),
    )
    excluded = tuple(sorted({normalize(x) for x in exclude or ()}))
    sources = dict(index_url=index_url, extra_index_urls=tuple(extra_index_urls), find_links=tuple(find_links))
    # envkit runs on every target (the smoke role), where its Python allows it
    ek_roots = envkit_roots() if envkit_supports(target.python) else []
    tplan = ClosurePlan(roots=tuple(target_roots(lk, list(only or []), list(excluded)) + ek_roots), target=target,
                        excluded=excluded, **sources)
    cplan = ClosurePlan(roots=tuple(envkit_roots()), target=ctl_target, **sources)
    say(f"resolving the closure for Python {target.python} on {target.platform} ...")
    with tempfile.TemporaryDirectory(prefix="envkit-lock-") as tmp:
        tclos = run_uv(tplan, Path(tmp) / "target")
        say(f"resolving envkit's own closure for the controller (Python {ctl_target.python} on {ctl_target.platform}) ...")
        cclos = run_uv(cplan, Path(tmp) / "controller")
    python = lk.python.model_copy(update={"closure": tclos, "controller": cclos})
    out = output or lock_path
    write_lock(lk.model_copy(update={"python": python}), out)
    return LockedPython(lock=out, target=target, controller=ctl_target, target_closure=tclos, controller_closure=cclos)

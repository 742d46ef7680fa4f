"""Wheels and hashed requirements, in one place: project names, the `name==version --hash=sha256:...` line
(written and parsed), wheel file names and the tags a target accepts, and the layout of a bundle.

Everything that writes or reads a hashed requirements file (the image's layers, a bundle's
`requirements/<kind>.txt`, provisioning's check of a wheels folder) goes through `Requirement` and
`parse_requirements`; every path inside a bundle, for the writer (`envkit.jobs.bundle`) and the reader
(`envkit.jobs.provision`) alike, comes from `BundleLayout`. Pure: no network, no subprocess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath
from typing import TYPE_CHECKING

from envkit.errors import BadInput, Where

if TYPE_CHECKING:
    from envkit.models.lock import ClosureTarget, PythonClosure

_NORM = re.compile(r"[-_.]+")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_REQ = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*(?P<version>[^\s;\\]+)")
_HASH = re.compile(r"--hash[= ]sha256:([0-9a-f]{64})")
# what a written pin may hold: a PEP 508 name, a PEP 440 version (epoch, local part), a sha256; nothing else
_LINE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
_LINE_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}$")
_LINE_SHA = re.compile(r"^[0-9a-f]{64}$")


def normalize(name: str) -> str:
    """PEP 503 project name."""
    return _NORM.sub("-", name).lower()


# --- the hashed requirement line ------------------------------------------------------------------
@dataclass(frozen=True)
class Requirement:
    name: str
    version: str
    hashes: tuple[str, ...]

    def line(self) -> str:
        """`name==version --hash=sha256:...`: the one way envkit writes a pin (pip --require-hashes reads it).

        Built from validated parts only: a name, version or hash that could carry another option, a marker,
        a URL or a second line into the file is refused (exit 2)."""
        bad = [
            what
            for what, value, grammar in (("name", self.name, _LINE_NAME), ("version", self.version, _LINE_VERSION))
            if not grammar.fullmatch(value)
        ] + ["sha256" for h in self.hashes if not _LINE_SHA.fullmatch(h)]
        if bad or not self.hashes:
            raise BadInput(
                f"refused to write the pin {self.name!r}=={self.version!r} (its {', '.join(bad) or 'sha256'} "
                "is not of the requirement grammar)",
                hint="The value comes from the lock, a requirements file or a wheel's name: check it (`envkit validate`).",
            )
        hashes = " ".join(f"--hash=sha256:{h}" for h in self.hashes)
        return f"{self.name}=={self.version} {hashes}"


def merge(reqs: Iterable[Requirement]) -> list[Requirement]:
    """One requirement per project (its hashes united), sorted by name; two versions of one project are BadInput."""
    by: dict[str, Requirement] = {}
    for r in reqs:
        old = by.get(r.name)
        if old and old.version != r.version:
            raise BadInput(f"{r.name} is pinned twice: {old.version} and {r.version}")
        by[r.name] = Requirement(r.name, r.version, tuple(sorted(set((old.hashes if old else ()) + r.hashes))))
    return [by[k] for k in sorted(by)]


def parse_requirements(text: str, filename: str, *, options_allowed: bool = False) -> list[Requirement]:
    """A hashed requirements file: every requirement `name==version` with at least one sha256 (merged by name).

    `options_allowed`: option lines (`--index-url ...`, `-f DIR`) are skipped rather than refused (a wheels
    folder's requirements.txt, which pip reads as it is); by default they are refused."""
    joined = re.sub(r"\\\s*\n", " ", text)
    out: list[Requirement] = []
    for n, raw in enumerate(joined.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            if options_allowed:
                continue
            raise BadInput(f"{filename}: option lines are not allowed: {line}", where=Where(filename, n))
        m = _REQ.match(line)
        if not m:
            raise BadInput(
                f"{filename}: not pinned with ==: {line}",
                where=Where(filename, n),
                hint="Use a fully pinned, hashed file (pip-compile --generate-hashes).",
            )
        hashes = tuple(sorted(set(_HASH.findall(line))))
        if not hashes:
            raise BadInput(f"{filename}: {m['name']} has no --hash=sha256:", where=Where(filename, n))
        out.append(Requirement(normalize(m["name"]), m["version"], hashes))
    return merge(out)


def requirements_txt(closure: PythonClosure, extra: Iterable[tuple[str, str, str]] = ()) -> bytes:
    """A bundle's `requirements/<kind>.txt`: a header, then one hashed line per wheel of the closure (and of
    `extra`, as (name, version, sha256)), sorted."""
    extra = list(extra)
    head = (
        f"# {len(closure.packages) + len(extra)} wheels for Python {closure.target.python} on {closure.target.platform}; "
        "install with --no-index --no-deps --require-hashes\n"
    )
    rows = sorted([(p.name, p.version, p.sha256) for p in closure.packages] + extra)
    return (head + "".join(Requirement(name, version, (sha,)).line() + "\n" for name, version, sha in rows)).encode()


# --- wheel file names and tags --------------------------------------------------------------------
def parse_wheel_name(filename: str) -> tuple[str, str] | None:
    """(normalized project name, version) of a wheel file name, or None when it is not one."""
    m = _WHEEL.match(filename)
    return (normalize(m["name"]), m["version"]) if m else None


def wheel_name(path: str | PurePath) -> str | None:
    """The normalized project name of a wheel (a file name or a path), or None when it is not a wheel's name."""
    parsed = parse_wheel_name(PurePath(path).name)
    return parsed[0] if parsed else None


def _platforms(target: ClosureTarget) -> list[str]:
    minor = int(target.glibc.split(".")[1])
    arch = target.arch
    plats = [f"manylinux_2_{m}_{arch}" for m in range(minor, 16, -1)]
    plats.append(f"manylinux2014_{arch}")
    if arch == "x86_64":
        plats += [f"manylinux_2_12_{arch}", f"manylinux2010_{arch}", f"manylinux_2_5_{arch}", f"manylinux1_{arch}"]
    return plats


def marker_environment(python: str, arch: str) -> dict[str, str]:
    """PEP 508 marker values of a Linux CPython target (every key set: packaging would fill the gaps from this
    machine, whose arch or Python may not be the target's)."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_version": f"{python}.0",
        "platform_machine": arch,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_release": "",
        "platform_version": "",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def applies(requirement: str, environment: dict[str, str]) -> bool:
    """Whether a Requires-Dist line applies in `environment` (`marker_environment`; an `extra == ...` marker never:
    no extra is asked for). A line that is no requirement applies: the caller's own check names it."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Spec

    try:
        spec = Spec(requirement)
    except InvalidRequirement:
        return True
    return spec.marker is None or spec.marker.evaluate(environment)


def tag_order(target: ClosureTarget) -> dict[str, int]:
    """Every tag the target interpreter accepts, most preferred first (as its pip would rank them)."""
    from packaging import tags

    major, minor = (int(x) for x in target.python.split("."))
    plats = _platforms(target)
    order = list(tags.cpython_tags((major, minor), platforms=plats)) + list(
        tags.compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=plats)
    )
    return {str(t): i for i, t in enumerate(order)}


def wheel_rank(filename: str, order: dict[str, int]) -> int | None:
    """The rank of a wheel file in `order` (its best tag; lower is preferred), or None when the target takes none."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, wtags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    ranks = [order[str(t)] for t in wtags if str(t) in order]
    return min(ranks) if ranks else None


# --- the bundle layout ----------------------------------------------------------------------------
KINDS = ("target", "controller")  # whose wheels: the hosts' stack, or envkit's own closure for the controller
FOLDER_REQUIREMENTS = "requirements.txt"  # a bare wheels folder (`--wheels DIR`) carries its own


@dataclass(frozen=True)
class BundleLayout:
    """Where each part of a bundle lies. With the default root, relative POSIX paths (the manifest's entries,
    an archive's members under its top folder); with `BundleLayout(Path(dir))`, the files of a bundle folder."""

    root: PurePath = PurePosixPath()

    @property
    def manifest(self) -> PurePath:
        return self.root / "manifest.json"

    @property
    def lock(self) -> PurePath:
        return self.root / "envkit.lock"

    @property
    def sums(self) -> PurePath:
        """`SHA256SUMS`: `sha256sum -c` input over every file but itself and the manifest (install.sh checks it)."""
        return self.root / "SHA256SUMS"

    @property
    def install(self) -> PurePath:
        return self.root / "install.sh"

    @property
    def readme(self) -> PurePath:
        return self.root / "README.md"

    @property
    def vendor(self) -> PurePath:
        return self.root / "vendor"

    @property
    def playbooks(self) -> PurePath:
        return self.root / "playbooks"

    @property
    def image(self) -> PurePath:
        return self.root / "image"

    def wheels(self, kind: str = "target") -> PurePath:
        return self.root / "wheels" / kind

    def requirements(self, kind: str = "target") -> PurePath:
        return self.root / "requirements" / f"{kind}.txt"


LAYOUT = BundleLayout()


# a path `sha256sum` writes and reads as it is (no escaping) and that stays inside the bundle
_SUMS_PATH = re.compile(r"[A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)*")


def sha256sums(rows: Iterable[tuple[str, str]]) -> bytes:
    """The text of a bundle's SHA256SUMS from (path, sha256) rows: `sha256sum` format, sorted by path.

    A path that `sha256sum` would escape, or one that could leave the bundle (`..`, absolute), is refused."""
    out = []
    for path, sha in sorted(rows):
        if not _SUMS_PATH.fullmatch(path) or ".." in path.split("/") or not _LINE_SHA.fullmatch(sha):
            raise BadInput(
                f"a bundle entry cannot be listed in SHA256SUMS: {path!r}",
                hint="Bundle paths are plain names; the lock's file names are checked by `envkit validate`.",
            )
        out.append(f"{sha}  {path}\n")
    return "".join(out).encode()

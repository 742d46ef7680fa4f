"""The image build plan: everything `envkit image render` writes, decided from the lock. Pure: no docker, no subprocess.

`plan_build()` turns a lock (plus the listing of the files the user hands in, `envkit.artifacts.handed`, and the
lock's `ContainerFacts`) into a `BuildPlan`; `envkit.export.templates` turns
that plan into a build context; `envkit.executor.docker` builds it. It reads the lock alone (the base image, the OS
family and the installers are recorded in it), never the matrix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envkit import __version__, versions
from envkit.artifacts.handed import HandedFile, HandedIn, Wanted, pick
from envkit.artifacts.sdist import target_takes
from envkit.artifacts.wheels import (
    Requirement,
    marker_environment,
    merge,
    normalize,
    parse_requirements,
    parse_wheel_name,
    wheel_name,
)
from envkit.errors import BadInput, CheckFailed, Where
from envkit.export.container import SERVING_ENTRYPOINT, container_facts
from envkit.models.lock import Artifact, ClosurePackage, Lock
from envkit.models.rules import SDIST_BUILDS

LABEL_PREFIX = "io.envkit"
CANN_COMPONENTS = ("cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal")
# The heavy, rarely-changing Python projects: installed in their own earlier layer, so that a change of
# any other pin (transformers, accelerate, ...) rebuilds only the small layer after it.
HEAVY = ("torch", "torch-npu")
# The serving variant's layer, after torch, in the vendor's install order (vllm-ascend installation.md:
# `pip install vllm==X`, then `pip install vllm-ascend==X`; triton-ascend from the Ascend index).
SERVING = ("vllm", "vllm-ascend", "triton-ascend")
VARIANTS = ("base", "serving")
# The OCI platform of each arch a lock pins: FROM --platform and the engine's build get it, so that an x86_64
# builder makes the aarch64 lock's image for aarch64 (under user-mode emulation) and never an amd64 one.
OCI_PLATFORMS = {"aarch64": "linux/arm64", "x86_64": "linux/amd64"}


def oci_platform(arch: str) -> str:
    """The OCI platform (`linux/arm64`) of a lock's arch (`aarch64`)."""
    return OCI_PLATFORMS[arch]


@dataclass(frozen=True)
class InstallStep:
    """One vendor CANN package: the file the context holds, its hash, and how to run it."""

    component: str
    version: str
    file: str  # name in the build context (artifacts/<file>)
    sha256: str
    sha256_from: str  # "lock" or "file" (recorded from the file handed in; the lock has none)
    run: str  # the .run installer (== file, or a member of the zip edition)
    zip_member: bool
    flags: tuple[str, ...]
    source: Path | None  # where the file is on this machine (None: render without --artifacts)
    needs_toolkit_env: bool


@dataclass(frozen=True)
class BaseRef:
    ref: str  # what FROM names
    os: str
    family: str
    python: str | None  # the base's python3 minor, when known
    from_matrix: bool
    source: str


@dataclass(frozen=True)
class OwnWheel:
    """envkit's own wheel (`envkit.artifacts.own_wheel`, reproducible, built in memory): the image installs it last,
    offline from the build context (python/envkit/), pinned by its sha256, so that the smoke Jobs and `envkit doctor`
    run `envkit` inside."""

    name: str
    version: str
    sha256: str
    data: bytes = field(repr=False)

    @property
    def requirement(self) -> Requirement:
        return Requirement("envkit", self.version, (self.sha256,))


@dataclass
class BuildPlan:
    generated_by: str
    lock: Lock
    lock_text: str
    lock_digest: str
    base: BaseRef
    steps: list[InstallStep]
    requirements: list[Requirement]
    wheels: list[Path]  # offline mode: the wheels copied into the context (python/{torch,rest}/wheels)
    indexes: list[str]  # online mode: index URLs, the first is --index-url
    env: list[tuple[str, str]]
    labels: list[tuple[str, str]]
    atb_cxx_abi: int
    notes: list[str] = field(default_factory=list)
    python_source: str = ""  # where the hashed pins come from: "closure", "requirements" or "wheels" (+ a note)
    variant: str = "base"  # "serving": a serving layer after torch, the serving env, `vllm serve` as entry point
    serving_env: list[tuple[str, str]] = field(default_factory=list)
    envkit: OwnWheel | None = None  # envkit's own wheel, the last Python layer (python/envkit)
    envkit_absent: str = ""  # why the image goes without envkit (also a note), when it does

    @property
    def serving(self) -> bool:
        return self.variant == "serving"

    @property
    def platform(self) -> str:
        """The OCI platform of the lock's arch: FROM --platform and the engine's build take it."""
        return oci_platform(self.lock.stack.arch)

    @property
    def layer_names(self) -> tuple[str, ...]:
        """The projects of the layers before the last one (`python/rest`): torch's, then the serving layer's."""
        return HEAVY + SERVING if self.serving else HEAVY

    @property
    def offline(self) -> bool:
        return bool(self.wheels)

    @property
    def heavy_requirements(self) -> list[Requirement]:
        """torch (and torch_npu): the first Python layer."""
        return [r for r in self.requirements if r.name in HEAVY]

    @property
    def serving_requirements(self) -> list[Requirement]:
        """The serving variant's layer after torch: vllm, vllm-ascend, triton-ascend, in that order."""
        if not self.serving:
            return []
        by = {r.name: r for r in self.requirements}
        return [by[n] for n in SERVING if n in by]

    @property
    def rest_requirements(self) -> list[Requirement]:
        """Everything else: the last Python layer."""
        return [r for r in self.requirements if r.name not in self.layer_names]

    @property
    def torch_indexes(self) -> list[str]:
        """The torch layer's indexes (online): the index the lock names for torch (its CPU build) first, where the
        pins come from it (a closure locked from a mirror keeps its own order: the hashed `+cpu` pin decides)."""
        py = self.lock.python
        own = [py.indexes[p.index] for p in py.requirements if p.name == "torch" and p.index in py.indexes]
        return list(dict.fromkeys([*(u for u in own if u in self.indexes), *self.indexes]))

    @property
    def heavy_wheels(self) -> list[Path]:
        return [w for w in self.wheels if wheel_name(w) in HEAVY]

    @property
    def serving_wheels(self) -> list[Path]:
        return [w for w in self.wheels if self.serving and wheel_name(w) in SERVING]

    @property
    def rest_wheels(self) -> list[Path]:
        return [w for w in self.wheels if wheel_name(w) not in self.layer_names]


# --- base image ----------------------------------------------------------------------------------
def choose_base(lock: Lock, base: str | None) -> BaseRef:
    os_id = lock.stack.os
    family = lock.platform.os_family
    row = lock.platform.base_image
    if base:
        return BaseRef(ref=base, os=os_id, family=family, python=None, from_matrix=False, source="--base")
    if row is None:
        raise BadInput(
            f"the lock names no base image for {os_id} (the matrix it was made from has none)",
            where=Where("envkit.lock", None, "platform.base_image"),
            hint="Pass --base IMAGE@sha256:DIGEST (an image of that OS), or resolve for an OS with a base image "
            "(`envkit matrix show images`).",
        )
    if row.digest is None:
        raise BadInput(
            f"the base image {row.image} of {os_id} has no pinned digest: {row.note or 'none was found in a public source'}",
            where=Where("envkit.lock", None, "platform.base_image.digest"),
            hint=f"Pass --base {row.image.split(':')[0]}@sha256:<digest you verified> (or a local image).",
        )
    if row.python and not versions.same(row.python, lock.stack.python):
        raise BadInput(
            f"the lock pins Python {lock.stack.python}, but the python3 of {row.image} is {row.python}",
            where=Where("envkit.lock", None, "platform.base_image.python"),
            hint=(
                f"Resolve with --python {row.python}, or pass --base with an image of {os_id} whose python3 is "
                f"{lock.stack.python} (the build checks it)."
            ),
        )
    digest = row.platform_digest or row.digest  # the arch's own manifest where the lock has it, else the index
    return BaseRef(ref=f"{row.image}@{digest}", os=os_id, family=family, python=row.python, from_matrix=True, source=row.source)


# --- vendor packages ------------------------------------------------------------------------------
def _cann(lock: Lock) -> list[Artifact]:
    """The CANN packages the image installs, in the lock's order (driver and firmware live on the host)."""
    return [a for a in sorted(lock.artifacts, key=lambda a: (a.order, a.component)) if a.component in CANN_COMPONENTS]


def vendor_wanted(lock: Lock) -> list[Wanted]:
    """The files of each CANN package the image takes from the listing, in the order tried: the signed zip, then the
    bare .run (`envkit.artifacts.handed.with_vendor` hashes the first one listed)."""
    return [
        ((art.zip.file, art.zip.file), (art.run.file, art.run.pattern)) if art.zip else ((art.run.file, art.run.pattern),)
        for art in _cann(lock)
    ]


class _NotHandedIn(Exception):
    """A vendor package of the lock that the --artifacts folder lacks (plan_steps names them all at once)."""

    def __init__(self, art: Artifact, wanted: str) -> None:
        super().__init__(wanted)
        self.art, self.wanted = art, wanted


def plan_steps(lock: Lock, handed: HandedIn) -> list[InstallStep]:
    """The CANN installs in the lock's order, from the files handed in (`handed.vendor`, hashed by the job).
    Every package the --artifacts folder lacks is named in one error, with the vendor's URL where the lock has one."""
    steps: list[InstallStep] = []
    lacking: list[_NotHandedIn] = []
    for art in _cann(lock):
        try:
            steps.append(_step(art, handed))
        except _NotHandedIn as missing:
            lacking.append(missing)
    if lacking:
        urls = [f"{m.art.zip.file}: {m.art.zip.url}" for m in lacking if m.art.zip]
        raise BadInput(
            f"{len(lacking)} vendor package(s) of the lock are not in {handed.folder}: "
            + "; ".join(f"{m.art.component} {m.art.version}: {m.wanted}" for m in lacking),
            where=Where(str(handed.folder)),
            hint="Put them there (the signed .zip edition or the bare .run; the lock's `artifacts` names each one)"
            + (":\n" + "\n".join(urls) if urls else ", then run the command again."),
        )
    return steps


def _handed(handed: HandedIn, name: str | None, pattern: str) -> HandedFile | None:
    """The listed file of a vendor package, hashed (`with_vendor` hashed every file `vendor_wanted` picks)."""
    got = pick(handed.names, name, pattern)
    if got is None:
        return None
    assert got in handed.vendor, f"{got} is listed but not hashed: the listing must go through with_vendor"
    return handed.vendor[got]


def _step(art: Artifact, handed: HandedIn) -> InstallStep:
    run_name = art.run.file
    needs_env = art.component == "cann-nnal"
    flags = tuple(art.run.flags)
    zipped = _handed(handed, art.zip.file, art.zip.file) if art.zip else None
    if art.zip and zipped is not None:
        if zipped.sha256 != art.zip.sha256:
            raise CheckFailed(
                f"{art.zip.file}: sha256 {zipped.sha256} differs from the lock's {art.zip.sha256}",
                where=Where(str(zipped.path)),
                hint=f"Download it again from {art.zip.url}.",
            )
        member = handed.member(zipped.name, art.run.file or art.run.pattern)
        if member is None:
            raise CheckFailed(f"{art.zip.file} holds no {art.run.file or art.run.pattern}", where=Where(str(zipped.path)))
        return InstallStep(
            art.component, art.version, art.zip.file, zipped.sha256, "lock", member, True, flags, zipped.path, needs_env
        )
    run = _handed(handed, run_name, art.run.pattern)
    if run is not None:
        if art.run.sha256 and run.sha256 != art.run.sha256:
            raise CheckFailed(
                f"{run.name}: sha256 {run.sha256} differs from the lock's {art.run.sha256}",
                where=Where(str(run.path)),
            )
        return InstallStep(
            art.component,
            art.version,
            run.name,
            run.sha256,
            "lock" if art.run.sha256 else "file",
            run.name,
            False,
            flags,
            run.path,
            needs_env,
        )
    if handed.folder is None:
        if art.zip:
            member = run_name or art.run.pattern
            return InstallStep(
                art.component, art.version, art.zip.file, art.zip.sha256, "lock", member, True, flags, None, needs_env
            )
        if art.run.sha256 and run_name:
            return InstallStep(
                art.component, art.version, run_name, art.run.sha256, "lock", run_name, False, flags, None, needs_env
            )
        raise BadInput(
            f"{art.component} {art.version}: the lock has no sha256 for {run_name or art.run.pattern}",
            hint="Pass --artifacts DIR holding the vendor package: envkit records its hash and the build checks it.",
        )
    raise _NotHandedIn(art, " or ".join(x for x in (art.zip.file if art.zip else None, run_name or art.run.pattern) if x))


# --- python -----------------------------------------------------------------------------------------
def wheel_requirements(wheels: Sequence[HandedFile]) -> list[Requirement]:
    out = []
    for w in wheels:
        parsed = parse_wheel_name(w.name)
        if not parsed:
            raise BadInput(f"{w.name} is not a wheel file name", where=Where(str(w.path)))
        out.append(Requirement(*parsed, (w.sha256,)))
    return merge(out)


def check_closure(lock: Lock, reqs: list[Requirement], origin: str) -> None:
    """Every pin of the lock at exactly its version, and every CANN runtime dependency, are in the closure."""
    by = {r.name: r for r in reqs}
    for pin in lock.python.requirements:
        r = by.get(normalize(pin.name))
        if r is None:
            raise BadInput(f"{origin} lacks {pin.name}=={pin.version} of the lock", hint="Add it (with its hash).")
        if normalize(pin.name) in SDIST_BUILDS and r.version.split("+", 1)[0] == pin.version:
            continue  # built from the sdist of the pinned version: vLLM's build adds `+empty`
        if not versions.same(r.version, pin.version) or ("+" in pin.version) != ("+" in r.version):
            raise BadInput(
                f"{origin} pins {pin.name}=={r.version}, the lock {pin.version}",
                hint="The lock decides: regenerate the hashed requirements from it.",
            )
    for spec in lock.python.cann_runtime:
        m = re.match(r"^([A-Za-z0-9._-]+)\s*(.*)$", spec)
        assert m is not None
        r = by.get(normalize(m[1]))
        if r is None:
            raise BadInput(f"{origin} lacks {m[1]}, a Python dependency of CANN ({spec})", hint="Add it (with its hash).")
        if m[2] and normalize(m[1]) in _yielded(lock):
            continue  # `envkit lock` let the built vLLM's bound decide (`closure.cann_runtime_yields`): as recorded
        if m[2] and not versions.satisfies(r.version, m[2]):
            raise BadInput(f"{origin} pins {r.name}=={r.version}, CANN needs {spec}")


def _yielded(lock: Lock) -> set[str]:
    """CANN's pinned requirements the lock's closure resolved by name alone (its roots record the bare name where
    `envkit lock` let a built wheel's bound decide: CANN's protobuf==3.20.0 against vLLM's protobuf>=5.29.6)."""
    closure = lock.python.closure
    if closure is None or not any(p.built is not None for p in closure.packages):
        return set()
    bare = {normalize(r.strip()) for r in closure.roots if re.fullmatch(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*", r)}
    return {normalize(re.split(r"[<>=!~; \[]", spec, maxsplit=1)[0]) for spec in lock.python.cann_runtime} & bare


def closure_requirements(lock: Lock, wheels: Sequence[HandedFile]) -> tuple[list[Requirement], list[Path], list[str]]:
    """The lock's hashed closure (`envkit lock`) as requirements, only its files for the image's platform.

    With a wheelhouse (--artifacts DIR/wheels) every closure file must be there (matched by sha256) and the
    build installs offline; without one, it installs from the closure's indexes with the same hashes.
    """
    chosen = closure_files(lock)
    reqs = merge([Requirement(normalize(p.name), p.version, (p.sha256,)) for p in chosen])
    if wheels:
        have = {w.sha256: w.path for w in wheels}
        missing = [p.filename for p in chosen if p.sha256 not in have]
        if missing:
            raise BadInput(
                f"the wheelhouse lacks {len(missing)} file(s) of the lock's closure (by sha256): "
                + ", ".join(missing[:8])
                + (" ..." if len(missing) > 8 else ""),
                hint="Download them (`envkit download` / `envkit bundle build`), or render without the wheels "
                "to install from the closure's indexes.",
            )
        return reqs, sorted(have[p.sha256] for p in chosen), []
    local = [p.filename for p in chosen if p.url.startswith("file:")]
    if local:
        raise BadInput(
            "the lock's closure names local files the build cannot fetch: " + ", ".join(local[:8]),
            hint="Put the wheels in --artifacts DIR/wheels (the build then installs offline).",
        )
    assert lock.python.closure is not None
    return reqs, [], [lock.python.closure.index_url, *lock.python.closure.extra_index_urls]


def closure_files(lock: Lock) -> list[ClosurePackage]:
    """For each project of the lock's closure, the one file the image's pip would pick (by tag preference)."""
    from envkit.artifacts.closure import make_target
    from envkit.artifacts.wheels import tag_order, wheel_rank

    closure = lock.python.closure
    assert closure is not None
    s = lock.stack
    if not versions.same(closure.target.python, s.python) or closure.target.arch != s.arch:
        raise BadInput(
            f"the lock's Python closure is for Python {closure.target.python} {closure.target.arch}, "
            f"the image for Python {s.python} {s.arch}",
            where=Where("envkit.lock", None, "python.closure.target"),
            hint=f"Rerun `envkit lock` for --target-python {s.python} --target-arch {s.arch}.",
        )
    order = tag_order(make_target(s.python, s.arch, lock.platform.glibc))
    by_name: dict[str, list] = {}
    for pkg in closure.packages:
        by_name.setdefault(normalize(pkg.name), []).append(pkg)
    chosen = []
    target = make_target(s.python, s.arch, lock.platform.glibc)

    def rank(p: ClosurePackage) -> int | None:
        if p.built is not None:  # built by `envkit lock` for this target (`linux_<arch>`: setuptools' tag)
            return 0 if target_takes(p.filename, target) else None
        return wheel_rank(p.filename, order)

    for name, pkgs in sorted(by_name.items()):
        fits = sorted((rank(p), p.filename, p) for p in pkgs if rank(p) is not None)
        if not fits:
            raise BadInput(
                f"the lock's Python closure has no file of {name} for Python {s.python} on {s.os} {s.arch}: "
                + ", ".join(p.filename for p in pkgs),
                where=Where("envkit.lock", None, "python.closure.packages"),
                hint="Rerun `envkit lock` for the image's target.",
            )
        chosen.append(fits[0][2])
    return chosen


def plan_python(
    lock: Lock, handed: HandedIn, lock_name: str = "envkit.lock"
) -> tuple[list[Requirement], list[Path], list[str], str]:
    """The hashed pins, the wheels (offline) or the indexes (online), and where the pins came from.

    Order: --requirements FILE when given; else the lock's closure (`envkit lock`); else the wheels in
    --artifacts DIR/wheels. Without any of them render refuses (exit 2), naming the `envkit lock` command for the
    lock at `lock_name` that gives them.
    """
    wheels = handed.wheels
    requirements = handed.requirements
    closure_error: BadInput | None = None
    if requirements is None and lock.python.closure is not None and lock.python.closure.packages:
        try:
            reqs, cwheels, indexes = closure_requirements(lock, wheels)
            check_closure(lock, reqs, "the lock's Python closure (python.closure)")
            return reqs, cwheels, indexes, "closure"
        except BadInput as exc:
            if not wheels:
                raise
            closure_error = exc  # the wheelhouse alone is the fallback
    if requirements is not None:
        origin, text = requirements
        reqs = parse_requirements(text, origin)
        if wheels:  # the offline wheelhouse must hold every hash the file names: pip checks that in the build
            have = {w.sha256 for w in wheels}
            for r in reqs:
                if not set(r.hashes) & have:
                    raise BadInput(f"no wheel in {handed.folder} matches the hashes of {r.name}=={r.version}")
    elif wheels:
        reqs = wheel_requirements(wheels)
        origin = f"the wheels in {handed.folder}"
    else:
        import shlex

        raise BadInput(
            "no hashed Python pins: the lock has no wheel closure yet (`envkit resolve` writes none), and the image "
            "installs the Python stack only with --require-hashes",
            hint=(
                f"Run `envkit lock --lock {shlex.quote(lock_name)}` (it adds the hashed wheel closure to that lock, from\n"
                "PyPI and the lock's indexes, e.g. the PyTorch CPU index; a mirror: --index-for ID=URL), then this\n"
                "command again. Or pass --requirements FILE (fully pinned, with --hash=sha256:...), or put the\n"
                "wheels in --artifacts DIR/wheels (installed offline; envkit hashes them)."
            ),
        )
    check_closure(lock, reqs, origin)
    indexes = [] if wheels else list(lock.python.indexes.values())
    kind = "requirements" if requirements is not None else "wheels"
    if closure_error is not None:
        kind += f"; the lock's closure was not usable: {closure_error.message}"
    return reqs, [w.path for w in wheels], indexes, kind


def envkit_lacks(lock: Lock, reqs: list[Requirement]) -> list[str]:
    """envkit's own runtime requirements (`envkit.artifacts.closure.envkit_roots`) that the image's pins do not meet.

    `envkit lock` puts them into the lock's closure (its roots); a --requirements file or a wheelhouse may lack
    them. envkit's wheel is installed `--no-deps`, offline: what it needs must be a pin of the layers before it."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Spec
    from packaging.version import InvalidVersion, Version

    from envkit.artifacts.closure import envkit_roots

    by = {normalize(r.name): r for r in reqs}
    target = marker_environment(lock.stack.python, lock.stack.arch)
    out = []
    for root in envkit_roots():
        try:
            spec = Spec(root)
        except InvalidRequirement:  # pragma: no cover - envkit's own metadata
            out.append(root)
            continue
        if spec.marker is not None and not spec.marker.evaluate(target):
            continue
        r = by.get(normalize(spec.name))
        if r is None:
            out.append(str(spec))
            continue
        try:
            ok = spec.specifier.contains(Version(r.version), prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            out.append(f"{spec} (pinned: {r.version})")
    return out


def plan_envkit(lock: Lock, reqs: list[Requirement], own_wheel: tuple[str, bytes] | None = None) -> tuple[OwnWheel | None, str]:
    """envkit's own wheel for the image (`own_wheel`: (name, bytes) when the caller has built it already), or why
    the image goes without it: a Python envkit does not install on, or pins that lack envkit's dependencies."""
    from envkit.artifacts.closure import envkit_supports
    from envkit.artifacts.own_wheel import envkit_wheel

    if not envkit_supports(lock.stack.python):
        from importlib.metadata import metadata

        # an email.message.Message at run time; the PackageMetadata protocol of the stubs omits get()
        wants = metadata("envkit").get("Requires-Python") or "another Python"  # type: ignore[attr-defined]
        return None, f"envkit needs Python {wants}, the image's is {lock.stack.python}"
    lacking = envkit_lacks(lock, reqs)
    if lacking:
        return None, (
            "the image's Python pins lack envkit's own dependencies: "
            + ", ".join(lacking)
            + " (`envkit lock` puts them into the lock's closure; with --requirements or --artifacts DIR/wheels, add them there)"
        )
    name, data = own_wheel or envkit_wheel()
    return OwnWheel(name, __version__, hashlib.sha256(data).hexdigest(), data), ""


# --- labels ---------------------------------------------------------------------------------
def plan_labels(lock: Lock, lock_digest: str, base: BaseRef) -> list[tuple[str, str]]:
    s = lock.stack
    labels = {
        "org.opencontainers.image.title": f"envkit {s.chip} CANN {s.cann} torch {s.torch}",
        "org.opencontainers.image.description": "Ascend NPU PyTorch stack rendered from an envkit lock",
        "org.opencontainers.image.version": f"cann{s.cann}-torch{s.torch}-py{s.python}",
        "org.opencontainers.image.base.name": base.ref,
        f"{LABEL_PREFIX}.lock.digest": lock_digest,
        f"{LABEL_PREFIX}.lock.matrix_digest": lock.matrix_digest,
        f"{LABEL_PREFIX}.envkit.version": __version__,
        f"{LABEL_PREFIX}.cann.layout": lock.layout.kind,
        f"{LABEL_PREFIX}.driver.expected": f"{s.driver} (mounted from the host)",
    }
    if "@" in base.ref:
        labels["org.opencontainers.image.base.digest"] = base.ref.rsplit("@", 1)[1]
    for key, value in s.model_dump().items():
        labels[f"{LABEL_PREFIX}.stack.{key}"] = str(value)
    for art in lock.artifacts:
        if art.component in CANN_COMPONENTS:
            labels[f"{LABEL_PREFIX}.component.{art.component}"] = art.version
    return sorted(labels.items())


def check_variant(lock: Lock, variant: str) -> None:
    """`--variant serving` needs a lock with the serving keys (vllm, vllm-ascend pinned); exit 2 otherwise."""
    if variant not in VARIANTS:
        raise BadInput(f"--variant {variant!r}: use one of {', '.join(VARIANTS)}")
    if variant == "serving":
        pinned = {normalize(p.name) for p in lock.python.requirements}
        lacking = [n for n in SERVING[:2] if n not in pinned]
        if lacking:
            raise BadInput(
                f"--variant serving needs a lock with the serving stack; this lock pins no {' or '.join(lacking)}",
                where=Where("envkit.lock", None, "python.requirements"),
                hint="Resolve a serving stack (`envkit resolve --workload serving`), lock it (`envkit lock`), and run this command again.",
            )


def serving_labels(lock: Lock, labels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The serving variant's labels (its environment block is `ContainerFacts.serving_env`)."""
    s = lock.stack.model_dump()
    extra = {
        f"{LABEL_PREFIX}.variant": "serving",
        f"{LABEL_PREFIX}.serving.entrypoint": " ".join(SERVING_ENTRYPOINT),
        "org.opencontainers.image.title": f"envkit {s['chip']} CANN {s['cann']} torch {s['torch']} vllm-ascend {s.get('vllm_ascend')}",
    }
    return sorted({**dict(labels), **extra}.items())


def lock_digest(lock_text: str) -> str:
    return "sha256:" + hashlib.sha256(lock_text.encode()).hexdigest()


def plan_build(
    lock: Lock,
    *,
    generated_by: str,
    base: str | None = None,
    handed: HandedIn | None = None,
    python: tuple[list[Requirement], list[Path], list[str], str] | None = None,
    variant: str = "base",
    lock_name: str = "envkit.lock",
    own_wheel: tuple[str, bytes] | None = None,
) -> BuildPlan:
    """`python`, when given, replaces the choice of `plan_python` (pins, wheels, indexes, source): a bundle
    renders its context against its own wheels. `variant` "serving" adds the serving layer after torch
    (vllm, vllm-ascend, triton-ascend), the serving environment and `vllm serve` as entry point; the layers
    before the Python ones are the base variant's, instruction for instruction (one build cache). `handed`: the files
    handed in, as data (`envkit.artifacts.handed`; the job hashes the vendor packages `vendor_wanted` names once
    `plan_python` has taken the lock's pins, so that a lock without them is refused before gigabytes are read).
    `lock_name`: the lock's path, as the messages name it. envkit itself is the running envkit's own wheel, in the
    last Python layer (`plan_envkit`; `own_wheel`: that wheel, when the caller has built it): an envkit among the
    pins or the wheels handed in gives way to it."""
    from envkit.lock.file import dump_lock

    check_variant(lock, variant)
    handed = handed or HandedIn()
    text = dump_lock(lock)
    digest = lock_digest(text)
    base_ref = choose_base(lock, base)
    reqs, wheels, indexes, py_source = python or plan_python(lock, handed, lock_name)
    replaced = [r for r in reqs if normalize(r.name) == "envkit"]
    reqs = [r for r in reqs if normalize(r.name) != "envkit"]
    wheels = [w for w in wheels if wheel_name(w) != "envkit"]
    own, envkit_absent = plan_envkit(lock, reqs, own_wheel)
    steps = plan_steps(lock, handed)
    notes = []
    if envkit_absent:
        notes.append(
            f"the image holds no envkit: {envkit_absent}; `envkit smoke` and `envkit doctor` (the smoke Jobs) cannot run in it"
        )
    elif replaced:
        notes.append(
            f"envkit=={replaced[0].version} of the Python pins is not installed: the image takes this envkit's own wheel"
        )
    recorded = [s.file for s in steps if s.sha256_from == "file"]
    if recorded:
        notes.append("sha256 recorded from the files handed in (the lock has none): " + ", ".join(recorded))
    if handed.requirements is not None and lock.python.closure is not None:
        notes.append("--requirements given: the lock's python.closure is not used")
    if "; " in py_source:
        py_source, why = py_source.split("; ", 1)
        notes.append(f"Python pins from the wheels handed in: {why}")
    if not base_ref.from_matrix:
        notes.append(f"base {base_ref.ref} given with --base: the build checks that its python3 is {lock.stack.python}")
    labels = plan_labels(lock, digest, base_ref)
    if variant == "serving":
        labels = serving_labels(lock, labels)
    facts = container_facts(lock, variant=variant, with_devices=False)
    return BuildPlan(
        generated_by=generated_by,
        lock=lock,
        lock_text=text,
        lock_digest=digest,
        base=base_ref,
        steps=steps,
        requirements=reqs,
        wheels=wheels,
        indexes=indexes,
        env=list(facts.environment),
        labels=labels,
        atb_cxx_abi=facts.atb_cxx_abi,
        notes=notes,
        python_source=py_source,
        variant=variant,
        serving_env=list(facts.serving_env),
        envkit=own,
        envkit_absent=envkit_absent,
    )

"""The bundle plan: every entry (path, bytes or source file, sha256, size, mode) and the manifest, decided from
the lock alone. The wheels to download are in `plan.fetch`; `envkit.jobs.bundle.archive` writes a plan out."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit import __version__
from envkit.artifacts.own_wheel import envkit_wheel
from envkit.artifacts.wheels import LAYOUT, Requirement, merge, normalize, requirements_txt, sha256sums
from envkit.errors import BadInput, CheckFailed, Where
from envkit.models.bundle import BundleFile, BundleManifest, TrustedArtifact
from envkit.models.lock import Lock, PythonClosure
from envkit.resources import data_dir

if TYPE_CHECKING:
    from envkit.artifacts.download import Fetch

MANIFEST = str(LAYOUT.manifest)
IMAGE_DIR = str(LAYOUT.image)


@dataclass(frozen=True)
class Entry:
    path: str
    sha256: str
    size: int
    mode: int = 0o644
    data: bytes | None = None
    source: Path | None = None
    link: bool = False  # may be hard-linked from the cache into a folder bundle

    def file(self) -> Path:
        """The file an entry not held in memory (`data` None) is read from."""
        if self.source is None:
            raise ValueError(f"{self.path}: an entry without data needs a source file")
        return self.source


@dataclass(frozen=True)
class ImageContext:
    """The rendered image build context a bundle carries: its text files are bundle entries under
    image/context/; its large inputs (vendor packages, wheels) are the bundle's own files, listed in
    image/context.sha256 and linked into place by image/assemble.sh (never stored twice)."""

    tag: str
    platform: str  # the lock's OCI platform (linux/arm64): the build is for it, whatever the builder's own
    key: str  # sha256 over every file of the context (path and sha256): equal keys, equal contexts
    links: tuple[tuple[str, str, str], ...]  # (sha256, path in the context, path in the bundle)


@dataclass
class BundlePlan:
    root: str
    entries: list[Entry]
    manifest: BundleManifest
    fetch: list = field(default_factory=list)  # list[download.Fetch]
    trusted: list[TrustedArtifact] = field(default_factory=list)
    state: Path | None = None  # where write_tar records the archives it wrote (the cache's folder), if anywhere
    image: ImageContext | None = None
    _all: list[Entry] | None = field(default=None, repr=False)

    def assemble_image_context(self, out: Path) -> Path:
        """Write the image build context into `out` from the plan's own entries (the executor then builds it):
        the rendered text files, then the vendor packages and wheels linked (or copied) from their sources."""
        from envkit.io.outputs import link_or_copy

        assert self.image is not None
        by_path = {e.path: e for e in self.entries}
        prefix = f"{IMAGE_DIR}/context/"
        for path, e in by_path.items():
            if path.startswith(prefix):  # rendered text: always data
                assert e.data is not None
                dest = out / path[len(prefix) :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(e.data)
        for _sha, rel, src in self.image.links:
            e = by_path[src]
            if e.data is not None:  # envkit's own wheel is built in memory
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / rel).write_bytes(e.data)
            else:
                link_or_copy(e.file(), out / rel)
        return out

    def all_entries(self) -> list[Entry]:
        if self._all is None:
            data = manifest_bytes(self.manifest)
            m = Entry(MANIFEST, hashlib.sha256(data).hexdigest(), len(data), data=data)
            self._all = sorted([*self.entries, m], key=lambda e: e.path)
        return list(self._all)


def _blob(path: str, data: bytes, mode: int = 0o644) -> Entry:
    return Entry(path, hashlib.sha256(data).hexdigest(), len(data), mode, data=data)


def manifest_bytes(m: BundleManifest) -> bytes:
    return (json.dumps(m.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _requires_python() -> str:
    from importlib.metadata import metadata

    # an email.message.Message at run time; the PackageMetadata protocol of the stubs omits get()
    return metadata("envkit").get("Requires-Python") or "any"  # type: ignore[attr-defined]


def _target_dict(c: PythonClosure) -> dict[str, str]:
    return {k: str(v) for k, v in c.target.model_dump().items()}


def install_sh(controller: PythonClosure) -> str:
    """The bundle's offline installer, rendered for the controller's Python (airgap/install.sh.j2)."""
    from envkit.export import templates

    return templates.render(
        "install.sh.j2",
        envkit_version=__version__,
        controller_python=controller.target.python,
        controller_arch=controller.target.arch,
    )


def image_tag(lock: Lock, variant: str = "base") -> str:
    """The image's tag (`envkit.export.container.default_tag`, as `envkit image build` names it)."""
    from envkit.export.container import default_tag

    return default_tag(lock, variant)


def _image_entries(
    lock: Lock,
    artifacts: Path | None,
    stamps,
    have: dict[str, Entry],
    own_wheel: tuple[str, bytes],
    base: str | None = None,
    variant: str = "base",
) -> tuple[list[Entry], ImageContext | None, list[str]]:
    """The rendered build context of the lock's image (`variant`: base or serving, as `envkit image render
    --variant`), against the bundle's own files (pure: no engine).

    `have` is the bundle's entries by path; `own_wheel` envkit's (name, bytes), which the image installs as
    `envkit image render` has it (`envkit.export.image.plan_envkit`): the bundle's wheels/target/ copy. A lock
    whose closure cannot make the image (an `--only` part of the stack, another Python) gets no context, and
    the bundle says why in `lacks`."""
    from envkit.artifacts.handed import scan, with_vendor
    from envkit.export import image as im
    from envkit.export import templates

    try:
        chosen = im.closure_files(lock)  # an envkit among them gives way to the bundle's own (plan_build)
        reqs = merge([Requirement(normalize(p.name), p.version, (p.sha256,)) for p in chosen])
        im.check_closure(lock, reqs, "the lock's Python closure (python.closure)")
        wheels = sorted((Path(p.filename) for p in chosen), key=lambda w: w.name)
        handed = with_vendor(scan(artifacts, None, stamps.sha256, wheelhouse=False), im.vendor_wanted(lock), stamps.sha256)
        plan = im.plan_build(
            lock,
            generated_by="envkit bundle build",
            handed=handed,
            base=base,
            python=(reqs, wheels, [], "bundle"),
            variant=variant,
            own_wheel=own_wheel,
        )
    except BadInput as exc:
        return [], None, [f"the image build context ({exc.message})"]
    wheel_sha = {p.filename: p.sha256 for p in chosen}
    entries = [_blob(f"{IMAGE_DIR}/context/{rel}", text.encode()) for rel, text in sorted(templates.context_files(plan).items())]
    links: list[tuple[str, str, str]] = []
    lacks = [f"envkit in the image ({plan.envkit_absent})"] if plan.envkit is None else []
    for rel, _source, sha in templates.context_inputs(plan):
        name = rel.rsplit("/", 1)[-1]
        src = f"{LAYOUT.vendor}/{name}" if rel.startswith("artifacts/") else f"{LAYOUT.wheels('target')}/{name}"
        sha = sha or wheel_sha[name]
        if src not in have:
            lacks.append(f"{src}, which the image build context needs as {rel}")
        links.append((sha, rel, src))
    links.sort(key=lambda t: t[1])
    listing = "".join(f"{sha} {rel} {src}\n" for sha, rel, src in links)
    entries.append(
        _blob(
            f"{IMAGE_DIR}/context.sha256",
            (
                "# sha256, path in the image build context, path in the bundle: `sh image/assemble.sh DIR` links them into place\n"
                + listing
            ).encode(),
        )
    )
    entries.append(_blob(f"{IMAGE_DIR}/assemble.sh", (data_dir("airgap") / "assemble-image.sh").read_bytes(), 0o755))
    key = hashlib.sha256(json.dumps(sorted([[e.path, e.sha256] for e in entries] + [list(x) for x in links])).encode())
    return (
        entries,
        ImageContext(tag=image_tag(lock, variant), platform=plan.platform, key=key.hexdigest(), links=tuple(links)),
        lacks,
    )


def _tree_entries(src: Path, prefix: str) -> list[Entry]:
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith(".pyc"):
                continue
            full = Path(dirpath) / fn
            data = full.read_bytes()
            mode = 0o755 if os.access(full, os.X_OK) else 0o644
            out.append(_blob(f"{prefix}/{full.relative_to(src).as_posix()}", data, mode))
    return out


def _vendor_entries(
    lock: Lock, artifacts: Path | None, trust: bool, stamps
) -> tuple[list[Entry], list[TrustedArtifact], list[str]]:
    """Each vendor package once: the signed zip edition when present, else the bare .run."""
    entries: dict[str, Entry] = {}
    trusted: list[TrustedArtifact] = []
    lacks: list[str] = []
    for art in lock.artifacts:
        candidates: list[tuple[str, str | None]] = []
        if art.zip:
            candidates.append((art.zip.file, art.zip.sha256))
        if art.run.file:
            candidates.append((art.run.file, art.run.sha256))
        if artifacts is None:
            if art.zip and any(art.zip.file in x for x in lacks):
                continue
            lacks.append(
                f"vendor package {candidates[0][0] if candidates else art.run.pattern} ({art.component}); "
                "build with --artifacts DIR to include it"
            )
            continue
        chosen: tuple[Path, str | None] | None = None
        for name, sha in candidates:
            if (artifacts / name).is_file():
                chosen = (artifacts / name, sha)
                break
        if chosen is None and not art.run.file:
            matches = sorted(artifacts.glob(art.run.pattern))
            if len(matches) == 1:
                chosen = (matches[0], art.run.sha256)
        if chosen is None:
            names = " or ".join(n for n, _ in candidates) or art.run.pattern
            raise CheckFailed(
                f"vendor package for {art.component} is missing from {artifacts}: {names}",
                where=Where(str(artifacts)),
                hint="Download it from the vendor (the lock has its URL where known) into the --artifacts folder.",
            )
        path, expected = chosen
        if path.name in entries:
            continue
        actual = stamps.sha256(path)
        if expected is None:
            if not trust:
                raise CheckFailed(
                    f"the lock has no sha256 for {path.name} ({art.component}); its file hashes to {actual}",
                    where=Where(str(path)),
                    hint="Check that hash against the vendor's published one, then rebuild with --trust-artifacts "
                    "(the manifest records it as trusted on first use).",
                )
            trusted.append(TrustedArtifact(file=path.name, sha256=actual))
        elif actual != expected:
            raise CheckFailed(
                f"{path.name} does not match the lock: expected sha256 {expected}, got {actual}",
                where=Where(str(path)),
                hint="The file is corrupt or another release; download it again from the vendor.",
            )
        mode = 0o755 if path.suffix == ".run" else 0o644
        entries[path.name] = Entry(f"{LAYOUT.vendor}/{path.name}", actual, path.stat().st_size, mode, source=path)
    return list(entries.values()), trusted, lacks


def plan_bundle(
    lock: Lock,
    lock_bytes: bytes,
    *,
    root: str,
    cache,
    stamps,
    artifacts: Path | None = None,
    trust_artifacts: bool = False,
    controller: PythonClosure | None = None,
    image_archive: Path | None = None,
    base: str | None = None,
    variant: str = "base",
    lock_name: str = "envkit.lock",
) -> BundlePlan:
    """`controller`: envkit's closure for the controller, when not the lock's (`bundle build --controller-python`).
    `variant`: the image build context's (base, or serving: `bundle build --variant`). `lock_name`: the lock's path,
    as the messages name it."""
    from envkit.artifacts.closure import envkit_supports

    target, locked_controller = lock.python.closure, lock.python.controller
    controller = controller or locked_controller
    if target is None or controller is None:
        raise BadInput(
            "the lock has no Python closure: it names versions, not the wheels to bundle",
            hint=f"Run `envkit lock --lock {shlex.quote(lock_name)}` first (it records every wheel with URL, sha256 and size).",
        )
    base_dir = getattr(cache, "base", None)
    ek_name, ek_bytes = envkit_wheel(Path(base_dir) if base_dir is not None else None)
    # envkit runs on the controller (provision) and on every target (the smoke role's smoke and doctor),
    # where the target's Python allows it
    on_target = envkit_supports(target.target.python)
    entries, fetch = _wheel_entries(target, controller, cache, (ek_name, ek_bytes), on_target)
    entries.append(_blob(str(LAYOUT.lock), lock_bytes))
    vendor, trusted, lacks = _vendor_entries(lock, artifacts, trust_artifacts, stamps)
    entries += vendor
    try:
        entries += _tree_entries(data_dir("playbooks"), str(LAYOUT.playbooks))
    except FileNotFoundError:
        lacks.append("playbooks/ (not shipped with this envkit)")
    image_entries, image_ctx, image_lacks = _image_entries(
        lock, artifacts, stamps, {e.path: e for e in entries}, (ek_name, ek_bytes), base, variant
    )
    entries += image_entries
    lacks += image_lacks
    if image_archive is not None:
        entries.append(_archive_entry(image_archive, stamps, base_dir))
    else:
        lacks.append("the built container image (build with --image, or --image-archive FILE, to include one)")
    entries.append(_blob(str(LAYOUT.install), install_sh(controller).encode(), 0o755))
    readme = data_dir("airgap") / "README.md"
    if readme.is_file():
        entries.append(_blob(str(LAYOUT.readme), readme.read_bytes()))
    if not on_target:
        lacks.append(
            f"envkit on the targets: it needs Python {_requires_python()}, the targets have {target.target.python} "
            "(provisioning skips its smoke and doctor steps there)"
        )
    for name in target.excluded:
        lacks.append(f"Python project {name} and what only it needs (excluded from the closure on purpose)")
    entries, sums = _with_sums(entries)
    manifest = BundleManifest(
        envkit_version=__version__,
        lock_sha256=hashlib.sha256(lock_bytes).hexdigest(),
        target=_target_dict(target),
        controller=_target_dict(controller)
        | ({} if controller == locked_controller else {"resolved": f"at bundle build by {controller.resolver}, not in the lock"}),
        lacks=sorted(lacks),
        trusted_on_first_use=sorted(trusted, key=lambda t: t.file),
        files=[BundleFile(path=e.path, sha256=e.sha256, size=e.size) for e in entries],
        sha256sums=sums.sha256,
        lock=lock.model_dump(mode="json"),
    )
    base = getattr(cache, "base", None)
    return BundlePlan(
        root=root,
        entries=entries,
        manifest=manifest,
        fetch=fetch,
        trusted=trusted,
        state=Path(base) / "bundles" if base is not None else None,
        image=image_ctx,
    )


def _wheel_entries(
    target: PythonClosure, controller: PythonClosure, cache: Any, envkit: tuple[str, bytes], on_target: bool
) -> tuple[list[Entry], list[Fetch]]:
    """Each closure's wheels (linked from the cache, fetched into it first) and requirements file, with envkit's own
    wheel and its hashed line on the controller and, where its Python allows it (`on_target`), on the targets."""
    from envkit.artifacts.download import Fetch

    entries: list[Entry] = []
    fetch: list[Fetch] = []
    for kind, closure in (("target", target), ("controller", controller)):
        for p in closure.packages:
            fetch.append(Fetch(p.url, p.sha256, p.size, p.filename))
            entries.append(Entry(f"{LAYOUT.wheels(kind)}/{p.filename}", p.sha256, p.size, source=cache.path(p.sha256), link=True))
    ek_name, ek_bytes = envkit
    ek_row = [("envkit", __version__, hashlib.sha256(ek_bytes).hexdigest())]
    for kind, closure in (("target", target), ("controller", controller)):
        with_envkit = kind == "controller" or on_target
        if with_envkit:
            entries.append(_blob(f"{LAYOUT.wheels(kind)}/{ek_name}", ek_bytes))
        entries.append(_blob(str(LAYOUT.requirements(kind)), requirements_txt(closure, ek_row if with_envkit else [])))
    return entries, fetch


def _archive_entry(image_archive: Path, stamps: Any, base_dir: Any) -> Entry:
    """The image archive built elsewhere (`--image-archive`), hashed once; hard-linked only when it is the cache's
    own."""
    in_cache = base_dir is not None and Path(image_archive).resolve().is_relative_to(Path(base_dir).resolve())
    return Entry(
        f"{IMAGE_DIR}/{image_archive.name}",
        stamps.sha256(image_archive),
        image_archive.stat().st_size,
        source=image_archive,
        link=in_cache,
    )


def _with_sums(entries: list[Entry]) -> tuple[list[Entry], Entry]:
    """The entries sorted by path with SHA256SUMS among them, and SHA256SUMS; BadInput when two share a path.
    install.sh checks every file with `sha256sum -c SHA256SUMS` before it runs anything of the bundle; the manifest
    records the digest of SHA256SUMS, so the published manifest digest covers it too."""
    entries = sorted(entries, key=lambda e: e.path)
    dup = {a.path for a, b in zip(entries, entries[1:], strict=False) if a.path == b.path}  # sorted: a repeated path is adjacent
    if dup:
        raise BadInput(f"two bundle entries share a path: {sorted(dup)}")
    sums = _blob(str(LAYOUT.sums), sha256sums((e.path, e.sha256) for e in entries))
    return sorted([*entries, sums], key=lambda e: e.path), sums

"""`envkit bundle build` as one call: `build(BuildRequest(...), on_progress) -> BuildResult`.

The workflow: an archive built before from the very same inputs and unchanged since is kept (the up-to-date
key, as make); otherwise the lock is read, the controller's closure taken from it (or resolved now for
another controller Python/arch), the plan made, its wheels fetched into the cache, the image built and
saved when asked, and the plan written as a folder or a reproducible archive.

This module imports nothing heavy at the top: the up-to-date check costs little more than the interpreter.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.errors import BadInput
from envkit.jobs.bundle.archive import ARCHIVES, is_archive
from envkit.lock.gate import SCHEMA_ONLY, LockCheck

if TYPE_CHECKING:
    from envkit.jobs.bundle.plan import BundlePlan
    from envkit.models.lock import ClosureTarget, Lock, PythonClosure

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildRequest:
    """What `envkit bundle build` was asked for (its options, as given)."""

    lock: Path
    output: Path
    artifacts: Path | None = None  # the vendor .run / .zip packages
    trust_artifacts: bool = False  # accept vendor files the lock has no hash for (recorded)
    image: bool = False  # build the image through the engine at DOCKER_HOST and include its archive
    base: str | None = None  # the image context's base image
    variant: str = "base"  # the image context's variant: base, or serving (`envkit image render --variant`)
    image_archive: Path | None = None  # an image archive built elsewhere
    controller_python: str | None = None  # another controller than the lock's: resolved at build time
    controller_arch: str | None = None
    controller_glibc: str | None = None
    jobs: int = 8  # parallel downloads
    force: bool = False  # replace what is at `output` even when envkit did not write it
    lock_check: LockCheck = SCHEMA_ONLY  # what the lock is held to after its schema (the CLI: the matrix's gate)
    # the sdists (by sha256) the user allows to be built here: building runs the sdist's own code, so a wheel the lock
    # records as built from an sdist (vLLM) is built again only when its sdist's sha256 is named here
    build_sdists: tuple[str, ...] = ()
    # where such a wheel is built again: in containers of this image (`--build-image`, `envkit.jobs.bundle.place`);
    # None: this machine, which must be the target
    build_image: str | None = None


@dataclass(frozen=True)
class BuildResult:
    bundle: str
    files: int
    bytes: int
    wheels_fetched: int
    wheels_cached: int
    manifest_sha256: str
    lacks: list[str]
    trusted_on_first_use: list[dict[str, str]]
    seconds: float
    archive_sha256: str | None = None  # archives only
    up_to_date: bool = False  # every input unchanged: the archive was kept as it was

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document: archive_sha256 for archives only, up_to_date only when true."""
        out = asdict(self)
        if self.archive_sha256 is None:
            del out["archive_sha256"]
        if not self.up_to_date:
            del out["up_to_date"]
        return out


def build(request: BuildRequest, on_progress: Progress | None = None) -> BuildResult:
    """Build the bundle `request` names; progress lines go to `on_progress` (the download bar to stderr)."""
    say = on_progress or (lambda _line: None)
    r = request
    if r.image and r.image_archive is not None:
        raise BadInput("--image builds the image here; --image-archive includes one built elsewhere: pass one of them")
    if r.image_archive is not None and not r.image_archive.is_file():
        raise BadInput(f"--image-archive {r.image_archive}: no such file")
    if r.artifacts is not None and not r.artifacts.is_dir():
        raise BadInput(f"--artifacts {r.artifacts}: no such folder")
    bad = [h for h in r.build_sdists if not (len(h) == 64 and all(c in "0123456789abcdef" for c in h))]
    if bad:
        raise BadInput(f"--build-sdist {bad[0][:80]!r} is not a sha256 (64 lowercase hex digits)")
    from envkit.artifacts.download import WheelCache
    from envkit.jobs.bundle.place import build_place

    place = build_place(r.build_image)  # BadInput for what is no image reference, before anything is read
    from envkit.jobs.bundle import uptodate

    t0 = time.perf_counter()
    cache = WheelCache()
    state = cache.base / "bundles"
    fast_key = _inputs_key(r)
    done = uptodate.up_to_date(state, r.output, fast_key) if fast_key else None
    kept = _kept(done, r.output, time.perf_counter() - t0)
    if kept is not None:
        return kept
    from envkit.io.outputs import BUNDLE, claim_output
    from envkit.jobs.bundle.verify import is_bundle

    # before anything is fetched: what is at -o must be an earlier bundle, every file as its manifest lists it
    claim_output(
        r.output,
        BUNDLE,
        force=r.force,
        folder=not is_archive(r.output),
        is_ours=is_bundle,
        listing=bundle_listing,
        inputs=[r.lock, r.artifacts, r.image_archive],
    )
    from envkit.artifacts.download import HashStamps, fetch_with_progress
    from envkit.io.yamlio import read_text
    from envkit.jobs.bundle.archive import write_dir, write_tar
    from envkit.jobs.bundle.plan import MANIFEST, plan_bundle
    from envkit.lock.file import load_lock

    lock_text = read_text(r.lock)  # read once: the bundle carries the very bytes that were validated
    lk = load_lock(lock_text, str(r.lock), r.lock_check)
    refuse_unasked_builds(lk, cache, r.build_sdists, str(r.lock))  # before anything is fetched or built
    from envkit.export.image import check_variant

    check_variant(lk, r.variant)  # before anything is fetched: a serving context needs a serving lock
    lock_bytes = lock_text.encode()
    stamps = HashStamps(cache.base)
    controller = controller_closure(lk, r.controller_python, r.controller_arch, r.controller_glibc, say)
    name = r.output.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]

    def plan_with(archive: Path | None) -> BundlePlan:
        return plan_bundle(
            lk,
            lock_bytes,
            root=name or "envkit-bundle",
            cache=cache,
            stamps=stamps,
            artifacts=r.artifacts,
            trust_artifacts=r.trust_artifacts,
            controller=controller,
            image_archive=archive,
            base=r.base,
            variant=r.variant,
            lock_name=str(r.lock),
        )

    plan = plan_with(r.image_archive)
    # a wheel `envkit lock` built from its sdist: into the cache, or built again
    ensure_built_wheels(lk, cache, say, place)
    status = fetch_with_progress(plan.fetch, cache, jobs=r.jobs)
    if r.image:
        plan = plan_with(build_image(plan, cache.base, say))
    fetched = sum(1 for v in status.values() if v == "fetched")
    r.output.parent.mkdir(parents=True, exist_ok=True)
    archive_sha256 = None
    if is_archive(r.output):
        archive_sha256 = write_tar(plan, r.output)
    else:
        write_dir(plan, r.output)
    entries = plan.all_entries()
    result = BuildResult(
        bundle=str(r.output),
        files=len(entries),
        bytes=sum(e.size for e in entries),
        wheels_fetched=fetched,
        wheels_cached=len(status) - fetched,
        manifest_sha256=next(e.sha256 for e in entries if e.path == MANIFEST),
        lacks=plan.manifest.lacks,
        trusted_on_first_use=[t.model_dump() for t in plan.trusted],
        seconds=round(time.perf_counter() - t0, 3),
        archive_sha256=archive_sha256,
    )
    if archive_sha256 is not None and fast_key is not None:
        uptodate.remember_result(state, r.output, fast_key, result.to_dict())
    return result


def refuse_unasked_builds(lk: Lock, cache: Any, allowed: tuple[str, ...], lock_name: str) -> None:
    """BadInput when a wheel the lock records as built from its sdist is not in the cache and its sdist's sha256 is not
    among those the user `allowed` (`--build-sdist`): a lock is untrusted, and building from an sdist runs the sdist's
    own code (its build backend, `setup.py`) as the user. The lock's rule (`envkit.models.rules.built_the_known_way`)
    already holds what is built to envkit's one recipe (vLLM, the vendor's settings); this holds *whether* to the user."""
    from envkit.errors import Where

    closure = lk.python.closure
    if closure is None:
        return
    for p in closure.packages:
        if p.built is None or cache.valid(p.sha256, p.size) or p.built.sdist_sha256 in allowed:
            continue
        raise BadInput(
            f"the lock's {p.name} {p.version} wheel was built from its sdist {p.built.sdist} (sha256 "
            f"{p.built.sdist_sha256}), and this machine's cache lacks it: building it again runs that sdist's code here",
            where=Where(lock_name, None, f"python.closure.packages.{p.name}.built"),
            hint=f"Check that sha256 against the index you trust (PyPI lists it on the {p.name} {p.built.sdist} "
            f"download page), then pass --build-sdist {p.built.sdist_sha256}; or copy the built wheel into this "
            "machine's wheel cache (run `envkit lock` here), or bundle on the machine that ran `envkit lock`.",
        )


def ensure_built_wheels(
    lk: Lock, cache: Any, say: Callable[[str], None], place_in: Callable[[Path, ClosureTarget], Any] | None = None
) -> None:
    """Each wheel of the target closure that `envkit lock` built from its sdist (vLLM for Ascend) into the wheel
    cache: there already (the lock ran here), else built again from the sdist the lock records and checked against
    the lock's sha256 (`envkit.artifacts.sdist.ensure_built`)."""
    closure = lk.python.closure
    if closure is None:
        return
    built = [p for p in closure.packages if p.built is not None]
    if not built:
        return
    from envkit.artifacts.sdist import ensure_built

    torch = next((p for p in closure.packages if p.name == "torch"), None)
    for p in built:
        how = ensure_built(
            p,
            target=closure.target,
            torch=torch,
            index_url=closure.index_url,
            extra_index_urls=tuple(closure.extra_index_urls),
            find_links=tuple(closure.find_links),
            cache=cache,
            say=say,
            place_in=place_in,
        )
        if how == "built":
            say(f"{p.filename}: built again from {p.built.sdist if p.built else '?'}, the same bytes as the lock's")


def bundle_listing(folder: Path) -> dict[str, dict] | None:
    """The files a bundle folder's manifest.json lists (and the manifest itself, as it is), as the ownership
    record of `claim_output`; None when there is no valid bundle manifest."""
    from envkit.errors import CheckFailed
    from envkit.jobs.bundle.plan import MANIFEST
    from envkit.jobs.bundle.verify import MAX_MANIFEST, _parse_manifest

    path = Path(folder) / MANIFEST
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST:
            return None
        data = path.read_bytes()
        manifest = _parse_manifest(data, str(folder))
    except (OSError, CheckFailed):
        return None
    files = {f.path: {"path": f.path, "sha256": f.sha256, "size": f.size} for f in manifest.files}
    return files | {MANIFEST: {"path": MANIFEST, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}}


def _inputs_key(r: BuildRequest) -> str | None:
    """The key of every input but the cache, for an archive whose inputs can be named (no image build, no
    controller resolved now); None otherwise, or when the lock cannot be read (the full path says why)."""
    from envkit.jobs.bundle import uptodate

    if not r.output.name.endswith(ARCHIVES) or r.image or r.controller_python is not None or r.controller_arch is not None:
        return None
    options = {"trust": r.trust_artifacts, "base": r.base, "variant": r.variant, "image_archive": _stat_of(r.image_archive)}
    try:
        return uptodate.inputs_key(r.lock.read_bytes(), out=r.output, artifacts=r.artifacts, options=options)
    except OSError:
        return None


def _kept(done: dict[str, Any] | None, output: Path, seconds: float) -> BuildResult | None:
    """The recorded result of the build that wrote `output` from the same inputs, as this build's: nothing fetched."""
    if done is None:
        return None
    names = {f.name for f in fields(BuildResult)} - {"up_to_date"}
    try:
        recorded = {k: v for k, v in done.items() if k in names}
        return BuildResult(
            **(
                recorded
                | {
                    "bundle": str(output),
                    "wheels_fetched": 0,
                    "wheels_cached": done["wheels_cached"] + done["wheels_fetched"],
                    "seconds": round(seconds, 3),
                    "up_to_date": True,
                }
            )
        )
    except (KeyError, TypeError):
        return None  # a record this envkit did not write: build


def _stat_of(path: Path | None) -> list | None:
    if path is None:
        return None
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def controller_closure(
    lk: Lock, python: str | None, arch: str | None, glibc: str | None, on_progress: Progress | None = None
) -> PythonClosure | None:
    """The lock's controller closure, or, for another controller Python/arch, one resolved now (recorded in
    the manifest: such a bundle is reproducible only as long as the index serves the same files)."""
    import tempfile

    from envkit.artifacts import closure as cl

    have = lk.python.controller
    if have is None or (python in (None, have.target.python) and arch in (None, have.target.arch)):
        return have  # plan_bundle reports a lock without closures
    target = cl.make_target(
        python or have.target.python,
        arch or have.target.arch,
        glibc or (have.target.glibc if arch in (None, have.target.arch) else cl.DEFAULT_GLIBC),
    )
    plan = cl.ClosurePlan(
        roots=tuple(cl.envkit_roots()),
        target=target,
        index_url=have.index_url,
        extra_index_urls=tuple(have.extra_index_urls),
        find_links=tuple(have.find_links),
    )
    if on_progress:
        on_progress(
            f"resolving envkit's closure for the controller (Python {target.python} on {target.platform}); "
            f"the lock has one for Python {have.target.python} on {have.target.platform} ..."
        )
    with tempfile.TemporaryDirectory(prefix="envkit-ctl-") as tmp:
        return cl.run_uv(plan, Path(tmp))


def build_image(plan: BundlePlan, cache_base: Path, on_progress: Progress | None = None) -> Path:
    """Build the bundle's image context through the engine and save it, once per context (cached by its key)."""
    import tempfile

    from envkit.executor.docker import Engine

    say = on_progress or (lambda _line: None)
    if plan.image is None:
        why = next((x for x in plan.manifest.lacks if x.startswith("the image build context")), "no image context")
        raise BadInput(
            f"--image: the lock cannot make the image: {why}",
            hint="Lock the whole stack (`envkit lock` without --only) for the image's Python and arch.",
        )
    have = {e.path for e in plan.entries}
    missing = sorted({src for _, _, src in plan.image.links if src not in have})
    if missing:
        raise BadInput(
            "--image: the bundle lacks files the image needs: " + ", ".join(missing),
            hint="Pass --artifacts DIR with the vendor packages.",
        )
    dest = Path(cache_base) / "images" / plan.image.key / "image.tar"
    if dest.is_file():
        say(f"image archive of this context from the cache: {dest}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    engine = Engine()
    engine.announce(plan.image.platform, say)
    with tempfile.TemporaryDirectory(prefix=".ctx-", dir=dest.parent) as tmp:  # same file system: hard links
        ctx = plan.assemble_image_context(Path(tmp) / "context")
        say(f"building {plan.image.tag} for {plan.image.platform} from the bundle's context")
        engine.build(
            ctx, plan.image.tag, on_line=lambda line: say("  " + line) if line.strip() else None, platform=plan.image.platform
        )
    say(f"saving {plan.image.tag} -> {dest}")
    engine.save(plan.image.tag, dest)
    return dest

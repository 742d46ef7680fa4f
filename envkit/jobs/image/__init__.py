"""`envkit image render | build`: a request -> the image plan (`envkit.export.image`) -> the build context written
(`envkit.export.templates`) -> the image built through the engine at DOCKER_HOST (`envkit.executor.docker`) -> a result.

The command line only parses and formats (`envkit.cli.image`). `image run-args` is `runargs`: the runtime options of
the export layer (`envkit.export.runargs`) over a chip's facts, taken from the lock or, as a matrix query, through the
chip lookup the caller hands in (a job reads no matrix).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.errors import BadInput
from envkit.lock.gate import SCHEMA_ONLY, LockCheck

if TYPE_CHECKING:
    from envkit.export.image import BuildPlan
    from envkit.models.lock import Lock

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageRequest:
    """What `envkit image render` / `build` was asked for (its options, as given)."""

    lock: Path
    base: str | None = None  # the base image (default: the lock's platform.base_image)
    artifacts: Path | None = None  # the vendor packages (and wheels/ for an offline install)
    requirements: Path | None = None  # hashed requirements covering the lock's Python pins
    variant: str = "base"  # base, or serving
    force: bool = False  # write beside the user's files in the context folder
    lock_check: LockCheck = SCHEMA_ONLY  # what the lock is held to after its schema (the CLI: the matrix's gate)

    def inputs(self) -> tuple[Path | None, ...]:
        """The inputs an output folder must never overwrite or list as its own."""
        return (self.lock, self.artifacts, self.requirements)


def command_line(req: ImageRequest, tail: list[str]) -> str:
    """The `envkit image render ...` line that makes this context (recorded in the Dockerfile's header)."""
    cmd = ["envkit", "image", *tail[:1], "--lock", str(req.lock)]
    if req.variant != "base":
        cmd += ["--variant", req.variant]
    if req.base:
        cmd += ["--base", req.base]
    if req.artifacts:
        cmd += ["--artifacts", str(req.artifacts)]
    if req.requirements:
        cmd += ["--requirements", str(req.requirements)]
    return " ".join(cmd + tail[1:])


def plan(req: ImageRequest, generated_by: str) -> BuildPlan:
    """The image plan of the request's lock (read through its check)."""
    from envkit.lock.file import read_lock

    return plan_lock(
        read_lock(req.lock, req.lock_check),
        generated_by=generated_by,
        base=req.base,
        artifacts=req.artifacts,
        requirements=req.requirements,
        variant=req.variant,
        lock_name=str(req.lock),
    )


def plan_lock(
    lock: Lock,
    *,
    generated_by: str,
    base: str | None = None,
    artifacts: Path | None = None,
    requirements: Path | None = None,
    variant: str = "base",
    lock_name: str = "envkit.lock",
) -> BuildPlan:
    """The image plan of `lock` with the files handed in: listed and the wheelhouse hashed first, the Python pins
    chosen (a lock without them is refused here), then the vendor packages the lock picks hashed (gigabytes)."""
    from envkit.artifacts.handed import scan, with_vendor
    from envkit.export.image import check_variant, choose_base, plan_build, plan_python, vendor_wanted

    check_variant(lock, variant)
    choose_base(lock, base)  # its refusals before anything handed in is read
    listing = scan(artifacts, requirements)
    python = plan_python(lock, listing, lock_name)
    handed = with_vendor(listing, vendor_wanted(lock))
    return plan_build(
        lock, generated_by=generated_by, base=base, handed=handed, python=python, variant=variant, lock_name=lock_name
    )


@dataclass(frozen=True)
class Rendered:
    plan: BuildPlan
    output: Path
    files: list[Path]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document of the rendered context (`plan_report`)."""
        return plan_report(self.plan, self.output)


def render(req: ImageRequest, output: Path) -> Rendered:
    """`envkit image render`: the build context of the lock written to `output`."""
    from envkit.export.templates import write_context

    p = plan(req, command_line(req, ["render", "-o", str(output)]))
    return Rendered(p, output, write_context(p, output, force=req.force, inputs=req.inputs()))


@dataclass(frozen=True)
class Built:
    tag: str
    image_id: str
    platform: str
    emulated: bool
    seconds: float
    lock_digest: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "platform": self.platform,
            "emulated": self.emulated,
            "seconds": self.seconds,
            "lock_digest": self.lock_digest,
        }


def build(req: ImageRequest, tag: str | None, context: Path | None, on_progress: Progress | None = None) -> Built:
    """`envkit image build`: render the context (into `context`, else a temporary folder), then build it with the
    engine at DOCKER_HOST; every vendor package must be handed in (BadInput before anything is written)."""
    from envkit.executor.docker import Engine
    from envkit.export.container import default_tag
    from envkit.export.templates import write_context

    say = on_progress or (lambda _line: None)
    p = plan(req, command_line(req, ["render", "-o", "CONTEXT"]))
    missing = [s.file for s in p.steps if s.source is None]
    if missing:
        raise BadInput(
            "the vendor packages are not handed in: " + ", ".join(missing),
            hint="Pass --artifacts DIR holding them (the signed .zip edition or the bare .run).",
        )
    tag = tag or default_tag(p.lock, p.variant)
    for note in p.notes:
        say(f"note: {note}")
    engine = Engine()
    emulated = engine.announce(p.platform, say)
    with tempfile.TemporaryDirectory(prefix="envkit-image-") as tmp:
        build_dir = context or Path(tmp)
        write_context(p, build_dir, force=req.force, inputs=req.inputs())
        say(f"building {tag} for {p.platform} from {build_dir}")
        t0 = time.monotonic()
        result = engine.build(
            build_dir, tag, on_line=lambda line: say("  " + line) if line.strip() else None, platform=p.platform
        )
        took = time.monotonic() - t0
    return Built(tag, result.image_id, p.platform, emulated, round(took, 1), p.lock_digest)


def plan_report(p: BuildPlan, output: Path) -> dict[str, Any]:
    """The `--json` document of a rendered context."""
    return {
        "context": str(output),
        "base": p.base.ref,
        "lock_digest": p.lock_digest,
        "steps": [
            {"component": s.component, "version": s.version, "file": s.file, "sha256": s.sha256, "sha256_from": s.sha256_from}
            for s in p.steps
        ],
        "variant": p.variant,
        "python": {
            "requirements": len(p.requirements),
            "torch_layer": [r.name for r in p.heavy_requirements],
            "serving_layer": [r.name for r in p.serving_requirements],
            "source": p.python_source,
            "offline": p.offline,
            "indexes": p.indexes,
        },
        # envkit's own wheel, the last layer (installed offline from python/envkit/); null: none, and a note says why
        "envkit": None if p.envkit is None else {"wheel": p.envkit.name, "version": p.envkit.version, "sha256": p.envkit.sha256},
        "notes": p.notes,
    }

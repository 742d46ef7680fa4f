"""`envkit image render | build | run-args`: container images rendered from the lock."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from typer import Option as Opt

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import ForceOpt, JsonOpt

if TYPE_CHECKING:
    from envkit.jobs.image import ImageRequest, Rendered


LockOpt = Annotated[Path, Opt("--lock", help="The lock to build from.")]
BaseOpt = Annotated[
    Optional[str],
    Opt("--base", help="Base image IMAGE@sha256:DIGEST (or a local image); default: the lock's platform.base_image."),
]
ArtOpt = Annotated[
    Optional[Path],
    Opt(
        "--artifacts",
        help="Folder with the vendor CANN packages (.run or signed .zip) and optionally wheels/ for an offline install.",
    ),
]
VariantOpt = Annotated[
    str,
    Opt(
        "--variant",
        help="base, or serving: a serving layer after torch (vllm, vllm-ascend, "
        "triton-ascend), the serving environment and `vllm serve` as entry point; same CANN layers.",
    ),
]
ReqOpt = Annotated[
    Optional[Path],
    Opt(
        "--requirements",
        help="Hashed requirements (name==ver --hash=sha256:...) covering the lock's Python pins; "
        "default: the lock's closure (`envkit lock`), else the wheels in --artifacts DIR/wheels.",
    ),
]


def render_cmd(
    ctx: typer.Context,
    lock: LockOpt = Path("envkit.lock"),
    output: Annotated[Path, Opt("-o", "--output", help="Folder of the build context.")] = Path("image"),
    base: BaseOpt = None,
    artifacts: ArtOpt = None,
    requirements: ReqOpt = None,
    variant: VariantOpt = "base",
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write a build context (Dockerfile, hashed requirements, the vendor packages) for the lock."""
    from envkit.jobs import image

    done = image.render(_request(ctx, lock, base, artifacts, requirements, variant, force), output)
    if json_out:
        console.emit_json(done.to_dict())
    else:
        _report(done)


def build_cmd(
    ctx: typer.Context,
    lock: LockOpt = Path("envkit.lock"),
    tag: Annotated[
        Optional[str], Opt("--tag", "-t", help="Image tag (default: envkit/<chip>:cann<ver>-torch<ver>-py<ver>).")
    ] = None,
    base: BaseOpt = None,
    artifacts: ArtOpt = None,
    requirements: ReqOpt = None,
    context: Annotated[
        Optional[Path], Opt("--context", help="Where to render the build context (default: a temporary folder).")
    ] = None,
    variant: VariantOpt = "base",
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Render, then build with the engine at DOCKER_HOST (Docker, or Podman's Docker API socket)."""
    from envkit.jobs import image

    built = image.build(_request(ctx, lock, base, artifacts, requirements, variant, force), tag, context, console.progress)
    if json_out:
        console.emit_json(built.to_dict())
    else:
        console.out.print(f"built {built.tag} ({built.image_id[:19]}) in {built.seconds:.1f} s", markup=False)


def run_args_cmd(
    ctx: typer.Context,
    chip: Annotated[Optional[str], Opt("--chip", help="Chip: 910b, 910, a3, 310p, 950 (its facts from the matrix).")] = None,
    lock: Annotated[Optional[Path], Opt("--lock", help="Or: the chip of this lock (its facts from the lock).")] = None,
    devices: Annotated[Optional[str], Opt("--devices", help="NPU ids, e.g. 0-7 or 0,2 (default: every NPU of the chip).")] = None,
    fmt: Annotated[str, Opt("--format", help="flags, json or compose.")] = "flags",
) -> None:
    """The container runtime options for a chip: devices and host mounts (or the Ascend Docker Runtime)."""
    import shlex

    from envkit.cli import chip_devices, lock_check
    from envkit.errors import BadInput
    from envkit.jobs.image.runargs import RunArgsRequest, run_args

    ra = run_args(RunArgsRequest(chip, lock, devices, chips=chip_devices, lock_check=lock_check(ctx)))
    if fmt == "json":
        console.emit_json(ra.to_json())
    elif fmt == "compose":
        typer.echo(ra.compose(), nl=False)
    elif fmt == "flags":
        typer.echo(
            " \\\n  ".join(" ".join(shlex.quote(x) for x in pair) for pair in zip(ra.flags()[::2], ra.flags()[1::2], strict=True))
        )
        typer.echo("# or, with the Ascend Docker Runtime: " + " ".join(ra.runtime_flags()))
        for note in ra.notes:
            typer.echo(f"# {note}")
    else:
        raise BadInput(f"--format {fmt!r}: expected flags, json or compose")


def register(app: typer.Typer) -> None:
    image_app = typer.Typer(
        help="Container images rendered from the lock, built through the Docker API.",
        no_args_is_help=True,
        epilog=example(
            "envkit image render --lock envkit.lock --artifacts vendor/ -o image/", "envkit image run-args --chip 910b"
        ),
    )
    app.add_typer(image_app, name="image")
    image_app.command("render", epilog=example("envkit image render --lock envkit.lock --artifacts vendor/ -o image/"))(
        render_cmd
    )
    image_app.command(
        "build", epilog=example("envkit image build --lock envkit.lock --artifacts vendor/ --tag envkit/stack:dev")
    )(build_cmd)
    image_app.command("run-args", epilog=example("envkit image run-args --chip 910b --devices 0-3 --format compose"))(
        run_args_cmd
    )


def _request(
    ctx: typer.Context,
    lock: Path,
    base: Optional[str],
    artifacts: Optional[Path],
    requirements: Optional[Path],
    variant: str,
    force: bool,
) -> "ImageRequest":
    """The image job's request from the options, the lock held to the command line's check."""
    from envkit.cli import lock_check
    from envkit.jobs.image import ImageRequest

    return ImageRequest(lock, base, artifacts, requirements, variant, force, lock_check(ctx))


def _report(done: "Rendered") -> None:
    """The text report of a rendered context: the base, the vendor layers, the Python layers, envkit's wheel, notes."""
    plan, output = done.plan, done.output
    console.out.print(f"rendered {output}/Dockerfile ({len(done.files)} files) from lock {plan.lock_digest[:19]}", markup=False)
    console.out.print(f"  base    {plan.base.ref}", markup=False)
    for s in plan.steps:
        console.out.print(f"  {s.component:<13} {s.version:<10} {s.file}", markup=False)
    mode = "offline wheelhouse" if plan.offline else "index " + ", ".join(plan.indexes)
    source = {"closure": "the lock's closure", "requirements": "--requirements"}.get(plan.python_source, "the wheels")
    heavy = ", ".join(r.name for r in plan.heavy_requirements) or "none"
    serving = ", ".join(r.name for r in plan.serving_requirements)
    console.out.print(
        f"  python  {len(plan.requirements)} hashed pins from {source} ({heavy} in their own layer"
        + (f", then {serving}: the serving variant" if serving else "")
        + f"), {mode}",
        markup=False,
    )
    if plan.envkit is not None:
        console.out.print(
            f"  envkit  {plan.envkit.name} (sha256 {plan.envkit.sha256[:12]}...), the last layer, offline from the context",
            markup=False,
        )
    for note in plan.notes:
        console.out.print(f"  note: {note}", markup=False)

"""`envkit lock` (the full Python closure into the lock) and `envkit bundle build | verify`.

Each command parses its options, calls one function of `envkit.jobs.bundle` (`lock.complete_lock`, `build`,
`verify`, `mirror.open_mirror`) and formats what it returns.
"""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.image import VariantOpt
from envkit.cli.options import JsonOpt

Opt = typer.Option
Arg = typer.Argument


def _csv(value: Optional[str]) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


BuildImageOpt = Annotated[
    Optional[str],
    Opt(
        "--build-image",
        help="IMAGE: build the wheels envkit builds from their sdist (vLLM) in containers of this image, for the "
        "target's platform, through the engine at DOCKER_HOST (emulated where this machine's arch differs); its "
        "python3 must be the target's Python, with venv and pip. Default: on this machine, which must be the target.",
    ),
]


def lock_cmd(
    ctx: typer.Context,
    lock: Annotated[Path, Opt("--lock", "-l", help="The lock to complete (from `envkit resolve`).")] = Path("envkit.lock"),
    output: Annotated[Optional[Path], Opt("-o", "--output", help="Where to write (default: the lock itself).")] = None,
    target_python: Annotated[Optional[str], Opt("--target-python", help="Target Python (default: the lock's).")] = None,
    target_arch: Annotated[Optional[str], Opt("--target-arch", help="Target arch (default: the lock's).")] = None,
    glibc: Annotated[
        Optional[str], Opt("--glibc", help="Target's oldest glibc, e.g. 2.28 (default: from the lock's OS).")
    ] = None,
    controller_python: Annotated[Optional[str], Opt("--controller-python", help="Controller Python (default: this one).")] = None,
    controller_arch: Annotated[Optional[str], Opt("--controller-arch", help="Controller arch (default: this one).")] = None,
    controller_glibc: Annotated[
        Optional[str], Opt("--controller-glibc", help="Controller glibc (default: this one's, or 2.28).")
    ] = None,
    only: Annotated[Optional[str], Opt("--only", help="Comma-separated: keep only these of the lock's requirements.")] = None,
    exclude: Annotated[
        Optional[str], Opt("--exclude", help="Comma-separated projects to leave out, with what only they need (recorded).")
    ] = None,
    index_url: Annotated[str, Opt("--index-url", help="Index to resolve against (recorded).")] = "https://pypi.org/simple",
    extra_index_url: Annotated[
        Optional[list[str]], Opt("--extra-index-url", help="More indexes (recorded), e.g. a PyTorch CPU index.")
    ] = None,
    find_links: Annotated[Optional[list[str]], Opt("--find-links", help="Local wheel folders (recorded).")] = None,
    torch_index_url: Annotated[
        Optional[str],
        Opt(
            "--torch-index-url",
            help="Where torch's CPU build comes from, alone (recorded; default: the lock's index for torch, the PyTorch CPU index). A mirror of it: --index-for pytorch-cpu=URL.",
        ),
    ] = None,
    index_for: Annotated[
        Optional[list[str]],
        Opt(
            "--index-for",
            help="ID=URL, repeatable: a mirror of the lock's index ID (python.indexes, e.g. ascend-pypi, pytorch-cpu); the pins that name ID come from URL alone (recorded).",
        ),
    ] = None,
    project: Annotated[
        Optional[Path],
        Opt(
            "--project",
            help="The user's project folder (or its requirements file): its dependencies, read as `envkit scan` reads "
            "them, join the closure (recorded in python.project with their file and line). A dependency with no Ascend "
            "build or one that conflicts with the stack is refused unless --exclude names it. What the files its "
            "requirements' -c lines name pin constrains the closure (recorded).",
        ),
    ] = None,
    project_extra: Annotated[
        Optional[list[str]],
        Opt(
            "--project-extra",
            help="NAME, repeatable: the project's optional dependencies NAME ([project.optional-dependencies], "
            "extras_require) join the closure too (recorded).",
        ),
    ] = None,
    project_group: Annotated[
        Optional[list[str]],
        Opt(
            "--project-group",
            help="NAME, repeatable: the project's dependency group NAME (PEP 735 [dependency-groups], with the groups "
            "it includes; a Poetry group) joins the closure too (recorded).",
        ),
    ] = None,
    build_image: BuildImageOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Record the full Python closure (every wheel: URL, sha256, size) for the target and the controller, with the
    dependencies of the user's project (--project) where given."""
    from envkit.cli import lock_check
    from envkit.jobs.bundle.lock import LockRequest, complete_lock

    done = complete_lock(
        LockRequest(
            lock=lock,
            output=output,
            target_python=target_python,
            target_arch=target_arch,
            glibc=glibc,
            controller_python=controller_python,
            controller_arch=controller_arch,
            controller_glibc=controller_glibc,
            only=tuple(_csv(only)),
            exclude=tuple(_csv(exclude)),
            index_url=index_url,
            extra_index_urls=tuple(extra_index_url or ()),
            find_links=tuple(find_links or ()),
            torch_index_url=torch_index_url,
            index_for=tuple(index_for or ()),
            project=project,
            project_extras=tuple(project_extra or ()),
            project_groups=tuple(project_group or ()),
            build_image=build_image,
            lock_check=lock_check(ctx),
        ),
        on_progress=console.progress,
    )
    summary = done.to_dict()
    if json_out:
        console.emit_json(summary)
        return
    t, c = summary["target"], summary["controller"]
    console.out.print(
        f"locked {t['wheels']} target wheels ({t['bytes'] / 1e6:.1f} MB, Python {t['python']}, {t['platform']}) "
        f"and {c['wheels']} controller wheels ({c['bytes'] / 1e6:.1f} MB, Python {c['python']}, {c['platform']}) "
        f"-> {summary['lock']}",
        markup=False,
    )
    if t["torch"]:
        console.out.print(f"torch {t['torch']['version']} from {t['torch']['url']}", markup=False)
    if summary.get("project"):
        shown = ", ".join(f"{r['name']} {r['version'] or '(not installed)'}" for r in summary["project"]["requirements"])
        console.out.print(f"the project's dependencies: {shown}", markup=False)
    if t["excluded"]:
        console.out.print(f"excluded on purpose (recorded in the lock): {', '.join(t['excluded'])}", markup=False)
    computed = [*t["sha256_computed"], *c["sha256_computed"]]
    if computed:
        console.out.print(
            f"sha256 computed from the download, not published by the index ({len(computed)}; recorded as "
            "sha256_from: download):",
            markup=False,
        )
        for row in computed:
            also = f" (its published {', '.join(row['checked'])} matched)" if row["checked"] else ""
            console.out.print(f"  {row['file']}{also}", markup=False)


def build_cmd(
    ctx: typer.Context,
    lock: Annotated[Path, Opt("--lock", "-l", help="The lock with its closure (`envkit lock`).")] = Path("envkit.lock"),
    output: Annotated[Path, Opt("-o", "--output", help="A folder, or an archive ending in .tar / .tar.gz.")] = Path(
        "envkit-bundle.tar"
    ),
    artifacts: Annotated[Optional[Path], Opt("--artifacts", help="Folder with the vendor .run / .zip packages.")] = None,
    trust_artifacts: Annotated[
        bool, Opt("--trust-artifacts", help="Accept vendor files the lock has no hash for; record the hash seen.")
    ] = False,
    image: Annotated[
        bool, Opt("--image", help="Build the image through the engine at DOCKER_HOST and include its archive.")
    ] = False,
    base: Annotated[Optional[str], Opt("--base", help="Base image of the image context (default: matrices/images.yaml).")] = None,
    image_archive: Annotated[
        Optional[Path], Opt("--image-archive", help="Include an image archive built elsewhere (docker/podman save).")
    ] = None,
    variant: VariantOpt = "base",
    controller_python: Annotated[
        Optional[str], Opt("--controller-python", help="Controller Python (default: the lock's controller closure).")
    ] = None,
    controller_arch: Annotated[
        Optional[str], Opt("--controller-arch", help="Controller arch (default: the lock's controller closure).")
    ] = None,
    controller_glibc: Annotated[
        Optional[str], Opt("--controller-glibc", help="Controller glibc when it is resolved here (default 2.28).")
    ] = None,
    jobs: Annotated[int, Opt("--jobs", "-j", help="Parallel downloads.")] = 8,
    force: Annotated[
        bool,
        Opt("--force", help="Kept for scripts: a bundle is replaced whole, so only an earlier envkit bundle is ever replaced."),
    ] = False,
    build_sdist: Annotated[
        Optional[list[str]],
        Opt(
            "--build-sdist",
            metavar="SHA256",
            help="Allow building the wheel the lock records as built from the sdist with this sha256 (vLLM), when the "
            "cache lacks it: building runs the sdist's code. Check the sha256 against the index first. Repeatable.",
        ),
    ] = None,
    build_image: BuildImageOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Download every wheel into the cache, check the vendor packages, and write the bundle."""
    from envkit.cli import lock_check
    from envkit.jobs import bundle as airgap

    result = airgap.build(
        airgap.BuildRequest(
            lock=lock,
            output=output,
            artifacts=artifacts,
            trust_artifacts=trust_artifacts,
            image=image,
            base=base,
            variant=variant,
            image_archive=image_archive,
            controller_python=controller_python,
            controller_arch=controller_arch,
            controller_glibc=controller_glibc,
            jobs=jobs,
            force=force,
            lock_check=lock_check(ctx),
            build_sdists=tuple(build_sdist or ()),
            build_image=build_image,
        ),
        on_progress=console.progress,
    )
    if json_out:
        console.emit_json(result.to_dict())
        return
    out = console.out
    what = (
        "up to date (every input unchanged), kept"
        if result.up_to_date
        else f"{result.wheels_fetched} wheels downloaded, {result.wheels_cached} from the cache"
    )
    out.print(
        f"bundle -> {result.bundle}: {result.files} files, {result.bytes / 1e6:.1f} MB ({what}) in {result.seconds} s",
        markup=False,
    )
    out.print(
        f"manifest digest: sha256:{result.manifest_sha256}  (publish it; install.sh checks ENVKIT_BUNDLE_DIGEST)", markup=False
    )
    for t in result.trusted_on_first_use:
        out.print(f"trusted on first use: {t['file']} sha256 {t['sha256']} (the lock has no hash for it)", markup=False)
    for item in result.lacks:
        out.print(f"lacks: {item}", markup=False)


def verify_cmd(
    bundle: Annotated[Path, Arg(help="A bundle folder or archive (.tar, .tar.gz).")],
    expect_digest: Annotated[Optional[str], Opt("--expect-digest", help="sha256 of manifest.json as published.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Check every file against the manifest; refuse unsafe archives without extracting anything."""
    from envkit.cli.bundle_verify import verify

    code = verify(bundle=bundle, expect_digest=expect_digest, json_out=json_out)
    if code:
        raise typer.Exit(code)


def serve_cmd(
    bundle: Annotated[Path, Arg(help="A bundle folder (what `envkit bundle build -o DIR` writes).")],
    bind: Annotated[str, Opt("--bind", help="The address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, Opt("--port", help="The TCP port (0: a free one, printed).")] = 8080,
    expect_digest: Annotated[Optional[str], Opt("--expect-digest", help="sha256 of manifest.json as published.")] = None,
    max_connections: Annotated[
        int, Opt("--max-connections", help="Connections served at once; one more is answered 503 (8 downloads a host).")
    ] = 256,
    header_timeout: Annotated[
        float, Opt("--header-timeout", help="Seconds for a request's line and headers; past it the client is dropped.")
    ] = 10.0,
) -> None:
    """Serve a verified bundle read-only over HTTP: the mirror `envkit provision --bundle-url` hosts pull from.

    Refuses to start (exit 1) on a bundle that does not verify; exit 2 on bad input. Only the manifest's files
    are served (byte ranges too), each a regular file of its listed size reached without a link; one escaped
    access-log line per request goes to stderr. Stops on Ctrl-C or SIGTERM.
    """
    import signal

    from envkit.jobs.bundle.mirror import Limits, ServeRequest, open_mirror

    limits = Limits(max_connections=max_connections, header_timeout=header_timeout)
    server = open_mirror(ServeRequest(bundle=bundle, bind=bind, port=port, expect_digest=expect_digest, limits=limits))

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    console.out.print(f"serving {bundle} ({len(server.files)} files) at {server.url}", markup=False)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    bundle_app = typer.Typer(
        help="Air-gapped bundles: build, verify, serve.",
        no_args_is_help=True,
        rich_markup_mode=None,
        epilog=example(
            "envkit bundle build --lock envkit.lock --artifacts vendor/ -o out/bundle.tar", "envkit bundle verify out/bundle.tar"
        ),
    )
    app.add_typer(bundle_app, name="bundle")
    app.command(
        "lock",
        epilog=example(
            "envkit lock --lock envkit.lock",
            "envkit lock --lock envkit.lock --index-for pytorch-cpu=https://mirror.example/whl/cpu",
            "envkit lock --lock envkit.lock --project ~/src/my-trainer",
        ),
    )(lock_cmd)
    bundle_app.command("build", epilog=example("envkit bundle build --lock envkit.lock --artifacts vendor/ -o out/bundle.tar"))(
        build_cmd
    )
    bundle_app.command("verify", epilog=example("envkit bundle verify out/bundle.tar --expect-digest sha256:DIGEST --json"))(
        verify_cmd
    )
    bundle_app.command("serve", epilog=example("envkit bundle serve out/bundle --bind 10.0.0.5 --port 8080"))(serve_cmd)

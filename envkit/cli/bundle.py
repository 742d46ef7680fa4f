"""`envkit lock` (the full Python closure into the lock) and `envkit bundle build | verify`."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.errors import EXIT_FAILED

Opt = typer.Option
ARCHIVES = (".tar", ".tar.gz", ".tgz")  # what envkit.bundle.is_archive accepts
Arg = typer.Argument


def _csv(value: Optional[str]) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def register(app: typer.Typer) -> None:
    bundle_app = typer.Typer(help="Air-gapped bundles: build, verify.", no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(bundle_app, name="bundle")

    @app.command("lock")
    def lock_cmd(
        lock: Annotated[Path, Opt("--lock", "-l", help="The lock to complete (from `envkit resolve`).")] = Path("envkit.lock"),
        output: Annotated[Optional[Path], Opt("-o", "--output", help="Where to write (default: the lock itself).")] = None,
        target_python: Annotated[Optional[str], Opt("--target-python", help="Target Python (default: the lock's).")] = None,
        target_arch: Annotated[Optional[str], Opt("--target-arch", help="Target arch (default: the lock's).")] = None,
        glibc: Annotated[Optional[str], Opt("--glibc", help="Target's oldest glibc, e.g. 2.28 (default: from the lock's OS).")] = None,
        controller_python: Annotated[Optional[str], Opt("--controller-python", help="Controller Python (default: this one).")] = None,
        controller_arch: Annotated[Optional[str], Opt("--controller-arch", help="Controller arch (default: this one).")] = None,
        controller_glibc: Annotated[Optional[str], Opt("--controller-glibc", help="Controller glibc (default: this one's, or 2.28).")] = None,
        only: Annotated[Optional[str], Opt("--only", help="Comma-separated: keep only these of the lock's requirements.")] = None,
        exclude: Annotated[Optional[str], Opt("--exclude", help="Comma-separated projects to leave out, with what only they need (recorded).")] = None,
        index_url: Annotated[str, Opt("--index-url", help="Index to resolve against (recorded).")] = "https://pypi.org/simple",
        extra_index_url: Annotated[Optional[list[str]], Opt("--extra-index-url", help="More indexes (recorded), e.g. a PyTorch CPU index.")] = None,
        find_links: Annotated[Optional[list[str]], Opt("--find-links", help="Local wheel folders (recorded).")] = None,
        json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Record the full Python closure (every wheel: URL, sha256, size) for the target and the controller."""
        import tempfile

        from envkit import closure as cl
        from envkit.errors import BadInput
        from envkit.lockfile import read_lock, write_lock

        lk = read_lock(lock)
        py = target_python or lk.stack.python
        arch = target_arch or lk.stack.arch
        if py != lk.stack.python or arch != lk.stack.arch:
            raise BadInput(
                f"--target-python/--target-arch ({py}, {arch}) differ from the lock's stack ({lk.stack.python}, {lk.stack.arch})",
                hint=f"Resolve for that target first: envkit resolve --python {py} --arch {arch} -o {lock}",
            )
        target = cl.make_target(py, arch, glibc or cl.OS_GLIBC.get(lk.stack.os, cl.DEFAULT_GLIBC))
        ctl_target = cl.make_target(
            controller_python or cl.host_python(), controller_arch or cl.host_arch(),
            controller_glibc or (cl.host_glibc() if controller_arch in (None, cl.host_arch()) else cl.DEFAULT_GLIBC),
        )
        excluded = tuple(sorted({cl.normalize(x) for x in _csv(exclude)}))
        sources = dict(index_url=index_url, extra_index_urls=tuple(extra_index_url or ()), find_links=tuple(find_links or ()))
        # envkit runs on every target (the smoke role), where its Python allows it
        ek_roots = cl.envkit_roots() if cl.envkit_supports(target.python) else []
        tplan = cl.ClosurePlan(roots=tuple(cl.target_roots(lk, _csv(only), list(excluded)) + ek_roots), target=target,
                               excluded=excluded, **sources)
        cplan = cl.ClosurePlan(roots=tuple(cl.envkit_roots()), target=ctl_target, **sources)
        console.progress(f"resolving the closure for Python {target.python} on {target.platform} ...")
        with tempfile.TemporaryDirectory(prefix="envkit-lock-") as tmp:
            tclos = cl.run_uv(tplan, Path(tmp) / "target")
            console.progress(f"resolving envkit's own closure for the controller (Python {ctl_target.python} on {ctl_target.platform}) ...")
            cclos = cl.run_uv(cplan, Path(tmp) / "controller")
        python = lk.python.model_copy(update={"closure": tclos, "controller": cclos})
        new = lk.model_copy(update={"python": python})
        out = output or lock
        write_lock(new, out)
        summary = {
            "lock": str(out),
            "target": {"platform": target.platform, "python": target.python, "wheels": len(tclos.packages),
                       "bytes": sum(p.size for p in tclos.packages), "excluded": list(excluded)},
            "controller": {"platform": ctl_target.platform, "python": ctl_target.python, "wheels": len(cclos.packages),
                           "bytes": sum(p.size for p in cclos.packages)},
        }
        if json_out:
            console.emit_json(summary)
            return
        t, c = summary["target"], summary["controller"]
        console.out.print(f"locked {t['wheels']} target wheels ({t['bytes'] / 1e6:.1f} MB, Python {t['python']}, {t['platform']}) "
                          f"and {c['wheels']} controller wheels ({c['bytes'] / 1e6:.1f} MB, Python {c['python']}, {c['platform']}) -> {out}",
                          markup=False)
        if excluded:
            console.out.print(f"excluded on purpose (recorded in the lock): {', '.join(excluded)}", markup=False)

    @bundle_app.command("build")
    def build_cmd(
        lock: Annotated[Path, Opt("--lock", "-l", help="The lock with its closure (`envkit lock`).")] = Path("envkit.lock"),
        output: Annotated[Path, Opt("-o", "--output", help="A folder, or an archive ending in .tar / .tar.gz.")] = Path("envkit-bundle.tar"),
        artifacts: Annotated[Optional[Path], Opt("--artifacts", help="Folder with the vendor .run / .zip packages.")] = None,
        trust_artifacts: Annotated[bool, Opt("--trust-artifacts", help="Accept vendor files the lock has no hash for; record the hash seen.")] = False,
        image: Annotated[bool, Opt("--image", help="Build the image through the engine at DOCKER_HOST and include its archive.")] = False,
        base: Annotated[Optional[str], Opt("--base", help="Base image of the image context (default: matrices/images.yaml).")] = None,
        image_archive: Annotated[Optional[Path], Opt("--image-archive", help="Include an image archive built elsewhere (docker/podman save).")] = None,
        controller_python: Annotated[Optional[str], Opt("--controller-python", help="Controller Python (default: the lock's controller closure).")] = None,
        controller_arch: Annotated[Optional[str], Opt("--controller-arch", help="Controller arch (default: the lock's controller closure).")] = None,
        controller_glibc: Annotated[Optional[str], Opt("--controller-glibc", help="Controller glibc when it is resolved here (default 2.28).")] = None,
        jobs: Annotated[int, Opt("--jobs", "-j", help="Parallel downloads.")] = 8,
        json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Download every wheel into the cache, check the vendor packages, and write the bundle."""
        import time

        from envkit import uptodate
        from envkit.download import WheelCache
        from envkit.errors import BadInput

        if image and image_archive is not None:
            raise BadInput("--image builds the image here; --image-archive includes one built elsewhere: pass one of them")
        if image_archive is not None and not image_archive.is_file():
            raise BadInput(f"--image-archive {image_archive}: no such file")
        if artifacts is not None and not artifacts.is_dir():
            raise BadInput(f"--artifacts {artifacts}: no such folder")
        t0 = time.perf_counter()
        cache = WheelCache()
        # an archive built before from the very same inputs, unchanged since, is kept: nothing to do (as make)
        fast_key = None
        if output.name.endswith(ARCHIVES) and not image and controller_python is None and controller_arch is None:
            options = {"trust": trust_artifacts, "base": base, "image_archive": _stat_of(image_archive)}
            try:
                fast_key = uptodate.inputs_key(lock.read_bytes(), out=output, artifacts=artifacts, options=options)
            except OSError:
                fast_key = None  # the full path below says what is wrong with the lock
            done = uptodate.up_to_date(cache.base / "bundles", output, fast_key) if fast_key else None
            if done is not None:
                fetched = done["wheels_fetched"]
                _report(done | {"bundle": str(output), "wheels_fetched": 0, "wheels_cached": done["wheels_cached"] + fetched,
                                "seconds": round(time.perf_counter() - t0, 3), "up_to_date": True}, json_out)
                return
        from envkit import bundle as bd
        from envkit.download import HashStamps, fetch_with_progress
        from envkit.lockfile import read_lock

        lk = read_lock(lock)
        lock_bytes = lock.read_bytes()
        stamps = HashStamps(cache.base)
        controller = _controller_closure(lk, controller_python, controller_arch, controller_glibc)
        name = output.name
        for suffix in (".tar.gz", ".tgz", ".tar"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]

        def plan_with(archive: Optional[Path]) -> "bd.BundlePlan":
            return bd.plan_bundle(lk, lock_bytes, root=name or "envkit-bundle", cache=cache, stamps=stamps, artifacts=artifacts,
                                  trust_artifacts=trust_artifacts, controller=controller, image_archive=archive, base=base)

        plan = plan_with(image_archive)
        status = fetch_with_progress(plan.fetch, cache, jobs=jobs)
        if image:
            plan = plan_with(_build_image(plan, cache.base))
        fetched = sum(1 for v in status.values() if v == "fetched")
        output.parent.mkdir(parents=True, exist_ok=True)
        archive_sha256 = None
        if bd.is_archive(output):
            archive_sha256 = bd.write_tar(plan, output)
        else:
            bd.write_dir(plan, output)
        entries = plan.all_entries()
        mdigest = next(e.sha256 for e in entries if e.path == bd.MANIFEST)
        result = {
            "bundle": str(output), "files": len(entries), "bytes": sum(e.size for e in entries),
            "wheels_fetched": fetched, "wheels_cached": len(status) - fetched,
            "manifest_sha256": mdigest, "lacks": plan.manifest.lacks,
            "trusted_on_first_use": [t.model_dump() for t in plan.trusted],
            "seconds": round(time.perf_counter() - t0, 3),
        }
        if archive_sha256 is not None:
            result["archive_sha256"] = archive_sha256
            if fast_key is not None:
                uptodate.remember_result(cache.base / "bundles", output, fast_key, result)
        _report(result, json_out)

    def _stat_of(path: Optional[Path]) -> Optional[list]:
        if path is None:
            return None
        st = path.stat()
        return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def _report(result: dict, json_out: bool) -> None:
        if json_out:
            console.emit_json(result)
            return
        out = console.out
        what = ("up to date (every input unchanged), kept" if result.get("up_to_date") else
                f"{result['wheels_fetched']} wheels downloaded, {result['wheels_cached']} from the cache")
        out.print(f"bundle -> {result['bundle']}: {result['files']} files, {result['bytes'] / 1e6:.1f} MB "
                  f"({what}) in {result['seconds']} s", markup=False)
        out.print(f"manifest digest: sha256:{result['manifest_sha256']}  (publish it; install.sh checks ENVKIT_BUNDLE_DIGEST)",
                  markup=False)
        for t in result["trusted_on_first_use"]:
            out.print(f"trusted on first use: {t['file']} sha256 {t['sha256']} (the lock has no hash for it)", markup=False)
        for item in result["lacks"]:
            out.print(f"lacks: {item}", markup=False)

    def _controller_closure(lk, python: Optional[str], arch: Optional[str], glibc: Optional[str]):  # noqa: ANN001, ANN202
        """The lock's controller closure, or, for another controller Python/arch, one resolved now (recorded in
        the manifest: such a bundle is reproducible only as long as the index serves the same files)."""
        import tempfile

        from envkit import closure as cl

        have = lk.python.controller
        if have is None or (python in (None, have.target.python) and arch in (None, have.target.arch)):
            return have  # plan_bundle reports a lock without closures
        target = cl.make_target(python or have.target.python, arch or have.target.arch,
                                glibc or (have.target.glibc if arch in (None, have.target.arch) else cl.DEFAULT_GLIBC))
        plan = cl.ClosurePlan(roots=tuple(cl.envkit_roots()), target=target, index_url=have.index_url,
                              extra_index_urls=tuple(have.extra_index_urls), find_links=tuple(have.find_links))
        console.progress(f"resolving envkit's closure for the controller (Python {target.python} on {target.platform}); "
                         f"the lock has one for Python {have.target.python} on {have.target.platform} ...")
        with tempfile.TemporaryDirectory(prefix="envkit-ctl-") as tmp:
            return cl.run_uv(plan, Path(tmp))

    def _build_image(plan, cache_base: Path) -> Path:  # noqa: ANN001
        """Build the bundle's image context through the engine and save it, once per context (cached by its key)."""
        import tempfile

        from envkit.engine import Engine
        from envkit.errors import BadInput

        if plan.image is None:
            why = next((x for x in plan.manifest.lacks if x.startswith("the image build context")), "no image context")
            raise BadInput(f"--image: the lock cannot make the image: {why}",
                           hint="Lock the whole stack (`envkit lock` without --only) for the image's Python and arch.")
        have = {e.path for e in plan.entries}
        missing = sorted({src for _, _, src in plan.image.links if src not in have})
        if missing:
            raise BadInput("--image: the bundle lacks files the image needs: " + ", ".join(missing),
                           hint="Pass --artifacts DIR with the vendor packages.")
        dest = Path(cache_base) / "images" / plan.image.key / "image.tar"
        if dest.is_file():
            console.progress(f"image archive of this context from the cache: {dest}")
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        engine = Engine()
        info = engine.version()
        console.progress(f"engine {info['version']} (API {info['api']}) at {info['url']}")
        with tempfile.TemporaryDirectory(prefix=".ctx-", dir=dest.parent) as tmp:  # same file system: hard links
            ctx = plan.assemble_image_context(Path(tmp) / "context")
            console.progress(f"building {plan.image.tag} from the bundle's context")
            engine.build(ctx, plan.image.tag, on_line=lambda line: console.progress("  " + line) if line.strip() else None)
        console.progress(f"saving {plan.image.tag} -> {dest}")
        engine.save(plan.image.tag, dest)
        return dest

    @bundle_app.command("verify")
    def verify_cmd(
        bundle: Annotated[Path, Arg(help="A bundle folder or archive (.tar, .tar.gz).")],
        expect_digest: Annotated[Optional[str], Opt("--expect-digest", help="sha256 of manifest.json as published.")] = None,
        json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Check every file against the manifest; refuse unsafe archives without extracting anything."""
        from envkit import bundle as bd

        rep = bd.verify(bundle, expect_digest)
        if json_out:
            console.emit_json(rep.to_dict())
        else:
            out = console.out
            if rep.ok:
                out.print(f"bundle {bundle}: OK, {rep.files} files, {rep.bytes / 1e6:.1f} MB match the manifest "
                          f"(sha256:{rep.digest})", markup=False)
            else:
                out.print(f"bundle {bundle}: FAILED", markup=False)
                for p in rep.missing:
                    out.print(f"  missing:  {p}", markup=False)
                for m in rep.modified:
                    out.print(f"  modified: {m['path']}: expected sha256 {m['expected_sha256']} ({m['expected_size']} bytes), "
                              f"got {m['actual_sha256']} ({m['actual_size']} bytes)", markup=False)
                for p in rep.extra:
                    out.print(f"  extra:    {p} (not in the manifest)", markup=False)
        if not rep.ok:
            raise typer.Exit(EXIT_FAILED)

"""`envkit doctor`: probe this host (or a mounted image root) and report the observed stack."""

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.errors import BadInput, CannotRun


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        lock: Annotated[
            Optional[Path], typer.Option("--lock", help="Report drift from this lock file (e.g. envkit.lock).")
        ] = None,
        root: Annotated[
            Path,
            typer.Option(
                "--root", help="Probe a mounted root file system (an exported image, a fixture) instead of /."
            ),
        ] = Path("/"),
        python: Annotated[
            Optional[str],
            typer.Option(
                "--python",
                help="Interpreter whose packages to read (default: this one). With --root, a path inside the root.",
            ),
        ] = None,
        env_file: Annotated[
            Optional[Path],
            typer.Option(
                "--env-file",
                help="KEY=VALUE environment of the target (default: this process; with --root, <root>/etc/environment).",
            ),
        ] = None,
        timeout: Annotated[
            float, typer.Option("--timeout", min=1.0, help="Seconds allowed to each npu-smi or Python probe.")
        ] = 20.0,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
        exec_root_tools: Annotated[
            bool,
            typer.Option(
                "--exec-root-tools",
                help="With --root, run the root's own npu-smi (empty environment, --timeout) instead of reading "
                "its recorded output. Only for a root you trust: by default nothing in a root is executed.",
            ),
        ] = False,
    ) -> None:
        """Probe a host or an image: driver, firmware, CANN, npu-smi, Python packages, environment.

        Exit 0 when every check is ok (warnings allowed), 1 when a check failed, 2 when it cannot run.
        A --root is read as data: its files are read (regular files only, capped), nothing in it is run.
        """
        from envkit.doctor import run_doctor
        from envkit.doctor.probe import Target
        from envkit.doctor.report import render_text

        if not root.is_dir():
            raise CannotRun(
                f"--root {root}: not a directory", hint="Mount or export the image first, e.g. `podman export`."
            )
        host = root.resolve() == Path("/")
        if exec_root_tools and host:
            raise BadInput("--exec-root-tools needs --root: on this host, npu-smi is run anyway")
        if python is not None:
            if host:
                if not (os.path.isfile(python) and os.access(python, os.X_OK)):
                    raise CannotRun(
                        f"--python {python}: not an executable file", hint="Give the interpreter's full path."
                    )
            elif not Target(root).exists(python):
                raise CannotRun(
                    f"--python {python}: no such file in {root}",
                    hint="With --root, --python names the interpreter inside the root, e.g. /usr/local/python3.11.13/bin/python3.",
                )
        if env_file is not None and not env_file.is_file():
            raise BadInput(f"--env-file {env_file}: no such file")
        lock_stack = None
        if lock is not None:
            from envkit.lockfile import read_lock

            if not lock.is_file():
                raise BadInput(f"--lock {lock}: no such file", hint="Create one with `envkit resolve`.")
            lock_stack = read_lock(lock).stack.model_dump()
        if not json_out:
            console.progress(f"probing {root} ...")
        report = run_doctor(
            str(root),
            python=python,
            env_file=str(env_file) if env_file is not None else None,
            lock_stack=lock_stack,
            lock_path=str(lock) if lock is not None else None,
            timeout=timeout,
            exec_root_tools=exec_root_tools,
        )
        if json_out:
            console.emit_json(report.model_dump(mode="json"))
        else:
            console.out.print(render_text(report), markup=False)
        raise typer.Exit(report.exit_code)

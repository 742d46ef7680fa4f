"""`envkit doctor`: probe this host (or a mounted image root) and report the observed stack."""

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt
from envkit.errors import BadInput, CannotRun


def register(app: typer.Typer) -> None:
    @app.command(
        "doctor",
        epilog=example(
            "envkit doctor --lock envkit.lock", "envkit doctor --root /mnt/image --json", "envkit doctor --net -i hosts.ini"
        ),
    )
    def doctor(
        ctx: typer.Context,
        lock: Annotated[
            Optional[Path], typer.Option("--lock", help="Report drift from this lock file (e.g. envkit.lock).")
        ] = None,
        root: Annotated[
            Path,
            typer.Option("--root", help="Probe a mounted root file system (an exported image, a fixture) instead of /."),
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
        json_out: JsonOpt = False,
        exec_root_tools: Annotated[
            bool,
            typer.Option(
                "--exec-root-tools",
                help="With --root, run the root's own npu-smi (and hccn_tool with --net; empty environment, --timeout) instead of reading "
                "its recorded output. Only for a root you trust: by default nothing in a root is executed.",
            ),
        ] = False,
        net: Annotated[
            bool,
            typer.Option(
                "--net",
                help="Also check the NPU network with hccn_tool (link, net_health, tls, ip vs /etc/hccn.conf, ping to "
                "--peers); with --root, its recorded output in <root>/var/log/envkit/hccn_tool/<dev>-<what>.txt.",
            ),
        ] = False,
        peers: Annotated[
            Optional[str], typer.Option("--peers", help="With --net: peer device IPs to ping from every device, comma-separated.")
        ] = None,
        inventory: Annotated[
            Optional[Path],
            typer.Option("--inventory", "-i", help="With --net: ping, from device N, address_N of each host's envkit_hccn_conf."),
        ] = None,
        net_log: Annotated[
            Optional[Path],
            typer.Option("--net-log", help="With --net: a log (CANN plog, training output) whose HCCL EI codes to explain."),
        ] = None,
    ) -> None:
        """Probe a host or an image: driver, firmware, CANN, npu-smi, Python packages, environment.

        Exit 0 when every check is ok (warnings allowed), 1 when a check failed, 2 when it cannot run.
        A --root is read as data: its files are read (regular files only, capped), nothing in it is run.
        """
        from envkit.jobs.doctor import run_doctor
        from envkit.jobs.doctor.observe import Target
        from envkit.jobs.doctor.report import render_text

        if not root.is_dir():
            raise CannotRun(f"--root {root}: not a directory", hint="Mount or export the image first, e.g. `podman export`.")
        host = root.resolve() == Path("/")
        if exec_root_tools and host:
            raise BadInput("--exec-root-tools needs --root: on this host, npu-smi is run anyway")
        if python is not None:
            if host:
                if not (os.path.isfile(python) and os.access(python, os.X_OK)):
                    raise CannotRun(f"--python {python}: not an executable file", hint="Give the interpreter's full path.")
            elif not Target(root).exists(python):
                raise CannotRun(
                    f"--python {python}: no such file in {root}",
                    hint="With --root, --python names the interpreter inside the root, e.g. /usr/local/python3.11.13/bin/python3.",
                )
        peer_list = None
        if (peers or inventory or net_log) and not net:
            raise BadInput("--peers, --inventory and --net-log go with --net")
        if peers and inventory:
            raise BadInput("give --peers or --inventory, not both")
        if net and (peers or inventory):
            from envkit.fleet.hccn import inventory_peers, parse_peers

            peer_list = parse_peers(peers) if peers else inventory_peers(inventory)
        log_text = None
        if net_log is not None:
            from envkit.io.yamlio import read_text

            log_text = read_text(net_log)
        if env_file is not None and not env_file.is_file():
            raise BadInput(f"--env-file {env_file}: no such file")
        lock_stack = None
        if lock is not None:
            from envkit.lock.file import read_lock

            if not lock.is_file():
                raise BadInput(f"--lock {lock}: no such file", hint="Create one with `envkit resolve`.")
            from envkit.cli import lock_check

            lock_stack = read_lock(lock, lock_check(ctx)).stack.model_dump()
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
            net=net,
            peers=peer_list,
            net_log=log_text,
        )
        if json_out:
            console.emit_json(report.to_json())
        else:
            console.out.print(render_text(report), markup=False)
        raise typer.Exit(report.exit_code)

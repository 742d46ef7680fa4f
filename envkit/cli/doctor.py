"""`envkit doctor`: probe this host (or a mounted image root) and report the observed stack."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt


def doctor(
    ctx: typer.Context,
    lock: Annotated[Optional[Path], typer.Option("--lock", help="Report drift from this lock file (e.g. envkit.lock).")] = None,
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
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds allowed to each npu-smi or Python probe.")] = 20.0,
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
    from envkit.cli import lock_check
    from envkit.jobs.doctor import DoctorRequest
    from envkit.jobs.doctor import doctor as run_job
    from envkit.jobs.doctor.report import render_text

    request = DoctorRequest(
        root=root,
        python=python,
        env_file=env_file,
        lock=lock,
        lock_check=lock_check(ctx) if lock is not None else None,
        timeout=timeout,
        exec_root_tools=exec_root_tools,
        net=net,
        peers=peers,
        inventory=inventory,
        net_log=net_log,
    )
    report = run_job(request, progress=(lambda _m: None) if json_out else console.progress)
    if json_out:
        console.emit_json(report.to_json())
    else:
        console.out.print(render_text(report), markup=False)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command(
        "doctor",
        epilog=example(
            "envkit doctor --lock envkit.lock", "envkit doctor --root /mnt/image --json", "envkit doctor --net -i hosts.ini"
        ),
    )(doctor)

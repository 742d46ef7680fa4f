"""`envkit launch`: render a multi-host launch set (rank table, Accelerate, torchrun, HCCL env); explain EI codes."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import ForceOpt, JsonOpt


def render(
    ctx: typer.Context,
    inventory: Annotated[
        Path, typer.Option("--inventory", "-i", help="Ansible INI inventory; each host sets envkit_hccn_conf=PATH.")
    ],
    lock: Annotated[Path, typer.Option("--lock", help="The lock whose stack.chip picks the rank-table version.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the launch set into (nothing is written elsewhere).")],
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write rank_table.json (+ schema) and per host accelerate_config.yaml, hccl_env.sh and torchrun.sh.

    Exit 0 when written, 2 when an input breaks a rule (the message names the rule and its source).
    """
    from envkit.cli import lock_check
    from envkit.jobs.launch.render import format_result, render_launch

    result = render_launch(inventory, lock, out, force=force, lock_check=lock_check(ctx))
    if json_out:
        console.emit_json(result.to_dict())
    else:
        for line in format_result(result):
            console.out.print(line, markup=False)


def codes(
    log: Annotated[Path, typer.Argument(help="A log file (CANN plog, training stdout) to scan for HCCL EI codes.")],
    json_out: JsonOpt = False,
) -> None:
    """Find HCCL error codes (EI0001 ... EI0019) in a log and print each one's cause, fix and source.

    Exit 0 when none is found, 1 when some are.
    """
    from envkit.jobs.launch.codes import format_codes, log_codes

    findings = log_codes(log)
    if json_out:
        console.emit_json({"codes": [f.to_dict() for f in findings]})
    else:
        for line in format_codes(findings):
            console.out.print(line, markup=False)
    if findings:
        raise typer.Exit(1)


def profile(
    inventory: Annotated[
        Path, typer.Option("--inventory", "-i", help="Ansible INI inventory; the first host is the rendezvous (MASTER_ADDR).")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for profile.json (merged), hosts/<host>/profile.json and the run's logs.")
    ],
    nproc: Annotated[int, typer.Option("--nproc", min=1, help="Processes (ranks) per host; WORLD_SIZE = hosts x nproc.")] = 1,
    device: Annotated[str, typer.Option("--device", help="cpu (gloo), cuda (nccl) or npu (hccl).")] = "cpu",
    max_size: Annotated[str, typer.Option("--max-size", help="The largest size (8K to this, x2 steps).")] = "1MiB",
    port: Annotated[int, typer.Option("--port", help="The rendezvous port on the first host (MASTER_PORT).")] = 29511,
    timeout: Annotated[int, typer.Option("--timeout", min=10, help="Seconds a rank waits for the others.")] = 600,
    envkit: Annotated[str, typer.Option("--envkit", help="The envkit executable on the hosts.")] = "/opt/envkit/venv/bin/envkit",
    extra_vars: Annotated[
        list[str], typer.Option("--extra-vars", "-e", help="Passed to ansible-playbook (e.g. envkit_collectives_ifname=eth0).")
    ] = [],  # noqa: B006
    json_out: JsonOpt = False,
) -> None:
    """Run the collective profile on every host of the inventory at once (Ansible), one rendezvous; merge the hosts' profiles.

    Exit 0 when every result of every rank is correct, 1 when one is not, 2 when it cannot run.
    """
    from envkit.jobs.launch.profile import format_fleet_profile, run_fleet_profile

    res = run_fleet_profile(
        inventory,
        out,
        nproc=nproc,
        device=device,
        max_size=max_size,
        port=port,
        timeout_s=timeout,
        envkit=envkit,
        extra_vars=tuple(extra_vars),
    )
    if json_out:
        console.emit_json(res)
    else:
        for line in format_fleet_profile(res):
            console.out.print(line, markup=False)
    if not res["profile"]["ok"]:
        raise typer.Exit(1)


def node(
    master: Annotated[str, typer.Option("--master", help="The rendezvous host (MASTER_ADDR).")],
    nnodes: Annotated[int, typer.Option("--nnodes", help="Hosts in the run.")],
    node_rank: Annotated[int, typer.Option("--node-rank", help="This host's index (0 = the master).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for this host's profile.json.")],
    nproc: Annotated[int, typer.Option("--nproc", help="Ranks on this host.")] = 1,
    port: Annotated[int, typer.Option("--port", help="The rendezvous port (MASTER_PORT).")] = 29511,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or npu.")] = "cpu",
    max_size: Annotated[str, typer.Option("--max-size", help="The largest size.")] = "1MiB",
    timeout: Annotated[int, typer.Option("--timeout", min=10, help="Seconds a rank waits for the others.")] = 600,
    ifname: Annotated[
        Optional[str], typer.Option("--ifname", help="The interface gloo/nccl/hccl use (GLOO_SOCKET_IFNAME ...).")
    ] = None,
) -> None:
    """One host's ranks of `envkit launch profile` (run there by playbooks/collectives.yml). Exit 0 when all correct."""
    from envkit.jobs.launch.profile import node_profile

    prof = node_profile(
        master=master,
        port=port,
        nnodes=nnodes,
        node_rank=node_rank,
        nproc=nproc,
        device=device,
        max_size=max_size,
        out=out,
        timeout_s=timeout,
        ifname=ifname,
    )
    console.progress(f"node {node_rank}/{nnodes}: {'ok' if prof['ok'] else 'FAILED'}; wrote {out}/profile.json")
    if not prof["ok"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="Multi-host launch sets: rank tables, Accelerate, torchrun and HCCL environment.",
        no_args_is_help=True,
        epilog=example("envkit launch render -i hosts.ini --lock envkit.lock -o launch/", "envkit launch codes train.log"),
    )
    group.command("render", epilog=example("envkit launch render -i hosts.ini --lock envkit.lock -o launch/"))(render)
    group.command("codes", epilog=example("envkit launch codes train.log --json"))(codes)
    group.command("profile", epilog=example("envkit launch profile -i hosts.ini --nproc 8 --device npu -o prof/"))(profile)
    group.command(
        "node", epilog=example("envkit launch node --master 10.0.0.10 --nnodes 2 --node-rank 1 --nproc 8 --device npu -o prof/")
    )(node)
    app.add_typer(group, name="launch")

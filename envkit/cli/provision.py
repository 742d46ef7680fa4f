"""`envkit provision`: parse, call `envkit.jobs.provision.run`, print its progress and per-host summary."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt


def _progress(ev: dict) -> None:
    """One line per play, per changed/failed/unreachable task, and per planned change (--check)."""
    kind = ev.get("event")
    if kind == "play" and ev.get("hosts") is not None:
        console.progress(f"play: {len(ev['hosts'])} host(s)" + (" [check]" if ev.get("check") else ""))
    elif kind == "result":
        status, host, task = ev.get("status"), ev.get("host"), ev.get("task", "")
        item = f" [{ev['item']}]" if ev.get("item") not in (None, "") else ""
        if status in ("changed", "failed", "unreachable"):
            why = str(ev.get("msg") or ev.get("stderr") or "").strip()
            detail = ": " + why.splitlines()[0][:200] if status != "changed" and why else ""
            console.progress(f"{host:<16} {status:<11} {task}{item}{detail}")
        elif task.endswith("| Report plan") and ev.get("msg"):
            for line in ev["msg"] if isinstance(ev["msg"], list) else [ev["msg"]]:
                console.progress(f"{host:<16} {'plan':<11} {line}")


def provision(
    ctx: typer.Context,
    inventory: Annotated[str, typer.Option("-i", "--inventory", help="Ansible inventory (file or host list).")],
    lock: Annotated[Path, typer.Option("--lock", help="The lock to provision (envkit.lock).")] = Path("envkit.lock"),
    bundle: Annotated[
        Optional[Path], typer.Option("--bundle", help="Bundle folder: vendor/ (the lock's .run/.zip files) and wheels/.")
    ] = None,
    artifacts: Annotated[
        Optional[Path], typer.Option("--artifacts", help="Folder of the vendor .run/.zip files (instead of DIR/vendor).")
    ] = None,
    wheels: Annotated[
        Optional[Path],
        typer.Option("--wheels", help="Folder of wheels with a hashed requirements.txt (instead of DIR/wheels)."),
    ] = None,
    bundle_url: Annotated[
        Optional[list[str]],
        typer.Option(
            "--bundle-url",
            help="Pull mode: the hosts fetch the bundle's files from this mirror (the root URL of the --bundle folder, "
            "e.g. `envkit bundle serve`); GROUP=URL: for the hosts of one inventory group. Repeat it: the hosts try "
            "their group's mirrors, then the others, in order.",
        ),
    ] = None,
    fan_out: Annotated[
        bool,
        typer.Option(
            "--fan-out",
            help="With --bundle-url: the first host of each inventory group fetches the bundle, verifies it and serves "
            "it to the rest of its group, which try it first (then the mirrors).",
        ),
    ] = False,
    check: Annotated[bool, typer.Option("--check", help="Print the plan per host; change nothing.")] = False,
    limit: Annotated[Optional[str], typer.Option("--limit", help="Only these hosts (an Ansible pattern).")] = None,
    serial: Annotated[
        Optional[int], typer.Option("--serial", min=1, help="Roll through the fleet N hosts at a time; stop when a batch fails.")
    ] = None,
    forks: Annotated[Optional[int], typer.Option("--forks", min=1, help="Parallel connections (Ansible forks).")] = None,
    extra_vars: Annotated[
        Optional[list[str]],
        typer.Option("-e", "--extra-vars", help="Extra Ansible variables (KEY=VALUE or @file), e.g. role settings."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Work folder: vars.yml, events.jsonl, ansible.log and reports/<host>/.")
    ] = Path("envkit-provision"),
    json_out: JsonOpt = False,
) -> None:
    """Provision Ascend hosts from a lock: driver, firmware, CANN, Python stack, smoke.

    Exit 0 when every host converged, 1 when a host failed or was unreachable, 2 on bad input.
    """
    from envkit.cli import lock_check
    from envkit.errors import CheckFailed
    from envkit.jobs.provision import ProvisionRequest, format_fan_out, format_plan, format_table, format_warnings, run

    req = ProvisionRequest(
        inventory=inventory,
        lock=lock,
        out=out,
        bundle=bundle,
        artifacts=artifacts,
        wheels=wheels,
        check=check,
        limit=limit,
        serial=serial,
        forks=forks,
        extra_vars=tuple(extra_vars or ()),
        bundle_urls=tuple(bundle_url or ()),
        fan_out=fan_out,
        lock_check=lock_check(ctx),
    )
    if not json_out:
        console.progress(f"{'planning' if check else 'provisioning'} from {lock} (vars: {out.resolve() / 'vars.yml'})")
    result = run(req, on_event=None if json_out else _progress)
    summary = result.summary
    if json_out:
        data = summary.to_dict()
        data.update({"vars_file": str(result.vars_file), "reports": str(result.reports), "ansible_returncode": result.returncode})
        if result.fan_out is not None:
            data["fan_out"] = result.fan_out.to_dict()
        console.emit_json(data)
        raise typer.Exit(summary.exit_code)
    if result.fan_out is not None:
        console.out.print("\n".join(format_fan_out(result.fan_out)), markup=False)
    if check:
        console.out.print("\n".join(format_plan(summary)), markup=False)
        console.out.print("", markup=False)
    console.out.print("\n".join(format_table(summary)), markup=False)
    warnings = format_warnings(summary)
    if warnings:
        console.out.print("\n" + "\n".join(warnings), markup=False)
    bad = summary.bad_hosts
    if bad or not summary.complete:
        names = ", ".join(f"{h.host} ({h.status})" for h in bad) or "the run stopped early"
        events, log = result.logs
        raise CheckFailed(
            f"{len(bad)} of {len(summary.hosts)} host(s) did not converge: {names}",
            hint=f"Fix the cause and rerun the same command: converged hosts report no change. Logs: {log}, {events}",
        )


def register(app: typer.Typer) -> None:
    app.command(
        "provision",
        epilog=example(
            "envkit provision -i hosts.ini --lock envkit.lock --bundle bundle/ --check",
            "envkit provision -i hosts.ini --lock envkit.lock --bundle bundle/ --serial 2",
            "envkit provision -i hosts.ini --lock envkit.lock --bundle bundle/ --bundle-url rack1=http://10.0.1.5:8080 "
            "--bundle-url http://10.0.0.5:8080",
            "envkit provision -i hosts.ini --lock envkit.lock --bundle bundle/ --bundle-url http://10.0.0.5:8080 --fan-out",
        ),
    )(provision)

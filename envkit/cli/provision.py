"""`envkit provision`: render the vars from the lock, run the site playbook, summarize per host."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console


def register(app: typer.Typer) -> None:
    @app.command("provision")
    def provision(
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
        check: Annotated[bool, typer.Option("--check", help="Print the plan per host; change nothing.")] = False,
        limit: Annotated[Optional[str], typer.Option("--limit", help="Only these hosts (an Ansible pattern).")] = None,
        serial: Annotated[
            Optional[int], typer.Option("--serial", min=1, help="Roll through the fleet N hosts at a time; stop when a batch fails.")
        ] = None,
        forks: Annotated[Optional[int], typer.Option("--forks", min=1, help="Parallel connections (Ansible forks).")] = None,
        extra_vars: Annotated[
            Optional[list[str]], typer.Option("-e", "--extra-vars", help="Extra Ansible variables (KEY=VALUE or @file), e.g. role settings.")
        ] = None,
        out: Annotated[
            Path, typer.Option("--out", help="Work folder: vars.yml, events.jsonl, ansible.log and reports/<host>/.")
        ] = Path("envkit-provision"),
        json_out: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON document.")] = False,
    ) -> None:
        """Provision Ascend hosts from a lock: driver, firmware, CANN, Python stack, smoke.

        Exit 0 when every host converged, 1 when a host failed or was unreachable, 2 on bad input.
        """
        from envkit.ansible_runner import (
            PlaybookRun,
            ansible_playbook_path,
            playbook_command,
            playbook_env,
            run_playbook,
        )
        from envkit.errors import BadInput, CannotRun, CheckFailed
        from envkit.fsutil import atomic_write_text
        from envkit.lockfile import read_lock
        from envkit.provision import (
            dump_vars,
            format_plan,
            format_table,
            locate_bundle,
            pack_wheels,
            render_vars,
            summarize,
            write_reports,
        )
        from envkit.resources import data_dir

        if not lock.is_file():
            raise BadInput(f"--lock {lock}: no such file", hint="Create one with `envkit resolve`.")
        inv_path = Path(inventory)
        if "," not in inventory and not inv_path.exists():
            raise BadInput(f"-i {inventory}: no such inventory", hint="Give an inventory file or a comma-separated host list.")
        the_lock = read_lock(lock)
        paths = locate_bundle(bundle, artifacts, wheels)
        out = out.resolve()
        reports = out / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        archive = pack_wheels(paths.wheels, out, paths.requirements) if paths.wheels else None
        variables = render_vars(the_lock, lock_path=lock.resolve(), bundle=paths, report_dir=reports, wheels_archive=archive)
        vars_file = out / "vars.yml"
        atomic_write_text(vars_file, dump_vars(variables, f"envkit provision --lock {lock}"))
        playbooks = data_dir("playbooks")
        run = PlaybookRun(
            playbook=playbooks / "site.yml",
            inventory=str(inv_path.resolve()) if inv_path.exists() else inventory,
            vars_file=vars_file,
            check=check,
            limit=limit,
            forks=forks,
            serial=serial,
            extra_vars=tuple(extra_vars or ()),
        )
        argv = playbook_command(run, ansible_playbook_path())
        env = playbook_env(playbooks)
        if not json_out:
            console.progress(f"{'planning' if check else 'provisioning'} from {lock} (vars: {vars_file})")

        def on_event(ev: dict) -> None:
            if json_out:
                return
            kind = ev.get("event")
            if kind == "play" and ev.get("hosts") is not None:
                console.progress(f"play: {len(ev['hosts'])} host(s)" + (" [check]" if ev.get("check") else ""))
            elif kind == "result":
                status, host, task = ev.get("status"), ev.get("host"), ev.get("task", "")
                item = f" [{ev['item']}]" if ev.get("item") not in (None, "") else ""
                if status in ("changed", "failed", "unreachable"):
                    detail = ""
                    if status != "changed":
                        detail = ": " + str(ev.get("msg") or ev.get("stderr") or "").strip().splitlines()[0][:200] if (ev.get("msg") or ev.get("stderr")) else ""
                    console.progress(f"{host:<16} {status:<11} {task}{item}{detail}")
                elif task.endswith("| Report plan") and ev.get("msg"):
                    for line in ev["msg"] if isinstance(ev["msg"], list) else [ev["msg"]]:
                        console.progress(f"{host:<16} {'plan':<11} {line}")

        result = run_playbook(argv, env, on_event=on_event, events_log=out / "events.jsonl", stderr_log=out / "ansible.log")
        summary = summarize(result.events)
        write_reports(summary, reports)
        if not summary.complete and not summary.hosts:
            tail = "\n".join(result.stderr.strip().splitlines()[-15:])
            raise CannotRun(
                f"ansible-playbook exited {result.returncode} before running any host",
                hint=(tail or "see " + str(out / "ansible.log")),
            )
        if json_out:
            data = summary.to_dict()
            data.update({"vars_file": str(vars_file), "reports": str(reports), "ansible_returncode": result.returncode})
            console.emit_json(data)
            raise typer.Exit(summary.exit_code)
        if check:
            console.out.print("\n".join(format_plan(summary)), markup=False)
            console.out.print("", markup=False)
        console.out.print("\n".join(format_table(summary)), markup=False)
        bad = summary.bad_hosts
        if bad or not summary.complete:
            names = ", ".join(f"{h.host} ({h.status})" for h in bad) or "the run stopped early"
            raise CheckFailed(
                f"{len(bad)} of {len(summary.hosts)} host(s) did not converge: {names}",
                hint=f"Fix the cause and rerun the same command: converged hosts report no change. Logs: {out}/ansible.log, {out}/events.jsonl",
            )

"""`envkit launch`: render a multi-host launch set (rank table, Accelerate, torchrun, HCCL env); explain EI codes."""

from pathlib import Path
from typing import Annotated

import typer

from envkit import console


def render(
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Ansible INI inventory; each host sets envkit_hccn_conf=PATH.")],
    lock: Annotated[Path, typer.Option("--lock", help="The lock whose stack.chip picks the rank-table version.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the launch set into (nothing is written elsewhere).")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing folder that is not an earlier envkit launch set.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as one JSON document.")] = False,
) -> None:
    """Write rank_table.json (+ schema) and per host accelerate_config.yaml, hccl_env.sh and torchrun.sh.

    Exit 0 when written, 2 when an input breaks a rule (the message names the rule and its source).
    """
    from envkit.launch.render import format_result, render_launch

    result = render_launch(inventory, lock, out, force=force)
    if json_out:
        console.emit_json(result.to_dict())
    else:
        for line in format_result(result):
            console.out.print(line, markup=False)


def codes(
    log: Annotated[Path, typer.Argument(help="A log file (CANN plog, training stdout) to scan for HCCL EI codes.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the findings as one JSON document.")] = False,
) -> None:
    """Find HCCL error codes (EI0001 ... EI0019) in a log and print each one's cause, fix and source.

    Exit 0 when none is found, 1 when some are.
    """
    from envkit.launch.eicodes import find_codes, format_findings
    from envkit.yamlio import read_text

    findings = find_codes(read_text(log))
    if json_out:
        console.emit_json({"codes": [f.to_dict() for f in findings]})
    else:
        for line in format_findings(findings) or ["no HCCL EI code found"]:
            console.out.print(line, markup=False)
    if findings:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Multi-host launch sets: rank tables, Accelerate, torchrun and HCCL environment.", no_args_is_help=True)
    group.command("render")(render)
    group.command("codes")(codes)
    app.add_typer(group, name="launch")

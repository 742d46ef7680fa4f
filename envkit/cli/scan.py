"""`envkit scan`: the CUDA-specific code and the dependencies of a project, read statically, with the Ascend way."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt


def scan(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The project's folder (or one .py / dependency file). Nothing in it is run.")],
    lock: Annotated[
        Optional[Path],
        typer.Option("--lock", help="Check the dependencies against this lock's pins, Python and arch (e.g. envkit.lock)."),
    ] = None,
    sarif: Annotated[
        Optional[Path], typer.Option("--sarif", help="Also write the findings as SARIF 2.1.0 to this file (code scanning).")
    ] = None,
    quiet_info: Annotated[bool, typer.Option("--no-info", help="Leave info findings out of the text report.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Find what a CUDA project needs to run on Ascend: CUDA calls and silent CPU/dtype fallbacks in its Python code,
    dependencies with no Ascend build or with an Ascend route, conflicts with a lock.

    Every finding has a rule, a severity (block: fails or silently computes elsewhere on an NPU; warn: works through
    transfer_to_npu or a setting but should change; info), the Ascend way and its source (matrices/migration.yaml).
    Exit 0 when nothing blocks, 1 when something blocks, 2 on bad input.
    """
    from envkit.cli import lock_check
    from envkit.errors import EXIT_FAILED
    from envkit.jobs.scan import ScanRequest
    from envkit.jobs.scan import scan as run_scan
    from envkit.jobs.scan.report import format_text, write_sarif

    result = run_scan(ScanRequest(path=path, lock=lock, lock_check=lock_check(ctx) if lock is not None else None))
    if sarif is not None:
        write_sarif(result, sarif)
    if json_out:
        console.emit_json(result.to_dict())
    else:
        for line in format_text(result, show_info=not quiet_info):
            console.out.print(line, markup=False)
        if sarif is not None:
            console.progress(f"wrote {sarif}")
    if result.blocked:
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command(
        "scan",
        epilog=example(
            "envkit scan .",
            "envkit scan ~/src/my-trainer --lock envkit.lock --json",
            "envkit scan . --sarif scan.sarif",
        ),
    )(scan)

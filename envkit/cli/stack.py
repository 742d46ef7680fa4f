"""`envkit resolve` and `envkit validate`."""

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.errors import EXIT_FAILED

Opt = typer.Option


def _pins_cli(**opts: Optional[str]) -> tuple[dict[str, str], dict[str, str]]:
    values = {k: v for k, v in opts.items() if v is not None}
    where = {k: f"--{k.replace('_', '-')}" for k in values}
    return values, where


def render_report(report, title: str) -> None:  # noqa: ANN001 - ValidationReport
    """Human form of a ValidationReport."""
    out = console.out
    if report.valid:
        out.print(f"{title}: valid", markup=False)
        if report.stack:
            render_stack(report.stack)
        for hint in report.hints:
            out.print(f"hint: {hint}", markup=False)
        return
    n = len(report.conflicts)
    out.print(f"{title}: invalid ({n} conflict{'s' if n != 1 else ''})", markup=False)
    for i, c in enumerate(report.conflicts, 1):
        out.print(f"\nconflict {i}: {c.summary}", markup=False)
        for j, f in enumerate(c.chain, 1):
            label = f"[{f.kind}]"
            out.print(f"  {j:>2}. {label:<11}{f.fact}", markup=False)
            if f.kind == "derived" and f.rule not in ("derived", "search") and f.source != "derived":
                conf = f" ({f.confidence})" if f.confidence else ""
                out.print(f"      {'':<11}rule {f.rule}{conf} · source: {f.source}", markup=False)
            elif f.kind in ("declared", "observed"):
                out.print(f"      {'':<11}at {f.source}", markup=False)
    if report.suggestions:
        out.print("\nnearest valid stacks:", markup=False)
        for s in report.suggestions:
            change = ", ".join(f"{k} {v['from']} -> {v['to']}" for k, v in s.change.items())
            tag = "vendor-validated" if s.validated else "compatible"
            full = " ".join(f"{k}={v}" for k, v in s.stack.items())
            out.print(f"  - change {change} ({tag}): {full}", markup=False)
    else:
        out.print("\nno valid stack is one or two changes away; relax more pins", markup=False)


def render_stack(stack: dict[str, str], provenance: dict | None = None) -> None:  # noqa: ANN001
    from rich.table import Table

    from envkit.models.stack import STACK_KEYS

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("key")
    table.add_column("version")
    if provenance:
        table.add_column("from")
    for key in STACK_KEYS:
        if key not in stack:
            continue
        row = [key, str(stack[key])]
        if provenance:
            p = provenance[key]
            row.append(p.origin if p.origin != "derived" else f"derived: {p.rule}")
        table.add_row(*row)
    console.out.print(table)


def register(app: typer.Typer) -> None:
    @app.command("resolve")
    def resolve_cmd(
        file: Annotated[Optional[Path], Opt("-f", "--file", help="Stack file (YAML) with the keys to pin.")] = None,
        chip: Annotated[Optional[str], Opt(help="Chip: 910b, 910, a3, 310p, 310b, 950.")] = None,
        arch: Annotated[Optional[str], Opt(help="aarch64 or x86_64.")] = None,
        os: Annotated[Optional[str], Opt("--os", help="Operating system id, e.g. ubuntu22.04.")] = None,
        python: Annotated[Optional[str], Opt(help="Python minor version, e.g. 3.11.")] = None,
        driver: Annotated[Optional[str], Opt(help="HDK release of the NPU driver.")] = None,
        firmware: Annotated[Optional[str], Opt(help="HDK release (or firmware Version) of the NPU firmware.")] = None,
        cann: Annotated[Optional[str], Opt(help="CANN release.")] = None,
        torch: Annotated[Optional[str], Opt(help="PyTorch version.")] = None,
        torch_npu: Annotated[Optional[str], Opt("--torch-npu", help="torch_npu pip version.")] = None,
        numpy: Annotated[Optional[str], Opt(help="numpy version.")] = None,
        transformers: Annotated[Optional[str], Opt(help="Transformers version.")] = None,
        accelerate: Annotated[Optional[str], Opt(help="Accelerate version.")] = None,
        output: Annotated[Path, Opt("-o", "--output", help="Where to write the lock ('-' for stdout).")] = Path("envkit.lock"),
        json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Complete a (partial) stack into the best valid full stack and write the lock."""
        from envkit.lockfile import build_lock, dump_lock
        from envkit.matrix import load_matrix
        from envkit.resolve import pins_from_mapping, solve, validate_pins
        from envkit.stackfile import read_stack_file
        from envkit.fsutil import atomic_write_text

        lm = load_matrix()
        values: dict[str, str] = {}
        where: dict[str, str] = {}
        cmd = ["envkit", "resolve"]
        if file is not None:
            values, where = read_stack_file(file)
            cmd += ["-f", str(file)]
        cli_values, cli_where = _pins_cli(
            chip=chip, arch=arch, os=os, python=python, driver=driver, firmware=firmware, cann=cann, torch=torch,
            torch_npu=torch_npu, numpy=numpy, transformers=transformers, accelerate=accelerate,
        )
        values.update(cli_values)
        where.update(cli_where)
        for k, v in cli_values.items():
            cmd += [f"--{k.replace('_', '-')}", v]
        pins = pins_from_mapping(lm, values, where=where)
        res = solve(lm, pins)
        if res is None:
            report = validate_pins(lm, pins)
            if json_out:
                console.emit_json({"resolved": False, **report.model_dump(mode="json")})
            else:
                render_report(report, "requested stack")
            raise typer.Exit(EXIT_FAILED)
        lock = build_lock(lm, res, shlex.join(cmd))
        text = dump_lock(lock)
        if str(output) == "-":
            sys.stdout.write(text)
            return
        atomic_write_text(output, text)
        if json_out:
            console.emit_json(
                {
                    "resolved": True,
                    "lock": str(output),
                    "stack": lock.stack.model_dump(),
                    "validated": lock.validated.model_dump(),
                    "provenance": {k: v.model_dump() for k, v in lock.provenance.items()},
                    "hints": lock.hints,
                }
            )
            return
        tag = "vendor-validated" if lock.validated.torch_npu_cann and lock.validated.cann_hdk else "compatible"
        console.out.print(f"resolved a {tag} stack -> {output}", markup=False)
        render_stack(lock.stack.model_dump(), lock.provenance)
        for hint in lock.hints:
            console.out.print(f"hint: {hint}", markup=False)

    @app.command("validate")
    def validate_cmd(
        file: Annotated[Path, typer.Argument(help="A stack file or a lock.")],
        json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Check a stack file or a lock: exit 0 valid, 1 invalid (with the chain of facts), 2 bad input."""
        from envkit.validation import validate_file

        report = validate_file(file)
        if json_out:
            console.emit_json(report.model_dump(mode="json"))
        else:
            render_report(report, str(file))
        if not report.valid:
            raise typer.Exit(EXIT_FAILED)

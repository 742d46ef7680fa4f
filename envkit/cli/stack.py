"""`envkit resolve` and `envkit validate`.

One definition: the typer commands below (`resolve`'s signature built from the option tables). Their bodies are
plain functions (`run_resolve`, `run_validate`) called with the parameters by name, so that the start-up path
`main()` takes for an ordinary call (`envkit.cli.fast`, no typer import) calls the same body with what its parser,
generated from these very commands (`envkit/cli/_fastspec.py`, `make fast-cli`), read. Anything unusual (help, an
option the generated parser does not take) goes to typer.
"""

import shlex
import sys
from pathlib import Path
from typing import Optional

from envkit import console
from envkit.errors import EXIT_FAILED

# The stack pins `envkit resolve` takes as options: key, help. The flag is --key with dashes.
PIN_OPTIONS: tuple[tuple[str, str], ...] = (
    ("chip", "Chip: 910b, 910, a3, 310p, 310b, 950."),
    ("arch", "aarch64 or x86_64."),
    ("os", "Operating system id, e.g. ubuntu22.04."),
    ("python", "Python minor version, e.g. 3.11."),
    ("driver", "HDK release of the NPU driver."),
    ("firmware", "HDK release (or firmware Version) of the NPU firmware."),
    ("cann", "CANN release."),
    ("torch", "PyTorch version."),
    ("torch_npu", "torch_npu pip version."),
    ("numpy", "numpy version."),
    ("transformers", "Transformers version."),
    ("accelerate", "Accelerate version."),
    ("vllm", "vLLM version (serving)."),
    ("vllm_ascend", "vllm-ascend version (serving; brings vllm and triton_ascend with it)."),
    ("triton_ascend", "triton-ascend version (bound to one CANN release)."),
    ("mindspeed", "MindSpeed version (training)."),
    ("ray", "Ray version (serving across nodes; brings the serving set with it)."),
)
RESOLVE_OPTIONS = {
    "file": (("-f", "--file"), "Stack file (YAML) with the keys to pin."),
    "output": (("-o", "--output"), "Where to write the lock ('-' for stdout)."),
    "workload": (
        ("--workload",),
        "Complete the frameworks of a workload: serving (vllm-ascend, vLLM, triton-ascend), serving-multi-node (the "
        "same and the Ray its vllm-ascend serves across nodes with: `envkit k8s render --node-count N`) or "
        "training-mindspeed (MindSpeed).",
    ),
}
VALIDATE_HELP = {"file": "A stack file or a lock."}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _pins_cli(**opts: Optional[str]) -> tuple[dict[str, str], dict[str, str]]:
    values = {k: v for k, v in opts.items() if v is not None}
    where = {k: f"--{k.replace('_', '-')}" for k in values}
    return values, where


def _plain_valid(report, title: str) -> list[str] | None:  # noqa: ANN001 - a valid ValidationReport
    """The lines rich prints for a valid report (`console.print_plain` writes them without rich where it prints them
    the same), or None where the table is not plain ASCII cells rich lays out as here (at most the 200 columns a
    pipe gets)."""
    import re

    from envkit.models.stackkeys import ALL_KEYS

    lines = [f"{title}: valid"]
    if report.stack:
        rows = [("key", "version")] + [(k, str(report.stack[k])) for k in ALL_KEYS if k in report.stack]
        if not all(cell.isascii() and cell.isprintable() and re.fullmatch(r"[^\[\]:]*", cell) for row in rows for cell in row):
            return None
        w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
        if w0 + w1 + 2 > 200:
            return None
        lines += [f"{a:<{w0}}  {b:<{w1}}" for a, b in rows]
    lines += [f"hint: {hint}" for hint in report.hints]
    return lines


def render_report(report, title: str) -> None:  # noqa: ANN001 - ValidationReport
    """Human form of a ValidationReport."""
    if report.valid:
        lines = _plain_valid(report, title)
        if lines is not None and console.print_plain(lines):
            return
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
    elif any(c.pins for c in report.conflicts):  # a stack conflict; an edited lock's sections name no pins
        out.print("\nno valid stack is one or two changes away; relax more pins", markup=False)


def render_stack(stack: dict[str, str], provenance: dict | None = None) -> None:  # noqa: ANN001
    from rich.table import Table
    from rich.text import Text

    from envkit.models.stackkeys import ALL_KEYS

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("key")
    table.add_column("version")
    if provenance:
        table.add_column("from")
    for key in ALL_KEYS:
        if key not in stack:
            continue
        row = [key, str(stack[key])]
        if provenance:
            p = provenance[key]
            row.append(p.origin if p.origin != "derived" else f"derived: {p.rule}")
        table.add_row(*(Text(console.escaped(cell)) for cell in row))  # plain text: no markup, no control
    console.out.print(table)


def resolve(
    file: Optional[Path], output: Path, json_out: bool, pins: dict[str, Optional[str]], workload: Optional[str] = None
) -> int:
    """Complete a (partial) stack into the best valid full stack and write the lock."""
    from envkit.core.derive import derive
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import framework_keys, pins_from_mapping, solve, validate_pins
    from envkit.core.stackfile import read_stack_file
    from envkit.lock.text import lock_text, plain
    from envkit.records import asdict

    lm = load_matrix()
    values: dict[str, str] = {}
    where: dict[str, str] = {}
    cmd = ["envkit", "resolve"]
    if file is not None:
        values, where = read_stack_file(file)
        cmd += ["-f", str(file)]
    cli_values = {k: v for k, v in pins.items() if v is not None}
    values.update(cli_values)
    where.update({k: _flag(k) for k in cli_values})
    for k, v in cli_values.items():
        cmd += [_flag(k), v]
    if workload is not None:
        cmd += ["--workload", workload]
    pinned = pins_from_mapping(lm, values, where=where)
    res = solve(lm, pinned, framework_keys(pinned, workload))
    if res is None:
        report = validate_pins(lm, pinned, workload)
        if json_out:
            console.emit_json({"resolved": False, **report.model_dump(mode="json")})
        else:
            render_report(report, "requested stack")
        return EXIT_FAILED
    lock = derive(lm, res, shlex.join(cmd))
    text = lock_text(plain(lock))
    if str(output) == "-":
        sys.stdout.write(text)
        return 0
    from envkit.io.outputs import atomic_write_text  # a lock to stdout needs none of it (dataclasses, tempfile: start-up)

    atomic_write_text(output, text)
    if json_out:
        console.emit_json(
            {
                "resolved": True,
                "lock": str(output),
                "stack": plain(lock.stack),
                "validated": asdict(lock.validated),
                "provenance": {k: asdict(v) for k, v in lock.provenance.items()},
                "hints": lock.hints,
            }
        )
        return 0
    tag = "vendor-validated" if lock.validated.torch_npu_cann and lock.validated.cann_hdk else "compatible"
    console.out.print(f"resolved a {tag} stack -> {output}", markup=False)
    render_stack(plain(lock.stack), lock.provenance)
    for hint in lock.hints:
        console.out.print(f"hint: {hint}", markup=False)
    return 0


def validate(file: Path, json_out: bool) -> int:
    """Check a stack file or a lock: exit 0 valid, 1 invalid (with the chain of facts), 2 bad input."""
    from envkit.core.validation import judge_file
    from envkit.lock.text import plain

    report = judge_file(file)  # the pydantic report, or its plain record for a lock that holds: one dump
    if json_out:
        console.emit_json(plain(report))
    else:
        render_report(report, str(file))
    return 0 if report.valid else EXIT_FAILED


def run_resolve(*, file: Optional[Path], output: Path, json_out: bool, workload: Optional[str], **pins: Optional[str]) -> int:
    """`envkit resolve`'s body, called with the command's parameters by name (typer, and the generated start-up
    path `envkit.cli.fast`): the pins are the PIN_OPTIONS keys."""
    return resolve(file, output, json_out, {key: pins.get(key) for key, _ in PIN_OPTIONS}, workload)


def run_validate(*, file: Path, json_out: bool) -> int:
    """`envkit validate`'s body, called with the command's parameters by name (typer and `envkit.cli.fast`)."""
    return validate(file, json_out)


# --- typer ----------------------------------------------------------------------------------------
def register(app) -> None:  # noqa: ANN001 - a typer.Typer
    """The same commands for typer: the signatures are built from the option tables."""
    import inspect

    import typer

    from envkit.cli.examples import example
    from envkit.cli.options import JsonOpt

    def _exit(code: int) -> None:
        if code:
            raise typer.Exit(code)

    def resolve_cmd(**kw) -> None:  # noqa: ANN003
        _exit(run_resolve(**kw))

    resolve_cmd.__doc__ = resolve.__doc__

    def opt(name: str, default, annotation, *decls: str, help: str):  # noqa: ANN001, A002, ANN202
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=typer.Option(default, *decls, help=help)
        )

    params = [opt("file", None, Optional[Path], *RESOLVE_OPTIONS["file"][0], help=RESOLVE_OPTIONS["file"][1])]
    params += [opt(key, None, Optional[str], _flag(key), help=text) for key, text in PIN_OPTIONS]
    params += [
        opt("output", Path("envkit.lock"), Path, *RESOLVE_OPTIONS["output"][0], help=RESOLVE_OPTIONS["output"][1]),
        opt("workload", None, Optional[str], *RESOLVE_OPTIONS["workload"][0], help=RESOLVE_OPTIONS["workload"][1]),
        inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, annotation=JsonOpt, default=False),
    ]
    resolve_cmd.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    app.command(
        "resolve",
        epilog=example("envkit resolve --chip a3 --cann 8.5.0 -o a3.lock", "envkit resolve -f stack.yaml --python 3.10"),
    )(resolve_cmd)

    def validate_cmd(
        file: Path = typer.Argument(..., help=VALIDATE_HELP["file"]),
        json_out: JsonOpt = False,
    ) -> None:
        _exit(run_validate(file=file, json_out=json_out))

    validate_cmd.__doc__ = validate.__doc__
    app.command("validate", epilog=example("envkit validate envkit.lock", "envkit validate stack.yaml --json"))(validate_cmd)

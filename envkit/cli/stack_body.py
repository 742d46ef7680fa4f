"""The bodies of `envkit resolve` and `envkit validate`, without typer: the typer commands (envkit.cli.stack) and the
start-up path `main()` takes for an ordinary call (`envkit.cli.fast`, whose parser is generated from those very
commands: `envkit/cli/_fastspec.py`, `make fast-cli`) both call `run_resolve` / `run_validate` with the parameters
by name. Anything unusual (help, an option the generated parser does not take) goes to typer."""

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
    from envkit.core.derive import ResolveRequest, resolve_lock
    from envkit.lock.text import plain
    from envkit.records import asdict

    request = ResolveRequest(file=file, pins=tuple((k, v) for k, v in pins.items() if v is not None), workload=workload)
    done = resolve_lock(request, None if str(output) == "-" else output)
    if done.lock is None:
        assert done.report is not None
        if json_out:
            console.emit_json({"resolved": False, **done.report.model_dump(mode="json")})
        else:
            render_report(done.report, "requested stack")
        return EXIT_FAILED
    lock = done.lock
    if str(output) == "-":
        sys.stdout.write(done.text or "")
        return 0
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

"""`envkit matrix check | show | refresh | schema`."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt
from envkit.errors import EXIT_FAILED, BadInput

if TYPE_CHECKING:
    from envkit.jobs.matrix import MatrixCheck

Opt = typer.Option

# component name (and aliases) -> (section, columns)
COMPONENTS: dict[str, tuple[str, list[str]]] = {
    "chips": ("chips", ["id", "name", "npu_smi_names", "davinci_devices", "soc_version"]),
    "arches": ("arches", ["id", "hdk_file_arch"]),
    "os": ("operating_systems", ["id", "name", "family", "glibc", "arches"]),
    "python": ("pythons", ["version"]),
    "hdk": ("hdk", ["version", "chips", "firmware_version", "compatible_firmware"]),
    "cann": ("cann", ["version", "chips", "hdk_paired", "hdk_compatible", "python", "layout", "operator_package"]),
    "torch_npu": ("torch_npu", ["version", "line", "torch", "cann", "python", "python_by_arch", "x86_64_torch_local"]),
    "lines": ("torch_npu_lines", ["line", "cann_compatible", "chips"]),
    "rules": ("rules", ["id", "when", "requires", "forbid", "severity"]),
    "packages": ("packages", ["name", "recommended"]),
    "artifacts": ("artifacts", ["component", "release", "kind", "chip", "arch", "file", "sha256"]),
    "installers": ("installers", ["component", "order", "flags"]),
    # the serving and training frameworks (matrices/serving.yaml); a dotted column reads a field of a nested row
    "vllm_ascend": (
        "vllm_ascend",
        [
            "version",
            "vllm",
            "cann",
            "torch_npu",
            "triton_ascend",
            "python",
            "python_documented.spec",
            "sdist_only",
            "device_build.device_type",
            "device_build.soc_version",
            "runs_on.chips",
        ],
    ),
    "devices": ("vllm_ascend_devices", ["device_types", "chip", "soc_versions", "image_tag"]),
    "triton_ascend": ("triton_ascend", ["version", "cann", "chips", "python", "index"]),
    "ray": ("ray", ["version", "vllm_ascend", "spec", "python"]),
    "mindspeed": ("mindspeed", ["version", "torch_npu_lines", "cann", "torch", "python", "chips.chips"]),
}
ALIASES = {
    "chip": "chips",
    "arch": "arches",
    "driver": "hdk",
    "firmware": "hdk",
    "torch": "torch_npu",
    "transformers": "rules",
    "accelerate": "rules",
    "numpy": "rules",
    "operating_systems": "os",
    "pythons": "python",
    "vllm-ascend": "vllm_ascend",
    "vllm": "vllm_ascend",
    "triton-ascend": "triton_ascend",
    "vllm_ascend_devices": "devices",
}


def _field(row: Any, column: str) -> Any:
    """A row's value for `column`; `a.b` is field b of its nested row a (None where a is None)."""
    value = row
    for part in column.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k} {_cell(v)}" for k, v in value.items())
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return str(value)


def refresh_cmd(
    snapshot: Annotated[Optional[Path], Opt("--snapshot", help="Read a recorded PyPI snapshot folder (offline).")] = None,
    write: Annotated[bool, Opt("--write", help="Apply the diff to the matrix files.")] = False,
    record: Annotated[Optional[Path], Opt("--record", help="Record the PyPI documents read into this folder.")] = None,
    matrix_dir: Annotated[Optional[Path], Opt("--matrix-dir", help="The matrices folder (default: the shipped one).")] = None,
    new: Annotated[
        bool, Opt("--new", help="Only list the releases on PyPI the matrix has no row for (exit 1 when any).")
    ] = False,
    index_url: Annotated[
        Optional[str],
        Opt(
            "--index-url",
            metavar="URL",
            help="The JSON API base of PyPI or of a mirror of it (NAME/json under it). [default: https://pypi.org/pypi]",
        ),
    ] = None,
    jobs: Annotated[int, Opt("--jobs", "-j", min=1, max=32, help="Requests to the index at a time (1 to 32).")] = 8,
    deadline: Annotated[
        Optional[float],
        Opt(
            "--deadline",
            metavar="SECONDS",
            min=1.0,
            help="Seconds for the whole run, retries included (default: none; each request has its own 120 s, "
            "and up to 5 tries).",
        ),
    ] = None,
) -> None:
    """Derive the matrix's facts from PyPI: the Python-package rules from metadata, the Pythons and manylinux glibc
    of the torch_npu, vllm-ascend and triton-ascend rows from their wheel files; print the diff and a report.

    Exit 0: nothing to change (or written with --write); 1: the matrix differs from PyPI (with --new: PyPI has
    releases the matrix lacks); 2: bad input, or the index did not answer (a transient failure is tried 5 times,
    with back-off). Progress on stderr (--quiet silences it).
    """
    if new:
        from envkit.jobs.matrix.refresh import find_new

        found = find_new(matrix_dir, snapshot=snapshot, index=index_url, jobs=jobs, deadline=deadline)
        for line in found:
            console.out.print(f"new  {line}", markup=False)
        console.out.print(f"{len(found)} release(s) on PyPI the matrix lacks", markup=False)
        if found:
            raise typer.Exit(EXIT_FAILED)
        return
    from envkit.jobs.matrix.refresh import refresh

    result = refresh(matrix_dir, snapshot=snapshot, record=record, write=write, index=index_url, jobs=jobs, deadline=deadline)
    console.out.file.write(result.diff)
    for line in result.report:
        console.out.print(f"report  {line}", markup=False)
    state = "written" if write and result.changed else "differs from PyPI" if result.changed else "up to date"
    rules = sum(len(r) for r in result.rules.values())
    console.out.print(f"matrix {state}: {rules} derived rules, {len(result.rows)} row(s) with other wheel facts", markup=False)
    if result.changed and not write:
        raise typer.Exit(EXIT_FAILED)


def check_cmd(json_out: JsonOpt = False) -> None:
    """Prove the matrix consistent: references resolve, no duplicates, sorted, every row sourced."""
    from envkit.jobs.matrix import check

    result = check()
    if json_out:
        console.emit_json(result.to_dict())
    else:
        _print_check(result)
    if result.problems:
        raise typer.Exit(EXIT_FAILED)


def _print_check(result: "MatrixCheck") -> None:
    """The problems, one a line, then the summary: the status, the rows per section and per confidence, the digest."""
    for p in result.problems:
        console.out.print(f"fail  {p.section}: {p.row}: {p.message}", markup=False)
    summary = ", ".join(f"{v} {k}" for k, v in result.counts.items())
    conf = ", ".join(f"{v} {k}" for k, v in sorted(result.confidence.items()))
    status = "ok" if not result.problems else f"{len(result.problems)} problem(s)"
    console.out.print(f"matrix {status}: {summary}; rows {conf}; digest {result.digest}", markup=False)


def show_cmd(
    component: Annotated[str, typer.Argument(help=f"One of: {', '.join(COMPONENTS)}.")],
    sources: Annotated[bool, Opt("--sources", help="Add the source and confidence columns.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Print one part of the matrix as a table."""
    from envkit.jobs import matrix

    name = _component(component)
    section, columns = COMPONENTS[name]
    if json_out:
        console.emit_json(matrix.section_data(section))
        return
    _print_table(name, columns, matrix.section_rows(section), sources)


def _component(component: str) -> str:
    """The component a name or alias names; BadInput, with the closest name, for any other."""
    name = ALIASES.get(component, component)
    if name not in COMPONENTS:
        import difflib

        close = difflib.get_close_matches(component, [*COMPONENTS, *ALIASES], n=1)
        raise BadInput(
            f"unknown matrix component {component!r}",
            hint=(f"Did you mean '{close[0]}'? " if close else "") + f"Components: {', '.join(COMPONENTS)}.",
        )
    return name


def _print_table(name: str, columns: list[str], rows: list[Any], sources: bool) -> None:
    """The rows as a table of `columns`, then (for sourced rows) confidence, and with `sources` validated and source."""
    from rich.table import Table

    table = Table(title=f"matrix: {name}", box=None, header_style="bold", pad_edge=False)
    cols = columns + (["confidence", "validated", "source"] if sources else ["confidence"])
    has_conf = hasattr(rows[0], "confidence") if rows else False
    for c in cols:
        if c in ("confidence", "validated", "source") and not has_conf:
            continue
        table.add_column(c, overflow="fold")
    for r in rows:
        cells = [_cell(_field(r, c)) for c in columns]
        if has_conf:
            cells.append(r.confidence)
            if sources:
                cells.append("yes" if r.validated else "")
                cells.append(r.source_text)
        table.add_row(*cells)
    console.out.print(table)


def schema_cmd(
    out: Annotated[Optional[Path], Opt("-o", "--out", help="Write every schema into this folder.")] = None,
) -> None:
    """Print the JSON Schema of the matrix, or write the matrix, stack, lock, report and smoke-report schemas to a folder."""
    from envkit.jobs.matrix import matrix_schema, write_schemas

    if out is None:
        console.out.file.write(json.dumps(matrix_schema(), indent=2, sort_keys=True) + "\n")
        return
    for path in write_schemas(out):
        console.progress(f"wrote {path}")


def register(app: typer.Typer) -> None:
    matrix_app = typer.Typer(
        help="Inspect and check the compatibility matrix.",
        no_args_is_help=True,
        epilog=example("envkit matrix check", "envkit matrix show cann --sources"),
    )
    app.add_typer(matrix_app, name="matrix")
    matrix_app.command("check", epilog=example("envkit matrix check --json"))(check_cmd)
    matrix_app.command("show", epilog=example("envkit matrix show torch_npu --sources"))(show_cmd)
    matrix_app.command(
        "refresh",
        epilog=example("envkit matrix refresh", "envkit matrix refresh --snapshot tests/fixtures/pypi-snapshot --write"),
    )(refresh_cmd)
    matrix_app.command("schema", epilog=example("envkit matrix schema -o envkit/schemas"))(schema_cmd)

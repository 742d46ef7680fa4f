"""The `envkit` command line: parse, call one library function, format. The single error boundary is `main()`."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Optional

import typer

from envkit import __version__, console
from envkit.errors import EnvkitError

app = typer.Typer(
    name="envkit",
    help="Resolve, build, bundle, provision and prove Ascend NPU PyTorch stacks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)

# Each module registers its commands on `app` through `register(app)`.
COMMAND_MODULES = ["stack", "matrix", "smoke", "doctor", "bundle", "image", "provision"]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"envkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version.")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Silence progress output.")] = False,
) -> None:
    console.set_debug(debug)
    console.set_quiet(quiet)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"envkit.cli.{name}")
        except ModuleNotFoundError as exc:  # a command group not written yet
            if exc.name == f"envkit.cli.{name}":
                continue
            raise
        module.register(app)


_register_all()


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def _report_error(exc: EnvkitError, argv: list[str]) -> int:
    if _wants_json(argv):
        console.emit_json({"error": exc.to_dict()})
    lines = [f"error: {exc.message}"]
    if exc.where and str(exc.where):
        lines.append(f"  where: {exc.where}")
    if exc.hint:
        for i, hint_line in enumerate(exc.hint.splitlines()):
            lines.append(("  next: " if i == 0 else "        ") + hint_line)
    console.err.print("\n".join(lines), markup=False)
    return exc.exit_code


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script. Exits with the error's own code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    command = typer.main.get_command(app)
    try:
        # standalone mode: click prints usage errors itself and exits 2; our errors pass through.
        command.main(args=args, prog_name="envkit", standalone_mode=True)
    except EnvkitError as exc:
        if debug:
            raise
        sys.exit(_report_error(exc, args))

"""Options several commands share, declared once (typer reads these `Annotated` types)."""

from __future__ import annotations

from typing import Annotated

import typer

ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Write into a folder holding files envkit did not write (kept: never replaced nor deleted)."),
]

# every command's --json: one JSON document on stdout (keys sorted, `envkit.console.emit_json`) instead of the text
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as one JSON document on stdout (machine-readable).")]

"""Options several commands share, declared once (typer reads these `Annotated` types)."""

from __future__ import annotations

from typing import Annotated

import typer

ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Write into a folder holding files envkit did not write (kept: never replaced nor deleted)."),
]

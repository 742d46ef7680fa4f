"""Console output: results go to stdout, progress and messages to stderr; `--quiet` silences progress."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

_state = {"quiet": False, "debug": False}

out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)
if not out.is_terminal:  # pipes and CI logs: do not squeeze tables into 80 columns
    out.width = max(out.width, 200)


def set_quiet(value: bool) -> None:
    _state["quiet"] = value


def is_quiet() -> bool:
    return _state["quiet"]


def set_debug(value: bool) -> None:
    _state["debug"] = value


def is_debug() -> bool:
    return _state["debug"]


def progress(message: str) -> None:
    """A progress line on stderr, unless quiet."""
    if not _state["quiet"]:
        err.print(message, markup=False)


def emit_json(data: Any) -> None:
    """Machine output: one JSON document on stdout, keys sorted."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    sys.stdout.flush()

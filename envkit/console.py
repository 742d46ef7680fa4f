"""Console output: results go to stdout, progress and messages to stderr; `--quiet` silences progress."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_state = {"quiet": False, "debug": False}
_consoles: dict[str, Console] = {}


def __getattr__(name: str) -> Console:
    """`console.out` and `console.err` are created on first use (rich costs ~40 ms to import)."""
    if name not in ("out", "err"):
        raise AttributeError(name)
    if name not in _consoles:
        from rich.console import Console

        c = Console(stderr=name == "err", soft_wrap=True, highlight=False)
        if name == "out" and not c.is_terminal:  # pipes and CI logs: do not squeeze tables into 80 columns
            c.width = max(c.width, 200)
        _consoles[name] = c
    return _consoles[name]


def print_plain(lines: list[str]) -> bool:
    """Write `lines` to stdout exactly as `console.out.print(line, markup=False)` would, without importing rich
    (~80 ms of a start-up path: `envkit validate`, `envkit bundle verify`), where that is certain: stdout is no
    terminal and nothing makes rich treat it as one (TTY_COMPATIBLE, FORCE_COLOR), no rich console has been made yet,
    and every line is printable text with no `:code:` (rich would put an emoji there). False: nothing was written,
    print with rich. tests/core/test_lockread.py holds the output to rich's."""
    import os
    import re

    if "out" in _consoles or "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    try:
        if sys.stdout.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    if not all(line.isprintable() and not re.search(r":\S*:", line) for line in lines):
        return False
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    return True


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
        __getattr__("err").print(message, markup=False)


def emit_json(data: Any) -> None:
    """Machine output: one JSON document on stdout, keys sorted."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    sys.stdout.flush()

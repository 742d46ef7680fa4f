"""Console output: results go to stdout, progress and messages to stderr; `--quiet` silences progress.

Every text reaches the terminal escaped (`escaped`): what envkit prints quotes what a host's files, an index, a lock
or a client said (version.info, npu-smi's output, a request line, a file name), and a control character there (an
ESC sequence that recolours, retitles or rewrites the screen, a C1 CSI, a carriage return or backspace that hides
what came before, a bidi override that reorders it) is shown as its `\\xNN` / `\\uNNNN` escape instead of acting.
`--json` documents escape the C1 controls too (JSON itself escapes the C0 ones).
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_state = {"quiet": False, "debug": False}
_consoles: dict[str, Console] = {}

# what a terminal acts on rather than shows: C0 but tab and newline, DEL, C1, line/paragraph separators, bidi controls
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_C1 = re.compile("[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` with every control character a terminal would act on written as its escape (tab and newline kept)."""
    return _CONTROL.sub(_escape, text)


def __getattr__(name: str) -> Console:
    """`console.out` and `console.err` are created on first use (rich costs ~40 ms to import)."""
    if name not in ("out", "err"):
        raise AttributeError(name)
    if name not in _consoles:
        from rich.console import Console

        class _Escaping(Console):
            """A rich console whose text arguments are `escaped` first (rich strips a few controls, not ESC)."""

            def print(self, *objects: Any, **kw: Any) -> None:
                super().print(*(escaped(o) if isinstance(o, str) else o for o in objects), **kw)

        c = _Escaping(stderr=name == "err", soft_wrap=True, highlight=False)
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
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
    sys.stdout.write(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")  # valid JSON: only inside strings
    sys.stdout.flush()

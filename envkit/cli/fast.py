"""The start-up path of the fast commands (`resolve`, `validate`, `bundle verify`): their options parsed without
importing typer, from a table generated from the typer commands themselves (`envkit/cli/_fastspec.py`, written by
`tools/fast_cli.py`; a test holds it equal to what the generator makes now), then the same body typer calls.

The parser takes the plain forms only: `--opt VALUE`, `--opt=VALUE`, `-o VALUE`, flags, and positionals in order.
Anything else (help, an unknown or abbreviated option, a missing argument, `--`) returns None, and typer parses the
command as the one authority on usage errors.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from envkit.cli._fastspec import COMMANDS


def _command(args: list[str]) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    for path, spec in COMMANDS.items():
        if tuple(args[: len(path)]) == path:
            return path, spec
    return None


def is_fast(args: list[str]) -> bool:
    """Whether `args` (after the root options) name a command of the start-up path."""
    return _command(args) is not None


def _value(param: dict[str, Any], text: str) -> Any:
    return Path(text) if param["type"] == "path" else text


def parse(params: list[dict[str, Any]], argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of the body for `argv`, or None where typer should parse it."""
    values: dict[str, Any] = {}
    for p in params:
        default = p["default"]
        values[p["name"]] = _value(p, default) if isinstance(default, str) else default
    by_flag = {flag: p for p in params if p["kind"] == "option" for flag in p["opts"]}
    positionals = [p for p in params if p["kind"] == "argument"]
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and arg != "-":
            flag, eq, text = arg.partition("=")
            opt = by_flag.get(flag)
            if opt is None:  # --help, an unknown option, an abbreviation, `--`, `-fFILE`: typer's to parse
                return None
            if opt["type"] == "bool":
                if eq:
                    return None
                values[opt["name"]] = True
            else:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        return None
                    text = argv[i]
                values[opt["name"]] = _value(opt, text)
            seen.add(opt["name"])
        else:
            if len(seen & {q["name"] for q in positionals}) == len(positionals):
                return None  # one positional too many
            p = next(q for q in positionals if q["name"] not in seen)
            values[p["name"]] = _value(p, arg)
            seen.add(p["name"])
        i += 1
    if any(p["required"] and p["name"] not in seen for p in params):
        return None
    return values


def run(args: list[str]) -> int | None:
    """Run a fast command (`args` after the root options) and return its exit code; None where typer should."""
    found = _command(args)
    if found is None:
        return None
    path, spec = found
    kwargs = parse(spec["params"], args[len(path) :])
    if kwargs is None:
        return None
    module, function = spec["body"].split(":")
    body = getattr(importlib.import_module(module), function)
    code: int = body(**kwargs)
    return code

"""Read a stack file (YAML, the twelve stack keys and the optional framework keys, all optional, exact versions)."""

from __future__ import annotations

import difflib
from pathlib import Path

from envkit.errors import BadInput, Where
from envkit.io.yamlio import load_file
from envkit.models.stackkeys import ALL_KEYS


def stack_from_data(data: object, lines: dict[str, int], filename: str) -> tuple[dict[str, str], dict[str, str]]:
    """(values, where) from parsed YAML; where maps each key to 'file:line'."""
    if data is None:
        return {}, {}
    if isinstance(data, dict) and "stack" in data and "schema_version" in data:
        raise BadInput(f"{filename} is a lock, not a stack file", where=Where(filename, 1), hint="Use `envkit validate` on it.")
    if not isinstance(data, dict):
        raise BadInput(
            f"{filename} must be a mapping of stack keys, not a {type(data).__name__}",
            where=Where(filename, 1),
            hint=f"Write keys such as `chip: 910b` and `torch: 2.6.0`. Keys: {', '.join(ALL_KEYS)}.",
        )
    values: dict[str, str] = {}
    where: dict[str, str] = {}
    for key, value in data.items():
        line = lines.get(key)
        if key not in ALL_KEYS:
            close = difflib.get_close_matches(key, ALL_KEYS, n=1, cutoff=0.5)
            hint = f"Did you mean '{close[0]}'? " if close else ""
            raise BadInput(
                f"unknown key '{key}' in {filename}",
                where=Where(filename, line, key),
                hint=hint + f"Keys: {', '.join(ALL_KEYS)}.",
                details={"key": key, "did_you_mean": close[0] if close else None},
            )
        if isinstance(value, (dict, list)):
            raise BadInput(
                f"'{key}' must be one exact version, not a {type(value).__name__}",
                where=Where(filename, line, key),
                hint=f"Write e.g. `{key}: <version>`.",
            )
        if value is None:
            continue
        values[key] = str(value)
        where[key] = f"{filename}:{line}" if line else filename
    return values, where


def read_stack_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    data, lines = load_file(Path(path), scalars_as_str=True)
    return stack_from_data(data, lines, str(path))

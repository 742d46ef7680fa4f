"""Edit one row of a matrix file in place: set a few keys of the row with a given version, keep every other
line (comments, hand-written sources, notes) as it is.

The matrix files are hand-written YAML in one layout: a top-level list (`torch_npu:`), its rows at two spaces
(`  - version: "2.12.0"`), a row's keys at four (`    python: [...]`), a block list's items at six. This module
edits that layout only; a file in another layout is refused (BadInput naming the file and the row), never
guessed at. The caller checks the result by loading it (`fast_load_text`) before writing anything.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from envkit.errors import BadInput, Where

_TOP = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*:")
_ROW = re.compile(r"^  - ")
_KEY = re.compile(r"^    ([A-Za-z_][A-Za-z0-9_]*):(.*)$")
_FIRST_KEY = re.compile(r"^  - ([A-Za-z_][A-Za-z0-9_]*):(.*)$")


def flow(value: Any) -> str:
    """A value in YAML flow style, strings double-quoted (JSON is a subset of YAML): `["3.10", "3.11"]`,
    `{x86_64: "2.28"}` (mapping keys are bare words here: arch names)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _section(lines: list[str], section: str, file: str) -> tuple[int, int]:
    """[first row line, end) of the top-level list `section`."""
    head = next((i for i, ln in enumerate(lines) if ln.rstrip() == f"{section}:"), None)
    if head is None:
        raise BadInput(f"{file} has no top-level '{section}:' list", where=Where(file, None, section))
    end = next((i for i in range(head + 1, len(lines)) if _TOP.match(lines[i])), len(lines))
    return head + 1, end


def _rows(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    starts = [i for i in range(start, end) if _ROW.match(lines[i])]
    return [(s, starts[k + 1] if k + 1 < len(starts) else end) for k, s in enumerate(starts)]


def _extent(lines: list[str], i: int, end: int) -> int:
    """The line after key line `i`'s value: its continuation lines are indented deeper than four spaces."""
    j = i + 1
    while j < end and (lines[j].startswith("     ") or not lines[j].strip()):
        j += 1
    while j > i + 1 and not lines[j - 1].strip():  # a blank line before the next row belongs to no key
        j -= 1
    return j


def _keys(lines: list[str], s: int, e: int) -> dict[str, tuple[int, int]]:
    """key -> [first line, end) of each key of the row at lines[s:e] (the first key shares the `  - ` line)."""
    out: dict[str, tuple[int, int]] = {}
    for i in range(s, e):
        m = _FIRST_KEY.match(lines[i]) if i == s else _KEY.match(lines[i])
        if m:
            out[m.group(1)] = (i, _extent(lines, i, e))
    return out


def find_row(lines: list[str], section: str, version: str, file: str, key: str = "version", nth: int = 0) -> tuple[int, int]:
    """The (first, end) lines of the `nth` row (0: the first) of `section` whose `key` is `version`: a table may give
    one release two rows (Ray's, one per range of vllm-ascend releases)."""
    start, end = _section(lines, section, file)
    seen = 0
    for s, e in _rows(lines, start, end):
        keys = _keys(lines, s, e)
        if key in keys:
            i = keys[key][0]
            m = _FIRST_KEY.match(lines[i]) if i == s else _KEY.match(lines[i])
            assert m is not None
            if str(_scalar(m.group(2))) == version:
                if seen == nth:
                    return s, e
                seen += 1
    raise BadInput(f"{file}: no row {section}[{key}={version}] in the expected layout", where=Where(file, None, section))


def set_fields(
    text: str,
    file: str,
    section: str,
    version: str,
    fields: dict[str, Any],
    *,
    after: str,
    source: tuple[str, str] | None = None,
    nth: int = 0,
) -> str:
    """`text` with the row `section[version]`'s keys set to `fields` (None: the key removed), each written on one
    line in flow style; a key the row lacks is inserted after the key `after` (after the row's last key where it has
    no `after`).
    `source`: (prefix, line): the row's source list gets `line`, in place of an earlier item that starts with
    `prefix` (a scalar source becomes a list of two). `nth`: which of the rows with that version (`find_row`)."""
    lines = text.splitlines(keepends=True)
    s, e = find_row(lines, section, version, file, nth=nth)
    row = lines[s:e]
    for key, value in fields.items():
        keys = _keys(row, 0, len(row))
        new = [] if value is None else [f"    {key}: {flow(value)}\n"]
        if key in keys:
            i, j = keys[key]
            if i == 0:
                raise BadInput(f"{file}: {section}[{version}].{key} opens the row; it is not edited in place")
            row[i:j] = new
        elif new:
            anchor = keys.get(after) or (max(keys.values()) if keys else None)
            if anchor is None:
                raise BadInput(f"{file}: {section}[{version}] has no keys to place {key} after")
            row[anchor[1] : anchor[1]] = new
    if source is not None:
        row = _with_source(row, source, f"{file}: {section}[{version}]")
    lines[s:e] = row
    return "".join(lines)


def _with_source(row: list[str], source: tuple[str, str], where: str) -> list[str]:
    prefix, line = source
    keys = _keys(row, 0, len(row))
    item = f"      - {flow(line)}\n"
    if "source" not in keys:
        raise BadInput(f"{where} has no source")
    i, j = keys["source"]
    m = _KEY.match(row[i])
    assert m is not None
    inline = m.group(2).strip()
    if inline:  # `source: "one"`: a list of it and the new line
        return [*row[:i], "    source:\n", f"      - {inline}\n", item, *row[j:]]
    items: list[list[str]] = []
    for ln in row[i + 1 : j]:
        if ln.startswith("      - ") or not items:
            items.append([ln])
        else:
            items[-1].append(ln)
    kept = [it for it in items if not str(_scalar(it[0].strip()[2:]) or "").startswith(prefix)]
    return [*row[: i + 1], *(ln for it in kept for ln in it), item, *row[j:]]

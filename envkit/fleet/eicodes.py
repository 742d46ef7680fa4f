"""HCCL error codes (EIxxxx) found in a log: each with its cause, fix and source (matrices/hccl.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envkit.fleet.data import load_hccl

_CODE = re.compile(r"(?<![A-Za-z0-9])(EI\d{4})(?![0-9])")


@dataclass(frozen=True)
class CodeFinding:
    code: str
    count: int
    first_line: int
    excerpt: str
    title: str | None
    cause: str | None
    fix: str | None
    source: str | None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def find_codes(text: str) -> list[CodeFinding]:
    """Every EI code in `text`, in order of first appearance; codes outside envkit's table keep cause None."""
    data = load_hccl()
    seen: dict[str, list] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for code in _CODE.findall(line):
            entry = seen.setdefault(code, [0, number, line.strip()[:240]])
            entry[0] += 1
    out = []
    for code, (count, first, excerpt) in seen.items():
        row = data.error_code(code)
        out.append(
            CodeFinding(
                code,
                count,
                first,
                excerpt,
                row.title if row else None,
                row.cause if row else None,
                row.fix if row else None,
                f"{row.source_text} ({row.confidence})" if row else None,
            )
        )
    return out


def format_findings(findings: list[CodeFinding]) -> list[str]:
    lines = []
    for f in findings:
        head = f"{f.code} x{f.count} (line {f.first_line}): {f.title or 'not in envkit table'}"
        lines.append(head)
        if f.cause:
            lines += [f"  cause: {f.cause}", f"  fix:   {f.fix}", f"  source: {f.source}"]
    return lines

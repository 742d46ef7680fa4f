"""`envkit launch codes`: the HCCL error codes (EI0001 ... EI0019) a log names, each with its cause, fix and source
(`envkit.fleet.eicodes`, from matrices/hccl.yaml)."""

from __future__ import annotations

from pathlib import Path

from envkit.fleet.eicodes import CodeFinding, find_codes, format_findings


def log_codes(log: Path) -> list[CodeFinding]:
    """The codes found in the log file, read as text (BadInput, exit 2, for a file `envkit.io.yamlio.read_text`
    refuses)."""
    from envkit.io.yamlio import read_text

    return find_codes(read_text(log))


def format_codes(findings: list[CodeFinding]) -> list[str]:
    """Each code's lines (`format_findings`), or one line saying that none was found."""
    return format_findings(findings) or ["no HCCL EI code found"]

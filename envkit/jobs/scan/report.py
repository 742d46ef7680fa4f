"""A scan's result as text (for a terminal, escaped by envkit.console when printed) and as SARIF 2.1.0 (for code
scanning tools: one run, the table's rules as the driver's rules, one result per finding)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from envkit import __version__

if TYPE_CHECKING:
    from envkit.jobs.scan import ScanResult

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"block": "error", "warn": "warning", "info": "note"}


def format_text(result: ScanResult, *, show_info: bool = True) -> list[str]:
    counts = result.counts()
    lines = [
        f"{result.project}: {counts['block']} block, {counts['warn']} warn, {counts['info']} info "
        f"({result.python_files} Python file(s), {len(result.dependency_files)} dependency file(s)"
        + (f", against {result.lock}" if result.lock else "")
        + ")"
    ]
    for f in result.findings:
        if f.severity == "info" and not show_info:
            continue
        where = f.path if f.line is None else f"{f.path}:{f.line}"
        lines.append(f"{f.severity:<5}  {where}  [{f.rule}]  {f.message}")
        lines.append(f"       ascend: {f.fix}")
        lines.append(f"       source: {_cited(f.sources or [f.source])} ({f.confidence})")
    if result.dependencies:
        lines.append("")
        lines.append("dependencies:")
        width = max(len(d.name) for d in result.dependencies)
        for d in result.dependencies:
            locked = f"  locked {d.locked}" if d.locked else ""
            lines.append(f"  {d.name:<{width}}  {d.klass:<15}  {d.spec}  ({d.where}, {d.group}){locked}")
    verdict = "blocked: something fails or computes elsewhere on an NPU" if result.blocked else "nothing blocks"
    lines.append("")
    lines.append(f"{verdict} (exit {1 if result.blocked else 0})")
    return lines


def _cited(sources: list[str]) -> str:
    """The first source's page or file (what it says is in --json and SARIF), and how many more there are."""
    page = sources[0].split(": ", 1)[0]
    more = len(sources) - 1
    return page + (f" (+{more} more)" if more else "")


def _generic(fix: str) -> str:
    """A rule's fix with its per-finding placeholders named."""
    for key in ("npu", "api", "fix"):
        fix = fix.replace("{" + key + "}", "(named in each result)")
    return fix


def write_sarif(result: ScanResult, path: Path) -> None:
    """The scan's SARIF log written to `path` (atomically), as `--sarif PATH` asks."""
    import json

    from envkit.io.outputs import atomic_write_text

    atomic_write_text(path, json.dumps(sarif(result), indent=2, ensure_ascii=False) + "\n")


def sarif(result: ScanResult) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a scan: paths relative to the project (uriBaseId PROJECTROOT)."""
    table = result.table
    used = sorted({f.rule for f in result.findings})
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for rule_id in used:
        row = table.rule(rule_id)
        index[rule_id] = len(rules)
        rules.append(
            {
                "id": row.id,
                "name": "".join(part.capitalize() for part in row.id.split("-")),
                "shortDescription": {"text": row.title},
                "fullDescription": {"text": row.message},
                "help": {"text": f"Ascend way: {_generic(row.fix)}\nSeverity: {row.reason}\nSource: {'; '.join(row.source)}"},
                "defaultConfiguration": {"level": LEVELS[row.severity]},
                "properties": {"confidence": row.confidence, "kind": row.kind, "tags": ["ascend", "cuda-migration"]},
            }
        )
    results = []
    for f in result.findings:
        location: dict[str, Any] = {"artifactLocation": {"uri": quote(f.path), "uriBaseId": "PROJECTROOT"}}
        if f.line:
            region: dict[str, Any] = {"startLine": f.line}
            if f.column:
                region["startColumn"] = f.column
            location["region"] = region
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": LEVELS[f.severity],
                "message": {"text": f"{f.message}. Ascend way: {f.fix}"},
                "locations": [{"physicalLocation": location}],
                "properties": {"severity": f.severity, "source": f.source, "confidence": f.confidence},
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "envkit scan",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"PROJECTROOT": {"description": {"text": "the scanned project folder"}}},
                "results": results,
            }
        ],
    }

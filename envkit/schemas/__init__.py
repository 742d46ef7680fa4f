"""JSON Schemas generated from the pydantic models; the committed copies live beside this file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envkit.fsutil import atomic_write_text

HERE = Path(__file__).resolve().parent


def all_schemas() -> dict[str, dict[str, Any]]:
    from envkit.models.lock import Lock
    from envkit.models.matrix import Matrix
    from envkit.models.report import ValidationReport
    from envkit.models.stack import Stack

    return {
        "matrix": Matrix.model_json_schema(),
        "stack": Stack.model_json_schema(),
        "lock": Lock.model_json_schema(),
        "report": ValidationReport.model_json_schema(),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    out = []
    for name, schema in all_schemas().items():
        path = Path(folder) / f"{name}.schema.json"
        atomic_write_text(path, render(schema))
        out.append(path)
    return out

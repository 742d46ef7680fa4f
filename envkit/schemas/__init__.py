"""JSON Schemas generated from the pydantic models; the committed copies live beside this file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envkit.io.outputs import atomic_write_text

HERE = Path(__file__).resolve().parent


DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic writes; named so validators need not guess


def all_schemas() -> dict[str, dict[str, Any]]:
    from pydantic import BaseModel

    from envkit.models.lock import Lock
    from envkit.models.matrix import Matrix
    from envkit.models.report import ValidationReport
    from envkit.models.smoke import SmokeReport
    from envkit.models.stack import Stack

    models: dict[str, type[BaseModel]] = {
        "matrix": Matrix,
        "stack": Stack,
        "lock": Lock,
        "report": ValidationReport,
        "smoke-report": SmokeReport,  # the report.json of `envkit smoke`
    }
    return {name: {"$schema": DIALECT, **model.model_json_schema()} for name, model in models.items()}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    out = []
    for name, schema in all_schemas().items():
        path = Path(folder) / f"{name}.schema.json"
        atomic_write_text(path, render(schema))
        out.append(path)
    return out

"""The HCCL facts (matrices/hccl.yaml, section `hccl`): a cached loader of the matrix's HCCL section that needs no
resolver (the jobs' fleet layer reads it: `launch codes`, doctor's IP plan). Data only, no logic."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ValidationError

from envkit.errors import MatrixError, Where
from envkit.models.base import Sourced
from envkit.models.hccl import EnvRule, ErrorCode, HcclData, IpPlanRow, OpExpansionRow, RankTableRow

__all__ = ["EnvRule", "ErrorCode", "HcclData", "IpPlanRow", "OpExpansionRow", "RankTableRow", "cite", "load_hccl"]

HCCL_FILE = Path("hccl.yaml")  # in matrices/: part of the matrix (its digest, `matrix check`), section `hccl`


def hccl_path() -> Path:
    from envkit.resources import matrices_dir

    return matrices_dir() / HCCL_FILE


@functools.lru_cache(maxsize=2)
def load_hccl(path: str | None = None) -> HcclData:
    """The HCCL facts; a malformed file is MatrixError (exit 1) naming file:line."""
    from envkit.io.yamlio import load_file

    file = Path(path) if path else hccl_path()
    data, lines = load_file(file)
    try:
        return HcclData.model_validate(data.get("hccl") if isinstance(data, dict) else None)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(["hccl", *(str(p) for p in first["loc"])])
        raise MatrixError(
            f"HCCL data row invalid: {first['msg']} ({len(exc.errors())} error(s))",
            where=Where(str(file), lines.get(key) or lines.get(key.rsplit(".", 1)[0]), key),
            hint="Fix the row; every row needs source and confidence (stated | derived | inferred).",
        ) from None


def cite(row: Sourced) -> str:
    """'source (confidence)' for messages."""
    return f"{row.source_text} ({row.confidence})"

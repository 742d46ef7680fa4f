"""The HCCL facts (matrices/hccl/hccl.yaml): strict models and a cached loader. Data only, no logic."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from envkit.errors import MatrixError, Where
from envkit.models.base import Sourced, StrictModel

HCCL_FILE = Path("hccl") / "hccl.yaml"


class RankTableRow(Sourced):
    chip: str
    version: Literal["1.0", "1.2", "2.0"]


class EnvRule(Sourced):
    name: str
    kind: Literal["int", "choice", "ip", "ifname"]
    min: int | None = None
    max: int | None = None
    aiv_max: int | None = None
    default: str | None = None
    same_on_all_nodes: bool


class OpExpansionRow(Sourced):
    chip: str
    values: list[str]
    default: str
    on_unsupported: Literal["error", "default"]


class IpPlanRow(Sourced):
    chip: str
    rule: Literal["same_subnet", "die_pairs_differ"]
    ports: int


class ErrorCode(Sourced):
    code: str
    title: str
    cause: str
    fix: str


class HcclData(StrictModel):
    schema_version: Literal[1]
    rank_tables: list[RankTableRow]
    env: list[EnvRule]
    op_expansion_modes: list[OpExpansionRow]
    ip_plans: list[IpPlanRow]
    error_codes: list[ErrorCode]

    def rank_table(self, chip: str) -> RankTableRow | None:
        return next((r for r in self.rank_tables if r.chip == chip), None)

    def env_rule(self, name: str) -> EnvRule:
        return next(r for r in self.env if r.name == name)

    def op_modes(self, chip: str) -> OpExpansionRow | None:
        return next((r for r in self.op_expansion_modes if r.chip == chip), None)

    def ip_plan(self, chip: str) -> IpPlanRow | None:
        return next((r for r in self.ip_plans if r.chip == chip), None)

    def error_code(self, code: str) -> ErrorCode | None:
        return next((r for r in self.error_codes if r.code == code), None)


def hccl_path() -> Path:
    from envkit.resources import matrices_dir

    return matrices_dir() / HCCL_FILE


@functools.lru_cache(maxsize=2)
def load_hccl(path: str | None = None) -> HcclData:
    """The HCCL facts; a malformed file is MatrixError (exit 1) naming file:line."""
    from envkit.yamlio import load_file

    file = Path(path) if path else hccl_path()
    data, lines = load_file(file)
    try:
        return HcclData.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise MatrixError(
            f"HCCL data row invalid: {first['msg']} ({len(exc.errors())} error(s))",
            where=Where(str(file), lines.get(key) or lines.get(key.rsplit(".", 1)[0]), key),
            hint="Fix the row; every row needs source and confidence (stated | derived | inferred).",
        ) from None


def cite(row: Sourced) -> str:
    """'source (confidence)' for messages."""
    return f"{row.source_text} ({row.confidence})"

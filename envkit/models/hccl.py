"""The HCCL facts' schema (matrices/hccl.yaml, section `hccl`): rank tables, environment rules, op expansion modes
and IP plans per chip, EI error codes. A model module of its own: the matrix holds it, and the fleet layer reads it
without the matrix's models (jobs never import those)."""

from typing import Literal

from envkit.models.base import Sourced, StrictModel
from envkit.models.methods import HcclDataMethods


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


class HcclData(HcclDataMethods, StrictModel):
    """The HCCL facts (matrices/hccl.yaml, section `hccl`): per chip its rank table, op expansion modes and IP plan;
    the environment rules; the EI error codes."""

    rank_tables: list[RankTableRow]
    env: list[EnvRule]
    op_expansion_modes: list[OpExpansionRow]
    ip_plans: list[IpPlanRow]
    error_codes: list[ErrorCode]
    # rank_table, env_rule, op_modes, ip_plan, error_code: HcclDataMethods (shared with the plain record)

"""One sourced verdict: what a rule says of one value or one place, and where the rule comes from.

The same idea serves the resolver (what the matrix says of a value in a conflict's chain, `constraints`), the
fleet's HCCL rules (a broken rank-table or environment rule, `fleet.ranktable`, `fleet.env`) and hccn_tool's
checks per device (`fleet.hccn`). Fields are keyword-only: a verdict names what it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]
Confidence = Literal["stated", "derived", "inferred"]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """`rule` (a matrix rule id, an HCCL rule's name, a hccn_tool check) says `message`, per `source`."""

    rule: str
    message: str
    source: str
    status: Status = "fail"  # ok / warn / fail where the rule checks a place (a device, a host, an inventory line)
    confidence: Confidence | None = None  # how sure the source is (the matrix's rows)
    device: int | None = None
    host: str | None = None
    line: int | None = None

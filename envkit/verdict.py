"""One sourced verdict: what a rule says of one value or one place, and where the rule comes from.

The same idea serves the resolver (what the matrix says of a value in a conflict's chain, `constraints`), the
fleet's HCCL rules (a broken rank-table or environment rule, `fleet.ranktable`, `fleet.env`) and hccn_tool's
checks per device (`fleet.hccn`). Fields are keyword-only: a verdict names what it says.
"""

from __future__ import annotations

from typing import Literal

from envkit.records import Value

Status = Literal["ok", "warn", "fail"]
Confidence = Literal["stated", "derived", "inferred"]


class Verdict(Value):
    """`rule` (a matrix rule id, an HCCL rule's name, a hccn_tool check) says `message`, per `source`.

    `status`: ok / warn / fail where the rule checks a place (a device, a host, an inventory line); `confidence`: how
    sure the source is (the matrix's rows)."""

    __slots__ = ("rule", "message", "source", "status", "confidence", "device", "host", "line")
    _fields = __slots__
    rule: str
    message: str
    source: str
    status: Status
    confidence: Confidence | None
    device: int | None
    host: str | None
    line: int | None

    def __init__(
        self,
        *,
        rule: str,
        message: str,
        source: str,
        status: Status = "fail",
        confidence: Confidence | None = None,
        device: int | None = None,
        host: str | None = None,
        line: int | None = None,
    ) -> None:
        for name, value in zip(self._fields, (rule, message, source, status, confidence, device, host, line), strict=True):
            object.__setattr__(self, name, value)

"""What `validate` and `resolve` say: conflicts as chains of facts, suggestions, hints."""

from typing import Literal

from envkit.models.base import ReportModel, StrictModel

FactKind = Literal["declared", "observed", "derived"]


class Fact(StrictModel):
    fact: str
    rule: str
    source: str
    kind: FactKind
    confidence: Literal["stated", "derived", "inferred"] | None = None


class Conflict(StrictModel):
    summary: str
    pins: list[str]
    chain: list[Fact]


class Suggestion(StrictModel):
    change: dict[str, dict[str, str | None]]
    stack: dict[str, str]
    validated: bool


class ValidationReport(ReportModel):
    kind = "validation"
    valid: bool
    input: dict[str, str]
    stack: dict[str, str] | None = None
    conflicts: list[Conflict] = []
    suggestions: list[Suggestion] = []
    hints: list[str] = []

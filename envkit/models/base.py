"""Strict pydantic base: unknown keys are refused, every document is versioned."""

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from envkit.models.methods import SourcedMethods

Confidence = Literal["stated", "derived", "inferred"]


class StrictModel(BaseModel):
    # defer_build: a model's validator is built when it is first used, not at import (the CLI
    # imports every model; one command uses a few of them).
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class OmitsAbsent(StrictModel):
    """A model whose optional keys named in `dump_drop_none` appear only when set, so that a document without them
    dumps exactly as before they existed: in `model_dump` (here) and in the lock's YAML (`envkit.lock.file` reads
    the same set)."""

    dump_drop_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if not (v is None and k in self.dump_drop_none)}


class ReportModel(StrictModel):
    """The JSON document a command prints or writes: strict, frozen, versioned.

    ``kind`` names the report (``validation``, ``smoke``, ``compare``...) for code and docs; it is a class
    constant, not a field, so the documents keep their shape. A subclass that changes its shape bumps
    ``schema_version`` by redeclaring it as a new Literal.
    """

    kind: ClassVar[str]
    schema_version: Literal[1] = 1


class Sourced(SourcedMethods, StrictModel):
    """A matrix row: where the fact comes from and how sure we are.

    ``stated``: the source says it in so many words; ``derived``: read from a file (wheel
    METADATA, a Dockerfile, source code); ``inferred``: not directly confirmed.
    ``validated``: the vendor published these versions as tested together.
    """

    source: str | list[str]
    confidence: Confidence
    validated: bool = False
    note: str | None = None
    disagreement: str | None = None  # where sources disagree: what each says (explanations quote it)
    # sources, source_text: SourcedMethods (shared with the rows' plain records)

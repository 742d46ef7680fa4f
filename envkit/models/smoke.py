"""The schema of `report.json` written by `envkit smoke` (schema_version 1)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from envkit.models.base import ReportModel, StrictModel

SCHEMA_VERSION: Final = 1


class Check(StrictModel):
    """One check: a name, ok or not, one figure, and the numbers behind it."""

    name: str
    ok: bool
    figure: str
    data: dict[str, Any] = Field(default_factory=dict)


class Environment(StrictModel):
    python: str
    platform: str
    torch: str
    torch_npu: str | None = None
    transformers: str
    accelerate: str | None = None
    safetensors: str | None = None
    cuda: str | None = None
    cann: str | None = None
    ascend_home_path: str | None = None
    device_name: str
    device_count: int
    threads: int
    notes: list[str] = Field(default_factory=list)


class ModelInfo(StrictModel):
    path: str
    builtin: bool
    digest: str
    architecture: str
    parameters: int
    layers: int
    vocab_size: int
    max_positions: int | None = None


class PromptInfo(StrictModel):
    name: str
    batch: int
    tokens: int
    positions_kept: int


class Timings(StrictModel):
    """Seconds, except decode_tokens_per_s. Each region ends with a device synchronisation."""

    import_s: float
    model_load_s: float
    first_forward_s: float
    forward_median_s: float
    forward_runs: int
    forward_tokens: int
    decode_tokens_per_s: float
    decode_tokens: int


class Outputs(StrictModel):
    report: str
    logits: str
    logits_sha256: str
    layers: bool


class SmokeReport(ReportModel):
    kind = "smoke"
    schema_version: Literal[1] = SCHEMA_VERSION
    envkit: str
    device: str
    device_type: Literal["npu", "cuda", "cpu"]
    param_device: str
    dtype: Literal["bf16", "fp16", "fp32"]
    ok: bool
    environment: Environment
    model: ModelInfo
    prompt_digest: str
    prompts: list[PromptInfo]
    checks: list[Check]
    timings: Timings
    outputs: Outputs
    nproc: int = 1
    collectives: dict[str, Any] | None = Field(default=None, description="envkit smoke --collectives: the collective profile")
    serve: dict[str, Any] | None = Field(
        default=None, description="envkit smoke --serve: server command, readiness, requests, ttft, tokens/s, agreement"
    )

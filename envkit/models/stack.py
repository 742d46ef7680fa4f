"""A stack: the twelve keys that decide an Ascend PyTorch environment, and the optional serving and training
frameworks on top of them (vLLM Ascend, triton-ascend, MindSpeed). All optional in a stack file, exact versions."""

from typing import ClassVar, Literal

from pydantic import Field

from envkit.models.base import OmitsAbsent, StrictModel
from envkit.models.safe import Ident, PythonMinor, Version
from envkit.models.stackkeys import ALL_KEYS, FRAMEWORK_KEYS, STACK_KEYS

__all__ = ["ALL_KEYS", "FRAMEWORK_KEYS", "STACK_KEYS", "FullStack", "Origin", "Stack"]

Origin = Literal["declared", "observed"]

_DESCRIPTIONS = {
    "chip": "NPU chip family: 910b (Atlas A2), 910, a3, 310p, 310b, 950",
    "arch": "CPU architecture: aarch64 or x86_64",
    "os": "operating system id, e.g. ubuntu22.04, openeuler24.03",
    "python": "Python minor version, e.g. 3.11",
    "driver": "Ascend HDK release of the NPU driver, e.g. 25.5.0",
    "firmware": "Ascend HDK release of the NPU firmware package (version.info package_version)",
    "cann": "CANN release, e.g. 8.5.0 or 8.3.RC1",
    "torch": "PyTorch version (x86_64 locks record the +cpu build where torch_npu needs it)",
    "torch_npu": "torch_npu pip version, e.g. 2.6.0.post5",
    "numpy": "numpy version",
    "transformers": "Transformers version",
    "accelerate": "Accelerate version",
    "vllm": "vLLM version (serving: the one its vllm_ascend release pins)",
    "vllm_ascend": "vLLM Ascend plugin version (vllm-ascend), e.g. 0.23.0",
    "triton_ascend": "triton-ascend version (bound to one CANN release; never beside upstream triton)",
    "mindspeed": "MindSpeed version (training), e.g. 2.2.0_core_r0.12.1 or 26.1.0",
    "ray": "Ray version (serving across nodes: vllm-ascend's Ray way; the one the matrix pins for its vllm_ascend)",
}


class Stack(StrictModel):
    """A proposed stack (stack file) or an observed one (doctor): every key optional."""

    chip: str | None = Field(None, description=_DESCRIPTIONS["chip"])
    arch: str | None = Field(None, description=_DESCRIPTIONS["arch"])
    os: str | None = Field(None, description=_DESCRIPTIONS["os"])
    python: str | None = Field(None, description=_DESCRIPTIONS["python"])
    driver: str | None = Field(None, description=_DESCRIPTIONS["driver"])
    firmware: str | None = Field(None, description=_DESCRIPTIONS["firmware"])
    cann: str | None = Field(None, description=_DESCRIPTIONS["cann"])
    torch: str | None = Field(None, description=_DESCRIPTIONS["torch"])
    torch_npu: str | None = Field(None, description=_DESCRIPTIONS["torch_npu"])
    numpy: str | None = Field(None, description=_DESCRIPTIONS["numpy"])
    transformers: str | None = Field(None, description=_DESCRIPTIONS["transformers"])
    accelerate: str | None = Field(None, description=_DESCRIPTIONS["accelerate"])
    vllm: str | None = Field(None, description=_DESCRIPTIONS["vllm"])
    vllm_ascend: str | None = Field(None, description=_DESCRIPTIONS["vllm_ascend"])
    triton_ascend: str | None = Field(None, description=_DESCRIPTIONS["triton_ascend"])
    mindspeed: str | None = Field(None, description=_DESCRIPTIONS["mindspeed"])
    ray: str | None = Field(None, description=_DESCRIPTIONS["ray"])

    def pins(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class FullStack(OmitsAbsent):
    """A resolved stack: every key set to one exact version."""

    chip: Ident = Field(description=_DESCRIPTIONS["chip"])
    arch: Ident = Field(description=_DESCRIPTIONS["arch"])
    os: Ident = Field(description=_DESCRIPTIONS["os"])
    python: PythonMinor = Field(description=_DESCRIPTIONS["python"])
    driver: Version = Field(description=_DESCRIPTIONS["driver"])
    firmware: Version = Field(description=_DESCRIPTIONS["firmware"])
    cann: Version = Field(description=_DESCRIPTIONS["cann"])
    torch: Version = Field(description=_DESCRIPTIONS["torch"])
    torch_npu: Version = Field(description=_DESCRIPTIONS["torch_npu"])
    numpy: Version = Field(description=_DESCRIPTIONS["numpy"])
    transformers: Version = Field(description=_DESCRIPTIONS["transformers"])
    accelerate: Version = Field(description=_DESCRIPTIONS["accelerate"])
    vllm: Version | None = Field(None, description=_DESCRIPTIONS["vllm"])
    vllm_ascend: Version | None = Field(None, description=_DESCRIPTIONS["vllm_ascend"])
    triton_ascend: Version | None = Field(None, description=_DESCRIPTIONS["triton_ascend"])
    mindspeed: Version | None = Field(None, description=_DESCRIPTIONS["mindspeed"])
    ray: Version | None = Field(None, description=_DESCRIPTIONS["ray"])

    # the framework keys appear only when set: a plain stack dumps (and locks) exactly as before
    dump_drop_none: ClassVar[frozenset[str]] = frozenset(FRAMEWORK_KEYS)

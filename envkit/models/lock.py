"""The lock (envkit.lock): one validated stack and everything the later jobs need from it."""


from typing import Literal

from pydantic import Field

from envkit.models.base import StrictModel
from envkit.models.stack import FullStack

ComponentName = Literal["driver", "firmware", "cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal"]


class Provenance(StrictModel):
    declared: bool
    origin: Literal["declared", "observed", "default", "derived"]
    rule: str | None = None
    source: str | None = None
    confidence: Literal["stated", "derived", "inferred"] | None = None


class RunFile(StrictModel):
    """The bare `.run` installer (community edition, or inside the signed zip)."""

    file: str | None = Field(description="exact file name; null where the version in its name is not captured")
    pattern: str = Field(description="glob that finds it (inside the zip edition too)")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    flags: list[str]


class ZipEdition(StrictModel):
    """The vendor's signed `.zip` edition that holds the `.run` installer."""

    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    url: str
    source: str


class Artifact(StrictModel):
    component: ComponentName
    version: str
    order: int = Field(description="position in a fresh install (driver, firmware, toolkit, ops/kernels, NNAL)")
    run: RunFile
    zip: ZipEdition | None = None
    firmware_version: str | None = None


class CannLayout(StrictModel):
    kind: Literal["toolkit-latest", "cann-versioned"]
    home: str
    set_env: list[str]
    env: dict[str, str]


class PythonPin(StrictModel):
    name: str
    version: str
    index: str | None = Field(None, description="index id when not the default (pytorch-cpu)")


class PythonSection(StrictModel):
    python: str
    indexes: dict[str, str] = Field(description="index id -> URL")
    requirements: list[PythonPin]
    cann_runtime: list[str] = Field(description="CANN's own Python dependencies (pip requirement strings)")


class Validation(StrictModel):
    torch_npu_cann: bool = Field(description="torch_npu and CANN as in the vendor's table")
    cann_hdk: bool = Field(description="CANN and HDK as in the vendor's version mapping")


class Lock(StrictModel):
    schema_version: Literal[1] = 1
    envkit_version: str
    matrix_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    generated_by: str
    stack: FullStack
    validated: Validation
    provenance: dict[str, Provenance]
    layout: CannLayout
    artifacts: list[Artifact]
    python: PythonSection
    hints: list[str] = []

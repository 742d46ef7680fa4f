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


class ClosureTarget(StrictModel):
    """The interpreter and platform a closure was resolved for."""

    python: str = Field(description="Python minor version, e.g. 3.10")
    arch: Literal["aarch64", "x86_64"]
    glibc: str = Field(pattern=r"^2\.[0-9]+$", description="oldest glibc of the target (manylinux_2_<minor>)")
    platform: str = Field(description="the most specific platform tag, e.g. manylinux_2_28_aarch64")


class ClosurePackage(StrictModel):
    """One wheel of the closure, exactly the file to download and install."""

    name: str = Field(description="normalized project name")
    version: str
    filename: str
    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class PythonClosure(StrictModel):
    """Every wheel an offline install needs, resolved for one target (`envkit lock`)."""

    target: ClosureTarget
    roots: list[str] = Field(description="the requirement strings the closure was resolved from")
    index_url: str = Field(description="the index the closure was resolved against")
    extra_index_urls: list[str] = []
    find_links: list[str] = []
    excluded: list[str] = Field([], description="projects left out on purpose, with what only they need (e.g. torch)")
    resolver: str = Field(description="the tool and version that resolved it, e.g. uv 0.13.9")
    packages: list[ClosurePackage] = Field(description="sorted by name")


class PythonSection(StrictModel):
    python: str
    indexes: dict[str, str] = Field(description="index id -> URL")
    requirements: list[PythonPin]
    cann_runtime: list[str] = Field(description="CANN's own Python dependencies (pip requirement strings)")
    closure: PythonClosure | None = Field(None, description="the target's full closure (filled by `envkit lock`)")
    controller: PythonClosure | None = Field(
        None, description="envkit's own runtime closure for the controller (filled by `envkit lock`)"
    )


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

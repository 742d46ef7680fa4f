"""The compatibility matrix schema (matrices/*.yaml). Data only: no I/O, no logic beyond lookups."""

import re
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

from pydantic import Field, StringConstraints, field_validator, model_validator

from envkit.models.base import Sourced, StrictModel
from envkit.models.hccl import HcclData
from envkit.models.methods import TorchNpuReleaseMethods
from envkit.models.safe import LabelValue, NpuCount, NpuCountKey
from envkit.versions import InvalidVersion, parse, parse_ranges
from envkit.versions import satisfies as versions_satisfies

_T = TypeVar("_T")


def _checked(check: Callable[[_T], object], value: _T) -> _T:
    """`value` when `check(value)` raises no InvalidVersion; a pydantic ValueError otherwise."""
    try:
        check(value)
    except InvalidVersion as exc:
        raise ValueError(str(exc)) from None
    return value


def _check_version(value: str) -> str:
    return _checked(parse, value)


class ChipKubernetes(Sourced):
    """How MindCluster (Huawei's Kubernetes device plugin, Volcano plugin and Ascend Operator) names and schedules
    the chip: the node labels a pod selects, the rank-table ConfigMap's label, the NPUs a pod may request. With
    its own source: `envkit k8s render` quotes it when it refuses a layout."""

    accelerator: LabelValue = Field(description="value of the `accelerator` node label the device plugin sets")
    accelerator_type: dict[NpuCountKey, LabelValue] = Field(
        {},
        description='value of the `accelerator-type` node label of a server with N NPUs, by N ("8", "16"): a pod '
        "that takes N selects it; empty: it differs per product (`envkit k8s render --accelerator-type`)",
    )
    ring_controller: LabelValue = Field(
        description="value of the `ring-controller.atlas` label of the job and its rank-table ConfigMap"
    )
    pod_npus: list[NpuCount] = Field(min_length=1, max_length=64, description="the NPUs one pod may request on one node")
    multi_node_pod_npus: list[NpuCount] = Field(
        [], max_length=64, description="the NPUs per pod of a training job across nodes; empty: one node only"
    )
    sp_block: NpuCount | None = Field(
        None, description="the SuperPoD `sp-block` annotation (NPUs per pod with it); null: not a SuperPoD"
    )

    @model_validator(mode="after")
    def _counts_agree(self) -> "ChipKubernetes":
        allowed = set(self.pod_npus)
        for what, counts in (
            ("multi_node_pod_npus", self.multi_node_pod_npus),
            ("accelerator_type", [int(k) for k in self.accelerator_type]),
            ("sp_block", [] if self.sp_block is None else [self.sp_block]),
        ):
            extra = sorted(set(counts) - allowed)
            if extra:
                raise ValueError(f"{what} names NPU counts a pod cannot request (pod_npus): {extra}")
        if self.pod_npus != sorted(set(self.pod_npus)) or self.multi_node_pod_npus != sorted(set(self.multi_node_pod_npus)):
            raise ValueError("pod_npus and multi_node_pod_npus are ascending, each count once")
        return self


class Chip(Sourced):
    id: str
    name: str
    products: list[str]
    npu_smi_names: list[str]
    driver_file: str | None = Field(None, description="NPU driver installer name pattern; null where not confirmed")
    firmware_file: str | None = Field(None, description="NPU firmware installer name pattern; null where not confirmed")
    hdk_zip_token: str | None = Field(None, description="<chip> in the signed Ascend-hdk-<chip>-npu_<ver>_linux-<arch>.zip")
    kernels_file: str | None = Field(None, description="operator package name pattern before CANN 8.5.0")
    ops_file: str | None = Field(None, description="operator package name pattern from CANN 8.5.0")
    soc_version: str | None = None
    image_tag: str | None = Field(None, description="chip token of the official CANN container image tags")
    davinci_devices: int | None = Field(description="/dev/davinciN nodes on one host")
    mount_driver_dir: bool = Field(False, description="the container needs the whole driver directory mounted")
    # How hosts and users name the chip: data, so that a new chip row needs no code (resolve's aliases, doctor's
    # npu-smi, kernel-folder and operator-package parsing all read these).
    aliases: list[str] = Field([], description="other names a user writes for the chip; resolve accepts them")
    npu_smi_patterns: list[str] = Field(
        [], description="regexes, full match on the npu-smi Name in lower case without an 'ascend' prefix"
    )
    npu_smi_multi_die: list[str] = Field(
        [], description="npu-smi names that mean this chip only with two chips per NPU or a Phy-ID column"
    )
    npu_smi_caveats: dict[str, str] = Field({}, description="npu-smi name -> what that name alone cannot tell")
    soc_names: list[str] = Field([], description="SOC folder names of its operator kernels (opp/.../tbe/kernel/<soc>)")
    package_patterns: list[str] = Field([], description="regexes, searched case-insensitively in its operator package names")
    hint: str | None = Field(None, description="said with every stack on this chip")
    device_plugin_resource: str | None = Field(
        None,
        pattern=r"^[a-z0-9.-]{1,63}/[A-Za-z0-9._-]{1,63}$",
        description="the extended resource Huawei's device plugin offers for it (Kubernetes); null: not sourced",
    )
    kubernetes: ChipKubernetes | None = Field(
        None, description="MindCluster's node labels and NPUs per pod for it (`envkit k8s render`); null: not sourced"
    )

    @field_validator("npu_smi_patterns", "npu_smi_multi_die", "package_patterns")
    @classmethod
    def _regexes_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return value


class ArchKubernetes(Sourced):
    """How MindCluster labels a node of the arch, with its source."""

    host_arch: LabelValue = Field(description="value of the `host-arch` node label")


class Arch(Sourced):
    id: Literal["aarch64", "x86_64"]
    hdk_file_arch: str = Field(description="arch spelling in HDK zip names (x86-64 vs x86_64)")
    kubernetes: ArchKubernetes | None = Field(
        None, description="MindCluster's node label for the arch (`envkit k8s render`); null: not sourced"
    )


class OperatingSystem(Sourced):
    id: str
    name: str
    family: Literal["debian", "rhel"]
    glibc: str
    system_python: str | None = Field(None, description="the python3 the OS ships (resolve prefers it)")
    arches: list[str]


class PythonRelease(Sourced):
    version: str

    _v = field_validator("version")(_check_version)


def _check_ranges(value: str | None) -> str | None:
    return value if value is None else _checked(parse_ranges, value)


class HdkPatch(Sourced):
    """A patch build of an HDK release as version.info spells it (``24.1.rc2.2``): accepted as its release."""

    version: str = Field(description="the patch's Version= / package_version, e.g. 24.1.rc2.2")
    chips: list[str] = Field([], description="the chips whose packages carry this patch; empty: not captured")
    compatible_firmware: str | None = Field(None, description="the patch driver's own compatible_version_fw")

    _v = field_validator("version")(_check_version)
    _r = field_validator("compatible_firmware")(_check_ranges)


class HdkRelease(Sourced):
    version: str
    aliases: list[str] = []
    package_version: str | None = Field(None, description="version spelling in the vendor's file names, e.g. 25.0.rc1.1")
    chip_package_versions: dict[str, str] = Field({}, description="per-chip file version where it differs (A3 25.0.rc1.3)")
    chips: list[str]
    firmware_version: str | None = Field(None, description="the firmware's own Version= (7.x); null where not captured")
    compatible_firmware: str | None = Field(None, description="driver version.info compatible_version_fw")
    compatible_driver: str | None = Field(None, description="firmware version.info compatible_version_drv")
    patches: list[HdkPatch] = Field([], description="patch builds of this release seen in the field (24.1.rc2.2)")

    _v = field_validator("version")(_check_version)
    _r = field_validator("compatible_firmware", "compatible_driver")(_check_ranges)


class CannRelease(Sourced):
    version: str
    file_version: str | None = Field(None, description="spelling in installer file names when it differs")
    chips: list[str]
    hdk_paired: list[str] = Field(description="the HDK releases of the vendor's version mapping")
    hdk_compatible: list[str] = Field([], description="further compatible HDK releases or series (25.5.X)")
    python: str | None = Field(None, description="Python range CANN supports; null where not stated")
    layout: Literal["toolkit-latest", "cann-versioned"]
    operator_package: Literal["kernels", "ops"]
    nnal: bool = Field(True, description="an NNAL release of the same version exists")
    prerelease: bool = False

    _v = field_validator("version")(_check_version)


class TorchNpuLine(Sourced):
    line: str = Field(description="TorchNPU (Ascend Extension for PyTorch) version, e.g. 7.3.0")
    cann_compatible: list[str]
    chips: list[str]


class TorchNpuRelease(TorchNpuReleaseMethods, Sourced):
    version: str
    line: str | None = Field(description="TorchNPU line; set with a null cann: the line is inferred (its CANN range applies)")
    torch: str
    cann: str | None = Field(None, description="the CANN of the vendor's version table (validated); null: none published")
    prerelease: bool = Field(False, description="an rc build: accepted when pinned, never picked by resolve")
    python: list[str] | None = Field(None, description="wheel tags on PyPI, as Python versions (on any arch); null: not captured")
    python_by_arch: dict[Literal["aarch64", "x86_64"], list[str]] | None = Field(
        None,
        description="the wheel tags per arch, where the arches differ (2.10.0.post6: cp312 on aarch64 only; derived "
        "from PyPI's files by `envkit matrix refresh`): an arch's Pythons are its list here; null: `python` on every arch",
    )
    manylinux: dict[str, str] = Field(description="glibc the wheels need, per arch")
    x86_64_torch_local: str | None = Field(None, description="local label the x86_64 wheel pins on torch (cpu)")
    on_pypi: bool = True

    _v = field_validator("version")(_check_version)

    @model_validator(mode="after")
    def _arches_differ(self) -> "TorchNpuRelease":
        by_arch = self.python_by_arch
        if by_arch is None:
            return self
        if self.python is None:
            raise ValueError("python_by_arch without python: python lists the wheels' Pythons on any arch")
        union = {p for tags in by_arch.values() for p in tags}
        if union != set(self.python):
            raise ValueError(f"python_by_arch names Pythons {sorted(union)}, python {self.python}: python is their union")
        if len(by_arch) < 2 or len({tuple(tags) for tags in by_arch.values()}) < 2:
            raise ValueError("python_by_arch is given only where the arches' Pythons differ (else python says it)")
        return self

    # pythons_on: TorchNpuReleaseMethods (shared with the plain record)


class Index(Sourced):
    id: str
    url: str


class TorchBuild(Sourced):
    """Where torch's CPU build comes from for one torch release and arch (an Ascend stack never takes a CUDA build)."""

    torch: str
    arch: Literal["aarch64", "x86_64"]
    index: str = Field(description="id of the index that serves the CPU build (`indexes`: pypi, pytorch-cpu)")
    local: str | None = Field(description="local label of the pin (cpu: torch==X+cpu); null: the plain X")

    _v = field_validator("torch")(_check_version)


class Rule(Sourced):
    """`when` every condition holds, every `requires` must hold (or the stack is refused when `forbid`)."""

    id: str
    when: dict[str, str | list[str]]
    requires: dict[str, str | list[str]] = {}
    forbid: bool = False
    message: str
    severity: Literal["error", "hint"] = "error"


class PackagePolicy(Sourced):
    name: str
    recommended: list[str]


class CannLayoutRule(Sourced):
    kind: Literal["toolkit-latest", "cann-versioned"]
    home: str
    set_env: list[str]
    env: dict[str, str]


class Installer(Sourced):
    component: Literal["driver", "firmware", "cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal"]
    flags: list[str]
    order: int


class PythonDeps(Sourced):
    requirements: list[str]


class VendorArtifact(StrictModel):
    component: Literal["cann", "hdk"]
    release: str
    kind: str
    chip: str | None = None
    arch: str | None = None
    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    url: str
    source: str


class BaseImage(Sourced):
    """A base image for `envkit image render`: the OS it provides and its digest (null: none published)."""

    os: str
    image: str = Field(description="repository:tag, e.g. docker.io/library/ubuntu:22.04")
    digest: str | None = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="index digest from a public source; null: not found")
    platforms: dict[Literal["aarch64", "x86_64"], Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]] = Field(
        {},
        description="the manifest digest of each arch's image in that index (linux/arm64, linux/amd64), from the same "
        "source: the image a build for that arch gets",
    )
    python: str | None = Field(None, description="minor version of the OS's own python3; null: not captured")


def _check_spec(value: str | None) -> str | None:
    """A PEP 440-style specifier (``>=3.10,<3.13``) as `versions.satisfies` reads it."""
    return value if value is None else _checked(lambda v: versions_satisfies("1.0", v), value)


class TransformersRequirement(Sourced):
    """The Transformers a vllm-ascend release installs with: its own Requires-Dist and its vLLM's, combined."""

    spec: str = Field(
        description="a PEP 440-style specifier: `==X` where the release pins exactly, a range (>=A,<=B) where it bounds"
    )

    @field_validator("spec")
    @classmethod
    def _spec(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an empty specifier: write the bounds (`==X`, `>=A,<=B`) or leave `transformers` out")
        return _checked(lambda v: versions_satisfies("1.0", v), value)


class VllmAscendPlatforms(Sourced):
    """The chips the vendor runs a vllm-ascend release on (its per-chip images and installation tabs), with the
    source that says so: a serving stack on one of them may use the release's torch_npu even where the TorchNPU
    line's own install guide leaves the chip out (the vendor runs it there)."""

    chips: list[str] = Field(description="chips the vendor runs the release on (its images, installation tabs)")
    without_triton_ascend: list[str] = Field(
        [], description="of those, the chips whose image installs no triton-ascend (the vendor uninstalls it there)"
    )


class VllmAscendDevice(Sourced):
    """A device family vllm-ascend builds for: its name in the package (`AscendDeviceType`, which a build writes into
    `vllm_ascend/_build_info.py` and the worker checks against the NPU at start), the chip it is, and the
    SOC_VERSION values that select it at build time (matrices/serving.yaml `vllm_ascend_devices`)."""

    device_types: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]{1,16}$")]] = Field(
        min_length=1, description="the family's names in vllm-ascend's AscendDeviceType, newest first (A2; _910B before 0.13)"
    )
    chip: str = Field(description="the chip id (`chips[].id`) of that family")
    soc_versions: list[str] = Field(
        min_length=1, description="SOC_VERSION prefixes (lower case) that build for it, e.g. ascend910b"
    )
    image_tag: str | None = Field(
        None,
        pattern=r"^[a-z0-9-]{0,16}$",
        description="the suffix of the vendor's image tag for the family, quay.io/ascend/vllm-ascend:v<version><image_tag>"
        " ('' for A2, '-a3'); None: not known",
    )


class DeviceBuild(Sourced):
    """The device a release's PyPI wheels are built for, as their `vllm_ascend/_build_info.py` says (derived by
    `envkit matrix refresh`): `__device_type__` (newer builds) or `__soc_version__` (older ones)."""

    device_type: str | None = Field(None, pattern=r"^[A-Za-z0-9_]{1,16}$", description="__device_type__, e.g. A2")
    soc_version: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,32}$", description="__soc_version__, e.g. ASCEND910B1")


class ChipSupport(Sourced):
    """The chips a release supports, with the source that says so."""

    chips: list[str] = Field(min_length=1, description="chip ids (`chips[].id`)")


class DocumentedPython(Sourced):
    """A Python bound a release's own documentation states beyond its Requires-Python, with the source that says so:
    vllm-ascend's versioning policy table (docs/source/community/versioning_policy.md in its sdist) says "Python >= 3.10,
    < 3.13" where the PKG-INFO of an sdist-only release says only ``>=3.10``. Resolve and validate apply it on top of
    `python`."""

    spec: str = Field(description="a PEP 440-style specifier, e.g. <3.13")

    _r = field_validator("spec")(_check_spec)


class VllmAscendRelease(Sourced):
    """One vllm-ascend release and the stack it was released with (matrices/serving.yaml)."""

    version: str = Field(description="vllm-ascend version (pip), e.g. 0.23.0 or 0.26.0rc1")
    vllm: str = Field(description="the vLLM release it pins (install vllm==X first, then vllm-ascend==X)")
    cann: str | None = Field(None, description="the CANN it was released with; null: a CANN the matrix lacks (see needs)")
    torch: str = Field(description="the torch version it pins")
    torch_npu: str | None = Field(None, description="the torch_npu it pins; null: a release the matrix lacks (see needs)")
    triton_ascend: str | None = Field(None, description="the triton-ascend it installs; null: none")
    transformers: TransformersRequirement | None = Field(
        None, description="the Transformers it and its vLLM accept (wheel METADATA Requires-Dist); null: none read"
    )
    python: str = Field(
        description="the Pythons it installs on: the range of its wheels' cp tags (`envkit matrix refresh` derives it), "
        "Requires-Python where PyPI has no wheel"
    )
    manylinux: dict[Literal["aarch64", "x86_64"], str] | None = Field(
        None,
        description="glibc its manylinux wheels need, per arch (derived from their tags by `envkit matrix refresh`); "
        "an arch absent: no wheel there; null: no wheel on PyPI (an sdist, built where it installs)",
    )
    python_documented: DocumentedPython | None = Field(
        None,
        description="a Python bound its documentation states beyond `python` (an sdist-only release's versioning "
        "table: <3.13 where PKG-INFO Requires-Python says >=3.10), with its source; both apply. null: none beyond it",
    )
    prerelease: bool = Field(False, description="an rc: accepted when pinned, never picked by resolve")
    sdist_only: bool = Field(
        False,
        description="PyPI serves only its sdist (pip builds it from source; `envkit lock` takes wheels only): "
        "accepted when pinned, never picked by resolve",
    )
    needs: list[str] = Field([], description="what the matrix lacks for this row to resolve (e.g. torch_npu 2.7.1.post1)")
    runs_on: VllmAscendPlatforms | None = Field(
        None,
        description="the chips the vendor runs it on, with its source; null: not stated (the TorchNPU line's chips apply)",
    )
    device_build: DeviceBuild | None = Field(
        None,
        description="the device its PyPI wheels are built for (derived from their `_build_info.py`); null: no wheel, "
        "or wheels without build info (built for any device)",
    )

    _v = field_validator("version", "vllm")(_check_version)
    _r = field_validator("python")(_check_spec)


class TritonAscendRelease(Sourced):
    """One triton-ascend release: the CANN it is bound to, its chips and Pythons, and where it is published."""

    version: str
    cann: list[str] = Field(description="the CANN releases it is bound to (versions strictly bound to CANN)")
    chips: list[str] = Field(description="chips it supports (Atlas A2/A3 only)")
    python: str | None = Field(None, description="Python range; null: not stated")
    manylinux: dict[Literal["aarch64", "x86_64"], str] | None = Field(
        None,
        description="glibc its manylinux wheels need, per arch (derived from PyPI's files by `envkit matrix refresh`); "
        "null: not captured (a release served by another index)",
    )
    index: str = Field(description="id of the index that serves it (`indexes`: pypi, ascend-pypi)")
    excludes: list[str] = Field(["triton"], description="distributions that must not be installed beside it")
    prerelease: bool = False

    _v = field_validator("version")(_check_version)
    _r = field_validator("python")(_check_spec)


class RayRelease(Sourced):
    """The Ray a range of vllm-ascend releases serves across nodes with (vllm-ascend's "Ray Distributed" way: `ray
    start` on every node, `vllm serve --distributed-executor-backend ray`): the bound their images install and the
    exact release envkit pins, with the Pythons and glibc of its wheels (matrices/serving.yaml `ray`)."""

    version: str = Field(description="the Ray release envkit pins (`ray==X` in a multi-node serving lock)")
    vllm_ascend: str = Field(description="the vllm-ascend releases it serves: a PEP 440-style range, e.g. >=0.9.1rc3")
    spec: str = Field(description="the Ray those releases need: the bound their images install, e.g. >=2.47.1,<=2.48.0")
    python: str = Field(description="the Pythons its wheels are built for (their cp tags), e.g. >=3.9,<3.14")
    manylinux: dict[Literal["aarch64", "x86_64"], str] = Field(
        description="glibc its manylinux wheels need, per arch (from their tags: manylinux2014 = 2.17); an arch "
        "absent: no wheel there"
    )

    _v = field_validator("version")(_check_version)
    _r = field_validator("vllm_ascend", "spec", "python")(_check_spec)


class MindSpeedRelease(Sourced):
    """One MindSpeed release and the TorchNPU line, CANN, torch and Python it supports."""

    version: str = Field(description="MindSpeed release as its docs spell it (2.2.0_core_r0.12.1, 26.1.0)")
    torch_npu_lines: list[str] = Field(description="TorchNPU lines (torch_npu_lines[].line)")
    cann: list[str] = Field(description="CANN releases or series")
    torch: list[str] = Field([], description="torch versions; empty: any its TorchNPU line pins")
    python: str | None = Field(None, description="Python range; null: not stated")
    chips: ChipSupport | None = Field(None, description="the chips it supports, with its source; null: not stated")

    _r = field_validator("python")(_check_spec)


class Matrix(StrictModel):
    schema_version: Literal[1] = 1
    chips: list[Chip]
    arches: list[Arch]
    operating_systems: list[OperatingSystem]
    pythons: list[PythonRelease]
    hdk: list[HdkRelease]
    cann: list[CannRelease]
    torch_npu_lines: list[TorchNpuLine]
    torch_npu: list[TorchNpuRelease]
    indexes: list[Index]
    torch_builds: list[TorchBuild] = Field(
        [], description="per torch release and arch: the index of its CPU build and the pin spelling"
    )
    packages: list[PackagePolicy]
    cann_python_deps: PythonDeps
    installers: list[Installer]
    cann_layouts: list[CannLayoutRule]
    rules: list[Rule]
    artifacts: list[VendorArtifact]
    defaults: dict[str, str]
    images: list[BaseImage] = Field([], description="base images of `envkit image render` (matrices/images.yaml)")
    vllm_ascend: list[VllmAscendRelease] = Field([], description="vllm-ascend releases and their stack (matrices/serving.yaml)")
    triton_ascend: list[TritonAscendRelease] = Field(
        [], description="triton-ascend releases bound to CANN (matrices/serving.yaml)"
    )
    mindspeed: list[MindSpeedRelease] = Field([], description="MindSpeed releases (matrices/serving.yaml)")
    ray: list[RayRelease] = Field(
        [], description="the Ray of multi-node serving, per range of vllm-ascend releases (matrices/serving.yaml)"
    )
    vllm_ascend_devices: list[VllmAscendDevice] = Field(
        [], description="the device families vllm-ascend builds for, and their chips (matrices/serving.yaml)"
    )
    hccl: HcclData = Field(description="the HCCL facts per chip (matrices/hccl.yaml)")

"""The lock (envkit.lock): one validated stack and everything the later jobs need from it."""

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from envkit.models.base import OmitsAbsent, StrictModel
from envkit.models.rules import (
    artifact_names_match,
    built_the_known_way,
    file_is_the_package,
    https_only,
    mirror_prefix,
    urls_follow_the_policy,
)
from envkit.models.rules import (
    is_mirrored as is_mirrored,  # re-exported: the rule's old home
)
from envkit.models.rules import (
    mirror_refusal as mirror_refusal,
)
from envkit.models.safe import (
    AbsPath,
    EnvKey,
    EnvValue,
    Flag,
    Ident,
    LabelValue,
    NameGlob,
    NpuCount,
    NpuCountKey,
    PipName,
    PlainName,
    ProjectName,
    PythonMinor,
    Requirement,
    Sha256,
    Size,
    Text,
    Url,
    Version,
)
from envkit.models.stack import FullStack

ComponentName = Literal["driver", "firmware", "cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal"]


class Provenance(StrictModel):
    declared: bool
    origin: Literal["declared", "observed", "default", "derived"]
    rule: Text | None = None
    source: Text | None = None
    confidence: Literal["stated", "derived", "inferred"] | None = None


class RunFile(StrictModel):
    """The bare `.run` installer (community edition, or inside the signed zip)."""

    file: PlainName | None = Field(description="exact file name; null where the version in its name is not captured")
    pattern: NameGlob = Field(description="glob that finds it (inside the zip edition too)")
    sha256: Sha256 | None = None
    flags: list[Flag] = Field(max_length=32)


class ZipEdition(StrictModel):
    """The vendor's signed `.zip` edition that holds the `.run` installer."""

    file: PlainName
    sha256: Sha256
    url: Annotated[Url, AfterValidator(https_only)]
    source: Text


class Artifact(StrictModel):
    component: ComponentName
    version: Version
    order: int = Field(ge=0, le=99, description="position in a fresh install (driver, firmware, toolkit, ops/kernels, NNAL)")
    run: RunFile
    zip: ZipEdition | None = None
    firmware_version: Version | None = None

    # the model rules are plain functions (envkit.models.rules): the lock's plain reader calls the same ones
    _names_match = model_validator(mode="after")(artifact_names_match)

    package_version: Version | None = Field(
        None, description="driver/firmware: the version as the installed version.info writes it (e.g. 25.0.rc1.1)"
    )
    compatible: (
        Annotated[
            str, Field(pattern=r"^\[[0-9A-Za-z.]{1,32},[0-9A-Za-z.]{1,32}\](,\[[0-9A-Za-z.]{1,32},[0-9A-Za-z.]{1,32}\]){0,15}$")
        ]
        | None
    ) = Field(
        None,
        description="driver: its compatible_version_fw ranges; firmware: its compatible_version_drv ranges (null: not captured)",
    )


class CannLayout(StrictModel):
    kind: Literal["toolkit-latest", "cann-versioned"]
    home: AbsPath
    set_env: list[AbsPath] = Field(max_length=16)
    env: dict[EnvKey, EnvValue] = Field(max_length=64)


class PythonPin(StrictModel):
    name: PipName
    version: Version
    index: Ident | None = Field(None, description="index id when not the default (pytorch-cpu)")


class ClosureTarget(StrictModel):
    """The interpreter and platform a closure was resolved for."""

    python: PythonMinor = Field(description="Python minor version, e.g. 3.10")
    arch: Literal["aarch64", "x86_64"]
    glibc: str = Field(pattern=r"^2\.[0-9]{1,3}$", description="oldest glibc of the target (manylinux_2_<minor>)")
    platform: str = Field(pattern=r"^[a-z0-9_]{1,64}$", description="the most specific platform tag, e.g. manylinux_2_28_aarch64")


class BuiltFrom(StrictModel):
    """A wheel `envkit lock` built from its sdist, as the vendor builds it (vLLM for Ascend: `VLLM_TARGET_DEVICE=empty`,
    `envkit.artifacts.sdist`): the package's `url` is the sdist's; its sha256 and size are the built wheel's."""

    sdist: PlainName = Field(description="the sdist's file name")
    sdist_sha256: Sha256
    env: dict[EnvKey, EnvValue] = Field(max_length=16, description="the build settings (VLLM_TARGET_DEVICE, SOURCE_DATE_EPOCH)")
    command: Text = Field(description="how it was built, e.g. pip wheel --no-build-isolation --no-deps")
    torch: Version = Field(description="the torch the build ran against (the lock's CPU torch)")
    torch_sha256: Sha256 | None = Field(None, description="that torch wheel's sha256 (null: pip did not report it)")


class ClosurePackage(OmitsAbsent):
    """One wheel of the closure, exactly the file to download and install."""

    name: ProjectName = Field(description="normalized project name")
    version: Version
    filename: PlainName
    url: Url
    sha256: Sha256
    size: Size
    sha256_from: Literal["download"] | None = Field(
        None,
        description="`download`: the index published no sha256 for this file (an HTML index with an md5 fragment or "
        "none); `envkit lock` computed it from the file it downloaded (trust on first use). Absent: the index's own.",
    )

    built: BuiltFrom | None = Field(
        None,
        description="set: envkit built this wheel from the sdist at `url` with these settings (`envkit lock`); "
        "absent: the index's own wheel",
    )

    # absent unless set: a closure from an index that publishes every sha256 dumps exactly as before
    dump_drop_none: ClassVar[frozenset[str]] = frozenset({"sha256_from", "built"})

    _file_is_the_package = model_validator(mode="after")(file_is_the_package)
    _built_the_known_way = model_validator(mode="after")(built_the_known_way)


class PythonClosure(StrictModel):
    """Every wheel an offline install needs, resolved for one target (`envkit lock`)."""

    target: ClosureTarget
    roots: list[Requirement] = Field(max_length=1000, description="the requirement strings the closure was resolved from")
    index_url: Url = Field(description="the index the closure was resolved against")
    extra_index_urls: list[Url] = Field([], max_length=16)
    find_links: list[Text] = Field([], max_length=16)
    excluded: list[ProjectName] = Field([], description="projects left out on purpose, with what only they need (e.g. torch)")
    resolver: Text = Field(description="the tool and version that resolved it, e.g. uv 0.13.9")
    packages: list[ClosurePackage] = Field(max_length=5000, description="sorted by name")
    mirrors: list[Annotated[Url, AfterValidator(mirror_prefix)]] = Field(
        [],
        max_length=16,
        description="http:/file: URL prefixes the user gave as sources (`envkit lock --index-url` ...): the only places "
        "an http or file URL of this closure may point to; everything else is https",
    )

    _urls_follow_the_policy = model_validator(mode="after")(urls_follow_the_policy)


class ProjectRequirement(StrictModel):
    """One dependency of the user's project (`envkit lock --project`), as its file declares it."""

    name: ProjectName = Field(description="normalized project name")
    spec: Requirement = Field(description="the requirement as the closure was resolved from it (PEP 508, normalized)")
    source: Text = Field(description="where the project declares it: its file and line, e.g. requirements.txt:3")
    version: Version | None = Field(
        description="the version the closure holds; null: left out (--exclude) or its marker is false on the target"
    )


class ProjectDependencies(StrictModel):
    """The user's project whose dependencies joined the closure (`envkit lock --project PATH`), read statically by
    `envkit scan`'s reader (requirements*.txt, pyproject.toml, setup.cfg, setup.py literals, environment.yml)."""

    path: Text = Field(description="the project folder as given to `envkit lock --project`")
    files: list[Text] = Field(max_length=500, description="the dependency files read, relative to the project")
    requirements: list[ProjectRequirement] = Field(max_length=1000)
    extras: list[Text] = Field(
        [], max_length=64, description="the optional dependency groups chosen (`--project-extra`), normalized; [] none"
    )
    groups: list[Text] = Field(
        [], max_length=64, description="the dependency groups chosen (`--project-group`, PEP 735 or Poetry), normalized"
    )
    constraint_files: list[Text] = Field(
        [],
        max_length=500,
        description="the files the project's `-c` lines name, relative to the project: what they pin constrains the "
        "closure (passed to the resolver as constraints, never installed for their own sake)",
    )
    constraints: list[ProjectRequirement] = Field(
        [], max_length=1000, description="the constraints those files hold, each with its file and line"
    )


class PythonSection(OmitsAbsent):
    python: PythonMinor
    indexes: dict[Ident, Url] = Field(max_length=16, description="index id -> URL")
    requirements: list[PythonPin] = Field(max_length=64)
    cann_runtime: list[Requirement] = Field(max_length=64, description="CANN's own Python dependencies (pip requirement strings)")
    closure: PythonClosure | None = Field(None, description="the target's full closure (filled by `envkit lock`)")
    controller: PythonClosure | None = Field(
        None, description="envkit's own runtime closure for the controller (filled by `envkit lock`)"
    )
    project: ProjectDependencies | None = Field(
        None,
        description="the user's project whose dependencies the closure holds (`envkit lock --project`); absent: none",
    )

    # absent unless set: a lock without a project dumps exactly as before the field existed
    dump_drop_none: ClassVar[frozenset[str]] = frozenset({"project"})


class Validation(StrictModel):
    torch_npu_cann: bool = Field(description="torch_npu and CANN as in the vendor's table")
    cann_hdk: bool = Field(description="CANN and HDK as in the vendor's version mapping")


class BaseImage(OmitsAbsent):
    """The base image of the lock's OS, as the matrix pins it (null digest: none published)."""

    image: str = Field(pattern=r"^[a-z0-9][a-z0-9._/:-]{0,254}$", description="repository:tag")
    digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$", description="the multi-arch index digest")
    platform_digest: str | None = Field(
        None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="the manifest digest of the lock's arch in that index (FROM pins it); null: not published, FROM "
        "pins the index and --platform picks the arch",
    )
    python: PythonMinor | None = Field(None, description="minor version of the image's own python3; null: not captured")
    source: Text
    note: Text | None = None

    dump_drop_none: ClassVar[frozenset[str]] = frozenset({"platform_digest"})


Confidence = Literal["stated", "derived", "inferred"]


class LockSourced(StrictModel):
    """A matrix row's source as the lock carries it."""

    source: list[Text] = Field(min_length=1, max_length=8)
    confidence: Confidence


class HcclRankTable(LockSourced):
    version: Literal["1.0", "1.2", "2.0"]


class HcclEnvRule(LockSourced):
    name: EnvKey
    kind: Literal["int", "choice", "ip", "ifname"]
    min: int | None = None
    max: int | None = None
    aiv_max: int | None = None
    default: Text | None = None
    same_on_all_nodes: bool


class HcclOpExpansion(LockSourced):
    values: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,32}$")]] = Field(max_length=16)
    default: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,32}$")]
    on_unsupported: Literal["error", "default"]


class HcclIpPlan(LockSourced):
    rule: Literal["same_subnet", "die_pairs_differ"]
    ports: int = Field(ge=1, le=64)


class HcclFacts(StrictModel):
    """The HCCL facts of the lock's chip (matrices/hccl.yaml): what `launch` needs, so that it reads the lock alone."""

    rank_table: HcclRankTable | None = Field(description="null: no rank table format is recorded for the chip")
    op_expansion: HcclOpExpansion | None
    ip_plan: HcclIpPlan | None
    env: list[HcclEnvRule] = Field(max_length=32, description="the HCCL environment variables' rules")


class KubernetesFacts(LockSourced):
    """MindCluster's names for the lock's chip and arch (matrices/platform.yaml `chips[].kubernetes`,
    `arches[].kubernetes`): what `envkit k8s render` needs besides the device-plugin resource, so that it reads
    the lock alone."""

    accelerator: LabelValue = Field(description="the `accelerator` node label")
    accelerator_type: dict[NpuCountKey, LabelValue] = Field(
        max_length=16,
        description="the `accelerator-type` node label of a server with N NPUs, by N; empty: it differs per product",
    )
    host_arch: LabelValue | None = Field(description="the `host-arch` node label of the lock's arch; null: not sourced")
    ring_controller: LabelValue = Field(description="the `ring-controller.atlas` label of a job and its rank table")
    pod_npus: list[NpuCount] = Field(min_length=1, max_length=64, description="the NPUs one pod may request")
    multi_node_pod_npus: list[NpuCount] = Field(
        max_length=64, description="the NPUs per pod of a training job across nodes; empty: one node only"
    )
    sp_block: NpuCount | None = Field(description="the SuperPoD `sp-block` annotation; null: not a SuperPoD")
    note: Text | None = None


class Platform(OmitsAbsent):
    """Facts of the lock's chip and OS that the jobs need (image, provision, launch, Kubernetes), copied from the
    matrix."""

    os_family: Literal["debian", "rhel"]
    glibc: str = Field(pattern=r"^2\.[0-9]+$", description="the OS's glibc")
    npu_smi_names: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,32}$")]] = Field(
        max_length=16, description="names `npu-smi info` prints for the chip"
    )
    davinci_devices: int | None = Field(ge=1, le=64, description="/dev/davinciN nodes on one host (null: per card)")
    mount_driver_dir: bool = Field(description="a container needs the whole driver directory mounted")
    base_image: BaseImage | None = Field(None, description="null: the matrix has no base image for the OS")
    device_plugin_resource: str | None = Field(
        pattern=r"^[a-z0-9.-]{1,63}/[A-Za-z0-9._-]{1,63}$",
        description="the Kubernetes extended resource of Huawei's device plugin for the chip; null: not sourced",
    )
    hccl: HcclFacts
    kubernetes: KubernetesFacts | None = Field(
        None,
        description="MindCluster's node labels and NPUs per pod for the chip (`envkit k8s render`); absent: the "
        "matrix has none for the chip, or the lock is older (resolve it again)",
    )

    # absent unless set: the lock of a chip without Kubernetes facts dumps exactly as before they existed
    dump_drop_none: ClassVar[frozenset[str]] = frozenset({"kubernetes"})


LOCK_SCHEMA_VERSION = 3


class Lock(StrictModel):
    schema_version: Literal[3] = 3
    envkit_version: Version
    matrix_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    generated_by: Text
    stack: FullStack
    validated: Validation
    provenance: dict[Ident, Provenance] = Field(max_length=32)
    platform: Platform
    layout: CannLayout
    artifacts: list[Artifact] = Field(max_length=16)
    python: PythonSection
    hints: list[Text] = Field([], max_length=64)

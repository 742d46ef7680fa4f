"""Derive a lock from a resolution: the stack's artifacts, layout, Python pins, platform facts and provenance.

The lock is built as plain records (`envkit.lock.records`, generated from the lock models) from the matrix rows the
resolution chose: no pydantic on `envkit resolve`'s path. Their values come from the matrix, which envkit trusts and
checks itself (`envkit matrix check`); a test validates every derived lock against the pydantic schema
(`envkit.models.lock.Lock`), which holds every lock that is read.

This is the one place where a lock meets the matrix; `envkit.lock.file` only reads and writes the lock, and the
jobs (image, bundle, provision) read the lock alone. `check_lock` derives a lock again from a lock's stack and names
every field that differs (what it derives is remembered per matrix digest and stack); `gate` is that check as the
gate of a `LockCheck`, and `matrix_check()` the check the command line passes to every lock it reads, so that every
command that reads a lock refuses an edited one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

from envkit import __version__, versions
from envkit.core.matrix import LoadedMatrix, SourcedRow, load_matrix
from envkit.core.matrix_records import Arch, CannRelease, Chip, HdkRelease, TorchNpuRelease, VendorArtifact
from envkit.core.resolve import Chosen, Pin, Resolution, hints_for, solve
from envkit.errors import BadInput
from envkit.lock.records import (
    Artifact,
    BaseImage,
    CannLayout,
    FullStack,
    HcclEnvRule,
    HcclFacts,
    HcclIpPlan,
    HcclOpExpansion,
    HcclRankTable,
    KubernetesFacts,
    Lock,
    Platform,
    Provenance,
    PythonPin,
    PythonSection,
    RunFile,
    Validation,
    ZipEdition,
)
from envkit.lock.text import plain
from envkit.models.stackkeys import ALL_KEYS, FRAMEWORK_KEYS, STACK_KEYS, pin_flag
from envkit.records import fields, replace
from envkit.verdict import Confidence

if TYPE_CHECKING:
    from envkit.lock.file import Edited, LockCheck
    from envkit.models.lock import Lock as LockModel
    from envkit.models.report import ValidationReport

ComponentName = Literal["driver", "firmware", "cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal"]


def hdk_file_version(h: HdkRelease, chip: str) -> str:
    """The version an HDK release's installer files carry for `chip` (the chip's own spelling, else the row's)."""
    if chip in h.chip_package_versions:
        return h.chip_package_versions[chip]
    return h.package_version or h.version.replace("RC", "rc")


def _zip(lm: LoadedMatrix, component: str, release: str, kind: str, chip: str | None, arch: str | None) -> ZipEdition | None:
    for a in lm.model.artifacts:
        if (
            a.component == component
            and versions.same(a.release, release)
            and a.kind == kind
            and (chip is None or a.chip == chip)
            and (arch is None or a.arch == arch)
        ):
            return _edition(a)
    return None


def _edition(a: VendorArtifact) -> ZipEdition:
    return ZipEdition(file=a.file, sha256=a.sha256, url=a.url, source=a.source)


def _flags(lm: LoadedMatrix, component: str) -> tuple[list[str], int]:
    for inst in lm.model.installers:
        if inst.component == component:
            return list(inst.flags), inst.order
    raise KeyError(component)


def _artifact(
    lm: LoadedMatrix,
    component: ComponentName,
    version: str,
    file: str | None,
    pattern: str,
    zip: ZipEdition | None,
    firmware_version: str | None = None,
) -> Artifact:
    """One installer of the lock: its `.run` (exact name and glob), install flags and order, and the signed zip."""
    flags, order = _flags(lm, component)
    return Artifact(
        component=component,
        version=version,
        order=order,
        run=RunFile(file=file, pattern=pattern, flags=flags),
        zip=zip,
        firmware_version=firmware_version,
    )


def build_artifacts(lm: LoadedMatrix, stack: dict[str, str], rows: Chosen) -> list[Artifact]:
    """The installers of the stack, from the rows the resolution chose (`rows`) and the matrix's artifact and
    installer tables."""
    chip, arch, hdk_arch = rows.chip, stack["arch"], rows.arch.hdk_file_arch
    out: list[Artifact] = []
    # driver and firmware: one signed zip per chip and arch holds both
    if chip.driver_file:
        driver_v = hdk_file_version(rows.driver, chip.id)
        zip_drv = _zip(lm, "hdk", stack["driver"], "npu", chip.hdk_zip_token, arch) if chip.hdk_zip_token else None
        drv = _artifact(
            lm,
            "driver",
            stack["driver"],
            chip.driver_file.format(version=driver_v, hdk_arch=hdk_arch),
            chip.driver_file.format(version="*", hdk_arch=hdk_arch),
            zip_drv,
        )
        out.append(replace(drv, package_version=driver_v.lower(), compatible=rows.driver.compatible_firmware))
    if chip.firmware_file:
        fw = rows.firmware
        fw_version = fw.firmware_version
        zip_fw = _zip(lm, "hdk", stack["firmware"], "npu", chip.hdk_zip_token, arch) if chip.hdk_zip_token else None
        out.append(
            _artifact(
                lm,
                "firmware",
                stack["firmware"],
                chip.firmware_file.format(firmware=fw_version) if fw_version else None,
                chip.firmware_file.format(firmware="*"),
                zip_fw,
                firmware_version=fw_version,
            )
        )
        out[-1] = replace(out[-1], package_version=(fw.package_version or fw.version).lower(), compatible=fw.compatible_driver)
    # CANN: the toolkit, the operator package of the chip, NNAL; file name templates take {version} and {arch}
    cann = rows.cann
    file_version = cann.file_version or cann.version

    def cann_artifact(component: ComponentName, template: str, kind: str, chip_id: str | None = None) -> Artifact:
        return _artifact(
            lm,
            component,
            cann.version,
            template.format(version=file_version, arch=arch),
            template.format(version="*", arch=arch),
            _zip(lm, "cann", cann.version, kind, chip_id, arch),
        )

    out.append(cann_artifact("cann-toolkit", "Ascend-cann-toolkit_{version}_linux-{arch}.run", "toolkit"))
    op_template = chip.ops_file if cann.operator_package == "ops" else chip.kernels_file
    if op_template:
        component: ComponentName = "cann-ops" if cann.operator_package == "ops" else "cann-kernels"
        out.append(cann_artifact(component, op_template, cann.operator_package, chip.id))
    if cann.nnal:
        out.append(cann_artifact("cann-nnal", "Ascend-cann-nnal_{version}_linux-{arch}.run", "nnal"))
    return sorted(out, key=lambda a: (a.order, a.component))


def build_platform(lm: LoadedMatrix, stack: dict[str, str], rows: Chosen) -> Platform:
    """What the jobs need to know about the lock's chip and OS, so that they never read the matrix."""
    chip, osrow = rows.chip, rows.os
    row = next((i for i in lm.model.images if i.os == osrow.id), None)
    base = None
    if row is not None:
        base = BaseImage(
            image=row.image,
            digest=row.digest,
            platform_digest=row.platforms.get(stack["arch"]),  # type: ignore[call-overload]
            python=row.python,
            source=row.source_text,
            note=row.note,
        )
    return Platform(
        os_family=osrow.family,
        glibc=osrow.glibc,
        npu_smi_names=list(chip.npu_smi_names or []),
        davinci_devices=chip.davinci_devices,
        mount_driver_dir=chip.mount_driver_dir,
        base_image=base,
        device_plugin_resource=chip.device_plugin_resource,
        hccl=build_hccl(lm, chip.id),
        kubernetes=build_kubernetes(chip, rows.arch),
    )


# weakest last: a fact drawn from two rows is as sure as the less sure of them
_CONFIDENCE_ORDER: tuple[Confidence, ...] = ("stated", "derived", "inferred")


def build_kubernetes(chip: Chip, arch: Arch | None) -> KubernetesFacts | None:
    """The chip's MindCluster facts (`chips[].kubernetes`) and the arch's `host-arch` label (`arches[].kubernetes`;
    `arch` None: an arch the matrix does not know), with both rows' sources and the weaker confidence; None where the
    chip has none."""
    k8s = chip.kubernetes
    if k8s is None:
        return None
    host = arch.kubernetes if arch is not None else None
    rows: list[SourcedRow] = [k8s] if host is None else [k8s, host]
    return KubernetesFacts(
        source=[line for row in rows for line in row.sources],
        confidence=max((row.confidence for row in rows), key=_CONFIDENCE_ORDER.index),
        accelerator=k8s.accelerator,
        accelerator_type=dict(k8s.accelerator_type),
        host_arch=None if host is None else host.host_arch,
        ring_controller=k8s.ring_controller,
        pod_npus=list(k8s.pod_npus),
        multi_node_pod_npus=list(k8s.multi_node_pod_npus),
        sp_block=k8s.sp_block,
        note=k8s.note,
    )


# an env rule's own fields, which the lock copies from the matrix row (its source and confidence: `src` below)
_ENV_FIELDS = set(fields(HcclEnvRule)) - {"source", "confidence"}


def build_hccl(lm: LoadedMatrix, chip: str) -> HcclFacts:
    """The chip's HCCL facts (matrices/hccl.yaml): its rank table, op expansion modes, IP plan, and the env rules."""
    return hccl_facts(lm.model.hccl, chip)


def hccl_facts(h: Any, chip: str) -> HcclFacts:
    """The lock's HCCL facts of `chip` from the matrix's HCCL section `h` (its records, or `envkit.fleet.data`'s
    HcclData of the same rows: both carry the lookups of `envkit.models.methods.HcclDataMethods`)."""

    def src(row: SourcedRow) -> dict[str, Any]:
        return {"source": row.sources, "confidence": row.confidence}

    rt, op, ip = h.rank_table(chip), h.op_modes(chip), h.ip_plan(chip)
    return HcclFacts(
        rank_table=None if rt is None else HcclRankTable(version=rt.version, **src(rt)),
        op_expansion=None
        if op is None
        else HcclOpExpansion(values=list(op.values), default=op.default, on_unsupported=op.on_unsupported, **src(op)),
        ip_plan=None if ip is None else HcclIpPlan(rule=ip.rule, ports=ip.ports, **src(ip)),
        env=[HcclEnvRule(**{f: getattr(r, f) for f in _ENV_FIELDS}, **src(r)) for r in h.env],
    )


def upgrade(data: dict[str, Any], filename: str) -> tuple[dict[str, Any], list[str]] | None:
    """Schema 2 -> 3 (the lock module's migration seam calls it): `platform.device_plugin_resource`,
    `platform.hccl` and (where the matrix has them) `platform.kubernetes` derived from the lock's chip and arch;
    None where the chip is unknown (the schema check then refuses)."""
    from envkit.core.matrix import load_matrix

    stack, platform = data.get("stack"), data.get("platform")
    if data.get("schema_version") != 2 or not isinstance(stack, dict) or not isinstance(platform, dict):
        return None
    lm = load_matrix()
    chip_id = stack.get("chip")
    chip = lm.chips.get(chip_id) if isinstance(chip_id, str) else None
    if chip is None:
        return None
    lifted = {**platform, "device_plugin_resource": chip.device_plugin_resource, "hccl": plain(build_hccl(lm, chip.id))}
    fields = ["platform.device_plugin_resource", "platform.hccl"]
    arch = stack.get("arch")
    k8s = build_kubernetes(chip, next((a for a in lm.model.arches if a.id == arch), None)) if isinstance(arch, str) else None
    if k8s is not None:  # optional in schema 3 (a chip without them has none): lifted where the matrix has them
        lifted["kubernetes"] = plain(k8s)
        fields.append("platform.kubernetes")
    return {**data, "schema_version": 3, "platform": lifted}, fields


def build_layout(lm: LoadedMatrix, cann: CannRelease) -> CannLayout:
    """Where the CANN release installs and what its set_env sets (its row's layout, filled from the layout table)."""
    rule = next(r for r in lm.model.cann_layouts if r.kind == cann.layout)
    home = rule.home.format(version=cann.version)
    return CannLayout(
        kind=rule.kind,
        home=home,
        set_env=[s.format(version=cann.version) for s in rule.set_env],
        env={k: v.format(home=home, version=cann.version) for k, v in sorted(rule.env.items())},
    )


def torch_spec(stack: dict[str, str], rows: Chosen) -> tuple[str, str | None]:
    """The exact torch version to install and the index it comes from: torch's CPU build for the arch
    (`rows.torch_build`: `X+cpu` from the PyTorch CPU index, or PyPI's plain `X` where that is a CPU build);
    None: the default index. Without a row, the x86_64 `+label` the torch_npu wheel pins."""
    public = versions.parse(stack["torch"]).public
    build = rows.torch_build
    if build is not None:
        version = f"{public}+{build.local}" if build.local else public
        return version, (None if build.index == "pypi" else build.index)
    t = rows.torch_npu
    if stack["arch"] == "x86_64" and t.x86_64_torch_local:
        return f"{public}+{t.x86_64_torch_local}", "pytorch-cpu"
    return public, None


def _torch_build_rule(stack: dict[str, str], rows: Chosen) -> str:
    build = rows.torch_build
    if build is None:
        return ""
    spelling = f"torch=={torch_spec(stack, rows)[0]}"
    return f"; its {stack['arch']} CPU build {spelling} from {build.index} (torch_builds, {build.confidence})"


# The index that serves the torch_npu releases PyPI lacks (`on_pypi: false`, e.g. 2.7.1.post1 of vllm-ascend 0.11.0).
TORCH_NPU_VENDOR_INDEX = "ascend-pypi"


def torch_npu_index(row: TorchNpuRelease) -> str | None:
    """The index of the torch_npu pin: None (PyPI) unless its row says PyPI does not serve it
    (matrices/torch_npu.yaml `torch_npu[].on_pypi`); then the Ascend pip mirror."""
    return None if row.on_pypi else TORCH_NPU_VENDOR_INDEX


def framework_pins(stack: dict[str, str], rows: Chosen) -> list[PythonPin]:
    """The serving pins in the vendor's install order (`vllm==X`, then `vllm-ascend==X`; triton-ascend from the index
    its row names: 3.2.1/3.2.2 only on the Ascend index), then Ray where the stack serves across nodes (`ray==X`, the
    release matrices/serving.yaml `ray` pins for its vllm-ascend; the vendor's images install it last, from PyPI).
    MindSpeed installs from its git release: no pin."""
    pins = []
    if stack.get("vllm"):
        pins.append(PythonPin(name="vllm", version=stack["vllm"]))
    if stack.get("vllm_ascend"):
        pins.append(PythonPin(name="vllm-ascend", version=stack["vllm_ascend"]))
    if rows.triton_ascend is not None:
        row = rows.triton_ascend
        pins.append(PythonPin(name="triton-ascend", version=row.version, index=None if row.index == "pypi" else row.index))
    if rows.ray is not None:
        pins.append(PythonPin(name="ray", version=rows.ray.version))
    return pins


def build_python(lm: LoadedMatrix, stack: dict[str, str], rows: Chosen) -> PythonSection:
    torch_version, torch_index = torch_spec(stack, rows)
    pins = [
        PythonPin(name="torch", version=torch_version, index=torch_index),
        PythonPin(name="torch_npu", version=stack["torch_npu"], index=torch_npu_index(rows.torch_npu)),
        PythonPin(name="numpy", version=stack["numpy"]),
        PythonPin(name="transformers", version=stack["transformers"]),
        PythonPin(name="accelerate", version=stack["accelerate"]),
    ]
    pins += framework_pins(stack, rows)
    indexes = {"pypi": lm.index_url("pypi")}
    for index in [torch_index, *(p.index for p in pins)]:
        if index:
            indexes[index] = lm.index_url(index)
    return PythonSection(
        python=stack["python"],
        indexes=indexes,
        requirements=pins,
        cann_runtime=list(lm.model.cann_python_deps.requirements),
    )


def _framework_provenance(s: dict[str, str], rows: Chosen) -> dict[str, tuple[str, str, Confidence | None]]:
    out: dict[str, tuple[str, str, Confidence | None]] = {}
    va = rows.vllm_ascend
    if va is not None:
        out["vllm_ascend"] = (f"newest vllm-ascend release that fits (vllm_ascend/{va.version})", va.source_text, va.confidence)
        out["vllm"] = (f"vllm_ascend/{va.version} pins vLLM {va.vllm}", va.source_text, va.confidence)
        tf = va.transformers
        if tf is not None:
            rule = f"newest Transformers that fits the rules and vllm_ascend/{va.version}.transformers {tf.spec}"
            out["transformers"] = (rule, tf.source_text, tf.confidence)
    ta = rows.triton_ascend
    if ta is not None:
        rule = f"vllm_ascend/{va.version} installs triton-ascend {ta.version}" if va else f"triton_ascend/{ta.version}"
        out["triton_ascend"] = (f"{rule}, bound to CANN {', '.join(ta.cann)}", ta.source_text, ta.confidence)
    ray = rows.ray
    if ray is not None:
        rule = (
            f"ray/{ray.version}: vllm-ascend {s['vllm_ascend']} serves across nodes with Ray (its images install "
            f"ray {ray.spec}; the matrix pins {ray.version} for vllm_ascend {ray.vllm_ascend})"
        )
        out["ray"] = (rule, ray.source_text, ray.confidence)
    ms = rows.mindspeed
    if ms is not None:
        out["mindspeed"] = (f"newest MindSpeed release that fits (mindspeed/{ms.version})", ms.source_text, ms.confidence)
    return out


def _provenance(lm: LoadedMatrix, res: Resolution) -> dict[str, Provenance]:
    out: dict[str, Provenance] = {}
    s, rows = res.stack, res.rows
    t, c, h, fw, osrow = rows.torch_npu, rows.cann, rows.driver, rows.firmware, rows.os
    derived: dict[str, tuple[str, str, Confidence | None]] = {
        "torch_npu": (f"torch_npu/{t.version}", t.source_text, t.confidence),
        "torch": (f"torch_npu/{t.version} pins torch=={t.torch}" + _torch_build_rule(s, rows), t.source_text, t.confidence),
        "cann": (
            f"torch_npu/{t.version} -> CANN {c.version}" + (" (vendor table)" if res.validated_cann else " (compatible line)"),
            c.source_text,
            c.confidence,
        ),
        "driver": (f"cann/{c.version} -> HDK {h.version}", h.source_text, h.confidence),
        "firmware": (
            f"hdk/{s['firmware']}: firmware of the same HDK release",
            fw.source_text,
            fw.confidence,
        ),
        "python": (
            (f"the python3 {osrow.name} ships" if osrow.system_python == s["python"] else "newest Python")
            + f" with torch_npu {t.version} wheels and CANN {c.version} support",
            t.source_text + "; " + osrow.source_text,
            "derived",
        ),
        "numpy": ("newest recommended numpy that fits the rules", "matrices/python_packages.yaml", None),
        "transformers": ("newest recommended Transformers that fits the rules", "matrices/python_packages.yaml", None),
        "accelerate": ("newest recommended Accelerate that fits the rules", "matrices/python_packages.yaml", None),
    }
    derived.update(_framework_provenance(s, rows))
    va = rows.vllm_ascend
    line = lm.lines.get(t.line) if t.line else None
    if va is not None and va.runs_on is not None and (line is None or s["chip"] not in line.chips):
        # the chip is outside the TorchNPU line: the torch_npu is taken because the vendor runs vllm-ascend with it there
        derived["torch_npu"] = (
            f"torch_npu/{t.version}: chip {s['chip']} by vllm_ascend/{va.version}.runs_on (TorchNPU {t.line} leaves it out)",
            f"{va.runs_on.source_text}; {t.source_text}",
            va.runs_on.confidence,
        )
    defaults = lm.model.defaults
    for key in [*STACK_KEYS, *(k for k in FRAMEWORK_KEYS if k in s)]:
        pin = res.pins.get(key)
        if pin is not None:
            out[key] = Provenance(declared=pin.origin == "declared", origin=pin.origin, source=pin.where or "input")
        elif key in ("chip", "arch", "os"):
            if defaults.get(key) == s[key]:
                out[key] = Provenance(declared=False, origin="default", rule="defaults", source="matrices/platform.yaml")
            else:
                out[key] = Provenance(declared=False, origin="derived", rule="first that fits", source="matrices/platform.yaml")
        else:
            rule, source, conf = derived[key]
            out[key] = Provenance(declared=False, origin="derived", rule=rule, source=source, confidence=conf)
    return out


def derive(lm: LoadedMatrix, res: Resolution, generated_by: str) -> Lock:
    """The lock of a resolution as plain records (`envkit.lock.records`): what `envkit resolve` writes
    (`envkit.lock.text`) and the gate compares, without pydantic."""
    stack, rows = dict(res.stack), res.rows
    stack["torch"] = torch_spec(stack, rows)[0]
    return Lock(
        envkit_version=__version__,
        matrix_digest=lm.digest,
        generated_by=generated_by,
        stack=FullStack(**stack),
        validated=Validation(torch_npu_cann=res.validated_cann, cann_hdk=res.validated_hdk),
        provenance=_provenance(lm, res),
        platform=build_platform(lm, stack, rows),
        layout=build_layout(lm, rows.cann),
        artifacts=build_artifacts(lm, res.stack, rows),
        python=build_python(lm, res.stack, rows),
        hints=hints_for(lm, res.stack, res.pins, rows),
    )


def build_lock(lm: LoadedMatrix, res: Resolution, generated_by: str) -> LockModel:
    """The lock of a resolution as the pydantic model, held to the schema (for library callers that go on to a job:
    write it, lock its closure); `derive` gives the plain records."""
    from envkit.models.lock import Lock as LockModel

    return LockModel.model_validate(plain(derive(lm, res, generated_by)))


# --- `envkit resolve` as one call ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResolveRequest:
    """What `envkit resolve` was asked for: a stack file, the pins of the command line (key, value; in the order of
    its options, which is the order `generated_by` records them in) and a workload."""

    file: Path | None = None
    pins: tuple[tuple[str, str], ...] = ()
    workload: str | None = None


@dataclass(frozen=True)
class Resolved:
    """The best valid full stack's lock, written to `output` where one was given (`text`: the lock's YAML), or,
    where no stack is valid, the report that says why (`lock` and `text` None)."""

    lock: Lock | None = None
    text: str | None = None
    report: ValidationReport | None = None


def resolve_lock(request: ResolveRequest, output: Path | None = None) -> Resolved:
    """Complete the request's (partial) stack into the best valid full stack and its lock; the lock's text is written
    to `output` (atomically) unless it is None. The command line's pins override the stack file's."""
    import shlex

    from envkit.core.resolve import framework_keys, pins_from_mapping, validate_pins
    from envkit.core.stackfile import read_stack_file
    from envkit.lock.text import lock_text

    lm = load_matrix()
    values: dict[str, str] = {}
    where: dict[str, str] = {}
    cmd = ["envkit", "resolve"]
    if request.file is not None:
        values, where = read_stack_file(request.file)
        cmd += ["-f", str(request.file)]
    for key, value in request.pins:
        flag = pin_flag(key)
        values[key], where[key] = value, flag
        cmd += [flag, value]
    if request.workload is not None:
        cmd += ["--workload", request.workload]
    pinned = pins_from_mapping(lm, values, where=where)
    res = solve(lm, pinned, framework_keys(pinned, request.workload))
    if res is None:
        return Resolved(report=validate_pins(lm, pinned, request.workload))
    lock = derive(lm, res, shlex.join(cmd))
    text = lock_text(plain(lock))
    if output is not None:
        from envkit.io.outputs import atomic_write_text  # a lock to stdout needs none of it (tempfile: start-up)

        atomic_write_text(output, text)
    return Resolved(lock=lock, text=text)


# A lock as read: the pydantic model (`envkit.lock.file`) or its plain records (`envkit.lock.read`, `envkit validate`);
# what follows reads either through `plain`, which dumps both as `model_dump(mode="json")` does.
ReadLock = Union["LockModel", Lock]


def lock_pins(lm: LoadedMatrix, lock: ReadLock, filename: str) -> dict[str, Pin]:
    from envkit.core.resolve import pins_from_mapping

    return pins_from_mapping(lm, plain(lock.stack), where={k: f"{filename} stack.{k}" for k in ALL_KEYS})


# --- the gate: a lock compared with what the matrix derives for its stack ------------------------------------
# What a lock holds that the matrix does not derive from its stack: who made it and from what, why each value
# was chosen (provenance, hints), and the closures `envkit lock` resolves from an index with the user's project
# whose dependencies they hold (held by the schema and its URL policy alone). Every other field is compared, so a section added to the lock is compared with no change.
NOT_DERIVED: dict[str, Any] = {
    "envkit_version": True,
    "matrix_digest": True,
    "generated_by": True,
    "provenance": True,
    "hints": True,
    "python": {"closure": True, "controller": True, "project": True},
}
# a list of mappings is compared item by item under the first of these keys they all have (`artifacts.driver`)
_ITEM_KEYS = ("component", "name")


def derive_lock(lm: LoadedMatrix, lock: ReadLock, filename: str) -> Lock | None:
    """The lock the matrix gives for `lock`'s stack (None: the stack is not valid for this matrix). BadInput when
    the stack names a version the matrix does not know."""
    res = solve(lm, lock_pins(lm, lock, filename))
    return None if res is None else derive(lm, res, lock.generated_by)


def check_lock(lock: ReadLock, where: str, lm: LoadedMatrix | None = None, res: Resolution | None = None) -> list[str]:
    """The dotted paths of the fields of `lock` that differ from what the matrix derives for its stack
    (`artifacts.driver.zip.sha256`, `platform.glibc`, `python.indexes.pypi`); ["stack"] when the stack itself is
    not valid for this matrix. Empty: nothing derivable was edited. `res`: the lock's stack as the caller has
    already solved it (`envkit validate`), so that it is not solved again."""
    lm = lm or load_matrix()
    want = _derived(lm, lock, where, res)
    if want is None:
        return ["stack"]
    return differ(want, without(plain(lock), NOT_DERIVED))


# What the matrix derives for a stack, remembered per matrix digest and stack: a job that reads the same lock twice
# (or several locks of one stack) derives it once. Only the compared part is kept (NOT_DERIVED left out), which the
# stack alone decides; `where` only names the file in an error, so a failure is never remembered.
_DERIVED: dict[tuple[str, tuple[tuple[str, Any], ...]], dict[str, Any] | None] = {}
_DERIVED_MAX = 64


def _derived(lm: LoadedMatrix, lock: ReadLock, where: str, res: Resolution | None = None) -> dict[str, Any] | None:
    key = (lm.digest, tuple(sorted(plain(lock.stack).items())))
    if key not in _DERIVED:
        want = derive_lock(lm, lock, where) if res is None else derive(lm, res, lock.generated_by)
        if len(_DERIVED) >= _DERIVED_MAX:
            _DERIVED.pop(next(iter(_DERIVED)))
        _DERIVED[key] = None if want is None else without(plain(want), NOT_DERIVED)
    return _DERIVED[key]


def without(data: dict[str, Any], exclude: dict[str, Any]) -> dict[str, Any]:
    """A plain dump less the keys `exclude` names (True: the key; a mapping: those keys inside it), as pydantic's
    `model_dump(exclude=...)` leaves them out."""
    out = dict(data)
    for key, inner in exclude.items():
        if inner is True:
            out.pop(key, None)
        elif isinstance(out.get(key), dict):
            out[key] = without(out[key], inner)
    return out


def matrix_check(*, accept_edited: bool = False) -> LockCheck:
    """The check the command line passes to every lock it reads: the lock compared with what this envkit's matrix
    derives for its stack (`gate`), a lock of an older schema lifted (`upgrade`), an edit refused unless
    `accept_edited`."""
    from envkit.lock.file import LockCheck

    return LockCheck(gate=gate, upgrade=upgrade, accept_edited=accept_edited)


def gate(lock: LockModel, where: str) -> Edited | None:
    """`check_lock` as the gate of a `LockCheck` (`matrix_check`)."""
    from envkit.lock.file import Edited

    lm = load_matrix()
    other = (
        f"the lock comes from another matrix ({lock.matrix_digest[:19]}…, this envkit has {lm.digest[:19]}…)"
        if lock.matrix_digest != lm.digest
        else ""
    )
    try:
        fields = check_lock(lock, where, lm)
    except BadInput as exc:  # a version this matrix does not know
        return Edited(("stack",), "; ".join(x for x in (f"its stack is not one this matrix knows: {exc.message}", other) if x))
    if not fields:
        return None
    note = "its stack is not valid for this matrix (`envkit validate` explains why)" if fields == ["stack"] else ""
    return Edited(tuple(fields), "; ".join(x for x in (note, other) if x))


def differ(want: object, have: object, at: str = "") -> list[str]:
    """The dotted paths where two model dumps differ (`artifacts.cann-toolkit.zip.sha256`); a missing or added
    key, or a list of plain values that differs, is named as a whole."""
    if isinstance(want, list) and isinstance(have, list):
        keyed = _keyed(want), _keyed(have)
        if keyed[0] is not None and keyed[1] is not None:
            want, have = keyed
        elif any(isinstance(x, dict) for x in want + have) and len(want) == len(have):
            want, have = dict(enumerate(want)), dict(enumerate(have))
    if isinstance(want, dict) and isinstance(have, dict):
        return [
            p
            for k in sorted(want.keys() | have.keys(), key=str)
            for p in differ(want.get(k), have.get(k), f"{at}.{k}" if at else str(k))
        ]
    return [] if want == have else [at or "(all)"]


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    """A list of mappings by their component or name (None: not such a list, or a key repeats)."""
    for key in _ITEM_KEYS:
        if items and all(isinstance(x, dict) and isinstance(x.get(key), str) for x in items):
            out = {x[key]: x for x in items}
            return out if len(out) == len(items) else None
    return None

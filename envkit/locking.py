"""Derive a lock from a resolution: the stack's artifacts, layout, Python pins, platform facts and provenance.

This is the one place where a lock meets the matrix; `envkit.lockfile` only reads and writes the lock, and the
jobs (image, bundle, provision) read the lock alone.
"""

from __future__ import annotations

from envkit import __version__, versions
from envkit.matrix import LoadedMatrix
from envkit.models.lock import (
    Artifact,
    BaseImage,
    CannLayout,
    Lock,
    Platform,
    Provenance,
    PythonPin,
    PythonSection,
    RunFile,
    Validation,
    ZipEdition,
)
from envkit.models.matrix import VendorArtifact
from envkit.models.stack import STACK_KEYS, FullStack
from envkit.resolve import Pin, Resolution, hints_for


def hdk_file_version(lm: LoadedMatrix, hdk_version: str, chip: str) -> str:
    h = lm.hdk(hdk_version)
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


def _artifact(lm: LoadedMatrix, component: str, version: str, file: str | None, pattern: str, zip: ZipEdition | None,
              firmware_version: str | None = None) -> Artifact:
    """One installer of the lock: its `.run` (exact name and glob), install flags and order, and the signed zip."""
    flags, order = _flags(lm, component)
    return Artifact(
        component=component,  # type: ignore[arg-type]
        version=version,
        order=order,
        run=RunFile(file=file, pattern=pattern, flags=flags),
        zip=zip,
        firmware_version=firmware_version,
    )


def build_artifacts(lm: LoadedMatrix, stack: dict[str, str]) -> list[Artifact]:
    chip = lm.chips[stack["chip"]]
    arch = stack["arch"]
    hdk_arch = next(a.hdk_file_arch for a in lm.model.arches if a.id == arch)
    out: list[Artifact] = []
    # driver and firmware: one signed zip per chip and arch holds both
    if chip.driver_file:
        driver_v = hdk_file_version(lm, stack["driver"], chip.id)
        zip_drv = _zip(lm, "hdk", stack["driver"], "npu", chip.hdk_zip_token, arch) if chip.hdk_zip_token else None
        drv = _artifact(lm, "driver", stack["driver"], chip.driver_file.format(version=driver_v, hdk_arch=hdk_arch),
                        chip.driver_file.format(version="*", hdk_arch=hdk_arch), zip_drv)
        out.append(drv.model_copy(update={"package_version": driver_v.lower(),
                                          "compatible": lm.hdk(stack["driver"]).compatible_firmware}))
    if chip.firmware_file:
        fw_version = lm.hdk(stack["firmware"]).firmware_version
        zip_fw = _zip(lm, "hdk", stack["firmware"], "npu", chip.hdk_zip_token, arch) if chip.hdk_zip_token else None
        fw = lm.hdk(stack["firmware"])
        out.append(_artifact(lm, "firmware", stack["firmware"],
                             chip.firmware_file.format(firmware=fw_version) if fw_version else None,
                             chip.firmware_file.format(firmware="*"), zip_fw, firmware_version=fw_version)
                   .model_copy(update={"package_version": (fw.package_version or fw.version).lower(),
                                       "compatible": fw.compatible_driver}))
    # CANN: the toolkit, the operator package of the chip, NNAL; file name templates take {version} and {arch}
    cann = lm.cann(stack["cann"])
    file_version = cann.file_version or cann.version

    def cann_artifact(component: str, template: str, kind: str, chip_id: str | None = None) -> Artifact:
        return _artifact(lm, component, cann.version, template.format(version=file_version, arch=arch),
                         template.format(version="*", arch=arch), _zip(lm, "cann", cann.version, kind, chip_id, arch))

    out.append(cann_artifact("cann-toolkit", "Ascend-cann-toolkit_{version}_linux-{arch}.run", "toolkit"))
    op_template = chip.ops_file if cann.operator_package == "ops" else chip.kernels_file
    if op_template:
        component = "cann-ops" if cann.operator_package == "ops" else "cann-kernels"
        out.append(cann_artifact(component, op_template, cann.operator_package, chip.id))
    if cann.nnal:
        out.append(cann_artifact("cann-nnal", "Ascend-cann-nnal_{version}_linux-{arch}.run", "nnal"))
    return sorted(out, key=lambda a: (a.order, a.component))


def build_platform(lm: LoadedMatrix, stack: dict[str, str]) -> Platform:
    """What the jobs need to know about the lock's chip and OS, so that they never read the matrix."""
    chip = lm.chips[stack["chip"]]
    osrow = lm.oses[stack["os"]]
    row = next((i for i in lm.model.images if i.os == osrow.id), None)
    base = None
    if row is not None:
        base = BaseImage(image=row.image, digest=row.digest, python=row.python, source=row.source_text, note=row.note)
    return Platform(
        os_family=osrow.family,
        glibc=osrow.glibc,
        npu_smi_names=list(chip.npu_smi_names or []),
        davinci_devices=chip.davinci_devices,
        mount_driver_dir=chip.mount_driver_dir,
        base_image=base,
    )


def build_layout(lm: LoadedMatrix, cann_version: str) -> CannLayout:
    cann = lm.cann(cann_version)
    rule = next(r for r in lm.model.cann_layouts if r.kind == cann.layout)
    home = rule.home.format(version=cann.version)
    return CannLayout(
        kind=rule.kind,
        home=home,
        set_env=[s.format(version=cann.version) for s in rule.set_env],
        env={k: v.format(home=home, version=cann.version) for k, v in sorted(rule.env.items())},
    )


def torch_spec(lm: LoadedMatrix, stack: dict[str, str]) -> tuple[str, str | None]:
    """The exact torch version to install and the index it comes from: torch's CPU build for the arch
    (`torch_builds`: `X+cpu` from the PyTorch CPU index, or PyPI's plain `X` where that is a CPU build);
    None: the default index. Without a row, the x86_64 `+label` the torch_npu wheel pins."""
    public = versions.parse(stack["torch"]).public
    build = lm.torch_build(public, stack["arch"])
    if build is not None:
        version = f"{public}+{build.local}" if build.local else public
        return version, (None if build.index == "pypi" else build.index)
    t = lm.torch_npu(stack["torch_npu"])
    if stack["arch"] == "x86_64" and t.x86_64_torch_local:
        return f"{public}+{t.x86_64_torch_local}", "pytorch-cpu"
    return public, None


def _torch_build_rule(lm: LoadedMatrix, stack: dict[str, str]) -> str:
    build = lm.torch_build(stack["torch"], stack["arch"])
    if build is None:
        return ""
    spelling = f"torch=={torch_spec(lm, stack)[0]}"
    return f"; its {stack['arch']} CPU build {spelling} from {build.index} (torch_builds, {build.confidence})"


def build_python(lm: LoadedMatrix, stack: dict[str, str]) -> PythonSection:
    torch_version, torch_index = torch_spec(lm, stack)
    pins = [
        PythonPin(name="torch", version=torch_version, index=torch_index),
        PythonPin(name="torch_npu", version=stack["torch_npu"]),
        PythonPin(name="numpy", version=stack["numpy"]),
        PythonPin(name="transformers", version=stack["transformers"]),
        PythonPin(name="accelerate", version=stack["accelerate"]),
    ]
    indexes = {"pypi": lm.index_url("pypi")}
    if torch_index:
        indexes[torch_index] = lm.index_url(torch_index)
    return PythonSection(
        python=stack["python"],
        indexes=indexes,
        requirements=pins,
        cann_runtime=list(lm.model.cann_python_deps.requirements),
    )


def _provenance(lm: LoadedMatrix, res: Resolution) -> dict[str, Provenance]:
    out: dict[str, Provenance] = {}
    s = res.stack
    t = lm.torch_npu(s["torch_npu"])
    c = lm.cann(s["cann"])
    h = lm.hdk(s["driver"])
    derived: dict[str, tuple[str, str, str | None]] = {
        "torch_npu": (f"torch_npu/{t.version}", t.source_text, t.confidence),
        "torch": (f"torch_npu/{t.version} pins torch=={t.torch}" + _torch_build_rule(lm, s), t.source_text, t.confidence),
        "cann": (
            f"torch_npu/{t.version} -> CANN {c.version}" + (" (vendor table)" if res.validated_cann else " (compatible line)"),
            c.source_text,
            c.confidence,
        ),
        "driver": (f"cann/{c.version} -> HDK {h.version}", h.source_text, h.confidence),
        "firmware": (f"hdk/{s['firmware']}: firmware of the same HDK release", lm.hdk(s["firmware"]).source_text,
                     lm.hdk(s["firmware"]).confidence),
        "python": (
            (f"the python3 {lm.oses[s['os']].name} ships" if lm.oses[s["os"]].system_python == s["python"] else "newest Python")
            + f" with torch_npu {t.version} wheels and CANN {c.version} support",
            t.source_text + "; " + lm.oses[s["os"]].source_text,
            "derived",
        ),
        "numpy": ("newest recommended numpy that fits the rules", "matrices/python_packages.yaml", None),
        "transformers": ("newest recommended Transformers that fits the rules", "matrices/python_packages.yaml", None),
        "accelerate": ("newest recommended Accelerate that fits the rules", "matrices/python_packages.yaml", None),
    }
    defaults = lm.model.defaults
    for key in STACK_KEYS:
        pin = res.pins.get(key)
        if pin is not None:
            out[key] = Provenance(declared=pin.origin == "declared", origin=pin.origin, source=pin.where or "input")  # type: ignore[arg-type]
        elif key in ("chip", "arch", "os"):
            if defaults.get(key) == s[key]:
                out[key] = Provenance(declared=False, origin="default", rule="defaults", source="matrices/platform.yaml")
            else:
                out[key] = Provenance(declared=False, origin="derived", rule="first that fits", source="matrices/platform.yaml")
        else:
            rule, source, conf = derived[key]
            out[key] = Provenance(declared=False, origin="derived", rule=rule, source=source, confidence=conf)  # type: ignore[arg-type]
    return out


def build_lock(lm: LoadedMatrix, res: Resolution, generated_by: str) -> Lock:
    stack = dict(res.stack)
    torch_version, _ = torch_spec(lm, stack)
    stack["torch"] = torch_version
    return Lock(
        envkit_version=__version__,
        matrix_digest=lm.digest,
        generated_by=generated_by,
        stack=FullStack(**stack),
        validated=Validation(torch_npu_cann=res.validated_cann, cann_hdk=res.validated_hdk),
        provenance=_provenance(lm, res),
        platform=build_platform(lm, stack),
        layout=build_layout(lm, stack["cann"]),
        artifacts=build_artifacts(lm, res.stack),
        python=build_python(lm, res.stack),
        hints=hints_for(lm, res.stack, res.pins),
    )


def lock_pins(lm: LoadedMatrix, lock: Lock, filename: str) -> dict[str, Pin]:
    from envkit.resolve import pins_from_mapping

    return pins_from_mapping(lm, lock.stack.model_dump(), where={k: f"{filename} stack.{k}" for k in STACK_KEYS})

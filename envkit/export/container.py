"""The container facts of a lock: the bottom of the export layer, which every runtime envkit renders reads.

What a container of the lock's stack needs (devices, driver mounts, environment, image tag, the device plugin's
resource) is derived here once, from the lock alone, and nothing here imports another export module: the image plan
(`image`: the Dockerfile's environment and tag), `docker run` arguments and compose (`runargs`) and the Kubernetes
manifests (`k8s`) all read `ContainerFacts` (or, for `image run-args --chip`, which names a chip without a lock, the
`DeviceFacts` of its matrix row), and the serving smoke runs with the same `NPU_SERVING_ENV`, so the image envkit
builds and the commands that run it never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envkit import versions
from envkit.errors import BadInput

if TYPE_CHECKING:
    from envkit.core.matrix_records import Chip
    from envkit.models.lock import Lock

# Where the image puts things. The venv is the one Python the image runs.
VENV = "/opt/envkit/venv"
ASCEND = "/usr/local/Ascend"
DRIVER = f"{ASCEND}/driver"
LOCK_IN_IMAGE = "/etc/envkit/envkit.lock"
SERVING_ENTRYPOINT = ("vllm", "serve")
# The serving environment of the vllm-ascend tutorials (most exported lines across them): the serving image bakes
# it, and `envkit smoke --serve` starts `vllm serve` on an NPU with it.
NPU_SERVING_ENV = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "TASK_QUEUE_ENABLE": "1", "OMP_PROC_BIND": "false"}
# The driver's manager devices every NPU container needs beside its /dev/davinciN.
MANAGER_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


# --- the chip's devices ----------------------------------------------------------------------------------------
def parse_devices(text: str) -> list[int]:
    """`0-3,7` -> [0, 1, 2, 3, 7]: ASCII digits only, every id at most `bounded.MAX_DEVICE_ID`, checked before a
    range is expanded (`0-99999999999` is refused, not built; a 5,000-digit id is refused, not converted)."""
    from envkit.io.bounded import MAX_DEVICE_ID

    shown = text if len(text) <= 60 else text[:60] + "..."
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
        if not m:
            raise BadInput(f"--devices {shown!r}: expected ids and ranges like 0-3,7")
        if any(len(g) > len(str(MAX_DEVICE_ID)) or int(g) > MAX_DEVICE_ID for g in m.groups() if g):
            raise BadInput(f"--devices {shown!r}: device ids are 0 to {MAX_DEVICE_ID} (/dev/davinciN)")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo:
            raise BadInput(f"--devices {shown!r}: range {part} goes backwards")
        out.update(range(lo, hi + 1))
    return sorted(out)


@dataclass(frozen=True)
class ChipDevices:
    """What a container needs to know about a chip: its /dev/davinciN count and whether the driver dir is mounted."""

    id: str
    name: str
    davinci_devices: int | None
    mount_driver_dir: bool


def chip_from_row(chip: Chip) -> ChipDevices:
    """The chip's device facts from its matrix row (`envkit image run-args --chip`: the one command that names a
    chip without a lock; the CLI looks the row up)."""
    return ChipDevices(chip.id, chip.name, chip.davinci_devices, chip.mount_driver_dir)


def chip_from_lock(lock: Lock) -> ChipDevices:
    """The chip's device facts as the lock records them (`envkit image run-args --lock`)."""
    p = lock.platform
    return ChipDevices(lock.stack.chip, lock.stack.chip, p.davinci_devices, p.mount_driver_dir)


@dataclass(frozen=True)
class DeviceFacts:
    """The devices and driver mounts a container of a chip gets (a subset of the host's /dev/davinciN, or all)."""

    chip: str
    devices: tuple[str, ...]  # /dev/davinciN and the driver's manager devices
    mounts: tuple[tuple[str, str, str], ...]  # (host, container, mode), sorted by the container path
    visible_devices: str  # ASCEND_VISIBLE_DEVICES as the Ascend Docker Runtime and the device plugin take it
    device_count: int
    notes: tuple[str, ...]


def device_facts(chip: ChipDevices, devices: str | None) -> DeviceFacts:
    """The container's devices and mounts on a host of `chip` (`devices` as `--devices` takes them)."""
    notes = []
    if devices is None:
        if chip.davinci_devices is None:
            raise BadInput(
                f"the number of /dev/davinciN on a {chip.name} host depends on the cards installed",
                hint="Pass --devices, e.g. --devices 0-3 (see `ls /dev/davinci*` on the host).",
            )
        ids = list(range(chip.davinci_devices))
    else:
        ids = parse_devices(devices)
        if chip.davinci_devices is not None and ids and ids[-1] >= chip.davinci_devices:
            raise BadInput(f"--devices {devices}: a {chip.name} host has /dev/davinci0..{chip.davinci_devices - 1}")
    mounts = [
        ("/usr/local/dcmi", "/usr/local/dcmi", "ro"),
        ("/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi", "ro"),
        ("/etc/ascend_install.info", "/etc/ascend_install.info", "ro"),
    ]
    if chip.mount_driver_dir:
        mounts.append((DRIVER, DRIVER, "ro"))
        notes.append(f"{chip.name} needs the whole driver directory ({DRIVER}) mounted")
        notes.append(f"with the Ascend Docker Runtime, also mount {DRIVER} (-v {DRIVER}:{DRIVER}:ro)")
    else:
        mounts += [
            (f"{DRIVER}/lib64", f"{DRIVER}/lib64", "ro"),
            (f"{DRIVER}/version.info", f"{DRIVER}/version.info", "ro"),
            (f"{DRIVER}/tools/hccn_tool", f"{DRIVER}/tools/hccn_tool", "ro"),
        ]
    return DeviceFacts(
        chip=chip.id,
        devices=(*(f"/dev/davinci{i}" for i in ids), *MANAGER_DEVICES),
        mounts=tuple(sorted(mounts, key=lambda m: m[1])),
        visible_devices=_ranges(ids),
        device_count=len(ids),
        notes=tuple(notes),
    )


def _ranges(ids: list[int]) -> str:
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


# --- the image's environment and tag ---------------------------------------------------------------------------
def atb_abi(lock: Lock) -> int:
    """NNAL ships cxx_abi_0 and cxx_abi_1 builds; pip torch wheels use the new C++ ABI from 2.7 on."""
    return 1 if versions.parse(lock.stack.torch).series(2) >= (2, 7) else 0


def image_env(lock: Lock) -> list[tuple[str, str]]:
    """The image's environment: CANN's set_env.sh as the lock's layout records it, the driver's and ATB's libraries,
    the venv first on PATH, and where the image keeps its lock."""
    home = lock.layout.home
    arch = lock.stack.arch
    atb = f"{ASCEND}/nnal/atb/latest/atb/cxx_abi_{atb_abi(lock)}"
    env = dict(lock.layout.env)
    has_nnal = any(a.component == "cann-nnal" for a in lock.artifacts)
    ld = [
        f"{DRIVER}/lib64",
        f"{DRIVER}/lib64/common",
        f"{DRIVER}/lib64/driver",
        f"{home}/lib64",
        f"{home}/runtime/lib64",
        f"{home}/lib64/plugin/opskernel",
        f"{home}/lib64/plugin/nnengine",
        f"{home}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/{arch}",
    ]
    if has_nnal:
        env["ATB_HOME_PATH"] = atb
        ld = [f"{atb}/lib", f"{atb}/examples", f"{atb}/tests/atbopstest", *ld]
    env["LD_LIBRARY_PATH"] = ":".join(ld)
    env["PYTHONPATH"] = f"{home}/python/site-packages:{home}/opp/built-in/op_impl/ai_core/tbe"
    env["PATH"] = (
        f"{VENV}/bin:{home}/bin:{home}/compiler/ccec_compiler/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    env["VIRTUAL_ENV"] = VENV
    env["ENVKIT_LOCK"] = LOCK_IN_IMAGE
    return sorted(env.items())


def default_tag(lock: Lock, variant: str = "base") -> str:
    """The image's default tag; a variant other than base is a suffix (a serving image never takes the base's tag)."""
    s = lock.stack
    suffix = "" if variant == "base" else f"-{variant}"
    return f"envkit/{s.chip}:cann{s.cann}-torch{s.torch.replace('+', '-')}-py{s.python}{suffix}".lower()


# --- the one model -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ContainerFacts:
    """What a container of the lock's stack needs, from the lock alone: the one model every rendered runtime reads
    (the image plan, `image run-args` flags and compose, and the Kubernetes manifests of `envkit k8s render`)."""

    chip: str
    image_tag: str
    devices: tuple[str, ...]  # /dev/davinciN and the driver's manager devices
    mounts: tuple[tuple[str, str, str], ...]  # (host, container, mode), sorted by the container path
    environment: tuple[tuple[str, str], ...]  # the image's environment (CANN's set_env.sh, driver paths, the venv)
    serving_env: tuple[tuple[str, str], ...]  # what the serving variant adds (empty for the base variant)
    visible_devices: str  # ASCEND_VISIBLE_DEVICES as the Ascend Docker Runtime and the device plugin take it
    device_count: int
    device_plugin_resource: str | None  # the Kubernetes extended resource (null: no device plugin name is sourced)
    atb_cxx_abi: int
    notes: tuple[str, ...]


def container_facts(
    lock: Lock, devices: str | None = None, variant: str = "base", *, with_devices: bool = True
) -> ContainerFacts:
    """The container facts of `lock` (`devices` as `--devices` takes them: a subset of the host's /dev/davinciN).
    `with_devices=False`: the image's facts alone (the image plan, which runs on no host), no devices or mounts."""
    dev = device_facts(chip_from_lock(lock), devices) if with_devices else None
    return ContainerFacts(
        chip=lock.stack.chip,
        image_tag=default_tag(lock, variant),
        devices=dev.devices if dev else (),
        mounts=dev.mounts if dev else (),
        environment=tuple(image_env(lock)),
        serving_env=tuple(sorted(NPU_SERVING_ENV.items())) if variant == "serving" else (),
        visible_devices=dev.visible_devices if dev else "",
        device_count=dev.device_count if dev else 0,
        device_plugin_resource=lock.platform.device_plugin_resource,
        atb_cxx_abi=atb_abi(lock),
        notes=dev.notes if dev else (),
    )

"""Container runtime options for a chip: the /dev/davinciN devices, the driver mounts, or the Ascend Docker Runtime.

The chip's facts come from the lock (`--lock`) or, for a quick look, from the matrix (`--chip`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envkit.errors import BadInput
from envkit.export.container import DRIVER
from envkit.models.lock import Lock

if TYPE_CHECKING:
    from envkit.core.matrix_records import Chip


@dataclass(frozen=True)
class RunArgs:
    chip: str
    devices: list[str]
    mounts: list[tuple[str, str, str]]  # (host, container, mode)
    runtime_env: dict[str, str]  # the Ascend Docker Runtime alternative
    notes: list[str]

    def flags(self) -> list[str]:
        out = []
        for d in self.devices:
            out += ["--device", d]
        for host, ctr, mode in self.mounts:
            out += ["-v", f"{host}:{ctr}:{mode}"]
        return out

    def runtime_flags(self) -> list[str]:
        return ["--runtime", "ascend", *[x for k, v in self.runtime_env.items() for x in ("-e", f"{k}={v}")]]

    def to_json(self) -> dict:
        return {
            "chip": self.chip,
            "devices": self.devices,
            "mounts": [{"source": h, "target": c, "mode": m} for h, c, m in self.mounts],
            "flags": self.flags(),
            "ascend_docker_runtime": {"runtime": "ascend", "env": self.runtime_env, "flags": self.runtime_flags()},
            "notes": self.notes,
        }

    def compose(self) -> str:
        lines = ["# envkit image run-args --chip " + self.chip + " --format compose", "services:", "  app:", "    devices:"]
        lines += [f"      - {d}:{d}" for d in self.devices]
        lines += ["    volumes:"]
        lines += [f"      - {h}:{c}:{m}" for h, c, m in self.mounts]
        lines += [
            "# With the Ascend Docker Runtime instead of the lists above:",
            "#   runtime: ascend",
            "#   environment:",
        ]
        lines += [f"#     - {k}={v}" for k, v in self.runtime_env.items()]
        return "\n".join(lines) + "\n"


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


def run_args(chip: ChipDevices, devices: str | None) -> RunArgs:
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
    devs = [f"/dev/davinci{i}" for i in ids] + ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    mounts = [
        ("/usr/local/dcmi", "/usr/local/dcmi", "ro"),
        ("/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi", "ro"),
        ("/etc/ascend_install.info", "/etc/ascend_install.info", "ro"),
    ]
    if chip.mount_driver_dir:
        mounts.append((DRIVER, DRIVER, "ro"))
        notes.append(f"{chip.name} needs the whole driver directory ({DRIVER}) mounted")
    else:
        mounts += [
            (f"{DRIVER}/lib64", f"{DRIVER}/lib64", "ro"),
            (f"{DRIVER}/version.info", f"{DRIVER}/version.info", "ro"),
            (f"{DRIVER}/tools/hccn_tool", f"{DRIVER}/tools/hccn_tool", "ro"),
        ]
    env = {"ASCEND_VISIBLE_DEVICES": _ranges(ids)}
    if chip.mount_driver_dir:
        notes.append(f"with the Ascend Docker Runtime, also mount {DRIVER} (-v {DRIVER}:{DRIVER}:ro)")
    return RunArgs(chip=chip.id, devices=devs, mounts=sorted(mounts, key=lambda m: m[1]), runtime_env=env, notes=notes)


def _ranges(ids: list[int]) -> str:
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)

"""Pure parsers for what an Ascend host exposes: version files, install records, `npu-smi` output.

Every parser takes the raw text (``str`` or ``bytes``) and returns a pydantic model, or raises
:class:`ParseError` with a one-line reason. No I/O here: `probe` reads, these parse.

Formats (see docs/doctor.md and tests/fixtures/samples/SOURCES.md for the samples):
- ``key=value`` files: driver/firmware ``version.info``, ``ascend_toolkit_install.info``,
  ``/etc/ascend_install.info``, ``opp/version.info``, ``os-release``.
- ``npu-smi info``: a box-drawn table, two rows per chip, then a process table.
- ``npu-smi info -t board -i N``: ``Key : Value`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from envkit.io import bounded
from envkit.versions import InvalidVersion, parse, parse_ranges

if TYPE_CHECKING:
    from envkit.core.matrix_records import Chip

MAX_TEXT = 1 << 20  # a version file is a few hundred bytes; anything past 1 MiB is not one


class ParseError(ValueError):
    """The input is not in the expected format (garbled, truncated, empty, binary)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- text and key=value


def to_text(data: str | bytes) -> str:
    """Decode and sanity-check raw input: refuses empty, binary and oversized data."""
    if isinstance(data, bytes):
        if len(data) > MAX_TEXT:
            raise ParseError(f"too large ({len(data)} bytes)")
        if b"\x00" in data:
            raise ParseError("binary data (NUL bytes)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("binary data (not UTF-8)") from None
    else:
        text = data
        if len(text) > MAX_TEXT:
            raise ParseError(f"too large ({len(text)} characters)")
        if "\x00" in text:
            raise ParseError("binary data (NUL characters)")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise ParseError("empty")
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r")
    if controls > max(2, len(text) // 100):
        raise ParseError("binary data (control characters)")
    return text


_KV = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*(.*?)\s*$")


def parse_kv(data: str | bytes) -> dict[str, str]:
    """``key=value`` lines; ``#`` comments and blank lines skipped, surrounding quotes removed.

    Raises ParseError when no line has that form. Keys keep their spelling; on duplicates the
    last wins (as a shell would).
    """
    text = to_text(data)
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _KV.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value
    if not out:
        raise ParseError("no key=value lines")
    return out


def _get(kv: dict[str, str], *names: str) -> str | None:
    """Case-insensitive lookup of the first present key."""
    lower = {k.lower(): v for k, v in kv.items()}
    for name in names:
        value = lower.get(name.lower())
        if value is not None and value.strip():
            return value.strip()
    return None


def _version(value: str | None, what: str) -> str:
    if value is None:
        raise ParseError(f"no {what}")
    try:
        parse(value)
    except InvalidVersion:
        raise ParseError(f"{what} is not a version: {value[:60]!r}") from None
    return value


def _ranges(value: str | None, what: str) -> list[tuple[str, str]] | None:
    if value is None:
        return None
    try:
        return parse_ranges(value)
    except InvalidVersion:
        raise ParseError(f"{what} is not a list of version ranges: {value[:80]!r}") from None


# --------------------------------------------------------------------------- driver / firmware


class DriverInfo(_Model):
    """``<driver>/version.info``. ``version`` is the HDK version (``24.1.rc3``)."""

    version: str
    package_version: str | None = None
    innerversion: str | None = None
    compatible_fw: list[tuple[str, str]] | None = None
    compatible_fw_text: str | None = None


class FirmwareInfo(_Model):
    """``<firmware>/version.info``. ``version`` is the firmware's own (``7.5.0.1.129``);
    ``package_version`` is the HDK release it ships with (``24.1.rc3``)."""

    version: str
    package_version: str | None = None
    compatible_drv: list[tuple[str, str]] | None = None
    compatible_drv_text: str | None = None


def parse_driver_version_info(data: str | bytes) -> DriverInfo:
    kv = parse_kv(data)
    version = _version(_get(kv, "Version"), "Version=")
    package = _get(kv, "package_version")
    if package is not None:
        _version(package, "package_version=")
    fw_text = _get(kv, "compatible_version_fw")
    return DriverInfo(
        version=version,
        package_version=package,
        innerversion=_get(kv, "Innerversion"),
        compatible_fw=_ranges(fw_text, "compatible_version_fw="),
        compatible_fw_text=fw_text,
    )


def parse_firmware_version_info(data: str | bytes) -> FirmwareInfo:
    kv = parse_kv(data)
    version = _version(_get(kv, "Version"), "Version=")
    package = _get(kv, "package_version")
    if package is not None:
        _version(package, "package_version=")
    drv_text = _get(kv, "compatible_version_drv")
    return FirmwareInfo(
        version=version,
        package_version=package,
        compatible_drv=_ranges(drv_text, "compatible_version_drv="),
        compatible_drv_text=drv_text,
    )


class InstallRecord(_Model):
    """``/etc/ascend_install.info``: where the driver and firmware were installed and by whom.

    The format is not documented; observed keys are ``Driver_Install_Path_Param``,
    ``Firmware_Install_Path_Param``, ``UserName``, ``UserGroup``. Every key is kept in ``fields``.
    """

    driver_install_path: str | None = None
    firmware_install_path: str | None = None
    user: str | None = None
    group: str | None = None
    fields: dict[str, str]


def parse_ascend_install_info(data: str | bytes) -> InstallRecord:
    kv = parse_kv(data)
    return InstallRecord(
        driver_install_path=_get(kv, "Driver_Install_Path_Param", "Driver_Install_Path"),
        firmware_install_path=_get(kv, "Firmware_Install_Path_Param", "Firmware_Install_Path"),
        user=_get(kv, "UserName"),
        group=_get(kv, "UserGroup"),
        fields=kv,
    )


# --------------------------------------------------------------------------- CANN


class PackageInstallInfo(_Model):
    """``ascend_<package>_install.info``: ``package_name=Ascend-cann-toolkit``, ``version=8.1.RC1``."""

    package_name: str | None = None
    version: str
    arch: str | None = None
    path: str | None = None
    innerversion: str | None = None


def parse_package_install_info(data: str | bytes) -> PackageInstallInfo:
    kv = parse_kv(data)
    arch = _get(kv, "arch")
    return PackageInstallInfo(
        package_name=_get(kv, "package_name"),
        version=_version(_get(kv, "version"), "version="),
        arch=arch.lower() if arch else None,
        path=_get(kv, "path"),
        innerversion=_get(kv, "innerversion"),
    )


class ComponentVersion(_Model):
    """A component's ``version.info`` (``opp/``, ``compiler/``, an ops subpackage):
    ``Version=8.5.0.2.220`` (internal build) and ``version_dir=8.5.0`` (the release)."""

    version: str
    version_dir: str | None = None

    @property
    def release(self) -> str:
        """The release version: ``version_dir`` when it is a version, else ``Version``."""
        if self.version_dir:
            try:
                parse(self.version_dir)
                return self.version_dir
            except InvalidVersion:
                pass
        return self.version


def parse_component_version_info(data: str | bytes) -> ComponentVersion:
    kv = parse_kv(data)
    return ComponentVersion(
        version=_version(_get(kv, "Version", "version"), "Version="),
        version_dir=_get(kv, "version_dir"),
    )


def _shipped_chips() -> Sequence[Chip]:
    from envkit.core.matrix import load_matrix

    return load_matrix().model.chips


def chip_from_package_name(name: str, chips: Sequence[Chip] | None = None) -> str | None:
    """The chip id in an operator package name (``Ascend-cann-kernels-910b``, ``Ascend-cann-A3-ops``): the one chip
    whose `package_patterns` (matrices/platform.yaml) match it; None where none or several do."""
    found = {
        c.id
        for c in (_shipped_chips() if chips is None else chips)
        if any(re.search(p, name + "_", re.I) for p in c.package_patterns)
    }
    return found.pop() if len(found) == 1 else None


def chip_from_soc(socs: Iterable[str], chips: Sequence[Chip] | None = None) -> str | None:
    """The chip of the operator kernels' SOC folders (``ascend910b``, ``ascend910_93``), when they name one chip."""
    table = {soc: c.id for c in (_shipped_chips() if chips is None else chips) for soc in c.soc_names}
    found = {table[s] for s in socs if s in table}
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- OS


class OsRelease(_Model):
    id: str
    version_id: str | None = None
    pretty_name: str | None = None

    @property
    def key(self) -> str:
        """The stack's os id: ``ubuntu22.04``, ``openeuler24.03``, ``kylinv10``."""
        base = self.id.lower().replace(" ", "")
        version = (self.version_id or "").lower().replace(" ", "")
        return f"{base}{version}"


def parse_os_release(data: str | bytes) -> OsRelease:
    kv = parse_kv(data)
    os_id = _get(kv, "ID")
    if os_id is None:
        raise ParseError("no ID=")
    if not re.fullmatch(r"[A-Za-z0-9._\-]+", os_id):
        raise ParseError(f"ID= is not an os id: {os_id[:40]!r}")
    version = _get(kv, "VERSION_ID")
    if version is not None and not re.fullmatch(r"[A-Za-z0-9._\- ]+", version):
        raise ParseError(f"VERSION_ID= is not a version: {version[:40]!r}")
    return OsRelease(id=os_id, version_id=version, pretty_name=_get(kv, "PRETTY_NAME"))


# --------------------------------------------------------------------------- npu-smi info


class ChipRow(_Model):
    npu: int
    chip: int
    name: str
    health: str
    bus_id: str | None = None
    phy_id: int | None = None
    device: int | None = None


class ProcessRow(_Model):
    npu: int
    chip: int
    pid: int
    name: str
    memory_mb: int | None = None


class NpuSmiInfo(_Model):
    version: str | None
    second_column: Literal["none", "phy-id", "device"]
    chips: list[ChipRow]
    processes: list[ProcessRow]
    idle_npus: list[int]

    @property
    def npu_ids(self) -> list[int]:
        return sorted({c.npu for c in self.chips})

    @property
    def chips_per_npu(self) -> int:
        if not self.chips:
            return 0
        counts: dict[int, int] = {}
        for c in self.chips:
            counts[c.npu] = counts.get(c.npu, 0) + 1
        return max(counts.values())

    @property
    def names(self) -> list[str]:
        return sorted({c.name for c in self.chips})


_HEADER_VERSION = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)", re.I)
_ROW_A = re.compile(r"^(\d+)\s+(\S.*?)$")
_ROW_B = re.compile(r"^(\d+)(?:\s+(\d+))?$")
_BUS = re.compile(r"^[0-9A-Fa-fx]{4}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.[0-9A-Fa-fx]$")
_PROC_A = re.compile(r"^(\d+)\s+(\d+)$")
_NO_PROC = re.compile(r"No running processes found in NPU\s+(\d+)", re.I)
_DEVICE_BUSY = re.compile(r"device is (?:used|busy|occupied)|ret is -8020", re.I)


def npu_smi_error(text: str) -> str | None:
    """The error npu-smi printed instead of a table, if any (e.g. the device is in use)."""
    for line in text.splitlines():
        if _DEVICE_BUSY.search(line):
            return line.strip()
    return None


def _cells(line: str) -> list[str]:
    parts = line.strip().split("|")
    if len(parts) < 3:
        return []
    return [p.strip() for p in parts[1:-1]]


def parse_npu_smi_info(data: str | bytes) -> NpuSmiInfo:
    """Parse `npu-smi info`. Handles the A2 (``910B3``), A3 (``Ascend910``, a ``Phy-ID`` column,
    two chips per NPU) and 310P (``310P3``, a ``Device`` column) layouts."""
    text = to_text(data)
    error = npu_smi_error(text)
    if error and "|" not in text:
        raise ParseError(f"npu-smi reported an error: {error}")
    version: str | None = None
    second: Literal["none", "phy-id", "device"] = "none"
    section = "before"
    chips: list[ChipRow] = []
    processes: list[ProcessRow] = []
    idle: list[int] = []
    pending: tuple[int, str, str] | None = None
    saw_header = False
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _HEADER_VERSION.search(line)
        if m and version is None:
            version = m.group(2)
            continue
        n = _NO_PROC.search(line)
        if n:
            idle.append(int(n.group(1)))
            continue
        cells = _cells(line)
        if not cells:
            continue
        head = cells[0]
        joined = " ".join(cells)
        if re.match(r"^NPU\s+Name\b", head):
            section, saw_header = "chips", True
            continue
        if re.match(r"^Chip\b", head) and section == "chips":
            if "Phy-ID" in head:
                second = "phy-id"
            elif "Device" in head:
                second = "device"
            continue
        if "Process id" in joined or "Process name" in joined:
            section, pending = "processes", None
            continue
        if section == "chips":
            if len(cells) < 2:
                continue
            a = _ROW_A.match(head)
            b = _ROW_B.match(head)
            if b and _BUS.match(cells[1].split()[0] if cells[1] else "") and pending is not None:
                npu, name, health = pending
                extra = int(b.group(2)) if b.group(2) is not None else None
                chips.append(
                    ChipRow(
                        npu=npu,
                        chip=int(b.group(1)),
                        name=name,
                        health=health,
                        bus_id=cells[1].split()[0],
                        phy_id=extra if second == "phy-id" else None,
                        device=extra if second == "device" else None,
                    )
                )
                pending = None
            elif a and cells[1] and not _BUS.match(cells[1].split()[0]):
                pending = (int(a.group(1)), a.group(2).strip(), cells[1].split()[0])
        elif section == "processes":
            p = _PROC_A.match(head)
            if p and len(cells) >= 3 and bounded.is_digits(cells[1], 10):
                mem = cells[3].split()[0] if len(cells) > 3 and cells[3] else ""
                processes.append(
                    ProcessRow(
                        npu=int(p.group(1)),
                        chip=int(p.group(2)),
                        pid=int(cells[1]),
                        name=cells[2],
                        memory_mb=int(mem) if bounded.is_digits(mem, 12) else None,
                    )
                )
    if not saw_header:
        if error:
            raise ParseError(f"npu-smi reported an error: {error}")
        raise ParseError("no 'NPU Name Health' table header")
    if not chips:
        raise ParseError("table header found but no chip rows (truncated?)")
    if version is not None:
        try:
            parse(version)
        except InvalidVersion:
            raise ParseError(f"header version is not a version: {version[:40]!r}") from None
    return NpuSmiInfo(version=version, second_column=second, chips=chips, processes=processes, idle_npus=idle)


class ChipIdentity(_Model):
    chip: str | None
    note: str | None = None


def chip_from_npu_smi(info: NpuSmiInfo, chips: Sequence[Chip] | None = None) -> ChipIdentity:
    """The stack's chip id from the names `npu-smi info` prints, by each chip row's `npu_smi_patterns`
    (matrices/platform.yaml; full match on the name in lower case without an ``ascend`` prefix).

    ``910B1``…``910B4`` (and ``910B4-1``, ``910B2C``) -> ``910b``; ``Ascend910`` with two chips per NPU (and a
    ``Phy-ID`` column: a row's `npu_smi_multi_die`) -> ``a3``; ``910A``/``910ProA``/``910ProB`` -> ``910``;
    ``310P3`` -> ``310p``; ``310B*`` -> ``310b``; ``950*`` -> ``950``. A row's `npu_smi_caveats` become notes.
    """
    rows = _shipped_chips() if chips is None else chips
    multi_die = info.second_column == "phy-id" or info.chips_per_npu >= 2
    found: set[str] = set()
    notes: list[str] = []
    for name in info.names:
        n = name.lower().removeprefix("ascend")
        hits = {c.id for c in rows if multi_die and n in c.npu_smi_multi_die}
        if not hits:
            hits = {c.id for c in rows if any(re.fullmatch(p, n) for p in c.npu_smi_patterns)}
        if not hits:
            notes.append(f"unknown chip name {name!r}")
        elif len(hits) > 1:
            notes.append(f"chip name {name!r} fits {', '.join(sorted(hits))}")
        else:
            found |= hits
            notes += [c.npu_smi_caveats[n] for c in rows if c.id in hits and n in c.npu_smi_caveats]
    if len(found) == 1:
        return ChipIdentity(chip=found.pop(), note="; ".join(notes) or None)
    if len(found) > 1:
        return ChipIdentity(chip=None, note=f"mixed chips: {', '.join(sorted(found))}")
    return ChipIdentity(chip=None, note="; ".join(notes) or "no chip names")


# --------------------------------------------------------------------------- npu-smi board


class BoardInfo(_Model):
    """``npu-smi info -t board -i N``: ``Software Version`` is the driver, ``Firmware Version``
    the firmware's own 7.x version, ``Compatibility`` OK/NOK between the two."""

    npu_id: int | None = None
    software_version: str | None = None
    firmware_version: str | None = None
    compatibility: str | None = None
    chip_name: str | None = None
    npu_name: str | None = None
    fields: dict[str, str]


_BOARD_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ()/_\-.]*?)\s*:\s*(.*?)\s*$")


def parse_npu_smi_board(data: str | bytes) -> BoardInfo:
    text = to_text(data)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        m = _BOARD_LINE.match(line)
        if m:
            fields[m.group(1)] = m.group(2)
    lower = {k.lower(): v for k, v in fields.items()}
    software = lower.get("software version") or None
    firmware = lower.get("firmware version") or None
    if software is None and firmware is None:
        raise ParseError("no 'Software Version' or 'Firmware Version' line")
    for label, value in (("Software Version", software), ("Firmware Version", firmware)):
        if value is not None:
            _version(value, label)
    npu_id = lower.get("npu id")
    return BoardInfo(
        npu_id=int(npu_id) if npu_id and bounded.is_digits(npu_id, 6) else None,
        software_version=software,
        firmware_version=firmware,
        compatibility=lower.get("compatibility") or None,
        chip_name=lower.get("chip name") or None,
        npu_name=lower.get("npu name") or None,
        fields=fields,
    )

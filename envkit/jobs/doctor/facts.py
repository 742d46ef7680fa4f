"""Turn a probe's raw reads into parsed facts, one check per source.

A source that cannot be parsed gives a ``warn`` check whose detail starts with ``unparsed:``,
never an exception: a doctor must report on a broken host, not crash on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from envkit.errors import EnvkitError
from envkit.io.buildinfo import build_facts
from envkit.jobs.doctor.observe import CannInstall, Evidence, ProbeResult
from envkit.jobs.doctor.parsers import (
    BoardInfo,
    ChipIdentity,
    ComponentVersion,
    DriverInfo,
    FirmwareInfo,
    InstallRecord,
    NpuSmiInfo,
    OsRelease,
    ParseError,
    chip_from_npu_smi,
    chip_from_package_name,
    chip_from_soc,
    npu_smi_error,
    parse_ascend_install_info,
    parse_component_version_info,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_npu_smi_board,
    parse_npu_smi_info,
    parse_os_release,
    parse_package_install_info,
)
from envkit.jobs.doctor.report import Check
from envkit.versions import InvalidVersion, newest_first, parse

T = TypeVar("T")


@dataclass
class Cann:
    version: str
    source: str
    install: CannInstall
    operator_packages: list[tuple[str, str, str]] = field(default_factory=list)  # (package, version, source)


@dataclass
class VllmAscendBuild:
    """What the installed vllm_ascend's `_build_info.py` says it was built for (read as data, never imported)."""

    source: str  # the file, as the target sees it
    found: bool = False  # False: no such file (a build that names no device)
    device_type: str | None = None  # __device_type__ (0.12+: A2, A3, _310P, A5; _910B, _910_93 before 0.13)
    soc_version: str | None = None  # __soc_version__ (older builds: ASCEND910B1)
    problem: str | None = None  # "unreadable: FILE: why" / "unparsed: FILE: why"


@dataclass
class Facts:
    probe: ProbeResult
    checks: list[Check] = field(default_factory=list)
    install_record: InstallRecord | None = None
    driver: DriverInfo | None = None
    firmware: FirmwareInfo | None = None
    cann: Cann | None = None
    cann_all: list[Cann] = field(default_factory=list)
    nnal_version: str | None = None
    npu: NpuSmiInfo | None = None
    npu_error: str | None = None
    npu_source: str | None = None
    boards: list[BoardInfo] = field(default_factory=list)
    chip: ChipIdentity | None = None
    chip_source: str | None = None
    npu_chip: ChipIdentity | None = None  # the chip of the NPUs npu-smi lists (never the fallback of an image)
    os: OsRelease | None = None
    arch: tuple[str, str] | None = None
    python: dict | None = None
    vllm_ascend_build: VllmAscendBuild | None = None

    @property
    def image(self) -> bool:
        """Probing an image (a root that is not a running host): devices come at run time."""
        return not self.probe.host

    def package(self, name: str) -> dict | None:
        if not self.python:
            return None
        value = self.python.get("packages", {}).get(name)
        return value if isinstance(value, dict) else None

    def version_of(self, name: str) -> str | None:
        pkg = self.package(name)
        return pkg.get("version") if pkg else None

    @property
    def npu_evidence(self) -> bool:
        """Something says this host has an Ascend NPU."""
        return (
            bool(self.probe.dev_davinci)
            or self.npu is not None
            or self.npu_error is not None
            or (self.driver is not None and not self.image)
        )

    def add(self, name: str, status: str, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name=name, status=status, detail=detail, fix=fix))


def _parse(ev: Evidence, parser: Callable[[bytes], T]) -> tuple[T | None, str | None]:
    """(value, reason it could not be read or parsed, naming the file); (None, None) when the file is absent."""
    if ev.data is None:
        return None, (None if ev.error == "not found" else f"unreadable: {ev.source}: {ev.error}")
    try:
        return parser(ev.data), None
    except ParseError as exc:
        return None, f"unparsed: {ev.source}: {exc}"


def _driver_firmware(f: Facts) -> None:
    p = f.probe
    rec, why = _parse(p.install_record, parse_ascend_install_info)
    f.install_record = rec
    if why:
        f.add("install record", "warn", why)
    elif rec is not None:
        bits = [
            f"driver under {rec.driver_install_path}" if rec.driver_install_path else None,
            f"run user {rec.user}" if rec.user else None,
        ]
        f.add("install record", "ok", f"{p.install_record.source}: " + (", ".join(b for b in bits if b) or "present"))

    f.driver, why = _parse(p.driver_version_info, parse_driver_version_info)
    if why:
        f.add("driver", "warn", why, "reinstall the NPU driver, or mount the host's driver/version.info read-only")
    elif f.driver is None:
        where = p.driver_version_info.source
        if f.image:
            f.add("driver", "ok", f"not in the image ({where}): the host mounts the driver at run time")
        elif p.container and (p.dev_davinci or p.npu_smi_path):
            f.add(
                "driver",
                "warn",
                f"not found: {where}",
                f"mount the host's driver: -v {where}:{where} -v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
            )
        elif p.dev_davinci or p.npu_smi_path:
            f.add(
                "driver",
                "warn",
                f"not found: {where}, yet the host has NPU devices or npu-smi",
                "reinstall the NPU driver (Ascend-hdk-<chip>-npu-driver_<ver>_linux-<arch>.run --full --install-for-all)",
            )
        else:
            f.add("driver", "warn", f"not found: {where} (no Ascend NPU driver on this host)")
    else:
        f.add("driver", "ok", f"{f.driver.version} ({p.driver_version_info.source})")

    f.firmware, why = _parse(p.firmware_version_info, parse_firmware_version_info)
    if why:
        f.add("firmware", "warn", why)
    elif f.firmware is None:
        where = p.firmware_version_info.source
        if f.image or p.container:
            f.add("firmware", "ok", f"not visible ({where}): normal in a container or an image")
        elif f.driver is not None:
            f.add(
                "firmware",
                "warn",
                f"not found: {where}",
                "install the NPU firmware of the driver's HDK release, then reboot",
            )
        else:
            f.add("firmware", "ok", f"not installed ({where})")
    else:
        hdk = f.firmware.package_version or "unknown HDK release"
        f.add("firmware", "ok", f"{hdk} (firmware {f.firmware.version}, {p.firmware_version_info.source})")


def _cann_version(inst: CannInstall) -> tuple[str | None, str | None, list[str]]:
    """(version, source, problems) of one CANN folder."""
    problems: list[str] = []
    for ev in inst.version_files:
        name = ev.source.rsplit("/", 1)[-1]
        if name.endswith("_install.info"):
            info, why = _parse(ev, parse_package_install_info)
            if info is not None:
                return info.version, ev.source, problems
            if why:
                problems.append(why)
    for ev in inst.version_files:
        name = ev.source.rsplit("/", 1)[-1]
        if name == "version.info":
            comp, why = _parse(ev, parse_component_version_info)
            if comp is not None and _is_release(comp):
                return comp.release, ev.source, problems
            if why:
                problems.append(why)
    if inst.dir_version and _is_version(inst.dir_version):
        return inst.dir_version, f"folder name {inst.resolved}", problems
    return None, None, problems


def _is_release(comp: ComponentVersion) -> bool:
    """A release (8.5.0, 9.0.0, 8.3.RC1), not an internal build number (8.5.0.2.220)."""
    if comp.version_dir and _is_version(comp.version_dir):
        return True
    try:
        return len(parse(comp.version).release) <= 3
    except InvalidVersion:
        return False


def _is_version(text: str | None) -> bool:
    if not text:
        return False
    try:
        parse(text)
    except InvalidVersion:
        return False
    return True


def _cann(f: Facts) -> None:
    p = f.probe
    found: list[Cann] = []
    for inst in p.cann:
        version, source, problems = _cann_version(inst)
        for problem in problems:
            f.add("cann", "warn", problem)
        if version is None:
            if not problems:
                f.add("cann", "warn", f"unparsed: {inst.resolved}: no version file and no version in the folder name")
            continue
        cann = Cann(version=version, source=source or inst.resolved, install=inst)
        for ev in inst.package_infos:
            info, why = _parse(ev, parse_package_install_info)
            if info is not None and info.package_name:
                cann.operator_packages.append((info.package_name, info.version, ev.source))
            elif why:
                f.add("cann operator package", "warn", why)
        found.append(cann)
    if not found:
        if not any(c.name == "cann" for c in f.checks):
            f.add("cann", "warn", "no CANN toolkit under /usr/local/Ascend (ascend-toolkit/latest, cann-<ver>, cann)")
        return
    home = p.env.get("ASCEND_HOME_PATH") or p.env.get("ASCEND_TOOLKIT_HOME")
    active = None
    if home:
        for c in found:
            if c.install.path.rstrip("/") == home.rstrip("/") or c.install.resolved == home.rstrip("/"):
                active = c
                break
    if active is None:
        order = newest_first([c.version for c in found])
        active = next(c for c in found if c.version == order[0])
    f.cann, f.cann_all = active, found
    by_env = bool(home and home.rstrip("/") in (active.install.path.rstrip("/"), active.install.resolved))
    why_active = "selected by ASCEND_HOME_PATH" if by_env else "the newest found"
    detail = f"{active.version} ({active.install.layout} layout, {active.install.resolved}; from {active.source})"
    if len(found) > 1:
        others = ", ".join(f"{c.version} at {c.install.resolved}" for c in found if c is not active)
        f.add(
            "cann",
            "warn",
            f"{detail}; {why_active}; also installed: {others}",
            "keep one CANN per environment, or source the set_env.sh of the one you mean",
        )
    else:
        f.add("cann", "ok", detail)

    # operator package (kernels < 8.5, ops >= 8.5)
    ops = [(n, v, s) for n, v, s in active.operator_packages if "kernels" in n.lower() or "ops" in n.lower()]
    if ops:
        f.add("cann operator package", "ok", "; ".join(f"{n} {v} ({s})" for n, v, s in ops))
    elif active.install.kernel_socs:
        f.add(
            "cann operator package",
            "ok",
            f"operator kernels for {', '.join(active.install.kernel_socs)} under {active.install.resolved}/opp",
        )
    else:
        f.add(
            "cann operator package",
            "warn",
            f"no operator package found in {active.install.resolved} (kernels before CANN 8.5, ops from 8.5)",
            "install Ascend-cann-kernels-<chip> (< 8.5.0) or Ascend-cann-<chip>-ops (>= 8.5.0) of the same version",
        )

    # NNAL
    if p.nnal_dir is None:
        f.add(
            "nnal",
            "warn",
            "no /usr/local/Ascend/nnal/atb (NNAL/ATB, needed by vllm-ascend and torch_npu's ATB ops)",
            "install Ascend-cann-nnal of the CANN version, then source /usr/local/Ascend/nnal/atb/set_env.sh",
        )
    elif p.nnal is not None and p.nnal.data is not None:
        comp, why = _parse(p.nnal, parse_component_version_info)
        if comp is not None:
            f.nnal_version = comp.release
            f.add("nnal", "ok", f"{comp.release} ({p.nnal.source})")
        else:
            f.add("nnal", "warn", why or f"unparsed: {p.nnal.source}")
    else:
        src = p.nnal.source if p.nnal is not None else p.nnal_dir
        leaf = src.rsplit("/", 1)[-1]
        if _is_version(leaf):
            f.nnal_version = leaf
        f.add("nnal", "ok", f"present ({src})")


def _npu_smi(f: Facts) -> None:
    p = f.probe
    if p.npu_smi is None:
        return
    res = p.npu_smi
    f.npu_source = res.display
    out_text = res.stdout.decode("utf-8", "replace") + "\n" + res.stderr.decode("utf-8", "replace")
    if res.error and res.recorded:
        f.add("npu-smi", "warn", f"unreadable: {res.recorded}: {res.error}")
        return
    if res.error:
        f.add(
            "npu-smi",
            "fail",
            f"{res.display}: {res.error}",
            "check the driver: `npu-smi info` must answer within seconds",
        )
        return
    busy = npu_smi_error(out_text)
    if res.returncode != 0 or (busy and "NPU" not in res.stdout.decode("utf-8", "replace")):
        if busy:
            f.npu_error = busy
            f.add(
                "npu-smi",
                "fail",
                f"{res.display}: {busy}",
                "another process holds the device; see 'NPU held by another process'",
            )
        else:
            last = (out_text.strip().splitlines() or ["no output"])[-1][:200]
            f.add(
                "npu-smi",
                "fail",
                f"{res.display}: exit {res.returncode}: {last}",
                "check the driver install and that this user is in the driver's group (HwHiAiUser)",
            )
        return
    try:
        f.npu = parse_npu_smi_info(res.stdout)
    except ParseError as exc:
        f.add("npu-smi", "warn", f"unparsed: {res.display}: {exc}")
        return
    info = f.npu
    f.chip = f.npu_chip = chip_from_npu_smi(info)
    f.chip_source = res.display
    names = ", ".join(info.names)
    f.add(
        "npu-smi",
        "ok",
        f"{info.version or 'unknown version'}: {len(info.chips)} chip(s) on {len(info.npu_ids)} NPU(s), {names}"
        + (f"; chip {f.chip.chip}" if f.chip.chip else "")
        + (f" ({f.chip.note})" if f.chip.note else ""),
    )
    bad = [c for c in info.chips if c.health.upper() != "OK"]
    if bad:
        worst = "fail" if any(c.health.lower() not in ("warning",) for c in bad) else "warn"
        f.add(
            "npu health",
            worst,
            "; ".join(f"NPU {c.npu} chip {c.chip}: {c.health}" for c in bad),
            "see `npu-smi info -t health -i <NPU>` and the device log (/var/log/npu/slog)",
        )
    else:
        f.add("npu health", "ok", f"all {len(info.chips)} chip(s) OK")
    for res_b in p.boards:
        if not res_b.ok:
            why = res_b.error or f"exit {res_b.returncode}"
            shown = f"unreadable: {res_b.recorded}" if res_b.recorded else res_b.display
            f.add("npu board", "warn", f"{shown}: {why}")
            continue
        try:
            f.boards.append(parse_npu_smi_board(res_b.stdout))
        except ParseError as exc:
            f.add("npu board", "warn", f"unparsed: {res_b.display}: {exc}")


def _os_arch(f: Facts) -> None:
    p = f.probe
    f.os, why = _parse(p.os_release, parse_os_release)
    if why:
        f.add("os", "warn", why)
    elif f.os is None:
        f.add("os", "warn", f"not found: {p.os_release.source}")
    else:
        f.add("os", "ok", f"{f.os.key} ({f.os.pretty_name or f.os.id}; {p.os_release.source})")
    arch = None
    if p.host and p.arch_hint:
        arch = p.arch_hint
    elif f.cann is not None:
        for ev in f.cann.install.version_files + f.cann.install.package_infos:
            if ev.source.endswith("_install.info"):
                info, _ = _parse(ev, parse_package_install_info)
                if info is not None and info.arch in ("aarch64", "x86_64"):
                    arch = (info.arch, ev.source)
                    break
    if arch is None and p.arch_hint:
        arch = p.arch_hint
    f.arch = arch
    if arch:
        f.add("arch", "ok", f"{arch[0]} ({arch[1]})")
    else:
        f.add("arch", "warn", "unknown: no ELF binary, toolkit install record or lib folder to tell")


def _python(f: Facts) -> None:
    py = f.probe.python
    if py.error or py.data is None:
        f.add("python", "warn", f"{py.source}: {py.error}", "pass --python with the interpreter that runs your workload")
        return
    for why in py.problems:
        f.add("python package", "warn", why, "reinstall that package")
    f.python = py.data
    ver = py.data.get("python") or "unknown"
    f.add("python", "ok", f"{ver} ({py.data.get('executable') or py.source})")
    parts = []
    for name in ("torch", "torch_npu", "numpy", "transformers", "accelerate"):
        parts.append(f"{name} {f.version_of(name) or '-'}")
    detail = ", ".join(parts) + f" ({py.source})"
    if py.other_site_packages:
        detail += f"; other site-packages not used: {', '.join(py.other_site_packages)}"
    f.add("python packages", "ok", detail)


def _vllm_ascend_build(f: Facts) -> None:
    """The installed vllm_ascend's device build, from the file the probe read (`envkit.io.buildinfo.build_facts`:
    `ast`, string literals only, nothing run). Problems are kept for the hazard that judges it."""
    ev = f.probe.vllm_ascend_build
    if ev is None or f.version_of("vllm_ascend") is None:
        return
    build = VllmAscendBuild(source=ev.source)
    f.vllm_ascend_build = build
    if ev.data is None:
        if ev.error != "not found":
            build.problem = f"unreadable: {ev.source}: {ev.error}"
        return
    build.found = True
    try:
        text = ev.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        build.problem = f"unparsed: {ev.source}: not UTF-8 ({exc.reason} at byte {exc.start})"
        return
    try:
        facts = build_facts(text, ev.source)
    except EnvkitError as exc:
        build.problem = f"unparsed: {exc.message}"
        return
    build.device_type, build.soc_version = facts["device_type"], facts["soc_version"]


def _chip_fallback(f: Facts) -> None:
    """No npu-smi: the chip of the operator package (an image knows which chip it was built for)."""
    if f.chip is not None and f.chip.chip:
        return
    if f.cann is None:
        return
    for name, _version, source in f.cann.operator_packages:
        chip = chip_from_package_name(name)
        if chip:
            f.chip = ChipIdentity(chip=chip, note=f"from the operator package {name}")
            f.chip_source = source
            return
    chip = chip_from_soc(f.cann.install.kernel_socs)
    if chip:
        f.chip = ChipIdentity(chip=chip, note="from the operator kernels folder")
        f.chip_source = f"{f.cann.install.resolved}/opp/built-in/op_impl/ai_core/tbe/kernel"


def gather(probe: ProbeResult) -> Facts:
    """Parse every source of a probe; append one check per source."""
    f = Facts(probe=probe)
    _driver_firmware(f)
    _cann(f)
    _npu_smi(f)
    _chip_fallback(f)
    _os_arch(f)
    _python(f)
    _vllm_ascend_build(f)
    return f

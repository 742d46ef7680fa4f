"""The doctor's report: checks, the observed stack (lock-shaped), drift from a lock.

Pydantic models with ``extra="forbid"``; ``DoctorReport.model_dump(mode="json")`` is the
``--json`` document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "warn", "fail"]

STACK_KEYS: tuple[str, ...] = (
    "driver",
    "firmware",
    "cann",
    "chip",
    "arch",
    "os",
    "python",
    "torch",
    "torch_npu",
    "numpy",
    "transformers",
    "accelerate",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Check(_Model):
    name: str
    status: Status
    detail: str
    fix: str | None = None


class ObservedValue(_Model):
    value: str
    source: str = Field(description="the file or command the value came from")
    details: dict[str, str] = Field(default_factory=dict, description="related facts, e.g. the firmware's own 7.x Version")


class Observed(_Model):
    driver: ObservedValue | None = None
    firmware: ObservedValue | None = None
    cann: ObservedValue | None = None
    chip: ObservedValue | None = None
    arch: ObservedValue | None = None
    os: ObservedValue | None = None
    python: ObservedValue | None = None
    torch: ObservedValue | None = None
    torch_npu: ObservedValue | None = None
    numpy: ObservedValue | None = None
    transformers: ObservedValue | None = None
    accelerate: ObservedValue | None = None

    def stack(self) -> dict[str, str]:
        """The plain ``{key: version}`` dict of what was observed (missing keys left out)."""
        out: dict[str, str] = {}
        for key in STACK_KEYS:
            item = getattr(self, key)
            if item is not None:
                out[key] = item.value
        return out


class Drift(_Model):
    component: str
    locked: str | None
    observed: str | None
    status: Literal["match", "differs", "not observed"]
    source: str | None = None


class NetFinding(_Model):
    check: str
    status: Status
    message: str
    device: int | None = None
    host: str | None = None
    source: str


class NetSection(_Model):
    """`envkit doctor --net`: hccn_tool's state of every device, checked (envkit/fleet/hccn.py)."""

    tool: str | None = Field(description="the hccn_tool run, or the folder of its recorded output")
    devices: list[int] = Field(default_factory=list)
    peers: dict[str, list[str]] = Field(default_factory=dict, description="device id -> peer addresses pinged")
    findings: list[NetFinding] = Field(default_factory=list)
    codes: list[dict[str, Any]] = Field(default_factory=list, description="HCCL EI codes found in --net-log")


class DoctorReport(_Model):
    root: str
    checks: list[Check]
    observed: Observed
    drift: list[Drift] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list, description="'name: detail' of every failed check")
    validation: dict[str, Any] | None = Field(None, description="the resolver's report on the observed stack")
    lock: str | None = None
    net: NetSection | None = Field(None, description="with --net only")

    @property
    def exit_code(self) -> int:
        net_failed = self.net is not None and any(f.status == "fail" for f in self.net.findings)
        return 1 if net_failed or any(c.status == "fail" for c in self.checks) else 0

    def finalize(self) -> DoctorReport:
        self.failures = [f"{c.name}: {c.detail}" for c in self.checks if c.status == "fail"]
        if self.net is not None:
            self.failures += [f"net {_net_name(f)}: {f.message}" for f in self.net.findings if f.status == "fail"]
        return self

    def to_json(self) -> dict[str, Any]:
        """The --json document; without --net it is exactly what it was before the net section existed."""
        return self.model_dump(mode="json", exclude=None if self.net is not None else {"net"})


def _net_name(f: NetFinding) -> str:
    return f.check if f.device is None else f"device {f.device} {f.check}"


_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def render_text(report: DoctorReport) -> str:
    """Human output: one line per check, then the fixes, the observed stack and the drift."""
    lines = [f"envkit doctor: {report.root}" + (f" against {report.lock}" if report.lock else "")]
    width = max((len(c.name) for c in report.checks), default=10)
    for c in report.checks:
        lines.append(f"{_MARK[c.status]}  {c.name:<{width}}  {c.detail}")
    fixes = [c for c in report.checks if c.status != "ok" and c.fix]
    if fixes:
        lines.append("")
        lines.append("fixes:")
        for c in fixes:
            lines.append(f"  {c.name}: {c.fix}")
    lines.append("")
    lines.append("observed stack:")
    for key in STACK_KEYS:
        item = getattr(report.observed, key)
        if item is None:
            lines.append(f"  {key:<12} -")
        else:
            extra = f" [{item.details['firmware_version']}]" if key == "firmware" and "firmware_version" in item.details else ""
            lines.append(f"  {key:<12} {item.value}{extra}  ({item.source})")
    if report.drift:
        lines.append("")
        lines.append("drift from the lock:")
        for d in report.drift:
            lines.append(f"  {d.component:<12} {d.status:<12} locked {d.locked}, observed {d.observed or '-'}")
    fails = sum(c.status == "fail" for c in report.checks)
    warns = sum(c.status == "warn" for c in report.checks)
    if report.net is not None:
        lines += [""] + render_net(report.net)
    lines.append("")
    lines.append(f"{len(report.checks)} checks: {fails} failed, {warns} warnings")
    if report.net is not None:
        nf = sum(f.status == "fail" for f in report.net.findings)
        nw = sum(f.status == "warn" for f in report.net.findings)
        lines.append(f"{len(report.net.findings)} network checks: {nf} failed, {nw} warnings")
    return "\n".join(lines)


def render_net(net: NetSection) -> list[str]:
    lines = [f"network (hccn_tool: {net.tool or '-'}; devices {', '.join(map(str, net.devices)) or '-'}):"]
    width = max((len(_net_name(f)) for f in net.findings), default=10)
    for f in net.findings:
        lines.append(f"{_MARK[f.status]}  {_net_name(f):<{width}}  {f.message}")
    bad = [f for f in net.findings if f.status == "fail"]
    if bad:
        lines.append("sources of the network rules:")
        for src in dict.fromkeys(f.source for f in bad):
            lines.append(f"  {src}")
    for c in net.codes:
        lines.append(
            f"log: {c.get('code')} x{c.get('count')} (line {c.get('first_line')}): {c.get('title') or 'not in envkit table'}"
        )
        if c.get("cause"):
            lines += [f"  cause: {c['cause']}", f"  fix:   {c.get('fix')}"]
    return lines

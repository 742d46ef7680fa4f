"""hccn_tool outputs (link, net_health, tls, ip, ping) and the device IP plan, checked per device and per node.

Parsers take the raw output (str or bytes, possibly garbled or hostile) and never raise: output they cannot
read becomes a finding that quotes a sanitised excerpt. Output forms: the vendor documentation
(tests/fixtures/hccn/SOURCES.md). Rules: link UP, net health Success, one TLS switch on every device of every
node, `-ip -g` equal to /etc/hccn.conf address_N, peers reachable, and the IP plan of the chip
(A2: the 8 ports in one subnet; A3: the two dies of an NPU in different subnets; matrices/hccl.yaml).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from envkit.errors import BadInput
from envkit.io import bounded
from envkit.io.evidence import Evidence
from envkit.verdict import Status, Verdict

Text = str | bytes | None
MAX_CHARS = 65536
SOURCE_CHECKS = "vllm-project/vllm-ascend docs installation.md (multi-node checks); Ascend/mind-cluster fault guide"

_LINK = re.compile(r"^\s*link status\s*:\s*(\S+)\s*$", re.I | re.M)
_HEALTH = re.compile(r"^\s*net health status\s*:\s*([A-Za-z][A-Za-z ]*?)\s*$", re.I | re.M)
_TLS = re.compile(r"tls switch\[([0-9]{1,3})\]", re.I)  # ASCII digits, bounded: never int() of 5,000 digits
_IP = re.compile(r"^\s*ipaddr\s*:\s*(\S+)\s*$", re.I | re.M)
_MASK = re.compile(r"^\s*netmask\s*:\s*(\S+)\s*$", re.I | re.M)
_PING = re.compile(
    r"([0-9]{1,9})\s+packets transmitted,\s*([0-9]{1,9})\s+received,\s*([0-9]{1,3}(?:\.[0-9]{1,6})?)%\s*packet loss", re.I | re.A
)
_BUSY = re.compile(r"hccn_tool is busy", re.I)
HEALTH_STATES = (
    "Success",
    "Socket fail",
    "Receive timeout",
    "Unreachable",
    "Time exceeded",
    "Fault",
    "Init",
    "Thread error",
    "Detect ip set",
)


@dataclass
class NetProbe:
    """hccn_tool's answers per device, run here or read from the root's recording."""

    tool: str | None  # the executable run, or the recording folder
    skipped: str | None  # why nothing was asked
    hccn_conf: Evidence
    outputs: dict[int, dict[str, bytes | None]] = field(default_factory=dict)  # dev -> what -> output (None: none)
    pings: dict[int, dict[str, bytes | None]] = field(default_factory=dict)  # dev -> peer -> output
    errors: dict[tuple[int, str], str] = field(default_factory=dict)  # (dev, what or "ping PEER") -> why no output


def hccn_conf_addresses(data: bytes | None) -> dict[int, str]:
    """address_N of an hccn.conf; lines that do not hold a valid address are left out (the IP check names them)."""
    out: dict[int, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        m = re.fullmatch(r"\s*address_([0-9]{1,3})\s*=\s*(\S+)\s*", line)
        if m:
            try:
                bounded.address(m.group(2), f"address_{m.group(1)}")  # no scope id: the address reaches hccn_tool
            except BadInput:
                continue
            out[int(m.group(1))] = m.group(2)
    return out


def finding_dict(f: Verdict) -> dict[str, object]:
    """A check's verdict as doctor's report and provision's summary write it (`check` names the hccn_tool check)."""
    return {"check": f.rule, "status": f.status, "message": f.message, "device": f.device, "host": f.host, "source": f.source}


def _text(raw: Text) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    return raw[:MAX_CHARS]


def excerpt(raw: Text, limit: int = 120) -> str:
    """A printable one-line excerpt of untrusted output."""
    text = "".join(c if c.isprintable() else "?" for c in _text(raw).replace("\n", " | "))
    return (text[:limit] + "...") if len(text) > limit else text


def _one(pattern: re.Pattern[str], raw: Text) -> str | None:
    found = pattern.findall(_text(raw))
    return found[0].strip() if len(found) == 1 else None


def parse_link(raw: Text) -> str | None:
    """'UP' / 'DOWN' from `hccn_tool -i N -link -g`; None when the output is not exactly one status line."""
    value = _one(_LINK, raw)
    return value.upper() if value and value.upper() in ("UP", "DOWN") else None


def parse_net_health(raw: Text) -> str | None:
    value = _one(_HEALTH, raw)
    if value is None:
        return None
    return next((s for s in HEALTH_STATES if s.lower() == value.lower()), None)


def parse_tls(raw: Text) -> int | None:
    found = set(_TLS.findall(_text(raw)))
    return int(found.pop()) if len(found) == 1 else None


def parse_ip(raw: Text) -> tuple[str, str] | None:
    ip, mask = _one(_IP, raw), _one(_MASK, raw)
    if ip is None or mask is None:
        return None
    try:
        bounded.address(ip, "ipaddr")  # no scope id
        ipaddress.ip_interface(f"{ip}/{mask}")
    except (BadInput, ValueError):
        return None
    return ip, mask


@dataclass(frozen=True)
class Ping:
    transmitted: int
    received: int
    loss_percent: float


def parse_ping(raw: Text) -> Ping | None:
    found = _PING.findall(_text(raw))
    if len(found) != 1:
        return None
    sent, got, loss = found[0]
    try:
        return Ping(int(sent), int(got), float(loss))
    except ValueError:
        return None


def _unreadable(check: str, raw: Text, device: int | None, host: str | None) -> Verdict:
    if raw is None or not _text(raw).strip():
        return Verdict(
            rule=check,
            status="fail",
            message=f"hccn_tool gave no output for {check}",
            device=device,
            host=host,
            source=SOURCE_CHECKS,
        )
    if _BUSY.search(_text(raw)):
        return Verdict(
            rule=check,
            status="warn",
            message="hccn_tool is busy; run the check again, one hccn_tool at a time",
            device=device,
            host=host,
            source=SOURCE_CHECKS,
        )
    return Verdict(
        rule=check,
        status="fail",
        message=f"unreadable hccn_tool {check} output: '{excerpt(raw)}'",
        device=device,
        host=host,
        source=SOURCE_CHECKS,
    )


@dataclass
class DeviceOutputs:
    """The raw outputs of one device; any may be missing."""

    device: int
    link: Text = None
    net_health: Text = None
    tls: Text = None
    ip: Text = None
    ping: Mapping[str, Text] | None = None  # peer address -> output


def check_device(
    out: DeviceOutputs, hccn_address: str | None = None, host: str | None = None
) -> tuple[list[Verdict], dict[str, object]]:
    """Findings for one device and the facts read (link, health, tls, ip, netmask)."""
    d = out.device
    findings: list[Verdict] = []
    facts: dict[str, object] = {}
    link = parse_link(out.link)
    if link is None:
        findings.append(_unreadable("link", out.link, d, host))
    else:
        facts["link"] = link
        findings.append(
            Verdict(
                rule="link",
                status="ok" if link == "UP" else "fail",
                message=f"link status {link}" + ("" if link == "UP" else ": must be UP"),
                device=d,
                host=host,
                source=SOURCE_CHECKS,
            )
        )
    health = parse_net_health(out.net_health)
    if health is None:
        findings.append(_unreadable("net_health", out.net_health, d, host))
    else:
        facts["net_health"] = health
        status: Status = "ok" if health == "Success" else ("warn" if health == "Init" else "fail")
        findings.append(
            Verdict(
                rule="net_health",
                status=status,
                message=f"net health {health}" + ("" if health == "Success" else ": must be Success"),
                device=d,
                host=host,
                source=SOURCE_CHECKS,
            )
        )
    tls = parse_tls(out.tls)
    if tls is None:
        findings.append(_unreadable("tls", out.tls, d, host))
    else:
        facts["tls"] = tls
    ip = parse_ip(out.ip)
    if ip is None:
        findings.append(_unreadable("ip", out.ip, d, host))
    else:
        facts["ip"], facts["netmask"] = ip
        if hccn_address is not None:
            same = ip[0] == hccn_address
            findings.append(
                Verdict(
                    rule="ip",
                    status="ok" if same else "fail",
                    message=f"device ip {ip[0]}"
                    + (" matches" if same else " differs from")
                    + f" /etc/hccn.conf address_{d}={hccn_address}",
                    device=d,
                    host=host,
                    source="hicann/hccl rank_table_config_a2.md (device_ip is address_N); error EI0014",
                )
            )
    for peer, raw in sorted((out.ping or {}).items()):
        ping = parse_ping(raw)
        if ping is None:
            findings.append(_unreadable(f"ping {peer}", raw, d, host))
        elif ping.received == 0:
            findings.append(
                Verdict(
                    rule=f"ping {peer}",
                    status="fail",
                    message=f"{peer} unreachable ({ping.transmitted} sent, none received)",
                    device=d,
                    host=host,
                    source=SOURCE_CHECKS,
                )
            )
        elif ping.received < ping.transmitted:
            findings.append(
                Verdict(
                    rule=f"ping {peer}",
                    status="warn",
                    message=f"{peer}: {ping.loss_percent:.2f}% packet loss",
                    device=d,
                    host=host,
                    source=SOURCE_CHECKS,
                )
            )
        else:
            findings.append(
                Verdict(rule=f"ping {peer}", status="ok", message=f"{peer} reachable", device=d, host=host, source=SOURCE_CHECKS)
            )
    return findings, facts


def check_tls_consistent(tls_by_device: dict[tuple[str, int], int]) -> Verdict:
    """One TLS switch on every device of every node (a TLS-on and a TLS-off device cannot link: EI0016)."""
    values = sorted(set(tls_by_device.values()))
    source = "cann/hixl benchmarks README; hicann/hccl fault_diagnosis (EI0016)"
    if len(values) <= 1:
        return Verdict(
            rule="tls",
            status="ok",
            message=f"TLS switch {values[0] if values else '-'} on all {len(tls_by_device)} devices",
            source=source,
        )
    on = sorted(f"{h}:{d}" for (h, d), v in tls_by_device.items() if v)
    return Verdict(
        rule="tls",
        status="fail",
        message=f"TLS switch differs between devices (on: {', '.join(on)}); set one value everywhere",
        source=source,
    )


def check_ip_plan(chip: str, addresses: dict[int, tuple[str, str]], host: str | None = None) -> list[Verdict]:
    """A2 (910b): every port in one subnet; A3: devices 2k and 2k+1 (the dies of NPU k) in different subnets."""
    from envkit.fleet.data import cite, load_hccl

    plan = load_hccl().ip_plan(chip)
    if plan is None:
        return [
            Verdict(
                rule="ip_plan",
                status="warn",
                message=f"no IP plan is recorded for chip {chip}; not checked",
                host=host,
                source=SOURCE_CHECKS,
            )
        ]
    nets = {d: ipaddress.ip_interface(f"{ip}/{mask}").network for d, (ip, mask) in sorted(addresses.items())}
    source = cite(plan)
    if plan.rule == "same_subnet":
        distinct = sorted({str(n) for n in nets.values()})
        if len(distinct) == 1:
            return [
                Verdict(rule="ip_plan", status="ok", message=f"all {len(nets)} ports in {distinct[0]}", host=host, source=source)
            ]
        return [
            Verdict(
                rule="ip_plan",
                status="fail",
                message=f"ports span {len(distinct)} subnets ({', '.join(distinct)}); on {chip} all ports share one subnet",
                host=host,
                source=source,
            )
        ]
    findings = []
    for d in sorted(nets):
        if d % 2 == 0 and d + 1 in nets and nets[d] == nets[d + 1]:
            findings.append(
                Verdict(
                    rule="ip_plan",
                    status="fail",
                    message=f"devices {d} and {d + 1} (the two dies of NPU {d // 2}) share subnet {nets[d]}; they must differ",
                    device=d,
                    host=host,
                    source=source,
                )
            )
    return findings or [
        Verdict(
            rule="ip_plan",
            status="ok",
            message=f"the two dies of each NPU are in different subnets ({len(nets)} devices)",
            host=host,
            source=source,
        )
    ]


# --- `envkit doctor --net`: every device of one node -------------------------------------------------


def parse_peers(text: str) -> list[str]:
    """`--peers IP,IP,...`: each an IP address (a peer is passed to hccn_tool, so nothing else is accepted)."""
    peers = [p.strip() for p in bounded.text(text, "--peers").split(",") if p.strip()]
    for p in peers:
        try:
            bounded.address(p, "--peers")
        except BadInput:
            raise BadInput(
                f"--peers: {p[:60]!r} is not an IP address (no IPv6 scope id)",
                hint="give the peers' device IPs (address_N of their /etc/hccn.conf), comma-separated",
            ) from None
    return peers


def inventory_peers(inventory: object) -> dict[int, list[str]]:
    """Per device N, address_N of every host of an inventory that sets envkit_hccn_conf (as `launch render` reads it)."""
    from pathlib import Path

    from envkit.fleet.inventory import read_hccn_conf, read_inventory

    inv = read_inventory(Path(str(inventory)))
    peers: dict[int, list[str]] = {}
    for host in inv.hosts:
        conf = host.vars.get("envkit_hccn_conf")
        if not conf:
            continue
        path = Path(conf) if Path(conf).is_absolute() else inv.path.parent / conf
        for dev, item in read_hccn_conf(path).items():
            if item.address:
                peers.setdefault(dev, []).append(item.address)
    if not peers:
        raise BadInput(
            f"{inventory}: no host sets envkit_hccn_conf, so no peer device IP is known",
            hint="set envkit_hccn_conf=PATH (a copy of the host's /etc/hccn.conf) per host, or give --peers",
        )
    return peers


def check_net(net: NetProbe, chip: str | None = None, host: str | None = None) -> list[Verdict]:
    """Findings of a `probe_net` result: per device link, health, ip vs hccn.conf, pings; one TLS switch on every
    device; the chip's IP plan. A query that gave no output says why (a timeout, a missing recording)."""
    assert isinstance(net, NetProbe)
    if net.tool is None:
        return [
            Verdict(
                rule="hccn_tool", status="warn", message=f"network not checked: {net.skipped}", host=host, source=SOURCE_CHECKS
            )
        ]
    conf = hccn_conf_addresses(net.hccn_conf.data)
    findings: list[Verdict] = []
    if net.hccn_conf.data is None:
        findings.append(
            Verdict(
                rule="hccn.conf",
                status="warn",
                message=f"{net.hccn_conf.source}: {net.hccn_conf.error}; device IPs not compared",
                host=host,
                source="hicann/hccl rank_table_config_a2.md",
            )
        )
    if not net.outputs:
        return findings + [
            Verdict(
                rule="hccn_tool",
                status="warn",
                message="no NPU device found (no address_N in /etc/hccn.conf, no /dev/davinciN)",
                host=host,
                source=SOURCE_CHECKS,
            )
        ]
    tls: dict[tuple[str, int], int] = {}
    addresses: dict[int, tuple[str, str]] = {}
    for dev, outs in sorted(net.outputs.items()):
        out = DeviceOutputs(dev, outs.get("link"), outs.get("net_health"), outs.get("tls"), outs.get("ip"), net.pings.get(dev))
        found, facts = check_device(out, conf.get(dev), host)
        for f in found:
            why = net.errors.get((dev, f.rule))
            findings.append(
                Verdict(rule=f.rule, status="fail", message=why, device=f.device, host=f.host, source=SOURCE_CHECKS)
                if why and f.status != "ok"
                else f
            )
        if "tls" in facts:
            tls[(host or "-", dev)] = int(facts["tls"])  # type: ignore[call-overload]
        if "ip" in facts:
            addresses[dev] = (str(facts["ip"]), str(facts["netmask"]))
    if tls:
        findings.append(check_tls_consistent(tls))
    if chip and addresses:
        findings.extend(check_ip_plan(chip, addresses, host))
    return findings


def net_from_probe_facts(state: object) -> NetProbe:
    """The provisioning probe's `hccn` facts (envkit_probe.py: tool, conf, outputs, pings, errors) as a NetProbe;
    anything of the wrong shape (a hostile host) is dropped, never trusted."""
    st = state if isinstance(state, dict) else {}

    def text(v: object) -> bytes | None:
        return v.encode("utf-8", "replace")[:MAX_CHARS] if isinstance(v, str) else None

    def dev_map(v: object) -> dict[int, dict[str, bytes | None]]:
        out: dict[int, dict[str, bytes | None]] = {}
        for k, d in v.items() if isinstance(v, dict) else []:
            if isinstance(k, str) and bounded.is_digits(k, 3) and isinstance(d, dict):
                out[int(k)] = {str(w): text(t) for w, t in list(d.items())[:64]}
        return out

    raw_conf = st.get("conf")
    conf = raw_conf if isinstance(raw_conf, dict) else {}
    conf_ev = Evidence(
        "/etc/hccn.conf",
        data=text(conf.get("content")) if conf.get("exists") else None,
        error=None if conf.get("exists") else "not found",
    )
    errors: dict[tuple[int, str], str] = {}
    for k, why in (st.get("errors") or {}).items() if isinstance(st.get("errors"), dict) else []:
        dev, _, what = str(k).partition(" ")
        if bounded.is_digits(dev, 3):
            errors[(int(dev), what)] = excerpt(str(why), 200)
    tool = st.get("tool")
    return NetProbe(
        tool=excerpt(tool, 200) if isinstance(tool, str) and tool else None,
        skipped="no hccn_tool on the host",
        hccn_conf=conf_ev,
        outputs=dev_map(st.get("outputs")),
        pings=dev_map(st.get("pings")),
        errors=errors,
    )


def net_verdict(findings: list[Verdict]) -> str:
    """One summary cell: 'ok (N checks)', or the failures (then the warnings), first two named."""
    for status, word in (("fail", "FAIL"), ("warn", "warn")):
        bad = [f for f in findings if f.status == status]
        if bad:
            named = "; ".join((f"dev {f.device} " if f.device is not None else "") + f"{f.rule}: {f.message}" for f in bad[:2])
            return f"{word} {len(bad)}: {named}" + (f" (+{len(bad) - 2} more)" if len(bad) > 2 else "")
    return f"ok ({len(findings)} checks)"

"""The HCCL environment block per node, validated against matrices/hccl.yaml before any launch.

Values come from inventory variables named like the variable in lower case (`hccl_connect_timeout=600`, in
`[group:vars]` or per host). Rules: each integer in its range; HCCL_OP_EXPANSION_MODE legal for the chip (950:
an unsupported value is an error; A2/A3 fall back to the default, so a warning); exactly one of HCCL_IF_IP and
HCCL_SOCKET_IFNAME, set on every node; the variables HCCL needs identical are identical on every node.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from envkit.errors import Where
from envkit.fleet.data import HcclData, cite
from envkit.fleet.inventory import Host
from envkit.fleet.ranktable import raise_problems
from envkit.io import bounded
from envkit.verdict import Verdict

_IFNAME = re.compile(r"^(\^?=)?[A-Za-z0-9_.:@-]+(,[A-Za-z0-9_.:@-]+)*$")
ORDER = (
    "HCCL_CONNECT_TIMEOUT",
    "HCCL_EXEC_TIMEOUT",
    "HCCL_BUFFSIZE",
    "HCCL_OP_EXPANSION_MODE",
    "HCCL_IF_IP",
    "HCCL_SOCKET_IFNAME",
)


@dataclass
class EnvPlan:
    per_host: dict[str, dict[str, str]]
    warnings: list[str] = field(default_factory=list)
    nic_variable: str = "HCCL_IF_IP"


def uniform_env(given: dict[str, str], nodes: int, chip: str, data: HcclData, where: str) -> dict[str, str]:
    """The one HCCL environment every node of a job gets where no node is known by name or address yet (the pods of
    `envkit k8s render`): `given` (NAME -> value, as --hccl gives it) held to the same rules across `nodes` nodes;
    BadInput naming the broken rule, `where` the option that gave it."""
    vars_ = {k.lower(): v for k, v in given.items()}
    hosts = [Host(name=f"node-{i}", vars=vars_, line=0) for i in range(max(nodes, 1))]
    return plan_env(hosts, chip, data, where).per_host[hosts[0].name]


def _int(value: str) -> int | None:
    """An inventory's number: ASCII digits, at most 19, a minus sign allowed (int() also takes "1_000", "+600", "٣"
    and 4,000 digits)."""
    value = value.strip()
    return int(value) if bounded.is_digits(value.removeprefix("-"), 19) else None


def plan_env(hosts: list[Host], chip: str, data: HcclData, inventory_file: str) -> EnvPlan:
    """The environment of every host, or BadInput naming the broken rule and its source."""
    problems: list[Verdict] = []
    warnings: list[str] = []
    values: dict[str, dict[str, str]] = {name: {} for name in ORDER}
    for host in hosts:
        for name in ORDER:
            raw = host.vars.get(name.lower())
            if raw is not None:
                values[name][host.name] = raw.strip()

    for rule in data.env:
        given = values[rule.name]
        if rule.same_on_all_nodes and given and (len(set(given.values())) > 1 or len(given) != len(hosts)):
            shown = ", ".join(f"{h.name}={given.get(h.name, '(unset)')}" for h in hosts)
            problems.append(
                Verdict(
                    rule=f"{rule.name}-same-on-all-nodes",
                    message=f"{rule.name} must be identical on every node: {shown}",
                    source=cite(rule),
                )
            )
            continue
        if rule.kind == "int":
            for host_name, raw in given.items():
                n = _int(raw)
                lo, hi = rule.min, rule.max
                if n is None or (lo is not None and n < lo) or (hi is not None and n > hi):
                    rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
                    problems.append(
                        Verdict(
                            rule=f"{rule.name}-range",
                            message=f"{rule.name}={raw!r} on {host_name} is not an integer in {rng}",
                            source=cite(rule),
                            line=next(h for h in hosts if h.name == host_name).line,
                        )
                    )
                    break

    modes = data.op_modes(chip)
    mode = next(iter(values["HCCL_OP_EXPANSION_MODE"].values()), None)
    if mode is not None:
        if modes is None:
            warnings.append(f"HCCL_OP_EXPANSION_MODE={mode}: no legal values are recorded for chip {chip}; not checked")
        elif mode not in modes.values:
            text = f"HCCL_OP_EXPANSION_MODE={mode} is not supported on chip {chip} (legal: {', '.join(modes.values)})"
            if modes.on_unsupported == "error":
                problems.append(
                    Verdict(
                        rule="HCCL_OP_EXPANSION_MODE-legal-for-chip", message=text + "; HCCL reports an error", source=cite(modes)
                    )
                )
            else:
                warnings.append(f"{text}; HCCL ignores it and uses {modes.default} ({cite(modes)})")
        if mode == "AIV":
            exec_rule = data.env_rule("HCCL_EXEC_TIMEOUT")
            t = _int(next(iter(values["HCCL_EXEC_TIMEOUT"].values()), "") or "")
            if t is not None and exec_rule.aiv_max is not None and (t == 0 or t > exec_rule.aiv_max):
                warnings.append(f"HCCL_EXEC_TIMEOUT={t} with AIV: HCCL uses {exec_rule.aiv_max} s instead ({cite(exec_rule)})")

    if_ip, ifname = values["HCCL_IF_IP"], values["HCCL_SOCKET_IFNAME"]
    ip_rule, ifname_rule = data.env_rule("HCCL_IF_IP"), data.env_rule("HCCL_SOCKET_IFNAME")
    nic = "HCCL_SOCKET_IFNAME" if ifname else "HCCL_IF_IP"
    if if_ip and ifname:
        problems.append(
            Verdict(
                rule="one-NIC-variable",
                message="set HCCL_IF_IP or HCCL_SOCKET_IFNAME, not both (HCCL_IF_IP wins and hides the other)",
                source=cite(ip_rule),
            )
        )
    elif ifname:
        bad = [f"{h}={v!r}" for h, v in ifname.items() if not _IFNAME.match(v)]
        if bad:
            problems.append(
                Verdict(
                    rule="HCCL_SOCKET_IFNAME-format",
                    message=f"HCCL_SOCKET_IFNAME {', '.join(bad)} is not an interface list (eth0, ^=eth0, =eth0)",
                    source=cite(ifname_rule),
                )
            )
    else:
        for host in hosts:  # default: the host's inventory address, when it is an IP
            if host.name not in if_ip:
                try:
                    ipaddress.ip_address(host.address)
                    if_ip[host.name] = host.address
                except ValueError:
                    pass
        missing = [h.name for h in hosts if h.name not in if_ip]
        if missing:
            problems.append(
                Verdict(
                    rule="NIC-variable-on-every-node",
                    message=f"HCCL_IF_IP is unknown for {', '.join(missing)}: set hccl_if_ip per host (or ansible_host to an IP), or hccl_socket_ifname for all",
                    source=cite(ip_rule),
                    line=next(h for h in hosts if h.name == missing[0]).line,
                )
            )
        for host_name, ip in if_ip.items():
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                problems.append(
                    Verdict(
                        rule="HCCL_IF_IP-address",
                        message=f"HCCL_IF_IP={ip!r} on {host_name} is not an IP address",
                        source=cite(ip_rule),
                    )
                )
        taken = [ip for ip in if_ip.values()]
        dup = sorted({ip for ip in taken if taken.count(ip) > 1})
        if dup:
            problems.append(
                Verdict(
                    rule="HCCL_IF_IP-per-node",
                    message=f"HCCL_IF_IP {', '.join(dup)} is given to more than one node",
                    source=cite(ip_rule),
                )
            )

    if problems:
        raise_problems(problems, Where(inventory_file, problems[0].line or None), kind="HCCL")  # line 0: none known

    per_host: dict[str, dict[str, str]] = {}
    for host in hosts:
        env: dict[str, str] = {}
        for rule in data.env:
            if rule.kind == "int":
                value = values[rule.name].get(host.name, rule.default)
                if value is not None:
                    env[rule.name] = str(_int(value))
        if mode is not None:
            env["HCCL_OP_EXPANSION_MODE"] = mode
        env[nic] = (ifname if ifname else if_ip)[host.name]
        per_host[host.name] = env
    return EnvPlan(per_host=per_host, warnings=warnings, nic_variable=nic)

"""The HCCL environment block per node, validated against the rules the lock carries (`platform.hccl`: the lock's
own facts, from matrices/hccl.yaml) before any launch.

Values are given per node, each named like the variable in lower case (`hccl_connect_timeout=600`: an inventory's
`[group:vars]` or host variables, `envkit k8s render --hccl`). Rules: each integer in its range;
HCCL_OP_EXPANSION_MODE legal for the chip (950: an unsupported value is an error; A2/A3 fall back to the default,
so a warning); exactly one of HCCL_IF_IP and HCCL_SOCKET_IFNAME, set on every node; the variables HCCL needs
identical are identical on every node.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envkit.errors import BadInput, Where
from envkit.fleet.ranktable import raise_problems
from envkit.io import bounded
from envkit.verdict import Verdict

if TYPE_CHECKING:
    from envkit.models.lock import HcclEnvRule, HcclFacts, LockSourced

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


@dataclass(frozen=True)
class NodeValues:
    """One node's HCCL values as given (`hccl_connect_timeout` -> "600": the variable's name in lower case; other
    keys are ignored), the address HCCL_IF_IP defaults to when it is an IP (an inventory host's `ansible_host`;
    None where the node's address is not known yet), and the line that gave them (0: none)."""

    values: Mapping[str, str]
    address: str | None = None
    line: int = 0


def cite(row: LockSourced) -> str:
    """'source; source (confidence)' of one of the lock's HCCL rows, for messages."""
    return f"{'; '.join(row.source)} ({row.confidence})"


def uniform_env(given: dict[str, str], nodes: int, chip: str, facts: HcclFacts, where: str) -> dict[str, str]:
    """The one HCCL environment every node of a job gets where no node is known by name or address yet (the pods of
    `envkit k8s render`): `given` (NAME -> value, as --hccl gives it) held to the same rules across `nodes` nodes;
    BadInput naming the broken rule, `where` the option that gave it."""
    same = NodeValues({k.lower(): v for k, v in given.items()})
    names = [f"node-{i}" for i in range(max(nodes, 1))]
    return plan_env(dict.fromkeys(names, same), chip, facts, where).per_host[names[0]]


def _rule(facts: HcclFacts, name: str) -> HcclEnvRule:
    """The lock's rule for `name`; BadInput when the lock carries none (an edited lock: `envkit resolve` writes every
    rule of matrices/hccl.yaml)."""
    rule = next((r for r in facts.env if r.name == name), None)
    if rule is None:
        raise BadInput(
            f"the lock's HCCL rules (platform.hccl.env) have no rule for {name}",
            where=Where("envkit.lock", None, "platform.hccl.env"),
            hint="The lock was edited: resolve it again (`envkit resolve`), which writes every HCCL rule.",
        )
    return rule


def _int(value: str) -> int | None:
    """An inventory's number: ASCII digits, at most 19, a minus sign allowed (int() also takes "1_000", "+600", "٣"
    and 4,000 digits)."""
    value = value.strip()
    return int(value) if bounded.is_digits(value.removeprefix("-"), 19) else None


def plan_env(nodes: Mapping[str, NodeValues], chip: str, facts: HcclFacts, where: str) -> EnvPlan:
    """The environment of every node (by name, in order), from the rules of the lock's chip (`facts`: the lock's
    platform.hccl); BadInput naming the broken rule and its source, at `where` (the inventory, with the node's line)."""
    values = _given(nodes)
    problems = _rule_problems(nodes, facts, values)
    warnings: list[str] = []
    mode = _op_mode(chip, facts, values, problems, warnings)
    nic = "HCCL_SOCKET_IFNAME" if values["HCCL_SOCKET_IFNAME"] else "HCCL_IF_IP"
    problems += _nic_problems(nodes, facts, values)
    if problems:
        raise_problems(problems, Where(where, problems[0].line or None), kind="HCCL")  # line 0: none known
    per_host: dict[str, dict[str, str]] = {}
    for node in nodes:
        env: dict[str, str] = {}
        for rule in facts.env:
            if rule.kind == "int":
                value = values[rule.name].get(node, rule.default)
                if value is not None:
                    env[rule.name] = str(_int(value))
        if mode is not None:
            env["HCCL_OP_EXPANSION_MODE"] = mode
        env[nic] = values[nic][node]
        per_host[node] = env
    return EnvPlan(per_host=per_host, warnings=warnings, nic_variable=nic)


def _given(nodes: Mapping[str, NodeValues]) -> dict[str, dict[str, str]]:
    """Each HCCL variable's value on each node that sets it (variable -> node -> value, stripped)."""
    values: dict[str, dict[str, str]] = {name: {} for name in ORDER}
    for node, given_here in nodes.items():
        for name in ORDER:
            raw = given_here.values.get(name.lower())
            if raw is not None:
                values[name][node] = raw.strip()
    return values


def _rule_problems(nodes: Mapping[str, NodeValues], facts: HcclFacts, values: dict[str, dict[str, str]]) -> list[Verdict]:
    """The rules of each variable: the same on every node where they say so, an integer in range (the first node
    out of it named)."""
    problems: list[Verdict] = []
    for rule in facts.env:
        given = values[rule.name]
        if rule.same_on_all_nodes and given and (len(set(given.values())) > 1 or len(given) != len(nodes)):
            shown = ", ".join(f"{n}={given.get(n, '(unset)')}" for n in nodes)
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
                            line=nodes[host_name].line,
                        )
                    )
                    break
    return problems


def _op_mode(
    chip: str, facts: HcclFacts, values: dict[str, dict[str, str]], problems: list[Verdict], warnings: list[str]
) -> str | None:
    """HCCL_OP_EXPANSION_MODE as given (None: not given), checked against the chip's legal values (an error or a
    warning, as HCCL treats it) and, for AIV, the execution timeout it caps."""
    modes = facts.op_expansion
    mode = next(iter(values["HCCL_OP_EXPANSION_MODE"].values()), None)
    if mode is None:
        return None
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
        exec_rule = _rule(facts, "HCCL_EXEC_TIMEOUT")
        t = _int(next(iter(values["HCCL_EXEC_TIMEOUT"].values()), "") or "")
        if t is not None and exec_rule.aiv_max is not None and (t == 0 or t > exec_rule.aiv_max):
            warnings.append(f"HCCL_EXEC_TIMEOUT={t} with AIV: HCCL uses {exec_rule.aiv_max} s instead ({cite(exec_rule)})")
    return mode


def _nic_problems(nodes: Mapping[str, NodeValues], facts: HcclFacts, values: dict[str, dict[str, str]]) -> list[Verdict]:
    """One NIC variable for the whole job: HCCL_SOCKET_IFNAME as an interface list, or HCCL_IF_IP on every node (a
    node's address where it is an IP and none is given: added to `values`), an IP, each its own."""
    if_ip, ifname = values["HCCL_IF_IP"], values["HCCL_SOCKET_IFNAME"]
    ip_rule, ifname_rule = _rule(facts, "HCCL_IF_IP"), _rule(facts, "HCCL_SOCKET_IFNAME")
    if if_ip and ifname:
        return [
            Verdict(
                rule="one-NIC-variable",
                message="set HCCL_IF_IP or HCCL_SOCKET_IFNAME, not both (HCCL_IF_IP wins and hides the other)",
                source=cite(ip_rule),
            )
        ]
    if ifname:
        bad = [f"{h}={v!r}" for h, v in ifname.items() if not _IFNAME.match(v)]
        if not bad:
            return []
        return [
            Verdict(
                rule="HCCL_SOCKET_IFNAME-format",
                message=f"HCCL_SOCKET_IFNAME {', '.join(bad)} is not an interface list (eth0, ^=eth0, =eth0)",
                source=cite(ifname_rule),
            )
        ]
    problems: list[Verdict] = []
    for node, given_here in nodes.items():  # default: the node's address, when it is an IP
        if node not in if_ip and given_here.address is not None:
            try:
                ipaddress.ip_address(given_here.address)
                if_ip[node] = given_here.address
            except ValueError:
                pass
    missing = [n for n in nodes if n not in if_ip]
    if missing:
        problems.append(
            Verdict(
                rule="NIC-variable-on-every-node",
                message=f"HCCL_IF_IP is unknown for {', '.join(missing)}: set hccl_if_ip per host (or ansible_host to an IP), or hccl_socket_ifname for all",
                source=cite(ip_rule),
                line=nodes[missing[0]].line,
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
    return problems

"""An Ansible INI inventory (hosts and their variables) and /etc/hccn.conf, read without Ansible.

Supported: `[group]` host lines with `key=value` variables, `[group:vars]`, `[group:children]`, comments (`#`, `;`)
and numeric ranges (`node[01:03]`). Host variables win over group variables; among groups, a child group's
variables win over its parent's, as in Ansible. Hosts keep the order of their first appearance.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import BadInput, Where
from envkit.yamlio import read_text

_RANGE = re.compile(r"\[(\d+):(\d+)\]")
# a host name is used as a folder name (hosts/<name>) and an address reaches rendered shell scripts: plain names only
_HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,252}$")
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$")


def is_address(value: str) -> bool:
    """An IP address or a DNS host name (what may be a rendezvous address in a rendered script)."""
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return bool(_DNS_NAME.match(value))


@dataclass(frozen=True)
class Host:
    name: str
    vars: dict[str, str]
    line: int

    @property
    def address(self) -> str:
        return self.vars.get("ansible_host", self.name)


@dataclass
class Inventory:
    path: Path
    hosts: list[Host] = field(default_factory=list)

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)


def _expand(name: str, where: Where) -> list[str]:
    m = _RANGE.search(name)
    if not m:
        return [name]
    lo, hi = m.group(1), m.group(2)
    if int(hi) < int(lo):
        raise BadInput(f"host range {name} runs backwards", where=where)
    width = len(lo) if lo.startswith("0") else 0
    return [
        n for i in range(int(lo), int(hi) + 1) for n in _expand(name[: m.start()] + str(i).zfill(width) + name[m.end() :], where)
    ]


def _pairs(tokens: list[str], where: Where) -> dict[str, str]:
    out: dict[str, str] = {}
    for tok in tokens:
        if "=" not in tok:
            raise BadInput(f"expected key=value, found '{tok}'", where=where, hint="Host variables are written key=value.")
        key, value = tok.split("=", 1)
        out[key] = value
    return out


def parse_inventory(text: str, path: Path) -> Inventory:
    """The hosts of an INI inventory with their merged variables."""
    group_hosts: dict[str, list[str]] = {}
    group_vars: dict[str, dict[str, str]] = {}
    children: dict[str, list[str]] = {}
    host_vars: dict[str, dict[str, str]] = {}
    host_line: dict[str, int] = {}
    order: list[str] = []
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        where = Where(str(path), number)
        if line.startswith("["):
            if not line.endswith("]"):
                raise BadInput(f"unclosed section header '{line}'", where=where)
            name = line[1:-1].strip()
            section, _, kind = name.partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise BadInput(
                    f"unknown section kind ':{kind}'", where=where, hint="Use [group], [group:vars] or [group:children]."
                )
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise BadInput(f"cannot split the line: {exc}", where=where) from None
        if not tokens:
            continue
        if kind == "vars":
            if "=" not in line:
                raise BadInput(f"expected key=value, found '{line}'", where=where)
            key, value = (p.strip() for p in line.split("=", 1))
            value = " ".join(shlex.split(value, comments=True)) if value else ""
            group_vars.setdefault(section, {})[key] = value
        elif kind == "children":
            children.setdefault(section, []).append(tokens[0])
        else:
            for name in _expand(tokens[0], where):
                if name not in host_line:
                    host_line[name] = number
                    order.append(name)
                group_hosts.setdefault(section, []).append(name)
                host_vars.setdefault(name, {}).update(_pairs(tokens[1:], where))

    def depth(group: str, seen: tuple[str, ...] = ()) -> int:
        parents = [p for p, kids in children.items() if group in kids and p not in seen]
        return 1 + max((depth(p, (*seen, group)) for p in parents), default=0)

    def members(group: str, seen: tuple[str, ...] = ()) -> set[str]:
        out = set(group_hosts.get(group, []))
        for kid in children.get(group, []):
            if kid not in seen:
                out |= members(kid, (*seen, group))
        return out

    groups = sorted(set(group_hosts) | set(group_vars) | set(children), key=lambda g: (depth(g), g))
    hosts = []
    for name in order:
        merged: dict[str, str] = {}
        for group in ["all", *[g for g in groups if g != "all"]]:
            if group == "all" or name in members(group):
                merged.update(group_vars.get(group, {}))
        merged.update(host_vars.get(name, {}))
        where = Where(str(path), host_line[name])
        if not _HOST_NAME.match(name):
            raise BadInput(
                f"host name {name[:80]!r} is not a plain host name",
                where=where,
                hint="Host names are letters, digits and _ . : - (at most 253), no '/': they name folders hosts/<name>.",
            )
        address = merged.get("ansible_host", name)
        if not is_address(address):
            raise BadInput(
                f"ansible_host={address[:80]!r} of {name[:80]} is neither an IP address nor a DNS host name",
                where=where,
                hint="Set ansible_host to the host's IP address or DNS name.",
            )
        hosts.append(Host(name, merged, host_line[name]))
    if not hosts:
        raise BadInput(f"no hosts in {path}", where=Where(str(path)), hint="List one host per line under a [group] header.")
    return Inventory(Path(path), hosts)


def read_inventory(path: Path) -> Inventory:
    return parse_inventory(read_text(Path(path)), Path(path))


# --- /etc/hccn.conf ---------------------------------------------------------------------------

_HCCN_KEY = re.compile(r"^(address|netmask|netdetect|gateway|send_arp_status|arp_status|ip_rule|route)_(\d+)$")


@dataclass(frozen=True)
class HccnDevice:
    device_id: int
    address: str | None
    netmask: str | None

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
        if not self.address or not self.netmask:
            return None
        return ipaddress.ip_interface(f"{self.address}/{self.netmask}").network


def parse_hccn_conf(text: str, filename: str) -> dict[int, HccnDevice]:
    """`address_N=...`, `netmask_N=...` per device N. Unknown keys are ignored; a bad address is BadInput."""
    found: dict[int, dict[str, str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (p.strip() for p in line.split("=", 1))
        m = _HCCN_KEY.match(key)
        if not m:
            continue
        kind, dev = m.group(1), int(m.group(2))
        if kind in ("address", "netmask"):
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise BadInput(
                    f"{key}={value!r} is not an IP address",
                    where=Where(filename, number, key),
                    hint="hccn.conf holds address_N=IP and netmask_N=MASK per device N.",
                ) from None
            found.setdefault(dev, {})[kind] = value
    devices = {d: HccnDevice(d, v.get("address"), v.get("netmask")) for d, v in sorted(found.items())}
    return devices


def read_hccn_conf(path: Path) -> dict[int, HccnDevice]:
    return parse_hccn_conf(read_text(Path(path)), str(path))

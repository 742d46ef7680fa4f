"""An Ansible INI inventory (hosts and their variables) and /etc/hccn.conf, read without Ansible.

Supported: `[group]` host lines with `key=value` variables, `[group:vars]`, `[group:children]`, comments (`#`, `;`)
and numeric ranges (`node[01:03]`). Host variables win over group variables; among groups, a child group's
variables win over its parent's, as in Ansible. Hosts keep the order of their first appearance.

Untrusted text: numbers, ranges and addresses go through `envkit.io.bounded`; the hosts, their entries, the groups and
the `[group:children]` edges are capped, and the group graph is walked once (a cycle is refused), so no inventory
makes the parser hang or run out of memory. Files are read through `envkit.io.untrusted` (regular files only).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import BadInput, Where
from envkit.io import bounded, untrusted
from envkit.io.bounded import MAX_HOSTS, host_range

MAX_GROUPS = 1024  # groups in one inventory: bounds the group graph's walk
# a host name is used as a folder name (hosts/<name>) and an address reaches rendered shell scripts: plain names only
_HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,252}$")
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$")


def is_address(value: str) -> bool:
    """An IP address or a DNS host name (what may be a rendezvous address in a rendered script); an IPv6 scope id
    (`fe80::1%eth0`, which `ipaddress` takes with any junk after the %) is neither."""
    if "%" in value or len(value) > bounded.MAX_NAME:
        return False
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
    entries = edges = 0
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
            try:  # `'a=b'` splits whole, but its value `b'` alone does not
                value = " ".join(shlex.split(value, comments=True)) if value else ""
            except ValueError as exc:
                raise BadInput(f"cannot split the value of {key[:60]}: {exc}", where=where) from None
            group_vars.setdefault(section, {})[key] = value
        elif kind == "children":
            edges += 1
            if edges > 16 * MAX_GROUPS:
                raise BadInput(f"{path} has more than {16 * MAX_GROUPS} [group:children] entries", where=where)
            children.setdefault(section, []).append(bounded.text(tokens[0], "a child group", limit=bounded.MAX_NAME, where=where))
        else:
            names = host_range(tokens[0], where)
            entries += len(names)
            if entries > 4 * MAX_HOSTS:  # group memberships, repeats included: bounded work per file
                raise BadInput(f"{path} lists more than {4 * MAX_HOSTS} host entries", where=where)
            for name in names:
                if name not in host_line:
                    if len(order) >= MAX_HOSTS:
                        raise BadInput(f"{path} lists more than {MAX_HOSTS} hosts", where=where)
                    host_line[name] = number
                    order.append(name)
                group_hosts.setdefault(section, []).append(name)
                host_vars.setdefault(name, {}).update(_pairs(tokens[1:], where))

    groups = set(group_hosts) | set(group_vars) | set(children) | {kid for kids in children.values() for kid in kids}
    if len(groups) > MAX_GROUPS:
        raise BadInput(f"{path} has more than {MAX_GROUPS} groups", where=Where(str(path)))
    rank, above = _group_graph(children, path)
    direct: dict[str, list[str]] = {}
    for group, names in group_hosts.items():
        for name in names:
            direct.setdefault(name, []).append(group)
    hosts = []
    for name in order:
        mine = {g for d in direct.get(name, ()) for g in (d, *above.get(d, ()))} - {"all"}
        merged: dict[str, str] = dict(group_vars.get("all", {}))
        for group in sorted(mine, key=lambda g: (rank.get(g, 1), g)):
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


def _walk_order(children: dict[str, list[str]], path: Path) -> list[str]:
    """Every group once, parents before children (Kahn's algorithm: linear in the edges); a cycle is BadInput."""
    nodes = set(children) | {k for kids in children.values() for k in kids}
    parents_left = {n: 0 for n in nodes}
    for kids in children.values():
        for kid in set(kids):
            parents_left[kid] += 1
    ready = sorted(n for n, c in parents_left.items() if c == 0)
    order: list[str] = []
    while ready:
        group = ready.pop()
        order.append(group)
        for kid in sorted(set(children.get(group, ()))):
            parents_left[kid] -= 1
            if parents_left[kid] == 0:
                ready.append(kid)
    if len(order) != len(nodes):
        stuck = sorted(n for n, c in parents_left.items() if c > 0)
        raise BadInput(
            f"{path}: the groups {', '.join(stuck[:8])} are children of each other (a cycle)",
            where=Where(str(path)),
            hint="A group cannot be its own descendant in [group:children].",
        )
    return order


def _group_graph(children: dict[str, list[str]], path: Path) -> tuple[dict[str, int], dict[str, set[str]]]:
    """One walk of the group graph (parents before children): each group's depth (the longest chain of parents
    above it: a child's variables win over its parent's, as in Ansible) and its ancestors, each set made once."""
    depth: dict[str, int] = {}
    above: dict[str, set[str]] = {}
    for group in _walk_order(children, path):
        depth.setdefault(group, 1)
        mine = above.setdefault(group, set())
        for kid in children.get(group, ()):
            depth[kid] = max(depth.get(kid, 1), depth[group] + 1)
            above.setdefault(kid, set()).update(mine | {group})
    return depth, above


INVENTORY = untrusted.Kind("an inventory", 8 << 20)  # 10,000 hosts with their variables fit


def read_inventory(path: Path) -> Inventory:
    """The inventory at `path`: a regular file (a FIFO or device is refused unopened, never blocks), capped."""
    return parse_inventory(untrusted.read_text(Path(path), INVENTORY), Path(path))


# --- /etc/hccn.conf ---------------------------------------------------------------------------

_HCCN_KEY = re.compile(r"^(address|netmask|netdetect|gateway|send_arp_status|arp_status|ip_rule|route)_([0-9]+)$")


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
        where = Where(filename, number, key)
        kind = m.group(1)
        dev = bounded.integer(m.group(2), f"the device id of {key[:60]}", lo=0, hi=bounded.MAX_DEVICE_ID, where=where,
                              hint=f"device ids are 0 to {bounded.MAX_DEVICE_ID} (/dev/davinciN)")  # fmt: skip
        if kind in ("address", "netmask"):
            try:
                bounded.address(value, key, where=where)
            except BadInput as exc:
                raise BadInput(
                    exc.message, where=where, hint="hccn.conf holds address_N=IP and netmask_N=MASK per device N."
                ) from None
            found.setdefault(dev, {})[kind] = value
    devices = {d: HccnDevice(d, v.get("address"), v.get("netmask")) for d, v in sorted(found.items())}
    return devices


def read_hccn_conf(path: Path) -> dict[int, HccnDevice]:
    """A copy of a host's /etc/hccn.conf (`envkit_hccn_conf`): a regular file of at most 1 MiB, never blocking."""
    return parse_hccn_conf(untrusted.read_text(Path(path), untrusted.CONFIG), str(path))

"""HCCL rank tables v1.0 (Atlas A2), v1.2 (Atlas A3, SuperPoD) and v2.0 (Ascend 950): models, rendering, checks.

Layouts: hicann/hccl docs/en/user_guide/cluster_info_config/rank_table_config_{a2,a3,a5}.md. Ranks are given in
inventory order, per host in device-id order, so one server's ranks are contiguous (interleaving across servers
is not supported). device_ip is `address_N` of the host's /etc/hccn.conf for device N.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from envkit.errors import BadInput, Where
from envkit.fleet.inventory import HccnDevice
from envkit.models.base import StrictModel
from envkit.verdict import Verdict

_ID = r"^\d+$"
A2_SOURCE = "hicann/hccl docs/en/user_guide/cluster_info_config/rank_table_config_a2.md"
A3_SOURCE = "hicann/hccl docs/en/user_guide/cluster_info_config/rank_table_config_a3.md"
A5_SOURCE = "hicann/hccl docs/en/user_guide/cluster_info_config/rank_table_config_a5.md"


# --- v1.0 / v1.2 --------------------------------------------------------------------------------


class DeviceV1(StrictModel):
    device_id: str = Field(pattern=_ID, description="physical id of the NPU (/dev/davinciN)")
    device_ip: str = Field(description="address_N of /etc/hccn.conf")
    device_port: str | None = Field(None, pattern=_ID)
    rank_id: str = Field(pattern=_ID, description="global rank, from 0, contiguous per server")


class DeviceV12(DeviceV1):
    super_device_id: str = Field(pattern=_ID, description="SDID of the die in the SuperPoD (npu-smi info -t spod-info)")


class ServerV10(StrictModel):
    server_id: str = Field(min_length=1, max_length=64)
    device: list[DeviceV1] = Field(min_length=1)


class ServerV12(StrictModel):
    server_id: str = Field(min_length=1, max_length=64)
    host_ip: str | None = None
    device: list[DeviceV12] = Field(min_length=1)


class ServerRef(StrictModel):
    server_id: str


class SuperPod(StrictModel):
    super_pod_id: str
    server_list: list[ServerRef] = Field(min_length=1)


class RankTableV10(StrictModel):
    status: Literal["completed", "initializing"] = "completed"
    version: Literal["1.0"] = "1.0"
    server_count: str = Field(pattern=_ID)
    server_list: list[ServerV10] = Field(min_length=1)


class RankTableV12(StrictModel):
    status: Literal["completed", "initializing"] = "completed"
    version: Literal["1.2"] = "1.2"
    server_count: str = Field(pattern=_ID)
    server_list: list[ServerV12] = Field(min_length=1)
    super_pod_list: list[SuperPod] = Field(min_length=1)


# --- v2.0 ---------------------------------------------------------------------------------------


# 2.0's limits, as the guide states them (A5_SOURCE: the rank table configuration table)
DIE_PORT = r"^([0-9]{1,3}/[0-9]{1,3}|d2h)$"  # Die/Port; `d2h` names a host NIC port (the EID example)


class RankAddr(StrictModel):
    addr_type: Literal["IPV4", "IPV6", "EID"]
    addr: str = Field(min_length=1, max_length=256)
    ports: list[Annotated[str, Field(pattern=DIE_PORT, max_length=32)]] = Field(
        min_length=1, max_length=16, description="Die/Port, e.g. 1/0"
    )
    plane_id: str | None = None


class Level(StrictModel):
    net_layer: int = Field(ge=0, le=7)
    net_instance_id: str = Field(min_length=1, max_length=1024)
    net_type: Literal["TOPO_FILE_DESC", "CLOS", "1DMESH"]
    net_attr: str = ""
    rank_addr_list: list[RankAddr] = Field(min_length=1, max_length=24)

    @model_validator(mode="after")
    def _layer_zero_is_the_topology_file(self) -> Level:
        if self.net_layer == 0 and self.net_type != "TOPO_FILE_DESC":
            raise ValueError("net_layer 0 has net_type TOPO_FILE_DESC (described by the topology file)")
        return self


class RankV20(StrictModel):
    rank_id: int = Field(ge=0, le=65535)
    local_id: int = Field(ge=0, le=64)
    device_id: int = Field(ge=0, le=64)
    device_port: int | None = Field(None, ge=1, le=65535)
    host_port: int | None = Field(None, ge=1, le=65535)
    level_list: list[Level] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _layers_from_zero(self) -> RankV20:
        layers = [lv.net_layer for lv in self.level_list]
        if layers != list(range(len(layers))):
            raise ValueError(f"net_layer must be numbered consecutively from 0, found {layers}")
        return self


class RankTableV20(StrictModel):
    status: Literal["completed", "initializing"] = "completed"
    version: Literal["2.0"] = "2.0"
    rank_count: int = Field(ge=1, le=65536)
    rank_list: list[RankV20] = Field(min_length=1, max_length=65536)

    @model_validator(mode="after")
    def _count(self) -> RankTableV20:
        if self.rank_count != len(self.rank_list):
            raise ValueError(f"rank_count {self.rank_count} but rank_list has {len(self.rank_list)} ranks")
        return self


RankTable = RankTableV10 | RankTableV12 | RankTableV20
MODELS: dict[str, type[StrictModel]] = {"1.0": RankTableV10, "1.2": RankTableV12, "2.0": RankTableV20}
SOURCES = {"1.0": A2_SOURCE, "1.2": A3_SOURCE, "2.0": A5_SOURCE}


def json_schema(version: str) -> dict[str, Any]:
    """The JSON Schema of one rank-table version, generated from its model."""
    schema = MODELS[version].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["description"] = f"HCCL rank table version {version} ({SOURCES[version]}); generated by envkit"
    return schema


# --- rendering ----------------------------------------------------------------------------------


@dataclass
class ServerPlan:
    """One inventory host: its devices (from hccn.conf) and the optional SuperPoD / UB facts.

    2.0 across servers: every rank also gets the inter-server layer (net_layer 1, `CLOS`, the one `net_instance`
    all servers share) with the device's address and its inter-server Die/Port list (`inter_ports`), as the
    guide's two-server example has it."""

    server_id: str
    host_ip: str | None
    devices: dict[int, HccnDevice]
    where: Where
    super_pod_id: str = "0"
    super_device_ids: list[int] | None = None
    ub_ports: list[str] = field(default_factory=lambda: ["0/0"])
    device_port: int | None = None
    inter_ports: list[str] | None = None
    net_instance: str = "cluster"


def _addr_type(addr: str) -> Literal["IPV4", "IPV6"]:
    return "IPV6" if ipaddress.ip_address(addr).version == 6 else "IPV4"


def build(version: str, plans: list[ServerPlan]) -> RankTable:
    """The rank table of `version` for the servers, ranks contiguous per server in the given order."""
    rank = 0
    if version == "2.0":
        ranks = []
        for plan in plans:
            for local, (dev, info) in enumerate(sorted(plan.devices.items())):
                addr = info.address or ""
                levels = [
                    Level(
                        net_layer=0,
                        net_instance_id=plan.server_id,
                        net_type="TOPO_FILE_DESC",
                        rank_addr_list=[RankAddr(addr_type=_addr_type(addr), addr=addr, ports=plan.ub_ports)],
                    )
                ]
                if len(plans) > 1:  # the inter-server layer: one CLOS instance that every server's ranks share
                    levels.append(
                        Level(
                            net_layer=1,
                            net_instance_id=plan.net_instance,
                            net_type="CLOS",
                            rank_addr_list=[RankAddr(addr_type=_addr_type(addr), addr=addr, ports=plan.inter_ports or [])],
                        )
                    )
                ranks.append(
                    RankV20(rank_id=rank, local_id=local, device_id=dev, device_port=plan.device_port, level_list=levels)
                )
                rank += 1
        return RankTableV20(rank_count=len(ranks), rank_list=ranks)
    servers: list[Any] = []
    sdid_counter: dict[str, int] = {}
    for plan in plans:
        devices: list[Any] = []
        for index, (dev, info) in enumerate(sorted(plan.devices.items())):
            common = {
                "device_id": str(dev),
                "device_ip": info.address or "",
                "device_port": None if plan.device_port is None else str(plan.device_port),
                "rank_id": str(rank),
            }
            if version == "1.2":
                if plan.super_device_ids is not None:
                    sdid = plan.super_device_ids[index]
                else:  # numbered in order inside the SuperPoD when the inventory gives none
                    sdid = sdid_counter.get(plan.super_pod_id, 0)
                sdid_counter[plan.super_pod_id] = max(sdid_counter.get(plan.super_pod_id, 0), sdid + 1)
                devices.append(DeviceV12(super_device_id=str(sdid), **common))
            else:
                devices.append(DeviceV1(**common))
            rank += 1
        if version == "1.2":
            servers.append(ServerV12(server_id=plan.server_id, host_ip=plan.host_ip, device=devices))
        else:
            servers.append(ServerV10(server_id=plan.server_id, device=devices))
    if version == "1.2":
        pods: dict[str, list[ServerRef]] = {}
        for plan in plans:
            pods.setdefault(plan.super_pod_id, []).append(ServerRef(server_id=plan.server_id))
        return RankTableV12(
            server_count=str(len(servers)),
            server_list=servers,
            super_pod_list=[SuperPod(super_pod_id=k, server_list=v) for k, v in pods.items()],
        )
    return RankTableV10(server_count=str(len(servers)), server_list=servers)


def to_json(table: RankTable) -> str:
    return json.dumps(table.model_dump(mode="json", exclude_none=True), indent=2) + "\n"


# --- checks -------------------------------------------------------------------------------------


def _entries(table: RankTable) -> list[tuple[str, int, int, str, str | None]]:
    """(server, rank, device_id, device_ip, super_device_id) for every rank."""
    out: list[tuple[str, int, int, str, str | None]] = []
    if isinstance(table, RankTableV20):
        for r in table.rank_list:
            server = r.level_list[0].net_instance_id
            addr = next((a.addr for lv in r.level_list if lv.net_layer == 0 for a in lv.rank_addr_list), "")
            out.append((server, r.rank_id, r.device_id, addr, None))
        return out
    for s in table.server_list:
        for d in s.device:
            out.append((s.server_id, int(d.rank_id), int(d.device_id), d.device_ip, getattr(d, "super_device_id", None)))
    return out


def check(table: RankTable, hccn: dict[str, dict[int, HccnDevice]] | None = None) -> list[Verdict]:
    """Unique ranks 0..N-1, ranks contiguous per server, unique device ids / IPs, device_ip = hccn.conf address_N."""
    source = SOURCES[table.version]
    problems: list[Verdict] = []
    entries = _entries(table)
    ranks = [e[1] for e in entries]
    dupes = sorted({r for r in ranks if ranks.count(r) > 1})
    if dupes:
        problems.append(
            Verdict(rule="unique-ranks", message=f"rank_id {', '.join(map(str, dupes))} appear more than once", source=source)
        )
    if sorted(set(ranks)) != list(range(len(set(ranks)))):
        problems.append(
            Verdict(
                rule="ranks-from-zero",
                message=f"rank_id must be 0..{len(ranks) - 1} without gaps, found {sorted(set(ranks))}",
                source=source,
            )
        )
    servers: dict[str, list[tuple[str, int, int, str, str | None]]] = {}
    for e in entries:
        servers.setdefault(e[0], []).append(e)
    for server, rows in servers.items():
        rs = sorted(r[1] for r in rows)
        if rs and rs[-1] - rs[0] + 1 != len(rs):
            problems.append(
                Verdict(
                    rule="ranks-not-interleaved",
                    message=f"server {server} has ranks {rs}: one server's ranks must be contiguous (no interleaving across servers)",
                    source=source,
                )
            )
        devs = [r[2] for r in rows]
        if len(set(devs)) != len(devs):
            problems.append(
                Verdict(
                    rule="unique-device-id", message=f"server {server} lists a device_id twice: {sorted(devs)}", source=source
                )
            )
        if hccn is not None and server in hccn:
            for _srv, rank, dev, ip, _sdid in rows:
                conf = hccn[server].get(dev)
                want = conf.address if conf else None
                if want != ip:
                    problems.append(
                        Verdict(
                            rule="device-ip-matches-hccn-conf",
                            message=f"server {server} device {dev} (rank {rank}): device_ip {ip or '(none)'} but hccn.conf address_{dev}={want or '(missing)'}",
                            source=f"{source}; error EI0014",
                        )
                    )
    ips = [e[3] for e in entries if e[3]]
    dup_ips = sorted({ip for ip in ips if ips.count(ip) > 1})
    if dup_ips:
        problems.append(
            Verdict(rule="unique-device-ip", message=f"device_ip {', '.join(dup_ips)} used by more than one rank", source=source)
        )
    if isinstance(table, RankTableV20):
        problems += _check_levels(table)
    if isinstance(table, RankTableV12):
        listed = {s.server_id for s in table.server_list}
        pod_of: dict[str, str] = {}
        for pod in table.super_pod_list:
            for ref in pod.server_list:
                if ref.server_id not in listed:
                    problems.append(
                        Verdict(
                            rule="super-pod-servers",
                            message=f"super_pod {pod.super_pod_id} names unknown server {ref.server_id}",
                            source=A3_SOURCE,
                        )
                    )
                pod_of[ref.server_id] = pod.super_pod_id
        seen: dict[tuple[str, str], str] = {}
        for server, _rank, _dev, _ip, sdid in entries:
            key = (pod_of.get(server, "?"), sdid or "")
            if key in seen:
                problems.append(
                    Verdict(
                        rule="unique-super-device-id",
                        message=f"super_device_id {sdid} appears twice in super_pod {key[0]} (servers {seen[key]} and {server})",
                        source=f"{A3_SOURCE}; error EI0014",
                    )
                )
            seen[key] = server
    return problems


def _check_levels(table: RankTableV20) -> list[Verdict]:
    """2.0: every rank has the same layers; local_id numbers a server's NPUs from 0; ranks of more than one server
    meet in one instance of a layer above 0 (the guide's two-server example: net_layer 1, CLOS, one shared id)."""
    problems: list[Verdict] = []
    depths = sorted({len(r.level_list) for r in table.rank_list})
    if len(depths) > 1:
        problems.append(Verdict(rule="same-layers", message=f"ranks have different numbers of layers {depths}", source=A5_SOURCE))
    by_server: dict[str, list[RankV20]] = {}
    for r in table.rank_list:
        by_server.setdefault(r.level_list[0].net_instance_id, []).append(r)
    for server, ranks in by_server.items():
        locals_ = sorted(r.local_id for r in ranks)
        if locals_ != list(range(len(locals_))):
            problems.append(
                Verdict(
                    rule="local-id-from-zero",
                    message=f"server {server} numbers its NPUs local_id {locals_}, not 0..{len(locals_) - 1}",
                    source=A5_SOURCE,
                )
            )
    if len(by_server) > 1:
        top = {r.level_list[-1].net_instance_id for r in table.rank_list if len(r.level_list) > 1}
        if any(len(r.level_list) < 2 for r in table.rank_list) or len(top) != 1:
            problems.append(
                Verdict(
                    rule="servers-share-a-layer",
                    message=f"{len(by_server)} servers but no layer above 0 that all their ranks share "
                    f"(top-layer instances: {sorted(top) or 'none'})",
                    source=A5_SOURCE,
                )
            )
    return problems


def raise_problems(problems: list[Verdict], where: Where | None = None, kind: str = "rank table") -> None:
    """BadInput (exit 2) naming the first broken rule and its source; every problem is in details."""
    if not problems:
        return
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise BadInput(
        f"{kind} rule '{first.rule}' broken: {first.message}{more}",
        where=where,
        hint=f"source: {first.source}",
        details={"problems": [{"rule": p.rule, "message": p.message, "source": p.source} for p in problems]},
    )


def parse(data: Any, filename: str) -> RankTable:
    """A rank-table document of any version, validated against its model."""
    from pydantic import ValidationError

    version = data.get("version") if isinstance(data, dict) else None
    if version not in MODELS:
        raise BadInput(
            f"{filename}: unknown rank table version {version!r}",
            where=Where(filename, None, "version"),
            hint="version is 1.0 (A2), 1.2 (A3) or 2.0 (950)",
        )
    try:
        return MODELS[version].model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BadInput(
            f"{filename}: {err['msg']}",
            where=Where(filename, None, ".".join(map(str, err["loc"]))),
            hint=f"source: {SOURCES[version]}",
        ) from None

"""`envkit launch render`: the rank table, its JSON Schema, and per host an Accelerate config, a torchrun
script and the HCCL environment block, from an inventory, each host's hccn.conf and the lock's chip.

Everything is written under the output folder, atomically, and the same inputs give the same bytes.
Inventory variables (per host or in [group:vars]):
  envkit_hccn_conf        the host's /etc/hccn.conf, copied to the controller (path relative to the inventory)
  envkit_devices          the device ids to use, e.g. 0,1,2,3 (default: every address_N of hccn.conf)
  envkit_super_pod_id     A3: the SuperPoD of the host (default 0)
  envkit_super_device_ids A3: the SDID of each used device, comma-separated (default: numbered in order per pod)
  envkit_ub_ports         950: the Die/Port list of the level-0 address (default 0/0)
  envkit_inter_ports      950 across servers: the Die/Port list of the inter-server layer (net_layer 1, CLOS)
  envkit_net_instance     950 across servers: the inter-server layer's instance id, the same on every host (default cluster)
  envkit_master_port      the rendezvous port (default 29500)
  envkit_train_script     the training script torchrun starts (default train.py)
  hccl_connect_timeout, hccl_exec_timeout, hccl_buffsize, hccl_op_expansion_mode, hccl_if_ip, hccl_socket_ifname
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, Where
from envkit.export.launch import accelerate_config, hccl_env_sh, torchrun_argv, torchrun_sh, train_script
from envkit.fleet import ranktable as RT
from envkit.fleet.env import EnvPlan, NodeValues, cite, plan_env
from envkit.fleet.inventory import Host, Inventory, read_hccn_conf, read_inventory
from envkit.io import bounded
from envkit.io.outputs import LAUNCH_SET, claim_output
from envkit.lock.gate import SCHEMA_ONLY, LockCheck

DEFAULT_PORT = 29500
DEFAULT_SCRIPT = "train.py"
# A rank table an upstream guide gives for a chip that matrices/hccl.yaml has no `rank_tables` row for: the lock then
# carries no format and nothing is rendered, and the refusal says what exists and why it is not used. Read in
# hicann/hccl at 09300b70df9a031339f08e5f2ca06d7bf294d009.
UNLISTED_RANK_TABLES = {
    "310p": (
        "HCCL's guide has a rank table 1.0 page for the Atlas 300I Duo (hicann/hccl docs/zh/user_guide/cluster_info_config/"
        "rank_table_config_300i_duo.md) and none for the 300I Pro / 300V Pro that the 310p row also covers, and allows "
        "the 300I Duo's AllGather and ReduceScatter on one server only (docs/zh/api_ref/comm_op_interface/HcclAllGather.md, "
        "HcclReduceScatter.md); envkit renders a table only from a sourced matrices/hccl.yaml row, and 310p has none yet. "
    ),
}


@dataclass
class LaunchResult:
    chip: str
    version: str
    out_dir: Path
    hosts: list[str]
    ranks: int
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chip": self.chip,
            "rank_table_version": self.version,
            "out_dir": str(self.out_dir),
            "hosts": self.hosts,
            "ranks": self.ranks,
            "files": self.files,
            "warnings": self.warnings,
        }


def _csv(value: str | None) -> list[str] | None:
    return None if value is None else [p.strip() for p in value.split(",") if p.strip()]


def _plan(host: Host, inv: Inventory, version: str) -> RT.ServerPlan:
    where = Where(str(inv.path), host.line)
    if len(host.name) > 64:
        raise BadInput(
            f"host name {host.name[:40]}... has {len(host.name)} characters; a rank table server_id has at most 64",
            where=where,
            hint="Name the host in the inventory with at most 64 characters (set ansible_host for its address).",
        )
    conf = host.vars.get("envkit_hccn_conf")
    if not conf:
        raise BadInput(
            f"host {host.name} has no envkit_hccn_conf",
            where=where,
            hint="Copy each host's /etc/hccn.conf to the controller and set envkit_hccn_conf=PATH for the host.",
        )
    path = Path(conf) if Path(conf).is_absolute() else inv.path.parent / conf
    devices = read_hccn_conf(path)
    wanted = _csv(host.vars.get("envkit_devices"))
    if wanted is not None:
        if len(wanted) > bounded.MAX_DEVICE_ID + 1:
            raise BadInput(f"envkit_devices on {host.name} lists {len(wanted)} devices; a host has at most 65", where=where)
        ids = [bounded.integer(x, f"envkit_devices on {host.name}", lo=0, hi=bounded.MAX_DEVICE_ID, where=where) for x in wanted]
        missing = [d for d in ids if d not in devices or not devices[d].address]
        if missing:
            raise BadInput(
                f"{path} has no address_N for device(s) {missing} of {host.name}",
                where=Where(str(path)),
                hint="device_ip is address_N of /etc/hccn.conf (rank table rule; error EI0014)",
            )
        devices = {d: devices[d] for d in ids}
    devices = {d: v for d, v in devices.items() if v.address}
    if not devices:
        raise BadInput(
            f"{path} lists no address_N for {host.name}",
            where=Where(str(path)),
            hint="hccn.conf holds address_N=IP per device N (hccn_tool -i N -ip -s address IP netmask MASK)",
        )
    sdids = _csv(host.vars.get("envkit_super_device_ids"))
    if sdids is not None:
        if len(sdids) != len(devices) or not all(s.isascii() and s.isdigit() and len(s) <= 9 for s in sdids):
            raise BadInput(
                f"envkit_super_device_ids on {host.name} needs {len(devices)} integers, got {sdids}",
                where=where,
                hint=f"one SDID per device (npu-smi info -t spod-info); source: {RT.A3_SOURCE}",
            )
    inter_ports = _csv(host.vars.get("envkit_inter_ports"))
    for die_port in inter_ports or []:
        if not re.fullmatch(r"[0-9]{1,3}/[0-9]{1,3}", die_port):
            raise BadInput(f"envkit_inter_ports on {host.name}: {die_port[:40]!r} is not Die/Port (e.g. 0/4)", where=where)
    if inter_ports is not None and not 1 <= len(inter_ports) <= 16:
        raise BadInput(f"envkit_inter_ports on {host.name} lists {len(inter_ports)} ports; 1 to 16", where=where)
    net_instance = host.vars.get("envkit_net_instance", "cluster")
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", net_instance):
        raise BadInput(f"envkit_net_instance={net_instance[:40]!r} on {host.name}: letters, digits, _.:- only", where=where)
    port_text = host.vars.get("envkit_device_port")
    port = bounded.port(port_text, f"envkit_device_port on {host.name}", where) if port_text else None
    return RT.ServerPlan(
        server_id=host.name,
        host_ip=host.address if version == "1.2" else None,
        devices=devices,
        where=where,
        super_pod_id=host.vars.get("envkit_super_pod_id", "0"),
        super_device_ids=[int(s) for s in sdids] if sdids is not None else None,
        ub_ports=_csv(host.vars.get("envkit_ub_ports")) or ["0/0"],
        device_port=port,
        inter_ports=inter_ports,
        net_instance=net_instance,
    )


def render_launch(
    inventory: Path, lock: Path, out: Path, *, force: bool = False, lock_check: LockCheck = SCHEMA_ONLY
) -> LaunchResult:
    """Validate and write the launch set; BadInput (exit 2) names the broken rule and its source.

    The set is written into `out` (`envkit.io.outputs.claim_output`): the files of an earlier launch set are replaced
    (a host gone leaves no file behind), a file envkit did not write is refused (with `force`: kept beside it), the
    inputs (the inventory, its hccn.conf files, the lock) are never touched, nothing is written outside `out`."""
    from envkit.lock.file import read_lock

    locked = read_lock(Path(lock), lock_check)
    chip = locked.stack.chip
    facts = locked.platform.hccl  # the lock alone: its chip's HCCL facts (schema 3)
    row = facts.rank_table
    if row is None:
        raise BadInput(
            f"chip {chip} of {lock} has no HCCL rank table format in envkit's data: the lock's platform.hccl.rank_table "
            f"is empty (matrices/hccl.yaml rank_tables has no {chip} row)",
            where=Where(str(lock), None, "stack.chip"),
            hint=UNLISTED_RANK_TABLES.get(chip, "")
            + "Rank tables are rendered for the chips matrices/hccl.yaml lists under rank_tables, each with its source; "
            "re-lock once the chip has a row. On one host, torchrun needs no rank table.",
        )
    inv = read_inventory(Path(inventory))
    confs = [inv.path.parent / h.vars["envkit_hccn_conf"] for h in inv.hosts if h.vars.get("envkit_hccn_conf")]
    claim = claim_output(Path(out), LAUNCH_SET, force=force, inputs=[Path(inventory), Path(lock), *confs])
    names = [h.name for h in inv.hosts]
    nodes = {h.name: NodeValues(h.vars, h.address, h.line) for h in inv.hosts}
    env: EnvPlan = plan_env(nodes, chip, facts, str(inv.path))
    plans = [_plan(h, inv, row.version) for h in inv.hosts]
    if row.version == "2.0" and len(plans) > 1:
        for host, plan in zip(inv.hosts, plans, strict=True):
            if plan.inter_ports is None:
                raise BadInput(
                    f"host {host.name}: a rank table 2.0 across {len(plans)} servers needs each device's inter-server ports",
                    where=Where(str(inv.path), host.line),
                    hint="Set envkit_inter_ports=0/4,0/5,... (the PEER2NET ports of the host's topology file in "
                    f"/usr/local/Ascend/driver/topo/), and envkit_net_instance=ID if not 'cluster'; source: {RT.A5_SOURCE}",
                )
    table = RT.build(row.version, plans)
    RT.raise_problems(RT.check(table, {p.server_id: p.devices for p in plans}), Where(str(inv.path)))
    warnings = list(env.warnings)
    derived = [h.name for h, p in zip(inv.hosts, plans, strict=True) if row.version == "1.2" and p.super_device_ids is None]
    if derived:
        warnings.append(
            f"super_device_id of {', '.join(derived)} derived (numbered in order per SuperPoD), not given: HCCL fails "
            "(EI0014) where they differ from the hardware's; set envkit_super_device_ids from `npu-smi info -t spod-info`"
        )
    counts = {len(p.devices) for p in plans}
    if len(counts) > 1:
        warnings.append(f"hosts use different device counts {sorted(counts)}: torchrun gets each host's own count")

    first = inv.hosts[0]
    port = bounded.port(
        first.vars.get("envkit_master_port", str(DEFAULT_PORT)), "envkit_master_port", Where(str(inv.path), first.line)
    )
    script = train_script(first.vars.get("envkit_train_script", DEFAULT_SCRIPT), Where(str(inv.path), first.line))
    master = first.address
    total = sum(len(p.devices) for p in plans)
    rt_sources = [f"rank table {row.version}: {cite(row)}"] + [f"{r.name}: {cite(r)}" for r in facts.env]

    files: dict[str, str] = {
        "rank_table.json": RT.to_json(table),
        "rank_table.schema.json": json.dumps(RT.json_schema(row.version), indent=2, sort_keys=True) + "\n",
    }
    for node_rank, (host, plan) in enumerate(zip(inv.hosts, plans, strict=True)):
        base = f"hosts/{host.name}"
        files[f"{base}/accelerate_config.yaml"] = accelerate_config(len(plans), total, node_rank, master, port)
        files[f"{base}/hccl_env.sh"] = hccl_env_sh(env.per_host[host.name], rt_sources)
        files[f"{base}/torchrun.sh"] = torchrun_sh(
            torchrun_argv(len(plans), len(plan.devices), node_rank, master, port, script), "rank_table.json"
        )
    result = LaunchResult(chip=chip, version=row.version, out_dir=Path(out), hosts=names, ranks=total, warnings=warnings)
    writer = claim.writer()
    for rel, text in sorted(files.items()):
        writer.text(rel, text, 0o755 if rel.endswith(".sh") else 0o644)
        result.files[rel] = hashlib.sha256(text.encode()).hexdigest()
    writer.text("launch.json", json.dumps(result.to_dict() | {"out_dir": "."}, indent=2, sort_keys=True) + "\n")
    writer.commit()
    return result


def format_result(result: LaunchResult) -> list[str]:
    lines = [f"rank table {result.version} for chip {result.chip}: {result.ranks} ranks on {len(result.hosts)} host(s)"]
    lines += [f"warning: {w}" for w in result.warnings]
    lines += [f"wrote {result.out_dir / rel}" for rel in result.files]
    lines.append(f"wrote {result.out_dir / 'launch.json'}")
    return lines

"""A collective profile across the hosts of an inventory: one rendezvous, every host's ranks, one merged profile.

`node_profile` runs on each host (`envkit launch node`): its `nproc` ranks, global ranks node_rank*nproc + i,
against the rendezvous at master:port (torch.distributed's TCP store; gloo on cpu, nccl on cuda, hccl on npu).
`run_fleet_profile` (`envkit launch profile`) runs playbooks/collectives.yml through Ansible on every host at once,
master = the first host of the inventory, fetches each host's profile.json and merges them: the table of all
`world` ranks (the slowest rank's time per size; correct only when every rank of every host is).
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, CannotRun, Where

PROFILE_FILE = "profile.json"
DEFAULT_PORT = 29511
REMOTE_DIR = "/var/tmp/envkit-collectives"
NODE_ENVKIT = "/opt/envkit/venv/bin/envkit"  # where `envkit provision` installs envkit on a host
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


def node_profile(
    *,
    master: str,
    port: int,
    nnodes: int,
    node_rank: int,
    nproc: int,
    device: str,
    max_size: int | str,
    out: Path,
    timeout_s: int = 600,
    ifname: str | None = None,
) -> dict[str, Any]:
    """This host's ranks of a multi-host profile, written to OUT/profile.json (atomically) and returned.

    `max_size` is in bytes, or text as `--max-size` gives it (1MiB, 64M: `parse_size`, read before the layout)."""
    from envkit.executor.collectives import parse_size, run_profile
    from envkit.io.outputs import atomic_write_text

    if isinstance(max_size, str):
        max_size = parse_size(max_size)
    if nnodes < 1 or nproc < 1 or not 0 <= node_rank < nnodes or nnodes * nproc < 2:
        raise BadInput(
            f"node rank {node_rank} of {nnodes} host(s) x {nproc} process(es): not a valid layout",
            hint="0 <= --node-rank < --nnodes, and at least 2 ranks in all",
        )
    if not 0 < port < 65536:
        raise BadInput(f"--port {port}: not a TCP port")
    if device not in ("cpu", "cuda", "npu"):
        raise BadInput(f"--device {device}: one of cpu, cuda, npu")
    if ifname is not None:
        if not _IFNAME.match(ifname):
            raise BadInput(f"--ifname {ifname!r}: not an interface name")
        for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"):
            os.environ[var] = ifname  # inherited by the spawned ranks
    prof = run_profile(
        device, nnodes * nproc, max_size, timeout_s=timeout_s, nnodes=nnodes, node_rank=node_rank, master=master, port=port
    )
    prof.update({"nnodes": nnodes, "node_rank": node_rank, "master": f"{master}:{port}", "hostname": socket.gethostname()})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / PROFILE_FILE, json.dumps(prof, indent=1, sort_keys=True) + "\n")
    return prof


def merge(profiles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One profile from every host's: the same world, sizes, ops and backend; every rank once."""
    from pydantic import ValidationError

    from envkit.executor.collectives import aggregate
    from envkit.fleet.profiledoc import HostProfile

    if not profiles:
        raise CannotRun("no host returned a profile")
    for host, p in profiles.items():  # each came back from a host: its exact shape is checked before it is read
        try:
            HostProfile.model_validate(p, strict=True)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(map(str, err["loc"])) or "the document"
            raise CannotRun(
                f"{host} returned something that is not a collective profile ({key}: {err['msg']})",
                hint="Look at that host's envkit launch node output.",
            ) from None
    first = next(iter(profiles.values()))
    world = first.get("world")
    for host, p in profiles.items():
        for key in ("world", "sizes", "ops", "backend", "nnodes"):
            if p.get(key) != first.get(key):
                raise CannotRun(f"{host}'s profile has {key}={p.get(key)!r}, another host's {first.get(key)!r}")
    ranks = sorted(
        (r for p in profiles.values() for r in p.get("ranks", []) if isinstance(r, dict)),
        key=lambda r: r["rank"] if isinstance(r.get("rank"), int) else -1,
    )
    if not isinstance(world, int) or [r.get("rank") for r in ranks] != list(range(world)):
        raise CannotRun(f"the hosts' ranks {[r.get('rank') for r in ranks]} are not 0..{world}-1, each once")
    table = aggregate(ranks, world)
    errors = [f"{h}: {e}" for h, p in sorted(profiles.items()) for e in p.get("errors", [])]
    ok = not errors and len(table) == len(first["ops"]) * len(first["sizes"]) and all(r["correct"] for r in table)
    return {
        **{k: first[k] for k in ("format", "backend", "device_type", "world", "sizes", "ops", "bus_factors") if k in first},
        "ok": ok,
        "nnodes": first.get("nnodes"),
        "hosts": {
            h: {
                "node_rank": p.get("node_rank"),
                "hostname": p.get("hostname"),
                "ranks": [r.get("rank") for r in p.get("ranks", [])],
            }
            for h, p in sorted(profiles.items())
        },
        "results": table,
        "ranks": ranks,
        "errors": errors,
        "copies": {"skipped": "per host: see hosts/<host>/profile.json"},
    }


def fleet_vars(
    inventory: Path,
    *,
    nproc: int,
    device: str,
    max_size: str,
    port: int,
    local_dir: Path,
    timeout_s: int,
    envkit: str = NODE_ENVKIT,
    limit: list[str] | None = None,
) -> dict[str, Any]:
    """The playbook's variables: master = the first host's address, node ranks in inventory order."""
    from envkit.fleet.inventory import read_inventory

    inv = read_inventory(inventory)
    hosts = [h for h in inv.hosts if limit is None or h.name in limit]
    if len(hosts) * nproc < 2:
        raise BadInput(
            f"{inventory}: {len(hosts)} host(s) x --nproc {nproc} is one rank; a collective needs two",
            where=Where(str(inventory)),
        )
    return {
        "envkit_collectives_hosts": ",".join(h.name for h in hosts),
        "envkit_collectives_master": hosts[0].address,
        "envkit_collectives_port": port,
        "envkit_collectives_nnodes": len(hosts),
        "envkit_collectives_ranks": {h.name: i for i, h in enumerate(hosts)},
        "envkit_collectives_nproc": nproc,
        "envkit_collectives_device": device,
        "envkit_collectives_max_size": max_size,
        "envkit_collectives_timeout": timeout_s,
        "envkit_collectives_envkit": envkit,
        "envkit_collectives_remote_dir": REMOTE_DIR,
        "envkit_collectives_local_dir": str(local_dir),
    }


def run_fleet_profile(
    inventory: Path,
    out: Path,
    *,
    nproc: int,
    device: str,
    max_size: str = "1MiB",
    port: int = DEFAULT_PORT,
    timeout_s: int = 600,
    envkit: str = NODE_ENVKIT,
    extra_vars: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run playbooks/collectives.yml on every host of the inventory and merge their profiles into OUT/profile.json.

    Returns {"profile", "hosts" (the run's per-host rows), "out"}; a host that failed is named in the profile's errors.

    OUT is claimed first (`envkit.io.outputs.claim_output`: an earlier profile's files are replaced, a file envkit did
    not write is refused, the inventory is never touched); the run writes into a staging folder beside it, moved
    in when the profile is merged (vars.yml names that folder as envkit_collectives_local_dir: what ran). A run
    that fails leaves OUT's files as they were: its vars.yml, events.jsonl and ansible.log go to OUT/failed/
    (replaced by the next run's)."""
    from envkit.executor.ansible import (
        PlaybookRun,
        ansible_playbook_path,
        dump_vars,
        playbook_command,
        playbook_env,
        run_playbook,
        summarize,
    )
    from envkit.executor.collectives import parse_size
    from envkit.fleet.profiledoc import HostProfile
    from envkit.io.jsonread import checked, read_json
    from envkit.io.outputs import LAUNCH_PROFILE, claim_output
    from envkit.resources import data_dir

    parse_size(max_size)  # refuse a bad size before any host runs
    out = out.resolve()
    claim = claim_output(out, LAUNCH_PROFILE, inputs=[inventory])
    with claim.staging() as stage:
        hosts_dir = stage / "hosts"
        hosts_dir.mkdir()
        variables = fleet_vars(
            inventory,
            nproc=nproc,
            device=device,
            max_size=max_size,
            port=port,
            local_dir=hosts_dir,
            timeout_s=timeout_s,
            envkit=envkit,
        )
        vars_file = stage / "vars.yml"
        vars_file.write_text(dump_vars(variables, f"envkit launch profile -i {inventory}"))
        playbooks = data_dir("playbooks")
        argv = playbook_command(
            PlaybookRun(
                playbook=playbooks / "collectives.yml",
                inventory=str(Path(inventory).resolve()),
                vars_file=vars_file,
                extra_vars=extra_vars,
            ),
            ansible_playbook_path(),
        )
        logs = ("vars.yml", "events.jsonl", "ansible.log")
        result = run_playbook(argv, playbook_env(playbooks), events_log=stage / logs[1], stderr_log=stage / logs[2])
        summary = summarize(result.events, variables["envkit_collectives_ranks"])
        runs = {
            ev.get("host"): ev.get("msg")
            for ev in result.events
            if ev.get("event") == "result" and str(ev.get("task", "")).endswith("Collectives | Report run")
        }
        profiles: dict[str, dict[str, Any]] = {}
        missing = []
        for host in variables["envkit_collectives_ranks"]:
            path = hosts_dir / host / PROFILE_FILE
            if not path.is_file():
                raw_run = runs.get(host)
                run = raw_run if isinstance(raw_run, dict) else {}
                missing.append(f"{host}: no profile (rc {run.get('rc', '?')}: {str(run.get('stderr', ''))[-400:].strip()})")
                continue
            try:  # what a host sent back is read strictly: its file and the wrong key are named
                doc = read_json(path, what="collective profile")
                checked(doc, HostProfile, path, what="collective profile")
            except BadInput as exc:
                missing.append(f"{host}: {exc.message}")
                continue
            profiles[host] = doc
        try:
            if missing:
                raise CannotRun("; ".join(missing), hint=f"see {out / 'failed' / logs[2]} and {out / 'failed' / logs[1]}")
            merged = merge(profiles)
        except CannotRun:
            failed = claim.writer()  # the logs of the failed run, beside what an earlier run wrote
            for name in logs:
                if (stage / name).is_file():
                    failed.staged(f"failed/{name}", stage / name)
            failed.commit(keep=True)
            raise
        writer = claim.writer()
        for name in logs:
            writer.staged(name, stage / name)
        for host in sorted(profiles):
            writer.staged(f"hosts/{host}/{PROFILE_FILE}", hosts_dir / host / PROFILE_FILE)
        writer.text(PROFILE_FILE, json.dumps(merged, indent=1, sort_keys=True) + "\n")
        writer.commit()
    return {"profile": merged, "hosts": [summary.hosts[h].to_dict() for h in sorted(summary.hosts)], "out": str(out)}


def format_fleet_profile(res: dict[str, Any]) -> list[str]:
    """The text report of `run_fleet_profile`'s result: the merged profile's table, then where it was written."""
    from envkit.executor.collectives import format_table

    return format_table(res["profile"]) + [f"wrote {res['out']}/{PROFILE_FILE}"]

#!/usr/bin/env python3
"""First converge of 1, 3 and 8 nspawn nodes, push vs pull vs fan-out (issue 27): wall time and the bytes each machine sent.

Needs root, systemd-nspawn and iptables (tests/integration/setup/nspawn.sh deps). Boots one fleet of the largest
size and builds one bundle of a realistic size (fixture installers padded to --pad-mb MB each, as a makeself
.run carries its payload, plus the wheels). For each size and mode, the nodes' stack is removed first (a first
converge every time), then `envkit provision --limit node1..nodeN` runs, in push mode (every file copied over SSH
by the controller), in pull mode (`--bundle-url`: the nodes fetch from `envkit bundle serve` on this machine's
bridge address, a process apart from the controller's) or in fan-out mode (`--bundle-url ... --fan-out`: node1, the
head of the fleet's one group, fetches the bundle from the mirror and serves the others). Bytes:

- controller: what this machine sent to the nodes' SSH port (iptables counters on OUTPUT, one rule per node);
- mirror: what the mirror sent, per node (its access log; cross-checked with an OUTPUT counter on its port);
- each node: what it sent back to this machine (INPUT counters per source address), and everything it sent on the
  bridge, to other nodes too (the rx_bytes of its host-side veth, /sys/class/net/eknI-br/statistics);
- the fan-out head: what its mirror sent, per node (its access log, served.log, read from its overlay).

Then the model (`model()`): time to install H hosts at a link speed, where one machine's link bounds what it
sends (the per-host bytes S measured here, or --model-gb): push H x S from the controller, pull H x S from one
mirror (pull-groups: H/G x S from each of G mirrors), fan-out (G + H/G - 1) x S in two steps; plus the 1-node
converge's wall time once per batch of --forks hosts (Ansible's per-host cost: the bridge here is memory-fast).

    sudo python benchmarks/pull.py [--sizes 1 3 8] [--modes push pull fan-out] [--pad-mb 60] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.provision.fleet import Fleet, provision, resolve_lock  # noqa: E402
from tests.provision.mirrors import BRIDGE, Serve, sealed_bundle  # noqa: E402
from tests.provision.test_fleet_pull import FORGET  # noqa: E402

CHAIN = "ENVKIT_BENCH_PULL"


class Counters:
    """iptables byte counters: OUTPUT to each node's SSH port and from the mirror's port; INPUT from each node."""

    def __init__(self, fleet: Fleet, mirror_port: int) -> None:
        self.fleet, self.port = fleet, mirror_port
        for chain in (f"{CHAIN}_OUT", f"{CHAIN}_IN"):
            subprocess.run(["iptables", "-N", chain], check=False, capture_output=True)
            subprocess.run(["iptables", "-F", chain], check=True)
        subprocess.run(["iptables", "-I", "OUTPUT", "-j", f"{CHAIN}_OUT"], check=True)
        subprocess.run(["iptables", "-I", "INPUT", "-j", f"{CHAIN}_IN"], check=True)
        for i in range(1, fleet.n + 1):
            ip = fleet.ip(i)
            subprocess.run(["iptables", "-A", f"{CHAIN}_OUT", "-d", ip, "-p", "tcp", "--dport", "22"], check=True)
            subprocess.run(["iptables", "-A", f"{CHAIN}_OUT", "-d", ip, "-p", "tcp", "--sport", str(mirror_port)], check=True)
            subprocess.run(["iptables", "-A", f"{CHAIN}_IN", "-s", ip], check=True)

    def read(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for chain, kind in ((f"{CHAIN}_OUT", "out"), (f"{CHAIN}_IN", "in")):
            text = subprocess.run(["iptables", "-L", chain, "-v", "-x", "-n"], check=True, capture_output=True, text=True).stdout
            for line in text.splitlines()[2:]:
                f = line.split()  # pkts bytes [target] prot opt in out source destination [match]: no target here
                if len(f) < 8:
                    continue
                nbytes, src, dst = int(f[1]), f[6], f[7]
                if kind == "in":
                    out.setdefault(src, {})["node_sent"] = nbytes
                elif "dpt:22" in line:
                    out.setdefault(dst, {})["controller_ssh"] = nbytes
                else:
                    out.setdefault(dst, {})["mirror_tcp"] = nbytes
        return out

    def close(self) -> None:
        subprocess.run(["iptables", "-D", "OUTPUT", "-j", f"{CHAIN}_OUT"], check=False)
        subprocess.run(["iptables", "-D", "INPUT", "-j", f"{CHAIN}_IN"], check=False)
        for chain in (f"{CHAIN}_OUT", f"{CHAIN}_IN"):
            subprocess.run(["iptables", "-F", chain], check=False)
            subprocess.run(["iptables", "-X", chain], check=False)


def _delta(a: dict, b: dict) -> dict:
    return {ip: {k: b[ip].get(k, 0) - a.get(ip, {}).get(k, 0) for k in b[ip]} for ip in b}


def veth_sent(fleet: Fleet, n: int) -> dict[str, int]:
    """Bytes each node sent on the bridge so far (its host-side veth's rx_bytes), by address."""
    return {fleet.ip(i): int(Path(f"/sys/class/net/ekn{i}-br/statistics/rx_bytes").read_text()) for i in range(1, n + 1)}


def head_served(fleet: Fleet) -> dict[str, int]:
    """Bytes node1's fan-out mirror sent, per client address (its served.log, in the node's overlay)."""
    import re

    log = fleet.upper(1) / "var/cache/envkit/fanout/served.log"
    out: dict[str, int] = {}
    for line in log.read_text().splitlines() if log.is_file() else []:
        m = re.match(r'^(\S+) "\S+ \S+ [^"]*" \d+ (\d+)$', line)
        if m:
            out[m[1]] = out.get(m[1], 0) + int(m[2])
    return out


def converge(fleet: Fleet, n: int, mode: str, lock: Path, bundle: Path, out: Path, mirror: Serve, counters: Counters) -> dict:
    for i in range(1, n + 1):
        fleet.ssh(i, FORGET)
    c0, m0, v0 = counters.read(), mirror.sent(), veth_sent(fleet, n)
    args = ["--limit", ",".join(f"node{i}" for i in range(1, n + 1))]
    if mode in ("pull", "fan-out"):
        args += ["--bundle-url", mirror.url]
    if mode == "fan-out":
        args += ["--fan-out"]
    t0 = time.monotonic()
    rc, data, err = provision(fleet, lock, bundle, out, *args, timeout=3600)
    wall = time.monotonic() - t0
    if rc != 0:
        raise SystemExit(f"{mode} {n} node(s): exit {rc}\n{err[-3000:]}")
    c, m1, v1 = _delta(c0, counters.read()), mirror.sent(), veth_sent(fleet, n)
    head = head_served(fleet) if mode == "fan-out" else {}
    nodes = {}
    for i in range(1, n + 1):
        ip = fleet.ip(i)
        nodes[f"node{i}"] = {
            "controller_ssh_bytes": c.get(ip, {}).get("controller_ssh", 0),
            "mirror_bytes": m1.get(ip, 0) - m0.get(ip, 0),
            "head_bytes": head.get(ip, 0),
            "node_sent_bytes": c.get(ip, {}).get("node_sent", 0),
            "node_tx_bytes": v1[ip] - v0[ip],
        }
    return {
        "mode": mode,
        "nodes": n,
        "wall_s": round(wall, 1),
        "controller_bytes": sum(v["controller_ssh_bytes"] for v in nodes.values()),
        "mirror_bytes": sum(v["mirror_bytes"] for v in nodes.values()),
        "head_bytes": sum(head.values()),
        "per_node": nodes,
    }


MODES = ("push", "pull", "pull-groups", "fan-out")


def model(per_host_bytes: float, fixed_s: float, forks: int, hosts: int, gbps: float, mode: str, groups: int) -> float:
    """Seconds to install `hosts` hosts: the copies the busiest sender sends, at `gbps`, plus the per-host fixed cost
    (Ansible's tasks, the installers) once per batch of `forks` hosts.

    push: the controller sends every copy (H); pull: one mirror sends every copy (H), the controller none;
    pull-groups: one mirror per group, ceil(H/G) copies each; fan-out: one mirror sends one copy per group (G),
    then each group's first host sends its group the rest (ceil(H/G) - 1), the groups side by side."""
    rate = gbps * 1e9 / 8
    per_group = -(-hosts // groups)
    copies = {"push": hosts, "pull": hosts, "pull-groups": per_group, "fan-out": groups + per_group - 1}[mode]
    return copies * per_host_bytes / rate + fixed_s * -(-hosts // forks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 8])
    ap.add_argument("--modes", nargs="+", default=["push", "pull", "fan-out"], choices=["push", "pull", "fan-out"])
    ap.add_argument("--pad-mb", type=int, default=60, help="MB of padding per .run installer (5 of them)")
    ap.add_argument("--forks", type=int, default=50, help="the model's hosts converged at once (Ansible forks)")
    ap.add_argument("--groups", type=int, default=0, help="the model's mirrors (pull-groups) or groups (fan-out); 0: sqrt(hosts)")
    ap.add_argument("--model-gb", type=float, default=None, help="the model's bundle per host, GB (default: measured)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    sizes = sorted(set(args.sizes))
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="envkit-bench-pull-") as tmp:
        work = Path(tmp)
        lock = resolve_lock(work / "envkit.lock", "--cann", "8.3.RC1")
        bundle = sealed_bundle(work / "bundle", lock, pad_mb=args.pad_mb)
        size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        print(f"bundle: {size / 1e6:.0f} MB", flush=True)
        fleet = Fleet(work / "fleet", max(sizes))
        mirror = counters = None
        try:
            fleet.up()
            mirror = Serve(bundle, work / "mirror.log", bind=BRIDGE)
            counters = Counters(fleet, int(mirror.url.rsplit(":", 1)[1]))
            for n in sizes:
                for mode in args.modes:
                    r = converge(fleet, n, mode, lock, bundle, work / f"out-{mode}-{n}", mirror, counters)
                    runs.append(r)
                    print(
                        f"{mode:<7} {n} node(s): {r['wall_s']:.1f} s; controller sent {r['controller_bytes'] / 1e6:.1f} MB, "
                        f"mirror {r['mirror_bytes'] / 1e6:.1f} MB, head {r['head_bytes'] / 1e6:.1f} MB; per node: "
                        + ", ".join(
                            f"{h} ssh {v['controller_ssh_bytes'] / 1e6:.1f} / mirror {v['mirror_bytes'] / 1e6:.1f} / "
                            f"head {v['head_bytes'] / 1e6:.1f} / sent {v['node_sent_bytes'] / 1e6:.1f} to host, "
                            f"{v['node_tx_bytes'] / 1e6:.1f} in all MB"
                            for h, v in r["per_node"].items()
                        ),
                        flush=True,
                    )
        finally:
            if counters:
                counters.close()
            if mirror:
                mirror.stop()
            fleet.down()
    summary: dict = {"bundle_bytes": size, "runs": runs}
    for mode in args.modes:
        by = {r["nodes"]: r for r in runs if r["mode"] == mode}
        if 1 in by and max(by) > 1:
            ratio = by[max(by)]["wall_s"] / by[1]["wall_s"]
            summary[f"{mode}_ratio"] = round(ratio, 2)
            print(f"{mode}: {max(by)} nodes / 1 node = {ratio:.2f}x (target <= 1.5x): {'OK' if ratio <= 1.5 else 'MISSED'}")
    for r in runs:  # the copies of the bundle each sender sent (the artifact bytes; vendor/SHA256SUMS is not fetched)
        print(
            f"{r['mode']:<7} {r['nodes']} node(s): the mirror sent {r['mirror_bytes'] / size:.2f} bundles, "
            f"the head {r['head_bytes'] / size:.2f}, the controller {r['controller_bytes'] / 1e6:.1f} MB over SSH"
        )
    smallest = min((r["nodes"] for r in runs), default=0)
    one = {r["mode"]: r for r in runs if r["nodes"] == smallest}
    if one:
        r1 = one.get("pull") or one.get("fan-out") or one["push"]
        n1 = r1["nodes"]
        per_host = (
            args.model_gb * 1e9 if args.model_gb else (r1["mirror_bytes"] + r1["head_bytes"] or r1["controller_bytes"]) / n1
        )
        # the fixed cost: the smallest converge's wall time (its transfer at this machine's speed, a memory-fast
        # bridge, is ~0)
        fixed = r1["wall_s"]
        print(f"model: {per_host / 1e9:.2f} GB per host, {fixed:.0f} s fixed per batch of {args.forks} hosts")
        table = []
        for hosts in (100, 1000, 10000):
            for gbps in (1, 10, 100):
                row: dict = {"hosts": hosts, "gbps": gbps}
                groups = args.groups or math.ceil(math.sqrt(hosts))
                row["groups"] = groups
                for mode in MODES:
                    row[mode] = round(model(per_host, fixed, args.forks, hosts, gbps, mode, groups))
                table.append(row)
                print(f"  {hosts:>6} hosts at {gbps:>3} Gb/s ({groups} groups): " + ", ".join(f"{m} {row[m]} s" for m in MODES))
        summary["model"] = {
            "per_host_bytes": per_host,
            "fixed_s": fixed,
            "forks": args.forks,
            "groups": args.groups,
            "table": table,
        }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

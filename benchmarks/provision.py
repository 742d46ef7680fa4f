#!/usr/bin/env python3
"""Wall time of a no-op `envkit provision` rerun on 1, 3 and 8 nspawn nodes (target: 8 nodes <= 1.5x one node) and
the controller's CPU per extra host (target: <= 0.2 s).

Needs root and systemd-nspawn (tests/integration/setup/nspawn.sh deps). Boots one fleet of the largest size,
converges it once (timed, not part of the ratio), then times no-op reruns on the first 1, 3, 8 nodes
(`--limit`), interleaved round by round so that a burst of load from other processes on the machine hits
every size alike; reports the median and the minimum per size and the ratio largest/1 node of each. It also reads
the whole machine's busy CPU (/proc/stat) around each run: what the controller did not spend is the nodes' (their
sshd and the probe's Python run on this machine's cores too) plus anything else running here, so run it on a quiet
machine. With them it prints a model's floor for the ratio on this machine: fixed work, then each host's work (the
controller's and the node's CPU per extra host), one after the other for one host, spread over the cores for many;
on a real fleet each host's own share runs on that host.
`--separate` instead boots one fleet per size (the first version of this benchmark).

    sudo python benchmarks/provision.py [--sizes 1 3 8] [--repeat 3] [--separate] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.provision.fleet import Fleet, make_bundle, provision, resolve_lock  # noqa: E402


def _machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy (every core: /proc/stat's first line, idle and iowait left out)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _noop(fleet: Fleet, lock: Path, bundle: Path, out: Path, n: int | None) -> tuple[float, dict]:
    args = ("--limit", ",".join(f"node{i}" for i in range(1, n + 1))) if n else ()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0 = _machine_cpu()
    t0 = time.monotonic()
    rc, data, err = provision(fleet, lock, bundle, out, *args)
    elapsed = time.monotonic() - t0
    m1 = _machine_cpu()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)  # envkit, ansible-playbook, its workers, ssh
    # the rest of the machine's CPU meanwhile: the nodes (sshd, the probe's Python) on this machine's own cores, and
    # whatever else runs here (run it quiet); on a real fleet each host's share runs on that host
    others = max(0.0, (m1 - m0) - cpu)
    hosts = data.get("hosts", [])
    changed = sum(h["changed"] for h in hosts)
    if rc != 0 or changed or (n and len(hosts) != n):
        raise SystemExit(
            f"{n} nodes: the rerun was not a no-op (exit {rc}, changed {changed}, hosts {len(hosts)})\n{err[-2000:]}"
        )
    # remote module runs on the no-op path: results that were not skipped and did not run on the controller
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.startswith("{")]
    executed = sum(1 for e in events if e.get("event") == "result" and e.get("status") in ("ok", "changed"))
    return elapsed, {
        "results_not_skipped": executed,
        "load1": round(os.getloadavg()[0], 2),
        "controller_cpu_s": round(cpu, 2),
        "nodes_cpu_s": round(others, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 8])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--separate", action="store_true", help="one fleet per size instead of --limit on one fleet")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    sizes = sorted(set(args.sizes))
    times: dict[int, list[float]] = {n: [] for n in sizes}
    cpus: dict[int, list[float]] = {n: [] for n in sizes}
    node_cpus: dict[int, list[float]] = {n: [] for n in sizes}
    info: dict[int, dict] = {n: {} for n in sizes}
    with tempfile.TemporaryDirectory(prefix="envkit-bench-prov-") as tmp:
        work = Path(tmp)
        lock = resolve_lock(work / "envkit.lock", "--cann", "8.3.RC1")
        bundle = make_bundle(work / "bundle", lock)
        groups = [[n] for n in sizes] if args.separate else [sizes]
        for group in groups:
            big = max(group)
            fleet = Fleet(work / f"fleet{big}", big)
            try:
                t0 = time.monotonic()
                fleet.up()
                boot = time.monotonic() - t0
                t0 = time.monotonic()
                rc, data, err = provision(fleet, lock, bundle, work / f"out{big}-converge", timeout=1800)
                converge = time.monotonic() - t0
                if rc != 0:
                    print(f"{big} nodes: converge failed (exit {rc})\n{err[-2000:]}", file=sys.stderr)
                    return 1
                print(f"fleet of {big} node(s): boot {boot:.1f} s, first converge {converge:.1f} s", flush=True)
                for n in group:
                    info[n].update({"boot_s": round(boot, 1), "converge_s": round(converge, 1), "fleet": big})
                # one rerun that is not timed: the first no-op after a converge also warms caches
                _noop(fleet, lock, bundle, work / "out-warm", None if args.separate else big)
                for r in range(args.repeat):
                    for n in group:
                        t, extra = _noop(fleet, lock, bundle, work / f"out{n}-noop{r}", None if args.separate else n)
                        times[n].append(t)
                        cpus[n].append(extra.pop("controller_cpu_s"))
                        node_cpus[n].append(extra.pop("nodes_cpu_s"))
                        info[n].update(extra)
                        print(
                            f"  round {r + 1}: {n} node(s) no-op {t:.1f} s, controller CPU {cpus[n][-1]:.1f} s, "
                            f"the rest of the machine {node_cpus[n][-1]:.1f} s (load average {extra['load1']})",
                            flush=True,
                        )
            finally:
                fleet.down()
    results = {}
    for n in sizes:
        results[n] = {
            **info[n],
            "noop_s": [round(t, 1) for t in times[n]],
            "noop_median_s": round(statistics.median(times[n]), 1),
            "noop_min_s": round(min(times[n]), 1),
            "controller_cpu_median_s": round(statistics.median(cpus[n]), 2),
            "nodes_cpu_median_s": round(statistics.median(node_cpus[n]), 2),
        }
        print(
            f"{n} node(s): no-op rerun median {results[n]['noop_median_s']:.1f} s, min {results[n]['noop_min_s']:.1f} s "
            f"({', '.join(f'{t:.1f}' for t in times[n])}); controller CPU median {results[n]['controller_cpu_median_s']:.1f} s; "
            f"{results[n]['results_not_skipped']} task results not skipped"
        )
    summary: dict = {}
    if 1 in results and max(results) > 1:
        big = max(results)
        ratio = results[big]["noop_median_s"] / results[1]["noop_median_s"]
        ratio_min = results[big]["noop_min_s"] / results[1]["noop_min_s"]
        print(
            f"{big} nodes / 1 node: {ratio:.2f}x by median, {ratio_min:.2f}x by minimum "
            f"(target <= 1.5x): {'OK' if ratio <= 1.5 else 'MISSED'}"
        )
        # the controller's CPU for each host past the first (envkit, ansible-playbook, its workers, ssh), and what
        # it makes of a thousand-host no-op rerun: the 1-node run once, then this per extra host
        per_host = (results[big]["controller_cpu_median_s"] - results[1]["controller_cpu_median_s"]) / (big - 1)
        thousand = results[1]["controller_cpu_median_s"] + 999 * per_host
        print(
            f"controller CPU per extra host: {per_host:.2f} s (target <= 0.2 s): {'OK' if per_host <= 0.2 else 'MISSED'}; "
            f"a 1,000-host no-op rerun by this figure: {thousand:.0f} s of controller CPU "
            f"({thousand / 60:.1f} min on one core, spread over Ansible's forks)"
        )
        # The nodes run on this machine's cores too. A model of the no-op run: fixed work, then each host's work w
        # (the controller's for it and the host's own: its sshd, the probe's Python), one after the other for one host
        # and spread over the cores for many, so N hosts take at least T1 + w * (N / cores - 1). On a real fleet each
        # host's own share runs on that host.
        node_per_host = (results[big]["nodes_cpu_median_s"] - results[1]["nodes_cpu_median_s"]) / (big - 1)
        cores = os.cpu_count() or 1
        work = per_host + node_per_host
        t1 = results[1]["noop_median_s"]
        floor = (t1 + work * max(0.0, big / cores - 1)) / t1
        print(
            f"the rest of the machine (the nodes) per extra host: {node_per_host:.2f} s of CPU; each host's work, "
            f"{work:.2f} s, on {cores} shared cores puts the ratio at {floor:.2f}x or more here (fixed work, then the "
            f"hosts' spread over the cores)"
        )
        summary = {
            "ratio": round(ratio, 2),
            "nodes_cpu_per_extra_host_s": round(node_per_host, 3),
            "ratio_floor_on_shared_cores": round(floor, 2),
            "cores": cores,
            "ratio_min": round(ratio_min, 2),
            "target": 1.5,
            "controller_cpu_per_extra_host_s": round(per_host, 3),
            "controller_cpu_target_s": 0.2,
            "thousand_hosts_controller_cpu_s": round(thousand),
        }
    if args.json:
        args.json.write_text(
            json.dumps({"sizes": results, "method": "separate" if args.separate else "limit", **summary}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Wall time of a no-op `envkit provision` rerun on 1, 3 and 8 nspawn nodes (target: 8 nodes <= 1.5x one node).

Needs root and systemd-nspawn (tests/integration/setup/nspawn.sh deps). For each fleet size: boot the nodes,
converge once (not timed), then time `--repeat` no-op reruns and report the median.

    sudo python benchmarks/provision.py [--sizes 1 3 8] [--repeat 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.provision.fleet import Fleet, make_bundle, provision, resolve_lock  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 8])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="envkit-bench-prov-") as tmp:
        work = Path(tmp)
        lock = resolve_lock(work / "envkit.lock", "--cann", "8.3.RC1")
        bundle = make_bundle(work / "bundle", lock)
        for n in args.sizes:
            fleet = Fleet(work / f"fleet{n}", n)
            try:
                t0 = time.monotonic()
                fleet.up()
                boot = time.monotonic() - t0
                t0 = time.monotonic()
                rc, data, err = provision(fleet, lock, bundle, work / f"out{n}-converge", timeout=1800)
                converge = time.monotonic() - t0
                if rc != 0:
                    print(f"{n} nodes: converge failed (exit {rc})\n{err[-2000:]}", file=sys.stderr)
                    return 1
                times = []
                for r in range(args.repeat):
                    t0 = time.monotonic()
                    rc, data, err = provision(fleet, lock, bundle, work / f"out{n}-noop{r}")
                    times.append(time.monotonic() - t0)
                    changed = sum(h["changed"] for h in data.get("hosts", []))
                    if rc != 0 or changed:
                        print(f"{n} nodes: the rerun was not a no-op (exit {rc}, changed {changed})", file=sys.stderr)
                        return 1
                results[n] = {"boot_s": round(boot, 1), "converge_s": round(converge, 1),
                              "noop_s": [round(t, 1) for t in times], "noop_median_s": round(statistics.median(times), 1)}
                print(f"{n} node(s): boot {boot:.1f} s, first converge {converge:.1f} s, "
                      f"no-op rerun median {statistics.median(times):.1f} s ({', '.join(f'{t:.1f}' for t in times)})", flush=True)
            finally:
                fleet.down()
    if 1 in results and max(results) > 1:
        big = max(results)
        ratio = results[big]["noop_median_s"] / results[1]["noop_median_s"]
        print(f"{big} nodes / 1 node: {ratio:.2f}x (target <= 1.5x): {'OK' if ratio <= 1.5 else 'MISSED'}")
        results_summary = {"ratio": round(ratio, 2), "target": 1.5}
    else:
        results_summary = {}
    if args.json:
        args.json.write_text(json.dumps({"sizes": results, **results_summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

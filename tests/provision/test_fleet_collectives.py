"""A cross-host collective profile through envkit: `envkit launch profile` runs playbooks/collectives.yml on the
three nspawn nodes at once (Ansible over SSH), one gloo rendezvous at node1 over the test bridge, and merges the
nodes' profiles; every all_reduce and all_to_all result of every rank is checked.

The nodes get envkit and torch (+cpu, this interpreter's version) in their own venv, /opt/envkit-coll, from
wheels copied into them (they have no network beyond the bridge); the session's fleet is shared with
test_fleet.py (tests/provision/conftest.py)."""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.provision.fleet import FLEET_MARKS, Fleet, envkit_bin, torch_wheelhouse, wheelhouse

pytestmark = FLEET_MARKS

VENV = "/opt/envkit-coll"


def _install_venvs(fleet: Fleet) -> None:
    """envkit and torch into VENV on every node, at once: the wheels are copied into each node's root (its overlay,
    seen from here), then pip installs them offline."""
    sources = [*wheelhouse().glob("*.whl"), *torch_wheelhouse().glob("*.whl")]
    procs = []
    for i in range(1, fleet.n + 1):
        dest = fleet.work / "hosts" / f"node{i}" / "root" / "var" / "tmp" / "envkit-coll-wheels"
        dest.mkdir(parents=True, exist_ok=True)
        for whl in sources:
            if not (dest / whl.name).exists():
                shutil.copyfile(whl, dest / whl.name)
        cmd = (
            f"test -x {VENV}/bin/envkit && {VENV}/bin/python -c 'import torch' 2>/dev/null || "
            f"(python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-index --find-links /var/tmp/envkit-coll-wheels envkit torch)"
        )
        procs.append(
            subprocess.Popen(
                ["ssh", "-i", str(fleet.key), *fleet.ssh_options(), "-o", "LogLevel=ERROR", f"root@{fleet.ip(i)}", cmd],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for i, p in enumerate(procs, start=1):
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, f"node{i}: {out[-3000:]}"


def test_cross_host_all_reduce_and_all_to_all(fleet, tmp_path):
    _install_venvs(fleet)
    out = tmp_path / "profile"
    p = subprocess.run(
        [
            envkit_bin(),
            "launch",
            "profile",
            "-i",
            str(fleet.inventory),
            "--nproc",
            "2",
            "--device",
            "cpu",
            "--max-size",
            "64K",
            "--timeout",
            "300",
            "--envkit",
            f"{VENV}/bin/envkit",
            "-e",
            "envkit_collectives_ifname=host0",
            "-o",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    prof = json.loads(p.stdout)["profile"]
    assert prof == json.loads((out / "profile.json").read_text())
    assert prof["backend"] == "gloo" and prof["world"] == 6 and prof["nnodes"] == 3 and prof["ok"]
    # every node ran its own ranks, against node1's rendezvous, on its own machine
    assert {h: v["ranks"] for h, v in prof["hosts"].items()} == {"node1": [0, 1], "node2": [2, 3], "node3": [4, 5]}
    assert {v["hostname"] for v in prof["hosts"].values()} == {"node1", "node2", "node3"}
    for h in ("node1", "node2", "node3"):
        part = json.loads((out / "hosts" / h / "profile.json").read_text())
        assert part["master"] == f"{fleet.ip(1)}:29511" and part["ok"]
    rows = {(r["op"], r["size"]): r for r in prof["results"]}
    for op in ("all_reduce", "all_to_all"):
        for size in (8 << 10, 16 << 10, 32 << 10, 64 << 10):
            row = rows[(op, size)]
            assert row["correct"] and len(row["per_rank_time_us"]) == 6 and row["time_us"] > 0, row
    # the profile compares with itself through `envkit compare`
    c = subprocess.run(
        [envkit_bin(), "compare", str(out / "profile.json"), str(out / "profile.json")], capture_output=True, text=True
    )
    assert c.returncode == 0, c.stdout + c.stderr

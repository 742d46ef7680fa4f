"""tools/data_path.py, the measure of issue 36's data paths, on the k8s path: it follows the lock into the places
that take it and lists the functions `plan_k8s` runs; the HCCL rules are reached without an inventory host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_k8s_path_is_followed_and_passes_no_inventory() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "data_path.py"), "--paths", "k8s", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    k8s = json.loads(r.stdout)["k8s"]
    assert k8s["follows"] == "Lock" and k8s["step"] == "plan_k8s"
    places = {p for ps in k8s["by_module"].values() for p in ps}
    assert {"envkit.export.k8s:plan_k8s", "envkit.export.container:container_facts"} <= places, places
    # past plan_k8s the manifests are made from the chip's facts read once (chip_k8s) and ContainerFacts
    assert k8s["by_module"]["envkit.export.k8s"] == ["envkit.export.k8s:chip_k8s", "envkit.export.k8s:plan_k8s"]
    assert k8s["places"] == len(places) and k8s["modules"] == len(k8s["by_module"])
    step = k8s["step_by_module"]
    assert "envkit.fleet.env:uniform_env" in step["envkit.fleet.env"] and "envkit.fleet.env:plan_env" in step["envkit.fleet.env"]
    assert not {"envkit.fleet.inventory", "envkit.fleet.data"} & set(step), sorted(step)
    assert k8s["step_functions"] == sum(len(v) for v in step.values())
    assert not [p for v in step.values() for p in v if "<locals>" in p or "<" in p.split(":")[1]], step


def _bundle_after(paths: str) -> dict:
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "data_path.py"), "--paths", paths, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)["bundle"]


def test_a_path_is_measured_as_its_own_run_whatever_ran_before_it() -> None:
    # k8s render reads the same stack's lock first: measured in one process, the lock's check (a solve and a derive)
    # was remembered and left out of bundle build's trip, which then looked half as long as a real run's
    alone, after = _bundle_after("bundle"), _bundle_after("k8s,bundle")
    assert alone["step_by_module"] == after["step_by_module"]
    assert "envkit.core.resolve.search:solve" in alone["step_by_module"]["envkit.core.resolve.search"]
    assert "envkit.core.derive:derive" in alone["step_by_module"]["envkit.core.derive"]

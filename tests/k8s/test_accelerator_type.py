"""`envkit k8s render --accelerator-type` on a chip that has a default label per pod size (910B, A3; issue #35).

Held: the label given wins over the chip's default in every pod's nodeSelector, in the plan's node labels, in the
`--json` result and in the files written (the smoke Jobs, the training job, the serving pods); the default, by the
pod's NPU count (`platform.kubernetes.accelerator_type` of the lock), is used only when none is given. A pod meant
for a 16-NPU server that kept `module-910b-8` would match no such node and stay Pending.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from envkit.export.k8s import K8sOptions, plan_k8s, pod_specs
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE, resolve


@pytest.fixture(scope="module")
def locks(tmp_path_factory) -> dict[str, Path]:
    """The locks of the two chips with default labels: 910B and A3 training, 910B serving."""
    base = tmp_path_factory.mktemp("acc-type-locks")
    return {
        "910b": resolve("910b", base / "910b.lock"),
        "a3": resolve("a3", base / "a3.lock"),
        "910b-serve": resolve("910b", base / "910b-serve.lock", "--workload", "serving"),
    }


def _selectors(plan) -> list[str | None]:
    """The accelerator-type of every pod of the plan (None: a pod without one)."""
    pods = [pod for doc in plan.files.values() for pod in pod_specs(doc)]
    assert pods
    return [pod["nodeSelector"].get("accelerator-type") for pod in pods]


def test_the_locks_carry_the_defaults_this_test_relies_on(locks):
    """The defaults by pod size, as the matrix records them (so that a label given differs from each)."""
    assert read_lock(locks["910b"]).platform.kubernetes.accelerator_type == {"8": "module-910b-8", "16": "module-910b-16"}
    assert read_lock(locks["a3"]).platform.kubernetes.accelerator_type == {
        "8": "module-a3-8-super-pod",
        "16": "module-a3-16-super-pod",
    }


# (lock, --npus-per-node or None for the chip's default, the chip's default label for that pod size)
DEFAULTS = [
    ("910b", None, "module-910b-8"),
    ("910b", 8, "module-910b-8"),
    ("910b", 16, "module-910b-16"),
    ("a3", None, "module-a3-16-super-pod"),
    ("a3", 16, "module-a3-16-super-pod"),
    ("910b-serve", None, "module-910b-8"),
]


@pytest.mark.parametrize(("key", "npus", "default"), DEFAULTS, ids=[f"{k}-{n}" for k, n, _ in DEFAULTS])
def test_without_a_label_given_the_chip_default_for_the_pod_size(locks, key, npus, default):
    plan = plan_k8s(read_lock(locks[key]), K8sOptions(image=IMAGE, nodes=("node-a",), npus_per_node=npus))
    assert plan.node_labels["accelerator-type"] == default
    assert set(_selectors(plan)) == {default}


# a label given, other than the default: the 16-NPU module label on an 8-NPU default (the reported case), another
# module's, a site's own
GIVEN = [(*row, given) for row in DEFAULTS for given in ("module-910b-16", "module-a3-16", "site-label_1.x") if given != row[2]]


@pytest.mark.parametrize(("key", "npus", "default", "given"), GIVEN, ids=[f"{k}-{n}-{g}" for k, n, _, g in GIVEN])
def test_a_label_given_wins_over_the_chip_default(locks, key, npus, default, given):
    opts = K8sOptions(image=IMAGE, nodes=("node-a",), npus_per_node=npus, accelerator_type=given)
    plan = plan_k8s(read_lock(locks[key]), opts)
    assert plan.node_labels["accelerator-type"] == given, f"the chip's default {default!r} was kept"
    assert set(_selectors(plan)) == {given}, f"a pod kept the chip's default {default!r}"
    assert default not in json.dumps(plan.files) and default not in plan.readme


@pytest.mark.parametrize("key", ["910b", "a3"])
def test_the_cli_writes_the_label_given_and_reports_it(locks, key, run_cli, tmp_path):
    """Through `envkit k8s render`: the files written and the `--json` result, with and without the option."""
    default = "module-910b-8" if key == "910b" else "module-a3-16-super-pod"
    for given, want in ((None, default), ("module-custom-16", "module-custom-16")):
        out = tmp_path / f"base-{given}"
        args = ["k8s", "render", "--lock", str(locks[key]), "--image", IMAGE, "--node", "node-a", "-o", str(out), "--json"]
        r = run_cli(*args, *(["--accelerator-type", given] if given else []))
        assert r.code == 0, r.err
        assert json.loads(r.out)["node_labels"]["accelerator-type"] == want
        written = [yaml.safe_load(p.read_text()) for p in sorted(out.rglob("*.yaml")) if p.name != "kustomization.yaml"]
        pods = [pod for doc in written for pod in pod_specs(doc)]
        assert len(pods) >= 2  # the smoke Job and the training job's pods
        assert {pod["nodeSelector"]["accelerator-type"] for pod in pods} == {want}
        if given:
            assert default not in "".join(p.read_text() for p in out.rglob("*") if p.is_file())

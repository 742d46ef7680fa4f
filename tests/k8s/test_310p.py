"""310P on Kubernetes (issue #38 item 6): training without a rank table the operator would not fill everywhere, and
the per-node smoke Jobs of any number of 310P nodes (`--smoke-only`), since a 310P job cannot span nodes.

Sources: the lock's `platform.hccl.rank_table` (matrices/hccl.yaml has no 310p row); MindCluster's operator fills a
310P pod's rank table only from the device plugin's `ascend-910-configuration` annotation, which it writes only on
nodes whose every card is an Atlas 300I Duo (ascend-device-plugin pkg/device/ascendcommon.go `AddPodAnnotation`).
"""

from __future__ import annotations

import json

import pytest
import yaml

from envkit.errors import BadInput
from envkit.export import k8s_check
from envkit.export.k8s import MAX_NODES, RANK_TABLE_DIR, K8sOptions, plan_k8s, pod_specs, texts
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE

TRAINING = {"ascendjob": "training/ascendjob.yaml", "volcano": "training/vcjob.yaml"}


def _containers(doc):
    return [c for spec in pod_specs(doc) for c in spec["containers"]]


def _check(plan):
    assert k8s_check.problems(plan.files, kube_version=plan.kube_version, image=plan.image, resource=plan.resource) == []


@pytest.mark.parametrize("engine", sorted(TRAINING))
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_310p_training_has_no_rank_table_and_no_wait(k8s_locks, engine, launcher):
    opts = K8sOptions(image=IMAGE, nodes=("infer-0",), npus_per_node=4, engine=engine, launcher=launcher)
    plan = plan_k8s(read_lock(k8s_locks["310p"]), opts)
    _check(plan)
    assert not plan.rank_table and "training/rings-config.yaml" not in plan.files
    doc = plan.files[TRAINING[engine]]
    assert doc["metadata"]["labels"]["ring-controller.atlas"] == "ascend-310P"  # MindCluster's job kind, kept
    for spec in pod_specs(doc):
        assert all("configMap" not in v or v["name"] != "ranktable" for v in spec["volumes"])
    for c in _containers(doc):
        assert c["command"][0] == launcher  # the launcher at once: nothing to wait for
        assert all(e["name"] != "RANK_TABLE_FILE" for e in c["env"])
        assert all(m["mountPath"] != RANK_TABLE_DIR for m in c["volumeMounts"])
    assert any(n.startswith("no rank table: chip 310p") for n in plan.notes)
    assert "No rank table is mounted or waited for (chip 310p" in plan.readme and "--rank-table-timeout" not in plan.readme


@pytest.mark.parametrize("engine", sorted(TRAINING))
def test_a_chip_with_a_rank_table_format_keeps_the_configmap_and_the_wait(k8s_locks, engine):
    plan = plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=1, engine=engine))
    assert plan.rank_table and "training/rings-config.yaml" in plan.files
    for c in _containers(plan.files[TRAINING[engine]]):
        assert (
            c["command"][:2] == ["python3", "-c"]
            and {"name": "RANK_TABLE_FILE", "value": f"{RANK_TABLE_DIR}/hccl.json"} in c["env"]
        )
    assert not any(n.startswith("no rank table") for n in plan.notes)


def test_the_rank_table_follows_the_lock_not_the_chip_name(k8s_locks):
    """A lock whose HCCL facts hold no rank table format (here a 910b lock with it removed) gets no ConfigMap."""
    lock = read_lock(k8s_locks["910b"])
    hccl = lock.platform.hccl.model_copy(update={"rank_table": None})
    lock = lock.model_copy(update={"platform": lock.platform.model_copy(update={"hccl": hccl})})
    plan = plan_k8s(lock, K8sOptions(image=IMAGE, node_count=1))
    assert not plan.rank_table and "training/rings-config.yaml" not in plan.files
    with pytest.raises(BadInput, match="no HCCL rank table format"):  # and so no training across nodes
        plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2))


def test_two_310p_nodes_training_is_refused_naming_the_source_and_smoke_only(k8s_locks, run_cli, tmp_path):
    args = ("--lock", str(k8s_locks["310p"]), "--image", IMAGE, "--npus-per-node", "4", "-o", str(tmp_path / "o"))
    r = run_cli("k8s", "render", *args, "--node", "infer-0", "--node", "infer-1")
    assert r.code == 2 and "no training across nodes" in r.err
    assert "matrices/hccl.yaml rank_tables has no 310p row" in r.err and "--smoke-only" in r.err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("count", [1, 2])
def test_310p_nodes_get_their_smoke_jobs_with_smoke_only(k8s_locks, run_cli, tmp_path, count):
    nodes = [f"infer-{i}" for i in range(count)]
    out = tmp_path / "o"
    args = ["--lock", str(k8s_locks["310p"]), "--image", IMAGE, "--npus-per-node", "4", "--smoke-only", "-o", str(out)]
    r = run_cli("k8s", "render", *args, *(w for n in nodes for w in ("--node", n)), "--json")
    assert r.code == 0, r.err
    res = json.loads(r.out)
    assert (res["workload"], res["engine"], res["rank_table"], res["nodes"]) == ("smoke", None, False, count)
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kust["resources"] == [f"smoke/{n}.yaml" for n in nodes]
    for n in nodes:
        doc = yaml.safe_load((out / f"smoke/{n}.yaml").read_text())
        pod = doc["spec"]["template"]["spec"]
        assert pod["nodeSelector"]["kubernetes.io/hostname"] == n and pod["nodeSelector"]["accelerator"] == "huawei-Ascend310P"
        (c,) = pod["containers"]
        assert c["resources"]["limits"]["huawei.com/Ascend310P"] == 4 and "--nproc 4" in c["command"][2]
    readme = (out / "README.md").read_text()
    assert readme.startswith("# Kubernetes base for chip 310p: smoke per node\n") and "## Training" not in readme


def test_smoke_only_at_the_node_limit_and_past_it(k8s_locks):
    lock = read_lock(k8s_locks["310p"])
    nodes = tuple(f"n{i}" for i in range(MAX_NODES))
    plan = plan_k8s(lock, K8sOptions(image=IMAGE, nodes=nodes, npus_per_node=1, smoke_only=True))
    assert len(plan.files) == MAX_NODES and all(rel.startswith("smoke/") for rel in plan.files)
    with pytest.raises(BadInput, match=f"1 to {MAX_NODES}"):
        plan_k8s(lock, K8sOptions(image=IMAGE, nodes=(*nodes, "one-more"), npus_per_node=1, smoke_only=True))


def test_smoke_only_works_for_every_chip_and_workload(k8s_locks):
    for key, extra in (("910b", {}), ("a3-serve", {}), ("950", {"schedule_policy": "chip1-node8"})):
        plan = plan_k8s(read_lock(k8s_locks[key]), K8sOptions(image=IMAGE, nodes=("a", "b"), smoke_only=True, **extra))
        _check(plan)
        assert sorted(plan.files) == ["smoke/a.yaml", "smoke/b.yaml"], key
        assert "## Training" not in plan.readme and "## Serving" not in plan.readme and not plan.rank_table
    assert not plan_k8s(read_lock(k8s_locks["910b-serve"]), K8sOptions(image=IMAGE, node_count=1)).rank_table
    assert not plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=1, engine="pytorchjob")).rank_table


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"node_count": 2}, "without node names"),
        ({"nodes": ("a",), "model_pvc": "qwen"}, "serve none"),
        ({"nodes": ("a",), "model": "/models/x"}, "serve none"),
    ],
)
def test_smoke_only_refusals(k8s_locks, extra, match):
    with pytest.raises(BadInput, match=match) as exc:
        plan_k8s(read_lock(k8s_locks["310p"]), K8sOptions(image=IMAGE, npus_per_node=2, smoke_only=True, **extra))
    assert exc.value.hint


def test_smoke_only_without_nodes_is_exit_2_and_writes_nothing(k8s_locks, run_cli, tmp_path):
    args = ("--lock", str(k8s_locks["310p"]), "--image", IMAGE, "--npus-per-node", "4", "-o", str(tmp_path / "o"))
    r = run_cli("k8s", "render", *args, "--node-count", "2", "--smoke-only")
    assert r.code == 2 and "--node NAME" in r.err and not (tmp_path / "o").exists()


def test_310p_texts_name_no_rank_table(k8s_locks):
    plan = plan_k8s(read_lock(k8s_locks["310p"]), K8sOptions(image=IMAGE, node_count=1, npus_per_node=2))
    joined = "".join(text for rel, text in texts(plan).items() if rel.endswith(".yaml"))
    assert "rings-config" not in joined and "hccl.json" not in joined and "RANK_TABLE_FILE" not in joined

"""`envkit k8s render --schedule-policy` (issue #38 item 3): MindCluster's Volcano plugin gives a `huawei.com/npu`
(950 family) pod no NPUs unless the job carries `huawei.com/schedule_policy` (ascend-for-volcano
internal/npu/factory.go `get910CardHandlerName`; values: docs/en/scheduling/api/volcano.md Table 3). No default is
documented, so a 950 job under Volcano without one is refused, naming the values; 910B and A3 may name one of
theirs; a 310P job's handler never reads it, so it is refused there, as it is without Volcano.
"""

from __future__ import annotations

import copy

import pytest

from envkit.errors import BadInput
from envkit.export import k8s_check
from envkit.export.k8s import SCHEDULE_POLICIES, SCHEDULE_POLICY_KEY, K8sOptions, plan_k8s, pod_templates
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE


def _plan(k8s_locks, key: str, **kw):
    return plan_k8s(read_lock(k8s_locks[key]), K8sOptions(image=IMAGE, **kw))


def _annotated(plan) -> list[str | None]:
    """The policy of every pod template and of every job-level custom resource (None: none there)."""
    out = []
    for doc in plan.files.values():
        for t in pod_templates(doc):
            out.append(((t.get("metadata") or {}).get("annotations") or {}).get(SCHEDULE_POLICY_KEY))
        if doc["kind"] in ("AscendJob", "Job") and doc["apiVersion"] != "batch/v1":
            out.append(((doc["metadata"].get("annotations")) or {}).get(SCHEDULE_POLICY_KEY))
    assert out
    return out


def test_the_values_are_mindclusters():
    """volcano.md Table 3 / ascend-for-volcano constants.go, by the chips they are for."""
    assert sorted(SCHEDULE_POLICIES["950"]) == sorted(
        ["chip1-node8", "chip1-node16", "chip4-node8", "chip4-node16", "chip8-node8", "chip8-node8-sp", "chip8-node8-ra64-sp"]
    )
    assert sorted(SCHEDULE_POLICIES["910b"]) == ["chip8-node16", "chip8-node8"]
    assert sorted(SCHEDULE_POLICIES["a3"]) == ["chip2-node16", "chip2-node16-sp", "chip2-node8", "chip2-node8-sp"]
    assert "310p" not in SCHEDULE_POLICIES


@pytest.mark.parametrize("key", ["950", "950-serve"])
def test_a_950_job_under_volcano_without_a_policy_is_refused_with_the_values(k8s_locks, key):
    with pytest.raises(BadInput, match="needs --schedule-policy") as exc:
        _plan(k8s_locks, key, nodes=("n0",))
    for value in SCHEDULE_POLICIES["950"]:
        assert value in (exc.value.hint or "")
    with pytest.raises(BadInput) as exc:
        _plan(k8s_locks, key, nodes=("n0",), accelerator_type="950-SuperPod-Atlas-8")
    assert "For --accelerator-type 950-SuperPod-Atlas-8: --schedule-policy chip8-node8-ra64-sp" in (exc.value.hint or "")


@pytest.mark.parametrize("policy", sorted(SCHEDULE_POLICIES["950"]))
@pytest.mark.parametrize("engine", ["ascendjob", "volcano"])
def test_every_950_pod_and_job_carries_the_policy(k8s_locks, policy, engine):
    plan = _plan(k8s_locks, "950", nodes=("n0", "n1"), engine=engine, schedule_policy=policy)
    assert set(_annotated(plan)) == {policy}
    assert plan.schedule_policy == policy and policy in plan.readme
    assert k8s_check.problems(plan.files, kube_version="1.30", image=IMAGE, resource=plan.resource) == []


def test_950_serving_pods_carry_it_too(k8s_locks):
    for count in (1, 2):  # a Deployment, a LeaderWorkerSet
        plan = _plan(k8s_locks, "950-serve-ray", node_count=count, nodes=(), schedule_policy="chip8-node8")
        assert set(_annotated(plan)) == {"chip8-node8"}


def test_a_value_of_another_chip_or_unknown_is_refused(k8s_locks):
    for value in ("chip2-node16", "chip8-node16", "multilevel", "CHIP8-NODE8", ""):
        with pytest.raises(BadInput, match="not a 950 policy"):
            _plan(k8s_locks, "950", node_count=1, schedule_policy=value)
    with pytest.raises(BadInput, match="not a 910b policy"):
        _plan(k8s_locks, "910b", node_count=1, schedule_policy="chip8-node8-ra64-sp")


def test_910b_and_a3_may_name_theirs_and_get_none_otherwise(k8s_locks):
    assert set(_annotated(_plan(k8s_locks, "910b", nodes=("a",)))) == {None}
    assert set(_annotated(_plan(k8s_locks, "910b", nodes=("a",), schedule_policy="chip8-node8"))) == {"chip8-node8"}
    a3 = _plan(k8s_locks, "a3", nodes=("a",), schedule_policy="chip2-node16-sp")
    assert set(_annotated(a3)) == {"chip2-node16-sp"}
    job = a3.files["training/ascendjob.yaml"]
    assert job["metadata"]["annotations"] == {"sp-block": "16", SCHEDULE_POLICY_KEY: "chip2-node16-sp"}


def test_without_volcano_none_is_needed_and_one_given_is_refused(k8s_locks):
    plan = _plan(k8s_locks, "950", nodes=("n0",), scheduler="default", engine="pytorchjob")
    assert set(_annotated(plan)) == {None}
    with pytest.raises(BadInput, match="only Volcano"):
        _plan(k8s_locks, "950", nodes=("n0",), scheduler="default", engine="pytorchjob", schedule_policy="chip8-node8")


def test_another_device_plugins_resource_needs_none(k8s_locks):
    plan = _plan(k8s_locks, "950", nodes=("n0",), resource="huawei.com/ascend-1980")
    assert set(_annotated(plan)) == {None}


@pytest.mark.parametrize(
    "key, args, match",
    [
        ("950", [], "needs --schedule-policy"),
        ("950", ["--schedule-policy", "chip2-node16"], "not a 950 policy"),
        ("310p", ["--npus-per-node", "4", "--schedule-policy", "chip8-node8"], "reads no scheduling policy for chip 310p"),
        ("950", ["--scheduler", "default", "--schedule-policy", "chip8-node8"], "only Volcano"),
    ],
)
def test_refusals_are_exit_2_and_write_nothing(k8s_locks, run_cli, tmp_path, key, args, match):
    out = tmp_path / "out"
    r = run_cli("k8s", "render", "--lock", str(k8s_locks[key]), "--image", IMAGE, "--node", "n0", *args, "-o", str(out))
    assert r.code == 2, (r.out, r.err)
    assert match in r.err and "next:" in r.err and "Traceback" not in r.err
    assert not out.exists()


def test_the_rule_refuses_a_950_pod_without_it_and_keeps_a_910b_pod(k8s_locks):
    plan = _plan(k8s_locks, "950", nodes=("n0",), schedule_policy="chip1-node8")
    job = copy.deepcopy(plan.files["training/ascendjob.yaml"])
    assert k8s_check.rule_problems(job, image=IMAGE, resource="huawei.com/npu") == []
    del job["spec"]["replicaSpecs"]["Master"]["template"]["metadata"]["annotations"]
    found = k8s_check.rule_problems(job, image=IMAGE, resource="huawei.com/npu")
    assert any("without the huawei.com/schedule_policy annotation" in p for p in found), found
    b = _plan(k8s_locks, "910b", nodes=("n0",))
    assert k8s_check.rule_problems(b.files["smoke/n0.yaml"], image=IMAGE, resource="huawei.com/Ascend910") == []

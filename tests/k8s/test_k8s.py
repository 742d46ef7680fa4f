"""`envkit k8s render`: the plan, envkit's own rules (both sides), the schemas, goldens per chip and engine,
hostile values, exit codes, and `kubectl kustomize` where kubectl is installed."""

from __future__ import annotations

import copy
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput, CheckFailed
from envkit.export import k8s_check
from envkit.export.k8s import K8sOptions, plan_k8s, pod_specs, texts
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "k8s"
KUBECTL = shutil.which("kubectl")

# k8s-facts.md §1.1 and §1.2: the resource name and the `accelerator` label per chip
FACTS = {
    "910b": ("huawei.com/Ascend910", "huawei-Ascend910"),
    "a3": ("huawei.com/Ascend910", "huawei-Ascend910"),
    "310p": ("huawei.com/Ascend310P", "huawei-Ascend310P"),
    "950": ("huawei.com/npu", "huawei-npu"),
}
# name -> (lock key, options): the goldens, per chip and engine, training and serving
CASES = {
    "910b-ascendjob": ("910b", K8sOptions(image=IMAGE, nodes=("node-a", "node-b"))),
    "910b-volcano": ("910b", K8sOptions(image=IMAGE, nodes=("node-a", "node-b"), engine="volcano", launcher="accelerate")),
    "910b-pytorchjob": ("910b", K8sOptions(image=IMAGE, node_count=2, engine="pytorchjob", scheduler="default")),
    "a3-ascendjob": ("a3", K8sOptions(image=IMAGE, nodes=("a3-0", "a3-1"))),
    "310p-ascendjob": ("310p", K8sOptions(image=IMAGE, nodes=("infer-0",), npus_per_node=4)),
    "310p-smoke-only": ("310p", K8sOptions(image=IMAGE, nodes=("infer-0", "infer-1"), npus_per_node=4, smoke_only=True)),
    "950-ascendjob": (
        "950",
        K8sOptions(
            image=IMAGE,
            nodes=("n950-0", "n950-1"),
            accelerator_type="950-SuperPod-Atlas-8",
            schedule_policy="chip8-node8-ra64-sp",
        ),
    ),
    "910b-serving": ("910b-serve", K8sOptions(image=IMAGE, nodes=("node-a",), model_pvc="qwen")),
    "a3-serving-lws": (
        "a3-serve-ray",
        K8sOptions(image=IMAGE, node_count=2, model_host_path="/data/models/qwen", model="/models/qwen"),
    ),
    "310p-serving": ("310p-serve", K8sOptions(image=IMAGE, node_count=1, npus_per_node=2)),
    "950-serving-lws": ("950-serve-ray", K8sOptions(image=IMAGE, node_count=2, schedule_policy="chip8-node8")),
}


def _plan(k8s_locks, key: str, opts: K8sOptions):
    return plan_k8s(read_lock(k8s_locks[key]), opts)


def _joined(files: dict[str, str]) -> str:
    return "".join(f"### {rel}\n{text}" for rel, text in sorted(files.items()))


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_per_chip_and_engine(case, k8s_locks, golden):
    key, opts = CASES[case]
    plan = _plan(k8s_locks, key, opts)
    assert k8s_check.problems(plan.files, kube_version=plan.kube_version, image=plan.image, resource=plan.resource) == []
    golden(GOLDEN / f"{case}.txt", _joined(texts(plan)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_resource_names_and_labels_match_the_facts(case, k8s_locks):
    key, opts = CASES[case]
    chip = key.split("-")[0]
    plan = _plan(k8s_locks, key, opts)
    resource, accelerator = FACTS[chip]
    assert plan.resource == resource
    pods = [p for doc in plan.files.values() for p in pod_specs(doc)]
    assert pods
    for pod in pods:
        assert pod["nodeSelector"]["accelerator"] == accelerator
        assert pod["nodeSelector"]["host-arch"] == "huawei-arm"
        for c in pod["containers"]:
            npus = (
                plan.smoke_npus if pod["restartPolicy"] == "Never" and "kubernetes.io/hostname" in pod["nodeSelector"] else None
            )
            assert c["resources"]["requests"][resource] == c["resources"]["limits"][resource] == (npus or plan.npus_per_node)
            assert c["image"] == IMAGE


def test_a3_is_a_superpod_job_and_910b_has_its_module_label(k8s_locks):
    a3 = _plan(k8s_locks, *CASES["a3-ascendjob"])
    job = a3.files["training/ascendjob.yaml"]
    assert job["metadata"]["annotations"] == {"sp-block": "16"}
    assert a3.node_labels["accelerator-type"] == "module-a3-16-super-pod"
    b = _plan(k8s_locks, *CASES["910b-ascendjob"])
    assert b.node_labels["accelerator-type"] == "module-910b-8"
    assert "annotations" not in b.files["training/ascendjob.yaml"]["metadata"]
    assert (
        _plan(k8s_locks, "a3", K8sOptions(image=IMAGE, node_count=1, super_pod=False))
        .files["training/ascendjob.yaml"]["metadata"]
        .get("annotations")
        is None
    )


def test_smoke_jobs_one_per_node_pinned_all_npus(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    smoke = {rel: doc for rel, doc in plan.files.items() if rel.startswith("smoke/")}
    assert sorted(smoke) == ["smoke/node-a.yaml", "smoke/node-b.yaml"]
    for node, doc in (("node-a", smoke["smoke/node-a.yaml"]), ("node-b", smoke["smoke/node-b.yaml"])):
        assert (doc["apiVersion"], doc["kind"], doc["spec"]["backoffLimit"]) == ("batch/v1", "Job", 0)
        pod = doc["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and pod["nodeSelector"]["kubernetes.io/hostname"] == node
        (c,) = pod["containers"]
        assert c["command"][:2] == ["/bin/sh", "-c"] and "envkit smoke --device npu:0 --nproc 8 --json" in c["command"][2]
        assert c["resources"]["limits"] == {"huawei.com/Ascend910": 8, "memory": "256Gi"}
        env = {e["name"]: e for e in c["env"]}
        assert (
            env["ASCEND_VISIBLE_DEVICES"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['huawei.com/Ascend910']"
        )
        assert env["ASCEND_HOME_PATH"]["value"].startswith("/usr/local/Ascend/")  # the lock's CANN environment
        assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/dev/shm", "/usr/local/dcmi", "/usr/local/bin/npu-smi"}
    assert "kubectl" in plan.readme and "logs job/" in plan.readme


def test_without_volcano_the_device_plugin_sets_visible_devices(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-pytorchjob"])
    for doc in plan.files.values():
        for pod in pod_specs(doc):
            assert "schedulerName" not in pod
            assert all(e["name"] != "ASCEND_VISIBLE_DEVICES" for c in pod["containers"] for e in c["env"])


def test_training_launch_and_hccl_come_from_the_launch_layer(k8s_locks):
    from envkit.export.launch import torchrun_argv

    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    job = plan.files["training/ascendjob.yaml"]
    assert job["metadata"]["labels"]["framework"] == "pytorch"
    master = job["spec"]["replicaSpecs"]["Master"]
    assert master["replicas"] == 1 and job["spec"]["replicaSpecs"]["Worker"]["replicas"] == 1
    (c,) = master["template"]["spec"]["containers"]
    assert c["name"] == "ascend" and c["ports"] == [{"name": "ascendjob-port", "containerPort": 2222}]
    assert c["command"][3:5] == ["/user/serverid/devindex/config/hccl.json", "600"]  # the rank-table wait, then torchrun
    assert c["command"][5:] == torchrun_argv(2, 8, "$(RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)", "train.py")
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HCCL_SOCKET_IFNAME"] == "eth0" and env["RANK_TABLE_FILE"] == "/user/serverid/devindex/config/hccl.json"
    assert (
        "HCCL_CONNECT_TIMEOUT" in env
    )  # the lock's HCCL rules' default, through envkit.fleet.env.uniform_env (plan_env's rules)
    cm = plan.files["training/rings-config.yaml"]
    assert cm["metadata"]["name"] == "rings-config-envkit-910b" and cm["data"] == {"hccl.json": '{"status":"initializing"}'}
    assert cm["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910b"
    vc = _plan(k8s_locks, *CASES["910b-volcano"])
    vjob = vc.files["training/vcjob.yaml"]
    assert vjob["spec"]["plugins"] == {"env": [], "svc": []} and vjob["spec"]["minAvailable"] == 2
    acc = yaml.safe_load(vc.files["training/launch-configmap.yaml"]["data"]["accelerate_config.yaml"])
    assert (acc["num_machines"], acc["num_processes"], acc["main_process_ip"]) == (2, 16, "envkit-910b-worker-0.envkit-910b")


def test_hccl_values_go_through_the_fleet_rules(k8s_locks):
    lock = read_lock(k8s_locks["910b"])
    plan = plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2, hccl=(("HCCL_CONNECT_TIMEOUT", "600"),)))
    (c,) = plan.files["training/ascendjob.yaml"]["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert {"name": "HCCL_CONNECT_TIMEOUT", "value": "600"} in c["env"]
    with pytest.raises(BadInput):
        plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2, hccl=(("HCCL_CONNECT_TIMEOUT", "-5"),)))
    with pytest.raises(BadInput, match="HCCL_IF_IP"):
        plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2, hccl=(("HCCL_IF_IP", "10.0.0.1"),)))


def test_serving_deployment_and_leaderworkerset(k8s_locks):
    one = _plan(k8s_locks, *CASES["910b-serving"])
    dep = one.files["serving/deployment.yaml"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["command"][:3] == ["vllm", "serve", "/models/qwen"] and c["ports"][0]["containerPort"] == 8000
    assert c["readinessProbe"]["httpGet"] == c["livenessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert {"name": "TASK_QUEUE_ENABLE", "value": "1"} in c["env"]  # the serving environment block
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in dep["spec"]["template"]["spec"]["volumes"]
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    lws = _plan(k8s_locks, *CASES["a3-serving-lws"])
    doc = lws.files["serving/leaderworkerset.yaml"]
    assert doc["spec"]["leaderWorkerTemplate"]["size"] == 2
    svc = lws.files["serving/service.yaml"]
    assert svc["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "envkit-a3", "role": "leader"}
    with pytest.raises(BadInput, match="serving lock"):
        plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=1, serving=True))
    assert not _plan(k8s_locks, "910b-serve", K8sOptions(image=IMAGE, node_count=1, serving=False)).serving


def test_rendering_is_deterministic(k8s_locks):
    key, opts = CASES["a3-ascendjob"]
    assert texts(_plan(k8s_locks, key, opts)) == texts(_plan(k8s_locks, key, opts))


# --- envkit's own rules: each broken, each kept --------------------------------------------------------------------
def _ascendjob(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    return plan, copy.deepcopy(plan.files["training/ascendjob.yaml"])


def _rules(doc, image=IMAGE, resource="huawei.com/Ascend910"):
    return k8s_check.rule_problems(doc, image=image, resource=resource)


def test_rule_requests_equal_limits(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    assert _rules(doc) == []
    doc["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] = 4
    assert any("requests 8 != limits 4" in p for p in _rules(doc))


def test_rule_one_master(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    doc["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    assert any("Master replicas 2" in p for p in _rules(doc))
    del doc["spec"]["replicaSpecs"]["Master"]
    assert any("no Master" in p for p in _rules(doc))


def test_rule_container_name_port_and_framework(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    assert any("must be named 'ascend'" in p for p in _rules(doc))
    _, doc = _ascendjob(k8s_locks)
    doc["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"][0]["name"] = "port"
    assert any("ascendjob-port" in p for p in _rules(doc))
    _, doc = _ascendjob(k8s_locks)
    del doc["metadata"]["labels"]["framework"]
    assert any("framework" in p for p in _rules(doc))
    pj = copy.deepcopy(_plan(k8s_locks, *CASES["910b-pytorchjob"]).files["training/pytorchjob.yaml"])
    assert _rules(pj) == []
    pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"] = "ascend"
    assert any("must be named 'pytorch'" in p for p in _rules(pj))


def test_rule_no_daemonset_and_one_shot_pods_never_restart(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    job = copy.deepcopy(plan.files["smoke/node-a.yaml"])
    assert _rules(job) == []
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": job["metadata"],
        "spec": {"template": job["spec"]["template"]},
    }
    assert any("DaemonSet" in p for p in _rules(ds))
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    job["spec"]["backoffLimit"] = 3
    found = _rules(job)
    assert any("restartPolicy Never" in p for p in found) and any("backoffLimit must be 0" in p for p in found)


def test_rule_image_digest_and_visible_devices_annotation(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    c = doc["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    c["image"] = "registry.local/envkit/npu:latest"
    found = _rules(doc)
    assert any("is not" in p for p in found) and any("not digest-pinned" in p for p in found)
    _, doc = _ascendjob(k8s_locks)
    assert _rules(doc, resource="huawei.com/ascend-1980") != []  # another resource: the annotation no longer matches
    assert any("annotation of huawei.com/ascend-1980" in p for p in _rules(doc, resource="huawei.com/ascend-1980"))


# --- the schemas ---------------------------------------------------------------------------------------------------
def test_crd_schema_refuses_a_misspelt_field_and_keeps_the_right_one(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    assert k8s_check.schema_problems(doc, "1.30") == []
    doc["spec"]["replicaSpec"] = doc["spec"].pop("replicaSpecs")
    found = k8s_check.schema_problems(doc, "1.30")
    assert any("'replicaSpecs' is a required property" in p for p in found)
    assert any("'replicaSpec' was unexpected" in p for p in found)


def test_crd_pod_template_is_checked_strictly(k8s_locks):
    _, doc = _ascendjob(k8s_locks)
    doc["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    assert any("imagePullPolicyy" in p for p in k8s_check.schema_problems(doc, "1.30"))


@pytest.mark.parametrize("case", ["910b-volcano", "910b-pytorchjob", "a3-serving-lws"])
def test_every_crd_kind_rejects_an_unknown_spec_field(case, k8s_locks):
    plan = _plan(k8s_locks, *CASES[case])
    (rel,) = [r for r, d in plan.files.items() if d["apiVersion"] not in ("v1", "batch/v1", "apps/v1")]
    doc = copy.deepcopy(plan.files[rel])
    assert k8s_check.schema_problems(doc, "1.30") == []
    doc["spec"]["bogus"] = 1
    assert any("'bogus' was unexpected" in p for p in k8s_check.schema_problems(doc, "1.30"))


def test_core_schema_is_strict_and_a_kind_without_schema_is_an_error(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    job = copy.deepcopy(plan.files["smoke/node-a.yaml"])
    job["spec"]["backofLimit"] = 0
    assert any("backofLimit" in p for p in k8s_check.schema_problems(job, "1.30"))
    job = copy.deepcopy(plan.files["smoke/node-a.yaml"])
    job["spec"]["backoffLimit"] = "zero"
    assert k8s_check.schema_problems(job, "1.30") != []
    assert k8s_check.schema_problems({"apiVersion": "example.com/v1", "kind": "Widget"}, "1.30")[0].startswith("no schema")
    assert k8s_check.schema_problems({"apiVersion": "v1", "kind": "Widget"}, "1.30")[0].startswith("no schema")


def test_vendored_crds_name_their_source():
    for row in k8s_check.sources()[1:]:
        assert row["repo"] and row["path"] and len(row["commit"]) == 40, row


def test_check_raises_with_every_problem(k8s_locks):
    plan = _plan(k8s_locks, *CASES["910b-ascendjob"])
    files = copy.deepcopy(plan.files)
    files["training/ascendjob.yaml"]["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(CheckFailed) as exc:
        k8s_check.check(files, kube_version="1.30", image=IMAGE, resource=plan.resource)
    assert exc.value.exit_code == 1 and "training/ascendjob.yaml" in exc.value.message


# --- hostile values --------------------------------------------------------------------------------------------------
def test_hostile_lock_and_option_values_come_out_as_plain_strings(k8s_locks):
    lock = read_lock(k8s_locks["910b-serve-ray"])
    hostile = "{{x}}:@a,${b}={c}"
    layout = lock.layout.model_copy(update={"env": {**lock.layout.env, "HOSTILE": hostile}})
    lock = lock.model_copy(update={"layout": layout})
    model = "- &a *b: {{ y }} # 'q\" | > %"
    plan = plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2, model=model))
    k8s_check.check(plan.files, kube_version="1.30", image=IMAGE, resource=plan.resource)
    text = texts(plan)["serving/leaderworkerset.yaml"]
    doc = yaml.safe_load(text)
    leader = doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert {"name": "HOSTILE", "value": hostile} in leader["env"]
    import shlex

    assert shlex.quote(model) in leader["command"][2]  # one quoted sh word


@pytest.mark.parametrize(
    "opts, match",
    [
        (K8sOptions(image=IMAGE, node_count=1, name="x; rm -rf /"), "not a Kubernetes name"),
        (K8sOptions(image=IMAGE, node_count=1, namespace="a\nb: c"), "not a Kubernetes name"),
        (K8sOptions(image=IMAGE, nodes=("node a",)), "node name"),
        (K8sOptions(image="reg/x:{{y}}", node_count=1), "not an image reference"),
        (K8sOptions(image=IMAGE, node_count=1, resource="huawei.com/x y"), "extended resource"),
        (K8sOptions(image=IMAGE, node_count=1, script="-c import os"), "plain script path"),
    ],
)
def test_hostile_options_are_refused(opts, match, k8s_locks):
    with pytest.raises(BadInput, match=match):
        plan_k8s(read_lock(k8s_locks["910b"]), opts)


# --- bad input, exit codes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key, args, match",
    [
        ("910b", ["--engine", "slurm", "--node-count", "1"], "not a job engine"),
        ("910b", ["--node-count", "2", "--npus-per-node", "4"], "whole nodes"),
        ("910b", ["--node-count", "1", "--npus-per-node", "9"], "takes"),
        ("a3", ["--node-count", "1", "--npus-per-node", "8"], "sp-block"),
        ("310p", ["--node-count", "2", "--npus-per-node", "4"], "no HCCL rank table"),
        ("310p", ["--node-count", "1"], "depend on the cards"),
        ("910b", ["--node-count", "0"], "1 to"),
        ("910b", [], "no nodes"),
        ("910b", ["--node-count", "1", "--hccl", "NOPE"], "NAME=VALUE"),
        ("910b", ["--node-count", "1", "--kube-version", "1.10"], "kube-version"),
    ],
)
def test_bad_input_is_exit_2_with_what_to_do(key, args, match, k8s_locks, run_cli, tmp_path):
    r = run_cli("k8s", "render", "--lock", str(k8s_locks[key]), "--image", IMAGE, *args, "-o", str(tmp_path / "out"))
    assert r.code == 2, (r.out, r.err)
    assert match in r.err and "next:" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "out").exists()


def test_the_npus_a_node_cannot_tell_are_asked_by_the_resource_the_pods_take(k8s_locks):
    """310P: how many NPUs a node has depends on its cards; the hint greps the node for the resource the pods will
    ask (--resource where given, else the lock's), the one the device plugin advertises."""
    lock = read_lock(k8s_locks["310p"])
    own = lock.platform.device_plugin_resource
    assert own is not None and lock.platform.davinci_devices is None
    for resource, grep in ((None, own), ("huawei.com/Ascend310P-4c", "huawei.com/Ascend310P-4c")):
        with pytest.raises(BadInput) as exc:
            plan_k8s(lock, K8sOptions(image=IMAGE, node_count=1, resource=resource))
        assert exc.value.message == "the NPUs of a 310p node depend on the cards installed"
        assert exc.value.hint is not None and exc.value.hint.endswith(f"`kubectl describe node NODE | grep {grep}`).")


def test_a_lock_without_an_image_reference_is_exit_2(k8s_locks, run_cli, tmp_path):
    r = run_cli("k8s", "render", "--lock", str(k8s_locks["910b"]), "--node-count", "1", "-o", str(tmp_path / "out"))
    assert r.code == 2 and "no image reference" in r.err and "envkit image build" in r.err
    assert not (tmp_path / "out").exists()


def test_the_facts_come_from_the_lock_and_a_lock_without_them_is_exit_2(k8s_locks, run_cli, tmp_path):
    """Node labels and NPUs per pod are the lock's `platform.kubernetes` (copied from matrices/platform.yaml by
    resolve): edited there, they change the manifests; an older lock without them is refused with what to do."""
    lock = read_lock(k8s_locks["910b"])
    k = lock.platform.kubernetes
    assert k is not None and k.accelerator == "huawei-Ascend910" and k.host_arch == "huawei-arm"
    assert k.accelerator_type == {"8": "module-910b-8", "16": "module-910b-16"} and k.source
    edited = lock.model_copy(
        update={"platform": lock.platform.model_copy(update={"kubernetes": k.model_copy(update={"accelerator": "x-y"})})}
    )
    assert plan_k8s(edited, K8sOptions(image=IMAGE, node_count=1)).node_labels["accelerator"] == "x-y"
    older = lock.model_copy(update={"platform": lock.platform.model_copy(update={"kubernetes": None})})
    with pytest.raises(BadInput, match="carries no Kubernetes facts") as exc:
        plan_k8s(older, K8sOptions(image=IMAGE, node_count=1))
    assert "resolve it again" in (exc.value.hint or "") and lock.generated_by in (exc.value.hint or "")
    # the same lock as a file an older envkit wrote: the gate names the missing block, and past it the plan does
    doc = yaml.safe_load(k8s_locks["910b"].read_text())
    del doc["platform"]["kubernetes"]
    old = tmp_path / "old.lock"
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    args = ("k8s", "render", "--lock", str(old), "--image", IMAGE, "--node-count", "1", "-o", str(tmp_path / "out"))
    r = run_cli(*args)
    assert r.code == 2 and "platform.kubernetes" in r.err and "Traceback" not in r.err, r.err
    r = run_cli("--accept-edited-lock", *args)
    assert r.code == 2 and "carries no Kubernetes facts" in r.err and "resolve it again" in r.err, r.err
    assert not (tmp_path / "out").exists()


def test_a_chip_without_kubernetes_facts_locks_as_before(tmp_path):
    """A chip whose matrix row has no `kubernetes` (910) gets no block: its lock dumps as before the block existed."""
    from tests.k8s.conftest import resolve

    path = resolve("910", tmp_path / "910.lock")
    assert "kubernetes" not in yaml.safe_load(path.read_text())["platform"]
    assert read_lock(path).platform.kubernetes is None


def test_render_writes_an_owned_base_and_renders_again(k8s_locks, run_cli, tmp_path):
    out = tmp_path / "base"
    args = ("k8s", "render", "--lock", str(k8s_locks["950"]), "--image", IMAGE, "--node", "n1", "-o", str(out))
    args += ("--schedule-policy", "chip1-node8")
    r = run_cli(*args, "--json")
    assert r.code == 0, r.err
    import json

    res = json.loads(r.out)
    assert res["resource"] == "huawei.com/npu" and res["nodes"] == 1 and "kustomization.yaml" in res["files"]
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert run_cli(*args).code == 0
    assert before == {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert all((out / rel).is_file() for rel in kust["resources"])
    (out / "mine.txt").write_text("user file")
    assert run_cli(*args).code == 2  # a file envkit did not write


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (kubectl kustomize builds the base)")
@pytest.mark.parametrize("case", sorted(CASES))
def test_kubectl_kustomize_builds_every_base(case, k8s_locks, tmp_path):
    from envkit.jobs.k8s.render import render_k8s

    key, opts = CASES[case]
    result = render_k8s(k8s_locks[key], tmp_path / "base", replace(opts))
    p = subprocess.run([KUBECTL, "kustomize", str(tmp_path / "base")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    built = [d for d in yaml.safe_load_all(p.stdout) if d]
    assert len(built) == len(result.plan.files)
    assert {d["metadata"]["namespace"] for d in built} == {"default"}


def test_the_matrix_rows_hold_their_npu_counts_together():
    """`chips[].kubernetes`: the counts of multi-node pods, accelerator-type labels and sp-block are counts a pod may
    request; each row is sourced (matrices/platform.yaml)."""
    from pydantic import ValidationError

    from envkit.core.matrix import load_matrix
    from envkit.models.matrix import ChipKubernetes
    from envkit.records import asdict

    lm = load_matrix()
    rows = {c.id: c.kubernetes for c in lm.model.chips if c.kubernetes is not None}
    assert sorted(rows) == ["310p", "910b", "950", "a3"]
    assert all(r.sources and r.confidence == "stated" for r in rows.values())
    assert {a.id: a.kubernetes.host_arch for a in lm.model.arches if a.kubernetes} == {
        "aarch64": "huawei-arm",
        "x86_64": "huawei-x86",
    }
    good = asdict(rows["910b"])
    for bad, match in (
        ({"multi_node_pod_npus": [12]}, "multi_node_pod_npus"),
        ({"accelerator_type": {"32": "module-910b-32"}}, "accelerator_type"),
        ({"sp_block": 9}, "sp_block"),
        ({"pod_npus": [16, 8, 1]}, "ascending"),
        ({"accelerator": "bad value"}, "accelerator"),
        ({"accelerator_type": {"08": "x"}}, "accelerator_type"),
    ):
        with pytest.raises(ValidationError, match=match):
            ChipKubernetes.model_validate({**good, **bad})

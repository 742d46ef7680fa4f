"""The served model is mounted (issue #38 item 5): `--model-pvc NAME` or `--model-host-path PATH` (one of them), read
only, at `/models/<name>` or `--model-mount`, with vLLM pointed at it; both ends of each value's range."""

from __future__ import annotations

import pytest

from envkit.errors import BadInput
from envkit.export.k8s import K8sOptions, plan_k8s, pod_specs
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE


def _plan(k8s_locks, key: str = "910b-serve", **kw):
    kw.setdefault("node_count", 1)
    return plan_k8s(read_lock(k8s_locks[key]), K8sOptions(image=IMAGE, **kw))


def _serving_pods(plan) -> list[dict]:
    pods = [p for rel, doc in plan.files.items() if rel.startswith("serving/") for p in pod_specs(doc)]
    assert pods
    return pods


def _model(pod: dict) -> tuple[dict | None, dict | None]:
    (c,) = pod["containers"]
    mount = next((m for m in c["volumeMounts"] if m["name"] == "model"), None)
    volume = next((v for v in pod["volumes"] if v["name"] == "model"), None)
    return mount, volume


def test_a_pvc_is_mounted_read_only_and_served(k8s_locks):
    plan = _plan(k8s_locks, model_pvc="qwen3-8b")
    (pod,) = _serving_pods(plan)
    mount, volume = _model(pod)
    assert mount == {"name": "model", "mountPath": "/models/qwen3-8b", "readOnly": True}
    assert volume == {"name": "model", "persistentVolumeClaim": {"claimName": "qwen3-8b", "readOnly": True}}
    assert pod["containers"][0]["command"][:3] == ["vllm", "serve", "/models/qwen3-8b"]
    assert "PersistentVolumeClaim `qwen3-8b`" in plan.readme and plan.model == "/models/qwen3-8b"
    assert all(_model(p) == (None, None) for rel, d in plan.files.items() if rel.startswith("smoke/") for p in pod_specs(d))


def test_a_host_directory_is_typed_and_both_lws_pods_mount_it(k8s_locks):
    plan = _plan(k8s_locks, "a3-serve-ray", node_count=2, model_host_path="/data/models/Qwen3-32B")
    pods = _serving_pods(plan)
    assert len(pods) == 2  # the leader and the worker (Ray's workers load the weights too)
    for pod in pods:
        mount, volume = _model(pod)
        assert mount == {"name": "model", "mountPath": "/models/Qwen3-32B", "readOnly": True}
        assert volume == {"name": "model", "hostPath": {"path": "/data/models/Qwen3-32B", "type": "Directory"}}
    leader = plan.files["serving/leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert "vllm serve /models/Qwen3-32B " in leader["spec"]["containers"][0]["command"][2]


def test_mount_path_and_a_model_inside_it(k8s_locks):
    plan = _plan(k8s_locks, model_pvc="store", model_mount="/mnt/store", model="/mnt/store/qwen")
    (pod,) = _serving_pods(plan)
    assert _model(pod)[0]["mountPath"] == "/mnt/store"
    assert pod["containers"][0]["command"][2] == "/mnt/store/qwen"
    with pytest.raises(BadInput, match="is not in the model volume"):
        _plan(k8s_locks, model_pvc="store", model="/models/other")
    with pytest.raises(BadInput, match="is not in the model volume"):
        _plan(k8s_locks, model_pvc="store", model="/models/store-2")  # a sibling, not inside


def test_without_a_volume_nothing_is_mounted_and_the_default_model_stays(k8s_locks):
    plan = _plan(k8s_locks)
    (pod,) = _serving_pods(plan)
    assert _model(pod) == (None, None) and pod["containers"][0]["command"][2] == "/models/model"
    assert "no model volume mounted" in plan.readme


def test_a_multi_node_pvc_notes_its_access_mode(k8s_locks):
    plan = _plan(k8s_locks, "a3-serve-ray", node_count=2, model_pvc="weights")
    assert any("ReadOnlyMany" in n for n in plan.notes)


@pytest.mark.parametrize("name", ["a", "a" * 63, "qwen-3-8b", "0model9"])
def test_pvc_names_accepted(k8s_locks, name):
    assert _model(_serving_pods(_plan(k8s_locks, model_pvc=name))[0])[1]["persistentVolumeClaim"]["claimName"] == name


@pytest.mark.parametrize("name", ["a" * 64, "", "Qwen", "-qwen", "qwen-", "qwen.3", "qwen_3", "q wen", "q\nw"])
def test_pvc_names_refused(k8s_locks, name):
    with pytest.raises(BadInput, match="is not a PersistentVolumeClaim name"):
        _plan(k8s_locks, model_pvc=name)


LONGEST = "/" + "/".join(["a" * 255] * 4)  # 1024 characters, each part 255


@pytest.mark.parametrize("path", ["/m", "/data/models/qwen", "/data/Qwen3-8B_v1.5+x", LONGEST])
def test_host_paths_accepted(k8s_locks, path):
    volume = _model(_serving_pods(_plan(k8s_locks, model_host_path=path))[0])[1]
    assert volume["hostPath"] == {"path": path, "type": "Directory"}


@pytest.mark.parametrize(
    "path",
    [
        "relative/path",
        "/",
        "",
        "/data/../etc",
        "/data/./x",
        "/data/models/",
        "//data",
        "/data/a b",
        "/data/$(x)",
        LONGEST + "/a",
        "/" + "a" * 256,
    ],
)
def test_host_paths_refused(k8s_locks, path):
    with pytest.raises(BadInput, match="--model-host-path .* is not an absolute path"):
        _plan(k8s_locks, model_host_path=path)


@pytest.mark.parametrize("mount", ["/usr/local/dcmi", "/usr/local", "/usr", "/dev/shm", "/etc/models", "/opt/envkit/m"])
def test_a_mount_path_over_the_images_or_the_drivers_is_refused(k8s_locks, mount):
    with pytest.raises(BadInput, match="overlaps"):
        _plan(k8s_locks, model_pvc="m", model_mount=mount)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"model_mount": "/models/x"}, "--model-mount without a model volume"),
        ({"model_pvc": "m", "model_mount": "models/x"}, "--model-mount .* is not an absolute path"),
    ],
)
def test_mount_option_refusals(k8s_locks, kw, match):
    with pytest.raises(BadInput, match=match):
        _plan(k8s_locks, **kw)


def test_training_refuses_a_model_volume(k8s_locks):
    with pytest.raises(BadInput, match="this base trains"):
        _plan(k8s_locks, "910b", model_pvc="weights")


@pytest.mark.parametrize(
    "args, match",
    [
        (["--model-pvc", "a", "--model-host-path", "/data/a"], "together"),
        (["--model-pvc", "a" * 64], "PersistentVolumeClaim name"),
        (["--model-host-path", "/data/../a"], "not an absolute path"),
    ],
)
def test_cli_refusals_are_exit_2(k8s_locks, run_cli, tmp_path, args, match):
    out = tmp_path / "out"
    r = run_cli(
        "k8s", "render", "--lock", str(k8s_locks["910b-serve"]), "--image", IMAGE, "--node-count", "1", *args, "-o", str(out)
    )
    assert r.code == 2 and match in r.err and "next:" in r.err, r.err
    assert not out.exists()


def test_cli_writes_the_volume(k8s_locks, run_cli, tmp_path):
    import yaml

    out = tmp_path / "out"
    args = ("--lock", str(k8s_locks["910b-serve"]), "--image", IMAGE, "--node-count", "1", "--model-pvc", "weights")
    r = run_cli("k8s", "render", *args, "-o", str(out))
    assert r.code == 0, r.err
    doc = yaml.safe_load((out / "serving" / "deployment.yaml").read_text())
    (pod,) = pod_specs(doc)
    assert _model(pod)[1]["persistentVolumeClaim"]["claimName"] == "weights"

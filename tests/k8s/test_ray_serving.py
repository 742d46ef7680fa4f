"""Serving across nodes (issue #38): the lock must hold Ray, the LeaderWorkerSet leader waits for its nodes, the
workers retry joining it, every pod sets what vllm-ascend's Ray guide exports; and the rendered leader and worker
commands run, as the pod runs them, against stand-in `ray` and `vllm` executables (tests/fixtures/ray_stub)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput
from envkit.export import k8s_check
from envkit.export.k8s import K8sOptions, plan_k8s, ray_in_lock, texts
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "tests" / "fixtures" / "ray_stub"
SH = shutil.which("sh")
pytestmark = pytest.mark.skipif(SH is None, reason="no /bin/sh")


def _lws(k8s_locks, key: str = "a3-serve-ray", **kw) -> dict:
    plan = plan_k8s(read_lock(k8s_locks[key]), K8sOptions(image=IMAGE, node_count=kw.pop("node_count", 2), **kw))
    assert k8s_check.problems(plan.files, kube_version="1.30", image=IMAGE, resource=plan.resource) == []
    return yaml.safe_load(texts(plan)["serving/leaderworkerset.yaml"])  # as written: the YAML read back


def _containers(doc: dict) -> tuple[dict, dict]:
    lwt = doc["spec"]["leaderWorkerTemplate"]
    return lwt["leaderTemplate"]["spec"]["containers"][0], lwt["workerTemplate"]["spec"]["containers"][0]


def _env(c: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


# --- the lock ------------------------------------------------------------------------------------------------------
def test_multi_node_serving_refuses_a_lock_without_ray(k8s_locks):
    lock = read_lock(k8s_locks["a3-serve"])
    assert ray_in_lock(lock) is None
    with pytest.raises(BadInput, match="the serving lock lacks ray") as exc:
        plan_k8s(lock, K8sOptions(image=IMAGE, node_count=2))
    assert exc.value.exit_code == 2 and "--node-count 1" in (exc.value.hint or "")
    assert "matrices/serving.yaml" in (exc.value.hint or "")
    # one node needs no Ray
    assert "serving/deployment.yaml" in plan_k8s(lock, K8sOptions(image=IMAGE, node_count=1)).files
    assert ray_in_lock(read_lock(k8s_locks["a3-serve-ray"])) == "python.requirements"


def test_a_closure_decides_once_the_lock_has_one(k8s_locks):
    from envkit.models.lock import ClosurePackage, ClosureTarget, PythonClosure

    lock = read_lock(k8s_locks["a3-serve-ray"])

    def closure(*names: str) -> PythonClosure:
        return PythonClosure(
            target=ClosureTarget(python="3.10", arch="aarch64", glibc="2.28", platform="manylinux_2_28_aarch64"),
            roots=["ray==2.48.0"],
            index_url="https://pypi.org/simple",
            resolver="uv 0.9.0",
            packages=[
                ClosurePackage(
                    name=n,
                    version="2.48.0",
                    filename=f"{n}-2.48.0-cp310-cp310-manylinux2014_aarch64.whl",
                    url=f"https://files.pythonhosted.org/packages/{n}-2.48.0-cp310-cp310-manylinux2014_aarch64.whl",
                    sha256="0" * 64,
                    size=1,
                )
                for n in names
            ],
        )

    with_ray = lock.model_copy(update={"python": lock.python.model_copy(update={"closure": closure("ray")})})
    assert ray_in_lock(with_ray) == "python.closure"
    # pinned but not in the closure the image installs: refused
    without = lock.model_copy(update={"python": lock.python.model_copy(update={"closure": closure("requests")})})
    with pytest.raises(BadInput, match=r"python.closure holds no `ray`"):
        plan_k8s(without, K8sOptions(image=IMAGE, node_count=2))


def test_the_cli_exits_2_naming_ray(k8s_locks, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["-m", "envkit", "k8s", "render", "--lock", str(k8s_locks["a3-serve"]), "--image", IMAGE]
    import sys

    r = subprocess.run(
        [sys.executable, *args, "--node-count", "2", "-o", str(tmp_path / "k")], env=env, capture_output=True, text=True
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the serving lock lacks ray" in r.stdout + r.stderr and not (tmp_path / "k").exists()
    # the hint names the command that resolves the stack again with Ray; the lock it writes renders as it is
    hint = f"envkit resolve --chip a3 --arch aarch64 --os {read_lock(k8s_locks['a3-serve']).stack.os} --vllm-ascend"
    assert hint in r.stdout + r.stderr and "--workload serving-multi-node" in r.stdout + r.stderr
    args[5] = str(k8s_locks["a3-serve-ray"])
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            *args[2:],
            "--node-count",
            "2",
            "--ray-timeout",
            "30",
            "--socket-ifname",
            "bond0",
            "--json",
            "-o",
            str(tmp_path / "k"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["nodes"] == 2
    text = (tmp_path / "k" / "serving" / "leaderworkerset.yaml").read_text()
    assert "limit=30\n" in text and "value: bond0" in text


# --- what is rendered ----------------------------------------------------------------------------------------------
def test_every_pod_sets_the_guides_environment(k8s_locks):
    leader, worker = _containers(_lws(k8s_locks, socket_ifname="ens1f0"))
    for c in (leader, worker):
        env = _env(c)
        assert env["HCCL_IF_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == env["HCCL_SOCKET_IFNAME"] == "ens1f0"
        assert env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
        assert env["ASCEND_RT_VISIBLE_DEVICES"] == ",".join(map(str, range(16)))
        assert env["OMP_PROC_BIND"] == "false"
        assert c["command"][:2] == ["/bin/sh", "-c"]
        assert "$(" not in c["command"][2] and "$$" not in c["command"][2]
    # --hccl names HCCL's own interface apart from Gloo's and TP's
    leader, _ = _containers(_lws(k8s_locks, socket_ifname="ens1f0", hccl=(("HCCL_SOCKET_IFNAME", "ens2"),)))
    assert (_env(leader)["HCCL_SOCKET_IFNAME"], _env(leader)["GLOO_SOCKET_IFNAME"]) == ("ens2", "ens1f0")
    assert leader["livenessProbe"]["initialDelaySeconds"] == 900 + 600  # the wait for the nodes comes first


@pytest.mark.parametrize("bad", ["", "eth0; reboot", "a" * 16, "$(x)", "-eth0", "eth 0"])
def test_a_bad_interface_or_timeout_is_refused(k8s_locks, bad):
    with pytest.raises(BadInput, match="--socket-ifname"):
        _lws(k8s_locks, socket_ifname=bad)
    for t in (0, 86401):
        with pytest.raises(BadInput, match="--ray-timeout"):
            _lws(k8s_locks, ray_timeout=t)


def test_the_checks_refuse_a_leader_that_does_not_wait(k8s_locks):
    plan = plan_k8s(read_lock(k8s_locks["a3-serve-ray"]), K8sOptions(image=IMAGE, node_count=2))
    lwt = plan.files["serving/leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]
    lwt["leaderTemplate"]["spec"]["containers"][0]["command"] = ["/bin/sh", "-c", "ray start --head && exec vllm serve m"]
    lwt["workerTemplate"]["spec"]["containers"][0]["command"] = [
        "/bin/sh",
        "-c",
        'exec ray start --address="$(LWS_LEADER_ADDRESS):6379"',
    ]
    lwt["workerTemplate"]["spec"]["containers"][0]["env"] = [
        e for e in lwt["workerTemplate"]["spec"]["containers"][0]["env"] if e["name"] != "HCCL_IF_IP"
    ]
    found = k8s_check.problems(plan.files, kube_version="1.30", image=IMAGE, resource=plan.resource)
    assert any("does not wait for its LWS_GROUP_SIZE Ray nodes" in p for p in found)
    assert any("does not retry joining LWS_LEADER_ADDRESS" in p for p in found)
    assert any("'$(' or '$$'" in p for p in found)
    assert any("HCCL_IF_IP must be the pod's IP" in p for p in found)


# --- the pods' commands, run -----------------------------------------------------------------------------------------
def _pod_env(c: dict, state: Path, **lws: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it: its values, the pod IP for the fieldRef, LWS's variables,
    and the stand-ins first on the image's PATH."""
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    env["HCCL_IF_IP"] = "127.0.0.1"
    env["PATH"] = f"{STUBS}:{env['PATH']}"
    env["RAY_STUB_STATE"] = str(state)
    env.update(lws)
    return env


def _start(c: dict, state: Path, **lws: str) -> subprocess.Popen:
    return subprocess.Popen(
        c["command"], env=_pod_env(c, state, **lws), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _done(p: subprocess.Popen, timeout: float = 30) -> tuple[int, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out + err


def _sh_command(c: dict) -> list[str]:
    assert c["command"][0] == "/bin/sh"
    return c["command"]


def test_the_leader_waits_for_its_group_then_serves(k8s_locks, tmp_path):
    leader, worker = _containers(_lws(k8s_locks, node_count=3, ray_timeout=60))
    _sh_command(leader)
    lws = {"LWS_GROUP_SIZE": "3", "LWS_LEADER_ADDRESS": "envkit-a3-0.envkit-a3.default", "LWS_WORKER_INDEX": "0"}
    head = _start(leader, tmp_path, **lws)
    deadline = time.monotonic() + 20
    while not (tmp_path / "head").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)
    assert head.poll() is None and not (tmp_path / "vllm").exists()  # one of three nodes: still waiting
    workers = [_start(worker, tmp_path, **{**lws, "LWS_WORKER_INDEX": str(i)}) for i in (1, 2)]
    for w in workers:
        code, log = _done(w)
        assert code == 0, log
    code, log = _done(head)
    assert code == 0, log
    assert "1 of 3 Ray nodes joined; waiting" in log and "all 3 Ray nodes joined; starting vLLM" in log
    assert (tmp_path / "vllm").read_text() == (
        "serve /models/model --host 0.0.0.0 --port 8000 --tensor-parallel-size 16 --pipeline-parallel-size 3 "
        "--distributed-executor-backend ray"
    )
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "start --head --port=6379 --node-ip-address=127.0.0.1"
    assert "start --address=envkit-a3-0.envkit-a3.default:6379 --node-ip-address=127.0.0.1 --block" in calls


def test_the_leader_fails_after_its_deadline(k8s_locks, tmp_path):
    leader, _ = _containers(_lws(k8s_locks, ray_timeout=2))
    t0 = time.monotonic()
    code, log = _done(_start(leader, tmp_path, LWS_GROUP_SIZE="2", LWS_LEADER_ADDRESS="x", LWS_WORKER_INDEX="0"))
    assert code == 1, log
    assert 1 <= time.monotonic() - t0 < 15  # `date +%s`: whole seconds, so up to one less
    assert "1 of 2 Ray nodes joined the head within 2 s (--ray-timeout)" in log and "vLLM is not started" in log
    assert not (tmp_path / "vllm").exists() and (tmp_path / "stopped").exists()  # the head is stopped


def test_a_worker_retries_until_the_leader_is_up(k8s_locks, tmp_path):
    leader, worker = _containers(_lws(k8s_locks, ray_timeout=60))
    lws = {"LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "envkit-a3-0.envkit-a3.default", "LWS_WORKER_INDEX": "1"}
    w = _start(worker, tmp_path, **lws)  # before the leader (LWS starts the group's pods together)
    time.sleep(2.5)
    assert w.poll() is None
    head = _start(leader, tmp_path, **{**lws, "LWS_WORKER_INDEX": "0"})
    code, log = _done(w)
    assert code == 0, log
    assert "(attempt 1)" in log and "(attempt 2)" in log and "retrying in 1 s" in log and "retrying in 2 s" in log
    assert "Could not find any running Ray instance" in log  # what Ray said on the failed tries
    code, log = _done(head)
    assert code == 0 and (tmp_path / "vllm").exists(), log


def test_a_worker_gives_up_after_its_deadline(k8s_locks, tmp_path):
    _, worker = _containers(_lws(k8s_locks, ray_timeout=3))
    t0 = time.monotonic()
    code, log = _done(_start(worker, tmp_path, LWS_GROUP_SIZE="2", LWS_LEADER_ADDRESS="leader.ns", LWS_WORKER_INDEX="1"))
    assert code == 1, log
    assert 2 <= time.monotonic() - t0 < 15  # `date +%s`: whole seconds, so up to one less
    assert "could not join the Ray head at leader.ns:6379 in" in log and "within 3 s (--ray-timeout)" in log
    assert log.count("envkit: joining the Ray head") >= 2


def test_without_the_lws_variables_the_scripts_say_so(k8s_locks, tmp_path):
    leader, worker = _containers(_lws(k8s_locks, ray_timeout=2))
    for c, var in ((leader, "LWS_GROUP_SIZE"), (worker, "LWS_LEADER_ADDRESS")):
        code, log = _done(_start(c, tmp_path))
        assert code != 0 and f"{var}: is set by LeaderWorkerSet" in log

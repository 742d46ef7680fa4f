"""Pod hygiene (issue #38 item 7): CPU and memory on every container (envkit's sizes per NPU, or --cpu / --memory),
the image's non-root user by number with no privilege escalation and no capabilities, typed hostPaths, and a smoke
Job that takes every NPU of its node and runs `envkit smoke` on each of them (run here with a fake `envkit`)."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput
from envkit.export import k8s_check
from envkit.export.container import container_facts
from envkit.export.k8s import HOST_PATH_TYPES, K8sOptions, plan_k8s, pod_specs, texts
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE
from tests.k8s.test_k8s import CASES


def _plan(k8s_locks, key: str = "910b", **kw):
    kw.setdefault("nodes", ("node-a",))
    return plan_k8s(read_lock(k8s_locks[key]), K8sOptions(image=IMAGE, **kw))


def _containers(plan):
    out = [(rel, c) for rel, doc in plan.files.items() for pod in pod_specs(doc) for c in pod["containers"]]
    assert out
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_container_has_cpu_memory_and_the_security_context(case, k8s_locks):
    key, opts = CASES[case]
    plan = plan_k8s(read_lock(k8s_locks[key]), opts)
    for _rel, c in _containers(plan):
        n = c["resources"]["requests"][plan.resource]
        assert c["resources"]["requests"]["cpu"] == str(4 * n)
        assert c["resources"]["requests"]["memory"] == c["resources"]["limits"]["memory"] == f"{32 * n}Gi"
        assert "cpu" not in c["resources"]["limits"]
        assert c["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsGroup": 1000,
            "runAsNonRoot": True,
            "runAsUser": 1000,
        }
    for doc in plan.files.values():
        for pod in pod_specs(doc):
            for v in pod["volumes"]:
                if "hostPath" in v and v["name"] != "model":
                    assert v["hostPath"]["type"] == HOST_PATH_TYPES[v["hostPath"]["path"]]


@pytest.mark.parametrize("chip", ["910b", "a3", "310p", "950"])
def test_every_driver_mount_of_every_chip_has_a_type(chip, k8s_locks):
    """The table covers what ContainerFacts mounts (the whole driver dir on 950, its parts elsewhere)."""
    facts = container_facts(read_lock(k8s_locks[chip]), "0")
    assert facts.mounts and all(host in HOST_PATH_TYPES for host, _c, _m in facts.mounts)
    for host, kind in HOST_PATH_TYPES.items():
        assert kind == (
            "File" if host.rsplit("/", 1)[-1] in ("npu-smi", "hccn_tool", "version.info", "ascend_install.info") else "Directory"
        )


def test_the_image_user_is_the_dockerfiles():
    text = (Path(__file__).resolve().parents[2] / "images" / "Dockerfile.j2").read_text()
    assert "ARG HWHIAIUSER_UID=1000" in text and "ARG HWHIAIUSER_GID=1000" in text and "USER HwHiAiUser" in text


# --- --cpu, --memory: the formats and both ends ---------------------------------------------------------------------
@pytest.mark.parametrize("cpu", ["100m", "0.1", "1", "1.5", "2.125", "16", "1024", "1024000m"])
def test_cpu_accepted(k8s_locks, cpu):
    for _rel, c in _containers(_plan(k8s_locks, cpu=cpu)):
        assert c["resources"]["requests"]["cpu"] == cpu and "cpu" not in c["resources"]["limits"]


@pytest.mark.parametrize("cpu", ["99m", "0.09", "0", "0m", "1025", "1024001m", "-1", "1.5555", "1e3", "one", "", "1 ", "8Gi"])
def test_cpu_refused(k8s_locks, cpu):
    with pytest.raises(BadInput, match="--cpu"):
        _plan(k8s_locks, cpu=cpu)


@pytest.mark.parametrize("memory", ["1Gi", "1024Mi", "1073741824", "2G", "256Gi", "64Ti", "65536Gi"])
def test_memory_accepted(k8s_locks, memory):
    for _rel, c in _containers(_plan(k8s_locks, memory=memory)):
        assert c["resources"]["requests"]["memory"] == c["resources"]["limits"]["memory"] == memory


@pytest.mark.parametrize(
    "memory", ["1023Mi", "1073741823", "1G", "0", "0Gi", "65Ti", "65537Gi", "-1Gi", "1.5Gi", "8gb", "", "Gi"]
)
def test_memory_refused(k8s_locks, memory):
    with pytest.raises(BadInput, match="--memory"):
        _plan(k8s_locks, memory=memory)


@pytest.mark.parametrize("run_as", [(1, 0), (1000, 1000), (2**31 - 1, 2**31 - 1)])
def test_run_as_accepted(k8s_locks, run_as):
    for _rel, c in _containers(_plan(k8s_locks, run_as=run_as)):
        assert (c["securityContext"]["runAsUser"], c["securityContext"]["runAsGroup"]) == run_as


@pytest.mark.parametrize("run_as", [(0, 0), (0, 1000), (2**31, 1), (1, 2**31), (1, -1)])
def test_run_as_refused(k8s_locks, run_as):
    with pytest.raises(BadInput, match="--run-as"):
        _plan(k8s_locks, run_as=run_as)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--cpu", "0"], "--cpu 0: 100m to 1024 cores"),
        (["--memory", "65Ti"], "--memory 65Ti: 1Gi to 64Ti"),
        (["--run-as", "root"], "is not UID:GID"),
        (["--run-as", "0:0"], "pods run as non-root"),
    ],
)
def test_cli_refusals_are_exit_2(k8s_locks, run_cli, tmp_path, args, match):
    out = tmp_path / "out"
    r = run_cli("k8s", "render", "--lock", str(k8s_locks["910b"]), "--image", IMAGE, "--node-count", "1", *args, "-o", str(out))
    assert r.code == 2 and match in r.err and "Traceback" not in r.err, r.err
    assert not out.exists()


# --- the rules ---------------------------------------------------------------------------------------------------
def test_the_rules_refuse_each_lapse(k8s_locks):
    plan = _plan(k8s_locks)
    job = plan.files["smoke/node-a.yaml"]

    def broken(change) -> list[str]:
        doc = copy.deepcopy(job)
        change(doc["spec"]["template"]["spec"])
        return k8s_check.rule_problems(doc, image=IMAGE, resource="huawei.com/Ascend910")

    assert broken(lambda pod: None) == []
    c = lambda pod: pod["containers"][0]  # noqa: E731
    assert any("no cpu request" in p for p in broken(lambda pod: c(pod)["resources"]["requests"].pop("cpu")))
    assert any("no memory limit" in p for p in broken(lambda pod: c(pod)["resources"]["limits"].pop("memory")))
    assert any("non-root" in p for p in broken(lambda pod: c(pod)["securityContext"].update(runAsUser=0)))
    assert any("non-root" in p for p in broken(lambda pod: c(pod)["securityContext"].pop("runAsNonRoot")))
    assert any("escalate" in p for p in broken(lambda pod: c(pod)["securityContext"].update(allowPrivilegeEscalation=True)))
    assert any("escalate" in p for p in broken(lambda pod: c(pod)["securityContext"].update(privileged=True)))
    assert any("capability" in p for p in broken(lambda pod: c(pod)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"])))
    assert any("capability" in p for p in broken(lambda pod: c(pod)["securityContext"].pop("capabilities")))
    assert any("hostPath without a type" in p for p in broken(lambda pod: pod["volumes"][1]["hostPath"].pop("type")))


# --- the smoke Job: every NPU of the node ------------------------------------------------------------------------
def test_the_smoke_job_takes_the_whole_node_when_the_pods_take_part_of_it(k8s_locks):
    plan = _plan(k8s_locks, npus_per_node=4)
    (smoke,) = pod_specs(plan.files["smoke/node-a.yaml"])
    assert smoke["containers"][0]["resources"]["requests"]["huawei.com/Ascend910"] == 8
    assert smoke["nodeSelector"]["accelerator-type"] == "module-910b-8"
    (train,) = pod_specs(plan.files["training/ascendjob.yaml"])
    assert train["containers"][0]["resources"]["requests"]["huawei.com/Ascend910"] == 4
    assert plan.smoke_npus == 8 and any("all 8 NPUs of their node" in n for n in plan.notes)
    sixteen = _plan(k8s_locks, npus_per_node=16)  # a 16-NPU 910B server: the node holds more than the lock's 8
    assert sixteen.smoke_npus == 16
    assert pod_specs(sixteen.files["smoke/node-a.yaml"])[0]["nodeSelector"]["accelerator-type"] == "module-910b-16"


def _smoke_script(plan, node: str = "node-a") -> list[str]:
    doc = yaml.safe_load(texts(plan)[f"smoke/{node}.yaml"])
    (pod,) = pod_specs(doc)
    command = pod["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"] and len(command) == 3
    return command


def _run_smoke(command: list[str], tmp_path: Path, fail: dict[str, int]) -> tuple[int, list[list[str]], str]:
    """Run the smoke command under sh with a fake `envkit` that records each call and exits as `fail` says."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    cases = "".join(f"  npu:{d}) code={code} ;;\n" for d, code in fail.items())
    fake = bin_dir / "envkit"
    lines = ["#!/bin/sh", f'echo "$*" >> {log}', "code=0", 'case "$3" in', cases + "esac", """echo '{"device": "'"$3"'"}'"""]
    fake.write_text("\n".join([*lines, "exit $code", ""]))
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    calls = [line.split() for line in log.read_text().splitlines()]
    return p.returncode, calls, p.stdout


@pytest.mark.parametrize("key, npus", [("910b", 8), ("a3", 16), ("950", 8)])
def test_the_smoke_command_tests_every_npu(k8s_locks, tmp_path, key, npus):
    extra = {"schedule_policy": "chip1-node8"} if key == "950" else {}
    plan = _plan(k8s_locks, key, **extra)
    command = _smoke_script(plan)
    code, calls, stdout = _run_smoke(command, tmp_path, {})
    assert code == 0
    assert [c[:3] for c in calls] == [["smoke", "--device", f"npu:{i}"] for i in range(npus)]
    assert calls[0][3:5] == ["--nproc", str(npus)]  # collectives across every NPU of the node
    assert all("--nproc" not in c for c in calls[1:])
    assert [c[-3:] for c in calls] == [["--json", "--out", f"/tmp/envkit-smoke/npu{i}"] for i in range(npus)]
    assert stdout.count('"device"') == npus  # one JSON report per NPU in the log


def test_the_smoke_command_exits_with_the_worst_status_and_runs_every_npu(k8s_locks, tmp_path):
    command = _smoke_script(_plan(k8s_locks))
    for i, (fail, worst) in enumerate((({3: 1, 5: 2, 6: 1}, 2), ({0: 1}, 1), ({7: 2}, 2))):
        (tmp_path / str(i)).mkdir()
        code, calls, _ = _run_smoke(command, tmp_path / str(i), fail)
        assert code == worst and len(calls) == 8  # a failed NPU does not stop the others


def test_a_one_npu_node_runs_one_smoke_without_collectives(k8s_locks, tmp_path):
    plan = _plan(k8s_locks, "310p", npus_per_node=1)
    code, calls, _ = _run_smoke(_smoke_script(plan), tmp_path, {})
    assert code == 0 and calls == [["smoke", "--device", "npu:0", "--json", "--out", "/tmp/envkit-smoke/npu0"]]

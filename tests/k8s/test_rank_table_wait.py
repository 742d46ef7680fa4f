"""The training pods wait for the rank table (issue #38 item 4): the `rings-config-<job>` ConfigMap starts as
`{"status":"initializing"}` and the Ascend Operator fills it later (MC docs/en/scheduling/api/hccl.json_file_description.md,
`status: completed`); MindCluster's launch waits for `completed`. The rendered command is run here for real: taken
from the written YAML, `$(VAR)` expanded as the kubelet does, against a file rewritten the way the kubelet swaps a
ConfigMap volume's file, with fake launchers on PATH that record their argv and PID (an exec keeps the PID).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput
from envkit.export import k8s_check
from envkit.export.k8s import RANK_TABLE_TIMEOUT, WAIT_RANK_TABLE, K8sOptions, plan_k8s, pod_specs, texts
from envkit.lock.file import read_lock
from tests.k8s.conftest import IMAGE

POD_ENV = {"RANK": "1", "MASTER_ADDR": "envkit-910b-master-0", "MASTER_PORT": "2222", "VC_TASK_INDEX": "1"}


def _kubelet_expand(word: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of a container's command: `$(VAR)` from the environment, `$$` -> `$`, else as written."""

    def one(m: re.Match[str]) -> str:
        if m[0] == "$$":
            return "$"
        return env.get(m[1], m[0])

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, word)


def _training_command(k8s_locks, engine: str, launcher: str = "torchrun", timeout: int = RANK_TABLE_TIMEOUT) -> list[str]:
    """The training container's command as the written YAML has it, expanded as the kubelet would."""
    opts = K8sOptions(image=IMAGE, node_count=2, engine=engine, launcher=launcher, rank_table_timeout=timeout)
    plan = plan_k8s(read_lock(k8s_locks["910b"]), opts)
    rel = "training/ascendjob.yaml" if engine == "ascendjob" else "training/vcjob.yaml"
    doc = yaml.safe_load(texts(plan)[rel])
    commands = {tuple(c["command"]) for spec in pod_specs(doc) for c in spec["containers"]}
    assert len(commands) == 1  # Master and Worker (or every task) the same
    return [_kubelet_expand(w, POD_ENV) for w in commands.pop()]


def _fake_bin(tmp_path: Path, record: Path) -> Path:
    """A PATH folder: python3 (this interpreter), and torchrun / accelerate that record their argv and PID."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for name in ("torchrun", "accelerate"):
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$$" "$(basename "$0")" "$@" > {record}\n')
        fake.chmod(0o755)
    return bin_dir


def _swap(path: Path, text: str) -> None:
    """Replace the file at once, as the kubelet updates a ConfigMap volume (a new file, then a rename)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def _run(command: list[str], tmp_path: Path, rank_table: Path) -> tuple[subprocess.Popen[str], Path]:
    record = tmp_path / "argv.txt"
    bin_dir = _fake_bin(tmp_path, record)
    assert command[3] == "/user/serverid/devindex/config/hccl.json"
    argv = [*command[:3], str(rank_table), *command[4:]]  # the pod's mount path, here a temp file
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, record


@pytest.mark.parametrize(
    "engine, launcher, expected",
    [
        (
            "ascendjob",
            "torchrun",
            [
                "torchrun",
                "--nnodes=2",
                "--nproc-per-node=8",
                "--node-rank=1",
                "--master-addr=envkit-910b-master-0",
                "--master-port=2222",
                "train.py",
            ],
        ),
        (
            "volcano",
            "accelerate",
            [
                "accelerate",
                "launch",
                "--config_file",
                "/etc/envkit/launch/accelerate_config.yaml",
                "--machine_rank=1",
                "--main_process_ip=envkit-910b-worker-0.envkit-910b",
                "--main_process_port=29500",
                "train.py",
            ],
        ),
    ],
)
def test_the_command_waits_for_completed_then_execs_the_launcher(k8s_locks, tmp_path, engine, launcher, expected):
    command = _training_command(k8s_locks, engine, launcher)
    rank_table = tmp_path / "hccl.json"
    rank_table.write_text('{"status":"initializing"}')
    proc, record = _run(command, tmp_path, rank_table)
    started = time.monotonic()
    time.sleep(1.5)
    assert proc.poll() is None and not record.exists(), "the launcher started before the rank table was completed"
    _swap(rank_table, '{"status": "initializing", "server_list": []}')  # rewritten, still not done
    time.sleep(1.2)
    assert proc.poll() is None and not record.exists()
    done = {"status": "completed", "server_count": "2", "server_list": [], "version": "1.0"}
    threading.Timer(0.1, _swap, (rank_table, json.dumps(done))).start()
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - started >= 2.7
    pid, *argv = record.read_text().splitlines()
    assert int(pid) == proc.pid  # exec'd: the launcher is the pod's process, not a child of the wait
    assert argv == expected
    assert "waiting up to 600 s for the rank table" in err and "completed; starting" in err


def test_a_rank_table_that_is_completed_already_starts_at_once(k8s_locks, tmp_path):
    command = _training_command(k8s_locks, "ascendjob")
    rank_table = tmp_path / "hccl.json"
    rank_table.write_text('{"status":"completed","server_list":[]}')
    proc, record = _run(command, tmp_path, rank_table)
    started = time.monotonic()
    proc.communicate(timeout=30)
    assert proc.returncode == 0 and record.read_text().splitlines()[1] == "torchrun"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "content, status",
    [('{"status":"initializing"}', "initializing"), (None, "unreadable (FileNotFoundError)"), ("{not json", "unreadable")],
)
def test_it_times_out_with_a_clear_message_and_never_starts(k8s_locks, tmp_path, content, status):
    command = _training_command(k8s_locks, "ascendjob", timeout=1)
    assert command[4] == "1"
    rank_table = tmp_path / "hccl.json"
    if content is not None:
        rank_table.write_text(content)
    proc, record = _run(command, tmp_path, rank_table)
    started = time.monotonic()
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert 1.0 <= time.monotonic() - started < 10
    assert f"the rank table {rank_table} is not completed after 1 s (status: {status}" in err, err
    assert "Ascend Operator" in err and "Traceback" not in err
    assert not record.exists()


def test_the_script_has_no_dollar_for_the_kubelet_to_expand():
    """The kubelet expands `$(VAR)` and `$$` in a command; the wait script holds neither (nor any `$`)."""
    assert "$" not in WAIT_RANK_TABLE


def test_pytorchjob_has_no_rank_table_and_no_wait(k8s_locks):
    plan = plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=2, engine="pytorchjob"))
    for spec in pod_specs(plan.files["training/pytorchjob.yaml"]):
        assert spec["containers"][0]["command"][0] == "torchrun"


@pytest.mark.parametrize("timeout", [1, 86400])
def test_timeout_ends_of_the_range_are_rendered(k8s_locks, timeout):
    plan = plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=1, rank_table_timeout=timeout))
    (c,) = plan.files["training/ascendjob.yaml"]["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert c["command"][4] == str(timeout) and f"at most {timeout} s" in plan.readme


@pytest.mark.parametrize("timeout", [0, -1, 86401])
def test_timeout_outside_the_range_is_refused(k8s_locks, timeout, run_cli, tmp_path):
    with pytest.raises(BadInput, match="--rank-table-timeout"):
        plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=1, rank_table_timeout=timeout))
    args = ("--lock", str(k8s_locks["910b"]), "--image", IMAGE, "--node-count", "1", "-o", str(tmp_path / "o"))
    r = run_cli("k8s", "render", *args, f"--rank-table-timeout={timeout}")
    assert r.code == 2 and "1 to 86400 seconds" in r.err and not (tmp_path / "o").exists()


def test_the_rule_refuses_a_container_that_reads_the_rank_table_without_waiting(k8s_locks):
    plan = plan_k8s(read_lock(k8s_locks["910b"]), K8sOptions(image=IMAGE, node_count=2))
    job = copy.deepcopy(plan.files["training/ascendjob.yaml"])
    assert k8s_check.rule_problems(job, image=IMAGE, resource="huawei.com/Ascend910") == []
    c = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    c["command"] = c["command"][5:]  # torchrun at once
    found = k8s_check.rule_problems(job, image=IMAGE, resource="huawei.com/Ascend910")
    assert any("does not wait for it" in p for p in found), found

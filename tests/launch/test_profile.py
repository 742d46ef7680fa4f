"""`envkit launch profile`: one rendezvous across the hosts of an inventory, through Ansible, merged into one profile.

Here two inventory hosts are this machine (local connection), each running its ranks of one gloo rendezvous on
127.0.0.1: the playbook, the rank layout, the fetch and the merge are the same as across real hosts (the
nspawn fleet runs it over its bridge: tests/provision/test_fleet_collectives.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envkit.errors import BadInput, CannotRun
from envkit.jobs.launch import profile as P


def _ansible() -> None:
    if not (Path(sys.executable).parent / "ansible-playbook").exists():
        pytest.skip("ansible-playbook not installed beside this interpreter")
    pytest.importorskip("torch")


def test_fleet_vars_master_first_host_ranks_in_order(tmp_path):
    inv = tmp_path / "inv.ini"
    inv.write_text("[ascend]\nb ansible_host=10.0.0.2\na ansible_host=10.0.0.1\nc\n")
    v = P.fleet_vars(inv, nproc=2, device="cpu", max_size="64K", port=29600, local_dir=tmp_path, timeout_s=60)
    assert v["envkit_collectives_master"] == "10.0.0.2" and v["envkit_collectives_ranks"] == {"b": 0, "a": 1, "c": 2}
    assert v["envkit_collectives_nnodes"] == 3 and v["envkit_collectives_hosts"] == "b,a,c"
    inv.write_text("[ascend]\nonly\n")
    with pytest.raises(BadInput):
        P.fleet_vars(inv, nproc=1, device="cpu", max_size="64K", port=29600, local_dir=tmp_path, timeout_s=60)


def test_node_profile_refuses_a_bad_layout(tmp_path):
    for kw in ({"node_rank": 2, "nnodes": 2}, {"node_rank": 0, "nnodes": 1, "nproc": 1}):
        args = {"master": "127.0.0.1", "port": 29600, "nproc": 2, "device": "cpu", "max_size": 8192, "out": tmp_path, **kw}
        with pytest.raises(BadInput):
            P.node_profile(**args)
    with pytest.raises(BadInput):
        P.node_profile(
            master="h", port=1, nnodes=2, node_rank=0, nproc=1, device="cpu", max_size=8192, out=tmp_path, ifname="a;b"
        )


def test_merge_refuses_missing_or_mismatched_ranks():
    base = {"format": "envkit-collectives/1", "world": 4, "sizes": [8192], "ops": ["all_reduce"], "backend": "gloo", "nnodes": 2}

    def row(r: int) -> dict:
        return {
            "rank": r,
            "results": [{"op": "all_reduce", "size": 8192, "seconds": 1e-3 * (r + 1), "iters": 1, "correct": True}],
        }

    merged = P.merge({"h0": {**base, "ranks": [row(0), row(1)]}, "h1": {**base, "ranks": [row(2), row(3)]}})
    assert merged["ok"] and merged["results"][0]["time_us"] == pytest.approx(4000.0) and merged["results"][0]["correct"]
    with pytest.raises(CannotRun):
        P.merge({"h0": {**base, "ranks": [row(0), row(1)]}, "h1": {**base, "ranks": [row(1), row(3)]}})
    with pytest.raises(CannotRun):
        P.merge({"h0": {**base, "ranks": [row(0), row(1)]}, "h1": {**base, "sizes": [16384], "ranks": [row(2), row(3)]}})


def test_launch_profile_two_local_hosts_one_rendezvous(tmp_path, run_cli):
    """Two hosts x 2 ranks = world 4: each host's ranks are its own (0,1 / 2,3), every result of the merged profile is
    correct, the profile compares with itself, and a host whose envkit is missing is named."""
    _ansible()
    from envkit.executor.dist import free_port

    envkit = str(Path(sys.executable).parent / "envkit")
    inv = tmp_path / "inv.ini"
    inv.write_text(
        "[fleet]\nh0 ansible_host=127.0.0.1\nh1 ansible_host=127.0.0.1\n[fleet:vars]\nansible_connection=local\n"
        f"ansible_python_interpreter={sys.executable}\n"
    )
    out = tmp_path / "out"

    def launch(nproc: str, max_size: str, envkit: str, remote: Path, out: Path, *extra: str):
        """`envkit launch profile` on the two local hosts with the CPU device, on a free port."""
        return run_cli(
            "launch",
            "profile",
            "-i",
            str(inv),
            "--nproc",
            nproc,
            "--device",
            "cpu",
            "--max-size",
            max_size,
            "--port",
            str(free_port()),
            "--envkit",
            envkit,
            "-e",
            f"envkit_collectives_remote_dir={remote}",
            "-o",
            str(out),
            *extra,
        )

    r = launch("2", "16K", envkit, tmp_path / "remote", out, "--timeout", "120", "--json")
    assert r.code == 0, r.out + r.err
    doc = json.loads(r.out)
    prof = json.loads((out / "profile.json").read_text())
    assert doc["profile"] == prof and prof["ok"] and prof["world"] == 4 and prof["nnodes"] == 2
    assert {h: v["ranks"] for h, v in prof["hosts"].items()} == {"h0": [0, 1], "h1": [2, 3]}
    assert {(row["op"], row["size"]) for row in prof["results"]} == {(op, s) for op in prof["ops"] for s in (8192, 16384)}
    assert all(row["correct"] and len(row["per_rank_time_us"]) == 4 for row in prof["results"])
    for h in ("h0", "h1"):
        part = json.loads((out / "hosts" / h / "profile.json").read_text())
        assert part["master"].startswith("127.0.0.1:") and part["world"] == 4
    assert run_cli("compare", str(out / "profile.json"), str(out / "profile.json")).code == 0
    r = launch("1", "8K", str(tmp_path / "no-envkit"), tmp_path / "remote2", tmp_path / "o2")
    assert r.code == 2 and "h0: no profile" in r.err and "h1: no profile" in r.err, r.err


def test_collectives_playbook_syntax():
    ap = Path(sys.executable).parent / "ansible-playbook"
    if not ap.exists():
        pytest.skip("ansible-playbook not installed beside this interpreter")
    import subprocess

    from envkit.executor.ansible import playbook_env
    from envkit.resources import data_dir

    playbooks = data_dir("playbooks")
    p = subprocess.run(
        [str(ap), "--syntax-check", "-i", "localhost,", str(playbooks / "collectives.yml")],
        env=playbook_env(playbooks),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("bad", [[1, 2], "profile", {"ranks": "x"}, {"ranks": [], "ops": None}, {"ranks": [{"rank": "0"}]}])
def test_merge_refuses_what_is_not_a_profile_with_a_message(bad):
    """What a host returns is data from that host: a non-object or wrong shapes are CannotRun, never a traceback."""
    with pytest.raises(CannotRun):
        P.merge({"h0": bad})

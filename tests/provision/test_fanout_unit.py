"""Fan-out without hosts (issue 27 item 3): who heads each group, each host's mirror list, the vars, the option's
rules, and the group head's mirror (playbooks/roles/envkit_preflight/files/fanout_serve.py) serving only what it
verified."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.executor.ansible import dump_vars
from envkit.jobs.provision import (
    FANOUT_PORT,
    ProvisionRequest,
    check_fan_out,
    fan_out_vars,
    locate_bundle,
    parse_mirrors,
    plan_fan_out,
    plan_pull,
    render_vars,
    stage_artifacts,
)
from envkit.lock.file import read_lock
from tests.provision import test_pull_unit
from tests.provision.conftest import local_ansible_playbook, write_play
from tests.provision.fleet import sha256

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "playbooks" / "roles" / "envkit_preflight" / "files" / "fanout_serve.py"
PREFLIGHT_VARS = ROOT / "playbooks" / "roles" / "envkit_preflight" / "vars" / "main.yml"
lock, bundle = test_pull_unit.lock, test_pull_unit.bundle  # fixtures: the pull tests' small verified bundle, its lock

GROUPS = {"rack2": ["n4", "n5"], "rack1": ["n1", "n2", "n3"], "gpu": ["n3", "n6"], "ungrouped": ["solo"]}
ADDR = {"n1": "10.0.1.1", "n2": "10.0.1.2", "n4": "fd00::4", "gpu": "x", "n3": "10.0.1.3", "solo": "solo.example"}


def test_the_first_host_of_each_group_heads_it():
    fan = plan_fan_out(GROUPS, ADDR, parse_mirrors(["http://10.0.0.5:8080"]))
    got = {g.group: (g.head, g.url, g.members) for g in fan.groups}
    # groups by name; a host in two groups is in the first one (n3: gpu before rack1)
    assert list(got) == ["gpu", "rack1", "rack2", "ungrouped"]
    assert got["gpu"] == ("n3", f"http://10.0.1.3:{FANOUT_PORT}", ("n6",))
    assert got["rack1"] == ("n1", f"http://10.0.1.1:{FANOUT_PORT}", ("n2",))
    assert got["rack2"] == ("n4", f"http://[fd00::4]:{FANOUT_PORT}", ("n5",))
    assert got["ungrouped"] == ("solo", f"http://solo.example:{FANOUT_PORT}", ())
    assert fan.heads["n4"].bind == "fd00::4"
    assert fan.mirror_of("n2") == f"http://10.0.1.1:{FANOUT_PORT}" and fan.mirror_of("n1") is None
    # a group given its own mirror claims its hosts first (n3 is rack1's now: rack1's head fetches from rack1's mirror)
    fan = plan_fan_out(GROUPS, ADDR, parse_mirrors(["rack1=http://10.0.1.5:8080", "http://10.0.0.5:8080"]))
    got = {g.group: (g.head, g.members) for g in fan.groups}
    assert got["rack1"] == ("n1", ("n2", "n3")) and got["gpu"] == ("n6", ())
    assert list(got) == ["rack1", "gpu", "rack2", "ungrouped"]


def test_a_head_is_a_plain_name_with_an_address_a_url_can_hold():
    mirrors = parse_mirrors(["http://10.0.0.5:8080"])
    with pytest.raises(BadInput, match="not a plain host name"):
        plan_fan_out({"g": ["web[1:2]*"]}, {}, mirrors)
    for bad in ("10.0.0.1'; rm -rf /", "{{ lookup('pipe', 'id') }}", "a b", "user@h"):
        with pytest.raises(BadInput, match="which no URL can hold"):
            plan_fan_out({"g": ["h1", "h2"]}, {"h1": bad}, mirrors)
    # a member's name is data only (a key in the vars, tagged !unsafe there): not held to that rule
    assert plan_fan_out({"g": ["h1", "{{x}}"]}, {}, mirrors).groups[0].members == ("{{x}}",)


def test_fan_out_needs_bundle_urls_and_no_serial(tmp_path):
    base = {"inventory": "h1,", "lock": tmp_path / "l"}
    with pytest.raises(BadInput, match="--fan-out needs --bundle-url"):
        check_fan_out(ProvisionRequest(**base, fan_out=True))
    with pytest.raises(BadInput, match="--fan-out with --serial"):
        check_fan_out(ProvisionRequest(**base, fan_out=True, bundle_urls=("http://m",), serial=2))
    check_fan_out(ProvisionRequest(**base, fan_out=True, bundle_urls=("http://m",)))
    check_fan_out(ProvisionRequest(**base, serial=2))


def test_fan_out_vars_list_every_file_of_the_bundle_with_its_role(bundle, lock):
    paths = locate_bundle(bundle, None, None)
    mirrors = parse_mirrors(["http://10.0.0.5:8080"])
    staged = stage_artifacts(read_lock(lock), paths.vendor)
    plan = plan_pull(bundle, paths, mirrors, staged)
    fan = plan_fan_out({"ascend": ["node1", "node2", "node3"]}, {"node1": "10.231.2.11"}, mirrors)
    v = render_vars(read_lock(lock), lock_path=lock, bundle=paths, staged=staged, pull=plan, fan_out=fan)
    url = f"http://10.231.2.11:{FANOUT_PORT}"
    assert v["envkit_preflight_fanout_heads"] == {
        "node1": {"group": "ascend", "bind": "10.231.2.11", "port": FANOUT_PORT, "url": url}
    }
    assert v["envkit_preflight_fanout_members"] == {"node2": url, "node3": url}
    files = {f["path"]: f for f in v["envkit_preflight_fanout_files"]}
    manifest = {f["path"]: f["sha256"] for f in json.loads((bundle / "manifest.json").read_text())["files"]}
    assert {p: f["sha256"] for p, f in files.items()} == {p: h for p, h in manifest.items() if p != "vendor/SHA256SUMS"}
    assert files["wheels/requirements.txt"]["name"] == "requirements.txt" and files["wheels/requirements.txt"]["role"] == "python"
    roles = {f["name"]: f["role"] for f in files.values()}
    assert roles[v["envkit_hdk_driver"]["src"]] == "hdk" and roles[v["envkit_cann_packages"][0]["src"]] == "cann"
    # no fan-out: none of them
    assert fan_out_vars(None, plan, staged, "") == {}
    assert not {k for k in render_vars(read_lock(lock), lock_path=lock, bundle=paths, pull=plan) if "fanout" in k}


def test_each_host_tries_its_head_then_its_mirrors(tmp_path):
    """envkit_preflight's mirror list, evaluated by Ansible: a member tries its head first, a head its mirrors."""
    from envkit.executor.ansible import playbook_env
    from tests.provision.conftest import run_local_playbook, write_play

    ap = local_ansible_playbook()
    play = tmp_path / "play.yml"
    write_play(
        play,
        [
            {
                "ansible.builtin.copy": {
                    "content": "{{ {'mirrors': envkit_preflight_mirrors, 'head': envkit_preflight_fanout_head} | to_json }}",
                    "dest": str(tmp_path / "out.json"),
                    "mode": "0600",
                }
            }
        ],
        vars_files=[str(PREFLIGHT_VARS), str(PREFLIGHT_VARS.parents[1] / "defaults" / "main.yml")],
    )
    head = {"group": "g", "bind": "10.0.0.1", "port": 8931, "url": "http://10.0.0.1:8931"}
    for members, heads, want in (
        ({"localhost": "http://10.0.0.1:8931"}, {}, ["http://10.0.0.1:8931", "http://m:1"]),
        ({}, {"localhost": head}, ["http://m:1"]),
        ({"other": "http://10.0.0.1:8931"}, {}, ["http://m:1"]),
    ):
        (tmp_path / "v.yml").write_text(
            dump_vars(
                {
                    "envkit_preflight_bundle_urls": ["http://m:1"],
                    "envkit_preflight_fanout_members": members,
                    "envkit_preflight_fanout_heads": heads,
                },
                "test",
            )
        )
        p = run_local_playbook(ap, play, "-e", f"@{tmp_path / 'v.yml'}", env=playbook_env(ROOT / "playbooks"), timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        got = json.loads((tmp_path / "out.json").read_text())
        assert got["mirrors"] == want
        assert got["head"] == heads.get("localhost", {})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_heads_mirror_serves_only_the_files_it_verified(tmp_path):
    vendor, wheels = tmp_path / "vendor", tmp_path / "wheels"
    vendor.mkdir()
    wheels.mkdir()
    good = vendor / "driver.run"
    good.write_bytes(b"A" * 3_000_000)
    bad = vendor / "toolkit.run"
    bad.write_bytes(b"tampered")
    (wheels / "requirements.txt").write_text("six==1\n")
    (tmp_path / "secret").write_text("not in the list")
    files = [
        {"path": "vendor/driver.run", "sha256": sha256(good), "role": "hdk", "name": "driver.run"},
        {
            "path": "vendor/toolkit.run",
            "sha256": hashlib.sha256(b"the bundle's").hexdigest(),
            "role": "cann",
            "name": "toolkit.run",
        },
        {"path": "wheels/r.txt", "sha256": sha256(wheels / "requirements.txt"), "role": "python", "name": "requirements.txt"},
        {"path": "../secret", "sha256": sha256(tmp_path / "secret"), "role": "hdk", "name": "../secret"},
        {"path": "vendor/missing.run", "sha256": "0" * 64, "role": "hdk", "name": "missing.run"},
    ]
    (tmp_path / "files.json").write_text(json.dumps(files))
    port, log = _free_port(), tmp_path / "served.log"
    argv = [sys.executable, str(SERVER), "--bind", "127.0.0.1", "--port", str(port), "--files", str(tmp_path / "files.json")]
    argv += ["--log", str(log), "--lifetime", "30", f"--dir=hdk={vendor}", f"--dir=cann={vendor}", f"--dir=python={wheels}"]
    proc = subprocess.Popen(argv)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            if log.is_file() and "serving" in log.read_text():
                break
            time.sleep(0.05)
        # a verified file; the list's other path
        assert urllib.request.urlopen(f"{base}/vendor/driver.run", timeout=10).read() == good.read_bytes()
        assert urllib.request.urlopen(f"{base}/wheels/r.txt", timeout=10).read() == b"six==1\n"
        # a file replaced after the check is not served in its place (the verified copy's descriptor is read)
        good.unlink()
        good.write_bytes(b"B" * 3_000_000)
        assert urllib.request.urlopen(f"{base}/vendor/driver.run", timeout=10).read() == b"A" * 3_000_000
        for path in ("vendor/toolkit.run", "vendor/missing.run", "../secret", "secret", "vendor/", "", "vendor/%2e%2e/secret"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"{base}/{path}", timeout=10)
            assert e.value.code == 404, path
        req = urllib.request.Request(f"{base}/vendor/driver.run", method="PUT", data=b"x")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 501
        text = log.read_text()
        assert "serving 2 verified file(s)" in text
        assert "not served vendor/toolkit.run: its sha256 is not the bundle's" in text
        assert "refused '../secret'" in text
        assert '127.0.0.1 "GET /vendor/driver.run HTTP/1.1" 200 3000000' in text
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_each_host_tries_its_own_mirrors_in_its_own_order(tmp_path):
    """fetch.yml on two hosts whose mirror lists differ ([rack1's, global] and [rack2's, global], the shape a fan-out
    head and its members have too): each tries its own first. (A bare URL as the include's loop item let Ansible
    run the includes of equal items once for all hosts, in the order they first appeared: rack2's host tried the
    global mirror before its own.)"""
    from envkit.executor.ansible import parse_lines, playbook_env

    ap = local_ansible_playbook()
    p1, p2, p3 = (_free_port() for _ in range(3))  # nothing listens: each try is refused at once
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        f"[rack1]\na ansible_connection=local\n[rack2]\nb ansible_connection=local\n"
        f"[all:vars]\nansible_python_interpreter={sys.executable}\n"
    )
    play = tmp_path / "play.yml"
    write_play(
        play,
        [
            {
                "ansible.builtin.include_role": {"name": "envkit_preflight", "tasks_from": "fetch.yml"},
                "vars": {
                    "envkit_preflight_fetch_files": [{"path": "vendor/x.run", "sha256": "0" * 64}],
                    "envkit_preflight_fetch_dest": str(tmp_path / "{{ inventory_hostname }}"),
                    "envkit_preflight_fetch_attempts": 1,
                },
            }
        ],
    )
    (tmp_path / "v.yml").write_text(
        dump_vars(
            {
                "envkit_preflight_bundle_group_urls": [
                    {"group": "rack1", "url": f"http://127.0.0.1:{p1}"},
                    {"group": "rack2", "url": f"http://127.0.0.1:{p2}"},
                ],
                "envkit_preflight_bundle_urls": [f"http://127.0.0.1:{p3}"],
            },
            "test",
        )
    )
    p = subprocess.run(
        [str(ap), "-i", str(inv), "-e", f"@{tmp_path / 'v.yml'}", str(play)],
        env=playbook_env(ROOT / "playbooks"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    failed = {
        ev["host"]: str(ev.get("msg"))
        for ev in parse_lines(p.stdout.splitlines())
        if ev.get("event") == "result" and ev.get("status") == "failed"
    }
    assert set(failed) == {"a", "b"}, p.stdout[-3000:] + p.stderr[-2000:]
    for host, own in (("a", p1), ("b", p2)):
        tried = failed[host].split(": ", 1)[1]  # "Could not fetch ... from M1, M2: M1: why; M2: why"
        first, second = f"http://127.0.0.1:{own}: ", f"http://127.0.0.1:{p3}: "
        assert first in tried and second in tried and tried.index(first) < tried.index(second), (host, failed[host])

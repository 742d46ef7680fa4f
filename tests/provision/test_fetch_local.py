"""envkit_preflight's fetch.yml (pull mode) run by Ansible on this machine (local connection), against real HTTP
mirrors on 127.0.0.1: the same tasks the fleet runs (tests/provision/test_fleet_pull.py), without nspawn. A good
mirror; a byte flipped on the only mirror (refused, nothing left in place); a mirror that drips, stopped at the
deadline, and a mirror without the file (404), each followed by a good one."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from envkit.airgap.serve import ServeRequest, open_mirror
from envkit.executor.ansible import dump_vars, playbook_env
from tests.airgap.mirror import seal
from tests.provision.conftest import run_local_playbook, write_play
from tests.provision.mirrors import Drip

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
AP = Path(sys.executable).parent / "ansible-playbook"
pytestmark = pytest.mark.skipif(not AP.exists(), reason="ansible-playbook not installed beside this interpreter")


@pytest.fixture
def bundle(tmp_path) -> Path:
    root = tmp_path / "bundle"
    (root / "vendor").mkdir(parents=True)
    (root / "wheels").mkdir()
    (root / "vendor" / "driver.run").write_bytes(b"#!/bin/sh\nexit 0\n" + bytes(range(256)) * 400)
    (root / "wheels" / "a-1.0+local-py3-none-any.whl").write_bytes(b"wheel a")
    (root / "wheels" / "req.txt").write_text("a==1.0\n")
    return seal(root)


def _serve(root: Path):
    server = open_mirror(ServeRequest(bundle=root, port=0), log=None)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def mirror(bundle):
    server = _serve(bundle)
    yield server
    server.shutdown()
    server.server_close()


def _files(bundle: Path) -> list[dict]:
    manifest = json.loads((bundle / "manifest.json").read_text())
    names = {"wheels/req.txt": "requirements.txt"}
    return [
        {"path": f["path"], "sha256": f["sha256"], **({"name": names[f["path"]]} if f["path"] in names else {})}
        for f in manifest["files"]
    ]


def fetch(tmp_path: Path, files: list[dict], urls: list[str], **settings) -> tuple[int, Path, str]:
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    play = tmp_path / "play.yml"
    write_play(
        play,
        [
            {
                "ansible.builtin.include_role": {"name": "envkit_preflight", "tasks_from": "fetch.yml"},
                "vars": {"envkit_preflight_fetch_dest": str(dest)},
            }
        ],
    )
    variables = {
        "envkit_preflight_bundle_urls": urls,
        "envkit_preflight_fetch_files": files,
        "envkit_preflight_fetch_attempts": 1,
        **settings,
    }
    (tmp_path / "vars.yml").write_text(dump_vars(variables, "test"))
    env = {**playbook_env(PLAYBOOKS), "ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "at")}
    env["ANSIBLE_ASYNC_DIR"] = str(tmp_path / "async")
    p = run_local_playbook(AP, play, "-e", f"@{tmp_path / 'vars.yml'}", env=env, timeout=300)
    return p.returncode, dest, p.stdout + p.stderr


def test_every_file_from_a_good_mirror(tmp_path, bundle, mirror):
    rc, dest, out = fetch(tmp_path, _files(bundle), [mirror.url])
    assert rc == 0, out
    assert (dest / "driver.run").read_bytes() == (bundle / "vendor" / "driver.run").read_bytes()
    assert (dest / "a-1.0+local-py3-none-any.whl").read_bytes() == b"wheel a"  # a `+` in the path: encoded, served
    assert (dest / "requirements.txt").read_text() == "a==1.0\n"
    sent = mirror.stats.sent["127.0.0.1"]
    # again: every file is in place with its sha256, nothing is fetched
    rc, dest, out = fetch(tmp_path, _files(bundle), [mirror.url])
    assert rc == 0, out
    assert mirror.stats.sent["127.0.0.1"] == sent


def test_a_flipped_byte_is_refused_and_nothing_is_left_in_place(tmp_path, bundle, mirror):
    files = _files(bundle)
    run = bundle / "vendor" / "driver.run"
    data = bytearray(run.read_bytes())
    data[-1] ^= 0x80
    run.write_bytes(bytes(data))
    rc, dest, out = fetch(tmp_path, files, [mirror.url])
    assert rc != 0
    assert "Could not fetch vendor/driver.run with the bundle's sha256" in out and "checksum" in out, out
    assert not (dest / "driver.run").exists()
    assert (dest / "requirements.txt").is_file()  # the others arrived


def test_a_dripping_mirror_is_stopped_at_the_deadline_then_the_next_serves(tmp_path, bundle, mirror):
    drip = Drip(bind="127.0.0.1")
    try:
        t0 = time.monotonic()
        # the deadline bounds each mirror's try, the good one's too: 15 s holds a small file's download on a loaded
        # 2-core CI machine (3 s did not: Ansible's async start-up alone took longer there)
        rc, dest, out = fetch(tmp_path, _files(bundle)[:1], [drip.url, mirror.url], envkit_preflight_fetch_deadline=15)
        took = time.monotonic() - t0
    finally:
        drip.stop()
    assert rc == 0, out
    assert drip.clients == ["127.0.0.1"]
    assert (dest / "driver.run").read_bytes() == (bundle / "vendor" / "driver.run").read_bytes()
    assert took < 150  # the drip never ends: only the deadline let the run finish


def test_a_mirror_without_the_file_then_the_next(tmp_path, bundle, mirror):
    other = tmp_path / "other"
    (other / "vendor").mkdir(parents=True)
    (other / "vendor" / "x.run").write_text("x")
    empty = _serve(seal(other))
    try:
        rc, dest, out = fetch(tmp_path, _files(bundle), [empty.url, mirror.url])
    finally:
        empty.shutdown()
        empty.server_close()
    assert rc == 0, out
    assert (dest / "driver.run").is_file() and (dest / "requirements.txt").is_file()

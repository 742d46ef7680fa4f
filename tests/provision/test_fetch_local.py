"""envkit_preflight's fetch.yml (pull mode: the envkit_fetch module) run by Ansible on this machine (local connection),
against real HTTP mirrors on 127.0.0.1: the same task the fleet runs (tests/provision/test_fleet_pull.py), without
nspawn. A good mirror; a byte flipped on the only mirror (refused, nothing left in place); a mirror that drips,
refused by the file's size or stopped at the deadline (then no Ansible temp folder is left), and a mirror without the
file (404), each followed by a good one; a download cut short, resumed by the next try; check mode. The module's
functions, each limit and the hostile answers: test_fetch_module.py."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from envkit.executor.ansible import dump_vars, playbook_env
from envkit.jobs.bundle.mirror import ServeRequest, open_mirror
from tests.airgap.mirror import seal
from tests.provision.conftest import run_local_playbook, write_play
from tests.provision.mirrors import Drip, RangeMirror

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


def _files(bundle: Path, sizes: bool = True) -> list[dict]:
    """The bundle's files as the roles pass them to fetch.yml (`envkit provision` renders each size from the manifest)."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    names = {"wheels/req.txt": "requirements.txt"}
    return [
        {
            "path": f["path"],
            "sha256": f["sha256"],
            **({"name": names[f["path"]]} if f["path"] in names else {}),
            **({"size": f["size"]} if sizes else {}),
        }
        for f in manifest["files"]
    ]


def fetch(
    tmp_path: Path, files: list[dict], urls: list[str], *args: str, tmp_dir: Path | None = None, **settings
) -> tuple[int, Path, str]:
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
    env["ANSIBLE_REMOTE_TEMP"] = str(tmp_path / "remote")
    # -v: the module's result (each file's mirror, bytes and failed tries) in the output, a success's too
    p = run_local_playbook(AP, play, "-v", "-e", f"@{tmp_path / 'vars.yml'}", *args, env=env, timeout=300, tmp_dir=tmp_dir)
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


@pytest.mark.parametrize("sizes", [True, False], ids=["size-known", "size-unknown"])
def test_a_dripping_mirror_is_refused_or_stopped_at_the_deadline_then_the_next_serves(tmp_path, bundle, mirror, sizes):
    """The drip announces 1 GiB of `x`: refused at once where the file's size is known; otherwise stopped at the
    deadline, its bytes kept as a part that the next mirror's range completes, whose hash is wrong: the file is
    fetched whole from that mirror at once. No Ansible temp folder is left."""
    drip = Drip(bind="127.0.0.1")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    try:
        t0 = time.monotonic()
        rc, dest, out = fetch(
            tmp_path, _files(bundle, sizes)[:1], [drip.url, mirror.url], tmp_dir=tmp, envkit_preflight_fetch_deadline=4
        )
        took = time.monotonic() - t0
    finally:
        drip.stop()
    assert rc == 0, out
    assert drip.clients == ["127.0.0.1"]
    assert (dest / "driver.run").read_bytes() == (bundle / "vendor" / "driver.run").read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["driver.run"]
    if sizes:
        assert "announces 1073741824 bytes; the file has 102417: refused" in out, out
    else:
        assert "stopped at the deadline (4 s for one download)" in out and "checksum mismatch" in out, out
        assert took >= 4
    assert took < 150
    # the module ended by itself: neither its payload folder nor Ansible's remote temp folder is left
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("ansible")]
    assert not list((tmp_path / "remote").glob("ansible-tmp-*"))


def test_a_download_stopped_at_the_deadline_is_resumed_by_the_next_mirror(tmp_path, bundle, mirror):
    """A mirror that sends the right bytes slowly (2,000 a second): stopped at the deadline, no temp folder left;
    the next mirror is asked for the rest alone (a range) and the file is whole."""
    files = _files(bundle)[:1]
    size = files[0]["size"]
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    with RangeMirror(bundle, drip=2000) as slow, RangeMirror(bundle) as good:
        rc, dest, out = fetch(tmp_path, files, [slow.url, good.url], tmp_dir=tmp, envkit_preflight_fetch_deadline=3)
    assert rc == 0, out
    assert "stopped at the deadline (3 s for one download)" in out, out
    ((asked, status, sent),) = [(e["range"], e["status"], e["sent"]) for e in good.log]
    start = int(asked.removeprefix("bytes=").removesuffix("-"))
    # the part held what arrived (the slow mirror's last bytes may have been in flight when it was stopped)
    assert 0 < start <= slow.sent() < size and (status, sent) == (206, size - start)
    assert (dest / "driver.run").read_bytes() == (bundle / "vendor" / "driver.run").read_bytes()
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("ansible")]
    assert not list((tmp_path / "remote").glob("ansible-tmp-*"))


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_cut_download_is_resumed_by_the_next_try(tmp_path, bundle, attempts):
    """The mirror closes the first answer after 50,000 bytes. One try: the run fails, the part is kept; a second try
    (in the same run, or a rerun) asks for the rest with `Range: bytes=50000-`: about one file sent in all."""
    files = _files(bundle)[:1]
    size = files[0]["size"]
    with RangeMirror(bundle, cut_after=50_000) as m:
        rc, dest, out = fetch(tmp_path, files, [m.url], envkit_preflight_fetch_attempts=attempts)
        if attempts == 1:
            assert rc != 0 and "the connection ended after 50000 of 102417 bytes" in out, out
            assert (dest / ".driver.run.envkit-part").stat().st_size == 50_000
            rc, dest, out = fetch(tmp_path, files, [m.url])
    assert rc == 0, out
    assert [(e["range"], e["status"]) for e in m.log] == [(None, 200), ("bytes=50000-", 206)]
    assert m.sent() == size
    assert (dest / "driver.run").read_bytes() == (bundle / "vendor" / "driver.run").read_bytes()


@pytest.fixture
def empty(tmp_path):
    """A mirror of another bundle, without the files of `bundle` (404)."""
    other = tmp_path / "other"
    (other / "vendor").mkdir(parents=True)
    (other / "vendor" / "x.run").write_text("x")
    server = _serve(seal(other))
    yield server
    server.shutdown()
    server.server_close()


def test_check_mode_fetches_nothing_and_fails_as_a_run_would(tmp_path, bundle, mirror, empty):
    rc, dest, out = fetch(tmp_path, _files(bundle), [empty.url, mirror.url], "--check")
    assert rc == 0, out
    assert list(dest.iterdir()) == [] and mirror.stats.sent.get("127.0.0.1", 0) == 0
    rc, dest, out = fetch(tmp_path, _files(bundle)[:1], [empty.url], "--check")
    assert rc != 0 and "Could not fetch vendor/driver.run with the bundle's sha256 from" in out, out
    assert list(dest.iterdir()) == []


def test_a_mirror_without_the_file_then_the_next(tmp_path, bundle, mirror, empty):
    rc, dest, out = fetch(tmp_path, _files(bundle), [empty.url, mirror.url])
    assert rc == 0, out
    assert (dest / "driver.run").is_file() and (dest / "requirements.txt").is_file()

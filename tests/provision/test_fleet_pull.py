"""Pull mode on the nspawn fleet (issue 27): the nodes fetch the bundle from a mirror on their own bridge
(`envkit bundle serve` of a copy of the bundle, on this machine's bridge address), not from the controller over SSH.

The session's fleet is shared (tests/provision/conftest.py); the tests run in file order. The first removes what an
earlier module installed (the fixture installers' files, the venv, the staged files), so that every node needs the
whole bundle: converge from the mirror (no artifact from the controller: no copy task runs, no wheels archive is
made; the mirror sent each node exactly the files it installs), then a no-op. The next two make each node want the
driver alone again (an older version.info, the staged file removed): a byte flipped on the mirror is refused on
every node before use -> a mirror that drips is stopped at the deadline and the next mirror serves. The last two
are fan-out (`--fan-out`): node1 heads the fleet's one group; the mirror sends the bundle once (to node1), node2 and
node3 fetch from node1, and a byte flipped in node1's copy after its mirror checked it is refused by both, which
fetch from the mirror instead.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.provision.fleet import FLEET_MARKS, Fleet, provision, resolve_lock
from tests.provision.mirrors import Drip, Serve, sealed_bundle

pytestmark = FLEET_MARKS

FORGET = (
    "rm -rf /usr/local/Ascend /etc/ascend_install.info /usr/local/bin/npu-smi /opt/envkit/venv /var/cache/envkit "
    "/etc/envkit /etc/profile.d/envkit.sh /var/run/ascend-firmware-reboot-required"
)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prov-pull")


@pytest.fixture(scope="module")
def lock(work) -> Path:
    return resolve_lock(work / "pull.lock", "--cann", "8.3.RC1")


@pytest.fixture(scope="module")
def bundle(work, lock) -> Path:
    return sealed_bundle(work / "bundle", lock)


@pytest.fixture(scope="module")
def served(work, bundle) -> Path:
    """The mirror's copy of the bundle (another machine's disk in a real air gap)."""
    return Path(shutil.copytree(bundle, work / "mirror-bundle"))


@pytest.fixture(scope="module")
def mirror(work, served):
    s = Serve(served, work / "mirror.log")
    yield s
    s.stop()


def _forget(fleet: Fleet) -> None:
    for i in range(1, fleet.n + 1):
        fleet.ssh(i, FORGET)


def _driver(bundle: Path) -> Path:
    return next(p for p in (bundle / "vendor").iterdir() if "driver" in p.name.lower())


def _want_the_driver(fleet: Fleet, name: str) -> None:
    """Each node's driver an older one (its plan: the driver alone) and its staged copy gone (it must be fetched)."""
    for i in range(1, fleet.n + 1):
        fleet.ssh(
            i,
            "sed -i 's/^package_version=.*/package_version=25.2.0/' /usr/local/Ascend/driver/version.info && "
            f"rm -f /var/cache/envkit/vendor/{name}",
        )


def _hosts(data: dict) -> dict[str, dict]:
    return {h["host"]: h for h in data.get("hosts", [])}


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()]


def test_pull_converges_from_the_mirror_with_no_artifact_from_the_controller(fleet, lock, bundle, mirror, work):
    _forget(fleet)
    before = mirror.sent()
    out = work / "out-pull"
    rc, data, err = provision(fleet, lock, bundle, out, "--bundle-url", mirror.url)
    assert rc == 0, err + json.dumps(data.get("hosts", data), indent=1)[:4000]
    hosts = _hosts(data)
    assert sorted(hosts) == ["node1", "node2", "node3"]
    for h in hosts.values():
        comps = [line.split()[0] for line in h["plan"]]
        assert comps == ["driver", "firmware", "cann-toolkit", "cann-kernels", "cann-nnal", "python"], h["plan"]
    for i in range(1, fleet.n + 1):
        assert fleet.ssh(i, "/opt/envkit/venv/bin/envkit --version").stdout.startswith("envkit ")
    # the controller sent no artifact: no wheels archive was packed, no push-mode copy ran on any host
    v = yaml.safe_load((out / "vars.yml").read_text().replace("!unsafe ", ""))
    assert v["envkit_python_wheels_archive"] == "" and v["envkit_preflight_bundle_urls"] == [mirror.url]
    assert not list(out.glob("wheels-*.tar"))
    statuses: dict[str, set[str]] = {}
    for ev in _events(out):
        if ev.get("event") == "result" and "(push mode)" in ev.get("task", ""):
            statuses.setdefault(ev["task"], set()).add(ev.get("status"))
    assert statuses and all(s == {"skipped"} for s in statuses.values()), statuses
    # the mirror sent each node exactly the files it installs: every vendor file and every wheel, once
    manifest = json.loads((bundle / "manifest.json").read_text())
    want = sum(f["size"] for f in manifest["files"] if f["path"] != "vendor/SHA256SUMS")
    sent = mirror.sent()
    for i in range(1, fleet.n + 1):
        ip = fleet.ip(i)
        assert sent.get(ip, 0) - before.get(ip, 0) == want, (ip, sent, want)
    # a converged fleet fetches nothing
    rc, data, err = provision(fleet, lock, bundle, work / "out-pull-2", "--bundle-url", mirror.url)
    assert rc == 0, err
    assert {h: v["changed"] for h, v in _hosts(data).items()} == {"node1": 0, "node2": 0, "node3": 0}
    assert mirror.sent() == sent


def test_a_byte_flipped_on_the_mirror_is_refused_on_every_node_before_use(fleet, lock, bundle, served, mirror, work):
    driver = _driver(served)
    _want_the_driver(fleet, driver.name)
    original = driver.read_bytes()
    data_ = bytearray(original)
    data_[len(data_) // 2] ^= 0x01
    driver.write_bytes(bytes(data_))  # the server was started on the verified bundle: it serves the file as it is now
    try:
        rc, data, err = provision(
            fleet, lock, bundle, work / "out-tampered", "--bundle-url", mirror.url, "-e", "envkit_preflight_fetch_attempts=1"
        )
    finally:
        driver.write_bytes(original)
    # the controller's own copy is intact: every node refuses the mirror's
    assert rc == 1, err
    hosts = _hosts(data)
    assert {h["status"] for h in hosts.values()} == {"failed"}, hosts
    for h in hosts.values():
        assert h["plan"] == ["driver 25.2.0 -> 25.3.rc1"], h["plan"]
        assert any("checksum" in e and driver.name in e for e in h["errors"]), h["errors"]
    for i in range(1, fleet.n + 1):
        # nothing of it was kept, nothing installed
        assert fleet.ssh(i, f"ls /var/cache/envkit/vendor/{driver.name}", check=False).returncode != 0
        assert "package_version=25.2.0" in fleet.ssh(i, "cat /usr/local/Ascend/driver/version.info").stdout
    served = [r for r in mirror.requests() if r[1].endswith(driver.name)]
    assert {r[0] for r in served} >= {fleet.ip(i) for i in range(1, fleet.n + 1)}


def test_a_dripping_group_mirror_is_stopped_at_the_deadline_then_the_next_serves(fleet, lock, bundle, mirror, work):
    driver = _driver(bundle)
    _want_the_driver(fleet, driver.name)
    before = len(mirror.requests())
    drip = Drip(root=bundle)  # the bundle's own bytes at its own sizes, one a second: only the deadline stops it
    try:
        start = time.monotonic()
        rc, data, err = provision(
            fleet,
            lock,
            bundle,
            work / "out-drip",
            "--bundle-url",
            f"ascend={drip.url}",  # the fleet's inventory group: its mirror is tried first
            "--bundle-url",
            mirror.url,
            "-e",  # each mirror's try is bounded, the good one's too: room for a loaded 2-core CI machine
            "envkit_preflight_fetch_deadline=20",
            "-e",
            "envkit_preflight_fetch_attempts=1",
        )
        took = time.monotonic() - start
    finally:
        drip.stop()
    assert rc == 0, err + json.dumps(data.get("hosts", data), indent=1)[:4000]
    assert [h["plan"] for h in data["hosts"]] == [["driver 25.2.0 -> 25.3.rc1"]] * fleet.n
    # each node asked the dripping mirror once (one try), gave up at the deadline, then the next mirror served the
    # rest of what it had begun (a range: 206)
    assert sorted(drip.clients) == sorted(fleet.ip(i) for i in range(1, fleet.n + 1))
    resumed = [r for r in mirror.requests()[before:] if r[1].endswith(driver.name)]
    assert sorted((r[0], r[2]) for r in resumed) == sorted((fleet.ip(i), 206) for i in range(1, fleet.n + 1)), resumed
    for i in range(1, fleet.n + 1):
        assert "package_version=25.3.rc1" in fleet.ssh(i, "cat /usr/local/Ascend/driver/version.info").stdout
    assert took < 300


# --- fan-out (--fan-out): node1 heads the fleet's one group (ascend) and serves node2 and node3 ---------------------
HEAD_LOG = "var/cache/envkit/fanout/served.log"  # the head's mirror's log, in its overlay's upper dir


def _head_served(fleet: Fleet) -> list[tuple[str, str, int, int]]:
    """(client, path, status, bytes) of each request node1's mirror answered."""
    import re

    log = fleet.upper(1) / HEAD_LOG
    lines = log.read_text().splitlines() if log.is_file() else []
    pat = re.compile(r'^(\S+) "(\S+) (\S+) [^"]*" (\d+) (\d+)$')
    return [(m[1], m[3], int(m[4]), int(m[5])) for m in map(pat.match, lines) if m]


def _stale_driver(fleet: Fleet, name: str) -> None:
    """As `_want_the_driver`, on a fleet converged by the tests above; run alone (a fresh fleet), the nodes want
    everything anyway."""
    for i in range(1, fleet.n + 1):
        fleet.ssh(
            i,
            "f=/usr/local/Ascend/driver/version.info; if [ -f $f ]; then sed -i 's/^package_version=.*/package_version=25.2.0/' $f; fi; "
            f"rm -f /var/cache/envkit/vendor/{name}",
        )


def _mirror_stopped(fleet: Fleet) -> None:
    state = fleet.ssh(1, "systemctl is-active envkit-fanout.service", check=False).stdout.strip()
    assert state in ("inactive", "failed", "unknown", ""), state
    assert fleet.ssh(
        1, f"python3 -c 'import socket; socket.create_connection((\"{fleet.ip(1)}\", 8931), 2)'", check=False
    ).returncode


def test_fan_out_the_mirror_sends_one_copy_per_group_and_the_head_serves_its_group(fleet, lock, bundle, mirror, work):
    driver = _driver(bundle)
    _stale_driver(fleet, driver.name)
    for i in range(1, fleet.n + 1):
        fleet.ssh(i, "rm -rf /var/cache/envkit")  # nothing staged: the head must fetch the whole bundle
    before = mirror.sent()
    out = work / "out-fanout"
    rc, data, err = provision(fleet, lock, bundle, out, "--bundle-url", mirror.url, "--fan-out", timeout=1500)
    assert rc == 0, err + json.dumps(data.get("hosts", data), indent=1)[:4000]
    head_url = f"http://{fleet.ip(1)}:8931"
    assert data["fan_out"]["groups"] == [{"group": "ascend", "head": "node1", "url": head_url, "members": ["node2", "node3"]}]
    for i in range(1, fleet.n + 1):
        assert "package_version=25.3.rc1" in fleet.ssh(i, "cat /usr/local/Ascend/driver/version.info").stdout
    # the controller sent no artifact
    assert not list(out.glob("wheels-*.tar"))
    assert all(
        ev.get("status") == "skipped"
        for ev in _events(out)
        if ev.get("event") == "result" and "(push mode)" in ev.get("task", "")
    )
    # the mirror sent the bundle once (one group), to its head; the members fetched nothing from it
    manifest = json.loads((bundle / "manifest.json").read_text())
    want = sum(f["size"] for f in manifest["files"] if f["path"] != "vendor/SHA256SUMS")
    sent = mirror.sent()
    got = {fleet.ip(i): sent.get(fleet.ip(i), 0) - before.get(fleet.ip(i), 0) for i in range(1, fleet.n + 1)}
    assert got == {fleet.ip(1): want, fleet.ip(2): 0, fleet.ip(3): 0}, (got, want)
    # the members fetched the driver (all they needed) from their head, whole
    served = _head_served(fleet)
    size = driver.stat().st_size
    for i in (2, 3):
        assert (fleet.ip(i), f"/vendor/{driver.name}", 200, size) in served, served
    assert not [r for r in served if r[0] == fleet.ip(1)]
    _mirror_stopped(fleet)


def test_fan_out_a_byte_flipped_on_the_heads_copy_is_refused_by_its_group_which_falls_back(fleet, lock, bundle, mirror, work):
    """The head's copy is tampered after its mirror checked it (in place: the mirror serves that very file): every
    member refuses it (sha256) and fetches from the next mirror; nothing tampered is installed anywhere."""
    import threading

    driver = _driver(bundle)
    _stale_driver(fleet, driver.name)
    fleet.ssh(1, "rm -f /var/cache/envkit/fanout/served.log")
    before = mirror.sent()
    result: dict = {}

    def run() -> None:
        result["r"] = provision(
            fleet, lock, bundle, work / "out-fanout-tampered", "--bundle-url", mirror.url, "--fan-out",
            "-e", "envkit_preflight_fetch_attempts=1", timeout=1500,
        )  # fmt: skip

    t = threading.Thread(target=run)
    t.start()
    log = fleet.upper(1) / HEAD_LOG
    deadline = time.monotonic() + 240
    while t.is_alive() and time.monotonic() < deadline and not (log.is_file() and "serving" in log.read_text()):
        time.sleep(0.05)
    flip = (
        f"import os; f = os.open('/var/cache/envkit/vendor/{driver.name}', os.O_RDWR); n = os.fstat(f).st_size // 2; "
        "b = os.pread(f, 1, n); os.pwrite(f, bytes([b[0] ^ 1]), n)"
    )
    flipped = fleet.ssh(1, f'python3 -c "{flip}"', check=False)
    t.join(timeout=600)
    rc, data, err = result["r"]
    assert flipped.returncode == 0, flipped.stderr
    assert rc == 0, err + json.dumps(data.get("hosts", data), indent=1)[:4000]
    served = _head_served(fleet)
    size = driver.stat().st_size
    sent = mirror.sent()
    for i in (2, 3):
        ip = fleet.ip(i)
        # served by the head (whole, tampered), refused by the member, fetched again from the mirror
        assert (ip, f"/vendor/{driver.name}", 200, size) in served, served
        assert sent.get(ip, 0) - before.get(ip, 0) == size
    for i in range(1, fleet.n + 1):
        assert "package_version=25.3.rc1" in fleet.ssh(i, "cat /usr/local/Ascend/driver/version.info").stdout
        assert sha256_remote(fleet, i, f"/var/cache/envkit/vendor/{driver.name}") == sha256_local(driver)
    _mirror_stopped(fleet)


def sha256_remote(fleet: Fleet, i: int, path: str) -> str:
    return fleet.ssh(i, f"sha256sum {path}").stdout.split()[0]


def sha256_local(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()

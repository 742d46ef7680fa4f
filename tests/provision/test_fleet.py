"""envkit provision against real hosts: three systemd-nspawn Debian nodes over SSH, fixture vendor installers.

The nodes boot real systemd, have no network beyond the test bridge, and are set up and torn down here
(tests/integration/setup/nspawn.sh). The tests run in file order and share one fleet:
converge -> no-op -> check -> unreachable -> upgrade with a failing installer, reboot, repair.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.provision.fleet import Fleet, make_bundle, provision, resolve_lock, with_fixture_zip_hashes

pytestmark = [
    pytest.mark.nspawn,
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (systemd-nspawn, network namespaces)"),
    pytest.mark.skipif(shutil.which("systemd-nspawn") is None, reason="systemd-nspawn missing: run tests/integration/setup/nspawn.sh deps"),
    pytest.mark.skipif(os.environ.get("ENVKIT_SKIP_NSPAWN") == "1", reason="ENVKIT_SKIP_NSPAWN=1"),
]

N = 3


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prov-fleet")


@pytest.fixture(scope="module")
def fleet(work):
    f = Fleet(work / "fleet", N)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def locks(work):
    old = resolve_lock(work / "old.lock", "--cann", "8.3.RC1")  # toolkit-latest layout, kernels, HDK 25.3.RC1
    new = resolve_lock(work / "new.lock")  # CANN 9.1.0: cann-versioned layout, ops, HDK 26.0.RC1
    return {"old": old, "new": new}


@pytest.fixture(scope="module")
def old_bundle(work, locks):
    return make_bundle(work / "bundle-old", locks["old"])


def _hosts(data: dict) -> dict[str, dict]:
    return {h["host"]: h for h in data.get("hosts", [])}


def _info(fleet: Fleet, i: int, path: str) -> str:
    return fleet.ssh(i, f"cat {path} 2>/dev/null", check=False).stdout


def _boot_mark(fleet: Fleet, i: int) -> str:
    return fleet.ssh(i, "cut -d' ' -f22 /proc/1/stat").stdout.strip()


def test_first_converge_installs_in_order_then_noop(fleet, locks, old_bundle, work):
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-1")
    assert rc == 0, err
    hosts = _hosts(data)
    assert sorted(hosts) == ["node1", "node2", "node3"]
    for h in hosts.values():
        assert h["status"] == "changed" and h["changed"] > 0 and h["failed"] == 0
        # the vendor order of a first install: driver, firmware, toolkit, kernels, NNAL
        comps = [line.split()[0] for line in h["plan"]]
        assert comps == ["driver", "firmware", "cann-toolkit", "cann-kernels", "cann-nnal", "python"], h["plan"]
        assert h["smoke"] == "skipped: torch not in this stack's venv"
        assert h["doctor"] != "not run"
    for i in range(1, N + 1):
        assert "package_version=25.3.rc1" in _info(fleet, i, "/usr/local/Ascend/driver/version.info")
        assert "package_version=25.3.rc1" in _info(fleet, i, "/usr/local/Ascend/firmware/version.info")
        rec = _info(fleet, i, "/etc/ascend_install.info")
        assert "Driver_Install_For_All=yes" in rec
        assert rec.index("Driver_Install_Type") < rec.index("Firmware_Install_Type")  # driver first
        assert "version=8.3.RC1" in _info(fleet, i, "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_kernels_install.info")
        assert "version=8.3.RC1" in _info(fleet, i, "/usr/local/Ascend/nnal/atb/latest/version.info")
        assert fleet.ssh(i, "id -nG HwHiAiUser").stdout.strip() == "HwHiAiUser"
        assert fleet.ssh(i, "/opt/envkit/venv/bin/envkit --version").stdout.startswith("envkit ")
        env = fleet.ssh(i, ". /etc/envkit/env.sh && echo $ASCEND_TOOLKIT_HOME && command -v envkit").stdout.split()
        assert env == ["/usr/local/Ascend/ascend-toolkit/latest", "/opt/envkit/venv/bin/envkit"]
    reports = work / "out-1" / "reports"
    for n in hosts:
        assert (reports / n / "doctor.json").is_file() and (reports / n / "smoke.json").is_file()
    # a second run changes nothing anywhere
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-2")
    assert rc == 0, err
    assert {h: v["changed"] for h, v in _hosts(data).items()} == {"node1": 0, "node2": 0, "node3": 0}


def test_check_on_converged_fleet_and_on_an_old_driver(fleet, locks, old_bundle, work):
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-check", "--check")
    assert rc == 0, err
    assert data["check"] is True
    assert all(h["plan"] == [] and h["changed"] == 0 for h in data["hosts"]), data["hosts"]
    # node3 gets an older driver: --check reports the upgrade and changes nothing
    fleet.ssh(3, "sed -i 's/^package_version=.*/package_version=25.2.0/' /usr/local/Ascend/driver/version.info")
    before = _info(fleet, 3, "/usr/local/Ascend/driver/version.info")
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-check2", "--check")
    assert rc == 0, err
    hosts = _hosts(data)
    assert hosts["node3"]["plan"] == ["driver 25.2.0 -> 25.3.rc1"]
    assert hosts["node3"]["changed"] > 0  # the plan counts as the predicted change
    assert hosts["node1"]["plan"] == [] and hosts["node2"]["plan"] == []
    assert _info(fleet, 3, "/usr/local/Ascend/driver/version.info") == before
    # a real run repairs it (an upgrade: firmware is already right, only the driver runs)
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-fix3", "--limit", "node3")
    assert rc == 0, err
    assert "package_version=25.3.rc1" in _info(fleet, 3, "/usr/local/Ascend/driver/version.info")


def test_unreachable_node_then_rerun(fleet, locks, old_bundle, work):
    fleet.ssh(2, "rm -rf /usr/local/Ascend/nnal")  # node2 has work to do
    fleet.link(2, "down")
    try:
        rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-unreach")
    finally:
        fleet.link(2, "up")
    assert rc == 1
    hosts = _hosts(data)
    assert hosts["node2"]["status"] == "unreachable"
    assert hosts["node1"]["status"] == "ok" and hosts["node3"]["status"] == "ok"
    assert data["exit_code"] == 1
    time.sleep(1)
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-unreach2")
    assert rc == 0, err
    assert _hosts(data)["node2"]["status"] == "changed"
    assert "version=8.3.RC1" in _info(fleet, 2, "/usr/local/Ascend/nnal/atb/latest/version.info")


def test_upgrade_with_failing_installer_reboots_and_repairs(fleet, locks, work):
    """node1 moves to the newer lock (zip editions): firmware, driver, reboot, CANN; the ops installer
    fails half-way the first time (node1 failed), the rerun repairs it, a third run changes nothing."""
    vendor_tmp = work / "zip-vendor"
    make_bundle(vendor_tmp, locks["new"], as_zip=True)
    new_lock = with_fixture_zip_hashes(locks["new"], vendor_tmp / "vendor", work / "new-zip.lock")
    bad = make_bundle(work / "bundle-new-bad", new_lock, as_zip=True, fail_halfway="cann-ops")
    good = make_bundle(work / "bundle-new", new_lock, as_zip=True)
    boot_before = _boot_mark(fleet, 1)

    rc, data, err = provision(fleet, new_lock, bad, work / "out-up1", "--limit", "node1")
    assert rc == 1
    h = _hosts(data)["node1"]
    assert h["status"] == "failed", h
    assert any("CANN | Run the installer" in e for e in h["errors"]), h["errors"]
    assert h["plan"][:2] == ["firmware 25.3.rc1 -> 26.0.rc1", "driver 25.3.rc1 -> 26.0.rc1"]  # upgrade order
    rec = _info(fleet, 1, "/etc/ascend_install.info")
    assert rec.index("Firmware_Install_Type") < rec.index("Driver_Install_Type")  # firmware first, then driver
    assert _boot_mark(fleet, 1) != boot_before, "node1 did not reboot"
    assert "reboots" in (fleet.work / "hosts" / "node1" / "console.log").read_text()
    assert "version=9.1.0" in _info(fleet, 1, "/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_toolkit_install.info")
    assert _info(fleet, 1, "/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_ops_install.info") == ""

    rc, data, err = provision(fleet, new_lock, good, work / "out-up2", "--limit", "node1")
    assert rc == 0, err
    h = _hosts(data)["node1"]
    assert [p.split()[0] for p in h["plan"]][:2] == ["cann-ops", "cann-nnal"], h["plan"]
    assert "version=9.1.0" in _info(fleet, 1, "/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_ops_install.info")
    assert "version=9.1.0" in _info(fleet, 1, "/usr/local/Ascend/nnal/atb/latest/version.info")
    assert "package_version=26.0.rc1" in _info(fleet, 1, "/usr/local/Ascend/firmware/version.info")

    rc, data, err = provision(fleet, new_lock, good, work / "out-up3", "--limit", "node1")
    assert rc == 0, err
    assert _hosts(data)["node1"]["changed"] == 0


def test_testinfra_state(fleet):
    testinfra = pytest.importorskip("testinfra", reason="pytest-testinfra not installed")
    host = testinfra.get_host(
        f"ssh://root@{fleet.ip(2)}",
        ssh_identity_file=str(fleet.key),
        ssh_extra_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
    )
    assert host.user("HwHiAiUser").group == "HwHiAiUser"
    assert host.file("/usr/local/Ascend/driver/version.info").contains("package_version=25.3.rc1")
    assert host.file("/usr/local/bin/npu-smi").mode == 0o755
    assert "Version: 25.3.rc1" in host.check_output("npu-smi info")
    assert host.file("/usr/local/Ascend/ascend-toolkit/latest").is_symlink
    assert host.file("/etc/envkit/env").contains("^VIRTUAL_ENV=/opt/envkit/venv$")
    assert host.run("/opt/envkit/venv/bin/python -c 'import envkit, pydantic'").rc == 0
    assert host.file("/etc/profile.d/envkit.sh").linked_to == "/etc/envkit/env.sh"

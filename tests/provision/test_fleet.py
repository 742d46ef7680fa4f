"""envkit provision against real hosts: three systemd-nspawn Debian nodes over SSH, fixture vendor installers.

The nodes boot real systemd, have no network beyond the test bridge, and are set up and torn down once per
session (the `fleet` fixture, tests/provision/conftest.py; tests/integration/setup/nspawn.sh). The tests run in file order and share one fleet:
converge -> no-op -> check -> unreachable -> serial roll-out stopped by a busy NPU -> firmware outside the driver's
range -> upgrade with a failing installer, reboot, repair -> a bundle from `envkit bundle build`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from envkit.jobs.provision import PROBE_TASK
from tests.provision.fleet import (
    FLEET_MARKS,
    Fleet,
    envkit_bin,
    make_bundle,
    provision,
    resolve_lock,
    with_fixture_zip_hashes,
    write_vendor,
)

pytestmark = FLEET_MARKS

N = 3


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prov-fleet")


@pytest.fixture(scope="module")
def locks(work):
    old = resolve_lock(work / "old.lock", "--cann", "8.3.RC1")  # toolkit-latest layout, kernels, HDK 25.3.RC1
    # CANN 9.1.0: cann-versioned layout, ops; HDK 26.0.RC1 pinned (9.1.0 pairs with 26.0.RC1 and 26.1.0)
    new = resolve_lock(work / "new.lock", "--driver", "26.0.RC1", "--firmware", "26.0.RC1")
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
        assert "version=8.3.RC1" in _info(
            fleet, i, "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_kernels_install.info"
        )
        assert "version=8.3.RC1" in _info(fleet, i, "/usr/local/Ascend/nnal/atb/latest/version.info")
        assert fleet.ssh(i, "id -nG HwHiAiUser").stdout.strip() == "HwHiAiUser"
        assert fleet.ssh(i, "/opt/envkit/venv/bin/envkit --version").stdout.startswith("envkit ")
        env = fleet.ssh(i, ". /etc/envkit/env.sh && echo $ASCEND_TOOLKIT_HOME && command -v envkit").stdout.split()
        assert env == ["/usr/local/Ascend/ascend-toolkit/latest", "/opt/envkit/venv/bin/envkit"]
    reports = work / "out-1" / "reports"
    for n in hosts:
        assert (reports / n / "doctor.json").is_file() and (reports / n / "smoke.json").is_file()
    # a second run changes nothing anywhere: each host's play is the probe alone, whose message is its report (the
    # verdict recorded on the host, its reports and warnings, as the longer path gives them)
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-2")
    assert rc == 0, err
    again = _hosts(data)
    assert {h: v["changed"] for h, v in again.items()} == {"node1": 0, "node2": 0, "node3": 0}
    for n, h in again.items():
        assert h["smoke"] == hosts[n]["smoke"] + " (unchanged)" and h["doctor"] == hosts[n]["doctor"] + " (unchanged)"
        assert h["warnings"] == hosts[n]["warnings"], h
        for name in ("doctor.json", "smoke.json"):
            assert (work / "out-2" / "reports" / n / name).read_bytes() == (reports / n / name).read_bytes()
    lines = (work / "out-2" / "events.jsonl").read_text().splitlines()
    ran = {e["task"].split(" : ", 1)[-1] for e in map(json.loads, lines) if e.get("event") == "result"}
    assert ran == {PROBE_TASK}, ran  # no argument-spec check either: site.yml probes first (a pre-task)


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


DRIVER_INFO = "/usr/local/Ascend/driver/version.info"
FIRMWARE_INFO = "/usr/local/Ascend/firmware/version.info"


def _set_version(fleet: Fleet, i: int, path: str, version: str) -> None:
    fleet.ssh(i, f"sed -i 's/^package_version=.*/package_version={version}/' {path}")


def _hold_npu(fleet: Fleet, i: int) -> str:
    """A process on node i holding an NPU device open, as a training job does; its pid."""
    out = fleet.ssh(i, "touch /dev/davinci0 && (setsid sleep 900 3</dev/davinci0 >/dev/null 2>&1 </dev/null & echo $!)").stdout
    return out.strip()


def _release_npu(fleet: Fleet, i: int, pid: str) -> None:
    fleet.ssh(i, f"kill {pid}; rm -f /dev/davinci0", check=False)


def test_serial_rollout_stops_at_the_failed_batch_and_a_busy_npu_is_refused(fleet, locks, old_bundle, work):
    """Every node needs a driver change; node1's NPU is held by a process. --serial 1: node1's batch fails and the
    roll-out stops (node2, node3 untouched). Without --serial: node1 is refused with the pid, node2 and node3
    proceed. Once the process is gone, a rerun converges node1."""
    for i in range(1, N + 1):
        _set_version(fleet, i, DRIVER_INFO, "25.2.0")
    pid = _hold_npu(fleet, 1)
    try:
        rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-serial", "--serial", "1")
        assert rc == 1 and data["exit_code"] == 1, err
        hosts = _hosts(data)
        assert hosts["node1"]["status"] == "failed"
        assert any("NPU devices are in use by process(es) " + pid in e for e in hosts["node1"]["errors"]), hosts["node1"][
            "errors"
        ]
        assert hosts["node2"]["status"] == "not run" and hosts["node3"]["status"] == "not run", hosts
        for i in range(1, N + 1):  # nothing was installed anywhere
            assert "package_version=25.2.0" in _info(fleet, i, DRIVER_INFO), i

        rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-busy")
        assert rc == 1
        hosts = _hosts(data)
        assert hosts["node1"]["status"] == "failed"
        msg = " ".join(hosts["node1"]["errors"])
        assert f"NPU devices are in use by process(es) {pid} on node1" in msg and "driver 25.2.0 -> 25.3.rc1" in msg, msg
        assert "package_version=25.2.0" in _info(fleet, 1, DRIVER_INFO)
        for n in ("node2", "node3"):
            assert hosts[n]["status"] == "changed" and hosts[n]["plan"] == ["driver 25.2.0 -> 25.3.rc1"], hosts[n]
        for i in (2, 3):
            assert "package_version=25.3.rc1" in _info(fleet, i, DRIVER_INFO)
    finally:
        _release_npu(fleet, 1, pid)
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-busy-fixed", "--limit", "node1")
    assert rc == 0, err
    assert "package_version=25.3.rc1" in _info(fleet, 1, DRIVER_INFO)


def test_firmware_outside_the_driver_range_is_refused_on_the_node(fleet, locks, old_bundle, work):
    """Only the firmware differs on node2 and node3; node2's installed driver accepts no firmware of the lock's
    (its compatible_version_fw range). node2 is refused before anything runs, node3 proceeds. Reinstalling the
    driver as well (the lock's driver accepts the lock's firmware) converges node2."""
    for i in (2, 3):
        _set_version(fleet, i, FIRMWARE_INFO, "25.2.0")
    fleet.ssh(2, f"sed -i 's/^compatible_version_fw=.*/compatible_version_fw=[1.0.0,1.0.99]/' {DRIVER_INFO}")
    no_reboot = ("-e", "envkit_hdk_reboot_enabled=false")
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-fwrange", "--limit", "node2,node3", *no_reboot)
    assert rc == 1
    hosts = _hosts(data)
    assert sorted(hosts) == ["node2", "node3"]
    assert hosts["node2"]["status"] == "failed"
    msg = " ".join(hosts["node2"]["errors"])
    assert "Firmware 7.8.0.2.212 is outside the driver's compatible range [1.0.0,1.0.99]" in msg, msg
    assert "package_version=25.2.0" in _info(fleet, 2, FIRMWARE_INFO)  # nothing ran on node2
    assert hosts["node3"]["status"] == "changed" and hosts["node3"]["plan"] == ["firmware 25.2.0 -> 25.3.rc1"], hosts["node3"]
    assert "package_version=25.3.rc1" in _info(fleet, 3, FIRMWARE_INFO)
    # repair node2: with the driver reinstalled too, the range checked is the lock's driver's, which holds the firmware
    _set_version(fleet, 2, DRIVER_INFO, "25.2.0")
    rc, data, err = provision(fleet, locks["old"], old_bundle, work / "out-fwrange2", "--limit", "node2", *no_reboot)
    assert rc == 0, err
    assert _hosts(data)["node2"]["plan"] == ["firmware 25.2.0 -> 25.3.rc1", "driver 25.2.0 -> 25.3.rc1"]
    assert "package_version=25.3.rc1" in _info(fleet, 2, FIRMWARE_INFO)
    assert "compatible_version_fw=[6.4.0,6.4.99],[7.0.0,8.9.9]" in _info(fleet, 2, DRIVER_INFO)


def test_upgrade_with_failing_installer_reboots_and_repairs(fleet, locks, work):
    """node1 moves to the newer lock (zip editions): firmware, driver, reboot, CANN; the ops installer
    fails half-way the first time (node1 failed), the rerun repairs it, a third run changes nothing."""
    vendor_tmp = work / "zip-vendor"
    make_bundle(vendor_tmp, locks["new"], as_zip=True)
    new_lock = with_fixture_zip_hashes(locks["new"], vendor_tmp / "vendor", work / "new-zip.lock")
    bad = make_bundle(work / "bundle-new-bad", new_lock, as_zip=True, fail_halfway="cann-ops")
    good = make_bundle(work / "bundle-new", new_lock, as_zip=True)
    boot_before = _boot_mark(fleet, 1)

    rc, data, err = provision(fleet, new_lock, bad, work / "out-up1", "--limit", "node1", edited=True)
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

    rc, data, err = provision(fleet, new_lock, good, work / "out-up2", "--limit", "node1", edited=True)
    assert rc == 0, err
    h = _hosts(data)["node1"]
    assert [p.split()[0] for p in h["plan"]][:2] == ["cann-ops", "cann-nnal"], h["plan"]
    assert "version=9.1.0" in _info(fleet, 1, "/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_ops_install.info")
    assert "version=9.1.0" in _info(fleet, 1, "/usr/local/Ascend/nnal/atb/latest/version.info")
    assert "package_version=26.0.rc1" in _info(fleet, 1, "/usr/local/Ascend/firmware/version.info")

    rc, data, err = provision(fleet, new_lock, good, work / "out-up3", "--limit", "node1", edited=True)
    assert rc == 0, err
    assert _hosts(data)["node1"]["changed"] == 0


def test_testinfra_state(fleet):
    testinfra = pytest.importorskip("testinfra", reason="pytest-testinfra not installed")
    host = testinfra.get_host(
        f"ssh://root@{fleet.ip(2)}",
        ssh_identity_file=str(fleet.key),
        ssh_extra_args=" ".join(fleet.ssh_options()),
    )
    assert host.user("HwHiAiUser").group == "HwHiAiUser"
    assert host.file("/usr/local/Ascend/driver/version.info").contains("package_version=25.3.rc1")
    assert host.file("/usr/local/bin/npu-smi").mode == 0o755
    assert "Version: 25.3.rc1" in host.check_output("npu-smi info")
    assert host.file("/usr/local/Ascend/ascend-toolkit/latest").is_symlink
    assert host.file("/etc/envkit/env").contains("^VIRTUAL_ENV=/opt/envkit/venv$")
    assert host.run("/opt/envkit/venv/bin/python -c 'import envkit, pydantic'").rc == 0
    assert host.file("/etc/profile.d/envkit.sh").linked_to == "/etc/envkit/env.sh"


def test_provision_from_a_bundle_built_by_envkit(fleet, locks, work):
    """The bundle `envkit bundle build` writes (wheels/target/, requirements/target.txt, vendor/, manifest.json),
    made through the CLI from a lock completed by `envkit lock`: node3's venv is rebuilt from it (its requirements
    changed) with exactly the lock's target closure, envkit's own wheel included, and envkit runs there."""
    lock = work / "bundle-cli.lock"
    shutil.copyfile(locks["old"], lock)
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null"}
    p = subprocess.run(
        [envkit_bin(), "lock", "--lock", str(lock), "--only", "pyyaml"], capture_output=True, text=True, timeout=600, env=env
    )
    assert p.returncode == 0, p.stdout + p.stderr
    vendor = work / "bundle-cli-vendor"
    write_vendor(lock, vendor)
    bundle = work / "bundle-cli"
    p = subprocess.run(
        [
            envkit_bin(),
            "bundle",
            "build",
            "--lock",
            str(lock),
            "--artifacts",
            str(vendor),
            "--trust-artifacts",
            "-o",
            str(bundle),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    req = (bundle / "requirements" / "target.txt").read_text()
    pins = {line.split("==")[0].lower(): line.split("==")[1].split()[0] for line in req.splitlines() if "==" in line}
    assert "envkit" in pins and "pyyaml" in pins, sorted(pins)
    assert any((bundle / "wheels" / "target").glob("envkit-*.whl"))

    rc, data, err = provision(fleet, lock, bundle, work / "out-bundle-cli", "--limit", "node3")
    assert rc == 0, err + json.dumps(data.get("hosts", data), indent=1)[:4000]
    h = _hosts(data)["node3"]
    # driver, firmware and CANN are the same lock's: only the venv is rebuilt
    assert [p.split()[0] for p in h["plan"]] == ["python"], h["plan"]
    assert h["doctor"] in ("ok", "drift or failed checks (exit 1)"), h  # doctor ran from the bundle's envkit
    assert fleet.ssh(3, "/opt/envkit/venv/bin/envkit --version").stdout.startswith("envkit ")
    frozen = fleet.ssh(3, "/opt/envkit/venv/bin/python -m pip list --format=freeze --exclude pip --exclude setuptools").stdout
    installed = {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1] for line in frozen.split()}
    assert installed == pins, sorted(set(installed) ^ set(pins))  # exactly the closure: --no-deps, a fresh venv
    assert (work / "out-bundle-cli" / "reports" / "node3" / "doctor.json").is_file()
    rc, data, err = provision(fleet, lock, bundle, work / "out-bundle-cli2", "--limit", "node3")
    assert rc == 0 and _hosts(data)["node3"]["changed"] == 0, err

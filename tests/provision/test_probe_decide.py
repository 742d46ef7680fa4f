"""envkit_probe's decisions (playbooks/plugins/modules/envkit_probe.py: decide and its parts), the
code the roles' todo vars read (issue 26: the controller templates none of it). Each decision against files laid
out as the vendor's installers and the roles write them; the fleet tests (tests/provision/test_fleet*.py) run the
same code through Ansible on nspawn nodes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.provision.conftest import load_probe

P = load_probe()

FACTS = {
    "ansible_architecture": "x86_64",
    "ansible_distribution": "Ubuntu",
    "ansible_distribution_version": "22.04",
    "ansible_os_family": "Debian",
}
FAMILIES = {"debian": ["Debian", "Ubuntu"], "rhel": ["RedHat", "openEuler"]}
HINTS = {"debian": "apt-get install linux-headers-KVER dkms", "rhel": "dnf install kernel-devel-KVER dkms"}
GIB_KB = 1024 * 1024


def state(**over):
    s = {
        "pci_devices": 8,
        "npu_names": "910B3",
        "free_kb": 100 * GIB_KB,
        "kernel": "5.15.0-1",
        "kernel_headers": True,
        "dkms": True,
        "users": {
            "HwHiAiUser": {
                "exists": True,
                "group": "HwHiAiUser",
                "home": "/home/HwHiAiUser",
                "shell": "/bin/bash",
                "home_exists": True,
            }
        },
        "groups": {"HwHiAiUser": {"exists": True}},
        "hccn": {},
    }
    s.update(over)
    return s


def preflight(**over):
    e = {
        "host": "node1",
        "lock_arch": "x86_64",
        "lock_os": "ubuntu22.04",
        "lock_os_family": "debian",
        "os_families": FAMILIES,
        "lock_chip": "910b",
        "npu_smi_names": ["910B3", "910B4"],
        "pci_vendor": "19e5",
        "require_npu": False,
        "require_kernel_headers": True,
        "min_free_gb": 10,
        "install_path": "/usr/local/Ascend",
        "headers_hint": HINTS,
        "mirrors": [],
        "user": {"name": "HwHiAiUser", "home": "/home/HwHiAiUser", "manage": True},
    }
    e.update(over)
    return e


# --- preflight -------------------------------------------------------------------------------------------------
def test_a_host_that_matches_the_lock_has_no_error_no_warning_and_no_user_to_make():
    assert P.preflight_decide(preflight(), FACTS, state()) == ([], [], False)


def test_another_architecture_or_family_is_refused_with_what_to_do():
    errors, _, _ = P.preflight_decide(preflight(lock_arch="aarch64"), FACTS, state())
    assert errors == [
        "node1 is x86_64 Ubuntu 22.04 (Debian); the lock is for aarch64 ubuntu22.04 (debian family). "
        "Resolve a lock for this host (envkit resolve --arch/--os)."
    ]
    assert P.preflight_decide(preflight(lock_os_family="rhel"), FACTS, state())[0][0].startswith("node1 is x86_64")
    # a family no list names is "unknown": never the lock's
    assert P.os_family_of(FAMILIES, "Gentoo") == "unknown" and P.os_family_of(FAMILIES, "openEuler") == "rhel"


@pytest.mark.parametrize(("free_kb", "refused"), [(10 * GIB_KB, False), (10 * GIB_KB - 1, True)])
def test_free_disk_is_refused_one_kib_under_the_minimum(free_kb, refused):
    errors, _, _ = P.preflight_decide(preflight(), FACTS, state(free_kb=free_kb))
    assert errors == (["/usr/local/Ascend has 10.0 GiB free; the stack needs 10 GiB."] if refused else [])


def test_missing_kernel_headers_or_dkms_name_the_family_s_packages():
    for over in ({"kernel_headers": False}, {"dkms": False}):
        errors, _, _ = P.preflight_decide(preflight(), FACTS, state(**over))
        assert errors == [
            "The NPU driver builds kernel modules: install the headers of kernel 5.15.0-1 and dkms "
            "(apt-get install linux-headers-5.15.0-1 dkms), or set envkit_preflight_require_kernel_headers=false."
        ]
    # an unknown family gets both hints; not required: no error
    unknown = {**FACTS, "ansible_os_family": "Gentoo"}
    errors, _, _ = P.preflight_decide(preflight(lock_os_family="unknown"), unknown, state(dkms=False))
    assert "(apt-get install linux-headers-5.15.0-1 dkms; dnf install kernel-devel-5.15.0-1 dkms)" in errors[0]
    assert P.preflight_decide(preflight(require_kernel_headers=False), FACTS, state(dkms=False))[0] == []


def test_no_npu_is_a_warning_or_where_required_an_error():
    errors, warnings, _ = P.preflight_decide(preflight(), FACTS, state(pci_devices=0))
    assert errors == [] and warnings == ["no Huawei PCI device (vendor 19e5) found"]
    errors, _, _ = P.preflight_decide(preflight(require_npu=True), FACTS, state(pci_devices=0))
    assert errors == ["No PCI device of vendor 19e5 (Huawei) on node1: not an Ascend host."]


def test_another_os_release_and_another_chip_are_warnings():
    _, warnings, _ = P.preflight_decide(preflight(lock_os="ubuntu20.04"), FACTS, state(npu_names="310P3"))
    assert warnings == [
        "OS Ubuntu 22.04 is not the lock's ubuntu20.04 (same family)",
        "npu-smi shows 310P3, not the lock's chip 910b",
    ]
    # no npu-smi answer, no lock OS: nothing to compare
    assert P.preflight_decide(preflight(lock_os=""), FACTS, state(npu_names=""))[1] == []


def test_mirror_urls_are_checked_and_each_bad_one_named():
    errors, _, _ = P.preflight_decide(preflight(mirrors=["http://10.0.0.5:8080/b", "ftp://h/x", "http://u@h/"]), FACTS, state())
    assert errors == ["Not a mirror URL (http or https, a host, no credentials, query or quotes): ftp://h/x, http://u@h/"]


@pytest.mark.parametrize(
    "change",
    [
        {"groups": {"HwHiAiUser": {"exists": False}}},
        {"users": {"HwHiAiUser": {"exists": False}}},
        {"users": {"HwHiAiUser": {**state()["users"]["HwHiAiUser"], "shell": "/bin/sh"}}},
        {"users": {"HwHiAiUser": {**state()["users"]["HwHiAiUser"], "home": "/var/lib/x"}}},
        {"users": {"HwHiAiUser": {**state()["users"]["HwHiAiUser"], "group": "users"}}},
        {"users": {"HwHiAiUser": {**state()["users"]["HwHiAiUser"], "home_exists": False}}},
    ],
)
def test_the_driver_s_user_is_made_when_any_part_differs_unless_not_managed(change):
    assert P.preflight_decide(preflight(), FACTS, state(**change))[2] is True
    assert (
        P.preflight_decide(
            preflight(user={"name": "HwHiAiUser", "home": "/home/HwHiAiUser", "manage": False}), FACTS, state(**change)
        )[2]
        is False
    )


# --- hdk -------------------------------------------------------------------------------------------------------
def _hdk(root: Path, driver: str | None, firmware: str | None, fw_range: str = "[7.0.0,7.5.99]") -> None:
    for name, version in (("driver", driver), ("firmware", firmware)):
        if version is not None:
            (root / name).mkdir(parents=True, exist_ok=True)
            extra = f"compatible_version_fw={fw_range}\n" if name == "driver" else ""
            (root / name / "version.info").write_text(f"Version=x\npackage_version={version}\n{extra}")


def hdk(root: Path, **over):
    e = {
        "enabled": True,
        "install_path": str(root),
        "driver": {"package_version": "25.3.RC1"},
        "firmware": {"package_version": "7.8.0.2.212"},
    }
    e.update(over)
    return P.hdk_decide(e)


def test_hdk_first_install_is_driver_then_firmware(tmp_path):
    d = hdk(tmp_path)
    assert d["todo"] == ["driver", "firmware"]
    assert d["plan"] == ["driver none -> 25.3.RC1", "firmware none -> 7.8.0.2.212"]
    assert d["driver_fw_range"] == ""


def test_hdk_upgrade_is_firmware_then_driver_and_versions_compare_without_case(tmp_path):
    _hdk(tmp_path, "25.2.0", "7.7.0.1.1")
    d = hdk(tmp_path)
    assert d["todo"] == ["firmware", "driver"] and d["plan"] == ["firmware 7.7.0.1.1 -> 7.8.0.2.212", "driver 25.2.0 -> 25.3.RC1"]
    assert d["driver_fw_range"] == "[7.0.0,7.5.99]"
    _hdk(tmp_path, "25.3.rc1", "7.7.0.1.1")
    assert hdk(tmp_path)["todo"] == ["firmware"]
    _hdk(tmp_path, "25.3.rc1", "7.8.0.2.212")
    assert hdk(tmp_path)["todo"] == [] and hdk(tmp_path)["plan"] == []


def test_hdk_disabled_or_without_a_package_in_the_lock_does_nothing(tmp_path):
    assert hdk(tmp_path, enabled=False)["todo"] == []
    assert hdk(tmp_path, driver={})["todo"] == ["firmware"]
    assert hdk(tmp_path, driver={}, firmware={})["todo"] == []


def test_hdk_holds_a_firmware_change_to_the_range_of_the_driver_it_will_run_with(tmp_path):
    """fw_*: the check envkit_hdk asserts (tasks/converge.yml), decided here by envkit.versions' ordering: the
    installed driver's range where only the firmware changes, the lock's driver's where the driver changes too
    (tests/provision/test_firmware_ranges.py holds it to the corpus)."""
    lock_driver = {"package_version": "25.3.RC1", "compatible_firmware": "[7.0.0,7.8.99]"}
    fw = {"package_version": "7.8.0.2.212", "firmware_version": "7.8.0.2.212"}
    first = hdk(tmp_path, driver=lock_driver, firmware=fw)  # nothing installed: both change, the lock's range
    assert first["fw_range"] == "[7.0.0,7.8.99]" and first["fw_checked"] is True and first["fw_in_range"] is True
    _hdk(tmp_path, "25.3.rc1", "7.7.0.1.1", fw_range="[7.0.0,7.5.99]")  # the lock's driver installed: its own range
    alone = hdk(tmp_path, driver=lock_driver, firmware=fw)
    assert alone["todo"] == ["firmware"] and alone["fw_range"] == "[7.0.0,7.5.99]"
    assert alone["fw_checked"] is True and alone["fw_in_range"] is False and alone["fw_error"] == ""
    assert hdk(tmp_path, driver=lock_driver, firmware={**fw, "firmware_version": "7.5.RC1"})["fw_in_range"] is True
    _hdk(tmp_path, "25.3.rc1", "7.7.0.1.1", fw_range="7.0.0-7.5.99")  # no list of ranges: refused, and why
    bad = hdk(tmp_path, driver=lock_driver, firmware=fw)
    assert bad["fw_in_range"] is False and "not a list of version ranges" in bad["fw_error"]
    _hdk(tmp_path, "25.3.rc1", "7.8.0.2.212")  # converged: no firmware change, no check
    assert hdk(tmp_path, driver=lock_driver, firmware=fw)["fw_checked"] is False
    assert hdk(tmp_path, enabled=False, driver=lock_driver, firmware=fw)["fw_checked"] is False


# --- cann ------------------------------------------------------------------------------------------------------
def cann_expect(tmp_path: Path, installed: list[str | None], enabled: bool = True) -> dict:
    wanted = ["8.3.RC1", "8.3.RC1", "8.3.RC1"]
    files = []
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a host of its own for each call
    for i, version in enumerate(installed):
        f = root / f"p{i}_install.info"
        if version is not None:
            f.write_text(f"package_name=p{i}\nversion={version}\n")
        files.append(str(f))
    return {"enabled": enabled, "components": ["toolkit", "kernels", "nnal"], "versions": wanted, "info_files": files}


def cann(tmp_path: Path, installed: list[str | None], enabled: bool = True) -> dict:
    return P.cann_decide(cann_expect(tmp_path, installed, enabled))


def test_cann_reinstalls_from_the_first_package_that_differs(tmp_path):
    assert cann(tmp_path, ["8.3.rc1", "8.2.RC1", "8.3.RC1"]) == {
        "first": 1,
        "plan": ["kernels 8.2.RC1 -> 8.3.RC1", "nnal 8.3.RC1 -> 8.3.RC1"],
    }
    assert cann(tmp_path, [None, None, None])["plan"][0] == "toolkit none -> 8.3.RC1"
    assert cann(tmp_path, ["8.3.RC1"] * 3) == {"first": -1, "plan": []}
    assert cann(tmp_path, [None, None, None], enabled=False) == {"first": -1, "plan": []}


def test_info_value_reads_the_first_line_of_its_key_only():
    text = "Version=1\npackage_version= 25.3.RC1 \nversion=8.3\nmy_version=9\n"
    assert P.info_value(text, "package_version") == "25.3.RC1" and P.info_value(text, "version") == "8.3"
    assert P.info_value(text, "compatible_version_fw") == "" and P.info_value("", "version") == ""


# --- python ----------------------------------------------------------------------------------------------------
ENV, ENV_SH = b"A=1\n", b"export A=1\n"


def _converged_python(tmp_path: Path) -> dict:
    venv, env_dir, link = tmp_path / "venv", tmp_path / "etc-envkit", tmp_path / "profile.d-envkit.sh"
    venv.mkdir()
    (venv / ".envkit-requirements.sha256").write_text("ab" * 32 + "\n")
    env_dir.mkdir(mode=0o755)
    os.chmod(env_dir, 0o755)
    for name, data in (("env", ENV), ("env.sh", ENV_SH)):
        (env_dir / name).write_bytes(data)
        os.chmod(env_dir / name, 0o644)
    link.symlink_to(env_dir / "env.sh")
    return {
        "enabled": True,
        "requirements": True,
        "requirements_sha256": "ab" * 32,
        "stamp": str(venv / ".envkit-requirements.sha256"),
        "env_dir": str(env_dir),
        "env_sha1": hashlib.sha1(ENV).hexdigest(),
        "env_sh_sha1": hashlib.sha1(ENV_SH).hexdigest(),
        "profile_d": True,
        "profile_link": str(link),
    }


def test_python_a_converged_venv_and_env_files_need_nothing(tmp_path):
    e = _converged_python(tmp_path)
    assert P.python_decide(e) == (False, False)
    assert P.python_decide({**e, "requirements_sha256": "cd" * 32}) == (True, False)
    assert P.python_decide({**e, "requirements": False, "requirements_sha256": "cd" * 32}) == (False, False)
    assert P.python_decide({**e, "enabled": False, "env_sha1": "0"}) == (False, False)


@pytest.mark.parametrize("change", ["env content", "env.sh mode", "folder mode", "link", "no folder"])
def test_python_env_files_are_written_when_any_part_differs(tmp_path, change):
    e = _converged_python(tmp_path)
    d = Path(e["env_dir"])
    if change == "env content":
        (d / "env").write_bytes(b"A=2\n")
    elif change == "env.sh mode":
        os.chmod(d / "env.sh", 0o600)
    elif change == "folder mode":
        os.chmod(d, 0o700)
    elif change == "link":
        Path(e["profile_link"]).unlink()
        Path(e["profile_link"]).symlink_to(d / "env")
    else:
        e["env_dir"] = str(tmp_path / "missing")
    assert P.python_decide(e) == (False, True)
    if change == "link":  # no profile.d link wanted: its target does not count
        assert P.python_decide({**e, "profile_d": False}) == (False, False)


# --- smoke -----------------------------------------------------------------------------------------------------
LOCK = b"schema: 1\n"
LOCK_SHA1 = hashlib.sha1(LOCK).hexdigest()


def _smoke(tmp_path: Path, verdict: dict | str | None = None) -> dict:
    (tmp_path / "envkit.lock").write_bytes(LOCK)
    (tmp_path / "doctor.json").write_text('{"ok": true}')
    (tmp_path / "smoke.json").write_text('{"device": "npu"}')
    v = {"smoke": "ok: npu", "doctor": "ok", "lock_sha1": LOCK_SHA1} if verdict is None else verdict
    (tmp_path / "verdict.json").write_text(v if isinstance(v, str) else json.dumps(v))
    return {"enabled": True, "check_mode": False, "rerun": "changed", "remote_dir": str(tmp_path), "lock_sha1": LOCK_SHA1}


def test_smoke_a_recorded_verdict_for_this_lock_is_reported_unchanged(tmp_path):
    stale, verdict = P.smoke_decide(_smoke(tmp_path))
    assert stale is False
    assert verdict == {
        "smoke": "ok: npu (unchanged)",
        "doctor": "ok (unchanged)",
        "reports": {"doctor.json": '{"ok": true}', "smoke.json": '{"device": "npu"}'},
    }


@pytest.mark.parametrize(
    "why",
    [
        "always",
        "failed",
        "no lock sha1",
        "another lock on the host",
        "verdict of another lock",
        "no doctor.json",
        "no smoke.json",
        "not json",
        "nested too deep",
        "a list",
    ],
)
def test_smoke_reruns_when_its_verdict_is_stale(tmp_path, why):
    e = _smoke(tmp_path)
    if why == "always":
        e["rerun"] = "always"
    elif why == "failed":
        _smoke(tmp_path, {"smoke": "failed: cpu", "doctor": "ok", "lock_sha1": LOCK_SHA1})
    elif why == "no lock sha1":
        e["lock_sha1"] = ""
    elif why == "another lock on the host":
        (tmp_path / "envkit.lock").write_bytes(b"schema: 2\n")
    elif why == "verdict of another lock":
        _smoke(tmp_path, {"smoke": "ok: npu", "doctor": "ok", "lock_sha1": "0" * 40})
    elif why in ("no doctor.json", "no smoke.json"):
        (tmp_path / why[3:]).unlink()
    elif why == "not json":
        _smoke(tmp_path, "{not json")
    elif why == "nested too deep":
        _smoke(tmp_path, "[" * 200_000 + "]" * 200_000)
    else:
        _smoke(tmp_path, "[1, 2]")
    assert P.smoke_decide(e)[0] is True


# --- decide: every role together -------------------------------------------------------------------------------
def test_decide_a_converged_host_is_unchanged_and_reports_its_verdict(tmp_path):
    (tmp_path / "smoke").mkdir()
    expect = {"preflight": preflight(), "python": _converged_python(tmp_path), "smoke": _smoke(tmp_path / "smoke")}
    d = P.decide(expect, FACTS, state(hccn={"tool": "t"}))
    assert d["unchanged"] is True and d["changed"] is False and d["errors"] == []
    assert d["report"] == {"warnings": [], "network": {"tool": "t"}, **d["smoke_verdict"]}
    # in --check the smoke role does not run: no verdict in the report, a stale verdict changes nothing
    expect["smoke"]["check_mode"] = True
    assert "smoke" not in P.decide(expect, FACTS, state())["report"]
    expect["smoke"]["rerun"] = "always"
    assert P.decide(expect, FACTS, state())["unchanged"] is True
    expect["smoke"]["check_mode"] = False
    d = P.decide(expect, FACTS, state())
    assert d["unchanged"] is False and d["changed"] is False and d["smoke_stale"] is True


def test_decide_any_role_with_something_to_do_changes_the_host(tmp_path):
    base = {"preflight": preflight()}
    assert P.decide(base, FACTS, state())["unchanged"] is True
    assert P.decide({}, FACTS, state()) == {
        "errors": [],
        "warnings": [],
        "user": False,
        "hdk": {"todo": [], "plan": []},
        "cann": {"first": -1, "plan": []},
        "python": False,
        "python_env": False,
        "smoke_stale": False,
        "smoke_verdict": {},
        "changed": False,
        "unchanged": True,
        "end": False,
        "report": {"warnings": [], "network": {}},
    }
    user = P.decide(base, FACTS, state(users={}))
    assert user["user"] and user["changed"] and not user["unchanged"]
    h = P.decide(
        {**base, "hdk": {"enabled": True, "install_path": str(tmp_path), "driver": {"package_version": "1"}}}, FACTS, state()
    )
    assert h["hdk"]["todo"] == ["driver"] and h["changed"] and not h["unchanged"]
    c = P.decide({**base, "cann": cann_expect(tmp_path, [None, None, None])}, FACTS, state())
    assert c["cann"]["first"] == 0 and c["changed"] and not c["unchanged"]
    py = _converged_python(tmp_path)
    env = P.decide({**base, "python": {**py, "env_sha1": "0"}}, FACTS, state())
    assert env["python_env"] and not env["changed"] and not env["unchanged"]  # the env files count once written
    # errors alone do not make a host changed, but such a host does not end its play: the preflight's check fails
    bad = P.decide({"preflight": preflight(lock_arch="aarch64", end_unchanged=True)}, FACTS, state())
    assert bad["errors"] and bad["unchanged"] is True and bad["end"] is False


def test_decide_a_host_ends_its_play_only_unchanged_without_errors_where_the_play_says(tmp_path):
    """decide.end: the host's play ends after the probe (tasks/probe.yml) only where nothing changes, the preflight
    found no error, and end_unchanged is set (site.yml, not a fan-out head: vars/main.yml)."""
    end = {"preflight": preflight(end_unchanged=True)}
    assert P.decide(end, FACTS, state())["end"] is True
    assert P.decide({"preflight": preflight()}, FACTS, state())["end"] is False  # not set: the role in another play
    assert P.decide({"preflight": preflight(end_unchanged=False)}, FACTS, state())["end"] is False
    assert P.decide(end, FACTS, state(users={}))["end"] is False  # the driver's user to make
    assert P.decide(end, FACTS, state(free_kb=GIB_KB))["end"] is False  # an error: the check reports it
    warned = P.decide(end, FACTS, state(pci_devices=0))  # a warning is reported, and the play still ends
    assert warned["end"] is True and warned["report"]["warnings"] == warned["warnings"] != []
    py = _converged_python(tmp_path)
    assert P.decide({**end, "python": py}, FACTS, state())["end"] is True
    assert P.decide({**end, "python": {**py, "env_sha1": "0"}}, FACTS, state())["end"] is False

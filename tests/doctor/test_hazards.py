"""Hazards and checks in their finer cases, on changed copies of the fixture roots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.jobs.doctor.diagnose import diagnose, drift
from envkit.jobs.doctor.observe import probe
from envkit.jobs.doctor.report import Observed, ObservedValue


@pytest.fixture
def a2(root_copy) -> Path:
    """A copy of the healthy Atlas A2 root (two chips, CANN 8.5.0, torch 2.6.0) for a test to break."""
    return root_copy("healthy-a2")


def _report(root: Path, **kw):
    return diagnose(probe(str(root), timeout=10), **kw)


def _check(root_or_report, name: str, **kw):
    """The check `name` of a report, or of doctor's report on a root."""
    report = _report(root_or_report, **kw) if isinstance(root_or_report, Path) else root_or_report
    return next(c for c in report.checks if c.name == name)


def _remove(root: Path, *rel: str) -> None:
    for r in rel:
        shutil.rmtree(root / r)


def _set_env(root: Path, **values: str) -> None:
    env = root / "etc/environment"
    lines = [ln for ln in env.read_text().splitlines() if ln.split("=", 1)[0] not in values]
    lines += [f'{k}="{v}"' for k, v in values.items()]
    env.write_text("\n".join(lines) + "\n")


def _site(root: Path) -> Path:
    return root / "usr/local/python3.11.13/lib/python3.11/site-packages"


def _metadata(root: Path, dist: str, name: str, version: str, requires: list[str]) -> None:
    folder = _site(root) / dist
    (folder / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )


def _swap(root: Path, name: str, version: str) -> None:
    """Make the installed `name` look like `version`: its dist-info renamed, its METADATA rewritten."""
    old = next(_site(root).glob(f"{name}-*.dist-info"))
    new = old.with_name(f"{name}-{version}.dist-info")
    old.rename(new)
    _metadata(root, new.name, name, version, [])


def test_numpy2_is_fine_when_nothing_asks_for_less(root_copy):
    root = root_copy("healthy-a3-cann9")  # numpy 2.3.5 with torch 2.10 / CANN 9.0.0
    c = _check(root, "numpy 2 where <2 is needed")
    assert c.status == "ok" and "nothing installed or locked" in c.detail


def test_numpy2_against_the_lock(a2):
    _swap(a2, "numpy", "2.0.2")
    c = _check(a2, "numpy 2 where <2 is needed", lock_stack={"numpy": "1.26.4"})
    assert c.status == "fail" and "the lock pins numpy 1.26.4" in c.detail


def test_numpy2_with_old_torch(a2):
    _swap(a2, "numpy", "2.0.0")
    _swap(a2, "torch", "2.1.0")
    c = _check(a2, "numpy 2 where <2 is needed")
    assert c.status == "fail" and "LlamaFactory#4382" in c.detail


def test_numpy_extra_requirement_is_ignored(a2):
    _swap(a2, "numpy", "2.1.0")
    _metadata(a2, "torch_npu-2.6.0.post5.dist-info", "torch-npu", "2.6.0.post5", ['numpy<2; extra == "test"'])
    c = _check(a2, "numpy 2 where <2 is needed")
    assert c.status == "ok"


def test_numpy_missing_next_to_torch_npu(a2):
    _remove(a2, *(d.relative_to(a2) for d in _site(a2).glob("numpy-*.dist-info")))
    c = _check(a2, "numpy 2 where <2 is needed")
    assert c.status == "warn" and "EH9999" in c.detail


def test_cuda_torch_by_local_label(a2):
    _swap(a2, "torch", "2.6.0+cu124")
    c = _check(a2, "CUDA torch with torch_npu")
    assert c.status == "fail" and "+cu124" in c.detail and "torch==2.6.0+cpu" in c.fix


def test_busy_chip_outside_visible_devices_is_ok(root_copy):
    root = root_copy("hazard-npu-held")  # NPU 1 is busy
    _set_env(root, ASCEND_RT_VISIBLE_DEVICES="0")
    c = _check(root, "NPU held by another process")
    assert c.status == "ok" and "outside ASCEND_RT_VISIBLE_DEVICES" in c.detail
    _set_env(root, ASCEND_RT_VISIBLE_DEVICES="0,1")
    assert _check(root, "NPU held by another process").status == "fail"


def test_visible_devices_beyond_the_chips(a2):  # two chips
    _set_env(a2, ASCEND_RT_VISIBLE_DEVICES="0,5")
    c = _check(a2, "npu devices")
    assert c.status == "warn" and "[5]" in c.detail


def test_control_nodes_missing(a2):
    (a2 / "dev/davinci_manager").unlink()
    c = _check(a2, "npu devices")
    assert c.status == "fail" and "/dev/davinci_manager" in c.detail


def test_autoload_disabled(a2):
    _set_env(a2, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    c = _check(a2, "torch_npu autoload")
    assert c.status == "warn" and "import torch_npu" in c.fix


def test_driver_library_listed_but_absent(a2):
    _remove(a2, "usr/local/Ascend/driver/lib64/common", "usr/local/Ascend/driver/lib64/driver")
    c = _check(a2, "driver libraries")
    assert c.status == "fail" and "does not exist" in c.detail


def test_set_env_pointing_nowhere(a2):
    _set_env(a2, ASCEND_HOME_PATH="/usr/local/Ascend/cann-8.3.RC1")
    c = _check(a2, "set_env.sh not sourced")
    assert c.status == "fail" and "does not exist" in c.detail
    assert c.fix.startswith("source /usr/local/Ascend/cann-8.5.0/set_env.sh")


def test_partial_cann_copy(a2):
    _remove(a2, "usr/local/Ascend/cann-8.5.0/runtime")
    c = _check(a2, "torch_npu without CANN")
    assert c.status == "fail" and "runtime/" in c.detail


def test_two_cann_installs(a2):
    info = a2 / "usr/local/Ascend/cann-8.3.RC1/aarch64-linux/ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text("package_name=Ascend-cann-toolkit\nversion=8.3.RC1\narch=aarch64\n")
    report = _report(a2)
    c = _check(report, "cann")
    assert c.status == "warn" and "8.3.RC1" in c.detail and "selected by ASCEND_HOME_PATH" in c.detail
    assert report.observed.cann.value == "8.5.0"


def test_npu_health_warning(a2):
    info = a2 / "var/log/envkit/npu-smi/info.txt"
    info.write_text(info.read_text().replace("| OK            |", "| Warning       |", 1))
    c = _check(a2, "npu health")
    assert c.status == "warn" and "NPU 0 chip 0: Warning" in c.detail


def test_firmware_range_checked_from_the_board_when_no_firmware_file(root_copy):
    root = root_copy("hazard-fw-mismatch")
    (root / "usr/local/Ascend/firmware/version.info").unlink()
    c = _check(root, "driver/firmware compatibility")
    assert c.status == "fail" and "firmware 7.3.0.1.231 is outside" in c.detail


def test_validation_judges_a_driver_patch_by_its_own_firmware_range(root_copy):
    report = _report(root_copy("hazard-fw-mismatch"))  # driver 24.1.rc2.2: a patch of 24.1.RC2, fw [7.0.0,7.2.99]
    c = _check(report, "stack validation")
    assert c.status == "fail" and "driver 24.1.rc2.2 (a patch of HDK 24.1.RC2) allows firmware [7.0.0,7.2.99]" in c.detail
    assert report.observed.driver.value == "24.1.rc2.2"  # the exact patch, as observed


def test_an_observed_patch_build_validates_as_its_release(root_copy):
    root = root_copy("healthy-a2")  # driver 25.5.0
    info = root / "usr/local/Ascend/driver/version.info"
    info.write_text(info.read_text().replace("Version=25.5.0", "Version=25.5.0.3"))
    report = _report(root)
    c = _check(report, "stack validation")
    assert c.status == "ok" and "driver 25.5.0.3 is validated as HDK 25.5.0" in c.detail
    assert report.observed.driver.value == "25.5.0.3"


def test_validation_sets_aside_unknown_versions(root_copy):
    root = root_copy("hazard-fw-mismatch")
    info = root / "usr/local/Ascend/driver/version.info"
    info.write_text(info.read_text().replace("24.1.rc2.2", "24.1.rc4.2"))  # a patch of a release nobody names
    c = _check(_report(root), "stack validation")
    assert c.status == "warn" and "set aside: driver 24.1.rc4.2" in c.detail


def test_validation_marks_facts_as_observed(root_copy):
    report = _report(root_copy("hazard-numpy2"))
    chain = [fact for conflict in report.validation["conflicts"] for fact in conflict["chain"]]
    assert any(f["kind"] == "observed" and "numpy" in f["fact"] for f in chain)


def test_validator_is_injectable(a2):
    calls = []

    class Valid:
        valid = True
        hints: list[str] = []

        def model_dump(self, mode="json"):
            return {"valid": True}

    def fake(stack, *, origin, where):
        calls.append((dict(stack), origin, dict(where)))
        return Valid()

    report = _report(a2, validator=fake)
    ((stack, origin, where),) = calls
    assert origin == "observed" and stack["chip"] == "910b"
    assert where["driver"] == "observed: /usr/local/Ascend/driver/version.info"
    assert _check(report, "stack validation").status == "ok"


def test_drift_compares_versions_not_spellings():
    obs = Observed(
        driver=ObservedValue(value="24.1.rc3", source="f"),
        torch=ObservedValue(value="2.6.0+cpu", source="p"),
        chip=ObservedValue(value="910B", source="npu-smi"),
    )
    items, check = drift(obs, {"driver": "24.1.RC3", "torch": "2.6.0", "chip": "910b", "cann": "8.5.0"})
    assert [(d.component, d.status) for d in items] == [
        ("driver", "match"),
        ("cann", "not observed"),
        ("chip", "match"),
        ("torch", "match"),
    ]
    assert check.status == "warn" and "cann" in check.detail

"""`envkit image run-args`: devices and mounts per chip, from the matrix."""

from __future__ import annotations

import json

import pytest

from envkit.core.matrix import load_matrix
from envkit.errors import BadInput
from envkit.export.container import ChipDevices, chip_from_lock, chip_from_row, parse_devices
from envkit.export.runargs import run_args


def chip_from_matrix(chip_id: str) -> ChipDevices:
    """As `envkit image run-args --chip` looks the chip up."""
    return chip_from_row(load_matrix().chips[chip_id])


def test_910b_default_eight() -> None:
    ra = run_args(chip_from_matrix("910b"), None)
    assert [d for d in ra.devices if d[-1].isdigit()] == [f"/dev/davinci{i}" for i in range(8)]
    for d in ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"):
        assert d in ra.devices
    targets = [m[1] for m in ra.mounts]
    for t in (
        "/usr/local/Ascend/driver/lib64",
        "/usr/local/Ascend/driver/version.info",
        "/usr/local/bin/npu-smi",
        "/usr/local/dcmi",
        "/etc/ascend_install.info",
        "/usr/local/Ascend/driver/tools/hccn_tool",
    ):
        assert t in targets
    assert all(m[2] == "ro" for m in ra.mounts)
    assert ra.runtime_env == {"ASCEND_VISIBLE_DEVICES": "0-7"}


def test_a3_sixteen_and_950_driver_dir() -> None:
    assert sum(d[-1].isdigit() for d in run_args(chip_from_matrix("a3"), None).devices) == 16
    ra = run_args(chip_from_matrix("950"), None)
    assert ("/usr/local/Ascend/driver", "/usr/local/Ascend/driver", "ro") in ra.mounts
    assert "/usr/local/Ascend/driver/lib64" not in [m[1] for m in ra.mounts]


def test_devices_ranges() -> None:
    assert parse_devices("0-3,7") == [0, 1, 2, 3, 7]
    ra = run_args(chip_from_matrix("910b"), "0-2,5")
    assert ra.runtime_env["ASCEND_VISIBLE_DEVICES"] == "0-2,5"
    with pytest.raises(BadInput):
        run_args(chip_from_matrix("910b"), "0-9")
    with pytest.raises(BadInput, match="depends on the cards"):
        run_args(chip_from_matrix("310p"), None)


def test_an_unknown_chip_is_bad_input(run_cli) -> None:
    r = run_cli("image", "run-args", "--chip", "h100")
    assert r.code == 2 and "unknown chip 'h100'" in r.err and "910b" in r.err


def test_cli_formats(capsys) -> None:
    from envkit.cli import main

    for fmt in ("json", "compose", "flags"):
        with pytest.raises(SystemExit) as exc:
            main(["image", "run-args", "--chip", "910b", "--devices", "0-1", "--format", fmt])
        assert exc.value.code in (0, None)
        out = capsys.readouterr().out
        if fmt == "json":
            assert json.loads(out)["ascend_docker_runtime"]["env"] == {"ASCEND_VISIBLE_DEVICES": "0-1"}
        elif fmt == "compose":
            assert "/dev/davinci1:/dev/davinci1" in out
        else:
            assert "--device /dev/davinci0" in out and "ASCEND_VISIBLE_DEVICES=0-1" in out


@pytest.mark.parametrize(
    ("chip", "resource", "count", "driver_dir"),
    [("910b", "huawei.com/Ascend910", 8, False), ("a3", "huawei.com/Ascend910", 16, False), ("950", "huawei.com/npu", 8, True)],
)
def test_container_facts_come_from_the_lock_alone(tmp_path, run_cli, chip, resource, count, driver_dir) -> None:
    """One model for every runtime: the same devices and mounts as run-args, the image's environment and tag, and
    the device-plugin resource the lock records (schema 3)."""
    from envkit.export.container import DRIVER, container_facts, default_tag
    from envkit.lock.file import read_lock

    path = tmp_path / f"{chip}.lock"
    assert run_cli("resolve", "--chip", chip, "-o", str(path)).code == 0
    lock = read_lock(path)
    facts = container_facts(lock)
    assert facts.device_plugin_resource == resource == lock.platform.device_plugin_resource
    assert facts.device_count == count and facts.visible_devices == f"0-{count - 1}"
    assert list(facts.devices) == run_args(chip_from_lock(lock), None).devices
    assert ((DRIVER, DRIVER, "ro") in facts.mounts) is driver_dir
    env = dict(facts.environment)
    assert env["ASCEND_TOOLKIT_HOME"] == lock.layout.home and env["ENVKIT_LOCK"] == "/etc/envkit/envkit.lock"
    assert facts.image_tag == default_tag(lock)
    two = container_facts(lock, "2-3")
    assert two.device_count == 2 and two.visible_devices == "2-3" and "/dev/davinci2" in two.devices

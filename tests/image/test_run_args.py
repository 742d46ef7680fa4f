"""`envkit image run-args`: devices and mounts per chip, from the matrix."""

from __future__ import annotations

import json

import pytest

from envkit.errors import BadInput
from envkit.export.runargs import ChipDevices, chip_from_row, parse_devices, run_args
from envkit.matrix import load_matrix


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

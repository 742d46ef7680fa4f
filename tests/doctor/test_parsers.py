"""Parsers against the published samples (tests/fixtures/samples/SOURCES.md)."""

from __future__ import annotations

import pytest

from envkit.jobs.doctor.parsers import (
    ParseError,
    chip_from_npu_smi,
    chip_from_package_name,
    npu_smi_error,
    parse_ascend_install_info,
    parse_component_version_info,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_kv,
    parse_npu_smi_board,
    parse_npu_smi_info,
    parse_os_release,
    parse_package_install_info,
)
from envkit.versions import in_any_range

from .conftest import sample

# --------------------------------------------------------------------------- version.info


def test_driver_version_info_24_1_rc3():
    d = parse_driver_version_info(sample("version-info/driver-24.1.rc3.info"))
    assert d.version == "24.1.rc3"  # kept as written: lower-case rc
    assert d.package_version == "24.1.rc3"
    assert d.innerversion == "V100R001C19SPC001B124"
    assert d.compatible_fw == [("7.0.0", "7.5.99")]
    assert in_any_range("7.5.0.1.129", d.compatible_fw)


def test_driver_version_info_two_ranges():
    d = parse_driver_version_info(sample("version-info/driver-25.3.rc1.info"))
    assert d.version == "25.3.rc1"
    assert d.compatible_fw == [("6.4.0", "6.4.99"), ("7.0.0", "8.9.9")]


def test_firmware_version_info_keeps_both_versions():
    fw = parse_firmware_version_info(sample("version-info/firmware-7.5.0.1.129.info"))
    assert fw.version == "7.5.0.1.129"  # the firmware's own
    assert fw.package_version == "24.1.rc3"  # the HDK release: what the lock calls firmware
    assert fw.compatible_drv == [("23.0.0", "23.0.0."), ("24.0", "24.0."), ("24.1", "24.1.")]
    assert in_any_range("24.1.rc3", fw.compatible_drv)
    assert not in_any_range("25.0.rc1", fw.compatible_drv)


def test_the_published_mismatch_is_outside_the_range():
    d = parse_driver_version_info(sample("version-info/driver-24.1.rc2.2.info"))
    fw = parse_firmware_version_info(sample("version-info/firmware-7.3.0.1.231.info"))
    assert not in_any_range(fw.version, d.compatible_fw)


def test_upper_case_keys_and_crlf_are_accepted():
    d = parse_driver_version_info("VERSION=24.1.RC3\r\nCompatible_Version_FW=[7.0.0,7.5.99]\r\n")
    assert d.version == "24.1.RC3"
    assert d.compatible_fw == [("7.0.0", "7.5.99")]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("   \n\n", "empty"),
        ("hello world\n", "no key=value"),
        ("package_version=24.1.rc3\n", "no Version="),
        ("Version=banana\n", "not a version"),
        ("Version=24.1.rc3\ncompatible_version_fw=7.0.0-7.5.99\n", "not a list of version ranges"),
    ],
)
def test_driver_version_info_bad_inputs(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_driver_version_info(text)


def test_binary_is_refused():
    with pytest.raises(ParseError, match="binary"):
        parse_driver_version_info(b"\x7fELF\x02\x01\x01\x00Version=1")
    with pytest.raises(ParseError, match="binary"):
        parse_driver_version_info(b"Version=\xff\xfe24.1")


# --------------------------------------------------------------------------- install records


def test_toolkit_install_info_8_1_alpha():
    info = parse_package_install_info(sample("install-info/ascend_toolkit_install-8.1.RC1.alpha001.info"))
    assert info.package_name == "Ascend-cann-toolkit"
    assert info.version == "8.1.RC1.alpha001"
    assert info.arch == "aarch64"
    assert info.path == "/data/8.1/ascend-toolkit/8.1.RC1.alpha001/aarch64-linux"


def test_toolkit_install_info_8_0_0():
    info = parse_package_install_info(sample("install-info/ascend_toolkit_install-8.0.0.info"))
    assert (info.version, info.innerversion) == ("8.0.0", "V100R001C20SPC001B251")


def test_truncated_install_info():
    text = sample("install-info/ascend_toolkit_install-8.0.0.info")
    with pytest.raises(ParseError, match="no version="):
        parse_package_install_info(text[: text.index("version=")])


def test_component_version_info_release():
    opp = parse_component_version_info(sample("install-info/opp-version-8.5.0.info"))
    assert (opp.version, opp.release) == ("8.5.0.2.220", "8.5.0")
    ops9 = parse_component_version_info(sample("install-info/ops-version-9.0.0.info"))
    assert ops9.version_dir == "cann" and ops9.release == "9.0.0"


def test_ascend_install_info():
    rec = parse_ascend_install_info(sample("install-info/ascend_install.info"))
    assert rec.driver_install_path == "/usr/local/Ascend"
    assert rec.user == "HwHiAiUser"
    assert rec.fields["Driver_Install_Status"] == "complete"


@pytest.mark.parametrize(
    "name, chip",
    [
        ("Ascend-cann-kernels-910b", "910b"),
        ("Ascend-cann-kernels-910", "910"),
        ("Atlas-A3-cann-kernels", "a3"),
        ("Ascend-cann-A3-ops", "a3"),
        ("Ascend-cann-910b-ops", "910b"),
        ("Ascend-cann-310p-ops", "310p"),
        ("Ascend-cann-950-ops", "950"),
        ("Ascend-cann-toolkit", None),
    ],
)
def test_chip_from_package_name(name, chip):
    assert chip_from_package_name(name) == chip


def test_os_release():
    o = parse_os_release('NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    assert o.key == "ubuntu22.04"
    assert parse_os_release('ID="openEuler"\nVERSION_ID="24.03"\n').key == "openeuler24.03"
    assert parse_os_release("ID=kylin\nVERSION_ID=V10\n").key == "kylinv10"
    with pytest.raises(ParseError):
        parse_os_release('ID="$(rm -rf /)"\n')


def test_parse_kv_quotes_comments_export():
    kv = parse_kv("# comment\nexport A=\"1 2\"\nB='x'\n  C = 3  \nnot a line\n")
    assert kv == {"A": "1 2", "B": "x", "C": "3"}


# --------------------------------------------------------------------------- npu-smi info


def test_npu_smi_a2_single():
    info = parse_npu_smi_info(sample("npu-smi/a2-910b3-24.1.rc1.txt"))
    assert info.version == "24.1.rc1"
    assert info.second_column == "none"
    assert [(c.npu, c.chip, c.name, c.health, c.bus_id) for c in info.chips] == [(0, 0, "910B3", "OK", "0000:C1:00.0")]
    assert info.processes == [] and info.idle_npus == [0]
    assert chip_from_npu_smi(info).chip == "910b"


def test_npu_smi_a2_four_npus_with_a_warning():
    info = parse_npu_smi_info(sample("npu-smi/a2-910b1-24.1.0-4npu.txt"))
    assert info.npu_ids == [0, 1, 2, 3]
    assert info.chips_per_npu == 1
    assert [c.health for c in info.chips] == ["OK", "OK", "OK", "Warning"]


def test_npu_smi_variant_name_and_redacted_bus():
    info = parse_npu_smi_info(sample("npu-smi/a2-910b4-1-25.2.0.txt"))
    assert info.names == ["910B4-1"] and len(info.chips) == 2
    assert chip_from_npu_smi(info).chip == "910b"


def test_npu_smi_processes_a2():
    info = parse_npu_smi_info(sample("npu-smi/a2-910b4-24.1.1-busy.txt"))
    assert [(p.npu, p.chip, p.pid, p.name, p.memory_mb) for p in info.processes] == [
        (0, 0, 2178054, "python3.10", 23411),
        (1, 0, 2178055, "python3.10", 25930),
    ]


def test_npu_smi_a3_two_chips_per_npu_with_processes():
    info = parse_npu_smi_info(sample("npu-smi/a3-ascend910-26.0.rc2-procs.txt"))
    assert info.version == "26.0.rc2"
    assert info.second_column == "phy-id"
    assert [(c.npu, c.chip, c.phy_id) for c in info.chips] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert info.chips_per_npu == 2
    assert [(p.npu, p.chip, p.pid, p.name, p.memory_mb) for p in info.processes] == [(0, 0, 632268, "python3.1", 197)]
    assert info.idle_npus == [1]
    assert chip_from_npu_smi(info).chip == "a3"


def test_npu_smi_a3_25_2_1():
    info = parse_npu_smi_info(sample("npu-smi/a3-ascend910-25.2.1.txt"))
    assert len(info.chips) == 4 and chip_from_npu_smi(info).chip == "a3"


@pytest.mark.parametrize("name", ["npu-smi/310p3-25.2.0.txt", "npu-smi/310p3-25.0.rc1.b033.txt"])
def test_npu_smi_310p(name):
    info = parse_npu_smi_info(sample(name))
    assert info.second_column == "device"
    assert info.names == ["310P3"]
    assert all(c.device is not None for c in info.chips)
    assert chip_from_npu_smi(info).chip == "310p"


def test_npu_smi_310p_build_version():
    info = parse_npu_smi_info(sample("npu-smi/310p3-25.0.rc1.b033.txt"))
    assert info.version == "25.0.rc1.b033"
    assert [(c.npu, c.chip, c.device) for c in info.chips] == [(1, 0, 0), (1, 1, 1), (2, 0, 2), (2, 1, 3)]


def test_npu_smi_910_prob():
    info = parse_npu_smi_info(sample("npu-smi/910prob-24.1.0.txt"))
    assert chip_from_npu_smi(info).chip == "910"


def test_npu_smi_bare_910b_name_is_flagged():
    text = sample("npu-smi/a2-910b3-24.1.rc1.txt").replace("910B3", "910B ")
    ident = chip_from_npu_smi(parse_npu_smi_info(text))
    assert ident.chip == "910b" and "910A" in (ident.note or "")


def test_npu_smi_device_in_use_error():
    text = sample("npu-smi/error-device-used.txt")
    assert "-8020" in (npu_smi_error(text) or "")
    with pytest.raises(ParseError, match="device is used"):
        parse_npu_smi_info(text)


def test_npu_smi_truncated_after_header():
    text = sample("npu-smi/a2-910b3-24.1.rc1.txt")
    cut = text[: text.index("| 0     910B3")]
    with pytest.raises(ParseError, match="no chip rows"):
        parse_npu_smi_info(cut)
    with pytest.raises(ParseError, match="table header"):
        parse_npu_smi_info("command not found\n")


# --------------------------------------------------------------------------- npu-smi board


def test_board_info():
    b = parse_npu_smi_board(sample("board/board-910b-24.1.rc3.txt"))
    assert (b.npu_id, b.software_version, b.firmware_version, b.compatibility) == (0, "24.1.rc3", "7.5.0.1.129", "OK")
    nok = parse_npu_smi_board(sample("board/board-nok.txt"))
    assert nok.compatibility == "NOK"
    with pytest.raises(ParseError):
        parse_npu_smi_board("Error: invalid device id\n")

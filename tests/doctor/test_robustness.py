"""Garbled, truncated, empty and binary inputs: a clear "unparsed" result, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.jobs.doctor import parsers
from envkit.jobs.doctor.diagnose import diagnose
from envkit.jobs.doctor.observe import probe

from .conftest import SAMPLES

PARSERS = [
    parsers.parse_driver_version_info,
    parsers.parse_firmware_version_info,
    parsers.parse_ascend_install_info,
    parsers.parse_package_install_info,
    parsers.parse_component_version_info,
    parsers.parse_os_release,
    parsers.parse_npu_smi_info,
    parsers.parse_npu_smi_board,
]

SAMPLE_TEXTS = sorted(p.read_text() for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".txt", ".info"))

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_parse_errors(parser, data) -> None:
    """The parser returns a value or raises ParseError with a reason; any other exception fails the test."""
    try:
        parser(data)
    except parsers.ParseError as exc:
        assert str(exc).strip()  # a reason, never an empty message


@FAST
@given(data=st.binary(max_size=400))
def test_random_bytes(data):
    for parser in PARSERS:
        _only_parse_errors(parser, data)


@FAST
@given(text=st.text(max_size=400))
def test_random_text(text):
    for parser in PARSERS:
        _only_parse_errors(parser, text)


@FAST
@given(idx=st.integers(0, len(SAMPLE_TEXTS) - 1), cut=st.floats(0, 1), junk=st.text(max_size=20))
def test_truncated_samples_with_junk(idx, cut, junk):
    text = SAMPLE_TEXTS[idx]
    piece = text[: int(len(text) * cut)] + junk
    for parser in PARSERS:
        _only_parse_errors(parser, piece)


@FAST
@given(idx=st.integers(0, len(SAMPLE_TEXTS) - 1), pos=st.integers(0, 3000), byte=st.integers(0, 255))
def test_one_corrupted_byte(idx, pos, byte):
    raw = bytearray(SAMPLE_TEXTS[idx].encode())
    raw[pos % len(raw)] = byte
    for parser in PARSERS:
        _only_parse_errors(parser, bytes(raw))


@FAST
@given(lines=st.lists(st.sampled_from([ln for t in SAMPLE_TEXTS if t.startswith("+") for ln in t.splitlines()]), max_size=30))
def test_shuffled_npu_smi_lines(lines):
    """Any arrangement of real npu-smi lines parses or fails with a reason; chips come in pairs."""
    try:
        info = parsers.parse_npu_smi_info("\n".join(lines))
    except parsers.ParseError as exc:
        assert str(exc).strip()
        return
    # each chip is made of its two rows: the NPU row (name, health) and the chip row (bus id)
    assert info.chips and all(c.name and c.health and c.bus_id for c in info.chips)
    assert set(info.idle_npus) | {p.npu for p in info.processes} <= set(info.npu_ids) | set(info.idle_npus)


def test_oversized_input():
    with pytest.raises(parsers.ParseError, match="too large"):
        parsers.parse_driver_version_info(b"Version=1.0\n" * 200_000)


GARBAGE = [
    b"",
    b"\x00\x01\x02\x03",
    b"\xff\xfe\xfd",
    b"Version=",
    b"=====\n=====",
    b"Version=24.1.rc3\x1b[31m\x07\x08\x0b\x0c\x0e\x0f\x10",
]


# file in the root -> (the check that reads it, how its finding starts)
SOURCES = {
    "usr/local/Ascend/driver/version.info": ("driver", "unparsed: /usr/local/Ascend/driver/version.info: "),
    "usr/local/Ascend/firmware/version.info": ("firmware", "unparsed: /usr/local/Ascend/firmware/version.info: "),
    "usr/local/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info": (
        "cann",
        "unparsed: /usr/local/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info: ",
    ),
    "etc/os-release": ("os", "unparsed: /etc/os-release: "),
    "etc/ascend_install.info": ("install record", "unparsed: /etc/ascend_install.info: "),
    "var/log/envkit/npu-smi/info.txt": ("npu-smi", "unparsed: /var/log/envkit/npu-smi/info.txt (recorded output"),
    "var/log/envkit/npu-smi/board-0.txt": ("npu board", "unparsed: /var/log/envkit/npu-smi/board-0.txt (recorded"),
    "etc/environment": ("set_env.sh not sourced", "environment unknown: /etc/environment in the root (unparsed: "),
}
KV_FILES = {"etc/ascend_install.info", "etc/environment"}  # plain KEY=VALUE: "Version=" is a valid one


@pytest.mark.parametrize("junk", GARBAGE)
@pytest.mark.parametrize("rel", sorted(SOURCES))
def test_garbage_in_any_file_of_a_root(root_copy, rel, junk):
    root = root_copy("healthy-a2")
    (root / rel).write_bytes(junk)
    report = diagnose(probe(str(root), timeout=10))
    name, finding = SOURCES[rel]
    mine = [c for c in report.checks if c.name == name]
    if rel in KV_FILES and junk == b"Version=":
        assert mine and not any(c.detail.startswith(("unparsed", "environment unknown")) for c in mine)
        return
    assert [c.status for c in mine if c.detail.startswith(finding)] == ["warn"], [c.detail for c in mine]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=st.sampled_from(sorted(set(SOURCES) - KV_FILES)), junk=st.binary(min_size=1, max_size=200))
def test_random_bytes_in_a_root_file_name_that_file(root_copy, rel, junk):
    """Whatever bytes a version file holds, the doctor either reads a value from it or says `unparsed:`
    naming that file; never an exception, never a finding about another file."""
    root = root_copy("healthy-a2")  # a fresh copy for each example
    (root / rel).write_bytes(junk)
    try:
        report = diagnose(probe(str(root), timeout=10))
    finally:
        shutil.rmtree(root)
    name, finding = SOURCES[rel]
    details = [c.detail for c in report.checks if c.name == name]
    assert details, f"no {name} check"
    bad = [d for d in details if d.startswith(("unparsed", "unreadable"))]
    assert all(d.startswith(finding) for d in bad), bad


def test_garbled_fixture_reports_unparsed(root_copy):
    report = diagnose(probe(str(root_copy("garbled")), timeout=10))
    unparsed = {c.name for c in report.checks if c.detail.startswith("unparsed:")}
    assert {"driver", "firmware", "cann", "npu-smi", "os"} <= unparsed
    assert report.observed.driver is None and report.observed.os is None
    # what could be read is still reported: the operator package names the chip
    assert report.observed.chip is not None and report.observed.chip.value == "910b"


def test_unreadable_file_is_reported(root_copy, tmp_path: Path):
    root = root_copy("healthy-a2")
    target = root / "usr/local/Ascend/driver/version.info"
    target.unlink()
    target.mkdir()  # a folder where a file should be
    report = diagnose(probe(str(root), timeout=10))
    driver = next(c for c in report.checks if c.name == "driver")
    assert driver.status == "warn" and "is a directory" in driver.detail

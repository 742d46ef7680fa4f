"""`envkit image run-args --devices` at both ends of a chip's NPU ids (issue #35).

Held, for every chip whose matrix row (and lock, `platform.davinci_devices`) gives its /dev/davinciN count N: 0 and
N-1 are accepted, alone, as a range's end and in a list; N is refused with exit 2 and a message naming the ids the
host has, alone, as a range's end (`4-8`) and in a list (`0,8`), so that no `/dev/davinciN` or
`ASCEND_VISIBLE_DEVICES=4-N` is ever emitted. Negative ids and garbage are refused (exit 2, no traceback), within a
time bound: a range of 10^11 ids is refused before it is expanded, a 5,000-digit id before it is converted,
Unicode digits (`٣`, `𝟕`) are not digits here. A chip whose count depends on the cards (310P) takes ids up to
`bounded.MAX_DEVICE_ID` and no further.
"""

from __future__ import annotations

import json
import time

import pytest

from envkit.core.matrix import load_matrix
from envkit.errors import BadInput
from envkit.export.container import chip_from_row, parse_devices
from envkit.export.runargs import run_args
from envkit.io.bounded import MAX_DEVICE_ID
from tests.conftest import plain_id

COUNTS = {cid: row.davinci_devices for cid, row in load_matrix().chips.items() if row.davinci_devices is not None}
UNKNOWN = sorted(cid for cid, row in load_matrix().chips.items() if row.davinci_devices is None)


def test_the_counts_are_the_matrix_facts():
    """The counts the boundaries below are drawn from (A2 and 950: 8 per server, A3: 16)."""
    assert COUNTS["910b"] == 8 and COUNTS["a3"] == 16 and COUNTS["950"] == 8
    assert "310p" in UNKNOWN


def _accepted(n: int) -> list[tuple[str, list[int]]]:
    top = n - 1
    return [
        ("0", [0]),
        (str(top), [top]),
        (f"0-{top}", list(range(n))),
        (f"{top - 3}-{top}", list(range(top - 3, n))),
        (f"{top}-{top}", [top]),
        (f"0,{top}", [0, top]),
        (f" {top} , 0 ", [0, top]),
    ]


def _refused(n: int) -> list[str]:
    return [str(n), f"{n - 4}-{n}", f"{n}-{n}", f"0,{n}", f"0-{n}", f"{n - 1},{n}", str(n + 1), f"0-3,{n}-{n + 2}"]


@pytest.mark.parametrize("chip", sorted(COUNTS))
def test_the_highest_id_is_accepted_and_the_count_refused(chip):
    n = COUNTS[chip]
    facts = chip_from_row(load_matrix().chips[chip])
    for text, ids in _accepted(n):
        ra = run_args(facts, text)
        assert [d for d in ra.devices if d[-1].isdigit()] == [f"/dev/davinci{i}" for i in ids], text
    for text in _refused(n):
        with pytest.raises(BadInput, match=f"/dev/davinci0..{n - 1}") as exc:
            run_args(facts, text)
        assert exc.value.exit_code == 2, text


@pytest.mark.parametrize("chip", sorted(COUNTS))
def test_the_cli_refuses_the_count_with_exit_2_and_emits_nothing(chip, run_cli):
    n = COUNTS[chip]
    r = run_cli("image", "run-args", "--chip", chip, "--devices", f"{n - 1}", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert f"/dev/davinci{n - 1}" in doc["devices"] and doc["ascend_docker_runtime"]["env"]["ASCEND_VISIBLE_DEVICES"] == str(
        n - 1
    )
    for text in (str(n), f"{n - 4}-{n}", f"0,{n}"):
        for fmt in ("flags", "json", "compose"):
            r = run_cli("image", "run-args", "--chip", chip, "--devices", text, "--format", fmt)
            assert r.code == 2, (text, fmt, r.out)
            assert f"--devices {text}: " in r.err and f"/dev/davinci0..{n - 1}" in r.err, r.err
            assert f"davinci{n}" not in r.out and "ASCEND_VISIBLE_DEVICES" not in r.out and "Traceback" not in r.err


def test_the_lock_holds_the_same_bounds(run_cli, tmp_path):
    """`--lock`: the count is the lock's `platform.davinci_devices`, not the matrix's."""
    lock = tmp_path / "910b.lock"
    assert run_cli("-q", "resolve", "--chip", "910b", "--arch", "aarch64", "-o", str(lock)).code == 0
    r = run_cli("image", "run-args", "--lock", str(lock), "--devices", "4-7", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["ascend_docker_runtime"]["env"]["ASCEND_VISIBLE_DEVICES"] == "4-7", r.err
    r = run_cli("image", "run-args", "--lock", str(lock), "--devices", "4-8")
    assert r.code == 2 and "/dev/davinci0..7" in r.err and "davinci8" not in r.out, r.err


GARBAGE = [
    "-1",
    "-0",
    "0--1",
    "-1-3",
    "",
    " ",
    ",",
    "1,,2",
    "0-",
    "a",
    "0x1",
    "1.0",
    "+1",
    "1_0",
    "1 2",
    "3-1",  # backwards
    "٣",  # Arabic-Indic three: int() reads it as 3
    "𝟕",  # mathematical bold seven: int() reads it as 7
    "²",
    "0-99999999999",  # 10^11 ids: refused before a set of them is built
    "99999999999-99999999999",
    "9" * 5000,  # int() refuses it past 4,300 digits (an internal error, not exit 2)
    "0-" + "9" * 5000,
    "0\n1",
]


@pytest.mark.parametrize("text", GARBAGE, ids=[f"{i}-'{plain_id(t[:10])}'" for i, t in enumerate(GARBAGE)])
def test_negative_and_garbage_ids_are_refused_promptly(text, run_cli):
    start = time.monotonic()
    with pytest.raises(BadInput) as exc:
        parse_devices(text)
    assert exc.value.exit_code == 2 and len(exc.value.message) < 200
    for chip in ("910b", "310p"):
        r = run_cli("image", "run-args", "--chip", chip, "--devices", text)
        assert r.code == 2 and "--devices" in r.err and "Traceback" not in r.err and "internal error" not in r.err, r.err
        assert "/dev/davinci" not in r.out
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("chip", UNKNOWN)
def test_a_chip_of_unknown_count_takes_ids_up_to_the_bound(chip):
    facts = chip_from_row(load_matrix().chips[chip])
    ra = run_args(facts, f"0,{MAX_DEVICE_ID}")
    assert ra.runtime_env == {"ASCEND_VISIBLE_DEVICES": f"0,{MAX_DEVICE_ID}"}
    for text in (str(MAX_DEVICE_ID + 1), f"0-{MAX_DEVICE_ID + 1}"):
        with pytest.raises(BadInput, match=f"device ids are 0 to {MAX_DEVICE_ID}"):
            run_args(facts, text)

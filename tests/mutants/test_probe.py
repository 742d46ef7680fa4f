"""The probe module's decisions at the edges `make mutation MODULES=ansible` found unchecked: one Huawei PCI device
is an Ascend host, the free-space message's rounding and a play that sets no minimum, a user whose group is not
there yet, the firmware range list at its length cap and with spaces, a driver with no stated firmware range, and
a verdict without a doctor line."""

from __future__ import annotations

import pytest

from tests.provision.conftest import load_probe
from tests.provision.test_probe_decide import FACTS, GIB_KB, LOCK_SHA1, _smoke, preflight, state

P = load_probe()


@pytest.mark.parametrize("devices", [1, 2])
def test_one_huawei_pci_device_is_an_ascend_host(devices):
    assert P.preflight_decide(preflight(require_npu=True), FACTS, state(pci_devices=devices)) == ([], [], False)
    assert P.preflight_decide(preflight(), FACTS, state(pci_devices=devices)) == ([], [], False)


def test_the_free_space_message_rounds_to_one_decimal_of_a_gib():
    errors, _, _ = P.preflight_decide(preflight(), FACTS, state(free_kb=1101005))  # 1.050000... GiB
    assert errors == ["/usr/local/Ascend has 1.1 GiB free; the stack needs 10 GiB."]


def test_a_play_without_a_minimum_free_space_refuses_none():
    e = preflight()
    del e["min_free_gb"]
    assert P.preflight_decide(e, FACTS, state(free_kb=GIB_KB // 2)) == ([], [], False)


def test_a_user_whose_group_is_missing_is_made():
    assert P.preflight_decide(preflight(), FACTS, state(groups={})) == ([], [], True)


def test_a_range_list_at_its_length_cap_is_read_and_one_character_more_is_refused():
    one = "[7.0.0,7.5.99]"
    text = ",".join([one] * (P.MAX_RANGES_LENGTH // (len(one) + 1)))
    text += " " * (P.MAX_RANGES_LENGTH - len(text))  # spaces are not part of a range: padded to the cap exactly
    assert len(text) == P.MAX_RANGES_LENGTH and P.parse_ranges(text)[0] == ("7.0.0", "7.5.99")
    with pytest.raises(P.InvalidVersion, match="1025 characters long"):
        P.parse_ranges(text + " ")


def test_spaces_inside_a_range_list_are_ignored():
    assert P.parse_ranges("[7.0.0, 7.5.99], [8.0 ,8.0.]") == [("7.0.0", "7.5.99"), ("8.0", "8.0.")]


def test_a_driver_that_states_no_firmware_range_leaves_the_firmware_unchecked():
    e = {"driver": {"package_version": "25.2.0"}, "firmware": {"firmware_version": "7.5.0.1.220"}}
    got = P.firmware_range_check(e, ["driver", "firmware"], "[1.0,2.0]")
    assert got == {"fw_range": "", "fw_checked": False, "fw_in_range": None, "fw_error": ""}


def test_a_verdict_without_a_doctor_line_says_not_run(tmp_path):
    stale, verdict = P.smoke_decide(_smoke(tmp_path, {"smoke": "ok: npu", "lock_sha1": LOCK_SHA1}))
    assert stale is False and verdict["doctor"] == "not run (unchanged)" and verdict["smoke"] == "ok: npu (unchanged)"


def test_a_play_without_the_locks_sha1_reruns_even_where_the_host_holds_no_lock_and_no_verdict_names_one(tmp_path):
    e = _smoke(tmp_path, {"smoke": "ok: npu", "doctor": "ok"})
    (tmp_path / "envkit.lock").unlink()
    e["lock_sha1"] = ""
    assert P.smoke_decide(e)[0] is True

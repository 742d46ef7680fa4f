"""envkit/core/derive.py's seams, pinned for `make mutation MODULES=lockgate`: the check the command line passes to every
lock it reads (`matrix_check`), the schema 2 -> 3 migration (`upgrade`) on what a schema-2 file may hold, and
`without` (pydantic's `exclude`)."""

from __future__ import annotations

import copy

import pytest

from envkit.core.derive import gate, matrix_check, upgrade, without
from envkit.core.matrix import load_matrix
from envkit.lock.text import plain
from envkit.records import replace


def test_the_command_line_s_check_carries_the_gate_the_upgrade_and_the_user_s_choice():
    check = matrix_check()
    assert check.gate is gate and check.upgrade is upgrade and check.accept_edited is False
    assert matrix_check(accept_edited=True).accept_edited is True


def _schema2() -> dict:
    lm = load_matrix()
    chip = next(iter(lm.chips))
    arch = lm.model.arches[0].id
    return {"schema_version": 2, "stack": {"chip": chip, "arch": arch}, "platform": {"glibc": "2.35"}}


def test_a_schema_2_lock_is_lifted_with_what_its_chip_and_arch_derive():
    data = _schema2()
    new, fields = upgrade(copy.deepcopy(data), "old.lock")
    assert new["schema_version"] == 3 and new["stack"] == data["stack"]
    assert fields == ["platform.device_plugin_resource", "platform.hccl", "platform.kubernetes"]
    assert new["platform"]["glibc"] == "2.35" and new["platform"]["device_plugin_resource"]
    assert new["platform"]["kubernetes"]  # the shipped matrix has them for the first chip and arch


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.update(schema_version=1),
        lambda d: d.update(schema_version=3),
        lambda d: d.update(platform="not a mapping"),
        lambda d: d.update(stack=["chip"]),
        lambda d: d["stack"].update(chip=["910b"]),  # not a string (unhashable: never looked up)
        lambda d: d["stack"].update(chip="no-such-chip"),
    ],
    ids=["schema 1", "schema 3", "platform not a mapping", "stack not a mapping", "chip not a string", "unknown chip"],
)
def test_what_is_not_a_schema_2_lock_of_a_known_chip_is_not_lifted(spoil):
    data = _schema2()
    spoil(data)
    assert upgrade(data, "old.lock") is None


def test_an_arch_that_is_not_a_string_derives_no_kubernetes():
    data = _schema2()
    data["stack"]["arch"] = ["x86_64"]
    new, fields = upgrade(data, "old.lock")
    assert "kubernetes" not in new["platform"] and "platform.kubernetes" not in fields


def test_without_leaves_out_what_it_names_and_ignores_what_is_not_there():
    assert without({"a": 1, "b": {"c": 2, "d": 3}}, {"a": True, "b": {"c": True}, "x": True, "y": {"z": True}}) == {"b": {"d": 3}}


def test_a_chip_with_a_firmware_file_and_no_driver_file_gets_its_firmware_s_versions(lm):
    """build_artifacts: the firmware's package version and compatible driver range go on the firmware's own entry
    (the last one appended), also where it is the only one (no shipped chip has a firmware file without a driver
    file: the row is made in memory)."""
    from envkit.core.derive import build_artifacts, build_lock
    from envkit.core.resolve import pins_from_mapping, solve

    res = solve(lm, pins_from_mapping(lm, {}))
    assert res is not None
    stack = {k: v for k, v in plain(build_lock(lm, res, "envkit resolve").stack).items() if isinstance(v, str)}
    both = build_artifacts(lm, stack, res.rows)
    assert [a.component for a in both[:2]] == ["driver", "firmware"]
    chips = [replace(c, driver_file=None) if c.id == stack["chip"] else c for c in lm.model.chips]
    alone = build_artifacts(lm, stack, replace(res.rows, chip=next(c for c in chips if c.id == stack["chip"])))
    assert alone[0].component == "firmware" and "driver" not in [a.component for a in alone]
    assert (alone[0].package_version, alone[0].compatible) == (both[1].package_version, both[1].compatible)
    assert alone[0].package_version


def test_kubernetes_facts_take_the_chip_s_note_the_arch_s_label_and_the_weaker_confidence(lm):
    from envkit.core.derive import build_kubernetes

    k8s = lm.chips["950"].kubernetes
    assert k8s is not None and k8s.note
    aarch64 = next(a for a in lm.model.arches if a.id == "aarch64")
    facts = build_kubernetes(lm.chips["950"], aarch64)
    assert facts is not None and facts.note == k8s.note and facts.host_arch == "huawei-arm"
    # an arch the matrix does not know: the chip's facts alone, no host-arch label
    alone = build_kubernetes(lm.chips["950"], None)
    assert alone is not None and alone.host_arch is None and alone.source == list(k8s.sources)
    assert alone.accelerator == facts.accelerator
    # the weaker of the two rows' confidences (by the order stated < derived < inferred, not by name)
    chips = [replace(c, kubernetes=replace(c.kubernetes, confidence="derived")) if c.id == "910b" else c for c in lm.model.chips]
    assert build_kubernetes(lm.chips["910b"], aarch64).confidence == "stated"
    assert build_kubernetes(next(c for c in chips if c.id == "910b"), aarch64).confidence == "derived"

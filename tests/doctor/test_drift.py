"""Drift from a lock is decided on the whole version: a release candidate, a post release or a
driver patch that differs is drift, even when the release numbers (24.1, 2.6.0) are equal.

Each case here would pass if drift compared release numbers only, and fails on that bug."""

from __future__ import annotations

import pytest

from envkit.jobs.doctor.diagnose import diagnose, drift
from envkit.jobs.doctor.observe import probe
from envkit.jobs.doctor.report import Observed, ObservedValue

# (component, locked, observed): same release numbers, different versions
ONLY_RC_POST_PATCH = [
    ("driver", "24.1.rc2", "24.1.RC3"),
    ("driver", "24.1.rc2", "24.1.rc2.2"),  # a driver patch on top of rc2
    ("firmware", "24.1.rc3", "24.1.rc3.5"),
    ("torch_npu", "2.6.0", "2.6.0.post5"),
    ("torch_npu", "2.6.0.post2", "2.6.0.post5"),
    ("cann", "8.3.RC1", "8.3.RC2"),
    ("cann", "8.5.0", "8.5.0.alpha001"),
]
# the same version, spelled differently: no drift
SAME = [
    ("driver", "24.1.rc3", "24.1.RC3"),
    ("cann", "8.5", "8.5.0"),
    ("torch", "2.6.0", "2.6.0+cpu"),
]


def _items(component: str, locked: str, observed: str):
    obs = Observed(**{component: ObservedValue(value=observed, source="test")})
    return drift(obs, {component: locked})


@pytest.mark.parametrize("component, locked, observed", ONLY_RC_POST_PATCH)
def test_rc_post_and_patch_differences_are_drift(component, locked, observed):
    for a, b in ((locked, observed), (observed, locked)):  # either way round
        items, check = _items(component, a, b)
        assert [(d.component, d.status) for d in items] == [(component, "differs")]
        assert check.status == "fail" and f"locked {a}, observed {b}" in check.detail


@pytest.mark.parametrize("component, locked, observed", SAME)
def test_spellings_of_one_version_are_not_drift(component, locked, observed):
    items, check = _items(component, locked, observed)
    assert [d.status for d in items] == ["match"] and check.status == "ok"


def _drift_of(root, lock: dict[str, str]) -> dict[str, str]:
    report = diagnose(probe(str(root), timeout=10), lock_stack=lock)
    return {d.component: d.status for d in report.drift}


def test_drift_on_a_root_driver_rc(root_copy):
    """The observed value comes from the root's driver/version.info, in the vendor's upper case."""
    root = root_copy("drifted-a2")
    info = root / "usr/local/Ascend/driver/version.info"
    info.write_text(info.read_text().replace("Version=24.1.rc3", "Version=24.1.RC3"))
    assert _drift_of(root, {"driver": "24.1.rc2"}) == {"driver": "differs"}
    assert _drift_of(root, {"driver": "24.1.rc3"}) == {"driver": "match"}


def test_drift_on_a_root_driver_patch(root_copy):
    root = root_copy("hazard-fw-mismatch")  # driver 24.1.rc2.2
    assert _drift_of(root, {"driver": "24.1.rc2"}) == {"driver": "differs"}
    assert _drift_of(root, {"driver": "24.1.rc2.2"}) == {"driver": "match"}


def test_drift_on_a_root_post_release(root_copy):
    root = root_copy("healthy-a2")  # torch_npu 2.6.0.post5, torch 2.6.0
    assert _drift_of(root, {"torch_npu": "2.6.0", "torch": "2.6.0"}) == {"torch_npu": "differs", "torch": "match"}
    assert _drift_of(root, {"torch_npu": "2.6.0.post5"}) == {"torch_npu": "match"}

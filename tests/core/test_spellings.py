"""Every spelling a host or a user writes: version.info spellings, patch builds, pre- and post-releases."""

from __future__ import annotations

import pytest

from envkit import versions
from envkit.core.resolve import pins_from_mapping, validate_stack
from envkit.core.resolve.search import initial_domains
from envkit.errors import BadInput


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("24.1.rc2.2", "24.1.rc2"),
        ("25.0.rc1.1", "25.0.rc1"),
        ("24.1.0.3", "24.1.0"),
        ("25.7.rc1.6", "25.7.rc1"),
        ("25.5.1", None),
        ("24.1.rc3", None),
        ("2.12.0.post3", None),
        ("9.1.0-beta.3", None),
        ("8.5.0.alpha002", None),
    ],
)
def test_patch_base(text, base):
    assert versions.patch_base(text) == base


@pytest.mark.parametrize(
    ("given", "release"),
    [("25.0.rc1.1", "25.0.RC1"), ("25.0.rc1.3", "25.0.RC1"), ("24.1.0.3", "24.1.0"), ("25.7.rc1.6", "25.7.RC1")],
)
def test_hdk_spellings_are_their_release(lm, given, release):
    assert lm.hdk(given).version == release
    report = validate_stack({"driver": given, "firmware": release}, matrix=lm)
    assert report.valid and report.stack["driver"] == release and report.input["driver"] == given
    assert f"driver {given} is validated as HDK {release}" in report.hints


def test_a_patch_with_its_own_firmware_range_is_judged_by_it(lm):
    report = validate_stack({"driver": "24.1.rc2.2", "firmware": "24.1.RC2"}, matrix=lm)
    assert not report.valid
    conflict = report.conflicts[0]
    assert conflict.pins == ["driver", "firmware"]
    assert "allows firmware [7.0.0,7.2.99], not 7.3.0.1.231" in conflict.summary
    assert "compatible_version_fw=[7.0.0,7.2.99]" in conflict.chain[-1].fact
    # no suggestion proposes the same release again
    assert all(s.change.get("firmware", {}).get("to") != "24.1.RC2" for s in report.suggestions)
    # the release itself pairs with its own firmware
    assert validate_stack({"driver": "24.1.RC2", "firmware": "24.1.RC2"}, matrix=lm).valid


def test_an_unpinned_firmware_gets_the_patch_range_as_a_hint(lm):
    report = validate_stack({"driver": "24.1.rc2.2"}, matrix=lm)
    assert report.valid
    assert any("allows firmware [7.0.0,7.2.99] only" in h for h in report.hints)


def test_a_pre_release_of_a_mapped_line_validates_with_a_hint(lm):
    report = validate_stack({"torch_npu": "2.10.0rc2"}, matrix=lm)
    assert report.valid and report.stack["torch"] == "2.10.0"
    assert any("2.10.0rc2 is a pre-release" in h for h in report.hints)
    assert "2.10.0rc2" not in initial_domains(lm, {}, False)["torch_npu"]  # resolve never picks it unpinned
    assert validate_stack({}, matrix=lm).stack["torch_npu"] != "2.10.0rc2"


# (pre-release, its torch, the CANN resolve gives it): the branch READMEs pair 2.11.0rc1 and 2.12.0rc1 with CANN 8.5.0;
# 2.13.0rc1 has no pairing of its own and is judged by TorchNPU 26.2.0's range, whose newest CANN is 9.2.0
RC_ROWS = [("2.11.0rc1", "2.11.0", "8.5.0"), ("2.12.0rc1", "2.12.0", "8.5.0"), ("2.13.0rc1", "2.13.0", "9.2.0")]


@pytest.mark.parametrize("version,torch,cann", RC_ROWS, ids=[r[0] for r in RC_ROWS])
def test_the_torch_npu_pre_releases_resolve_only_when_pinned(lm, version, torch, cann):
    row = lm.torch_npu_row(version)
    assert row.prerelease and row.confidence == "inferred" and row.manylinux == {"x86_64": "2.28", "aarch64": "2.28"}
    report = validate_stack({"torch_npu": version}, matrix=lm)
    assert report.valid and (report.stack["torch"], report.stack["cann"]) == (torch, cann)
    assert any(f"{version} is a pre-release" in h for h in report.hints)
    assert version not in initial_domains(lm, {}, False)["torch_npu"]
    for chip in ("910b", "a3", "950"):
        assert validate_stack({"chip": chip}, matrix=lm).stack["torch_npu"] != version


@pytest.mark.parametrize("cann", ["9.1.0-beta.3", "9.1.0.beta.3", "8.5.0.alpha002"])
def test_cann_pre_releases_validate(lm, cann):
    report = validate_stack({"cann": cann, "chip": "910b"}, matrix=lm)
    assert report.valid, report.conflicts
    assert any("is a pre-release" in h for h in report.hints)
    assert cann.replace("-", ".") not in [c.replace("-", ".") for c in initial_domains(lm, {}, False)["cann"]]


def test_an_unmapped_post_release_is_judged_by_its_line(lm):
    report = validate_stack({"torch_npu": "2.12.0.post2"}, matrix=lm)
    assert report.valid
    assert any("2.12.0.post2 has no CANN pairing of its own" in h and "(inferred)" in h for h in report.hints)
    assert "2.12.0.post2" not in initial_domains(lm, {}, False)["torch_npu"]
    # a release with no line at all is still refused with its reason
    report = validate_stack({"torch_npu": "2.9.1"}, matrix=lm)
    assert not report.valid and "no published CANN pairing" in report.conflicts[0].summary


@pytest.mark.parametrize(
    ("key", "value", "near"),
    [("torch_npu", "2.10.0rc9", "2.10.0rc2"), ("driver", "24.1.rc4.2", "24.1.RC3"), ("cann", "9.1.0-beta.9", "9.1.0")],
)
def test_a_truly_unknown_release_stays_bad_input(lm, key, value, near):
    with pytest.raises(BadInput) as info:
        pins_from_mapping(lm, {key: value})
    assert info.value.exit_code == 2 and near in info.value.details["nearest"]


def test_where_sources_disagree_the_explanation_says_so(lm):
    report = validate_stack({"chip": "310p", "torch_npu": "2.12.0"}, matrix=lm)
    facts = " ".join(f.fact for c in report.conflicts for f in c.chain)
    assert "sources disagree for TorchNPU 26.1.1, 26.1.0" in facts and "COMPATIBILITY.en.md lists the 310P" in facts
    c = lm.cann("8.0.0")
    assert c.hdk_paired == ["24.1.0", "24.1.RC3"] and "Torchvision adapter table with 24.1.RC3" in c.disagreement
    nine = lm.cann("9.1.0")
    assert nine.hdk_paired == ["26.0.RC1"] and "26.1.0" in nine.hdk_compatible and "MindCluster" in nine.disagreement
    # both pairings validate: 26.0.RC1 as the vendor pairing, 26.1.0 as compatible
    for driver in ("26.0.RC1", "26.1.0"):
        assert validate_stack({"chip": "910b", "cann": "9.1.0", "driver": driver}, matrix=lm).valid, driver

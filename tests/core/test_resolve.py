"""Real stacks from the sourced facts (compat-facts.md), valid and invalid, and one test per rule."""

import pytest

from envkit.core.resolve import pins_from_mapping, solve, validate_stack
from envkit.errors import BadInput

# (id, pins, expected keys of the resolved stack) -- all valid
VALID = [
    ("embedded-default", {}, {"chip": "910b", "arch": "aarch64", "os": "ubuntu22.04", "torch_npu": "2.12.0", "cann": "9.1.0"}),
    (
        "vllm-ascend-v0.13.0",
        {"torch_npu": "2.8.0.post2", "torch": "2.8.0", "cann": "8.5.0", "python": "3.11", "transformers": "4.57.4"},
        {"driver": "25.5.0", "numpy": "1.26.4"},
    ),
    (
        "vllm-ascend-v0.11.0rc1",
        {"torch_npu": "2.7.1", "cann": "8.3.RC1", "python": "3.11"},
        {"driver": "25.3.RC1", "torch": "2.7.1"},
    ),
    ("vllm-ascend-v0.18.0", {"torch_npu": "2.9.0", "cann": "8.5.1", "python": "3.11"}, {"torch": "2.9.0"}),
    (
        "vllm-ascend-v0.23.0",
        {"torch_npu": "2.10.0.post4", "cann": "9.1.0", "python": "3.12", "transformers": "5.5.4"},
        {"driver": "26.0.RC1"},
    ),  # 9.1.0 pairs with 26.0.RC1 (its own notes); 26.1.0 (sibling notes) is compatible
    ("vllm-ascend-v0.23.0rc1", {"torch_npu": "2.10.0.post2", "cann": "9.0.1"}, {"torch": "2.10.0"}),
    ("x86-torch-cpu-index", {"arch": "x86_64", "torch": "2.6.0"}, {"torch_npu": "2.6.0.post5"}),
    ("a3-cann-8.5.0", {"chip": "a3", "cann": "8.5.0"}, {"driver": "25.3.RC1"}),
    (
        "official-image-8.3.rc1-910b-py3.11",
        {"chip": "910b", "os": "ubuntu22.04", "cann": "8.3.RC1", "python": "3.11"},
        {"driver": "25.3.RC1"},
    ),
    # no vendor pairing with CANN 9.0.0 on 950: the newest torch_npu whose line works with 9.0.X (TorchNPU 26.2.0)
    ("950-openeuler-9.0.0", {"chip": "950", "os": "openeuler24.03", "cann": "9.0.0"}, {"torch_npu": "2.14.0"}),
    # HDK 25.7.RC1 is the Atlas 350 card's (MindCluster 26.1.0 notes), compatible with CANN 9.1.0 ('26.0.RC1/25.7.RC1')
    ("atlas-350-hdk-25.7.RC1", {"chip": "950", "driver": "25.7.RC1", "cann": "9.1.0"}, {"firmware": "25.7.RC1"}),
    ("driver-24.1.rc3-firmware-24.1.rc1-in-range", {"driver": "24.1.RC3", "firmware": "24.1.RC1"}, {}),
    ("a2-inference-8.0.RC1-24.1.RC1", {"cann": "8.0.RC1", "driver": "24.1.RC1"}, {"torch_npu": "2.2.0"}),
    ("torch_npu-2.7.1.post4-with-9.0.0", {"torch_npu": "2.7.1.post4", "cann": "9.0.0"}, {}),
    ("lts-2.1.0-numpy1", {"torch_npu": "2.1.0.post10", "numpy": "1.24.4"}, {"cann": "8.0.0"}),
    ("firmware-given-as-its-own-version", {"firmware": "7.5.0.1.129"}, {"firmware": "24.1.RC3"}),
    ("kylin-x86-2.5.1", {"os": "kylinv10", "arch": "x86_64", "torch_npu": "2.5.1"}, {"cann": "8.1.RC1"}),
]

# (id, pins, a fragment of the conflict summary)
INVALID = [
    ("no-cp311-wheel-for-2.2.0", {"torch_npu": "2.2.0", "python": "3.11"}, "no torch_npu 2.2.0 wheel for cp311"),
    ("llamafactory-7986", {"torch": "2.2.0", "transformers": "4.57.1"}, "torch < 2.5.1"),
    ("vllm-ascend-2210-numpy2-cann-8.2", {"cann": "8.2.RC1", "numpy": "2.2.6"}, "numpy <2"),
    ("llamafactory-4382-numpy2-torch-2.1", {"torch": "2.1.0", "numpy": "2.0.0"}, "NumPy 1.x"),
    ("two-accelerators", {"torch": "2.6.0+cu124", "chip": "910b"}, "CUDA"),
    ("cann-8.5-needs-new-hdk", {"driver": "24.1.RC2", "cann": "8.5.0"}, "does not work with NPU driver"),
    (
        "triton-ascend-328-MsprofSysCycleTime",
        {"torch_npu": "2.7.1", "cann": "9.0.0-beta.2"},
        "torch_npu 2.7.1 does not work with CANN 9.0.0-beta.2",
    ),
    ("310p-not-in-26.1", {"chip": "310p", "torch_npu": "2.12.0"}, "chip 310p is not supported by torch_npu 2.12.0"),
    ("centos7-glibc", {"os": "centos7.6", "torch_npu": "2.7.1"}, "glibc"),
    ("driver-firmware-mismatch", {"driver": "24.1.RC3", "firmware": "25.0.RC1"}, "not known to be compatible"),
    ("cann-9.1-not-25.0", {"cann": "9.1.0", "driver": "25.0.RC1"}, "CANN 9.1.0 does not work"),
    ("transformers-without-npu", {"transformers": "4.31.0"}, "no Ascend NPU support"),
    ("accelerate-without-npu", {"accelerate": "0.20.3"}, "no Ascend NPU support"),
    ("torch_npu-without-cann-pairing", {"torch_npu": "2.9.1"}, "no published CANN pairing"),
    ("950-needs-cann-9", {"chip": "950", "cann": "8.5.0"}, "chip 950 is not supported by CANN 8.5.0"),
    ("torch-pin-mismatch", {"torch_npu": "2.6.0.post5", "torch": "2.5.1"}, "needs torch 2.6.0"),
    ("alpha-python-range", {"cann": "8.5.0.alpha001", "python": "3.13"}, "Python"),
    ("transformers-5.24-python-3.10", {"transformers": "5.24.0", "python": "3.10"}, "Python >=3.11"),
    ("numpy-1.26-python-3.13", {"numpy": "1.26.4", "python": "3.13"}, "Python >=3.9,<3.13"),
    ("310b-has-no-driver-in-matrix", {"chip": "310b"}, "310b"),
    ("hdk-25.7.RC1-is-the-950s", {"chip": "910b", "driver": "25.7.RC1"}, "HDK 25.7.RC1 has no NPU driver package for chip 910b"),
]


@pytest.mark.parametrize("name,pins,expect", VALID, ids=[v[0] for v in VALID])
def test_valid_real_stacks(lm, name, pins, expect):
    report = validate_stack(pins, matrix=lm)
    assert report.valid, [c.summary for c in report.conflicts]
    for k, val in {**pins, **expect}.items():
        if k == "firmware" and k not in expect:
            continue
        got = report.stack[k]
        assert got.lower().split("+")[0] == str(val).lower().split("+")[0], (k, got, val)


@pytest.mark.parametrize("name,pins,fragment", INVALID, ids=[v[0] for v in INVALID])
def test_invalid_real_stacks(lm, name, pins, fragment):
    report = validate_stack(pins, matrix=lm)
    assert not report.valid
    summaries = " | ".join(c.summary for c in report.conflicts)
    assert fragment in summaries, summaries
    for c in report.conflicts:
        assert c.chain, c
        assert c.chain[-1].kind == "derived"
        assert any(f.kind == "declared" for f in c.chain)
        assert set(c.pins) <= set(pins)


def test_at_least_25_real_stacks():
    assert len(VALID) + len(INVALID) >= 25


def test_chain_goes_from_pins_to_contradiction_with_sources(lm):
    report = validate_stack({"torch_npu": "2.12.0", "driver": "24.1.RC3"}, matrix=lm)
    (conflict,) = report.conflicts
    kinds = [f.kind for f in conflict.chain]
    assert kinds[0] == "declared"
    assert "contradiction" in conflict.chain[-1].fact
    texts = " ".join(f.fact for f in conflict.chain)
    assert "HDK 24.1.RC3 works with CANN" in texts
    assert "TorchNPU 26.1.0 works with CANN 8.5.X, 9.0.X, 9.1.X" in texts
    derived = [f for f in conflict.chain if f.kind == "derived" and f.source != "derived"]
    assert derived and all(f.source for f in derived)


def test_suggestions_change_one_pin_and_are_valid(lm):
    report = validate_stack({"torch_npu": "2.2.0", "python": "3.11"}, matrix=lm)
    assert report.suggestions
    for s in report.suggestions:
        assert len(s.change) == 1
        again = validate_stack(s.stack, matrix=lm)
        assert again.valid
        (key,) = s.change
        assert s.stack[key] == s.change[key]["to"]
    changed = {next(iter(s.change)) for s in report.suggestions}
    assert "python" in changed  # the cheapest fix: python 3.10


def test_every_conflict_is_listed(lm):
    report = validate_stack(
        {"torch_npu": "2.2.0", "python": "3.11", "transformers": "4.31.0", "numpy": "2.2.6", "torch": "2.2.0"}, matrix=lm
    )
    summaries = " | ".join(c.summary for c in report.conflicts)
    assert "cp311" in summaries
    assert "no Ascend NPU support" in summaries
    assert "numpy" in summaries


def test_vendor_validated_preferred_over_newer(lm):
    # pinned CANN 8.3.RC1: TorchNPU 7.3.0 (2.9.0) also works with it, but 2.8.0 is the vendor's pair
    report = validate_stack({"cann": "8.3.RC1"}, matrix=lm)
    assert report.stack["torch_npu"] == "2.8.0"
    res = solve(lm, pins_from_mapping(lm, {"cann": "8.3.RC1"}))
    assert res.validated_cann and res.validated_hdk


def test_compatible_used_when_no_validated_pair_fits(lm):
    res = solve(lm, pins_from_mapping(lm, {"chip": "a3", "cann": "8.5.0"}))
    assert res.stack["driver"] == "25.3.RC1"
    assert res.validated_cann and not res.validated_hdk


def test_x86_hint_names_the_cpu_index(lm):
    report = validate_stack({"arch": "x86_64", "torch_npu": "2.6.0.post5"}, matrix=lm)
    assert any("x86_64 needs torch 2.6.0+cpu from the PyTorch CPU index" in h for h in report.hints)
    report = validate_stack({"arch": "x86_64", "torch_npu": "2.12.0"}, matrix=lm)
    assert not any("+cpu" in h for h in report.hints)


def test_hint_rules_warn_but_do_not_refuse(lm):
    report = validate_stack({"accelerate": "0.21.0", "transformers": "4.33.0", "torch_npu": "2.1.0.post10"}, matrix=lm)
    assert report.valid
    joined = " ".join(report.hints)
    assert "0.22.0" in joined and "hccl" in joined


@pytest.mark.parametrize(
    "key,value,nearest",
    [
        ("cann", "8.4.0", "8.5.0"),
        ("torch_npu", "2.6.1", "2.6.0"),
        ("driver", "25.4.0", "25.5.0"),
        ("python", "3.7", "3.8"),
        ("torch", "2.0.1", "2.1.0"),
    ],
)
def test_unknown_versions_are_bad_input_with_nearest(lm, key, value, nearest):
    with pytest.raises(BadInput) as err:
        validate_stack({key: value}, matrix=lm)
    assert nearest in err.value.details["nearest"]
    assert err.value.exit_code == 2


def test_unknown_chip_lists_chips(lm):
    with pytest.raises(BadInput) as err:
        validate_stack({"chip": "h100"}, matrix=lm)
    assert "910b" in err.value.hint and "310p" in err.value.hint


def test_chip_spellings_from_npu_smi(lm):
    assert validate_stack({"chip": "910B3"}, matrix=lm).stack["chip"] == "910b"
    assert validate_stack({"chip": "Ascend910"}, matrix=lm).stack["chip"] == "a3"


# --- one test per rule: a stack that breaks it is refused, one that keeps it is accepted --------
RULE_CASES = {
    "transformers/npu-support": ({"transformers": "4.30.0"}, {"transformers": "4.32.0"}),
    # derived rules (envkit matrix refresh): ids name the first release of each run
    "transformers/python-4.32.0": ({"transformers": "4.40.0", "python": "3.8"}, {"transformers": "4.40.0", "python": "3.8"}),
    "transformers/python-4.47.0": ({"transformers": "4.47.0", "python": "3.8"}, {"transformers": "4.47.0", "python": "3.9"}),
    "transformers/python-5.0.0": ({"transformers": "5.0.0", "python": "3.9"}, {"transformers": "5.0.0", "python": "3.10"}),
    "transformers/python-5.21.0": ({"transformers": "5.21.0", "python": "3.10"}, {"transformers": "5.21.0", "python": "3.11"}),
    "transformers/torch-4.32.0": ({"transformers": "4.32.0", "torch": "2.1.0"}, {"transformers": "4.32.0", "torch": "2.1.0"}),
    "transformers/torch-4.33.0": ({"transformers": "4.36.0", "torch": "2.1.0"}, {"transformers": "4.36.0", "torch": "2.1.0"}),
    "transformers/torch-4.37.0": ({"transformers": "4.37.0", "torch": "2.1.0"}, {"transformers": "4.37.0", "torch": "2.1.0"}),
    "transformers/torch-4.48.0": ({"transformers": "4.48.0", "torch": "2.1.0"}, {"transformers": "4.48.0", "torch": "2.1.0"}),
    "transformers/torch-4.52.1": ({"transformers": "4.52.1", "torch": "2.7.1"}, {"transformers": "4.52.1", "torch": "2.6.0"}),
    "transformers/torch-4.53.0": ({"transformers": "4.53.0", "torch": "2.1.0"}, {"transformers": "4.53.0", "torch": "2.5.1"}),
    "transformers/torch-4.56.0": ({"transformers": "4.57.1", "torch": "2.1.0"}, {"transformers": "4.57.1", "torch": "2.5.1"}),
    "transformers/torch-5.1.0": ({"transformers": "5.5.4", "torch": "2.3.1"}, {"transformers": "5.5.4", "torch": "2.5.1"}),
    "transformers/torch-5.15.0": ({"transformers": "5.15.0", "torch": "2.4.0"}, {"transformers": "5.15.0", "torch": "2.5.1"}),
    "transformers/torch-5.20.0": ({"transformers": "5.20.0", "torch": "2.5.1"}, {"transformers": "5.20.0", "torch": "2.6.0"}),
    "transformers/numpy-4.42.0": ({"transformers": "4.42.0", "numpy": "2.2.6"}, {"transformers": "4.42.0", "numpy": "1.26.4"}),
    "transformers/npu-torch-2.5.1": ({"transformers": "4.50.0", "torch": "2.4.0"}, {"transformers": "4.49.0", "torch": "2.4.0"}),
    "accelerate/npu-support": ({"accelerate": "0.20.0"}, {"accelerate": "0.21.0"}),
    "accelerate/python-0.21.0": ({"accelerate": "1.0.0", "python": "3.8"}, {"accelerate": "1.0.0", "python": "3.8"}),
    "accelerate/python-1.1.0": ({"accelerate": "1.1.0", "python": "3.8"}, {"accelerate": "1.1.0", "python": "3.9"}),
    "accelerate/python-1.11.0": ({"accelerate": "1.11.0", "python": "3.9"}, {"accelerate": "1.11.0", "python": "3.10"}),
    # accelerate 1.16.0's METADATA: Requires-Python >=3.11, Requires-Dist torch>=2.6.0 (the refresh of 2026-12-04)
    "accelerate/python-1.16.0": ({"accelerate": "1.16.0", "python": "3.10"}, {"accelerate": "1.16.0", "python": "3.11"}),
    "accelerate/torch-1.16.0": ({"accelerate": "1.16.0", "torch": "2.5.1"}, {"accelerate": "1.16.0", "torch": "2.6.0"}),
    "accelerate/torch-0.21.0": ({"accelerate": "0.30.0", "torch": "2.1.0"}, {"accelerate": "0.30.0", "torch": "2.1.0"}),
    "accelerate/torch-1.3.0": ({"accelerate": "1.3.0", "torch": "2.1.0"}, {"accelerate": "1.3.0", "torch": "2.1.0"}),
    "accelerate/numpy-0.32.0": ({"accelerate": "0.32.0", "numpy": "2.2.6"}, {"accelerate": "0.32.0", "numpy": "1.26.4"}),
    "accelerate/numpy-0.34.0": ({"accelerate": "0.34.2", "numpy": "2.2.6"}, {"accelerate": "0.34.2", "numpy": "2.2.6"}),
    "numpy/python-1.24.0": ({"numpy": "1.24.4", "python": "3.12"}, {"numpy": "1.24.4", "python": "3.11"}),
    "numpy/python-1.25.0": ({"numpy": "1.25.2", "python": "3.12"}, {"numpy": "1.25.2", "python": "3.11"}),
    "numpy/python-1.26.0": ({"numpy": "1.26.4", "python": "3.13"}, {"numpy": "1.26.4", "python": "3.12"}),
    "numpy/python-2.1.0": ({"numpy": "2.2.6", "python": "3.9"}, {"numpy": "2.2.6", "python": "3.13"}),
    "numpy/python-2.3.0": ({"numpy": "2.3.0", "os": "centos7.6"}, {"numpy": "2.3.0", "os": "centos8.2"}),
    "numpy/python-2.3.2": ({"numpy": "2.3.5", "os": "centos7.6"}, {"numpy": "2.3.5", "os": "centos8.2"}),
    "numpy/python-2.5.0": ({"numpy": "2.5.0", "python": "3.11"}, {"numpy": "2.5.0", "python": "3.12"}),
    "numpy/python-2.5.2": ({"numpy": "2.5.2", "python": "3.11"}, {"numpy": "2.5.2", "python": "3.12"}),
    "numpy/torch-2.1": ({"torch": "2.1.0", "numpy": "2.0.0"}, {"torch": "2.1.0", "numpy": "1.26.4"}),
    "numpy/torch-2.2": ({"torch": "2.2.0", "numpy": "2.0.0"}, {"torch": "2.2.0", "numpy": "1.26.4"}),
    "numpy/cann-8.2": ({"cann": "8.2.RC1", "numpy": "2.0.0"}, {"cann": "8.2.RC1", "numpy": "1.26.4"}),
    "numpy/cann-before-9": ({"cann": "8.5.0", "numpy": "2.2.6"}, {"cann": "9.0.0", "numpy": "2.2.6"}),
}
# rules whose "breaking" stack above cannot break them on its own (the witness shows the rule holds)
# (the matrix has no torch < 2.1 and no Python < 3.8, so these can never be the deciding rule today)
HOLDS_ONLY = {
    "transformers/python-4.32.0",
    "transformers/torch-4.32.0",
    "transformers/torch-4.33.0",
    "transformers/torch-4.37.0",
    "transformers/torch-4.48.0",
    "transformers/torch-4.53.0",
    "accelerate/python-0.21.0",
    "accelerate/torch-0.21.0",
    "accelerate/torch-1.3.0",
    "accelerate/numpy-0.34.0",
}


def test_every_error_rule_has_a_test(lm):
    rules = {r.id for r in lm.model.rules if r.severity == "error"}
    assert rules == set(RULE_CASES)


@pytest.mark.parametrize("rule_id", sorted(RULE_CASES))
def test_rule(lm, rule_id):
    bad, good = RULE_CASES[rule_id]
    ok = validate_stack(good, matrix=lm)
    assert ok.valid, (rule_id, [c.summary for c in ok.conflicts])
    if rule_id in HOLDS_ONLY:
        return
    report = validate_stack(bad, matrix=lm)
    assert not report.valid, rule_id
    rules_named = {f.rule for c in report.conflicts for f in c.chain}
    assert rule_id in rules_named or f"rule:{rule_id}" in rules_named, (rule_id, rules_named)


@pytest.mark.parametrize(
    "relation,bad,good",
    [
        ("chip-cann", {"chip": "950", "cann": "8.5.0"}, {"chip": "950", "cann": "9.0.0"}),
        ("chip-driver", {"chip": "a3", "driver": "25.5.0"}, {"chip": "a3", "driver": "25.3.RC1"}),
        ("chip-torch_npu", {"chip": "310p", "torch_npu": "2.11.0"}, {"chip": "310p", "torch_npu": "2.10.0"}),
        ("driver-firmware", {"driver": "25.0.RC1", "firmware": "24.1.RC3"}, {"driver": "24.1.RC3", "firmware": "24.1.RC1"}),
        ("cann-driver", {"cann": "9.1.0", "driver": "25.0.RC1"}, {"cann": "9.1.0", "driver": "25.2.0"}),
        ("torch_npu-cann", {"torch_npu": "2.4.0", "cann": "8.5.0"}, {"torch_npu": "2.4.0.post2", "cann": "8.3.RC1"}),
        ("torch_npu-torch", {"torch_npu": "2.9.0", "torch": "2.8.0"}, {"torch_npu": "2.9.0", "torch": "2.9.0"}),
        ("torch_npu-python", {"torch_npu": "2.9.0", "python": "3.13"}, {"torch_npu": "2.9.0.post6", "python": "3.13"}),
        ("cann-python", {"cann": "8.5.0.alpha001", "python": "3.12"}, {"cann": "8.5.0", "python": "3.12"}),
        (
            "torch_npu-glibc",
            {"torch_npu": "2.6.0", "arch": "aarch64", "os": "centos7.6"},
            {"torch_npu": "2.6.0", "arch": "x86_64", "os": "centos7.6"},
        ),
    ],
)
def test_relation(lm, relation, bad, good):
    assert validate_stack(good, matrix=lm).valid
    report = validate_stack(bad, matrix=lm)
    assert not report.valid
    assert any(f.rule == relation for c in report.conflicts for f in c.chain), [f.rule for c in report.conflicts for f in c.chain]


# Pairings a newer release's notes widen (issue #37): the CANN 9.1.1 / 9.2.0 compatibility tables mark HDK 26.1.1
# and 26.2.RC1 compatible with CANN 8.5.2, 9.0.X and 9.1.X (vllm-ascend 0.27.1rc1's notes ship HDK 26.1.1 with CANN
# 9.1.0); MindCluster 26.1.0 gives CANN 9.1.0 with HDK 25.1.RC1 (Atlas 950 SuperPoD) and 25.6.RC1 (Atlas 850).
@pytest.mark.parametrize(
    "stack",
    [
        {"chip": "910b", "cann": "9.1.0", "driver": "26.1.1"},
        {"chip": "a3", "cann": "9.1.0", "driver": "26.2.RC1"},
        {"chip": "910b", "cann": "9.1.1", "driver": "26.2.RC1"},
        {"chip": "910b", "cann": "9.0.1", "driver": "26.1.1"},
        {"chip": "910b", "cann": "8.5.2", "driver": "26.2.RC1"},
        {"chip": "950", "cann": "9.1.0", "driver": "25.1.RC1"},
        {"chip": "950", "cann": "9.1.0", "driver": "25.6.RC1"},
    ],
    ids=lambda s: f"{s['cann']}+{s['driver']}",
)
def test_hdk_pairings_the_newest_notes_widen_validate(lm, stack):
    report = validate_stack(stack, matrix=lm)
    assert report.valid, [c.summary for c in report.conflicts]


def test_hdk_pairings_the_notes_exclude_stay_refused(lm):
    # 9.2.0's table leaves 25.0.X and 25.2.X out; 8.5.0's own table ends at 25.5.X
    for stack in ({"chip": "910b", "cann": "9.2.0", "driver": "25.2.0"}, {"chip": "910b", "cann": "8.5.0", "driver": "26.1.1"}):
        assert not validate_stack(stack, matrix=lm).valid, stack


def test_torch_npu_python_is_per_arch_where_the_wheels_differ(lm):
    """torch_npu 2.10.0.post6 has a cp312 wheel for aarch64 only (PyPI: cp310/cp311 for x86_64): Python 3.12 on
    x86_64 is refused naming the arch and the wheels of each arch, on aarch64 it validates; 3.11 fits both."""
    row = lm.torch_npu_row("2.10.0.post6")
    assert row.python_by_arch == {"x86_64": ["3.10", "3.11"], "aarch64": ["3.10", "3.11", "3.12"]}
    bad = validate_stack({"torch_npu": "2.10.0.post6", "python": "3.12", "arch": "x86_64"}, matrix=lm)
    assert not bad.valid
    (conflict,) = bad.conflicts
    assert conflict.summary.endswith(
        "no torch_npu 2.10.0.post6 wheel for cp312 on x86_64 (PyPI's files: cp310, cp311, cp312 on aarch64; "
        "cp310, cp311 on x86_64)"
    ), conflict.summary
    said = next(f for f in conflict.chain if f.rule == "torch_npu/2.10.0.post6.python_by_arch")
    assert "cp310, cp311 on x86_64" in said.fact and "PyPI wheel files of torch-npu 2.10.0.post6" in said.source
    assert any(f.rule == "torch_npu-python" for f in conflict.chain)
    for ok in (
        {"torch_npu": "2.10.0.post6", "python": "3.12", "arch": "aarch64"},
        {"torch_npu": "2.10.0.post6", "python": "3.11", "arch": "x86_64"},
        {"torch_npu": "2.10.0.post4", "python": "3.12", "arch": "x86_64"},  # both arches have cp312 there
    ):
        assert validate_stack(ok, matrix=lm).valid, ok
    # no arch has cp313: refused whatever the arch, the summary naming each arch's wheels
    none = validate_stack({"torch_npu": "2.10.0.post6", "python": "3.13", "arch": "aarch64"}, matrix=lm)
    assert not none.valid and "no torch_npu 2.10.0.post6 wheel for cp313 on aarch64" in none.conflicts[0].summary


@pytest.mark.parametrize("version", ["0.23.0.post1", "0.27.1rc1", "0.28.0rc1", "0.29.0rc1", "0.30.0rc1", "0.30.0rc2"])
def test_a_documented_python_ceiling_applies_on_top_of_requires_python(lm, version):
    """vllm-ascend's sdist-only releases say Requires-Python >=3.10 in PKG-INFO, their versioning table Python >= 3.10,
    < 3.13 (`python_documented`): Python 3.13 is refused naming that document, 3.12 validates."""
    row = lm.vllm_ascend(version)
    assert row.sdist_only and row.python == ">=3.10"
    assert row.python_documented.spec == "<3.13" and "versioning_policy.md" in row.python_documented.sources[0]
    assert validate_stack({"vllm_ascend": version, "python": "3.12"}, matrix=lm).valid
    bad = validate_stack({"vllm_ascend": version, "python": "3.13"}, matrix=lm)
    assert not bad.valid
    facts = [f for c in bad.conflicts for f in c.chain]
    said = next(f for f in facts if "vllm_ascend/*.python_documented" in f.rule)
    assert f"{version}" in said.fact and "their documentation bounds Python (<3.13)" in said.fact
    assert "docs/source/community/versioning_policy.md" in said.source
    assert any(f.rule == "vllm_ascend-python" for f in facts)


def test_a_documented_python_ceiling_is_cited_with_its_own_source(lm):
    from envkit.core.constraints import Strictness, vllm_ascend_python

    edge = vllm_ascend_python(lm, Strictness())
    assert not edge.check({"vllm_ascend": "0.30.0rc2", "python": "3.13"})
    assert edge.check({"vllm_ascend": "0.30.0rc2", "python": "3.12"})
    assert not edge.check({"vllm_ascend": "0.30.0rc2", "python": "3.9"})  # Requires-Python still applies
    said = edge.says("vllm_ascend", "0.30.0rc2")
    assert said.rule == "vllm_ascend/0.30.0rc2.python_documented" and said.confidence == "inferred"
    assert said.message == (
        "vllm-ascend 0.30.0rc2 needs Python >=3.10 and <3.13 (docs/source/community/versioning_policy.md, inferred)"
    )
    assert "v0.30.0rc1 = vLLM v0.30.0, Python >= 3.10, < 3.13" in said.source
    assert edge.summary({"vllm_ascend": "0.27.1rc1", "python": "3.13"}) == (
        "vllm-ascend 0.27.1rc1 needs Python >=3.10 and <3.13 (docs/source/community/versioning_policy.md, stated), "
        "not python 3.13"
    )
    # a row without one says what it said before
    assert edge.says("vllm_ascend", "0.26.0rc1").message == "vllm-ascend 0.26.0rc1 needs Python >=3.10,<3.13"


# The TorchNPU 26.2.0 release notes (Ascend/pytorch docs/zh/release_notes.md @04937a13) pair torch_npu 2.13.0,
# 2.14.0 and the patch packages 2.7.1.post11 … 2.12.0.post3 with CANN 9.2.0 (issue #37: they had no CANN).
@pytest.mark.parametrize(
    "version", ["2.14.0", "2.13.0", "2.12.0.post3", "2.11.0.post3", "2.10.0.post7", "2.9.0.post9", "2.7.1.post11"]
)
def test_the_torchnpu_26_2_0_line_pairs_its_releases_with_cann_9_2_0(lm, version):
    row = lm.torch_npu_row(version)
    assert (row.line, row.cann, row.confidence) == ("26.2.0", "9.2.0", "stated") and "04937a13" in row.source_text
    report = validate_stack({"torch_npu": version}, matrix=lm)
    assert report.valid and report.stack["cann"] == "9.2.0", [c.summary for c in report.conflicts]
    # not in the recommended-combination table: resolve does not prefer it over a vendor-validated pairing
    assert not row.validated

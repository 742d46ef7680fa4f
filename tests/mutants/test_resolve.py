"""envkit.core.resolve: the cases that `make mutation` showed no test held (unknown-version messages and their nearest
versions, where a pin came from, patch hints, value lists in chains, minimal conflict cores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.core.constraints import ABSENT, Constraint, Relation, RuleConstraint
from envkit.core.matrix import LoadedMatrix
from envkit.core.matrix_records import Rule
from envkit.core.resolve import pins_from_mapping, search, validate_pins, validate_stack
from envkit.core.resolve.explain import _explain_core, _fmt_values, _minimal_core, _summary, explain, pin_checks
from envkit.core.resolve.hints import _patch_hints, hints_for, suggest
from envkit.core.resolve.pins import Pin, _nearest, _where, canonical_pin, torch_versions
from envkit.core.resolve.search import (
    SEARCH_ORDER,
    SERVING_KEYS,
    chosen,
    framework_keys,
    initial_domains,
    satisfiable,
    solve,
    with_bounds,
)
from envkit.errors import BadInput, CannotRun, Where
from envkit.models.report import Conflict
from envkit.models.stack import ALL_KEYS
from tests.core.conftest import edited_matrix

CANN_NEAR_8_4 = ["8.5.0", "8.5.0.alpha002", "8.5.0.alpha001", "8.3.RC2", "8.3.RC1"]


def _with_rule(lm, **fields) -> LoadedMatrix:
    """The shipped matrix with one more rule (from "test", stated), in memory: for branches no shipped rule takes."""
    return edited_matrix(lm, rules=[*lm.model.rules, Rule(source="test", confidence="stated", **fields)])


# --- where a pin came from -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "where,expected",
    [
        ("stack.yaml:3", Where("stack.yaml", 3, "k")),
        ("a/b:c/stack.yaml:12", Where("a/b:c/stack.yaml", 12, "k")),  # the last colon splits off the line
        ("stack.yaml:x", Where("stack.yaml:x", None, "k")),
        ("--torch-npu", Where("--torch-npu", None, "k")),
        ("--torch:3", Where("--torch:3", None, "k")),  # a flag is never file:line
        ("observed: /usr/local/Ascend/driver/version.info", Where("observed: /usr/local/Ascend/driver/version.info", None, "k")),
        ("observed:7", Where("observed:7", None, "k")),
        ("12", Where("12", None, "k")),
        ("", Where(None, None, "k")),
    ],
)
def test_where_splits_file_and_line_only_for_a_file(where, expected):
    assert _where(where, "k") == expected


@pytest.mark.parametrize(
    "args,where",
    [
        (("-f", "{file}"), {"file": "{file}", "line": 3, "key": "cann"}),
        (("--cann", "8.4.0"), {"file": "--cann", "line": None, "key": "cann"}),
    ],
)
def test_an_unknown_version_says_where_it_was_pinned(run_cli, tmp_path, args, where):
    stack = tmp_path / "stack.yaml"
    stack.write_text("chip: 910b\n# the release\ncann: 8.4.0\n")
    args = tuple(a.replace("{file}", str(stack)) for a in args)
    where = {k: (v.replace("{file}", str(stack)) if isinstance(v, str) else v) for k, v in where.items()}
    r = run_cli("resolve", *args, "--json")
    assert r.code == 2
    assert json.loads(r.out)["error"] == {
        "type": "BadInput",
        "message": "unknown CANN release '8.4.0' for 'cann'",
        "exit_code": 2,
        "where": where,
        "hint": f"Known CANN releases nearest to it: {', '.join(CANN_NEAR_8_4)}. `envkit matrix show cann` lists them all.",
        "details": {"key": "cann", "value": "8.4.0", "nearest": CANN_NEAR_8_4},
    }


# --- unknown versions and the nearest known ones -------------------------------------------------
@pytest.mark.parametrize(
    "key,value,where,what,nearest",
    [
        ("cann", "8.4.0", "stack.yaml:7", "CANN release", CANN_NEAR_8_4),
        (
            "torch_npu",
            "2.6.1",
            "--torch-npu",
            "torch_npu release",
            ["2.6.0.post5", "2.6.0.post3", "2.6.0", "2.5.1.post1", "2.5.1"],
        ),
        (
            "firmware",
            "7.8.0.5.999",
            "",
            "firmware version",
            ["7.8.0.7.220", "7.8.0.6.201", "7.8.0.5.216", "7.8.0.2.212", "7.7.0.6.236"],
        ),
        # not a version: the closest spellings (difflib, cutoff 0.3), else the first known ones
        (
            "os",
            "ubuntu2404",
            "observed: /etc/os-release",
            "operating system",
            ["ubuntu24.04", "ubuntu22.04", "ubuntu20.04", "openeuler24.03", "openeuler22.03"],
        ),
        ("arch", "armv7", "", "arch", ["aarch64"]),
        ("arch", "zzzz", "", "arch", ["aarch64", "x86_64"]),
        # a version against names: every one equally far, in the matrix's order
        (
            "os",
            "22.04",
            "",
            "operating system",
            ["ubuntu20.04", "ubuntu22.04", "ubuntu24.04", "openeuler22.03", "openeuler24.03"],
        ),
    ],
)
def test_an_unknown_version_names_the_nearest_known_ones(lm, key, value, where, what, nearest):
    with pytest.raises(BadInput) as err:
        canonical_pin(lm, key, value, where)
    e = err.value
    assert e.message == f"unknown {what} '{value}' for '{key}'"
    assert e.where == _where(where, key)
    known = KNOWN_AS.get(key, what + "s")
    assert e.hint == f"Known {known} nearest to it: {', '.join(nearest)}. `envkit matrix show {key}` lists them all."
    assert e.details == {"key": key, "value": value, "nearest": nearest}
    assert e.exit_code == 2


KNOWN_AS = {
    "firmware": "firmware versions (HDK releases or firmware Version= values)",
    "torch": "torch versions (those a torch_npu release pins)",
    "vllm": "vLLM releases (those a vllm-ascend release pins)",
}


# --- every spelling canonical_pin accepts, per key, and what it keeps of the input ------------------------------
@pytest.mark.parametrize(
    "key,given,value,local",
    [
        ("chip", " 910B ", "910b", None),
        ("chip", "910B3", "910b", None),  # npu-smi's name
        ("chip", "310P3", "310p", None),
        ("chip", "Ascend910", "a3", None),
        ("chip", "atlas-a2", "910b", None),
        ("chip", "A2", "910b", None),
        ("chip", "910C", "a3", None),
        ("chip", "910_93", "a3", None),
        ("chip", "910A", "910", None),
        ("chip", "910b1", "910b", None),
        ("arch", "ARM64", "aarch64", None),
        ("arch", "AARCH64", "aarch64", None),
        ("arch", "amd64", "x86_64", None),
        ("arch", "x86-64", "x86_64", None),
        ("arch", "X86_64", "x86_64", None),
        ("os", "Ubuntu 22.04", "ubuntu22.04", None),
        ("os", "openEuler-22.03", "openeuler22.03", None),
        ("python", "3.10.12", "3.10", None),
        ("mindspeed", "2.1.0", "2.1.0", None),
        ("driver", "24.1.rc2", "24.1.RC2", None),
        ("firmware", "24.1.rc2", "24.1.RC2", None),
        ("firmware", "7.1.0.5.220", "23.0.3", None),  # a firmware Version= names its HDK release
        ("cann", "8.0.rc3", "8.0.RC3", None),
        ("torch_npu", "2.6.0.POST5", "2.6.0.post5", None),
        ("vllm_ascend", "0.26.0RC1", "0.26.0rc1", None),
        ("triton_ascend", "3.2.2", "3.2.2", None),
        ("torch", "2.13.0+cpu", "2.13.0", "cpu"),
        ("torch", "2.6.0+cu124", "2.6.0", "cu124"),
        ("torch", "2.13", "2.13.0", None),
        ("vllm", "0.26", "0.26.0", None),
        ("numpy", " 2.2.6 ", "2.2.6", None),  # any release: judged by ranges
        ("transformers", "4.57.1", "4.57.1", None),
    ],
)
def test_a_pin_keeps_the_input_and_its_canonical_spelling(lm, key, given, value, local):
    assert canonical_pin(lm, key, given, "stack.yaml:4", "observed") == Pin(key, value, given, "stack.yaml:4", "observed", local)
    assert canonical_pin(lm, key, given) == Pin(key, value, given, "", "declared", local)


@pytest.mark.parametrize(
    "key,given,message,hint",
    [
        (
            "torch",
            "1.0",
            "unknown torch version '1.0' for 'torch'",
            "Known torch versions (those a torch_npu release pins) nearest to it: 2.5.1, 2.4.0, 2.3.1, 2.2.0, 2.1.0. "
            "`envkit matrix show torch` lists them all.",
        ),
        (
            "vllm",
            "0.1.0",
            "unknown vLLM release '0.1.0' for 'vllm'",
            "Known vLLM releases (those a vllm-ascend release pins) nearest to it: 0.9.1, 0.9.0, 0.8.5.post1, 0.8.4, "
            "0.7.3. `envkit matrix show vllm` lists them all.",
        ),
        (
            "python",
            "3.7",
            "unknown Python version '3.7' for 'python'",
            "Known Python versions nearest to it: 3.12, 3.11, 3.10, 3.9, 3.8. `envkit matrix show python` lists them all.",
        ),
        (
            "mindspeed",
            "9.9",
            "unknown MindSpeed release '9.9' for 'mindspeed'",
            "Known MindSpeed releases nearest to it: 2.1.0, 1.0.0, 26.1.0, 26.0.0_core_r0.12.1, 2.2.0_core_r0.12.1. "
            "`envkit matrix show mindspeed` lists them all.",
        ),
        (
            "chip",
            "910x",
            "unknown chip '910x'",
            "Chips: 910b, 910, a3, 310p, 310b, 950 (also: atlas-a2, a2 = 910b; 910a = 910; 910c, 910_93 = a3).",
        ),
        (
            "driver",
            "23.9.9",
            "unknown HDK (driver) release '23.9.9' for 'driver'",
            "Known HDK (driver) releases nearest to it: 23.0.7, 23.0.6, 23.0.5, 23.0.3, 23.0.2. "
            "`envkit matrix show driver` lists them all.",
        ),
        (
            "vllm_ascend",
            "0.99.0",
            "unknown vllm-ascend release '0.99.0' for 'vllm_ascend'",
            "Known vllm-ascend releases nearest to it: 0.30.0rc2, 0.30.0rc1, 0.29.0rc1, 0.28.0rc1, 0.27.1rc1. "
            "`envkit matrix show vllm_ascend` lists them all.",
        ),
        (
            "triton_ascend",
            "9.9.9",
            "unknown triton-ascend release '9.9.9' for 'triton_ascend'",
            "Known triton-ascend releases nearest to it: 3.2.2, 3.2.1, 3.2.0, 3.2.0rc4. "
            "`envkit matrix show triton_ascend` lists them all.",
        ),
        ("cann", "abc", "'abc' is not a version (key 'cann')", "Write an exact version, e.g. 8.5.0."),
        ("bogus", "1", "unknown key 'bogus'", f"Keys: {', '.join(ALL_KEYS)}."),
    ],
)
def test_a_pin_that_is_not_known_is_refused_with_what_is(lm, key, given, message, hint):
    with pytest.raises(BadInput) as err:
        canonical_pin(lm, key, given, "stack.yaml:4")
    assert (err.value.message, err.value.where, err.value.hint) == (message, Where("stack.yaml", 4, key), hint)
    if key == "chip":
        assert err.value.details == {"key": "chip", "value": "910x", "known": ["910b", "910", "a3", "310p", "310b", "950"]}


def test_nearest_ranks_by_release_distance_then_oldest_and_shows_newest_first():
    assert _nearest("2.0", ["3.0", "1.0"], 1) == ["1.0"]  # a tie goes to the older
    assert _nearest("2.6", ["2.6.1", "2.6.0"], 1) == ["2.6.0"]  # missing parts count as 0
    assert _nearest("7.5.0.1.200", ["7.5.0.1.199", "7.5.0.1.100"], 1) == ["7.5.0.1.100"]  # four parts only
    assert _nearest("1.0", ["100.0", "foo"], 1) == ["foo"]  # not a version: distance (99,)
    assert _nearest("8.4.0", ["8.3.0", "8.5.0"]) == ["8.5.0", "8.3.0"]
    assert _nearest("1.0", ["foo", "2.0"]) == ["2.0", "foo"]  # a name in the list: ranked order as is
    assert _nearest("1.0", [f"1.{i}" for i in range(1, 8)]) == ["1.5", "1.4", "1.3", "1.2", "1.1"]


# --- hints --------------------------------------------------------------------------------------
def _hints(lm, stack: dict[str, str]) -> list[str]:
    r = validate_stack(stack, matrix=lm)
    assert r.valid
    return r.hints


def test_a_driver_patch_is_validated_as_its_release_and_its_firmware_range_is_checked(lm):
    assert _hints(lm, {"driver": "24.1.rc2.2"})[:2] == [
        "driver 24.1.rc2.2 is validated as HDK 24.1.RC2",
        "the driver patch 24.1.rc2.2 allows firmware [7.0.0,7.2.99] only, not the firmware 7.3.0.1.231 of HDK "
        "24.1.RC2: install a firmware in that range",
    ]
    assert _hints(lm, {"firmware": "24.1.rc2.2"})[0] == "firmware 24.1.rc2.2 is validated as HDK 24.1.RC2"
    assert _hints(lm, {"driver": "24.1.rc2.3"})[0] == "driver 24.1.rc2.3 is validated as HDK 24.1.RC2"


DRV = "driver 24.1.rc2.2 is validated as HDK 24.1.RC2"
FW = "firmware 24.1.rc2.2 is validated as HDK 24.1.RC2"
RANGE = (
    "the driver patch 24.1.rc2.2 allows firmware [7.0.0,7.2.99] only, not the firmware 7.3.0.1.231 of HDK "
    "24.1.RC2: install a firmware in that range"
)


@pytest.mark.parametrize(
    "pins,firmware,expected",
    [
        ({"driver": "24.1.rc2.2"}, "24.1.RC2", [DRV, RANGE]),
        ({"driver": "24.1.rc2.2", "firmware": "24.1.rc2.2"}, "24.1.RC2", [DRV, FW, RANGE]),
        ({"firmware": "24.1.rc2.2"}, "24.1.RC2", [FW]),
        ({"driver": "24.1.RC2"}, "24.1.RC2", []),  # the release itself: nothing to say
        ({"firmware": "7.5.0.1.129"}, "24.1.RC3", []),  # a firmware Version is not an HDK patch spelling
    ],
)
def test_patch_hints_exactly(lm, pins, firmware, expected):
    assert _patch_hints(lm, {"firmware": firmware}, pins_from_mapping(lm, pins), lm.hdk_row(firmware)) == expected


def test_patch_range_check_uses_the_stacks_firmware(lm):
    pinned = pins_from_mapping(lm, {"driver": "24.1.rc2.2"})
    # HDK 24.1.RC1 ships firmware 7.1.0.6.220, inside the patch's [7.0.0,7.2.99]
    assert _patch_hints(lm, {"firmware": "24.1.RC1"}, pinned, lm.hdk_row("24.1.RC1")) == [
        "driver 24.1.rc2.2 is validated as HDK 24.1.RC2"
    ]
    assert _patch_hints(lm, {"firmware": "25.5.0"}, pinned, lm.hdk_row("25.5.0"))[1] == (
        "the driver patch 24.1.rc2.2 allows firmware [7.0.0,7.2.99] only, not the firmware 7.8.0.5.216 of HDK "
        "25.5.0: install a firmware in that range"
    )


def test_the_x86_64_torch_index_hint_only_on_x86_64(lm):
    assert _hints(lm, {"arch": "x86_64", "torch": "2.6.0"}) == [
        "x86_64 needs torch 2.6.0+cpu from the PyTorch CPU index (https://download.pytorch.org/whl/cpu): "
        "torch_npu 2.6.0.post5 pins torch==2.6.0+cpu on x86_64"
    ]
    assert _hints(lm, {"arch": "aarch64", "torch": "2.6.0"}) == []  # the same torch_npu, which has an x86_64 label


def test_a_hint_rule_on_glibc_reads_the_os(lm):
    lm2 = _with_rule(
        lm, id="test/glibc-hint", when={"glibc": ">=2.0"}, forbid=True, severity="hint", message="glibc of {os} noted"
    )
    stack = validate_stack({"arch": "aarch64", "torch": "2.6.0"}, matrix=lm).stack
    assert hints_for(lm2, stack, {}, chosen(lm2, stack)) == ["glibc of ubuntu22.04 noted [test/glibc-hint]"]


# --- conflict chains ----------------------------------------------------------------------------
def test_value_lists_are_cut_after_six():
    assert _fmt_values([]) == "{}"
    assert _fmt_values(list("abcdef")) == "{a, b, c, d, e, f}"
    assert _fmt_values(list("abcdefg")) == "{a, b, c, d, e, f, … 7 in all}"
    assert _fmt_values(list("abcdefgh"), 2) == "{a, b, … 8 in all}"


def test_a_rule_summary_keeps_placeholders_of_unpinned_keys(lm):
    pins = pins_from_mapping(lm, {"torch_npu": "2.1.0.post10", "numpy": "2.2.6"})
    assert [c.summary for c in explain(lm, pins)] == [
        "torch_npu 2.1.0.post10 + numpy 2.2.6: torch {torch} is compiled against NumPy 1.x ('A module that was "
        "compiled using NumPy 1.x cannot be run in NumPy 2.0.x'): pin numpy <2"
    ]


def test_the_minimal_core_gives_up_the_costliest_pins_first(lm):
    pins = pins_from_mapping(lm, {"arch": "aarch64", "os": "centos7.6", "cann": "9.1.0", "driver": "26.0.RC1", "numpy": "2.2.6"})
    assert sorted(_minimal_core(lm, pins)) == ["arch", "numpy", "os"]
    assert [(c.summary, c.pins) for c in explain(lm, pins)] == [
        ("arch aarch64 + os centos7.6 + numpy 2.2.6: no torch_npu release works with all of them", ["arch", "os", "numpy"])
    ]
    # two cores, {arch, os, cann} and {arch, os, driver}: the driver (dearer to change than CANN) goes first
    pins = pins_from_mapping(lm, {"arch": "aarch64", "os": "centos7.6", "cann": "9.1.0", "driver": "26.0.RC1"})
    assert list(_minimal_core(lm, pins)) == ["arch", "os", "cann"]


def test_the_minimal_core_keeps_the_optional_keys_in_play(lm):
    pins = pins_from_mapping(lm, {"arch": "aarch64", "os": "centos7.6", "cann": "8.5.0", "torch_npu": "2.6.0"})
    assert list(_minimal_core(lm, pins, SERVING_KEYS)) == ["torch_npu"]  # no vllm-ascend release for 2.6.0
    assert sorted(_minimal_core(lm, pins)) == ["cann", "torch_npu"]


# --- hints on a valid stack, each kind -------------------------------------------------------------
INFERRED = "this stack relies on inferred matrix rows: {} (see `envkit matrix show`)"
NO_FW = (
    "the firmware Version of HDK {} is not captured in the matrix: the lock names its installer by pattern "
    "(it is found inside the HDK package)"
)


@pytest.mark.parametrize(
    "pins,expected",
    [
        (
            {"cann": "8.5.0.alpha002", "torch_npu": "2.10.0rc2"},
            [
                "CANN 8.5.0.alpha002 is a pre-release",
                "torch_npu 2.10.0rc2 is a pre-release: resolve never picks one unless it is pinned",
                "no NNAL release is recorded for CANN 8.5.0.alpha002: the lock lists none",
                INFERRED.format("cann 8.5.0.alpha002, driver 25.2.3, torch_npu 2.10.0rc2"),
            ],
        ),
        (
            {"torch_npu": "2.12.0.post2"},
            [
                "torch_npu 2.12.0.post2 has no CANN pairing of its own: it is judged by TorchNPU 26.1.1's CANN range (inferred)",
                NO_FW.format("26.2.RC1"),  # CANN 9.2.0, which TorchNPU 26.1.X works with (the 26.2.0 release notes)
                INFERRED.format("driver 26.2.RC1, torch_npu 2.12.0.post2"),
            ],
        ),
        (
            {"chip": "310p"},
            [
                "chip 310p (Ascend 310P (Atlas 300I Duo / 300I Pro / 300V Pro)): official torch_npu support is "
                "contradictory (COMPATIBILITY.en.md lists it, the TorchNPU 26.1 install guide does not)",
                NO_FW.format("26.0.RC1"),
            ],
        ),
    ],
)
def test_hints_of_a_valid_stack_exactly(lm, pins, expected):
    assert _hints(lm, pins) == expected


def test_the_310b_hint_names_the_chip(lm):
    stack = {**validate_stack({"chip": "310p"}, matrix=lm).stack, "chip": "310b"}  # no 310b stack resolves today
    assert hints_for(lm, stack, {}, chosen(lm, stack))[0] == (
        f"chip 310b ({lm.chips['310b'].name}): official torch_npu support is contradictory (COMPATIBILITY.en.md "
        "lists it, the TorchNPU 26.1 install guide does not)"
    )


# --- conflict chains, whole ---------------------------------------------------------------------
def _chain(lm, pins: dict[str, str], extra=None) -> list[tuple[str, list[str], list[tuple[str, str, str, str]]]]:
    """Each conflict's summary, pins and facts (a matrix row's long source shown as '…')."""
    out = []
    for c in explain(lm, pins_from_mapping(lm, pins), extra=extra):
        facts = [(f.fact, f.rule, f.source if f.source in ("input", "derived") else "…", f.kind) for f in c.chain]
        out.append((c.summary, c.pins, facts))
    return out


def test_a_chain_narrows_free_keys_then_empties_one(lm):
    [(summary, pins, facts)] = _chain(lm, {"arch": "aarch64", "os": "centos7.6", "numpy": "2.2.6"})
    assert summary == "arch aarch64 + os centos7.6 + numpy 2.2.6: no torch_npu release works with all of them"
    assert pins == ["arch", "os", "numpy"]
    # the TorchNPU lines work with CANN 9.2.X too (the 26.2.0 release notes): the three newest CANN take the same ones
    works = "works with torch_npu 2.14.0, 2.13.0, 2.13.0rc1, 2.12.0.post3, 2.12.0.post2, 2.12.0, 2.12.0rc1, "
    assert [(fact, rule, source) for fact, rule, source, _ in facts] == [
        ("you pinned numpy = 2.2.6", "input", "input"),
        (
            "when cann >=8.2.RC1,<8.3.RC1, requires numpy <2.0 (CANN {cann} needs numpy <2 (numpy 2 gives "
            "AclSetCompileopt error code 500001))",
            "numpy/cann-8.2",
            "…",
        ),
        ("so cann must be one of {9.2.0, 9.1.1, 9.1.0, 9.0.1, 9.0.0, 8.5.2, … 16 in all}", "rule:numpy/cann-8.2", "derived"),
        (
            "when cann <9.0.0, requires numpy <2.0 (CANN {cann} predates numpy 2 support in the CANN guides: pin numpy <2)",
            "numpy/cann-before-9",
            "…",
        ),
        ("so cann must be one of {9.2.0, 9.1.1, 9.1.0, 9.0.1, 9.0.0}", "rule:numpy/cann-before-9", "derived"),
        # what narrowed the emptied key before (the os's glibc), then the rule that emptied it
        ("you pinned os = centos7.6", "input", "input"),
        ("CentOS 7.6 has glibc 2.17", "os/centos7.6", "…"),
        (
            "so torch_npu must be one of {2.5.1.post1, 2.5.1, 2.4.0.post4, 2.4.0.post2, 2.4.0, 2.3.1.post6, … 19 in all}",
            "torch_npu-glibc",
            "derived",
        ),
        (f"CANN 9.2.0 {works}2.11.0.post3, … (33 in all)", "torch_npu/*.cann", "…"),  # the first three values only
        (f"CANN 9.1.1 {works}2.11.0.post3, … (33 in all)", "torch_npu/*.cann", "…"),
        (f"CANN 9.1.0 {works}2.11.0.post3, … (33 in all)", "torch_npu/*.cann", "…"),
        ("contradiction: no torch_npu is left that fits the cann above", "torch_npu-cann", "derived"),
    ]
    assert [kind for *_, kind in facts] == ["declared"] + ["derived"] * 4 + ["declared"] + ["derived"] * 6


def _pinned(key: str, value: str) -> tuple[str, str, str, str]:
    return (f"you pinned {key} = {value}", "input", "input", "declared")


def _row(fact: str, rule: str) -> tuple[str, str, str, str]:
    return (fact, rule, "…", "derived")


def _derived(fact: str, rule: str) -> tuple[str, str, str, str]:
    return (fact, rule, "derived", "derived")


def test_driver_and_firmware_each_say_what_they_allow(lm):
    fw = (
        "the firmware of HDK 25.0.RC1 (firmware Version 7.7.0.1.231) pairs with driver 25.0.RC1; its version.info "
        "allows drivers [23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.],[25.0,25.0.]"
    )
    summary = "driver 24.1.RC3 + firmware 25.0.RC1: driver 24.1.RC3 and the firmware of HDK 25.0.RC1 are not known to be"
    assert _chain(lm, {"driver": "24.1.RC3", "firmware": "25.0.RC1"}) == [
        (
            summary + " compatible",
            ["driver", "firmware"],
            [
                _pinned("firmware", "25.0.RC1"),
                _pinned("driver", "24.1.RC3"),
                _row(
                    "driver 24.1.RC3 pairs with the firmware of HDK 24.1.RC3; its version.info allows firmware [7.0.0,7.5.99]",
                    "hdk/24.1.RC3",
                ),
                _row(fw, "hdk/25.0.RC1"),
                _derived("contradiction: driver 24.1.RC3 is excluded by the firmware above", "driver-firmware"),
            ],
        )
    ]


def test_a_chain_ends_by_naming_what_excluded_the_pin(lm):
    [(_, _, refused)] = _chain(lm, {"transformers": "4.30.0"})
    assert refused[-1] == (
        "contradiction: transformers 4.30.0 is refused by this rule",
        "rule:transformers/npu-support",
        "derived",
        "derived",
    )
    [(_, _, glibc)] = _chain(lm, {"os": "centos7.6", "torch_npu": "2.7.1"})
    assert [f[0] for f in glibc] == [
        "you pinned os = centos7.6",
        "you pinned torch_npu = 2.7.1",
        "torch_npu 2.7.1 wheels are manylinux (aarch64: glibc >= 2.28, x86_64: glibc >= 2.28)",
        "contradiction: torch_npu 2.7.1 is excluded by the os, arch above",
    ]
    [(_, _, free)] = _chain(lm, {"arch": "aarch64", "os": "centos7.6", "cann": "9.1.0"})
    assert free[-1] == _derived("contradiction: no torch_npu is left that fits the os, arch above", "torch_npu-glibc")


def test_a_chain_with_the_serving_keys_in_play(lm):
    assert _chain(lm, {"torch_npu": "2.6.0"}, SERVING_KEYS) == [
        (
            "torch_npu 2.6.0: no vllm_ascend works with it",
            ["torch_npu"],
            [
                _pinned("torch_npu", "2.6.0"),
                _row("torch_npu 2.6.0 fits vllm-ascend none", "vllm_ascend/*.torch_npu"),
                _derived("contradiction: no vllm_ascend is left that fits the torch_npu above", "vllm_ascend-torch_npu"),
            ],
        )
    ]


# --- conflict summaries, one per kind `_summary` tells apart -------------------------------------
@pytest.mark.parametrize(
    "pins,extra,summary",
    [
        # the relation's own sentence: both keys pinned, or the other one narrowed to a single value
        ({"cann": "8.0.RC2", "driver": "25.2.0"}, None, "CANN 8.0.RC2 does not work with NPU driver (HDK) 25.2.0"),
        ({"cann": "8.5.0", "firmware": "26.1.1"}, None, "CANN 8.5.0 does not work with NPU driver (HDK) 26.1.1"),
        # the other key left free with several values: it is named
        ({"chip": "310p", "cann": "7.0.0"}, None, "no HDK release works with all of them"),
        # the emptied key is not pinned: one pin says "it" (a key without a long name)
        ({"python": "3.8"}, ("triton_ascend",), "no triton_ascend works with it"),
        # the glibc rule names the first arch still open
        (
            {"os": "centos7.6", "torch_npu": "2.12.0"},
            None,
            "torch_npu 2.12.0 wheels need glibc >= 2.28 on aarch64; CentOS 7.6 has glibc 2.17",
        ),
    ],
)
def test_a_conflict_summary_exactly(lm, pins, extra, summary):
    shown = " + ".join(f"{k} {v}" for k, v in pins.items())
    assert [c.summary for c in explain(lm, pins_from_mapping(lm, pins), extra=extra)] == [f"{shown}: {summary}"]


# --- `_summary` branch by branch, on stand-in constraints (the matrix reaches only some branches) --------------
class _Says(Constraint):
    """A constraint whose summary() records what it was given and answers `text` (None: it has no sentence)."""

    def __init__(self, scope: tuple[str, ...], text: str | None, with_free: bool = False) -> None:
        self.id = "left-right"
        self.scope = scope
        self.summary_with_free = with_free
        self._text = text
        self.seen: list[dict[str, str]] = []

    def summary(self, a):
        self.seen.append(dict(a))
        return self._text


def _pin(key: str, value: str) -> Pin:
    return Pin(key=key, value=value, given=value, where="stack.yaml:1")


@pytest.mark.parametrize(
    "core,scope,dom,target,text,with_free,expected,seen",
    [
        # every other key pinned or down to one value: the constraint's own sentence, on that assignment
        (
            {"cann": "9.1.0", "driver": "25.2.0"},
            ("cann", "driver"),
            {},
            "driver",
            "S",
            False,
            "S",
            [{"cann": "9.1.0", "driver": "25.2.0"}],
        ),
        (
            {"driver": "25.2.0"},
            ("cann", "driver"),
            {"cann": ["9.1.0"]},
            "driver",
            "S",
            False,
            "S",
            [{"cann": "9.1.0", "driver": "25.2.0"}],
        ),
        # no sentence and both pinned: the constraint's id, as a relation
        (
            {"cann": "9.1.0", "driver": "25.2.0"},
            ("cann", "driver"),
            {},
            "driver",
            None,
            False,
            "no driver fits (left ↔ right)",
            [{"cann": "9.1.0", "driver": "25.2.0"}],
        ),
        # the emptied key not pinned: named by its long name, or as spelled
        ({"driver": "25.2.0"}, ("cann", "driver"), {"cann": []}, "cann", "S", False, "no CANN release works with it", []),
        ({"cann": "9.1.0"}, ("cann", "driver"), {"driver": []}, "driver", "S", False, "no HDK release works with it", []),
        (
            {"cann": "9.1.0", "os": "centos7.6"},
            ("cann", "torch_npu"),
            {"torch_npu": []},
            "torch_npu",
            "S",
            False,
            "no torch_npu release works with all of them",
            [],
        ),
        ({"cann": "9.1.0"}, ("cann", "python"), {"python": []}, "python", "S", False, "no Python works with it", []),
        ({"cann": "9.1.0"}, ("cann", "os"), {"os": []}, "os", "S", False, "no operating system works with it", []),
        ({"cann": "9.1.0"}, ("cann", "firmware"), {"firmware": []}, "firmware", "S", False, "no firmware works with it", []),
        # the pinned target, another key free with several values: that key is named
        (
            {"cann": "9.1.0"},
            ("cann", "driver"),
            {"driver": ["25.2.0", "25.3.0"]},
            "cann",
            "S",
            False,
            "no HDK release works with it",
            [],
        ),
        (
            {"cann": "9.1.0"},
            ("cann", "os", "arch"),
            {"os": ["a", "b"], "arch": ["x", "y"]},
            "cann",
            "S",
            False,
            "no operating system works with it",
            [],
        ),
        ({"cann": "9.1.0"}, ("cann", "arch"), {"arch": ["x", "y"]}, "cann", "S", False, "no arch works with it", []),
        # ... unless the constraint can say it with the free key's first value ("" when none is left)
        (
            {"cann": "9.1.0"},
            ("cann", "driver"),
            {"driver": ["25.2.0", "25.3.0"]},
            "cann",
            "S",
            True,
            "S",
            [{"cann": "9.1.0", "driver": "25.2.0"}],
        ),
        ({"cann": "9.1.0"}, ("cann", "driver"), {"driver": []}, "cann", "S", True, "S", [{"cann": "9.1.0", "driver": ""}]),
        (
            {"cann": "9.1.0"},
            ("cann", "driver"),
            {"driver": ["25.2.0", "25.3.0"]},
            "cann",
            None,
            True,
            "no HDK release works with it",
            [{"cann": "9.1.0", "driver": "25.2.0"}],
        ),
    ],
)
def test_summary_by_branch(core, scope, dom, target, text, with_free, expected, seen):
    pins = {k: _pin(k, v) for k, v in core.items()}
    c = _Says(scope, text, with_free)
    dom = {**{k: [v] for k, v in core.items()}, **dom}
    shown = " + ".join(f"{k} {p.value}" for k, p in sorted(pins.items(), key=lambda kv: SEARCH_ORDER.index(kv[0])))
    assert _summary(pins, c, target, dom) == f"{shown}: {expected}"
    assert c.seen == seen


# --- conflicts one pin carries by itself (pin_checks), whole -------------------------------------------------------
PATCH_ROW = (
    "the driver patch 24.1.rc2.2 declares compatible_version_fw=[7.0.0,7.2.99]",
    "hdk/24.1.RC2/patch/24.1.rc2.2",
    "driver version.info sample compatible_version_fw=[7.0.0,7.2.99] for 24.1.rc2.2, with the reported 'driver and "
    "firmware packages do not match' against firmware 7.3.0.1.231 (public issue/forum text, compat-facts §2.1, §2.5)",
    "derived",
    "stated",
)
CUDA_ROW = (
    "torch_npu with a CUDA build of torch fails at import: 'RuntimeError: Two accelerators cannot be used at the same "
    "time in PyTorch: npu and cuda.' Use the +cpu build (x86_64) or the plain aarch64 wheel",
    "torch_npu/cuda-torch",
    "torch_npu/__init__.py@v2.6.0-7.3.0 (ERR00007)",
    "derived",
    "stated",
)


def _you(key: str, shown: str) -> tuple[str, str, str, str, None]:
    return (f"you pinned {key} = {shown}", "input", "input", "declared", None)


@pytest.mark.parametrize(
    "pins,expected",
    [
        (
            {"driver": "24.1.rc2.2", "firmware": "24.1.RC2"},  # HDK 24.1.RC2's firmware is 7.3.0.1.231
            [
                (
                    "driver 24.1.rc2.2 (a patch of HDK 24.1.RC2) allows firmware [7.0.0,7.2.99], not 7.3.0.1.231: "
                    "'driver and firmware packages do not match'",
                    ["driver", "firmware"],
                    [_you("driver", "24.1.rc2.2 (= 24.1.RC2)"), _you("firmware", "24.1.RC2"), PATCH_ROW],
                )
            ],
        ),
        (
            {"driver": "24.1.rc2.2", "firmware": "7.3.0.1.231"},  # the firmware's own Version
            [
                (
                    "driver 24.1.rc2.2 (a patch of HDK 24.1.RC2) allows firmware [7.0.0,7.2.99], not 7.3.0.1.231: "
                    "'driver and firmware packages do not match'",
                    ["driver", "firmware"],
                    [_you("driver", "24.1.rc2.2 (= 24.1.RC2)"), _you("firmware", "7.3.0.1.231 (= 24.1.RC2)"), PATCH_ROW],
                )
            ],
        ),
        ({"driver": "24.1.rc2.2", "firmware": "24.1.RC1"}, []),  # 7.1.0.6.220: inside the range
        ({"driver": "24.1.rc2.2", "firmware": "7.1.0.6.220"}, []),
        ({"driver": "24.1.rc2.2", "firmware": "23.0.RC3"}, []),  # an HDK whose firmware Version is not recorded
        ({"driver": "24.1.RC2", "firmware": "25.0.RC1"}, []),  # not a patch: the relation judges it
        ({"driver": "24.1.rc2.2"}, []),
        ({"firmware": "24.1.RC2"}, []),
        (
            {"torch": "2.6.0+cu124"},
            [
                (
                    "torch 2.6.0+cu124 is a CUDA/ROCm build: torch_npu refuses it",
                    ["torch"],
                    [_you("torch", "2.6.0+cu124 (= 2.6.0)"), CUDA_ROW],
                )
            ],
        ),
        (
            {"torch": "2.6.0+rocm6.1"},
            [
                (
                    "torch 2.6.0+rocm6.1 is a CUDA/ROCm build: torch_npu refuses it",
                    ["torch"],
                    [_you("torch", "2.6.0+rocm6.1 (= 2.6.0)"), CUDA_ROW],
                )
            ],
        ),
        ({"torch": "2.6.0+cpu", "torch_npu": "2.6.0.post5"}, []),
        (
            {"torch_npu": "2.9.1"},
            [
                (
                    "torch_npu 2.9.1 has no published CANN pairing, so no stack with it can be validated",
                    ["torch_npu"],
                    [
                        _you("torch_npu", "2.9.1"),
                        (
                            "torch_npu 2.9.1 is on PyPI, but no source read maps it to a CANN release",
                            "torch_npu/2.9.1",
                            "PyPI torch-npu listing (compat-facts §1.3): on PyPI with no CANN mapping in any source read; "
                            "PyPI torch-npu wheel tags (compat-facts §1.5, last column)",
                            "derived",
                            "derived",
                        ),
                    ],
                )
            ],
        ),
    ],
)
def test_pin_checks_whole(lm, pins, expected):
    got = pin_checks(lm, pins_from_mapping(lm, pins))
    assert [(c.summary, c.pins, [(f.fact, f.rule, f.source, f.kind, f.confidence) for f in c.chain]) for c in got] == expected


# --- a whole validation: the workload's keys reach the solver, the explanation and the suggestions ---------------
def test_a_workload_brings_its_keys_into_every_step(lm):
    pins = pins_from_mapping(lm, {"torch_npu": "2.6.0"})
    assert validate_pins(lm, pins).valid  # a plain stack: 2.6.0 resolves
    report = validate_pins(lm, pins, workload="serving")
    assert report.valid is False and report.stack is None
    assert [c.summary for c in report.conflicts] == ["torch_npu 2.6.0: no vllm_ascend works with it"]
    assert [(s.change, s.stack["vllm_ascend"], s.validated) for s in report.suggestions] == [
        ({"torch_npu": {"from": "2.6.0", "to": "2.10.0.post4"}}, "0.23.0", True)
    ]


def test_validate_stack_keeps_where_each_pin_came_from_and_how(lm):
    report = validate_stack(
        {"cann": "8.0.RC2", "driver": "25.2.0"}, matrix=lm, where={"cann": "s.yaml:2", "driver": "s.yaml:3"}, origin="observed"
    )
    assert [(f.fact, f.source, f.kind) for f in report.conflicts[0].chain if f.rule == "input"] == [
        ("observed driver = 25.2.0", "s.yaml:3", "observed"),
        ("observed cann = 8.0.RC2", "s.yaml:2", "observed"),
    ]


# --- suggestions: one pin dropped (cheapest to change first), pairs only when no single one works ----------------
@pytest.mark.parametrize(
    "pins,expected",
    [
        (
            {"arch": "aarch64", "os": "centos7.6", "numpy": "2.2.6"},
            [
                ({"numpy": {"from": "2.2.6", "to": "1.26.4"}}, True),
                ({"os": {"from": "centos7.6", "to": "ubuntu22.04"}}, True),
                ({"arch": {"from": "aarch64", "to": "x86_64"}}, False),
            ],
        ),
        # dropping numpy, the cheapest, finds nothing; torch_npu does
        ({"cann": "9.1.0", "torch_npu": "2.6.0", "numpy": "2.2.6"}, [({"torch_npu": {"from": "2.6.0", "to": "2.12.0"}}, True)]),
        # a driver patch dropped alone comes back as the same release: both are changed together
        (
            {"driver": "24.1.rc2.2", "firmware": "24.1.RC2"},
            [
                (
                    {"firmware": {"from": "24.1.RC2", "to": "26.0.RC1"}, "driver": {"from": "24.1.rc2.2", "to": "26.0.RC1"}},
                    True,
                )
            ],
        ),
        # validated only when both the CANN and the HDK pairing are the vendor's (here the HDK one is not)
        (
            {"transformers": "4.57.1", "cann": "8.5.0", "numpy": "2.2.6", "chip": "910b", "driver": "25.2.0"},
            [({"numpy": {"from": "2.2.6", "to": "1.26.4"}}, False), ({"cann": {"from": "8.5.0", "to": "9.1.0"}}, False)],
        ),
    ],
)
def test_suggestions_exactly(lm, pins, expected):
    pinned = pins_from_mapping(lm, pins)
    assert [(s.change, s.validated) for s in suggest(lm, pinned, explain(lm, pinned))] == expected


def test_suggestions_stop_at_the_limit(lm):
    # a valid stack named as one conflict: each pin dropped re-resolves to another release, four suggestions
    values = {"python": "3.9", "numpy": "1.24.0", "transformers": "4.48.0", "accelerate": "1.0.0"}
    pins = pins_from_mapping(lm, values)
    conflict = [Conflict(summary="four pins", pins=list(values), chain=[])]
    four = [
        {"accelerate": {"from": "1.0.0", "to": "1.10.0"}},
        {"transformers": {"from": "4.48.0", "to": "4.57.1"}},
        {"numpy": {"from": "1.24.0", "to": "1.26.4"}},
        {"python": {"from": "3.9", "to": "3.10"}},
    ]
    assert [s.change for s in suggest(lm, pins, conflict, limit=5)] == four
    assert [s.change for s in suggest(lm, pins, conflict)] == four[:3]
    assert [s.change for s in suggest(lm, pins, conflict, limit=1)] == four[:1]


def test_a_core_that_propagation_cannot_empty_falls_back_to_the_search(lm):
    """When arc consistency from the pins empties no key (it is incomplete; no conflict of today's matrix needs this,
    so a consistent core stands in), the chain names the pins in search order and rests on the exhaustive search."""
    conflict = _explain_core(lm, pins_from_mapping(lm, {"python": "3.10", "cann": "9.1.0"}))
    assert conflict.summary == "cann 9.1.0 + python 3.10 cannot be completed into a valid stack"
    assert conflict.pins == ["cann", "python"]
    assert [(f.fact, f.rule, f.source, f.kind) for f in conflict.chain] == [
        ("you pinned cann = 9.1.0", "input", "input", "declared"),
        ("you pinned python = 3.10", "input", "input", "declared"),
        ("no full stack satisfies these pins together (exhaustive search over the matrix)", "search", "derived", "derived"),
    ]


# --- whole explanations of chosen conflicts, pinned by tests/golden/explain/<case>.json -----------------------------
# Each case was picked because it tells a mutant of explain.py apart that the tests above do not (the comment says
# which path it takes). They change with the matrix: `ENVKIT_UPDATE_GOLDEN=1` rewrites them; review the diff.
GOLDEN_EXPLAIN = Path(__file__).parents[1] / "golden" / "explain"
EXPLAIN_CASES = {
    # a matrix row's statement keeps its confidence in the chain
    "confidence": ({"firmware": "25.1.RC1", "chip": "a3", "cann": "9.0.0-beta.2", "numpy": "1.26.4", "torch_npu": "2.5.1"}, None),
    # a three-key constraint (glibc: torch_npu, os, arch) narrows a free key from its pinned key, not the first one
    "glibc_source": ({"os": "centos7.6", "numpy": "1.26.4", "arch": "x86_64", "cann": "8.5.1"}, SERVING_KEYS),
    # a key reached twice in a chain is told once; the first three values of a narrowed key are quoted
    "visited_once": ({"vllm_ascend": "0.9.0rc1", "arch": "aarch64", "numpy": "2.2.6", "driver": "25.5.1"}, None),
    # an emptied key's statements quote its values before it was emptied; repeated facts are told once
    "emptied_key": ({"python": "3.14", "vllm_ascend": "0.23.0", "cann": "8.0.RC3", "chip": "310p", "firmware": "26.0.RC1"}, None),
    # the optional keys in play decide which single pins conflict by themselves ...
    "serving_single": ({"vllm_ascend": "0.15.0rc1", "arch": "aarch64", "torch_npu": "2.3.1.post2"}, SERVING_KEYS),
    # ... and which pairs do
    "serving_pair": ({"arch": "x86_64", "driver": "25.5.2", "transformers": "4.57.1", "vllm_ascend": "0.16.0rc1"}, None),
    # ... and, when no single pin or pair conflicts, the minimal core of three, numpy left out (all four are
    # satisfiable without the serving keys)
    "serving_core": ({"driver": "25.5.0", "transformers": "5.5.4", "os": "ubuntu20.04", "numpy": "1.26.4"}, SERVING_KEYS),
    # more conflicting pairs than the six explained
    "seven_cores": (
        {
            "accelerate": "1.0.0",
            "torch_npu": "2.1.0.post12",
            "arch": "x86_64",
            "driver": "23.0.3",
            "transformers": "4.30.0",
            "python": "3.12",
            "vllm_ascend": "0.24.0rc1",
            "chip": "310p",
            "os": "kylinv10",
        },
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(EXPLAIN_CASES))
def test_the_explanation_of_a_conflict_whole(lm, golden, case):
    values, extra = EXPLAIN_CASES[case]
    got = {
        "pins": values,
        "extra": list(extra) if extra is not None else None,
        "conflicts": [c.model_dump(mode="json") for c in explain(lm, pins_from_mapping(lm, values), extra=extra)],
    }
    golden(GOLDEN_EXPLAIN / f"{case}.json", json.dumps(got, indent=1, ensure_ascii=False) + "\n")


# --- search: which optional keys are in play, and what solve and satisfiable take from them ---------------------
@pytest.mark.parametrize(
    "pins,workload,keys",
    [
        ({}, None, ()),
        ({"cann": "9.1.0"}, None, ()),
        ({}, "serving", ("vllm", "vllm_ascend", "triton_ascend")),
        ({"cann": "9.1.0"}, "training-mindspeed", ("mindspeed",)),
        ({"vllm": "0.23.0"}, None, ("vllm", "vllm_ascend", "triton_ascend")),  # either serving pin brings the set
        ({"vllm_ascend": "0.23.0"}, None, ("vllm", "vllm_ascend", "triton_ascend")),
        ({"triton_ascend": "3.2.2"}, None, ("triton_ascend",)),  # a pinned optional key, alone
        ({"mindspeed": "2.1.0", "vllm": "0.23.0"}, "training-mindspeed", ("vllm", "vllm_ascend", "triton_ascend", "mindspeed")),
    ],
)
def test_framework_keys(lm, pins, workload, keys):
    assert framework_keys(pins_from_mapping(lm, pins), workload) == keys


def test_an_unknown_workload_is_refused_naming_the_known_ones():
    with pytest.raises(BadInput) as err:
        framework_keys({}, "inference")
    assert (err.value.message, err.value.where, err.value.hint, err.value.exit_code) == (
        "unknown workload 'inference'",
        None,
        "Workloads: serving, serving-multi-node, training-mindspeed (or none: a plain stack).",
        2,
    )


def test_solve_takes_the_optional_keys_it_is_given_and_prefers_the_os_python(lm):
    pins = pins_from_mapping(lm, {"cann": "9.1.0"})
    assert "vllm_ascend" not in solve(lm, pins).stack
    serving = solve(lm, pins, SERVING_KEYS).stack
    assert {k: serving[k] for k in SERVING_KEYS} == {"vllm": "0.23.0", "vllm_ascend": "0.23.0", "triton_ascend": "3.2.2"}
    # the python3 the OS ships, where the stack allows it (newer ones exist for both)
    assert solve(lm, pins_from_mapping(lm, {"os": "ubuntu24.04"})).stack["python"] == "3.12"
    assert solve(lm, pins_from_mapping(lm, {"os": "openeuler24.03"})).stack["python"] == "3.11"


def test_satisfiable_brings_in_the_keys_the_pins_imply(lm):
    pins = pins_from_mapping(lm, {"vllm": "0.23.0", "torch_npu": "2.6.0"})
    # vLLM 0.23.0 brings vllm-ascend into play, whose releases for it pin torch_npu 2.10.0.post4
    assert not satisfiable(lm, pins)
    assert satisfiable(lm, pins, ())  # with no optional key in play, the vllm pin relates to nothing
    assert satisfiable(lm, pins_from_mapping(lm, {"vllm": "0.23.0"}))


def test_a_narrowing_names_the_key_it_came_from_not_the_first_of_its_rule(lm):
    """A three-key rule that narrows CANN from the pinned os while its first other key (accelerate) is free: the
    chain quotes the rule for the os's value (no shipped rule does this yet, so one is added in memory)."""
    lm2 = _with_rule(
        lm,
        id="test/three-keys",
        when={"cann": "<8.5"},
        requires={"accelerate": ">=0.1", "glibc": ">=2.28"},
        message="CANN {cann} needs glibc >=2.28, not the glibc of {os}",
    )
    [conflict] = explain(lm2, pins_from_mapping(lm2, {"os": "centos7.6", "torch_npu": "2.4.0"}))
    says = "when cann <8.5, requires accelerate >=0.1; glibc >=2.28 (CANN {cann} needs glibc >=2.28, not the glibc of "
    assert [(f.fact, f.rule) for f in conflict.chain] == [
        ("you pinned os = centos7.6", "input"),
        ("you pinned torch_npu = 2.4.0", "input"),
        (
            "torch_npu 2.4.0 is paired with CANN 8.0.RC3 in the vendor's table, and TorchNPU 6.0.rc3 works with CANN 8.0.RC3",
            "torch_npu/2.4.0, torch_npu_line/6.0.rc3",
        ),
        ("so cann must be one of {8.0.RC3}", "torch_npu-cann"),
        (says + "centos7.6)", "test/three-keys"),  # the os the narrowing came from
        (says + "{os})", "test/three-keys"),  # the free accelerate's values, which the rule does not name
        ("contradiction: no cann is left that fits the accelerate, os above", "rule:test/three-keys"),
    ]


# --- search: domains, the budget, the depth-first search with forward checking -----------------------------------


def test_initial_domains(lm):
    plain = initial_domains(lm, {}, False, ())
    assert plain["chip"][:1] == ["910b"] and plain["arch"][:1] == ["aarch64"] and plain["os"][:1] == ["ubuntu22.04"]
    assert plain["torch"] == torch_versions(lm, mapped_only=True)  # no torch that only an unpaired torch_npu pins
    assert "2.9.1" not in plain["torch"] and "2.9.1" in torch_versions(lm, mapped_only=False)
    assert plain["transformers"] == lm.package("transformers")
    assert not any(k in plain for k in ("vllm", "vllm_ascend", "triton_ascend", "mindspeed"))
    # the embedded default comes first, whatever the matrix's order; without one, the matrix's order
    moved = initial_domains(edited_matrix(lm, defaults={"chip": "a3", "arch": "x86_64", "os": "openeuler22.03"}), {}, False, ())
    assert (moved["chip"][:2], moved["arch"], moved["os"][:2]) == (
        ["a3", "910b"],
        ["x86_64", "aarch64"],
        ["openeuler22.03", "ubuntu20.04"],
    )
    bare = initial_domains(edited_matrix(lm, defaults={}), {}, False, ())
    assert (bare["chip"], bare["arch"]) == ([c.id for c in lm.model.chips], ["aarch64", "x86_64"])
    serving = initial_domains(lm, {}, False, SERVING_KEYS)
    assert serving["vllm_ascend"][:3] == ["0.23.0", "0.18.0", "0.13.0"]  # no pre-release unless pinned
    assert serving["triton_ascend"] == ["3.2.2", "3.2.1", "3.2.0", ABSENT]  # a vllm-ascend release may come without
    # the Transformers bounds vllm-ascend releases name join the recommended list, after it
    assert serving["transformers"] == with_bounds(
        plain["transformers"], [r.transformers.spec for r in lm.model.vllm_ascend if r.transformers]
    )
    assert serving["transformers"][len(plain["transformers"]) :][:2] == ["5.14.1", "5.13.0"]
    assert initial_domains(lm, {}, False, ("mindspeed",))["mindspeed"] == [r.version for r in lm.model.mindspeed]


def test_optional_keys_resolve_and_may_be_left_out(lm):
    assert solve(lm, pins_from_mapping(lm, {"cann": "9.1.0"}), ("mindspeed",)).stack["mindspeed"] == "26.1.0"
    old = solve(lm, pins_from_mapping(lm, {"vllm_ascend": "0.7.3"})).stack  # no triton-ascend in that release
    assert old["vllm_ascend"] == "0.7.3" and "triton_ascend" not in old


def test_satisfiable_takes_the_loosest_pass(lm):
    pins = pins_from_mapping(
        lm, {"transformers": "4.57.1", "cann": "8.5.0", "numpy": "1.26.4", "chip": "910b", "driver": "25.2.0"}
    )
    assert satisfiable(lm, pins)
    assert solve(lm, pins).validated_hdk is False  # only a pairing outside the vendor's HDK table completes it


def test_a_one_key_rule_narrows_a_free_key_before_the_search(lm):
    edited = _with_rule(lm, id="test/no-transformers-5.1x", when={"transformers": ">=5.10"}, forbid=True, message="no")
    assert solve(lm, {}).stack["transformers"] == "5.10.1"
    assert solve(edited, {}).stack["transformers"] == "5.5.4"


def test_the_search_budget_counts_every_node(lm, monkeypatch):
    pins = pins_from_mapping(lm, {"cann": "9.1.0"})
    monkeypatch.setattr(search, "NODE_BUDGET", 13)  # twelve keys and the leaf, no backtracking
    assert solve(lm, pins) is not None
    monkeypatch.setattr(search, "NODE_BUDGET", 12)
    with pytest.raises(CannotRun) as err:
        solve(lm, pins)
    assert (err.value.message, err.value.hint, err.value.exit_code) == (
        "the resolver exceeded its search budget",
        "This is a bug in envkit's matrix or resolver: report the stack that caused it.",
        2,
    )


def test_the_search_backtracks_with_the_domains_it_had():
    """chip a narrows arch to x, where no os fits; chip b then needs arch y, which forward checking under a must not
    have taken from the domains the search returns to. No start keys: no arc consistency before the search."""

    def rel(left: str, right: str, pairs: set[tuple[str, str]]) -> Relation:
        return Relation(f"{left}-{right}", left, right, lambda a, b: (a, b) in pairs, lambda v: None, lambda v: None)

    constraints = [rel("chip", "arch", {("a", "x"), ("b", "y")}), rel("arch", "os", {("y", "p")})]
    domains = {"chip": ["a", "b"], "arch": ["x", "y"], "os": ["q", "p"]}
    assert search._Solver(constraints, domains).solve() == {"chip": "b", "arch": "y", "os": "p"}
    assert domains == {"chip": ["a", "b"], "arch": ["x", "y"], "os": ["q", "p"]}


def test_constraints_are_built_once_per_matrix_and_never_taken_from_another(lm, monkeypatch):
    first = search.pass_constraints(lm)
    assert search.pass_constraints(edited_matrix(lm)) is not first  # another matrix object: its own constraints
    assert search.pass_constraints(lm) is first  # and this one's are still cached
    assert search.pass_constraints(lm, True, True) is not search.pass_constraints(lm)
    edited = edited_matrix(lm, rules=[])
    # an entry left under the edited matrix's id by another matrix (ids are reused once an object is freed)
    monkeypatch.setitem(search._CONSTRAINT_CACHE, (id(edited), False, False), (lm, search.pass_constraints(lm)))
    mine = search.pass_constraints(edited)
    assert mine and all(isinstance(c, Constraint) for c in mine)
    assert not any(isinstance(c, RuleConstraint) for c in mine)
    assert any(isinstance(c, RuleConstraint) for c in search.pass_constraints(lm))


def test_an_empty_value_is_no_pin(lm):
    assert pins_from_mapping(lm, {"cann": "", "python": "  ", "chip": None}) == {}
    assert list(pins_from_mapping(lm, {"cann": " 8.5.0 ", "python": ""})) == ["cann"]


def test_the_os_python_is_tried_first_then_the_others_in_order(lm):
    def python_numpy(bad: set[str]) -> Relation:
        return Relation("python-numpy", "python", "numpy", lambda p, n: p not in bad, lambda v: None, lambda v: None)

    domains = {"os": ["ubuntu24.04"], "python": ["3.13", "3.12", "3.11"], "numpy": ["1.0"]}  # Ubuntu 24.04 ships 3.12
    assert search._Solver([python_numpy(set())], domains, lm).solve()["python"] == "3.12"
    assert search._Solver([python_numpy({"3.12"})], domains, lm).solve()["python"] == "3.13"
    assert search._Solver([python_numpy({"3.12", "3.13"})], domains, lm).solve()["python"] == "3.11"
    assert search._Solver([python_numpy(set())], domains).solve()["python"] == "3.13"  # no matrix: newest first


@pytest.mark.parametrize(
    "values, workload",
    [({}, None), ({"chip": "a3"}, None), ({}, "serving"), ({}, "training-mindspeed"), ({"arch": "x86_64"}, None)],
)
def test_a_resolution_carries_the_rows_it_chose(lm, values, workload):
    """Deriving the lock reads the rows the resolution chose (`Resolution.rows`), each the matrix's row of its value."""
    pins = pins_from_mapping(lm, values)
    res = solve(lm, pins, framework_keys(pins, workload))
    assert res is not None
    rows, s = res.rows, res.stack
    assert rows.chip is lm.chips[s["chip"]] and rows.os is lm.oses[s["os"]]
    assert rows.arch.id == s["arch"] and rows.arch in lm.model.arches
    assert rows.driver is lm.hdk(s["driver"]) and rows.firmware is lm.hdk(s["firmware"])
    assert rows.cann is lm.cann(s["cann"]) and rows.torch_npu is lm.torch_npu(s["torch_npu"])
    assert rows.torch_build is lm.torch_build(s["torch"], s["arch"])
    for key in ("vllm_ascend", "triton_ascend", "mindspeed"):
        row = getattr(rows, key)
        assert (row is None) == (key not in s), key
        if row is not None:
            assert row is getattr(lm, key)(s[key])
    if workload == "serving":
        assert rows.vllm_ascend is not None
    if workload == "training-mindspeed":
        assert rows.mindspeed is not None


def test_chosen_refuses_a_value_the_matrix_lacks(lm):
    res = solve(lm, pins_from_mapping(lm, {}))
    with pytest.raises(KeyError, match="mindspeed 0.0.0"):
        search.chosen(lm, {**res.stack, "mindspeed": "0.0.0"})
    with pytest.raises(KeyError, match="arch sparc"):
        search.chosen(lm, {**res.stack, "arch": "sparc"})


def test_a_served_stack_s_hints_name_the_vendor_s_source_and_what_to_remove(lm):
    """_served_hints, whole: a chip outside its torch_npu's TorchNPU line, taken because the vendor runs vllm-ascend
    with it there (the vendor's own source named), and a chip whose vendor image uninstalls triton-ascend."""
    from envkit.core.resolve.hints import _served_hints

    res = solve(lm, pins_from_mapping(lm, {"vllm_ascend": "0.30.0rc2", "chip": "310p"}))
    assert res is not None
    r, t = lm.vllm_ascend("0.30.0rc2"), lm.torch_npu_row(res.stack["torch_npu"])
    assert _served_hints(lm, res.stack, res.rows) == [
        f"chip 310p is not among the chips of TorchNPU {t.line}; torch_npu {t.version} is taken because the vendor runs "
        f"vllm-ascend 0.30.0rc2 with it on 310p ({r.runs_on.sources[0]})",
        "vllm-ascend 0.30.0rc2 installs no triton-ascend on chip 310p (the vendor's image there uninstalls it): "
        "remove triton and triton-ascend if pip pulls them in",
    ]


def test_an_sdist_only_vllm_ascend_is_said_whole(lm):
    from envkit.core.resolve.hints import hints_for

    pins = pins_from_mapping(lm, {"vllm_ascend": "0.30.0rc2"})
    res = solve(lm, pins)
    assert res is not None and lm.vllm_ascend("0.30.0rc2").sdist_only
    assert (
        "vllm-ascend 0.30.0rc2 is on PyPI as an sdist only: pip builds it from source (with CANN's set_env.sh sourced), "
        "and `envkit lock`, which takes wheels only, cannot close it; resolve never picks one unless it is pinned"
    ) in hints_for(lm, res.stack, pins, res.rows)


def test_resolutions_are_equal_by_their_values_and_only_to_resolutions(lm):
    a = solve(lm, pins_from_mapping(lm, {}))
    b = solve(lm, pins_from_mapping(lm, {}))
    other = solve(lm, pins_from_mapping(lm, {"vllm_ascend": "0.30.0rc2"}))
    assert a is not None and b is not None and other is not None and a is not b
    assert a == b and not (a != b)
    assert a != other and not (a == other)
    assert a != a.stack and (a == object()) is False


def test_a_pin_is_declared_unless_said_otherwise():
    from envkit.core.resolve.pins import Pin

    pin = Pin("torch", "2.1.0", "2.1.0", "--torch")
    assert (pin.origin, pin.local) == ("declared", None)

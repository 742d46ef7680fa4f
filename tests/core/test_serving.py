"""Serving and training frameworks: the optional keys vllm, vllm_ascend, triton_ascend, mindspeed (matrices/serving.yaml).

A plain stack never meets them (its lock is unchanged); `--workload serving|training-mindspeed` completes them; each
edge of constraints.EDGES that relates them refuses a stack that really breaks its rule, and names the rule."""

from __future__ import annotations

import pytest

from envkit.core import constraints
from envkit.core.matrix import check_matrix, load_matrix
from envkit.core.resolve import framework_keys, pins_from_mapping, solve, validate_pins, validate_stack
from envkit.core.resolve.search import initial_domains
from envkit.records import replace

from .conftest import edited_matrix


@pytest.fixture(scope="module")
def lm():
    return load_matrix()


def test_the_serving_matrix_is_consistent_and_every_framework_edge_names_its_rule(lm):
    assert check_matrix(lm) == []
    new = [e for e in constraints.EDGES if e.__name__.startswith(("vllm_ascend_", "triton_ascend_", "mindspeed_"))]
    assert len(new) == 17
    # the python edges of vllm-ascend and the CANN/torch edges of MindSpeed, checked directly on a full assignment
    build = {e.__name__: e(lm, constraints.Strictness()) for e in new}
    assert not build["vllm_ascend_python"].check({"vllm_ascend": "0.9.1", "python": "3.12"})
    assert not build["vllm_ascend_cann"].check({"vllm_ascend": "0.23.0", "cann": "9.0.1"})
    assert not build["mindspeed_cann"].check({"mindspeed": "2.1.0", "cann": "8.5.0"})
    assert not build["mindspeed_torch"].check({"mindspeed": "26.1.0", "torch": "2.10.0"})
    assert build["mindspeed_torch"].check({"mindspeed": "26.1.0", "torch": "2.7.1"})
    # the glibc of vllm-ascend's wheels is per arch (PyPI's files, derived by `matrix refresh`): 0.22.1rc1 publishes
    # manylinux_2_24 x86_64 and manylinux_2_34 aarch64 wheels; an sdist-only row (no manylinux) meets every OS
    glibc = build["vllm_ascend_glibc"]
    assert glibc.check({"vllm_ascend": "0.22.1rc1", "os": "ubuntu20.04", "arch": "x86_64"})
    assert not glibc.check({"vllm_ascend": "0.22.1rc1", "os": "ubuntu20.04", "arch": "aarch64"})
    assert glibc.check({"vllm_ascend": "0.22.1rc1", "os": "ubuntu22.04", "arch": "aarch64"})
    assert glibc.check({"vllm_ascend": "none", "os": "centos7.6", "arch": "aarch64"})
    sdist = next(r.version for r in lm.model.vllm_ascend if r.manylinux is None)
    assert glibc.check({"vllm_ascend": sdist, "os": "centos7.6", "arch": "aarch64"})
    assert build["triton_ascend_glibc"].check({"triton_ascend": "3.2.0", "os": "ubuntu20.04", "arch": "x86_64"})
    assert not build["triton_ascend_glibc"].check({"triton_ascend": "3.2.0", "os": "centos7.6", "arch": "x86_64"})
    # the device a PyPI wheel is built for (its _build_info.py), the chips a release states, the chips of MindSpeed
    chip = build["vllm_ascend_chip"]
    assert chip.check({"vllm_ascend": "0.23.0", "chip": "910b"}) and not chip.check({"vllm_ascend": "0.23.0", "chip": "a3"})
    assert chip.check({"vllm_ascend": "0.23.0.post1", "chip": "a3"})  # an sdist: built where it installs
    assert not chip.check({"vllm_ascend": "0.9.1", "chip": "310p"}) and chip.check({"vllm_ascend": "0.9.1", "chip": "a3"})
    assert not chip.check({"vllm_ascend": "0.23.0.post1", "chip": "910"})  # no device family of vllm-ascend
    assert build["mindspeed_chip"].check({"mindspeed": "26.1.0", "chip": "a3"})
    assert not build["mindspeed_chip"].check({"mindspeed": "26.1.0", "chip": "310p"})
    for edge in new:
        assert "matrices/serving.yaml" in edge.__doc__, edge.__name__


# (pins, workload, the edge id the conflict must name, text of the rule in the chain)
BROKEN = [
    ({"vllm_ascend": "0.23.0", "vllm": "0.9.1"}, None, "vllm_ascend-vllm", "pins vLLM 0.23.0"),
    ({"vllm": "0.25.1"}, None, "vllm_ascend-vllm", "vllm 0.25.1 fits vllm-ascend 0.25.1rc1"),
    ({"vllm_ascend": "0.23.0", "torch_npu": "2.5.1.post1"}, None, "vllm_ascend-torch_npu", "pins torch_npu 2.10.0.post4"),
    (
        {"vllm_ascend": "0.23.0", "cann": "8.2.RC1"},
        None,
        "vllm_ascend-torch_npu",
        "vllm_ascend 0.23.0 is excluded by the torch_npu above",
    ),
    ({"vllm_ascend": "0.9.1", "triton_ascend": "3.2.2"}, None, "vllm_ascend-triton_ascend", "installs no triton-ascend"),
    (
        {"vllm_ascend": "0.23.0", "os": "ubuntu20.04"},
        None,
        "vllm_ascend-glibc",
        "manylinux (aarch64: glibc >= 2.34, x86_64: glibc >= 2.34)",
    ),
    (
        {"vllm_ascend": "0.22.1rc1", "os": "ubuntu20.04", "arch": "aarch64"},
        None,
        "vllm_ascend-glibc",
        "vllm-ascend 0.22.1rc1 wheels are manylinux (aarch64: glibc >= 2.34, x86_64: glibc >= 2.24)",
    ),
    ({"triton_ascend": "3.2.0", "os": "centos7.6"}, None, "triton_ascend-glibc", "manylinux (aarch64: glibc >= 2.27"),
    (
        {"vllm_ascend": "0.11.0", "transformers": "5.10.1"},
        None,
        "vllm_ascend-transformers",
        "needs transformers >=4.55.2,<=4.57.1",
    ),
    ({"vllm_ascend": "0.25.1rc1", "transformers": "5.14.0"}, None, "vllm_ascend-transformers", "needs transformers ==5.14.1"),
    ({"vllm_ascend": "0.23.0", "chip": "a3"}, None, "vllm_ascend-chip", "has PyPI wheels built for A2 (chip 910b)"),
    ({"vllm_ascend": "0.9.1", "chip": "310p"}, None, "vllm_ascend-chip", "vllm-ascend 0.9.1 runs on chips 910b, a3"),
    ({"chip": "910"}, "serving", "vllm_ascend-chip", "vllm-ascend builds for no device family of chip 910"),
    ({"triton_ascend": "3.2.0", "cann": "9.1.0"}, None, "triton_ascend-cann", "strictly bound to CANN"),
    # 3.2.0 is bound to CANN 8.5.0 and 8.5.1 (vllm-ascend's), not to the 8.5.X series
    ({"triton_ascend": "3.2.0", "cann": "8.5.2"}, None, "triton_ascend-cann", "cann 8.5.2 fits triton-ascend none"),
    ({"triton_ascend": "3.2.2", "chip": "310p"}, None, "triton_ascend-chip", "chip 310p fits triton-ascend none"),
    ({"triton_ascend": "3.2.0", "python": "3.12"}, None, "triton_ascend-python", "needs Python >=3.9,<3.12"),
    (
        {"mindspeed": "2.2.0_core_r0.12.1", "torch_npu": "2.7.1.post8"},
        None,
        "mindspeed-torch_npu",
        "supports TorchNPU 7.2.0 only",
    ),
    ({"mindspeed": "2.1.0", "cann": "9.1.0"}, None, "mindspeed-torch_npu", "mindspeed 2.1.0 is excluded by the torch_npu above"),
    ({"mindspeed": "26.1.0", "torch": "2.6.0"}, None, "mindspeed-torch_npu", "supports TorchNPU 26.1.0 only"),
    ({"mindspeed": "26.1.0", "python": "3.11"}, None, "mindspeed-python", "needs Python >=3.10,<3.11"),
]


@pytest.mark.parametrize("pins,workload,rule,text", BROKEN, ids=[b[2] for b in BROKEN])
def test_each_framework_edge_explains_a_stack_that_breaks_it(lm, pins, workload, rule, text):
    report = validate_pins(lm, pins_from_mapping(lm, pins), workload)
    assert not report.valid
    facts = [(f.rule, f.fact) for c in report.conflicts for f in c.chain]
    assert any(r == rule for r, _ in facts), facts  # the edge is named ...
    assert any(text in fact for _, fact in facts), facts  # ... with what its matrix row says


def test_the_serving_workload_completes_the_newest_final_vllm_ascend_and_its_stack(lm):
    pins = pins_from_mapping(lm, {})
    s = solve(lm, pins, framework_keys(pins, "serving")).stack
    assert (s["vllm_ascend"], s["vllm"], s["triton_ascend"], s["torch_npu"], s["cann"]) == (
        "0.23.0",
        "0.23.0",
        "3.2.2",
        "2.10.0.post4",
        "9.1.0",
    )
    assert "mindspeed" not in s


def test_a_pinned_release_candidate_brings_its_own_stack_and_one_without_triton_leaves_it_out(lm):
    s = validate_stack({"vllm_ascend": "0.25.1rc1"}, matrix=lm).stack
    assert (s["vllm"], s["cann"], s["torch_npu"], s["triton_ascend"]) == ("0.25.1", "9.0.1", "2.10.0.post2", "3.2.1")
    s = validate_stack({"vllm_ascend": "0.9.1"}, matrix=lm).stack
    assert (s["vllm"], s["torch_npu"], s["cann"]) == ("0.9.1", "2.5.1.post1", "8.2.RC1") and "triton_ascend" not in s


def test_vllm_ascend_0_11_0_resolves_to_torch_npu_2_7_1_post1_from_the_ascend_mirror(lm):
    from envkit.core.derive import build_lock

    for version in ("0.11.0", "0.11.0rc3"):
        pins = pins_from_mapping(lm, {"vllm_ascend": version, "arch": "x86_64"})
        res = solve(lm, pins, framework_keys(pins, "serving"))
        s = res.stack
        assert (s["vllm"], s["torch_npu"], s["torch"], s["cann"]) == ("0.11.0", "2.7.1.post1", "2.7.1", "8.3.RC2"), version
        assert s["python"] in ("3.9", "3.10", "3.11") and "triton_ascend" not in s
        # the pairing is vllm-ascend's, not the vendor's torch_npu table: not validated
        assert not res.validated_cann
        pins_by_name = {p.name: p for p in build_lock(lm, res, "envkit resolve").python.requirements}
        assert (pins_by_name["torch_npu"].version, pins_by_name["torch_npu"].index) == ("2.7.1.post1", "ascend-pypi")
        assert (pins_by_name["torch"].version, pins_by_name["torch"].index) == ("2.7.1+cpu", "pytorch-cpu")
    # a torch_npu on PyPI keeps the default index
    res = solve(lm, pins_from_mapping(lm, {"vllm_ascend": "0.23.0"}))
    assert {p.name: p.index for p in build_lock(lm, res, "envkit resolve").python.requirements}["torch_npu"] is None


def test_vllm_ascend_0_11_0_with_another_torch_npu_names_its_pin_and_the_sources_that_disagree(lm):
    report = validate_stack({"vllm_ascend": "0.11.0", "torch_npu": "2.10.0.post4"}, matrix=lm)
    assert not report.valid
    facts = [(f.rule, f.fact) for c in report.conflicts for f in c.chain]
    assert any(r == "vllm_ascend-torch_npu" for r, _ in facts), facts
    pinned = [fact for _, fact in facts if "vllm-ascend 0.11.0 pins torch_npu 2.7.1.post1" in fact]
    assert pinned and "Requires-Dist torch-npu==2.7.1" in pinned[0], facts


def test_a_row_whose_torch_npu_the_matrix_lacks_says_what_it_needs(lm):
    rows = [
        replace(r, **{"torch_npu": None, "needs": ["torch_npu 9.9.9 (not in matrices/torch_npu.yaml)"]})
        if r.version == "0.23.0"
        else r
        for r in lm.model.vllm_ascend
    ]
    lm2 = type(lm)(model=replace(lm.model, **{"vllm_ascend": rows}), digest=lm.digest, files=lm.files)
    assert check_matrix(lm2) == []
    report = validate_stack({"vllm_ascend": "0.23.0"}, matrix=lm2)
    assert not report.valid
    assert any("needs torch_npu 9.9.9" in f.fact for c in report.conflicts for f in c.chain)


def test_training_mindspeed_completes_mindspeed_and_a_plain_stack_has_no_framework(lm):
    pins = pins_from_mapping(lm, {})
    s = solve(lm, pins, framework_keys(pins, "training-mindspeed")).stack
    assert (s["mindspeed"], s["torch"], s["python"], s["cann"]) == ("26.1.0", "2.7.1", "3.10", "9.1.0")
    assert not set(solve(lm, pins).stack) & {"vllm", "vllm_ascend", "triton_ascend", "mindspeed"}


def test_a_serving_lock_pins_vllm_then_vllm_ascend_and_triton_ascend_from_the_ascend_index(lm):
    from envkit.core.derive import build_lock
    from envkit.lock.file import dump_lock

    pins = pins_from_mapping(lm, {})
    lock = build_lock(lm, solve(lm, pins, framework_keys(pins, "serving")), "envkit resolve --workload serving")
    names = [p.name for p in lock.python.requirements]
    assert names[-3:] == ["vllm", "vllm-ascend", "triton-ascend"]
    triton = lock.python.requirements[-1]
    assert triton.index == "ascend-pypi"
    assert lock.python.indexes["ascend-pypi"] == "https://mirrors.huaweicloud.com/ascend/repos/pypi"
    assert "vllm_ascend: 0.23.0" in dump_lock(lock) and lock.provenance["triton_ascend"].rule.startswith("vllm_ascend/0.23.0")
    plain = dump_lock(build_lock(lm, solve(lm, pins), "envkit resolve"))
    assert "vllm_ascend:" not in plain and "triton-ascend" not in plain and "ascend-pypi" not in plain


def test_a_stack_file_takes_the_framework_keys(tmp_path):
    from envkit.core.stackfile import read_stack_file

    path = tmp_path / "serve.yaml"
    path.write_text("chip: 910b\nvllm_ascend: 0.23.0\nmindspeed: 26.1.0\n")
    values, where = read_stack_file(path)
    assert values == {"chip": "910b", "vllm_ascend": "0.23.0", "mindspeed": "26.1.0"} and where["vllm_ascend"].endswith(":2")


# Every release of vllm-ascend's release compatibility table (versioning_policy.md @01f8a0b0, @182b75ea) is a row:
# pinned alone with `--workload serving` it resolves to the table's vLLM, CANN, torch_npu and triton-ascend ...
TABLE_RESOLVES = {
    # the sdist-only releases on PyPI (their own versioning table, requirements.txt and Dockerfiles): pinned, they resolve
    "0.30.0rc2": ("0.30.0", "9.2.0", "2.10.0.post4", "3.2.2"),
    "0.30.0rc1": ("0.30.0", "9.2.0", "2.10.0.post4", "3.2.2"),
    "0.29.0rc1": ("0.29.0", "9.1.0", "2.10.0.post4", "3.2.2"),
    "0.28.0rc1": ("0.28.0", "9.1.0", "2.10.0.post4", "3.2.2"),
    "0.27.1rc1": ("0.27.1", "9.1.0", "2.10.0.post4", "3.2.2"),
    "0.23.0.post1": ("0.23.0", "9.1.0", "2.10.0.post4", "3.2.2"),
    "0.23.0rc1": ("0.23.0", "9.0.1", "2.10.0.post2", "3.2.1"),
    "0.22.1rc1": ("0.22.1", "9.0.0", "2.10.0", "3.2.1"),
    "0.21.0rc1": ("0.21.0", "9.0.0", "2.10.0", "3.2.1"),
    "0.20.2rc1": ("0.20.2", "9.0.0", "2.10.0", "3.2.1"),
    # CANN 8.5.1 with triton-ascend 3.2.0: vllm-ascend's binding, beside triton-ascend's own 8.5.0
    "0.19.1rc1": ("0.19.1", "8.5.1", "2.9.0", "3.2.0"),
    "0.18.0": ("0.18.0", "8.5.1", "2.9.0", "3.2.0"),
    "0.18.0rc1": ("0.18.0", "8.5.1", "2.9.0", "3.2.0"),
    "0.17.0rc1": ("0.17.0", "8.5.1", "2.9.0", "3.2.0"),
    "0.16.0rc1": ("0.16.0", "8.5.1", "2.9.0", "3.2.0"),
    "0.15.0rc1": ("0.15.0", "8.5.0", "2.9.0", "3.2.0"),
    "0.14.0rc1": ("0.14.1", "8.5.0", "2.9.0", "3.2.0"),
    "0.13.0rc3": ("0.13.0", "8.5.1", "2.8.0.post2", "3.2.0"),
    "0.13.0": ("0.13.0", "8.5.0", "2.8.0.post2", "3.2.0"),
    "0.9.1rc3": ("0.9.1", "8.2.RC1", "2.5.1.post1", None),
    "0.9.1rc2": ("0.9.1", "8.2.RC1", "2.5.1.post1", None),
    "0.9.0rc1": ("0.9.0", "8.1.RC1", "2.5.1", None),
}
# ... or is refused by the edge its `needs` names (a torch_npu dev build, a CANN binding the matrix lacks).
TABLE_NEEDS = {
    "0.13.0rc2": ("vllm_ascend-torch_npu", "torch_npu 2.8.0.post1"),
    "0.13.0rc1": ("torch_npu-cann", "CANN 8.3.RC2 for torch_npu 2.8.0"),
    "0.12.0rc1": ("torch_npu-cann", "CANN 8.3.RC2 for torch_npu 2.8.0"),
    "0.11.0rc2": ("torch_npu-cann", "CANN 8.3.RC2 for torch_npu 2.7.1"),
    "0.11.0rc0": ("vllm_ascend-torch_npu", "torch_npu 2.7.1.dev20250724"),
    "0.10.2rc1": ("vllm_ascend-torch_npu", "torch_npu 2.7.1.dev20250724"),
    "0.10.1rc1": ("vllm_ascend-torch_npu", "torch_npu 2.7.1.dev20250724"),
    "0.10.0rc1": ("vllm_ascend-torch_npu", "torch_npu 2.7.1.dev20250724"),
    "0.9.2rc1": ("vllm_ascend-torch_npu", "torch_npu 2.5.1.post1.dev20250619"),
    "0.9.1rc1": ("vllm_ascend-torch_npu", "torch_npu 2.5.1.post1.dev20250528"),
}


@pytest.mark.parametrize("version", sorted(TABLE_RESOLVES))
def test_a_vllm_ascend_release_of_the_table_resolves_to_its_stated_stack(lm, version):
    report = validate_pins(lm, pins_from_mapping(lm, {"vllm_ascend": version}), "serving")
    assert report.valid, [f.fact for c in report.conflicts for f in c.chain]
    s = report.stack
    assert (s["vllm"], s["cann"], s["torch_npu"], s.get("triton_ascend")) == TABLE_RESOLVES[version]


@pytest.mark.parametrize("version", sorted(TABLE_NEEDS))
def test_a_vllm_ascend_release_of_the_table_the_matrix_cannot_serve_says_what_it_needs(lm, version):
    rule, need = TABLE_NEEDS[version]
    (row,) = [r for r in lm.model.vllm_ascend if r.version == version]
    assert any(need in n for n in row.needs), row.needs
    report = validate_pins(lm, pins_from_mapping(lm, {"vllm_ascend": version}), "serving")
    assert not report.valid
    assert rule in [f.rule for c in report.conflicts for f in c.chain]


def test_a_vllm_ascend_row_resolves_exactly_when_it_names_nothing_the_matrix_lacks(lm):
    # a row that cannot resolve says why in `needs`; a row with `needs` is one the matrix cannot serve yet
    resolves = {
        r.version: validate_pins(lm, pins_from_mapping(lm, {"vllm_ascend": r.version}), "serving").valid
        for r in lm.model.vllm_ascend
    }
    assert {v for v, ok in resolves.items() if not ok} == {r.version for r in lm.model.vllm_ascend if r.needs}


# (vllm-ascend, transformers, accepted): each bound of the release's spec, and the release just beyond it
TRANSFORMERS_BOUNDS = [
    ("0.11.0", "4.57.1", True),  # vllm-ascend 0.11.0 Requires-Dist transformers<=4.57.1: the bound itself
    ("0.11.0", "4.57.2", False),  # ... and the next release
    ("0.11.0", "4.55.2", True),  # vLLM 0.11.0 Requires-Dist transformers>=4.55.2: the bound itself
    ("0.11.0", "4.55.1", False),  # ... and the release before it
    ("0.9.1", "4.52.4", True),  # vllm-ascend 0.9.1 transformers<4.53.0: the last release below it
    ("0.9.1", "4.53.0", False),  # ... and the bound, excluded
    ("0.9.1", "4.51.1", True),  # vLLM 0.9.1 transformers>=4.51.1
    ("0.9.1", "4.51.0", False),
    ("0.25.1rc1", "5.14.1", True),  # an exact pin (==5.14.1): its neighbours on both sides are refused
    ("0.25.1rc1", "5.14.0", False),
    ("0.25.1rc1", "5.15.0", False),
]


@pytest.mark.parametrize("release,version,accepted", TRANSFORMERS_BOUNDS, ids=[f"{r}-{v}" for r, v, _ in TRANSFORMERS_BOUNDS])
def test_the_transformers_of_a_vllm_ascend_release_holds_at_its_bounds(lm, release, version, accepted):
    edge = constraints.vllm_ascend_transformers(lm, constraints.Strictness())
    assert edge.check({"vllm_ascend": release, "transformers": version}) is accepted
    report = validate_pins(lm, pins_from_mapping(lm, {"vllm_ascend": release, "transformers": version}))
    rules = {f.rule for c in report.conflicts for f in c.chain}
    assert ("vllm_ascend-transformers" not in rules) is accepted, rules
    if not accepted:  # the refusal names the edge, the row's spec and the Requires-Dist it comes from
        said = [f for c in report.conflicts for f in c.chain if f.rule == f"vllm_ascend/{release}.transformers"]
        assert said and "Requires-Dist" in said[0].source and said[0].confidence == "derived", said


def test_resolve_without_a_transformers_pin_picks_the_newest_inside_the_release_spec(lm):
    from envkit.core.derive import build_lock

    # (vllm-ascend, the pick): 0.11.0 at its upper bound though 5.x is recommended; 0.9.1 the newest recommended one
    # below `<4.53.0`; exact pins the recommended list lacks (5.14.1, 5.13.0); a range whose only candidate is its lower
    # bound (4.57.4); an open range takes the newest recommended release, not another row's pin (5.14.1)
    picks = [("0.11.0", "4.57.1"), ("0.9.1", "4.52.1"), ("0.25.1rc1", "5.14.1"), ("0.24.0rc1", "5.13.0")]
    picks += [("0.13.0", "4.57.4"), ("0.11.0rc1", "5.10.1")]
    for release, want in picks:
        res = validate_stack({"vllm_ascend": release}, matrix=lm)
        assert res.valid and res.stack["transformers"] == want, (release, res.stack.get("transformers"))
    pins = pins_from_mapping(lm, {})
    res = solve(lm, pins, framework_keys(pins, "serving"))
    assert (res.stack["vllm_ascend"], res.stack["transformers"]) == ("0.23.0", "5.5.4")
    lock = build_lock(lm, res, "envkit resolve --workload serving")
    assert {p.name: p.version for p in lock.python.requirements}["transformers"] == "5.5.4"
    assert lock.provenance["transformers"].rule.endswith("vllm_ascend/0.23.0.transformers ==5.5.4")


def test_a_refused_transformers_pin_exits_1_naming_the_edge_and_its_source(run_cli, tmp_path):
    import json

    r = run_cli("resolve", "--vllm-ascend", "0.11.0", "--transformers", "5.10.1", "--json", "-o", str(tmp_path / "l"))
    assert r.code == 1 and not (tmp_path / "l").exists()
    chain = [f for c in json.loads(r.out)["conflicts"] for f in c["chain"]]
    assert any(f["rule"] == "vllm_ascend-transformers" for f in chain), chain
    said = next(f for f in chain if f["rule"] == "vllm_ascend/0.11.0.transformers")
    assert said["fact"] == "vllm-ascend 0.11.0 needs transformers >=4.55.2,<=4.57.1"
    assert "vllm-ascend 0.11.0 wheel METADATA" in said["source"] and "vllm 0.11.0 wheel METADATA" in said["source"]


def test_a_plain_stack_ignores_the_transformers_of_the_serving_rows(lm):
    from envkit.core.derive import build_lock
    from envkit.lock.file import dump_lock

    rows = [replace(r, **{"transformers": None}) for r in lm.model.vllm_ascend]
    bare = type(lm)(model=replace(lm.model, **{"vllm_ascend": rows}), digest=lm.digest, files=lm.files)
    for mapping in ({}, {"arch": "x86_64"}, {"python": "3.11"}):
        locks = [dump_lock(build_lock(m, solve(m, pins_from_mapping(m, mapping)), "envkit resolve")) for m in (lm, bare)]
        assert locks[0] == locks[1], mapping
    # ... while a serving stack does not: without the spec, 0.11.0 takes a Transformers 5 its wheel refuses
    assert validate_stack({"vllm_ascend": "0.11.0"}, matrix=bare).stack["transformers"].startswith("5.")


def test_a_transformers_spec_is_a_strict_sourced_specifier():
    from pydantic import ValidationError

    from envkit.models.matrix import TransformersRequirement

    ok = {"spec": ">=4.55.2,<=4.57.1", "source": "PyPI METADATA", "confidence": "derived"}
    assert TransformersRequirement.model_validate(ok).spec == ">=4.55.2,<=4.57.1"
    for bad in ({**ok, "spec": "5.14.1"}, {**ok, "spec": " "}, {**ok, "pinned": True}, {"spec": "==5.14.1"}):
        with pytest.raises(ValidationError):
            TransformersRequirement.model_validate(bad)


# --- what the vendor runs: a vllm-ascend row's `runs_on` (its chips, and those its image leaves without triton-ascend)
def _lock(lm, pins, workload=None):
    from envkit.core.derive import build_lock

    pins = pins_from_mapping(lm, pins)
    res = solve(lm, pins, framework_keys(pins, workload))
    assert res is not None
    return res, build_lock(lm, res, "envkit resolve")


def test_serving_on_310p_takes_the_stack_the_vendor_runs_there_and_says_where_that_is_written(lm):
    # PyPI's vllm-ascend wheels are A2 builds (their _build_info.py) and 0.9.1 left 310P out (its rc1 notes), so
    # `envkit resolve --chip 310p --workload serving` refuses, naming the sdist releases built on the chip ...
    report = validate_pins(lm, pins_from_mapping(lm, {"chip": "310p"}), "serving")
    assert not report.valid
    facts = [f.fact for c in report.conflicts for f in c.chain]
    assert any("_310P" in f and "sdist-only releases, built for the chip where they install (pin one)" in f for f in facts)
    assert any("0.23.0.post1" in f and "0.9.1" not in f for f in facts)  # 0.9.1 left 310P out
    # ... and with one pinned (0.23.0.post1, the vendor's Dockerfile.310p way), the stack the vendor runs on 310P:
    # CANN 9.1.0, torch_npu 2.10.0.post4 and no triton-ascend, though TorchNPU 26.1.0's install guide leaves 310P out
    res, lock = _lock(lm, {"chip": "310p", "vllm_ascend": "0.23.0.post1"}, "serving")
    s = res.stack
    assert (s["vllm_ascend"], s["vllm"], s["cann"], s["torch"], s["torch_npu"], s["driver"]) == (
        "0.23.0.post1",
        "0.23.0",
        "9.1.0",
        "2.10.0",
        "2.10.0.post4",
        "26.0.RC1",
    )
    assert "triton_ascend" not in s and res.validated_cann and res.validated_hdk
    why = lock.provenance["torch_npu"]
    assert why.rule == "torch_npu/2.10.0.post4: chip 310p by vllm_ascend/0.23.0.post1.runs_on (TorchNPU 26.1.0 leaves it out)"
    assert why.source.startswith("docs/source/installation.md in the PyPI vllm-ascend 0.23.0.post1 sdist")
    assert why.confidence == "stated"
    assert any(h.startswith("chip 310p is not among the chips of TorchNPU 26.1.0") and "sdist" in h for h in lock.hints)
    assert any(h.startswith("vllm-ascend 0.23.0.post1 installs no triton-ascend on chip 310p") for h in lock.hints)
    assert any(h.startswith("vllm-ascend 0.23.0.post1 is on PyPI as an sdist only") for h in lock.hints)
    assert [p.name for p in lock.python.requirements][-2:] == ["vllm", "vllm-ascend"]


def test_a_plain_stack_on_310p_still_follows_the_torchnpu_install_guide(lm):
    assert not validate_stack({"chip": "310p", "torch_npu": "2.10.0.post4"}, matrix=lm).valid
    s = validate_stack({"chip": "310p"}, matrix=lm).stack
    assert "vllm_ascend" not in s and s["torch_npu"] != "2.10.0.post4"
    assert validate_stack({"chip": "310p", "vllm_ascend": "0.23.0.post1", "torch_npu": "2.10.0.post4"}, matrix=lm).valid
    # the A2 wheel of 0.23.0 does not run there (its worker checks the device type at start)
    assert not validate_stack({"chip": "310p", "vllm_ascend": "0.23.0", "torch_npu": "2.10.0.post4"}, matrix=lm).valid


def test_a3_resolves_to_the_vendors_a3_stacks(lm):
    # plain: TorchNPU's recommended combination (COMPATIBILITY.en.md: torch_npu 2.12.0 with CANN 9.1.0), A3 in its line
    res, lock = _lock(lm, {"chip": "a3"})
    assert (res.stack["torch_npu"], res.stack["torch"], res.stack["cann"]) == ("2.12.0", "2.12.0", "9.1.0")
    assert res.validated_cann and "COMPATIBILITY.en.md" in lock.provenance["torch_npu"].source
    # serving: vllm-ascend 0.23.0's A3 image (quay.io/ascend/vllm-ascend:v0.23.0-a3, FROM cann:9.1.0-a3) with
    # triton-ascend 3.2.2, from its sdist (0.23.0.post1: PyPI's 0.23.0 wheels are A2 builds); A3 is in TorchNPU
    # 26.1.0's own chips, so the line decides, not runs_on
    res, lock = _lock(lm, {"chip": "a3", "vllm_ascend": "0.23.0.post1"}, "serving")
    s = res.stack
    assert (s["vllm_ascend"], s["vllm"], s["cann"], s["torch_npu"], s["triton_ascend"]) == (
        "0.23.0.post1",
        "0.23.0",
        "9.1.0",
        "2.10.0.post4",
        "3.2.2",
    )
    assert lock.provenance["torch_npu"].rule == "torch_npu/2.10.0.post4"
    # unpinned, the newest release with wheels that run on A3: 0.9.1 (no build info; its FAQ lists A3 Training)
    res, lock = _lock(lm, {"chip": "a3"}, "serving")
    assert res.stack["vllm_ascend"] == "0.9.1" and lm.vllm_ascend("0.9.1").runs_on.confidence == "stated"
    # its release candidates list A2 only
    assert not validate_stack({"chip": "a3", "vllm_ascend": "0.9.1rc3"}, matrix=lm).valid
    # training: MindSpeed 26.1.0 (A3 among its products) with CANN 9.1.0, TorchNPU 26.1.0, PyTorch 2.7.1, Python 3.10
    res, lock = _lock(lm, {"chip": "a3"}, "training-mindspeed")
    s = res.stack
    assert (s["mindspeed"], s["cann"], s["torch"], s["torch_npu"], s["python"]) == (
        "26.1.0",
        "9.1.0",
        "2.7.1",
        "2.7.1.post8",
        "3.10",
    )
    assert "hiascend.com MindSpeed download page" in lock.provenance["mindspeed"].source


def test_resolve_never_picks_an_sdist_only_release_unless_it_is_pinned(lm):
    (post1,) = [r for r in lm.model.vllm_ascend if r.version == "0.23.0.post1"]
    assert post1.sdist_only and not post1.prerelease and post1.manylinux is None
    pins = pins_from_mapping(lm, {})
    assert "0.23.0.post1" not in initial_domains(lm, pins, False, framework_keys(pins, "serving"))["vllm_ascend"]
    report = validate_stack({"vllm_ascend": "0.23.0.post1", "chip": "310p"}, matrix=lm)
    assert report.valid and report.stack["torch_npu"] == "2.10.0.post4" and "triton_ascend" not in report.stack
    assert any("on PyPI as an sdist only" in h for h in report.hints)


def test_runs_on_is_data_a_chip_it_lacks_is_refused_and_the_refusal_names_its_source(lm):
    rows = [
        replace(r, **{"runs_on": replace(r.runs_on, **{"chips": ["910b", "a3"], "without_triton_ascend": []})})
        if r.runs_on is not None
        else r
        for r in lm.model.vllm_ascend
    ]
    narrow = edited_matrix(lm, vllm_ascend=rows)
    assert check_matrix(narrow) == []
    report = validate_stack({"chip": "310p", "vllm_ascend": "0.23.0.post1"}, matrix=narrow)
    assert not report.valid
    facts = [f for c in report.conflicts for f in c.chain]
    said = [f for f in facts if f.rule.startswith("vllm_ascend/0.23.0") and f.rule.endswith(".runs_on")]
    assert said and said[0].fact.endswith("on chips 910b, a3"), facts
    assert "installation" in said[0].source and "v0.23.0" in said[0].source
    assert any(f.rule in ("chip-torch_npu-vllm_ascend", "vllm_ascend-chip") for f in facts)
    # the serving workload then finds no release for 310P: each is an A2 wheel, or states chips without it
    assert solve(narrow, pins_from_mapping(narrow, {"chip": "310p"}), framework_keys({}, "serving")) is None


def test_an_image_without_triton_ascend_is_refused_one(lm):
    report = validate_stack({"chip": "310p", "vllm_ascend": "0.23.0", "triton_ascend": "3.2.2"}, matrix=lm)
    assert not report.valid
    facts = [(f.rule, f.fact) for c in report.conflicts for f in c.chain]
    assert ("vllm_ascend-triton_ascend" in [r for r, _ in facts]) or ("triton_ascend-chip" in [r for r, _ in facts]), facts
    edge = constraints.vllm_ascend_triton_ascend(lm, constraints.Strictness())
    assert not edge.check({"vllm_ascend": "0.23.0", "triton_ascend": "3.2.2", "chip": "310p"})
    assert edge.check({"vllm_ascend": "0.23.0", "triton_ascend": constraints.ABSENT, "chip": "310p"})
    assert edge.check({"vllm_ascend": "0.23.0", "triton_ascend": "3.2.2", "chip": "a3"})
    assert not edge.check({"vllm_ascend": "0.23.0", "triton_ascend": constraints.ABSENT, "chip": "a3"})
    assert edge.summary({"vllm_ascend": "0.23.0", "triton_ascend": "3.2.2", "chip": "310p"}) == (
        "vllm-ascend 0.23.0 installs no triton-ascend on chip 310p, not triton_ascend 3.2.2"
    )


def test_check_matrix_refuses_a_runs_on_with_an_unknown_chip_or_a_stray_triton_chip(lm):
    rows = [
        replace(r, runs_on=replace(r.runs_on, chips=["910b", "960z"], without_triton_ascend=["a3"]))
        if r.version == "0.23.0"
        else r
        for r in lm.model.vllm_ascend
    ]
    problems = [p.message for p in check_matrix(edited_matrix(lm, vllm_ascend=rows))]
    assert "unknown chip 960z in runs_on" in problems
    assert "runs_on.without_triton_ascend names a3, which runs_on.chips lacks" in problems
    rows = [replace(r, **{"manylinux": {"x86_64": "2.34"}}) if r.version == "0.23.0.post1" else r for r in lm.model.vllm_ascend]
    assert "an sdist-only release has no wheels, so no manylinux glibc: leave manylinux out" in [
        p.message for p in check_matrix(edited_matrix(lm, vllm_ascend=rows))
    ]


def test_mindspeed_26_0_0_core_takes_its_version_table_and_refuses_what_its_tables_mark_not_compatible(lm):
    # Ascend/MindSpeed release_notes_core.md: branch 26.0.0_core_r0.12.1 = CANN 9.0.0, TorchNPU 26.0.0, PyTorch 2.7.1,
    # Python 3.10; compatible with TorchNPU 7.2.0/7.3.0 and CANN 8.3.RCX/8.5.X, not with TorchNPU 26.1.0 or CANN 9.1.X
    s = validate_stack({"mindspeed": "26.0.0_core_r0.12.1"}, matrix=lm).stack
    assert (s["cann"], s["torch_npu"], s["torch"], s["python"]) == ("9.0.0", "2.7.1.post4", "2.7.1", "3.10")
    s = validate_stack({"mindspeed": "26.0.0_core_r0.12.1", "cann": "8.5.0"}, matrix=lm).stack
    assert lm.torch_npu_row(s["torch_npu"]).line == "7.3.0"
    for pin in ({"cann": "9.1.0"}, {"torch_npu": "2.7.1.post8"}, {"python": "3.11"}):
        report = validate_stack({"mindspeed": "26.0.0_core_r0.12.1", **pin}, matrix=lm)
        assert not report.valid and any(f.rule.startswith("mindspeed") for c in report.conflicts for f in c.chain), pin


@pytest.mark.parametrize(
    "version,metadata,other",
    [("0.11.0rc3", "torch-npu==2.7.1", "2.10.0.post4"), ("0.13.0rc2", "torch-npu==2.8.0", "2.8.0")],
)
def test_a_release_whose_table_and_wheel_metadata_disagree_on_torch_npu_records_both(lm, version, metadata, other):
    (row,) = [r for r in lm.model.vllm_ascend if r.version == version]
    assert row.disagreement and metadata in row.disagreement and "release table" in row.disagreement
    assert any("Requires-Dist torch==" in s and metadata in s for s in row.sources)
    # a refusal that quotes the row quotes both sources
    report = validate_stack({"vllm_ascend": version, "torch_npu": other}, matrix=lm)
    assert not report.valid
    said = [f for c in report.conflicts for f in c.chain if f.rule == f"vllm_ascend/{version}"]
    assert said and "sources disagree" in said[0].fact and metadata in said[0].fact

"""Ray for serving across nodes (issue #38): matrices/serving.yaml `ray` names, per range of vllm-ascend releases, the
Ray their images install and the release envkit pins; `envkit resolve --workload serving-multi-node` (or a `ray` pin)
puts it in the stack and the lock's python requirements, a plain serving lock has none, and what refuses it names
the row and its source."""

from __future__ import annotations

import json

import pytest

from envkit.core import constraints
from envkit.core.derive import check_lock, derive
from envkit.core.matrix import check_matrix, load_matrix
from envkit.core.resolve import framework_keys, pins_from_mapping, solve, validate_pins
from envkit.lock.text import plain as dump
from envkit.records import replace

from .conftest import edited_matrix


@pytest.fixture(scope="module")
def lm():
    return load_matrix()


def _lock(lm, pins: dict[str, str], workload: str | None):
    pinned = pins_from_mapping(lm, pins)
    res = solve(lm, pinned, framework_keys(pinned, workload))
    assert res is not None, (pins, workload)
    return derive(lm, res, "test")


def test_the_matrix_pins_ray_2_48_0_within_the_bound_of_vllm_ascends_images(lm):
    assert check_matrix(lm) == []
    for va, spec, confidence in (
        ("0.9.1", ">=2.47.1", "derived"),
        ("0.23.0", ">=2.47.1,<=2.48.0", "derived"),
        ("0.30.0rc2", ">=2.47.1,<=2.48.0", "inferred"),  # releases after the ones read from git
    ):
        row = lm.ray_for(va)
        assert row is not None and (row.version, row.spec, row.confidence) == ("2.48.0", spec, confidence), va
        assert row.manylinux == {"aarch64": "2.17", "x86_64": "2.17"} and row.python == ">=3.9,<3.14"
    # before 0.9.1rc3 the images installed an unbounded ray: the matrix names none (one node only)
    assert lm.ray_for("0.9.1rc2") is None and lm.ray_for("0.8.5rc1") is None


@pytest.mark.parametrize("chip", ["910b", "a3", "310p"])
def test_only_serving_across_nodes_gets_ray_and_it_is_the_matrixs_pin(lm, chip):
    # 310P: PyPI's wheels are A2 builds, so the stack is the vendor's sdist way (0.23.0.post1, built on the chip)
    pins = {"chip": chip, **({"vllm_ascend": "0.23.0.post1"} if chip == "310p" else {})}
    plain = _lock(lm, pins, "serving")
    assert plain.stack.ray is None and "ray" not in [p.name for p in plain.python.requirements]
    assert "ray" not in plain.provenance
    multi = _lock(lm, pins, "serving-multi-node")
    row = lm.ray_for(multi.stack.vllm_ascend)
    assert row is not None and multi.stack.ray == row.version
    # the same stack otherwise, and `ray==X` from PyPI after the vendor's serving pins
    assert {k: v for k, v in dump(multi.stack).items() if k != "ray"} == dump(plain.stack)
    pins = [(p.name, p.version, p.index) for p in multi.python.requirements]
    assert pins == [(p.name, p.version, p.index) for p in plain.python.requirements] + [("ray", row.version, None)]
    why = multi.provenance["ray"]
    assert why.origin == "derived" and why.source == row.source_text and why.confidence == row.confidence
    assert f"ray/{row.version}" in why.rule and row.spec in why.rule
    # the gate derives the same lock from the stack alone: a multi-node lock is no edit
    assert check_lock(multi, "multi.lock", lm) == []


def test_a_ray_pin_brings_the_serving_set_and_the_pin_follows_the_matrix(lm):
    pinned = pins_from_mapping(lm, {"ray": "2.48"})
    assert pinned["ray"].value == "2.48.0"
    assert framework_keys(pinned) == ("vllm", "vllm_ascend", "triton_ascend", "ray")
    # another Ray in the matrix row: the lock pins that one
    rows = [replace(r, version="2.47.1") for r in lm.model.ray]
    other = edited_matrix(lm, ray=rows)
    assert check_matrix(other) == []
    lock = _lock(other, {"chip": "910b"}, "serving-multi-node")
    assert lock.stack.ray == "2.47.1" and lock.python.requirements[-1].version == "2.47.1"


def test_a_vllm_ascend_without_ray_refuses_serving_across_nodes_naming_the_table(lm):
    pins = pins_from_mapping(lm, {"chip": "910b", "vllm_ascend": "0.8.5rc1"})
    assert solve(lm, pins, framework_keys(pins, "serving")) is not None  # on one node it serves
    report = validate_pins(lm, pins, "serving-multi-node")
    assert not report.valid
    facts = [f for c in report.conflicts for f in c.chain]
    said = [f for f in facts if f.rule == "ray/*.vllm_ascend"]
    assert said and said[0].fact == "the matrix has no Ray for vllm-ascend 0.8.5rc1: it serves on one node only"
    assert said[0].source == "matrices/serving.yaml"
    assert report.suggestions and all(s.stack["ray"] == "2.48.0" for s in report.suggestions)


def test_the_ray_edges_hold_its_wheels_and_explain_with_its_source(lm):
    s = constraints.Strictness()
    py, glibc = constraints.ray_python(lm, s), constraints.ray_glibc(lm, s)
    assert py.check({"ray": "2.48.0", "python": "3.13"}) and not py.check({"ray": "2.48.0", "python": "3.14"})
    assert glibc.check({"ray": "2.48.0", "os": "centos7.6", "arch": "aarch64"})
    va = constraints.ray_vllm_ascend(lm, s)
    assert va.check({"vllm_ascend": "0.23.0", "ray": "2.48.0"}) and not va.check({"vllm_ascend": "0.9.0rc2", "ray": "2.48.0"})
    # an edited row whose wheels exclude the stack's Python and OS: each refusal quotes the row and its source
    rows = [replace(r, python=">=3.12,<3.14", manylinux={"aarch64": "2.28"}) for r in lm.model.ray]
    narrow = edited_matrix(lm, ray=rows)
    glibc = constraints.ray_glibc(narrow, s)
    assert not glibc.check({"ray": "2.48.0", "os": "centos7.6", "arch": "aarch64"})
    assert not glibc.check({"ray": "2.48.0", "os": "ubuntu22.04", "arch": "x86_64"})  # no x86_64 wheel
    pins = pins_from_mapping(narrow, {"chip": "910b", "vllm_ascend": "0.9.1", "python": "3.10"})
    report = validate_pins(narrow, pins, "serving-multi-node")
    assert not report.valid
    facts = [f for c in report.conflicts for f in c.chain if f.rule == "ray/2.48.0"]
    assert facts and facts[0].fact == "ray 2.48.0 has wheels for Python >=3.12,<3.14"
    assert "PyPI ray 2.48.0 files" in facts[0].source


def test_the_matrix_check_refuses_overlapping_ranges_a_pin_outside_its_bound_and_two_sets_of_wheels(lm):
    first = lm.model.ray[0]
    problems = [
        p.message
        for p in check_matrix(
            edited_matrix(
                lm,
                ray=[
                    *lm.model.ray,
                    replace(first, vllm_ascend=">=0.23.0,<0.24.0", python=">=3.10"),
                    replace(first, version="2.49.0", vllm_ascend="<0.9.0"),
                ],
            )
        )
    ]
    assert "vllm-ascend 0.23.0 is in more than one range (>=0.11.0rc3,<=0.25.1rc1, >=0.23.0,<0.24.0)" in problems
    assert "rows of one Ray release name different Pythons or manylinux glibc" in problems
    assert "ray 2.49.0 is outside its own bound >=2.47.1,<=2.48.0" in problems


def test_resolve_serving_multi_node_writes_a_lock_whose_provenance_names_rays_source(run_cli, tmp_path):
    out = tmp_path / "multi.lock"
    r = run_cli("resolve", "--chip", "a3", "--workload", "serving-multi-node", "--json", "-o", str(out))
    assert r.code == 0, r.err
    info = json.loads(r.out)
    assert info["stack"]["ray"] == "2.48.0"
    assert "vllm-ascend" in info["provenance"]["ray"]["source"] and "ray>=2.47.1" in info["provenance"]["ray"]["source"]
    r = run_cli("validate", str(out))
    assert r.code == 0, r.err
    r = run_cli("resolve", "--chip", "a3", "--ray", "2.49.0", "-o", str(tmp_path / "x.lock"))
    assert r.code == 2 and "unknown Ray release '2.49.0'" in r.err and "2.48.0" in r.err

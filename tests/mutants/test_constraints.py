"""Explanation snapshots of the matrix edges (envkit.core.constraints), plus the generic rules and the helpers.

Per edge of `EDGES`, over the shipped matrix: which values of its other keys each value of its first key allows,
what it says about every value of each key (text, rule, source, confidence), and its conflict message for the first
failing combination of each first-key value; under the strict pass too where the edge reads `Strictness`. Compared
with tests/golden/constraints/<edge>.json: they change with the matrix, and `ENVKIT_UPDATE_GOLDEN=1` rewrites them.
One test per edge builds only that edge (mutation testing runs only the tests that reach a mutated function).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from envkit import versions
from envkit.core.constraints import (
    ABSENT,
    EDGES,
    Constraint,
    Edge,
    Relation,
    RuleConstraint,
    Strictness,
    Verdict,
    _disputed_lines,
    _fmt,
    _row,
    build_constraints,
    chip_torch_npu,
    driver_firmware,
    os_arch,
    torch_npu_cann,
    torch_npu_glibc,
    vllm_ascend_cann,
    vllm_ascend_torch_npu,
)
from envkit.core.matrix import LoadedMatrix, with_bounds
from envkit.core.resolve.pins import torch_versions, vllm_versions
from envkit.records import replace

GOLDEN = Path(__file__).parents[1] / "golden" / "constraints"
# the edges that read `Strictness`, with the flag each one reads
STRICT = {
    "driver_firmware": Strictness(hdk=True),
    "cann_driver": Strictness(hdk=True),
    "torch_npu_cann": Strictness(cann=True),
}


def _values(lm: LoadedMatrix) -> dict[str, list[str]]:
    """Every value the matrix knows for each key (pre-releases and rows without a CANN pairing included)."""
    m = lm.model
    hdk = [h.version for h in m.hdk]
    torch = torch_versions(lm, mapped_only=False)
    specs = [r.transformers.spec for r in m.vllm_ascend if r.transformers is not None]
    return {
        "chip": [c.id for c in m.chips],
        "arch": [a.id for a in m.arches],
        "os": [o.id for o in m.operating_systems],
        "python": [p.version for p in m.pythons],
        "driver": hdk,
        "firmware": hdk,
        "cann": [c.version for c in m.cann],
        "torch_npu": [t.version for t in m.torch_npu],
        "torch": torch + [f"{t}+cpu" for t in torch],
        "transformers": with_bounds(lm.package("transformers"), specs),
        "vllm": vllm_versions(lm),
        "vllm_ascend": [r.version for r in m.vllm_ascend],
        "triton_ascend": [r.version for r in m.triton_ascend] + [ABSENT],
        "mindspeed": [r.version for r in m.mindspeed],
        "ray": sorted({r.version for r in m.ray}),
    }


def _said(c: Constraint, key: str, value: str) -> list[Any] | str | None:
    try:
        s = c.says(key, value)
    except KeyError as exc:  # a framework key's ABSENT has no row to quote
        return f"KeyError: {exc.args[0]}"
    return None if s is None else [s.message, s.rule, s.source, s.confidence]


def _snapshot(c: Constraint, values: dict[str, list[str]]) -> dict[str, Any]:
    first, *rest = c.scope
    combos = list(itertools.product(*(values[k] for k in rest)))
    ok: dict[str, str] = {}
    summary: dict[str, str | None] = {}
    for v in values[first]:
        allowed, failed = [], False
        for combo in combos:
            a = dict(zip(c.scope, (v, *combo), strict=True))
            if c.check(a):
                allowed.append("/".join(combo))
            elif not failed:  # the first failing combination of `v`
                failed = True
                summary[f"{v} x {'/'.join(combo)}"] = c.summary(a)
                if getattr(c, "summary_with_free", False):  # the last key left free
                    summary[f"{v} x {'/'.join(combo[:-1])}/*"] = c.summary(dict(list(a.items())[:-1]))
        ok[v] = " ".join(allowed)
    return {
        "id": c.id,
        "scope": list(c.scope),
        "explain_both_sides": c.explain_both_sides,
        "ok": ok,
        "says": {k: {v: _said(c, k, v) for v in values[k]} for k in c.scope},
        "summary": summary,
    }


@pytest.mark.parametrize("edge", EDGES, ids=[e.__name__ for e in EDGES])
def test_edge_snapshot(edge: Edge, lm: LoadedMatrix, golden) -> None:
    values = _values(lm)
    got = _snapshot(edge(lm, Strictness()), values)
    if edge.__name__ in STRICT:  # what the strict pass changes
        strict = _snapshot(edge(lm, STRICT[edge.__name__]), values)
        strict["says"] = {k: {v: s for v, s in said.items() if s != got["says"][k][v]} for k, said in strict["says"].items()}
        got["strict"] = {k: v for k, v in strict.items() if v != got[k]}
    golden(GOLDEN / f"{edge.__name__}.json", json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("name", sorted(STRICT))
def test_strict_narrows(name: str, lm: LoadedMatrix) -> None:
    """The strict pass of an edge allows a subset of its plain pairs, and drops some: the goldens' two halves differ."""
    snap = json.loads((GOLDEN / f"{name}.json").read_text())
    plain, strict = snap["ok"], snap["strict"]["ok"]
    assert plain.keys() == strict.keys()
    assert all(set(strict[v].split()) <= set(plain[v].split()) for v in plain)
    assert strict != plain


def test_build_constraints(lm: LoadedMatrix) -> None:
    rules = [f"rule:{r.id}" for r in lm.model.rules if r.severity == "error"]
    edge_ids = [e(lm, Strictness()).id for e in EDGES]
    assert [c.id for c in build_constraints(lm)] == edge_ids + rules
    assert "rule:transformers/ddp-hccl" not in rules  # a hint is no constraint
    # each strict flag reaches its edges, and only them: a pair the plain edge allows and the strict one refuses
    values = _values(lm)
    pairs = {}
    for name, edge in (("torch_npu_cann", torch_npu_cann), ("driver_firmware", driver_firmware)):
        plain, strict = edge(lm, Strictness()), edge(lm, STRICT[name])
        combos = (dict(zip(plain.scope, p, strict=True)) for p in itertools.product(*(values[k] for k in plain.scope)))
        pairs[plain.id] = next(a for a in combos if plain.check(a) and not strict.check(a))
    cs = {c.id: c for c in build_constraints(lm)}  # plain by default
    assert cs["torch_npu-cann"].check(pairs["torch_npu-cann"]) and cs["driver-firmware"].check(pairs["driver-firmware"])
    for strict_cann, strict_hdk in itertools.product((False, True), repeat=2):
        cs = {c.id: c for c in build_constraints(lm, strict_cann=strict_cann, strict_hdk=strict_hdk)}
        assert cs["torch_npu-cann"].check(pairs["torch_npu-cann"]) is not strict_cann
        assert cs["driver-firmware"].check(pairs["driver-firmware"]) is not strict_hdk


def _changed(lm: LoadedMatrix, section: str, version: str, **update: Any) -> LoadedMatrix:
    """The matrix with one row of `section` changed (no validation: a case the shipped matrix lacks)."""
    rows = [replace(r, **update) if r.version == version else r for r in getattr(lm.model, section)]
    return LoadedMatrix(replace(lm.model, **{section: rows}), lm.digest, lm.files)


def test_helpers(lm: LoadedMatrix) -> None:
    nine = [str(i) for i in range(9)]
    assert _fmt([]) == "none"
    assert _fmt(nine[:8]) == "0, 1, 2, 3, 4, 5, 6, 7"
    assert _fmt(nine) == "0, 1, 2, 3, 4, 5, 6, 7, … (9 in all)"
    assert _fmt(nine, limit=2) == "0, 1, … (9 in all)"
    assert _row("r/1", None, "t") == Verdict(message="t", rule="r/1", source="envkit matrix", confidence=None)
    row = replace(lm.model.cann[0], **{"disagreement": "A says x; B says y", "source": ["s1", "s2"]})
    assert _row("r/1", row, "t") == Verdict(
        message="t (sources disagree: A says x; B says y)", rule="r/1", source="s1; s2", confidence=row.confidence
    )
    # the first disputed line is quoted; a line that lists the chip, or names another, is not disputed
    base = lm.model.torch_npu_lines[0]
    lines = [
        replace(base, **{"line": "L1", "chips": ["910b"], "disagreement": "310P: A lists it"}),
        replace(base, **{"line": "L2", "chips": ["910b"], "disagreement": "310p: B lists it too"}),
        replace(base, **{"line": "L3", "chips": ["310p"], "disagreement": "310P: listed"}),
        replace(base, **{"line": "L4", "chips": [], "disagreement": "910: other"}),
        replace(base, **{"line": "L5", "chips": [], "disagreement": None}),
    ]
    assert _disputed_lines(lines, "310p") == " (sources disagree for TorchNPU L1, L2: 310P: A lists it)"
    assert _disputed_lines(lines, "950") == ""


def test_relation_without_summary() -> None:
    r = Relation("x-y", "x", "y", lambda a, b: a == b, lambda v: None, lambda v: None)
    assert r.summary({"x": "1", "y": "2"}) is None
    assert (r.id, r.scope, r.check({"x": "1", "y": "1"}), r.check({"x": "1", "y": "2"})) == ("x-y", ("x", "y"), True, False)


def test_edges_off_the_matrix(lm: LoadedMatrix) -> None:
    """The cases the shipped matrix has no row for: an unknown torch_npu, an arch without a row or wheel, a driver whose
    package version (not its release name) is in the firmware's range, a vllm-ascend row with two needs."""
    assert chip_torch_npu(lm, Strictness()).check({"chip": lm.model.chips[0].id, "torch_npu": "0.0.1"}) is False
    os_ = lm.model.operating_systems[0]
    assert (
        os_arch(lm, Strictness()).summary({"os": os_.id, "arch": "riscv64"})
        == f"{os_.id} is not available on riscv64 in the matrix"
    )
    tn = lm.model.torch_npu[0]
    glibc = torch_npu_glibc(lm, Strictness())
    a = {"torch_npu": tn.version, "os": os_.id, "arch": "riscv64"}
    assert glibc.check(a) is False
    assert glibc.summary(a) == f"torch_npu {tn.version} wheels need glibc >= ? on riscv64; {os_.name} has glibc {os_.glibc}"
    # driver_firmware compares a driver's package version (version.info) with the firmware's compatible_driver
    fw = next(h for h in lm.model.hdk if h.compatible_driver and h.firmware_version)
    drv = next(
        h
        for h in lm.model.hdk
        if h is not fw
        and h.compatible_firmware
        and versions.in_any_range(fw.firmware_version, versions.parse_ranges(h.compatible_firmware))
    )
    a = {"driver": drv.version, "firmware": fw.version}
    assert driver_firmware(lm, Strictness()).check(a) is False
    inside = _changed(lm, "hdk", drv.version, package_version=fw.package_version)
    assert driver_firmware(inside, Strictness()).check(a) is True
    row = next(r for r in lm.model.vllm_ascend if r.needs)
    two = _changed(lm, "vllm_ascend", row.version, cann=None, torch_npu=None, needs=["a", "b"], disagreement=None)
    for edge in (vllm_ascend_cann, vllm_ascend_torch_npu):
        assert edge(two, Strictness()).says("vllm_ascend", row.version).message == f"vllm-ascend {row.version} needs a; b"


def test_rule_constraints(lm: LoadedMatrix) -> None:
    rules = {r.id: RuleConstraint(r, lm) for r in lm.model.rules}
    numpy = rules["numpy/python-2.3.0"]  # a glibc condition is read from the OS
    assert (numpy.id, numpy.scope) == ("rule:numpy/python-2.3.0", ("numpy", "python", "os"))
    old = next(o for o in lm.model.operating_systems if o.glibc == "2.17")
    new = next(o for o in lm.model.operating_systems if o.glibc == "2.35")
    assert numpy.check({"numpy": "2.3.0", "python": "3.11", "os": new.id}) is True
    assert numpy.check({"numpy": "2.3.0", "python": "3.11", "os": old.id}) is False
    assert numpy.check({"numpy": "2.2.6", "python": "3.9", "os": old.id}) is True  # the rule does not apply
    assert numpy.says("numpy", "2.3.0") == Verdict(
        message="when numpy >=2.3.0,<2.3.2, requires python >=3.11,<3.14; glibc >=2.28 (numpy 2.3.0 needs Python >=3.11,<3.14 and "
        "glibc >=2.28 (Requires-Python and wheel tags))",
        rule="numpy/python-2.3.0",
        source=numpy.rule.source_text,
        confidence="derived",
    )
    # a message field of another key stays a placeholder in a statement, and the message falls back when unformattable
    forbid = rules["transformers/npu-support"]
    assert forbid.says("python", "3.9").message == (
        "when transformers <4.32.0: refused (Transformers {transformers} has no Ascend NPU support: "
        "is_torch_npu_available() first appears in 4.32.0)"
    )
    assert forbid.check({"transformers": "4.31.0"}) is False
    assert forbid.message({}) == forbid.rule.message
    # a list condition holds for its members only; two conditions are joined with "; "
    listed = RuleConstraint(
        replace(forbid.rule, **{"when": {"cann": ["8.0.0", "8.1.RC1"], "torch": ">=2.1"}, "forbid": True}), lm
    )
    assert listed.scope == ("cann", "torch")
    assert listed.check({"cann": "8.0.0", "torch": "2.1.0"}) is False
    assert listed.check({"cann": "8.2.RC1", "torch": "2.1.0"}) is True
    assert listed.says("cann", "8.0.0").message.startswith("when cann ['8.0.0', '8.1.RC1']; torch >=2.1: refused (")

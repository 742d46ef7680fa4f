"""A chip is a row of matrices/platform.yaml, not code: a chip added in memory is resolved, locked, recognised by
doctor's parsers (npu-smi, operator packages, kernel folders) and given its devices by run-args."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envkit.core.matrix import LoadedMatrix, check_matrix, load_matrix, plain
from envkit.export.container import chip_from_lock, chip_from_row
from envkit.export.runargs import run_args
from envkit.jobs.doctor.parsers import (
    NpuSmiInfo,
    chip_from_npu_smi,
    chip_from_package_name,
    chip_from_soc,
    parse_npu_smi_info,
)
from envkit.models.matrix import Matrix
from envkit.records import asdict

NEW = "960x"
SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"


def _npu_smi(name: str) -> NpuSmiInfo:
    """A recorded A2 `npu-smi info` (the vendor's table) with its chip name replaced."""
    text = (SAMPLES / "npu-smi" / "a2-910b3-24.1.rc1.txt").read_text()
    assert "910B3" in text
    return parse_npu_smi_info(text.replace("910B3", name))


def _listing(node: Any, old: str, new: str) -> None:
    """Every list of the matrix that names `old` (a row's chips) names `new` too."""
    if isinstance(node, dict):
        for value in node.values():
            _listing(value, old, new)
    elif isinstance(node, list):
        if old in node and all(isinstance(x, str) for x in node):
            node.append(new)
        for value in node:
            _listing(value, old, new)


@pytest.fixture(scope="module")
def with_chip() -> LoadedMatrix:
    """The shipped matrix plus one chip, `960x`: the 910b's packages and pairings, its own names everywhere."""
    lm = load_matrix()
    doc = asdict(lm.model)
    _listing(doc, "910b", NEW)
    base = next(c for c in doc["chips"] if c["id"] == "910b")
    doc["chips"].append(
        {
            **base,
            "id": NEW,
            "name": "Test chip 960X",
            "products": ["Test 960X server"],
            "npu_smi_names": ["960X1", "960X2"],
            "aliases": ["atlas-z"],
            "npu_smi_patterns": [r"960x\d.*"],
            "npu_smi_multi_die": [],
            "npu_smi_caveats": {},
            "soc_names": ["ascend960x"],
            "package_patterns": ["kernels-960x", "cann-960x-ops"],
            "davinci_devices": 4,
            "hint": "a chip made up by this test",
        }
    )
    return LoadedMatrix(model=plain(Matrix.model_validate(doc)), digest=lm.digest, files=lm.files)


def test_the_new_chip_row_is_consistent(with_chip):
    assert not check_matrix(with_chip)
    assert NEW in with_chip.chips and with_chip.chips[NEW].davinci_devices == 4


def test_resolve_takes_its_id_and_alias_and_locks_it(with_chip):
    from envkit.core.derive import build_lock
    from envkit.core.resolve import validate_stack
    from envkit.core.resolve.pins import pins_from_mapping
    from envkit.core.resolve.search import solve

    for spelling in (NEW, "atlas-z", "960X1"):
        pins = pins_from_mapping(with_chip, {"chip": spelling})
        assert pins["chip"].value == NEW
    report = validate_stack({"chip": "atlas-z"}, matrix=with_chip)
    assert report.valid and any("a chip made up by this test" in h for h in report.hints)
    res = solve(with_chip, pins_from_mapping(with_chip, {"chip": NEW}))
    assert res is not None
    lock = build_lock(with_chip, res, "envkit resolve --chip 960x")
    assert lock.stack.chip == NEW and lock.platform.davinci_devices == 4
    assert lock.platform.npu_smi_names == ["960X1", "960X2"]
    ra = run_args(chip_from_lock(lock), None)
    assert [d for d in ra.devices if d[-1].isdigit()] == [f"/dev/davinci{i}" for i in range(4)]


def test_doctor_recognises_it_by_npu_smi_package_and_soc(with_chip):
    chips = with_chip.model.chips
    info = _npu_smi("960X2")
    assert chip_from_npu_smi(info, chips).chip == NEW
    assert chip_from_npu_smi(info).chip is None  # the shipped matrix does not know it: no code does either
    assert chip_from_package_name("Ascend-cann-kernels-960x_8.0.0_linux-aarch64.run", chips) == NEW
    assert chip_from_package_name("Ascend-cann-kernels-960x_8.0.0_linux-aarch64.run") is None
    assert chip_from_soc(["ascend960x"], chips) == NEW and chip_from_soc(["ascend960x"]) is None
    # the shipped chips still parse as before through the same data
    assert chip_from_npu_smi(_npu_smi("910B3"), chips).chip == "910b"


def test_run_args_of_its_row(with_chip):
    ra = run_args(chip_from_row(with_chip.chips[NEW]), "0-3")
    assert ra.runtime_env == {"ASCEND_VISIBLE_DEVICES": "0-3"}


def test_a_name_that_means_two_chips_is_a_matrix_problem(with_chip):
    doc = asdict(with_chip.model)
    next(c for c in doc["chips"] if c["id"] == NEW)["aliases"] = ["a2"]  # the 910b's alias
    lm = LoadedMatrix(model=plain(Matrix.model_validate(doc)), digest=with_chip.digest, files=with_chip.files)
    assert any(p.section == "chips" and p.row == "a2" for p in check_matrix(lm))


def test_a_pattern_that_is_no_regex_is_refused():
    from pydantic import ValidationError

    doc = asdict(load_matrix().model)
    doc["chips"][0]["npu_smi_patterns"] = ["910b(["]
    with pytest.raises(ValidationError, match="not a regular expression"):
        Matrix.model_validate(doc)


def test_ambiguous_npu_smi_name_is_a_note_not_a_guess(with_chip):
    doc = asdict(with_chip.model)
    next(c for c in doc["chips"] if c["id"] == NEW)["npu_smi_patterns"] = [r"910b\d.*"]  # as the 910b's
    chips = plain(Matrix.model_validate(doc)).chips
    ident = chip_from_npu_smi(_npu_smi("910B3"), chips)
    assert ident.chip is None and "fits 910b, 960x" in (ident.note or "")

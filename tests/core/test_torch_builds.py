"""`torch_builds` (matrices/platform.yaml): where torch's CPU build comes from, per torch release and arch.

The lock's torch pin follows it (the spelling and the index), and `envkit matrix check` holds it complete and
consistent with the x86_64 `+cpu` pins of the torch_npu wheels.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.core.derive import build_lock, torch_spec
from envkit.core.matrix import check_matrix, load_matrix, load_matrix_from
from envkit.core.resolve import pins_from_mapping, solve
from envkit.core.resolve.search import chosen
from envkit.records import replace
from envkit.resources import matrices_dir


def _torch_pin(lm, **declared):
    lock = build_lock(lm, solve(lm, pins_from_mapping(lm, declared)), "test")
    pin = next(p for p in lock.python.requirements if p.name == "torch")
    return lock, pin


@pytest.mark.parametrize(
    "declared, version, index",
    [
        ({}, "2.12.0+cpu", "pytorch-cpu"),  # the default target: aarch64, a CUDA build on PyPI
        ({"torch": "2.10.0"}, "2.10.0", None),  # aarch64 <= 2.10: PyPI's wheel is the CPU build
        ({"arch": "x86_64"}, "2.12.0+cpu", "pytorch-cpu"),  # x86_64: PyPI's torch is always a CUDA build
        ({"arch": "x86_64", "torch": "2.10.0"}, "2.10.0+cpu", "pytorch-cpu"),
    ],
)
def test_the_lock_pins_torchs_cpu_build_and_its_index(declared, version, index):
    lm = load_matrix()
    lock, pin = _torch_pin(lm, **declared)
    assert (pin.version, pin.index, lock.stack.torch) == (version, index, version)
    assert ("pytorch-cpu" in lock.python.indexes) == (index is not None)
    if "torch" not in declared:  # derived: the rule names the build's row
        assert f"from {index or 'pypi'} (torch_builds" in (lock.provenance["torch"].rule or "")


def test_every_torch_the_matrix_pins_has_a_sourced_row_per_arch():
    lm = load_matrix()
    for t in lm.model.torch_npu:
        for arch in ("aarch64", "x86_64"):
            b = lm.torch_build(t.torch, arch)
            assert b is not None and b.sources and b.confidence in ("stated", "derived", "inferred")
    assert lm.torch_build("2.10.0", "aarch64").index == "pypi"
    assert lm.torch_build("2.11.0", "aarch64").index == "pytorch-cpu"
    assert not [p for p in check_matrix(lm) if p.section == "torch_builds"]


def _edited(tmp_path: Path, old: str, new: str):
    folder = tmp_path / "m"
    shutil.copytree(matrices_dir(), folder)
    text = (folder / "platform.yaml").read_text()
    assert text.count(old) == 1, old
    (folder / "platform.yaml").write_text(text.replace(old, new))
    return load_matrix_from(folder)


ROW_211_X86 = """  - torch: "2.11.0"
    arch: x86_64
    index: pytorch-cpu
    local: cpu
"""
ROW_210_ARM = """  - torch: "2.10.0"
    arch: aarch64
    index: pypi
    local: null
"""


@pytest.mark.parametrize(
    "old, new, problem",
    [
        (
            ROW_211_X86,
            ROW_211_X86.replace("local: cpu", "local: null"),
            "torch_npu 2.11.0.post3 pins torch==2.11.0+cpu on x86_64; this row gives the plain version",
        ),
        (ROW_210_ARM, ROW_210_ARM.replace("local: null", "local: cpu"), "PyPI serves no +cpu build"),
        (ROW_210_ARM, ROW_210_ARM.replace("index: pypi", "index: nowhere"), "unknown index nowhere"),
        (ROW_210_ARM, ROW_210_ARM.replace('"2.10.0"', '"2.10.1"'), "no row for torch 2.10.0 on aarch64"),
    ],
)
def test_matrix_check_names_a_wrong_or_missing_row(tmp_path, old, new, problem):
    lm = _edited(tmp_path, old, new)
    found = [f"{p.row}: {p.message}" for p in check_matrix(lm) if p.section == "torch_builds"]
    assert any(problem in f for f in found), found


def test_without_a_row_the_torch_npu_x86_64_pin_still_decides():
    lm = load_matrix()
    lm2 = type(lm)(model=replace(lm.model, **{"torch_builds": []}), digest=lm.digest, files=lm.files)
    stack = {"torch": "2.11.0", "torch_npu": "2.11.0", "arch": "x86_64"}

    def spec(lm: object, pins: dict[str, str]) -> tuple[str, str | None]:
        res = solve(lm, pins_from_mapping(lm, pins))
        assert res is not None
        return torch_spec(res.stack, chosen(lm, res.stack))

    assert spec(lm2, stack) == ("2.11.0+cpu", "pytorch-cpu")
    assert spec(lm2, {**stack, "arch": "aarch64"}) == ("2.11.0", None)
    assert spec(lm, {**stack, "arch": "aarch64"}) == ("2.11.0+cpu", "pytorch-cpu")

import shutil
from pathlib import Path

import pytest

from envkit import versions
from envkit.core.matrix import check_matrix, load_matrix_from
from envkit.errors import MatrixError
from envkit.resources import matrices_dir


def test_shipped_matrix_is_consistent(lm):
    assert check_matrix(lm) == []


def test_every_row_is_sourced_with_a_confidence(lm):
    m = lm.model
    for section in ("chips", "arches", "operating_systems", "pythons", "hdk", "cann", "torch_npu_lines", "torch_npu", "rules"):
        for row in getattr(m, section):
            assert row.sources and all(s.strip() for s in row.sources)
            assert row.confidence in ("stated", "derived", "inferred")


def test_vendor_hashes_come_from_the_reference_list(lm):
    ref = Path(__file__).resolve().parents[3] / "shared" / "reference" / "vendor-artifacts.tsv"
    if not ref.exists():
        pytest.skip("../shared/reference not beside the checkout")
    known = {}
    for line in ref.read_text().splitlines():
        if line.startswith("#") or line.startswith("component"):
            continue
        cols = line.split("\t")
        known[cols[3]] = cols[4]
    assert len(lm.model.artifacts) == len(known) == 106
    for a in lm.model.artifacts:
        assert known[a.file] == a.sha256


def test_paired_cann_of_each_validated_torch_npu_row_exists(lm):
    for t in lm.model.torch_npu:
        if t.validated:
            assert lm.cann(t.cann) is not None


def test_layout_and_operator_package_switch_at_8_5(lm):
    for c in lm.model.cann:
        if c.prerelease:
            continue
        new = versions.parse(c.version) >= versions.parse("8.5.0")
        assert (c.layout == "cann-versioned") == new, c.version
        assert (c.operator_package == "ops") == new, c.version


def _copy(tmp_path):
    dst = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), dst)
    return dst


def test_check_finds_a_dangling_reference(tmp_path):
    folder = _copy(tmp_path)
    p = folder / "torch_npu.yaml"
    p.write_text(p.read_text().replace('cann: "9.1.0"', 'cann: "9.9.9"', 1))
    problems = check_matrix(load_matrix_from(folder))
    assert any("9.9.9" in pr.message for pr in problems)


def test_check_finds_a_duplicate_and_unsorted_rows(tmp_path):
    folder = _copy(tmp_path)
    p = folder / "hdk.yaml"
    text = p.read_text()
    block = text[text.index("  - version: 25.5.1") : text.index("  - version: 25.5.2")]
    p.write_text(text.replace("  - version: 26.0.RC1", block + "  - version: 26.0.RC1", 1))
    problems = check_matrix(load_matrix_from(folder))
    assert any(pr.section == "hdk" and "duplicate" in pr.message for pr in problems)
    assert any(pr.section == "hdk" and "not sorted" in pr.message for pr in problems)


def test_a_row_without_confidence_is_refused_with_file_and_line(tmp_path):
    folder = _copy(tmp_path)
    p = folder / "cann.yaml"
    text = p.read_text()
    p.write_text(text.replace("    confidence: inferred\n", "", 1))
    with pytest.raises(MatrixError) as err:
        load_matrix_from(folder)
    assert err.value.where.file.endswith("cann.yaml")
    assert err.value.where.line is not None
    assert "confidence" in err.value.where.key


def test_digest_changes_with_content(tmp_path, lm):
    folder = _copy(tmp_path)
    same = load_matrix_from(folder)
    assert same.digest == lm.digest
    p = folder / "platform.yaml"
    p.write_text(p.read_text() + "\n# a comment\n")
    assert load_matrix_from(folder).digest != lm.digest


def test_every_section_of_sourced_rows_is_checked_for_its_source(lm):
    """`check_matrix` finds the sections of sourced rows from the generated Matrix record, not from a list kept by
    hand: they are the pydantic Matrix model's lists of `Sourced` rows (but `images`, checked on its own terms)."""
    import typing

    from envkit.core.matrix import sourced_sections
    from envkit.models.base import Sourced
    from envkit.models.matrix import Matrix
    from envkit.records import replace
    from tests.core.conftest import edited_matrix

    from_model = [
        name
        for name, info in Matrix.model_fields.items()
        if typing.get_origin(info.annotation) is list
        and issubclass(typing.get_args(info.annotation)[0], Sourced)
        and name != "images"
    ]
    assert list(sourced_sections()) == from_model
    assert {"chips", "hdk", "cann", "torch_npu", "installers", "cann_layouts", "mindspeed"} <= set(from_model)
    for section in sourced_sections():
        rows = getattr(lm.model, section)
        if not rows:
            continue
        broken = edited_matrix(lm, **{section: [replace(rows[0], source=" "), *rows[1:]]})
        found = [p for p in check_matrix(broken) if p.message == "row without a source"]
        assert [p.section for p in found] == [section], section
        assert found[0].row != "?", section


@pytest.mark.parametrize(
    "per_arch,words",
    [
        ('{x86_64: ["3.10"], aarch64: ["3.10", "3.11"]}', "python is their union"),
        ('{x86_64: ["3.10", "3.11", "3.12"], aarch64: ["3.10", "3.11", "3.12"]}', "only where the arches' Pythons differ"),
        ('{aarch64: ["3.10", "3.11", "3.12"]}', "only where the arches' Pythons differ"),
    ],
)
def test_python_by_arch_is_the_split_of_python_where_the_arches_differ(tmp_path, per_arch, words):
    folder = _copy(tmp_path)
    p = folder / "torch_npu.yaml"
    text = p.read_text()
    shipped = '    python_by_arch: {x86_64: ["3.10", "3.11"], aarch64: ["3.10", "3.11", "3.12"]}\n'
    assert text.count(shipped) == 1
    p.write_text(text.replace(shipped, f"    python_by_arch: {per_arch}\n"))
    with pytest.raises(MatrixError) as err:
        load_matrix_from(folder)
    assert words in str(err.value) and err.value.where.file.endswith("torch_npu.yaml")


def test_a_documented_python_bound_that_leaves_no_python_is_a_problem(tmp_path):
    folder = _copy(tmp_path)
    p = folder / "serving.yaml"
    text = p.read_text()
    at = text.index('  - version: "0.30.0rc2"\n')
    spec = text.index('      spec: "<3.13"\n', at)
    p.write_text(text[:spec] + '      spec: "<3.9"\n' + text[spec + len('      spec: "<3.13"\n') :])
    problems = check_matrix(load_matrix_from(folder))
    assert [pr.message for pr in problems if pr.section == "vllm_ascend"] == [
        "python >=3.10 with python_documented <3.9 leaves no Python of pythons"
    ]
    assert not check_matrix(load_matrix_from(_copy(tmp_path / "shipped")))

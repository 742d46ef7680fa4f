"""`envkit matrix refresh` on the rows that pin a PyPI package (torch_npu, vllm-ascend, triton-ascend): the Pythons
and the manylinux glibc per arch come from the release's wheel files, a row that says otherwise is reported and
rewritten, and `--new` lists the releases the matrix lacks. Offline, on the recorded PyPI snapshot."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.core.matrix import load_matrix_from
from envkit.errors import BadInput
from envkit.jobs.matrix import refresh, yamlrows
from envkit.resources import matrices_dir

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"


@pytest.fixture()
def matrices(tmp_path):
    folder = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), folder)
    return folder


def _files(*names: str) -> list[dict[str, str | None]]:
    return [{"filename": n, "requires_python": ">=3.9"} for n in names]


def test_wheel_facts_read_every_tag_shape_on_pypi():
    # triton-ascend 3.2.0: a compressed tag set counts by its lowest tag
    facts = refresh.wheel_facts(
        _files(
            "triton_ascend-3.2.0-cp39-cp39-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
            "triton_ascend-3.2.0-cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl",
        )
    )
    assert facts.pythons == (9, 11) and facts.python_range() == ">=3.9,<3.12"
    assert facts.manylinux == {"x86_64": "2.27", "aarch64": "2.27"}
    # vllm-ascend 0.9.1rc1: the legacy aliases, manylinux1 = glibc 2.5, manylinux2014 = 2.17
    legacy = refresh.wheel_facts(
        _files(
            "vllm_ascend-0.9.1rc1-cp310-cp310-manylinux1_x86_64.whl",
            "vllm_ascend-0.9.1rc1-cp310-cp310-manylinux2014_aarch64.whl",
            "vllm_ascend-0.9.1rc1-cp310-cp310-manylinux2010_x86_64.whl",
        )
    )
    assert legacy.manylinux == {"x86_64": "2.5", "aarch64": "2.17"} and legacy.python_list() == ["3.10"]
    # per arch the lowest: 0.20.2rc1 is manylinux_2_24 on x86_64 and manylinux_2_34 on aarch64
    mixed = refresh.wheel_facts(
        _files(
            "vllm_ascend-0.20.2rc1-cp310-cp310-manylinux_2_24_x86_64.whl",
            "vllm_ascend-0.20.2rc1-cp311-cp311-manylinux_2_34_aarch64.whl",
            "vllm_ascend-0.20.2rc1-cp311-cp311-manylinux_2_35_aarch64.whl",
        )
    )
    assert mixed.manylinux == {"x86_64": "2.24", "aarch64": "2.34"}
    # what says nothing of a CPython minor or a Linux glibc: abi3, pure, other platforms, an sdist, a bad name
    none = refresh.wheel_facts(
        _files(
            "x-1.0-cp38-abi3-manylinux_2_17_x86_64.whl",
            "x-1.0-py3-none-any.whl",
            "x-1.0-cp312-cp312-win_amd64.whl",
            "x-1.0-cp312-cp312-musllinux_1_2_aarch64.whl",
            "x-1.0.tar.gz",
            "not a wheel.whl",
        )
    )
    assert none.pythons == (12,) and none.manylinux == {"x86_64": "2.17"} and none.wheels == 4
    sdist = refresh.wheel_facts(_files("vllm_ascend-0.30.0rc2.tar.gz"))
    assert (sdist.wheels, sdist.python_range(), sdist.python_list(), sdist.said()) == (0, None, None, "no wheel (sdist only)")


def _row(lm, section: str, version: str):
    return next(r for r in getattr(lm.model, section) if r.version == version)


def test_wrong_rows_are_reported_rewritten_and_a_second_run_changes_nothing(matrices):
    """The audit's cases: vllm-ascend 0.23.0 said Python 3.13 though its wheels stop at cp312, and aarch64 wheels that
    are manylinux_2_34 called fine on glibc 2.31; a torch_npu row without its Pythons."""
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    head = text.index('  - version: "0.23.0"\n')
    row_end = text.index("  - version:", head + 10)
    row = text[head:row_end]
    wrong = row.replace('python: ">=3.10,<3.13"', 'python: ">=3.10"').replace(
        'manylinux: {x86_64: "2.34", aarch64: "2.34"}', 'manylinux: {x86_64: "2.34", aarch64: "2.31"}'
    )
    assert wrong != row
    serving.write_text(text[:head] + wrong + text[row_end:])
    npu = matrices / "torch_npu.yaml"
    good_npu = npu.read_text()
    npu.write_text(
        good_npu.replace(
            'python: ["3.10", "3.11", "3.12", "3.13"]\n    manylinux: {x86_64: "2.28", aarch64: "2.28"}\n    source:\n      - "gitcode fork wzyly/pytorch COMPATIBILITY.md: TorchNPU 26.1.1 (wave2-facts Part B §2)"',
            'python: null\n    manylinux: {x86_64: "2.28", aarch64: "2.28"}\n    source:\n      - "gitcode fork wzyly/pytorch COMPATIBILITY.md: TorchNPU 26.1.1 (wave2-facts Part B §2)"',
            1,
        )
    )
    assert npu.read_text() != good_npu

    result = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert result.changed and serving.read_text() != text  # a diff only
    lines = [ch.line() for ch in result.rows]
    assert lines[0].startswith('torch-npu 2.12.0.post2: python absent -> ["3.10", "3.11", "3.12", "3.13"]')
    assert (
        'vllm-ascend 0.23.0: python ">=3.10" -> ">=3.10,<3.13"; manylinux {x86_64: "2.34", aarch64: "2.31"} -> '
        '{x86_64: "2.34", aarch64: "2.34"} (PyPI: cp310, cp311, cp312; manylinux_2_34 on x86_64; manylinux_2_34 on aarch64)'
    ) in lines
    assert len(result.rows) == 2 and all(line in result.report for line in lines)
    assert "+++ b/serving.yaml" in result.diff and "+++ b/torch_npu.yaml" in result.diff

    assert refresh.refresh(matrices, snapshot=SNAPSHOT, write=True).changed
    lm = load_matrix_from(matrices)
    fixed = _row(lm, "vllm_ascend", "0.23.0")
    assert fixed.python == ">=3.10,<3.13" and fixed.manylinux == {"x86_64": "2.34", "aarch64": "2.34"}
    assert _row(lm, "torch_npu", "2.12.0.post2").python == ["3.10", "3.11", "3.12", "3.13"]
    # the row names where its facts come from: one derived source line, dated by the snapshot, never piled up
    derived = [s for s in fixed.source if s.startswith(refresh.DERIVED_PREFIX)]
    assert derived == [
        "PyPI wheel files of vllm-ascend 0.23.0: cp310, cp311, cp312; manylinux_2_34 on x86_64; manylinux_2_34 on "
        "aarch64 (https://pypi.org/project/vllm-ascend/0.23.0/#files), read 2026-12-04"
    ]
    # rewritten to the shipped text, line for line, but for the day its derived source line was read
    line = next(ln for ln in good_npu.splitlines() if '"PyPI wheel files of torch-npu 2.12.0.post2:' in ln)
    assert npu.read_text() == good_npu.replace(line, re.sub(r"read [0-9-]{10}", "read 2026-12-04", line))
    again = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert not again.changed and again.diff == "" and again.rows == []


def test_ray_rows_are_held_to_rays_wheels_each_of_the_two_rows_of_one_release(matrices):
    """Ray 2.48.0 has two rows (one per range of vllm-ascend releases): a wrong glibc or Python in the second is
    found and written into that row, not into the first; Ray releases the matrix does not pin are no news."""
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    first = text.index('  - version: "2.48.0"\n    vllm_ascend: ">0.25.1rc1"')
    second = text.index('  - version: "2.48.0"\n', first + 10)
    end = text.index("\n  - ", second + 10)  # a third 2.48.0 row follows
    wrong = (
        text[second:end]
        .replace('python: ">=3.9,<3.14"', 'python: ">=3.9,<3.15"')
        .replace('manylinux: {aarch64: "2.17", x86_64: "2.17"}', 'manylinux: {aarch64: "2.28", x86_64: "2.17"}')
    )
    assert wrong != text[second:end]
    serving.write_text(text[:second] + wrong + text[end:])
    result = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert [ch.line() for ch in result.rows] == [
        'ray 2.48.0: python ">=3.9,<3.15" -> ">=3.9,<3.14"; manylinux {aarch64: "2.28", x86_64: "2.17"} -> '
        '{x86_64: "2.17", aarch64: "2.17"} (PyPI: cp39, cp310, cp311, cp312, cp313; manylinux_2_17 on x86_64; '
        "manylinux_2_17 on aarch64)"
    ]
    assert result.rows[0].nth == 1
    assert refresh.refresh(matrices, snapshot=SNAPSHOT, write=True).changed
    rays = load_matrix_from(matrices).model.ray
    assert [(r.python, dict(r.manylinux)) for r in rays[:2]] == [(">=3.9,<3.14", {"aarch64": "2.17", "x86_64": "2.17"})] * 2
    assert text[:second] == serving.read_text()[:second]  # the first row untouched
    assert not refresh.refresh(matrices, snapshot=SNAPSHOT).changed
    assert not [line for line in refresh.find_new(matrices, snapshot=SNAPSHOT) if line.startswith("ray ")]


def test_an_sdist_only_release_loses_its_glibc_and_keeps_its_pythons(matrices):
    """vllm-ascend 0.8.5rc1 has no wheel on PyPI: no manylinux to claim, and its range (the release table's) stays."""
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    at = text.index('  - version: "0.8.5rc1"\n')
    anchor = text.index("    python:", at)
    line_end = text.index("\n", anchor) + 1
    serving.write_text(text[:line_end] + '    manylinux: {x86_64: "2.17"}\n' + text[line_end:])
    result = refresh.refresh(matrices, snapshot=SNAPSHOT, write=True)
    assert [ch.line() for ch in result.rows] == [
        'vllm-ascend 0.8.5rc1: manylinux {x86_64: "2.17"} -> absent (PyPI: no wheel (sdist only))'
    ]
    row = _row(load_matrix_from(matrices), "vllm_ascend", "0.8.5rc1")
    assert row.manylinux is None and row.python == ">=3.9,<3.12"


def test_wheel_facts_per_arch_where_the_arches_differ():
    """torch-npu 2.10.0.post6 on PyPI (the snapshot's file list): cp312 for aarch64 only."""
    import json

    files = json.loads((SNAPSHOT / "torch-npu.json").read_text())["releases"]["2.10.0.post6"]
    facts = refresh.wheel_facts(files)
    assert facts.python_list() == ["3.10", "3.11", "3.12"]
    assert facts.python_by_arch() == {"x86_64": ["3.10", "3.11"], "aarch64": ["3.10", "3.11", "3.12"]}
    assert facts.said().startswith("cp310, cp311 on x86_64; cp310, cp311, cp312 on aarch64; manylinux_2_28")
    # the same Pythons on both arches, or wheels for one arch only: one list says it
    same = refresh.wheel_facts(_files("t-1-cp310-cp310-manylinux_2_28_x86_64.whl", "t-1-cp310-cp310-manylinux_2_28_aarch64.whl"))
    one = refresh.wheel_facts(_files("t-1-cp39-cp39-manylinux_2_28_aarch64.whl", "t-1-cp310-cp310-manylinux_2_28_aarch64.whl"))
    assert same.python_by_arch() is None and one.python_by_arch() is None and one.said().startswith("cp39, cp310;")
    # of every release of the row kinds in the snapshot, torch-npu 2.10.0.post6 alone differs per arch
    differ = []
    for kind in refresh.ROW_KINDS:
        doc = json.loads((SNAPSHOT / f"{kind.package}.json").read_text())
        differ += [f"{kind.package} {v}" for v, fs in doc["releases"].items() if refresh.wheel_facts(fs).python_by_arch()]
    assert differ == ["torch-npu 2.10.0.post6"]


def test_a_torch_npu_row_gets_its_pythons_per_arch_where_they_differ(matrices):
    """The row without `python_by_arch` is reported and written from the snapshot; a row that has one where the
    arches agree loses it; a second run changes nothing."""
    npu = matrices / "torch_npu.yaml"
    shipped = npu.read_text()
    per_arch = '    python_by_arch: {x86_64: ["3.10", "3.11"], aarch64: ["3.10", "3.11", "3.12"]}\n'
    assert shipped.count(per_arch) == 1
    at = shipped.index('  - version: "2.10.0.post4"\n')
    py = shipped.index("    python:", at)
    line_end = shipped.index("\n", py) + 1
    stale = '    python_by_arch: {x86_64: ["3.10"], aarch64: ["3.10", "3.11", "3.12", "3.13"]}\n'
    npu.write_text((shipped[:line_end] + stale + shipped[line_end:]).replace(per_arch, ""))
    result = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert [ch.line() for ch in result.rows] == [
        'torch-npu 2.10.0.post6: python_by_arch absent -> {x86_64: ["3.10", "3.11"], aarch64: ["3.10", "3.11", "3.12"]} '
        "(PyPI: cp310, cp311 on x86_64; cp310, cp311, cp312 on aarch64; manylinux_2_28 on x86_64; manylinux_2_28 on aarch64)",
        'torch-npu 2.10.0.post4: python_by_arch {x86_64: ["3.10"], aarch64: ["3.10", "3.11", "3.12", "3.13"]} -> absent '
        "(PyPI: cp310, cp311, cp312, cp313; manylinux_2_28 on x86_64; manylinux_2_28 on aarch64)",
    ]
    assert refresh.refresh(matrices, snapshot=SNAPSHOT, write=True).changed
    lm = load_matrix_from(matrices)
    assert _row(lm, "torch_npu", "2.10.0.post6").pythons_on("x86_64") == ["3.10", "3.11"]
    assert _row(lm, "torch_npu", "2.10.0.post6").pythons_on("aarch64") == ["3.10", "3.11", "3.12"]
    assert _row(lm, "torch_npu", "2.10.0.post4").python_by_arch is None
    assert per_arch in npu.read_text()
    assert not refresh.refresh(matrices, snapshot=SNAPSHOT).changed


def test_a_range_row_whose_wheels_differ_per_arch_is_reported(matrices, tmp_path):
    """A vllm-ascend release with cp312 for aarch64 only (a snapshot edited so): its one python range cannot say it,
    and the report says so."""
    import json

    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    doc = json.loads((snap / "vllm-ascend.json").read_text())
    doc["releases"]["0.23.0"] = [f for f in doc["releases"]["0.23.0"] if not re.search(r"cp312-.*x86_64", f["filename"])]
    (snap / "vllm-ascend.json").write_text(json.dumps(doc))
    result = refresh.refresh(matrices, snapshot=snap)
    line = next(x for x in result.report if x.startswith("vllm-ascend 0.23.0: its wheels' Pythons differ per arch"))
    assert "cp310, cp311 on x86_64; cp310, cp311, cp312 on aarch64" in line


def test_rows_served_by_another_index_are_left_alone(matrices):
    """triton-ascend 3.2.1 and 3.2.2 come from the Ascend index (`index: ascend-pypi`): PyPI has nothing to say;
    a torch_npu row PyPI lacks is reported, not rewritten."""
    result = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert not any(ch.kind.package == "triton-ascend" and ch.version in ("3.2.1", "3.2.2") for ch in result.rows)
    assert not any("triton-ascend 3.2.2" in line for line in result.report)
    assert "torch-npu 2.7.1.post1: a matrix row with no file on PyPI" in result.report


def test_new_lists_what_the_matrix_lacks_and_the_command_exits_1(matrices):
    found = refresh.find_new(matrices, snapshot=SNAPSHOT)
    names = [line.split(":")[0] for line in found]
    lm = load_matrix_from(matrices)
    have = {r.version for r in lm.model.vllm_ascend}
    for v in ("0.30.0rc2", "0.30.0rc1", "0.29.0rc1", "0.28.0rc1", "0.27.1rc1", "0.23.0.post1"):
        assert (f"vllm-ascend {v}" in names) == (v not in have)
    # torch 2.15.0 and 2.14.1 have build rows (read from their METADATA, no torch_npu pins them yet): not news; one
    # removed is found again, as newer than every torch the matrix has a build row for
    assert not {"torch 2.15.0", "torch 2.14.1"} & set(names)
    platform = matrices / "platform.yaml"
    text = platform.read_text()
    start = text.index('  - torch: "2.15.0"\n')
    platform.write_text(text[:start] + text[text.index('  - torch: "2.14.1"\n') :])
    found = refresh.find_new(matrices, snapshot=SNAPSHOT)
    assert "torch 2.15.0" in [line.split(":")[0] for line in found]
    platform.write_text(text)
    # superseded or skipped, not missing: an rc beside its final (2.9.0rc1, 0.8.4rc1 beside 0.8.4rc2), an older
    # torch than the newest row that no torch_npu pins (2.7.0)
    assert not {"torch-npu 2.9.0rc1", "vllm-ascend 0.8.4rc1", "torch 2.7.0", "torch 2.12.1"} & set(names)
    line = next(x for x in found if x.startswith("torch 2.15.0:"))
    assert "a release on PyPI the matrix lacks (cp311" in line and "https://pypi.org/project/torch/2.15.0/" in line
    # a row removed from the matrix is found again
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    head = text.index('  - version: "0.26.0rc1"\n')
    serving.write_text(text[:head] + text[text.index("  - version:", head + 10) :])
    assert any(
        x.startswith("vllm-ascend 0.26.0rc1: a pre-release on PyPI the matrix lacks (cp310, cp311, cp312")
        for x in refresh.find_new(matrices, snapshot=SNAPSHOT)
    )
    args = [
        sys.executable,
        "-m",
        "envkit",
        "matrix",
        "refresh",
        "--new",
        "--snapshot",
        str(SNAPSHOT),
        "--matrix-dir",
        str(matrices),
    ]
    cli = subprocess.run(args, capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    assert "new  vllm-ascend 0.26.0rc1: a pre-release" in cli.stdout and "release(s) on PyPI the matrix lacks" in cli.stdout


def test_new_exits_0_when_the_matrix_has_every_release(matrices, tmp_path):
    """The snapshot cut to the releases the matrix has: nothing new, exit 0 (a scheduled run stays green)."""
    import json

    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    lm = load_matrix_from(matrices)
    for name, section in (("vllm-ascend", "vllm_ascend"), ("torch-npu", "torch_npu"), ("triton-ascend", "triton_ascend")):
        have = {r.version for r in getattr(lm.model, section)}
        doc = json.loads((snap / f"{name}.json").read_text())
        doc["releases"] = {v: f for v, f in doc["releases"].items() if v in have}
        (snap / f"{name}.json").write_text(json.dumps(doc))
    torch = json.loads((snap / "torch.json").read_text())
    torch["releases"] = {v: f for v, f in torch["releases"].items() if v in {b.torch for b in lm.model.torch_builds}}
    (snap / "torch.json").write_text(json.dumps(torch))
    assert refresh.find_new(matrices, snapshot=snap) == []
    args = [sys.executable, "-m", "envkit", "matrix", "refresh", "--new", "--snapshot", str(snap), "--matrix-dir", str(matrices)]
    cli = subprocess.run(args, capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == "0 release(s) on PyPI the matrix lacks\n", cli.stdout + cli.stderr


# --- yamlrows: the in-place row editor ------------------------------------------------------------
DOC = """# a comment kept
rows:
  - version: "1.0"
    python: ">=3.9"
    source: "one source"
    confidence: stated

  - version: "2.0"
    python: ">=3.10"
    manylinux: {x86_64: "2.17"}
    source:
      - "a"
      - "PyPI wheel files of x 2.0: old, read 2026-01-01"
      - "b, written
        over two lines"
    confidence: derived
other:
  - version: "1.0"
"""


def test_a_row_is_edited_in_place_and_everything_else_is_kept():
    out = yamlrows.set_fields(
        DOC,
        "f.yaml",
        "rows",
        "1.0",
        {"python": ">=3.9,<3.12", "manylinux": {"aarch64": "2.28"}},
        after="python",
        source=("PyPI wheel files of ", "PyPI wheel files of x 1.0: new"),
    )
    assert out.splitlines()[:9] == [
        "# a comment kept",
        "rows:",
        '  - version: "1.0"',
        '    python: ">=3.9,<3.12"',
        '    manylinux: {aarch64: "2.28"}',
        "    source:",
        '      - "one source"',
        '      - "PyPI wheel files of x 1.0: new"',
        "    confidence: stated",
    ]
    assert out.endswith(DOC[DOC.index('\n  - version: "2.0"') :])
    two = yamlrows.set_fields(
        DOC,
        "f.yaml",
        "rows",
        "2.0",
        {"manylinux": None},
        after="python",
        source=("PyPI wheel files of ", "PyPI wheel files of x 2.0: new"),
    )
    import yaml

    row = yaml.safe_load(two)["rows"][1]
    assert "manylinux" not in row and row["source"] == ["a", "b, written over two lines", "PyPI wheel files of x 2.0: new"]
    assert yaml.safe_load(two)["other"] == [{"version": "1.0"}]


@pytest.mark.parametrize(
    ("section", "version", "fields", "words"),
    [
        ("missing", "1.0", {"python": "x"}, "no top-level 'missing:' list"),
        ("rows", "3.0", {"python": "x"}, "no row rows[version=3.0]"),
        ("rows", "1.0", {"version": "9"}, "opens the row"),
    ],
)
def test_a_row_the_editor_cannot_find_is_bad_input(section, version, fields, words):
    with pytest.raises(BadInput) as info:
        yamlrows.set_fields(DOC, "f.yaml", section, version, fields, after="python")
    assert words in info.value.message and info.value.exit_code == 2


def test_a_matrix_in_another_layout_is_refused_not_guessed(matrices):
    """A serving.yaml whose rows are indented otherwise: the row cannot be found, exit 2 naming the file."""
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    head = text.index('  - version: "0.23.0"\n')
    row_end = text.index("  - version:", head + 10)
    row = text[head:row_end].replace('python: ">=3.10,<3.13"', 'python: ">=3.10"')
    serving.write_text(text[:head] + row.replace("\n    ", "\n      ").replace("  - version", "  -   version") + text[row_end:])
    with pytest.raises(BadInput) as info:
        refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert str(serving) in info.value.message and info.value.exit_code == 2


def test_a_tag_of_thousands_of_digits_is_no_tag_and_three_digits_still_count():
    """A snapshot or an index answer is untrusted: a 5,000-digit cp or manylinux number was a traceback (int()
    refuses past 4,300 digits); it is now no tag. The bound at both ends: three digits count, four do not."""
    huge = "9" * 5000
    facts = refresh.wheel_facts(
        _files(
            f"p-1.0-cp3{huge}-cp3{huge}-manylinux_2_28_x86_64.whl",
            f"p-1.0-cp310-cp310-manylinux_2_{huge}_aarch64.whl",
            "p-1.0-cp3999-cp3999-manylinux_2_999_aarch64.whl",
            "p-1.0-cp31000-cp31000-manylinux_2_1000_x86_64.whl",
        )
    )
    assert facts.pythons == (10, 999) and facts.manylinux == {"x86_64": "2.28", "aarch64": "2.999"}
    assert refresh._cp_range([f"p-1.0-cp3{huge}-cp3{huge}-any.whl", "p-1.0-cp312-cp312-any.whl"]) == ("3.12", "3.13")
    assert refresh._glibc([f"p-1.0-cp312-cp312-manylinux_2_{huge}_x86_64.whl"]) is None


# --- the Python ceiling of a release without wheels: its sdist's versioning table ------------------------
# in the shape of vllm-ascend's docs/source/community/versioning_policy.md (at 182b75ea8): padded cells, more columns
# after Python, the main branch's table of template placeholders, the release window naming releases by date
TABLE = """# Versioning Policy

## Release compatibility matrix

The table below is the release compatibility matrix for vLLM Ascend release.

| vLLM Ascend | vLLM              | Python          | Stable CANN |        PyTorch/torch_npu        |   Triton Ascend   |    Mooncake  |
|-------------|-------------------|-----------------|-------------|---------------------------------|-------------------|--------------|
| v0.30.0rc1  | v0.30.0           | >= 3.10, < 3.13 | 9.2.0       | 2.10.0 / 2.10.0.post4           | 3.2.2             | v0.3.11.post1 |
| v0.18.0     | v0.18.0           | >= 3.10, < 3.12 | 8.5.1       | 2.9.0  / 2.9.0                  | 3.2.0             | v0.3.8.post1 |

| vLLM Ascend | vLLM         | Python           | Stable CANN | PyTorch/torch_npu  | Triton Ascend |
|-------------|--------------|------------------|-------------|--------------------|---------------|
|     main    | {{main_vllm_commit}}, {{main_vllm_tag}} | {{main_python_version}}   | {{main_cann_version}} | {{x}} | {{y}} |

### Release window

| Date       | Event                                     |
|------------|-------------------------------------------|
| 2026.10.01 | Release candidates, v0.30.0rc2            |
"""


def test_the_python_cell_of_a_release_row_is_read_and_its_ceiling_kept():
    assert refresh.versioning_python(TABLE, "0.30.0rc1") == ("v0.30.0rc1", ">= 3.10, < 3.13")
    assert refresh.versioning_python(TABLE, "0.18.0") == ("v0.18.0", ">= 3.10, < 3.12")
    # a release the table has no row for (the dates table names it, without a Python column): none
    assert refresh.versioning_python(TABLE, "0.30.0rc2") == (None, None)
    assert refresh.versioning_python("no table", "0.30.0rc1") == (None, None)
    assert refresh._ceiling(">= 3.10, < 3.13") == "<3.13" and refresh._ceiling("Python >=3.9, <=3.11") == "<=3.11"
    assert refresh._ceiling(">= 3.10") is None and refresh._ceiling(None) is None


def _tar(members: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_a_fake_sdist_gives_its_versioning_table_and_a_hostile_one_is_refused(monkeypatch):
    from envkit.errors import CannotRun

    doc = refresh.VERSIONING_DOC
    sdist = _tar({"vllm_ascend-0.30.0rc1/PKG-INFO": b"Name: vllm_ascend\n", f"vllm_ascend-0.30.0rc1/{doc}": TABLE.encode()})
    assert refresh._tar_member(sdist, doc, "x.tar.gz") == TABLE
    # only the file at the sdist's top: a copy deeper down is not it
    assert refresh._tar_member(_tar({f"top/vendor/{doc}": TABLE.encode()}), doc, "x.tar.gz") is None
    with pytest.raises(CannotRun, match="not a readable sdist"):
        refresh._tar_member(b"PK\x03\x04 a zip", doc, "x.tar.gz")
    big = _tar({f"top/{doc}": b"|" * (refresh.DOC_MAX + 1)})
    with pytest.raises(CannotRun, match="bytes \\(at most"):
        refresh._tar_member(big, doc, "x.tar.gz")
    at_cap = _tar({f"top/{doc}": b"|" * refresh.DOC_MAX})  # the cap itself is read
    assert refresh._tar_member(at_cap, doc, "x.tar.gz") == "|" * refresh.DOC_MAX
    monkeypatch.setattr(refresh, "TAR_SCAN_MAX", 1000)
    with pytest.raises(CannotRun, match="more than 1000 bytes of members"):
        refresh._tar_member(_tar({"top/blob": b"0" * 2000, f"top/{doc}": TABLE.encode()}), doc, "x.tar.gz")
    small = b"|" * 100  # member bytes of exactly TAR_SCAN_MAX, the document included, are scanned
    assert refresh._tar_member(_tar({"top/blob": b"0" * 900, f"top/{doc}": small}), doc, "x.tar.gz") == small.decode()


def test_a_release_without_wheels_gets_its_documented_ceiling_from_its_sdist(matrices):
    """The snapshot's versioning rows (vllm-ascend/VERSION.docs.json): 0.27.1rc1 without `python_documented` gets the
    ceiling its table's row says, 0.30.0rc1's wrong one is rewritten; 0.30.0rc2, whose table has no row for it, keeps
    its hand-written (inferred) one; a second run changes nothing."""
    serving = matrices / "serving.yaml"
    text = serving.read_text()
    at = text.index('  - version: "0.27.1rc1"\n')
    i = text.index("    python_documented:\n", at)
    text = text[:i] + text[text.index("    prerelease:", i) :]
    at = text.index('  - version: "0.30.0rc1"\n')
    i = text.index('      spec: "<3.13"\n', at)
    serving.write_text(text[:i] + '      spec: "<3.12"\n' + text[i + len('      spec: "<3.13"\n') :])
    result = refresh.refresh(matrices, snapshot=SNAPSHOT)
    assert [ch.line() for ch in result.rows] == [
        "vllm-ascend 0.30.0rc1: python_documented <3.12 -> <3.13 (PyPI: no wheel (sdist only))",
        "vllm-ascend 0.27.1rc1: python_documented absent -> <3.13 (PyPI: no wheel (sdist only))",
    ]
    assert refresh.refresh(matrices, snapshot=SNAPSHOT, write=True).changed
    lm = load_matrix_from(matrices)
    got = _row(lm, "vllm_ascend", "0.27.1rc1").python_documented
    assert (got.spec, got.confidence) == ("<3.13", "derived")
    assert got.source == (
        "docs/source/community/versioning_policy.md in vllm_ascend-0.27.1rc1.tar.gz "
        "(https://pypi.org/project/vllm-ascend/0.27.1rc1/#files): its v0.27.1rc1 row, Python >= 3.10, < 3.13, read 2026-12-04"
    )
    assert _row(lm, "vllm_ascend", "0.30.0rc1").python_documented.spec == "<3.13"
    kept = _row(lm, "vllm_ascend", "0.30.0rc2").python_documented
    assert (kept.spec, kept.confidence) == ("<3.13", "inferred")
    assert not refresh.refresh(matrices, snapshot=SNAPSHOT).changed

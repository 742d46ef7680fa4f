"""`envkit matrix refresh` offline, on the recorded PyPI snapshot (tests/fixtures/pypi-snapshot)."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.jobs.matrix import refresh
from envkit.resources import matrices_dir

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def matrices(tmp_path):
    folder = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), folder)
    return folder


def test_the_snapshot_is_small_and_stripped():
    files = list(SNAPSHOT.rglob("*.json"))
    assert sum(f.stat().st_size for f in files) < 2_000_000
    doc = json.loads((SNAPSHOT / "accelerate.json").read_text())
    assert set(doc) == {"info", "releases"} and set(doc["info"]) == {"version"}
    assert {k for files in doc["releases"].values() for f in files for k in f} == {"filename", "packagetype", "requires_python"}
    meta = json.loads((SNAPSHOT / "transformers" / "4.52.1.json").read_text())
    assert set(meta["info"]) == {"version", "requires_python", "requires_dist"}
    assert 'torch<2.7,>=2.1; extra == "torch"' in meta["info"]["requires_dist"]


def test_the_shipped_rules_are_what_the_metadata_says(matrices):
    result = refresh.refresh(matrices, snapshot=SNAPSHOT, today="2000-01-01")
    assert result.diff == "" and not result.changed  # a refresh of correct rows changes nothing (dates included)
    assert [r["id"] for r in result.rules["accelerate"]][:3] == [
        "accelerate/python-0.21.0",
        "accelerate/python-1.1.0",
        "accelerate/python-1.11.0",
    ]


def test_the_report_says_where_torch_is_a_cuda_build(matrices):
    report = refresh.refresh(matrices, snapshot=SNAPSHOT).report
    assert any("torch 2.10.0: PyPI serves a cpu build on aarch64, a cuda build on x86_64" in line for line in report)
    assert any("torch 2.11.0: PyPI serves a cuda build on aarch64" in line for line in report)
    assert not any(line.startswith("torch-npu 2.10.0rc2") for line in report)  # in the matrix, with PyPI's tags


def test_a_wrong_row_is_reported_and_written_back(matrices):
    path = matrices / "python_packages.yaml"
    good = path.read_text()
    wrong = good.replace('when: {accelerate: ">=1.1.0,<1.11.0"}', 'when: {accelerate: ">=1.2.0,<1.12.0"}', 1)
    assert wrong != good
    path.write_text(wrong)
    result = refresh.refresh(matrices, snapshot=SNAPSHOT, today="2026-11-30")  # the day the shipped rule was read
    assert result.changed
    removed = [ln for ln in result.diff.splitlines() if ln.startswith("-  ")]
    added = [ln for ln in result.diff.splitlines() if ln.startswith("+  ")]
    assert removed == ['-    when: {accelerate: ">=1.2.0,<1.12.0"}']
    assert added == ['+    when: {accelerate: ">=1.1.0,<1.11.0"}']
    assert path.read_text() == wrong  # only a diff without --write
    assert refresh.refresh(matrices, snapshot=SNAPSHOT, today="2026-11-30", write=True).changed
    assert path.read_text() == good
    assert not refresh.refresh(matrices, snapshot=SNAPSHOT).changed  # a second run changes nothing


def test_a_snapshot_dates_its_sources_by_its_recording_on_any_day(matrices, monkeypatch):
    """The written-back rule says "read 2026-12-04" (the snapshot's _recorded.json) a year later too."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(datetime.datetime(2027, 12, 1, tzinfo=datetime.timezone.utc).timestamp())))
    path = matrices / "python_packages.yaml"
    good = path.read_text()
    path.write_text(good.replace('requires: {python: ">=3.10,<3.14"}', 'requires: {python: ">=3.10,<3.15"}', 1))
    result = refresh.refresh(matrices, snapshot=SNAPSHOT, write=True)
    assert result.changed
    added = [ln for ln in result.diff.splitlines() if ln.startswith("+  ")]
    assert added[0] == '+    requires: {python: ">=3.10,<3.14"}' and "read 2026-12-04" in added[-1]
    assert "read 2027" not in path.read_text()


def test_a_snapshot_without_its_date_is_dated_today_and_a_bad_date_is_bad_input(tmp_path, matrices, monkeypatch):
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    (snap / refresh.RECORDED).unlink()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")  # 1970-01-02
    assert refresh.Source(snapshot=snap).read_date() == "1970-01-02"
    for bad in ('{"date": "30.11.2026"}', '{"date": 20261130}', "[]", '{"date": "2026-11-30\\n"}'):
        (snap / refresh.RECORDED).write_text(bad)
        with pytest.raises(BadInput) as info:
            refresh.Source(snapshot=snap).read_date()
        assert info.value.where is not None and info.value.where.file == str(snap / refresh.RECORDED)


def test_derive_splits_a_bound_that_changes_inside_a_minor_series():
    rels = [
        refresh.Release(v, rp, dist, [])
        for v, rp, dist in [
            ("4.52.0", ">=3.9.0", ['torch>=2.0; extra == "torch"']),
            ("4.52.1", ">=3.9.0", ['torch<2.7,>=2.1; extra == "torch"']),
            ("4.53.0", ">=3.9.0", ['torch>=2.1; extra == "torch"', "numpy>=1.17"]),
        ]
    ]
    rules = refresh.derive("transformers", rels, "2026-11-30")
    assert [(r["id"], r["when"], r["requires"]) for r in rules] == [
        ("transformers/python-4.52.0", {"transformers": ">=4.52.0"}, {"python": ">=3.9"}),
        ("transformers/torch-4.52.0", {"transformers": ">=4.52.0,<4.52.1"}, {"torch": ">=2.0"}),
        ("transformers/torch-4.52.1", {"transformers": ">=4.52.1,<4.53.0"}, {"torch": ">=2.1,<2.7"}),
        ("transformers/torch-4.53.0", {"transformers": ">=4.53.0"}, {"torch": ">=2.1"}),
    ]
    assert rules[1]["source"].startswith("PyPI transformers 4.52.0 metadata Requires-Dist torch (https://pypi.org/project/")


@pytest.mark.parametrize(
    ("dist", "aarch64"),
    [
        (['nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"'], "cpu"),
        (['nvidia-cudnn-cu13==9.13.0.50; platform_system == "Linux"'], "cuda"),
        (["filelock"], "cpu"),
    ],
)
def test_torch_build_from_requires_dist_markers(dist, aarch64):
    assert refresh.torch_build(dist, "aarch64") == aarch64
    assert refresh.torch_build(dist, "x86_64") == ("cpu" if dist == ["filelock"] else "cuda")


def test_a_snapshot_without_a_document_is_bad_input(tmp_path, matrices):
    with pytest.raises(BadInput) as info:
        refresh.refresh(matrices, snapshot=tmp_path)
    assert info.value.exit_code == 2 and "transformers.json" in info.value.message


def test_the_command_and_the_tool(matrices):
    path = matrices / "python_packages.yaml"
    path.write_text(path.read_text().replace('requires: {python: ">=3.10,<3.14"}', 'requires: {python: ">=3.10,<3.15"}', 1))
    args = ["--snapshot", str(SNAPSHOT), "--matrix-dir", str(matrices)]
    cli = subprocess.run([sys.executable, "-m", "envkit", "matrix", "refresh", *args], capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    assert '+    requires: {python: ">=3.10,<3.14"}' in cli.stdout and "matrix differs from PyPI" in cli.stdout
    tool = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "matrix_refresh.py"), *args, "--write"], capture_output=True, text=True
    )
    assert tool.returncode == 0 and "matrix written" in tool.stdout, tool.stderr
    again = subprocess.run([sys.executable, "-m", "envkit", "matrix", "refresh", *args], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout
    assert again.stdout.endswith("matrix up to date: 32 derived rules, 0 row(s) with other wheel facts\n")

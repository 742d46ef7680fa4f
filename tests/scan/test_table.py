"""matrices/migration.yaml: strict, every row sourced, every rule the scan emits is a row of it (and every row is
emitted by some check); it is not part of the stack matrix nor of its digest."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from envkit.artifacts.project.table import load_table, table_path
from envkit.errors import MatrixError

_PKG = Path(__file__).resolve().parents[2] / "envkit"
SCAN = (_PKG / "jobs" / "scan", _PKG / "artifacts" / "project")  # the code rules, and the project's dependency rules


def test_the_table_loads_and_every_row_is_sourced():
    table = load_table()
    assert len(table.model.rules) >= 40 and len(table.model.dependencies) >= 25
    for row in [*table.model.rules, *table.model.dependencies]:
        assert row.source and all(s.strip() for s in row.source), row
        assert row.confidence in ("stated", "derived", "inferred")
    for rule in table.model.rules:
        assert rule.reason and rule.fix and rule.title
    assert table.dependency("Flash_Attn").name == "flash-attn"  # normalized
    assert table.dependency("nvidia-cudnn-cu12").name == "nvidia-*"  # a glob
    assert table.dependency("cupy-cuda12x").name == "cupy"
    assert table.dependency("einops") is None


def _emitted() -> set[str]:
    """Every string literal the scan modules hand to add(), make() or finding() as the rule id, and every literal
    they set a finding's rule to."""
    out: set[str] = set()
    for path in (p for folder in SCAN for p in folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                index = {"add": 0, "finding": 0, "make": 1}.get(name)
                if index is not None and len(node.args) > index:
                    arg = node.args[index]
                    values = [arg] if not isinstance(arg, ast.IfExp) else [arg.body, arg.orelse]
                    out |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                if any(isinstance(t, ast.Attribute) and t.attr == "rule" for t in node.targets):
                    out.add(node.value.value)
            elif isinstance(node, ast.IfExp) and all(
                isinstance(b, ast.Constant) and isinstance(b.value, str) and b.value.startswith(("dep-", "lock-"))
                for b in (node.body, node.orelse)
            ):
                out |= {node.body.value, node.orelse.value}  # type: ignore[union-attr]
    return out


def test_every_emitted_rule_is_a_row_and_every_row_is_emitted():
    ids = set(load_table().rules)
    emitted = _emitted()
    assert emitted - ids == set()
    assert ids - emitted == set()


def test_a_malformed_table_names_file_and_line(tmp_path):
    bad = tmp_path / "migration.yaml"
    text = table_path().read_text().replace("confidence: stated", "confidence: sure", 1)
    bad.write_text(text)
    with pytest.raises(MatrixError) as exc:
        load_table(str(bad))
    assert exc.value.where.file == str(bad) and exc.value.where.line


def test_the_table_is_not_part_of_the_matrix_digest(tmp_path):
    from envkit.core.matrix import load_matrix_from
    from envkit.resources import matrices_dir

    folder = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), folder)
    before = load_matrix_from(folder).digest
    (folder / "migration.yaml").write_text((folder / "migration.yaml").read_text() + "\n# an edit\n")
    after = load_matrix_from(folder)
    assert after.digest == before and "migration.yaml" not in {p.name for p in after.files.values()}

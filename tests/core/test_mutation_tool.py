"""tools/mutation.py's groups against pyproject.toml's [tool.mutmut]: every mutated file belongs to exactly one group
(a file in no group is mutated but never scored; a group's file that is not mutated scores nothing), and every test
a group names exists (mutmut would otherwise run the group with no test and call every mutant a survivor)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("envkit_mutation_tool", ROOT / "tools" / "mutation.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_mutated_file_is_in_exactly_one_group_and_every_group_s_tests_exist():
    tool = _tool()
    mutated: list[str] = []
    # [tool.mutmut] only_mutate, read as text: tomllib is Python 3.11+, and envkit supports 3.10
    block = re.search(r"^only_mutate = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.S | re.M)
    assert block
    for pattern in re.findall(r'"([^"]+)"', block.group(1)):
        mutated += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern) if p.suffix == ".py")
    grouped = [f for files in tool.MODULES.values() for f in files]
    assert sorted(grouped) == sorted(set(mutated)), "a file mutated but in no group, or grouped but not mutated"
    assert len(grouped) == len(set(grouped)), "a file in two groups"
    assert set(tool.TESTS) == set(tool.MODULES)
    missing = [t for tests in tool.TESTS.values() for t in tests if not (ROOT / t).exists()]
    assert missing == []


def test_the_functions_a_group_is_narrowed_to_exist_and_their_mutants_are_the_ones_scored():
    """FUNCTIONS (the Ansible modules' pure functions) names top-level functions of grouped files; the glob of each
    picks that function's mutants and no other's (`x_in_range` not `x_in_any_range`)."""
    import ast

    tool = _tool()
    grouped = {f for files in tool.MODULES.values() for f in files}
    for path, names in tool.FUNCTIONS.items():
        assert path in grouped
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert set(names) <= defined, sorted(set(names) - defined)
    probe = "playbooks/plugins/modules/envkit_probe.py"
    codes = {
        "playbooks.plugins.modules.envkit_probe.x_in_range__mutmut_3": 1,
        "playbooks.plugins.modules.envkit_probe.x_in_any_range__mutmut_1": 0,
        "playbooks.plugins.modules.envkit_probe.x__read__mutmut_2": 0,  # reads the host: not scored
        "playbooks.plugins.modules.envkit_probe.x_decide__mutmut_7": None,
    }
    assert sorted(tool._scored(probe, codes)) == [
        "playbooks.plugins.modules.envkit_probe.x_decide__mutmut_7",
        "playbooks.plugins.modules.envkit_probe.x_in_any_range__mutmut_1",
        "playbooks.plugins.modules.envkit_probe.x_in_range__mutmut_3",
    ]
    assert tool._scored("envkit/versions.py", {"envkit.versions.x_parse__mutmut_1": 1}) == {
        "envkit.versions.x_parse__mutmut_1": 1
    }
    assert tool._mutant_globs("envkit/jobs/provision/__init__.py") == ["envkit.jobs.provision.x*"]


def test_the_survivors_tests_live_in_tests_mutants_each_run_by_its_group():
    """tests/ mirrors the package: the tests written against survivors are tests/mutants/test_<module>.py (not a
    `test_mutants_` prefix in the folder of the module's other tests), and each is in the test list of a group."""
    tool = _tool()
    prefixed = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_mutants_*.py"))
    assert prefixed == []
    named = {t for tests in tool.TESTS.values() for t in tests}
    unrun = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "mutants").glob("test_*.py") if str(p.relative_to(ROOT)) not in named
    )
    assert unrun == [], "a survivors' test no group runs"

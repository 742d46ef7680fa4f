"""The rules that the shipped matrix can never see broken (HOLDS_ONLY in test_resolve.py), broken for real.

They require Python >= 3.8 or torch >= 2.0 / 2.1, and the shipped matrix knows no Python below 3.8 and no
torch below 2.1, so `validate` refuses such a stack as unknown input (exit 2) before any rule decides.
Here each rule is run on a copy of the shipped matrix (its rules unchanged) that also knows Python 3.7
and two older torch_npu releases (pinning torch 2.0.1 and 1.11.0, on the 5.0.0 line like torch_npu 2.1.0).

For the two Python rules, every other "requires python" rule is left out of the copy: with them, Python
3.7 alone already has no transformers, accelerate or numpy release at all, so the minimal explanation is
Python 3.7 against one of those and never names the rule under test.

Only public behaviour: `load_matrix_from` and `validate_stack`.
"""

from __future__ import annotations

import re
import shutil

import pytest

from envkit.core.matrix import load_matrix_from
from envkit.core.resolve import validate_stack
from envkit.resources import matrices_dir

OLD_TORCH_NPU = """\
  - version: "{v}"
    line: "5.0.0"
    torch: "{v}"
    cann: "7.0.0"
    python: ["3.7", "3.8", "3.9"]
    manylinux: {{x86_64: "2.17", aarch64: "2.17"}}
    source: "test_rules_break: an older torch_npu release"
    confidence: inferred
"""

# rule id -> (a stack that breaks it, one that keeps it, whether the other "requires python" rules are left out)
T, P, A = "transformers", "python", "accelerate"
CASES = {
    "transformers/python-4.32.0": ({T: "4.40.0", P: "3.7"}, {T: "4.40.0", P: "3.8"}, True),
    "transformers/torch-4.48.0": ({T: "4.48.0", "torch": "1.11.0"}, {T: "4.48.0", "torch": "2.0.1"}, False),
    "transformers/torch-4.53.0": ({T: "4.53.0", "torch": "2.0.1"}, {T: "4.53.0", "torch": "2.5.1"}, False),
    "accelerate/python-0.21.0": ({A: "1.0.0", P: "3.7"}, {A: "1.0.0", P: "3.8"}, True),
    "accelerate/torch-1.3.0": ({A: "1.5.0", "torch": "1.11.0"}, {A: "1.5.0", "torch": "2.0.1"}, False),
}


RULE_BLOCK = re.compile(r"^  - id: (\S+)\n(?:    .*\n)*", re.M)


def _without_python_rules(text: str, keep: str) -> str:
    """The rules file without its "requires python" rules, except `keep`."""
    dropped = []

    def drop(m: re.Match) -> str:
        if m.group(1) != keep and re.search(r"^    requires: \{python:", m.group(0), re.M):
            dropped.append(m.group(1))
            return ""
        return m.group(0)

    text = RULE_BLOCK.sub(drop, text)
    assert len(dropped) >= 8, dropped  # transformers, accelerate and numpy each have several
    return text


def _older_matrix(tmp_path, rule_id: str, isolate_python: bool):
    folder = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), folder)
    platform = folder / "platform.yaml"
    text = platform.read_text(encoding="utf-8")
    assert text.count("\npythons:\n") == 1
    platform.write_text(
        text.replace("\npythons:\n", '\npythons:\n  - {version: "3.7", source: "test_rules_break", confidence: inferred}\n'),
        encoding="utf-8",
    )
    torch_npu = folder / "torch_npu.yaml"
    text = torch_npu.read_text(encoding="utf-8").rstrip("\n") + "\n"
    assert text.rstrip().splitlines()[-1].startswith("    "), "torch_npu releases must be the file's last section"
    torch_npu.write_text(text + "".join(OLD_TORCH_NPU.format(v=v) for v in ("2.0.1", "1.11.0")), encoding="utf-8")
    if isolate_python:
        packages = folder / "python_packages.yaml"
        packages.write_text(_without_python_rules(packages.read_text(encoding="utf-8"), rule_id), encoding="utf-8")
    return load_matrix_from(folder)


def test_the_shipped_matrix_cannot_break_them(lm):
    """Why the copy: every rule here is still an error rule, and its breaking versions are unknown input."""
    from envkit.errors import BadInput

    errors = {r.id for r in lm.model.rules if r.severity == "error"}
    assert set(CASES) <= errors
    for bad, _, _ in CASES.values():
        with pytest.raises(BadInput):
            validate_stack(bad, matrix=lm)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_a_stack_that_breaks_the_rule_is_refused_naming_it(tmp_path, rule_id):
    bad, good, isolate_python = CASES[rule_id]
    lm = _older_matrix(tmp_path, rule_id, isolate_python)
    assert rule_id in {r.id for r in lm.model.rules}

    ok = validate_stack(good, matrix=lm)
    assert ok.valid, [c.summary for c in ok.conflicts]

    report = validate_stack(bad, matrix=lm)
    assert not report.valid
    assert len(report.conflicts) == 1
    conflict = report.conflicts[0]
    # both pins are needed for the contradiction, and the rule is the one that decides it
    assert sorted(conflict.pins) == sorted(bad)
    rules_named = [f.rule for f in conflict.chain]
    assert f"rule:{rule_id}" in rules_named or rule_id in rules_named, rules_named
    assert conflict.chain[-1].rule.removeprefix("rule:") == rule_id
    rule = next(r for r in lm.model.rules if r.id == rule_id)
    assert rule.message.split("{")[0] in conflict.summary

"""The firmware range check, in its three places, on one corpus (issue #35): `tests/hostile/ranges/firmware.yaml`.

The same question, is this firmware Version inside the driver's `compatible_version_fw` ranges, is answered by
`envkit.provision.firmware_in_range` (render time: the lock's pair refused before any host is touched), by the
envkit_hdk role's Jinja expression (tasks/converge.yml, on the controller at run time: the installed driver's range)
and by `envkit.versions.in_any_range` (resolve, doctor). Held: each gives the corpus's answer at both ends of each
range (the bottom and the top are inside, the versions just past them outside, in the Ascend five-part spellings),
so that none of them can make an end exclusive alone; the inputs on which one answers otherwise today are listed in
the corpus (`divergent`) with that answer, and a change to any of them fails here until the corpus says it.

The role's expression is read from converge.yml as it stands and evaluated by Ansible's own templating
(ansible-playbook on localhost, one run for the whole corpus), in the task vars it has in the role.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from envkit.provision import firmware_in_range
from envkit.versions import InvalidVersion, in_any_range, parse, parse_ranges

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "hostile" / "ranges" / "firmware.yaml"
CONVERGE = ROOT / "playbooks" / "roles" / "envkit_hdk" / "tasks" / "converge.yml"
TASK = "HDK | Refuse a firmware outside the driver's compatible range"
IMPLEMENTATIONS = ("provision", "versions", "jinja")
Answer = bool | str  # True, False, "error" (it raised), "unknown" (firmware_in_range's None: no check)


def _load() -> list[tuple[str, str, bool, dict[str, Answer]]]:
    """(range, version, inside?, {implementation: its answer}) for every case of the corpus."""
    doc = yaml.safe_load(CORPUS.read_text())
    cases = []
    for row in doc["agreed"]:
        for inside in (True, False):
            for version in row["in" if inside else "out"]:
                cases.append((row["range"], version, inside, dict.fromkeys(IMPLEMENTATIONS, inside)))
    for row in doc["divergent"]:
        answers = {impl: row["answers"].get(impl, row["in"]) for impl in IMPLEMENTATIONS}
        cases.append((row["range"], row["version"], row["in"], answers))
    return cases


CASES = _load()
IDS = [f"{r.replace(' ', '')}-{v}" for r, v, _, _ in CASES]


def _above(version: str, top: str) -> bool:
    """Whether `version` lies past `top` (a prefix top `7.1.`: past the whole 7.1 line)."""
    if top.endswith("."):
        line = parse(top.rstrip(".")).release
        return parse(version).release[: len(line)] > line
    return parse(version) > parse(top)


def test_the_corpus_is_what_it_says():
    doc = yaml.safe_load(CORPUS.read_text())
    assert all(isinstance(x, str) for r, v, _, _ in CASES for x in (r, v)), "a version YAML read as a number"
    assert len({(r, v) for r, v, _, _ in CASES}) == len(CASES), "a case given twice"
    for row in doc["agreed"]:  # both ends of each range, and a version past each
        ranges = parse_ranges(row["range"])
        assert row["in"] and row["out"]
        for lo, hi in ranges:
            assert lo in row["in"], f"{row['range']}: its bottom {lo} is not in the corpus"
            assert any(parse(v) < parse(lo) for v in row["out"]), f"{row['range']}: nothing below {lo}"
            top = hi.rstrip(".")
            assert top in row["in"] or hi.endswith("."), f"{row['range']}: its top {hi} is not in the corpus"
            assert any(_above(v, hi) for v in row["out"]), f"{row['range']}: nothing above {hi}"
    for row in doc["divergent"]:
        assert row["why"] and set(row["answers"]) <= set(IMPLEMENTATIONS) and "versions" not in row["answers"]
        assert all(a != row["in"] for a in row["answers"].values()), f"{row}: an answer that agrees is no divergence"
    assert sum(len(r["in"]) + len(r["out"]) for r in doc["agreed"]) >= 45


def _provision(version: str, ranges: str) -> Answer:
    got = firmware_in_range(version, ranges)
    return "unknown" if got is None else got


def _versions(version: str, ranges: str) -> Answer:
    try:
        return in_any_range(version, parse_ranges(ranges))
    except InvalidVersion:
        return "error"


@pytest.mark.parametrize(("ranges", "version", "inside", "answers"), CASES, ids=IDS)
def test_the_python_checks_give_the_corpus_answer(ranges, version, inside, answers):
    got = {"provision": _provision(version, ranges), "versions": _versions(version, ranges)}
    want = {k: answers[k] for k in got}
    assert got == want, f"firmware {version} in {ranges}: {got}, the corpus says {want} (inside: {inside})"


def _role_expression() -> tuple[str, str]:
    """The role's task: its `that` and the Jinja expression of `envkit_hdk_fw_in_range`, as converge.yml has them."""
    tasks = yaml.safe_load(CONVERGE.read_text())
    task = next(t for t in tasks if t.get("name") == TASK)
    return task["ansible.builtin.assert"]["that"], task["vars"]["envkit_hdk_fw_in_range"]


@pytest.fixture(scope="module")
def role_answers(tmp_path_factory) -> dict[tuple[str, str], Answer]:
    """{(range, version): the role's answer} for every case, from one ansible-playbook run on localhost."""
    from envkit.executor.ansible import playbook_env
    from tests.provision.conftest import PLAYBOOKS, run_local_playbook, write_play

    ap = Path(sys.executable).parent / "ansible-playbook"
    if not ap.exists():
        pytest.skip("ansible-playbook not installed beside this interpreter")
    that, expression = _role_expression()
    tmp = tmp_path_factory.mktemp("fw-role")
    (tmp / "cases.json").write_text(json.dumps({"fw_cases": [{"range": r, "version": v} for r, v, _, _ in CASES]}))
    play = write_play(
        tmp / "play.yml",
        [
            {
                "name": "the role's expression, in the vars it has there",
                "ansible.builtin.debug": {"msg": "{{ " + that + " }}"},
                "vars": {
                    "envkit_hdk_fw_range": "{{ item.range }}",
                    "envkit_hdk_firmware": {"firmware_version": "{{ item.version }}"},
                    "envkit_hdk_fw_in_range": expression,
                },
                "loop": "{{ fw_cases }}",
                "register": "r",
                "ignore_errors": True,
            },
            {
                "ansible.builtin.copy": {
                    "content": "{{ r.results | map(attribute='failed', default=false) | zip(r.results | "
                    "map(attribute='msg', default='')) | list | to_json }}",
                    "dest": str(tmp / "answers.json"),
                    "mode": "0600",
                }
            },
        ],
    )
    p = run_local_playbook(ap, play, "-e", f"@{tmp / 'cases.json'}", env=playbook_env(PLAYBOOKS), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = json.loads((tmp / "answers.json").read_text())
    assert len(rows) == len(CASES)
    out: dict[tuple[str, str], Answer] = {}
    for (ranges, version, _, _), (failed, msg) in zip(CASES, rows, strict=True):
        out[(ranges, version)] = "error" if failed else {"True": True, "False": False}.get(str(msg), f"?{msg}")
    return out


def test_the_role_asserts_the_expression_evaluated_here():
    """What the test evaluates is what the role asserts: `that` is the expression's value as a bool, on a firmware
    change with a firmware Version and a range."""
    that, expression = _role_expression()
    assert that == "envkit_hdk_fw_in_range | bool"
    assert "envkit_hdk_fw_range" in expression and "envkit_hdk_firmware.firmware_version" in expression


def test_the_role_expression_gives_the_corpus_answer(role_answers):
    wrong = [
        f"firmware {v} in {r}: the role says {role_answers[(r, v)]}, the corpus {answers['jinja']}"
        for r, v, _, answers in CASES
        if role_answers[(r, v)] != answers["jinja"]
    ]
    assert not wrong, "\n".join(wrong)


def test_on_the_agreed_cases_all_three_agree(role_answers):
    """The point of the corpus: on every agreed case the three answers are one (and the corpus's)."""
    for r, v, inside, answers in CASES:
        if len(set(answers.values())) == 1:
            assert _provision(v, r) == _versions(v, r) == role_answers[(r, v)] == inside, (r, v)

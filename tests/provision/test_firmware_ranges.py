"""The firmware range check, in its three places, on one corpus (issue #35): `tests/hostile/ranges/firmware.yaml`.

The same question, is this Version inside these `compatible_version_fw` (or `compatible_version_drv`) ranges, is
answered by `envkit.jobs.provision.firmware_in_range` (render time: the lock's pair refused before any host is touched),
on the host by envkit_probe's `firmware_range_check`, whose answer the envkit_hdk role asserts (tasks/converge.yml:
the installed driver's range, or the lock's driver's where the driver changes too), and by
`envkit.versions.in_any_range` (resolve, doctor). Held: all three give envkit.versions' answer on every case of the
corpus (both ends of each range, the versions just past them, Ascend's RC spellings and patches, trailing zeros,
prefix tops), and they can only: the render-time check calls envkit.versions, and the probe ships envkit.versions'
ordering byte for byte (the block between `# >>> the ordering` and `# <<< the ordering` in both files).

The host's answer is taken through Ansible itself: the real envkit_probe module on localhost for each case, then the
role's task as converge.yml has it, in the vars its vars/main.yml gives (one ansible-playbook run for the corpus).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from envkit import versions
from envkit.jobs.provision import firmware_in_range
from envkit.versions import InvalidVersion, in_any_range, parse, parse_ranges
from tests.provision.conftest import PROBE, load_probe, local_ansible_playbook, skip_under_mutation

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "hostile" / "ranges" / "firmware.yaml"
CONVERGE = ROOT / "playbooks" / "roles" / "envkit_hdk" / "tasks" / "converge.yml"
HDK_VARS = ROOT / "playbooks" / "roles" / "envkit_hdk" / "vars" / "main.yml"
TASK = "HDK | Refuse a firmware outside the driver's compatible range"
BEGIN, END = "# >>> the ordering", "# <<< the ordering\n"
Answer = bool | str  # True, False, "error" (a range or Version that is none), "unknown" (no check made)
P = load_probe()


def _load() -> list[tuple[str, str, bool]]:
    """(range, version, inside?) for every case of the corpus."""
    doc = yaml.safe_load(CORPUS.read_text())
    return [
        (row["range"], version, inside)
        for row in doc["agreed"]
        for inside in (True, False)
        for version in row["in" if inside else "out"]
    ]


CASES = _load()
IDS = [f"{r.replace(' ', '')}-{v}" for r, v, _ in CASES]


def _above(version: str, top: str) -> bool:
    """Whether `version` lies past `top` (a prefix top `7.1.`: past the whole 7.1 line)."""
    if top.endswith("."):
        line = parse(top.rstrip(".")).release
        return parse(version).release[: len(line)] > line
    return parse(version) > parse(top)


def test_the_corpus_is_what_it_says():
    doc = yaml.safe_load(CORPUS.read_text())
    assert set(doc) == {"agreed"}, "every case is one all three implementations agree on: no other section"
    assert all(isinstance(x, str) for r, v, _ in CASES for x in (r, v)), "a version YAML read as a number"
    assert len({(r, v) for r, v, _ in CASES}) == len(CASES), "a case given twice"
    for row in doc["agreed"]:  # both ends of each range, and a version past each
        ranges = parse_ranges(row["range"])
        assert row["in"] and row["out"]
        for lo, hi in ranges:
            assert lo in row["in"], f"{row['range']}: its bottom {lo} is not in the corpus"
            assert any(parse(v) < parse(lo) for v in row["out"]), f"{row['range']}: nothing below {lo}"
            top = hi.rstrip(".")
            assert top in row["in"] or hi.endswith("."), f"{row['range']}: its top {hi} is not in the corpus"
            assert any(_above(v, hi) for v in row["out"]), f"{row['range']}: nothing above {hi}"
    spelled = {v for _, v, _ in CASES}
    # what LooseVersion (Ansible's `version` test, the role's check before) got wrong is held here
    for case in ("7.5.RC1", "7.0.0.rc1", "7.5.99.rc1", "7.0", "7.5.99.0", "24.1.rc3", "24.1.rc2.2"):
        assert case in spelled, case
    assert len(CASES) >= 100


def _block(text: str) -> str:
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def test_the_probe_ships_envkits_ordering_byte_for_byte():
    """One definition: the probe's ordering is envkit.versions' block as it stands, and it is what both run."""
    skip_under_mutation("mutmut rewrites the text of both files; the shared corpus holds their behaviour")
    source = Path(versions.__file__).read_text()
    assert _block(PROBE.read_text()) == _block(source), (
        "envkit_probe.py's copy of the ordering differs from envkit/versions.py's: copy the block between "
        f"{BEGIN!r} and {END.strip()!r} from envkit/versions.py into {PROBE}"
    )
    first = source[: source.index(BEGIN)].count("\n") + 1
    last = first + _block(source).count("\n")
    for fn in (versions.version_key.__wrapped__, versions.in_range, versions.parse_ranges, versions.in_any_range):
        assert first < fn.__code__.co_firstlineno < last, f"envkit.versions.{fn.__name__} is defined outside the block"
    assert P.version_key.__wrapped__.__code__.co_filename == str(PROBE)  # the probe runs its own copy
    assert P.firmware_range_check.__globals__["in_any_range"] is P.in_any_range
    assert versions.parse("7.5.RC1").key == versions.version_key("7.5.RC1")[0]  # envkit's Version is ordered by it


def _provision(version: str, ranges: str) -> Answer:
    got = firmware_in_range(version, ranges)
    return "unknown" if got is None else got


def _versions(version: str, ranges: str) -> Answer:
    try:
        return in_any_range(version, parse_ranges(ranges))
    except InvalidVersion:
        return "error"


def _probe(version: str, ranges: str, installed: bool) -> Answer:
    """envkit_probe's check in-process: the installed driver's range (a firmware change alone), or the lock's
    driver's (the driver changes too)."""
    e = {"driver": {"package_version": "1.0", "compatible_firmware": "" if installed else ranges}}
    e["firmware"] = {"package_version": "2.0", "firmware_version": version}
    todo = ["firmware"] if installed else ["driver", "firmware"]
    got = P.firmware_range_check(e, todo, ranges if installed else "")
    assert got["fw_range"] == ranges
    if not got["fw_checked"]:
        return "unknown"
    return "error" if got["fw_error"] else got["fw_in_range"]


@pytest.mark.parametrize(("ranges", "version", "inside"), CASES, ids=IDS)
def test_the_python_checks_give_the_corpus_answer(ranges, version, inside):
    got = {
        "provision": _provision(version, ranges),
        "versions": _versions(version, ranges),
        "probe, installed driver": _probe(version, ranges, installed=True),
        "probe, the lock's driver": _probe(version, ranges, installed=False),
    }
    assert got == dict.fromkeys(got, inside), f"{version} in {ranges}: {got}, the corpus says {inside}"


def test_a_range_or_version_that_is_none_is_refused_on_the_host_and_unchecked_at_render_time():
    """A version.info line that is no list of ranges (or a lock's firmware Version that is none): the host refuses,
    naming why; render time has nothing to check it by (None). A line of brackets is refused at once, not parsed
    in quadratic time."""
    for version, ranges in (
        ("7.5.0.1.129", "7.0.0-7.5.99"),
        ("7.5.0.1.129", "[" * 200_000),
        ("7.5.0.1.129", "[7.0.0,seven]"),
        ("RC1", "[7.0.0,7.5.99]"),
    ):
        got = P.firmware_range_check(
            {"firmware": {"firmware_version": version}, "driver": {"package_version": "1"}}, ["firmware"], ranges
        )
        assert got["fw_checked"] is True and got["fw_in_range"] is False and "not a" in got["fw_error"], got
        assert firmware_in_range(version, ranges) is None
        assert _versions(version, ranges) == "error"


def test_no_check_without_a_firmware_change_a_firmware_version_or_a_range():
    e = {"driver": {"package_version": "1", "compatible_firmware": "[7.0.0,7.5.99]"}}
    e["firmware"] = {"package_version": "2", "firmware_version": "8.0.0"}
    assert P.firmware_range_check(e, ["driver", "firmware"], "")["fw_checked"] is True
    assert P.firmware_range_check(e, ["driver"], "[7.0.0,7.5.99]")["fw_checked"] is False
    assert P.firmware_range_check(e, ["firmware"], "")["fw_checked"] is False  # no driver installed, none changing
    assert P.firmware_range_check({**e, "firmware": {"package_version": "2"}}, ["firmware"], "[7.0.0,7.5.99]") == {
        "fw_range": "[7.0.0,7.5.99]",
        "fw_checked": False,
        "fw_in_range": None,
        "fw_error": "",
    }


def _role_task() -> dict:
    return next(t for t in yaml.safe_load(CONVERGE.read_text()) if t.get("name") == TASK)


def test_the_role_asserts_the_probes_answer():
    """The role decides nothing itself: it asserts the probe's answer where the probe made a check, through the vars
    its vars/main.yml takes from envkit_state.decide.hdk; no Ansible `version` test is left in the role."""
    task = _role_task()
    assert task["ansible.builtin.assert"]["that"] == "envkit_hdk_fw_in_range | bool"
    assert task["when"] == "envkit_hdk_fw_checked | bool" and "vars" not in task
    hdk_vars = yaml.safe_load(HDK_VARS.read_text())
    for name, key in (("checked", "fw_checked"), ("in_range", "fw_in_range"), ("range", "fw_range")):
        assert hdk_vars[f"envkit_hdk_fw_{name}"] == f"{{{{ ansible_facts.envkit_state.decide.hdk.{key} }}}}"
    role = CONVERGE.parents[1]
    assert not [p for p in role.rglob("*.yml") if "version(" in p.read_text() or "is version" in p.read_text()]


@pytest.fixture(scope="module")
def role_answers(tmp_path_factory) -> dict[tuple[str, str], Answer]:
    """{(range, version): the host's answer} for every case: one inventory host per case (local connection), each
    running the real envkit_probe and then the role's task in the role's vars, in one ansible-playbook run. The range
    comes from the host's driver/version.info (a firmware change alone) on half the hosts, from the lock's driver
    (the driver changes too) on the others."""
    from envkit.executor.ansible import playbook_env
    from tests.provision.conftest import PLAYBOOKS, run_local_playbook, write_play

    ap = local_ansible_playbook()
    tmp = tmp_path_factory.mktemp("fw-role")
    hosts = {}
    for i, (ranges, version, _) in enumerate(CASES):
        root = tmp / "hosts" / str(i)
        installed = i % 2 == 0
        if installed:
            (root / "driver").mkdir(parents=True)
            (root / "driver" / "version.info").write_text(
                f"Version=24.1.rc3\npackage_version=1.0\ncompatible_version_fw={ranges}\n"
            )
        driver = {"package_version": "1.0", "compatible_firmware": "" if installed else ranges}
        firmware = {"package_version": "2.0", "firmware_version": version}
        hosts[f"case{i}"] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "envkit_hdk_firmware": firmware,
            "fw_expect": {"hdk": {"enabled": True, "install_path": str(root), "driver": driver, "firmware": firmware}},
        }
    inventory = tmp / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"fw": {"hosts": hosts}}}}))
    play = write_play(
        tmp / "play.yml",
        [
            {"envkit_probe": {"expect": "{{ fw_expect }}", "npu_smi": False, "hccn": False}},
            {**_role_task(), "ignore_errors": True, "register": "fw_assert"},
            {
                "ansible.builtin.copy": {
                    "content": "{{ groups['fw'] | zip(groups['fw'] | map('extract', hostvars) | map(attribute='fw_assert') "
                    "| list, groups['fw'] | map('extract', hostvars) | map(attribute='ansible_facts') | "
                    "map(attribute='envkit_state') | map(attribute='decide') | map(attribute='hdk') | list) | list | to_json }}",
                    "dest": str(tmp / "answers.json"),
                    "mode": "0600",
                },
                "run_once": True,
            },
        ],
        hosts="fw",
        vars=yaml.safe_load(HDK_VARS.read_text()),
    )
    env = {**playbook_env(PLAYBOOKS), "ANSIBLE_LIBRARY": str(PROBE.parent), "ANSIBLE_FORKS": "4"}
    p = run_local_playbook(ap, play, "-i", str(inventory), env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {host: (result, decide) for host, result, decide in json.loads((tmp / "answers.json").read_text())}
    assert sorted(rows) == sorted(hosts)
    out: dict[tuple[str, str], Answer] = {}
    for i, (ranges, version, _) in enumerate(CASES):
        result, decide = rows[f"case{i}"]
        assert decide["fw_range"] == ranges  # the range the host held it to: its own file's, or the lock's
        if result.get("skipped"):
            out[(ranges, version)] = "unknown"
        else:
            assert bool(result.get("failed")) is (not decide["fw_in_range"]), result  # the role asserted the probe's
            out[(ranges, version)] = "error" if decide["fw_error"] else not result.get("failed")
    return out


@pytest.mark.slow  # a probe run per case: about a minute
def test_all_three_agree_on_the_whole_corpus(role_answers):
    """The point of the corpus: on every case the three answers are one, and the corpus's."""
    wrong = [
        f"{v} in {r}: render time {_provision(v, r)}, the host {role_answers[(r, v)]}, envkit.versions "
        f"{_versions(v, r)}; the corpus says {inside}"
        for r, v, inside in CASES
        if not _provision(v, r) == role_answers[(r, v)] == _versions(v, r) == inside
    ]
    assert not wrong, "\n".join(wrong)

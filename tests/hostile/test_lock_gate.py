"""The lock gate: every command that reads a lock re-derives what the matrix derives for its stack and refuses an
edited lock (exit 2, the fields named, nothing written); `--accept-edited-lock` turns that into a warning, never a
pass for what the schema refuses. And the URL policy: https, or http/file under a mirror the closure records."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput

# the commands that read a lock, up to their first write (OUT: the output they would make)
COMMANDS = {
    "image render": ["image", "render", "--lock", "{f}", "-o", "{out}"],
    "bundle build": ["bundle", "build", "--lock", "{f}", "-o", "{out}"],
    "lock": ["lock", "--lock", "{f}", "--only", "numpy", "--index-url", "http://127.0.0.1:9/simple", "-o", "{out}"],
    "image run-args": ["image", "run-args", "--lock", "{f}"],
    "provision --check": ["provision", "-i", "envkit-unreachable.invalid,", "--check", "--lock", "{f}", "--out", "{out}"],
    "doctor --lock": [
        "doctor",
        "--lock",
        "{f}",
        "--root",
        str(Path(__file__).resolve().parents[1] / "fixtures" / "roots" / "healthy-a2"),
    ],
}


def _toolkit(doc: dict) -> dict:
    return next(a for a in doc["artifacts"] if a["component"] == "cann-toolkit")


def _write(tmp_path: Path, doc: dict, name: str = "envkit.lock") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def edited(lock_doc, tmp_path) -> Path:
    doc = copy.deepcopy(lock_doc)
    _toolkit(doc)["zip"]["sha256"] = "ab" * 32
    doc["layout"]["home"] = "/opt/elsewhere"
    return _write(tmp_path, doc)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_edited_lock_is_refused_by_every_command_naming_the_fields(command, edited, tmp_path, run_cli):
    out = tmp_path / "out"
    res = run_cli(*[a.format(f=edited, out=out) for a in COMMANDS[command]])
    assert res.code == 2, (command, res.out, res.err)
    assert "artifacts.cann-toolkit.zip.sha256" in res.err and "layout.home" in res.err, res.err
    assert "envkit resolve" in res.err and "--accept-edited-lock" in res.err, res.err  # how to re-lock, or accept
    assert "Traceback" not in res.err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["envkit.lock"]


def test_accepted_with_the_flag_is_a_warning_naming_the_fields(edited, run_cli):
    res = run_cli("--accept-edited-lock", "image", "run-args", "--lock", str(edited))
    assert res.code == 0, res.err
    assert "warning:" in res.err and "artifacts.cann-toolkit.zip.sha256" in res.err and "layout.home" in res.err
    assert "--device" in res.out  # and the command ran
    res = run_cli("image", "run-args", "--lock", str(edited))  # the flag held for that one run only
    assert res.code == 2


def test_the_flag_does_not_pass_what_the_schema_refuses(lock_doc, tmp_path, run_cli):
    doc = copy.deepcopy(lock_doc)
    _toolkit(doc)["run"]["file"] = "../../etc/x.run"
    path = _write(tmp_path, doc)
    res = run_cli("--accept-edited-lock", "image", "run-args", "--lock", str(path))
    at = doc["artifacts"].index(_toolkit(doc))
    assert res.code == 2 and "is not a valid lock" in res.err and f"artifacts.{at}.run.file" in res.err, res.err


def test_a_lock_from_another_matrix_is_still_compared(lock_doc, tmp_path, run_cli):
    doc = copy.deepcopy(lock_doc)
    doc["matrix_digest"] = "sha256:" + "0" * 64
    res = run_cli("image", "run-args", "--lock", str(_write(tmp_path, doc, "same.lock")))
    assert res.code == 0, res.err  # nothing derivable edited: the digest alone is no reason to refuse
    doc["platform"]["glibc"] = "2.99"
    res = run_cli("image", "run-args", "--lock", str(_write(tmp_path, doc, "other.lock")))
    assert res.code == 2 and "platform.glibc" in res.err and "another matrix" in res.err, res.err


def test_validate_names_the_same_fields(edited, run_cli):
    res = run_cli("validate", str(edited))
    assert res.code == 1
    assert "cann-toolkit: zip.sha256" in res.out and "layout fields home" in res.out, res.out


def test_library_callers_choose_the_check(edited, lock_doc, tmp_path):
    """read_lock alone holds the schema; with the matrix check it refuses (a typed EditedLock naming the fields),
    or warns with edits accepted; a command run in-process leaves nothing behind for the next caller."""
    from envkit.cli import main
    from envkit.core import derive as locking
    from envkit.lock import file as lockfile

    assert lockfile.read_lock(edited).layout.home == "/opt/elsewhere"
    check = locking.matrix_check()
    with pytest.raises(lockfile.EditedLock) as exc:
        lockfile.read_lock(edited, check)
    assert exc.value.exit_code == 2 and "layout.home" in exc.value.message
    assert "layout.home" in exc.value.edited.fields and exc.value.details["fields"] == list(exc.value.edited.fields)
    assert isinstance(exc.value, BadInput)
    assert lockfile.read_lock(_write(tmp_path, lock_doc, "clean.lock"), check).layout.home != "/opt/elsewhere"
    assert lockfile.read_lock(edited, check.accepting()).layout.home == "/opt/elsewhere"  # a warning, not a refusal
    with pytest.raises(SystemExit):
        main(["--accept-edited-lock", "image", "run-args", "--lock", str(edited)])
    assert lockfile.read_lock(edited).layout.home == "/opt/elsewhere"  # no gate left in force by the command line
    with pytest.raises(lockfile.EditedLock):  # nor an acceptance
        lockfile.read_lock(edited, locking.matrix_check())


def test_the_check_derives_a_stack_once(edited, lock_doc, tmp_path, monkeypatch):
    """What the matrix derives for a stack is remembered (per matrix digest and stack): a job that reads the same
    lock twice, or two locks of one stack, derives it once."""
    from envkit.core import derive as locking
    from envkit.lock import file as lockfile

    calls = []
    real = locking.derive_lock
    monkeypatch.setattr(locking, "derive_lock", lambda *a: calls.append(a[1].stack.chip) or real(*a))
    monkeypatch.setattr(locking, "_DERIVED", {})
    check = locking.matrix_check(accept_edited=True)
    clean = _write(tmp_path, lock_doc, "clean.lock")
    for path in (clean, clean, edited):
        lockfile.read_lock(path, check)
    assert len(calls) == 1


def test_the_remembered_derivations_are_capped(monkeypatch):
    """At most _DERIVED_MAX stacks are remembered: at the cap every one is still known; one more drops the oldest."""
    from types import SimpleNamespace

    from envkit.core import derive as locking

    calls: list[str] = []
    monkeypatch.setattr(locking, "derive_lock", lambda lm, lock, where: calls.append(lock.stack["chip"]))
    monkeypatch.setattr(locking, "_DERIVED", {})
    monkeypatch.setattr(locking, "_DERIVED_MAX", 2)
    lm = SimpleNamespace(digest="sha256:" + "0" * 64)

    def lock(chip: str) -> SimpleNamespace:  # a lock's stack as `plain` dumps it (a model's or a record's)
        return SimpleNamespace(stack={"chip": chip})

    for chip in ("a", "b", "a", "b"):  # at the cap: both remembered
        locking._derived(lm, lock(chip), "x.lock")
    assert calls == ["a", "b"] and len(locking._DERIVED) == 2
    locking._derived(lm, lock("c"), "x.lock")  # one past it: the oldest goes
    assert len(locking._DERIVED) == 2
    locking._derived(lm, lock("b"), "x.lock")
    locking._derived(lm, lock("a"), "x.lock")
    assert calls == ["a", "b", "c", "a"]


def test_check_lock_compares_every_derived_section_by_name(lock_doc, tmp_path):
    from envkit.core import derive as locking
    from envkit.lock.file import read_lock

    assert locking.check_lock(read_lock(_write(tmp_path, lock_doc, "clean.lock")), "clean.lock") == []
    doc = copy.deepcopy(lock_doc)
    _toolkit(doc)["run"]["flags"] = ["--quiet"]
    _toolkit(doc)["order"] = 9
    doc["validated"]["cann_hdk"] = not doc["validated"]["cann_hdk"]
    doc["python"]["cann_runtime"] = doc["python"]["cann_runtime"][1:]
    doc["python"]["indexes"]["pypi"] = "https://mirror.example/simple"
    doc["python"]["requirements"][0]["version"] = "9.9.9"
    doc["platform"]["base_image"] = None
    doc["artifacts"] = [a for a in doc["artifacts"] if a["component"] != "cann-nnal"]
    doc["hints"] = ["edited hints are not derived"]
    got = locking.check_lock(read_lock(_write(tmp_path, doc)), "envkit.lock")
    assert set(got) == {
        "artifacts.cann-toolkit.run.flags",
        "artifacts.cann-toolkit.order",
        "artifacts.cann-nnal",
        "validated.cann_hdk",
        "python.cann_runtime",
        "python.indexes.pypi",
        f"python.requirements.{doc['python']['requirements'][0]['name']}.version",
        "platform.base_image",
    }, got


# --- URLs -----------------------------------------------------------------------------------------------------
def _closure(url: str, index: str, mirrors: list[str]) -> dict:
    return {
        "target": {"python": "3.10", "arch": "aarch64", "glibc": "2.28", "platform": "manylinux_2_28_aarch64"},
        "roots": ["alpha"],
        "index_url": index,
        "resolver": "test",
        "mirrors": mirrors,
        "packages": [
            {
                "name": "alpha",
                "version": "1.0",
                "filename": "alpha-1.0-py3-none-any.whl",
                "url": url,
                "sha256": "0" * 64,
                "size": 1,
            }
        ],
    }


@pytest.mark.parametrize(
    "url, index, mirrors, ok",
    [
        ("https://files.example/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", [], True),
        ("http://127.0.0.1:8080/alpha-1.0-py3-none-any.whl", "http://127.0.0.1:8080", ["http://127.0.0.1:8080/"], True),
        ("http://127.0.0.1:8080/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", [], False),
        ("http://127.0.0.1:80800/alpha-1.0-py3-none-any.whl", "http://127.0.0.1:8080", ["http://127.0.0.1:8080/"], False),
        ("file:///srv/wheels/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", ["file:///srv/wheels/"], True),
        ("file:///srv/wheels/../../etc/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", ["file:///srv/wheels/"], False),
        ("file:///srv/wheels/%2e%2e/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", ["file:///srv/wheels/"], False),
        ("file:///dev/zero", "https://pypi.org/simple", [], False),
        ("https://files.example/alpha-1.0-py3-none-any.whl", "http://evil.example/simple", [], False),
        ("https://files.example/alpha-1.0-py3-none-any.whl", "https://pypi.org/simple", ["https://pypi.org/"], False),
    ],
)
def test_closure_urls_are_https_or_under_a_recorded_mirror(url, index, mirrors, ok):
    from pydantic import ValidationError

    from envkit.models.lock import PythonClosure

    if ok:
        PythonClosure.model_validate(_closure(url, index, mirrors))
    else:
        with pytest.raises(ValidationError):
            PythonClosure.model_validate(_closure(url, index, mirrors))


def test_a_zip_edition_is_https_only(lock_doc, tmp_path, run_cli):
    doc = copy.deepcopy(lock_doc)
    _toolkit(doc)["zip"]["url"] = _toolkit(doc)["zip"]["url"].replace("https://", "http://")
    res = run_cli("--accept-edited-lock", "image", "run-args", "--lock", str(_write(tmp_path, doc)))
    assert res.code == 2 and "zip.url" in res.err and "https" in res.err, res.err


def test_envkit_lock_records_the_mirrors_it_was_given(tmp_path):
    from envkit.artifacts.closure import ClosurePlan, make_target, mirror_prefix

    plan = ClosurePlan(
        roots=("alpha",),
        target=make_target("3.10", "aarch64"),
        index_url="http://127.0.0.1:8080/simple",
        extra_index_urls=("https://pypi.org/simple",),
        find_links=(str(tmp_path / "wheels"),),
        pinned=(("torch", "http://10.0.0.1:81/whl/cpu"),),
    )
    assert plan.mirrors == sorted(["http://127.0.0.1:8080/", (tmp_path / "wheels").as_uri() + "/", "http://10.0.0.1:81/"])
    assert mirror_prefix("https://pypi.org/simple") is None

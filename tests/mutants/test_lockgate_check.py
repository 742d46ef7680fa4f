"""The lock gate's checking side (envkit.core.derive gate/differ/check_lock, envkit.core.validation): which fields an edited
lock names, the gate's finding and its refusal, and what `envkit validate` reports for a lock and for a stack file.
Cases that `make mutation` showed no test held; in-process and fast (one lock built once, edited per test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.core.derive import build_lock, check_lock, differ, gate
from envkit.core.resolve import pins_from_mapping, solve
from envkit.core.validation import validate_file
from envkit.errors import BadInput
from envkit.lock.file import dump_lock
from envkit.lock.gate import Edited
from envkit.models.lock import Lock

PINS = {"chip": "910b", "arch": "aarch64", "cann": "8.5.0", "python": "3.10"}
MADE_BY = "envkit resolve --chip 910b --arch aarch64 --cann 8.5.0 --python 3.10"
OTHER = "sha256:" + "0123456789abcdef" * 4  # another matrix's digest
STACK_INVALID = "its stack is not valid for this matrix (`envkit validate` explains why)"


@pytest.fixture(scope="module")
def lock(lm) -> Lock:
    res = solve(lm, pins_from_mapping(lm, PINS, where={k: f"--{k}" for k in PINS}))
    assert res is not None
    return build_lock(lm, res, MADE_BY)


def _other_matrix_note(lm) -> str:
    return f"the lock comes from another matrix (sha256:0123456789ab…, this envkit has {lm.digest[:19]}…)"


def _edit(lock: Lock, *, digest: str | None = None, stack: dict | None = None, edits=()) -> Lock:
    doc = lock.model_dump(mode="json")
    if digest:
        doc["matrix_digest"] = digest
    doc["stack"].update(stack or {})
    for edit in edits:
        edit(doc)
    return Lock.model_validate(doc)


def _toolkit(doc: dict) -> dict:
    return next(a for a in doc["artifacts"] if a["component"] == "cann-toolkit")


def _sha(doc):
    _toolkit(doc)["zip"]["sha256"] = "ab" * 32


def _glibc(doc):
    doc["platform"]["glibc"] = "2.99"


def _devices(doc):
    doc["platform"]["davinci_devices"] = 16


def _index(doc):
    doc["python"]["indexes"]["pypi"] = "https://mirror.example.org/simple"


def _drop_nnal(doc):
    doc["artifacts"] = [a for a in doc["artifacts"] if a["component"] != "cann-nnal"]


# --- differ ---------------------------------------------------------------------------------------------------
def test_differ_names_each_differing_path():
    assert differ(1, 1) == [] and differ(1, 2) == ["(all)"]
    assert differ({"a": 1}, {"a": 1, "b": 2}) == ["b"]  # an added key
    assert differ({"a": 1, "b": 2}, {"a": 1}) == ["b"]  # a missing key
    assert differ({"a": {"b": 1}}, {"a": None}) == ["a"]  # a mapping against null: named as a whole
    assert differ({"k": [1]}, {"k": None}) == ["k"]  # a list against null
    assert differ({"k": [1, 2]}, {"k": [1, 3]}) == ["k"]  # a list of plain values: as a whole
    assert differ({2: 1, "a": 1}, {2: 0, "a": 0}) == ["2", "a"]  # keys of any type, in the order of their text
    many = [{"v": i} for i in range(12)]
    assert differ(many, [{"v": -1} if i in (2, 10) else x for i, x in enumerate(many)], "p") == ["p.10.v", "p.2.v"]


def test_differ_compares_lists_of_mappings_by_key_else_by_position():
    a, b = {"name": "a", "v": 1}, {"name": "b", "v": 1}
    assert differ([a, b], [{"name": "b", "v": 2}, a], "reqs") == ["reqs.b.v"]  # keyed: order does not matter
    assert differ([a, b], [a], "reqs") == ["reqs.b"]  # a missing item is named by its key
    twice = [a, {"name": "a", "v": 2}]  # a name repeats: not keyed, compared by position
    assert differ([a, b], twice, "reqs") == ["reqs.1.name", "reqs.1.v"]
    assert differ(twice, [a, b], "reqs") == ["reqs.1.name", "reqs.1.v"]
    assert differ([{"v": 1}], [{"v": 2}], "p") == ["p.0.v"]  # no key at all: by position
    assert differ([{"v": 1}], [{"v": 1}, {"v": 2}], "p") == ["p"]  # ... unless the lengths differ: as a whole


# --- check_lock -----------------------------------------------------------------------------------------------
def test_check_lock_names_the_edited_fields(lock, lm):
    assert check_lock(lock, "x.lock") == []  # the matrix loaded when none is given
    edited = _edit(lock, edits=(_sha, _glibc, _devices, _index, _drop_nnal))
    assert check_lock(edited, "x.lock", lm) == [
        "artifacts.cann-nnal",
        "artifacts.cann-toolkit.zip.sha256",
        "platform.davinci_devices",
        "platform.glibc",
        "python.indexes.pypi",
    ]
    # what the matrix does not derive is not compared
    doc = lock.model_dump(mode="json")
    doc.update(matrix_digest=OTHER, generated_by="envkit by hand", hints=["x"], envkit_version="9.9.9")
    doc["provenance"]["cann"]["source"] = "elsewhere"
    assert check_lock(Lock.model_validate(doc), "x.lock", lm) == []


def test_check_lock_of_a_stack_the_matrix_does_not_give(lock, lm):
    assert check_lock(_edit(lock, stack={"torch_npu": "2.1.0"}), "x.lock", lm) == ["stack"]
    with pytest.raises(BadInput) as exc:
        check_lock(_edit(lock, stack={"cann": "9.9.9"}), "x.lock", lm)
    assert exc.value.message == "unknown CANN release '9.9.9' for 'cann'"
    assert (exc.value.where.file, exc.value.where.key) == ("x.lock stack.cann", "cann")


# --- gate -----------------------------------------------------------------------------------------------------
def test_gate_findings(lock, lm):
    other = _other_matrix_note(lm)
    assert gate(lock, "x.lock") is None
    assert gate(_edit(lock, digest=OTHER), "x.lock") is None  # another matrix alone: nothing derivable differs
    edited = _edit(lock, edits=(_sha, _glibc))
    assert gate(edited, "x.lock") == Edited(("artifacts.cann-toolkit.zip.sha256", "platform.glibc"), "")
    assert gate(_edit(lock, digest=OTHER, edits=(_sha,)), "x.lock") == Edited(("artifacts.cann-toolkit.zip.sha256",), other)
    invalid = {"torch_npu": "2.1.0"}
    assert gate(_edit(lock, stack=invalid), "x.lock") == Edited(("stack",), STACK_INVALID)
    assert gate(_edit(lock, stack=invalid, digest=OTHER), "x.lock") == Edited(("stack",), f"{STACK_INVALID}; {other}")
    unknown = "its stack is not one this matrix knows: unknown CANN release '9.9.9' for 'cann'"
    assert gate(_edit(lock, stack={"cann": "9.9.9"}), "x.lock") == Edited(("stack",), unknown)
    assert gate(_edit(lock, stack={"cann": "9.9.9"}, digest=OTHER), "x.lock") == Edited(("stack",), f"{unknown}; {other}")


def test_the_gate_refuses_an_edited_lock_unless_accepted(lock, tmp_path, run_cli):
    path = tmp_path / "envkit.lock"
    path.write_text(dump_lock(_edit(lock, edits=(_sha, _glibc))), encoding="utf-8")
    what = (
        f"{path} was edited: artifacts.cann-toolkit.zip.sha256, platform.glibc differ from what the matrix derives for its stack"
    )
    res = run_cli("image", "run-args", "--lock", str(path))
    assert (res.code, res.out) == (2, "")
    assert res.err.splitlines() == [
        f"error: {what}",
        f"  where: {path}, key 'artifacts.cann-toolkit.zip.sha256'",
        f"  next: Re-lock with `{MADE_BY}` (or pass --accept-edited-lock if you edited it on purpose).",
    ]
    res = run_cli("--accept-edited-lock", "image", "run-args", "--lock", str(path))
    assert res.code == 0 and "--device /dev/davinci0" in res.out
    assert res.err.splitlines() == [f"warning: {what} (accepted: --accept-edited-lock)"]


# --- validate_file --------------------------------------------------------------------------------------------
def _conflict(path: Path, section: str, fact: str) -> dict:
    rule = f"lock/{section}"
    return {
        "summary": f"the lock's {section} section differs from what the matrix gives for its stack",
        "pins": [],
        "chain": [
            {
                "fact": f"{fact}: edited, or from another matrix",
                "rule": rule,
                "source": str(path),
                "kind": "observed",
                "confidence": None,
            },
            {"fact": f"regenerate with `{MADE_BY}`", "rule": rule, "source": "derived", "kind": "derived", "confidence": None},
        ],
    }


def _write(path: Path, lock: Lock) -> Path:
    path.write_text(dump_lock(lock), encoding="utf-8")
    return path


def test_validate_a_lock_as_made_and_as_edited(lock, lm, tmp_path, run_cli):
    stack = lock.stack.model_dump(mode="json")
    path = _write(tmp_path / "envkit.lock", lock)
    assert validate_file(path).model_dump(mode="json") == {
        "schema_version": 1,
        "valid": True,
        "input": stack,
        "stack": stack,
        "conflicts": [],
        "suggestions": [],
        "hints": [],
    }
    path = _write(tmp_path / "edited.lock", _edit(lock, digest=OTHER, edits=(_sha, _drop_nnal, _glibc, _devices, _index)))
    report = validate_file(path).model_dump(mode="json")
    assert report == {
        "schema_version": 1,
        "valid": False,
        "input": stack,
        "stack": stack,
        "conflicts": [
            _conflict(path, "artifacts", "artifact fields cann-nnal: (all), cann-toolkit: zip.sha256"),
            _conflict(path, "platform", "platform fields davinci_devices, glibc"),
            _conflict(path, "python", "python fields indexes.pypi"),
        ],
        "suggestions": [],
        "hints": [
            f"the lock was made from another matrix (sha256:0123456789ab…, this envkit has {lm.digest[:19]}…): "
            "re-run the command in its header to refresh it"
        ],
    }
    res = run_cli("validate", str(path), "--json")
    assert res.code == 1 and json.loads(res.out) == report
    res = run_cli("validate", str(path))
    assert res.code == 1
    lines = res.out.splitlines()
    assert lines[0] == f"{path}: invalid (3 conflicts)"
    assert "conflict 2: the lock's platform section differs from what the matrix gives for its stack" in lines
    assert "   1. [observed] platform fields davinci_devices, glibc: edited, or from another matrix" in lines
    assert f"                 at {path}" in lines
    assert not any("relax more pins" in line for line in lines)  # the stack is valid: only its sections were edited


def test_validate_a_lock_whose_stack_is_not_valid_or_not_known(lock, tmp_path):
    path = _write(tmp_path / "envkit.lock", _edit(lock, stack={"torch_npu": "2.1.0"}))
    report = validate_file(path)
    assert report.valid is False and report.stack is None
    assert [c.pins for c in report.conflicts][:1] == [["torch_npu", "driver"]]
    assert [f.source for f in report.conflicts[0].chain if f.kind == "declared"] == [
        f"{path} stack.driver",
        f"{path} stack.torch_npu",
    ]
    path = _write(tmp_path / "unknown.lock", _edit(lock, stack={"cann": "9.9.9"}))
    with pytest.raises(BadInput) as exc:
        validate_file(path)
    assert exc.value.message == "unknown CANN release '9.9.9' for 'cann'"
    assert (exc.value.where.file, exc.value.where.key) == (f"{path} stack.cann", "cann")


def test_validate_a_lock_the_schema_refuses_names_file_and_line(lock, tmp_path):
    path = tmp_path / "envkit.lock"
    text = dump_lock(lock)
    path.write_text(text.replace("  glibc: '2.35'\n", "  glibc: '2.35'\n  extra: 1\n"), encoding="utf-8")
    line = text.splitlines().index("  glibc: '2.35'") + 2
    with pytest.raises(BadInput) as exc:
        validate_file(path)
    assert exc.value.message.startswith(f"{path} is not a valid lock: platform.extra: ")
    assert (exc.value.where.file, exc.value.where.line, exc.value.where.key) == (str(path), line, "platform.extra")
    assert exc.value.exit_code == 2


def test_validate_a_stack_file(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text("chip: 910b\narch: aarch64\ncann: 8.5.0\npython: 3.10\n", encoding="utf-8")
    report = validate_file(path)
    assert report.valid is True and report.conflicts == []
    assert report.input == {"chip": "910b", "arch": "aarch64", "cann": "8.5.0", "python": "3.10"}  # 3.10 stays text
    # a `stack:` key without `schema_version` is not a lock: a stack file with an unknown key
    path.write_text("chip: 910b\nstack:\n  cann: 8.5.0\n", encoding="utf-8")
    with pytest.raises(BadInput) as exc:
        validate_file(path)
    assert exc.value.message == f"unknown key 'stack' in {path}"
    assert (exc.value.where.file, exc.value.where.line, exc.value.where.key) == (str(path), 2, "stack")


@pytest.mark.parametrize("value", ["2024-13-45", "2024-01-02", "yes", "0x10"])
def test_validate_reads_a_stack_file_as_resolve_does(tmp_path, run_cli, value):
    """A value YAML would type (a date, even an impossible one, a boolean, a hex number) is judged as written, with
    the same message as `resolve -f`."""
    path = tmp_path / "stack.yaml"
    path.write_text(f"chip: 910b\ncann: {value}\n", encoding="utf-8")
    with pytest.raises(BadInput) as exc:
        validate_file(path)
    assert (exc.value.where.file, exc.value.where.line, exc.value.where.key) == (str(path), 2, "cann")
    validate = run_cli("validate", str(path), "--json")
    resolve = run_cli("resolve", "-f", str(path), "--json")
    assert (validate.code, resolve.code) == (2, 2)
    assert json.loads(validate.out)["error"] == json.loads(resolve.out)["error"]
    assert json.loads(validate.out)["error"]["message"] in (
        f"unknown CANN release '{value}' for 'cann'",
        f"'{value}' is not a version (key 'cann')",
    )


def test_a_lock_is_read_with_typed_scalars_and_its_errors_name_the_file(tmp_path):
    """A lock (schema_version and stack) is parsed again with YAML's types: an impossible date there is an error
    that names the file, line and key (a stack file keeps such a value as text, above)."""
    path = tmp_path / "envkit.lock"
    path.write_text("schema_version: 1\nstack:\n  cann: 2024-13-45\n", encoding="utf-8")
    with pytest.raises(BadInput) as exc:
        validate_file(path)
    assert exc.value.message == f"{path}: not a valid timestamp: month must be in 1..12"
    assert (exc.value.where.file, exc.value.where.line, exc.value.where.key) == (str(path), 3, "stack.cann")

"""envkit/core/validation.py's fast path (`_valid_lock`), pinned for `make mutation MODULES=lockgate`: `envkit validate`
of a lock that holds gives its report without pydantic, and hands everything else to the pydantic path
(`_validate_text`), whose verdict then stands. Every output is the same either way (tests/core/test_lockread.py),
so these tests call the fast path itself: what it takes, and what it leaves to the other path."""

from __future__ import annotations

import pytest

from envkit.core.validation import _valid_lock, _validate_text, judge_file
from envkit.errors import BadInput
from envkit.lock.text import plain


def test_a_lock_that_holds_is_judged_on_the_fast_path_with_the_slow_path_s_report(default_lock_text, tmp_path):
    path = tmp_path / "envkit.lock"
    path.write_text(default_lock_text)
    fast = _valid_lock(default_lock_text, str(path))
    assert fast is not None
    assert plain(fast) == plain(_validate_text(default_lock_text, path))
    assert judge_file(path) == fast


@pytest.mark.parametrize(
    "text",
    [
        "stack",  # a YAML string that names the keys
        "schema_version stack",
        "- schema_version\n- stack\n",
        "stack: {}\n",  # a stack file has no schema_version
        "schema_version: 3\n",
        "{not yaml",
    ],
)
def test_what_is_not_a_lock_goes_to_the_slow_path(text):
    assert _valid_lock(text, "x.lock") is None


def test_a_key_given_twice_goes_to_the_slow_path_which_refuses_it(default_lock_text, tmp_path):
    """The C loader keeps the last of two equal keys; the line-tracking loader refuses them. The fast path loads
    as written (a repeated key raises), so such a lock is never reported valid."""
    assert "\nschema_version: 3\n" in default_lock_text
    twice = default_lock_text + "schema_version: 3\n"
    assert _valid_lock(twice, "x.lock") is None
    path = tmp_path / "twice.lock"
    path.write_text(twice)
    with pytest.raises(BadInput) as refused:
        judge_file(path)
    assert refused.value.where is not None and refused.value.where.line == twice.count("\n")


def _other_matrix(text: str) -> str:
    digest = next(line for line in text.splitlines() if line.startswith("matrix_digest: sha256:"))
    return text.replace(digest, "matrix_digest: sha256:" + "0" * 64)


@pytest.mark.parametrize(
    "change",
    [
        _other_matrix,  # said with a hint on the other path
        lambda text: text.replace("\n  torch_npu_cann: true\n", "\n  torch_npu_cann: false\n"),  # a derived value edited
        lambda text: text.replace("\n  torch_npu: 2.12.0\n", "\n  torch_npu: 99.0.0\n"),  # a version the matrix lacks
    ],
    ids=["another matrix", "an edit", "an unknown version"],
)
def test_another_matrix_an_edit_or_an_unknown_version_goes_to_the_slow_path(default_lock_text, change):
    changed = change(default_lock_text)
    assert changed != default_lock_text and _valid_lock(default_lock_text, "x.lock") is not None
    assert _valid_lock(changed, "x.lock") is None


def test_the_fast_path_solves_the_stack_once(default_lock_text, monkeypatch):
    """The lock gate compares with what the matrix derives from the resolution the fast path already made: the
    stack is not solved again (the memory of derived locks emptied, so nothing is taken from an earlier test)."""
    from envkit.core import derive as locking

    monkeypatch.setattr(locking, "_DERIVED", {})

    def solved_again(*args, **kwargs):
        raise AssertionError("the stack was solved again")

    monkeypatch.setattr(locking, "derive_lock", solved_again)
    assert _valid_lock(default_lock_text, "x.lock") is not None

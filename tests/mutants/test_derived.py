"""envkit/core/derive.py's memory of what the matrix derives (`_derived`, behind `check_lock`), pinned for `make mutation
MODULES=lockgate`: a miss derives the lock (from the caller's resolution where it gives one, without solving
again), keeps only the compared part, keeps "not derivable" as such, and forgets the oldest entry past its bound."""

from __future__ import annotations

import pytest
import yaml

from envkit.core import derive as locking
from envkit.core.derive import NOT_DERIVED, check_lock, derive, lock_pins, without
from envkit.core.matrix import load_matrix
from envkit.core.resolve import valid_resolution
from envkit.lock.read import read_lock_records
from envkit.lock.text import plain


@pytest.fixture(scope="module")
def lock(default_lock_text):
    read = read_lock_records(yaml.safe_load(default_lock_text))
    assert read is not None
    return read


@pytest.fixture
def memory(monkeypatch):
    """An empty memory for the test (the module's own outlives tests: a hit would hide the derivation)."""
    monkeypatch.setattr(locking, "_DERIVED", {})
    return locking._DERIVED


def _key(lm, lock):
    return (lm.digest, tuple(sorted(plain(lock.stack).items())))


def test_a_miss_derives_the_lock_and_keeps_the_compared_part(lock, memory):
    lm = load_matrix()
    res = valid_resolution(lm, lock_pins(lm, lock, "x.lock"))
    assert res is not None
    assert check_lock(lock, "x.lock", lm) == []
    assert list(memory) == [_key(lm, lock)]
    assert memory[_key(lm, lock)] == without(plain(derive(lm, res, lock.generated_by)), NOT_DERIVED)


def test_the_caller_s_resolution_is_used_as_it_is_not_solved_again(lock, memory, monkeypatch):
    lm = load_matrix()
    res = valid_resolution(lm, lock_pins(lm, lock, "x.lock"))
    want = without(plain(derive(lm, res, lock.generated_by)), NOT_DERIVED)

    def no_solving(*args, **kwargs):
        raise AssertionError("solved again")

    monkeypatch.setattr(locking, "derive_lock", no_solving)
    assert check_lock(lock, "x.lock", lm, res) == []
    assert memory[_key(lm, lock)] == want


def test_a_stack_the_matrix_does_not_derive_is_remembered_as_such(lock, memory, monkeypatch):
    lm = load_matrix()
    monkeypatch.setattr(locking, "derive_lock", lambda *args: None)
    assert check_lock(lock, "x.lock", lm) == ["stack"]
    assert memory == {_key(lm, lock): None}
    monkeypatch.setattr(locking, "derive_lock", lambda *args: pytest.fail("derived again"))
    assert check_lock(lock, "x.lock", lm) == ["stack"]  # a hit


def test_past_its_bound_the_memory_forgets_its_oldest_entry(lock, memory, monkeypatch):
    lm = load_matrix()
    monkeypatch.setattr(locking, "_DERIVED_MAX", 2)
    memory[("old", ())] = {}
    memory[("newer", ())] = {}
    assert check_lock(lock, "x.lock", lm) == []
    assert list(memory) == [("newer", ()), _key(lm, lock)]

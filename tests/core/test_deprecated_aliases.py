"""The deprecated module paths (kept for one release): `envkit.lockfile` is envkit.lock.file and `envkit.locking`
envkit.core.derive, each import saying so with a DeprecationWarning; the finder costs nothing on other imports."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import envkit

MOVED = {"envkit.lockfile": "envkit.lock.file", "envkit.locking": "envkit.core.derive"}


@pytest.fixture
def fresh():
    """The deprecated names imported anew (and forgotten again after the test)."""

    def forget() -> None:
        for old in MOVED:
            sys.modules.pop(old, None)
            envkit.__dict__.pop(old.rsplit(".", 1)[1], None)

    forget()
    yield
    forget()


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_the_old_path_gives_the_new_module_with_a_warning(old, new, fresh):
    real = importlib.import_module(new)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new}"):
        mod = importlib.import_module(old)
    assert mod is real and sys.modules[old] is real
    assert real.__name__ == new and real.__spec__.name == new  # the new module is untouched


def test_the_import_forms_of_a_library_caller(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import envkit.lockfile
        from envkit.lockfile import read_lock
        from envkit.locking import matrix_check

    from envkit.core.derive import matrix_check as new_check
    from envkit.lock.file import read_lock as new_read

    assert read_lock is new_read and matrix_check is new_check and envkit.lockfile.read_lock is new_read
    moved = [w for w in caught if "is deprecated: import envkit." in str(w.message)]
    assert [str(w.message) for w in moved] == [
        "envkit.lockfile is deprecated: import envkit.lock.file",
        "envkit.locking is deprecated: import envkit.core.derive",
    ]
    assert all(w.category is DeprecationWarning and w.filename == __file__ for w in moved)  # pointing at the caller


def test_other_names_are_not_found_and_importing_envkit_loads_nothing_more():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("envkit.no_such_module")
    code = "import sys; before = set(sys.modules); import envkit; print(sorted(set(sys.modules) - before))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "['envkit']", p.stdout + p.stderr

"""The tests written against the survivors of `make mutation`, one file per mutated module (tests/mutants/test_<group
or module>.py); tools/mutation.py runs each group's file with the module's own tests. The fixtures they share with
the folders of those tests are imported here."""

from tests.core.conftest import default_lock_text, lm  # noqa: F401

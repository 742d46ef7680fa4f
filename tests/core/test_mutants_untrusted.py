"""envkit/untrusted.py, pinned where `make mutation MODULES=inputs` found its mutants alive: the place, words and
hint of each refusal (a relative path is named joined to its root), and the reason an OS error gives."""

from __future__ import annotations

import pytest

from envkit import untrusted as U
from envkit.errors import BadInput, Where

SMALL = U.Kind("a test file", 100)


def refusal(fn, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        fn(*args, **kwargs)
    return info.value


def test_text_that_is_no_utf8_is_named_inside_its_root(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"ok\xff")
    e = refusal(U.read_text, "a.txt", SMALL, root=tmp_path)
    shown = tmp_path / "a.txt"
    assert (e.message, e.where, e.hint) == (f"{shown} is not UTF-8 text (byte 2)", Where(file=str(shown)), "Save it as UTF-8.")


def test_a_bom_is_dropped(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfhi")
    assert U.read_text(tmp_path / "a.txt", SMALL) == "hi"


def test_a_missing_file_is_named_as_given(tmp_path):
    e = refusal(U.read_bytes, tmp_path / "none", SMALL)
    assert (e.message, e.where, e.hint) == (
        f"{tmp_path / 'none'} does not exist",
        Where(file=str(tmp_path / "none")),
        "Check the path.",
    )


def test_the_reason_of_an_error():
    assert U._reason(OSError(13, "Permission denied")) == "Permission denied"
    assert U._reason(OSError("no errno")) == "no errno"
    assert U._reason(RuntimeError("Symlink loop from '/x'")) == "Symlink loop from '/x'"
    assert U._reason(RuntimeError()) == "RuntimeError"
    assert U._reason(OSError()) == "OSError"

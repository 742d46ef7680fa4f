"""envkit/io/untrusted.py, pinned where `make mutation MODULES=inputs` found its mutants alive: the place, words and
hint of each refusal (a relative path is named joined to its root), and the reason an OS error gives."""

from __future__ import annotations

import pytest

from envkit.errors import BadInput, Where
from envkit.io import untrusted as U

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


HINT = "Give the path of a regular file (a copy, not a FIFO, device or folder)."


def said(e: BadInput) -> tuple:
    return e.message, e.hint, e.where


def test_a_root_that_cannot_be_read_is_named(tmp_path):
    root = tmp_path / "gone"
    e = refusal(U.read_bytes, "a", SMALL, root=root)
    assert said(e) == (f"{root} cannot be read: No such file or directory", "Check the folder's path.", Where(file=str(root)))


def test_a_link_loop_is_named_with_its_reason(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    e = refusal(U.read_bytes, tmp_path / "a", SMALL)
    assert e.message.startswith(f"{tmp_path / 'a'} cannot be read: ") and len(e.message) > len(
        f"{tmp_path / 'a'} cannot be read: "
    )
    assert "None" not in e.message
    assert (e.hint, e.where) == ("Check the path and its links.", Where(file=str(tmp_path / "a")))


def test_a_link_out_of_the_root_is_named_where_it_was_given(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "x").write_text("x")
    (root / "l").symlink_to(tmp_path / "x")
    e = refusal(U.read_bytes, "l", SMALL, root=root)
    assert said(e) == (
        f"{root / 'l'} leads out of {root} (to {tmp_path / 'x'})",
        f"Only files inside {root} are read: copy the file into it instead of linking to it.",
        Where(file=str(root / "l")),
    )


def test_a_fifo_is_named_with_the_hint(tmp_path):
    import os

    os.mkfifo(tmp_path / "f")
    e = refusal(U.read_bytes, "f", SMALL, root=tmp_path)
    assert said(e) == (f"{tmp_path / 'f'} is a FIFO, not a regular file", HINT, Where(file=str(tmp_path / "f")))


def test_a_relative_path_without_a_root_is_named_as_given():
    e = refusal(U.read_bytes, "no-such-file-here", SMALL)
    assert e.message == "no-such-file-here does not exist" and e.where == Where(file="no-such-file-here")


def test_a_mode_of_no_known_kind_is_not_a_regular_file():
    assert U.not_regular(0) == "not a regular file"
    assert U.not_regular(0o100644) is None


def test_stat_open_fstat_and_read_failures_are_named(tmp_path, monkeypatch):
    import errno
    import os
    import stat as st

    f = tmp_path / "a"
    f.write_text("x")
    real_stat, real_open, real_fstat, real_read = os.stat, os.open, os.fstat, os.read
    where = Where(file=str(f))

    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (_ for _ in ()).throw(OSError(errno.EACCES, "Permission denied")))
    assert said(refusal(U.read_bytes, f, SMALL)) == (f"{f} cannot be read: Permission denied", HINT, where)
    monkeypatch.setattr(os, "stat", real_stat)

    monkeypatch.setattr(
        os, "open", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ELOOP, "Too many levels of symbolic links"))
    )
    assert said(refusal(U.read_bytes, f, SMALL)) == (f"{f} cannot be opened: Too many levels of symbolic links", HINT, where)
    monkeypatch.setattr(os, "open", real_open)

    closed: list[int] = []
    real_close = os.close
    monkeypatch.setattr(os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((st.S_IFIFO | 0o644,) + tuple(real_fstat(fd))[1:]))
    assert said(refusal(U.read_bytes, f, SMALL)) == (f"{f} is a FIFO, not a regular file", HINT, where)
    assert len(closed) == 1  # the descriptor of the swapped file is closed
    monkeypatch.setattr(os, "fstat", real_fstat)

    def failing_read(fd, n):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "read", failing_read)
    assert said(refusal(U.read_bytes, "a", SMALL, root=tmp_path)) == (
        f"{f} cannot be read: Input/output error",
        "Check the file.",
        where,
    )
    monkeypatch.setattr(os, "read", real_read)


def test_the_open_is_non_blocking_without_following_links_or_a_tty_and_closes_on_exec(tmp_path, monkeypatch):
    import os

    (tmp_path / "a").write_text("x")
    seen: list[int] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, flags, *a, **k: (seen.append(flags), real_open(p, flags, *a, **k))[1])
    assert U.read_bytes(tmp_path / "a", SMALL) == b"x"
    assert seen == [os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC]


def test_the_opened_file_is_checked_inside_the_root_by_its_descriptor(tmp_path, monkeypatch):
    import os

    (tmp_path / "a").write_text("x")
    real_readlink = os.readlink
    monkeypatch.setattr(os, "readlink", lambda p: "/elsewhere/a" if str(p).startswith("/proc/self/fd/") else real_readlink(p))
    e = refusal(U.read_bytes, "a", SMALL, root=tmp_path)
    assert said(e) == (
        f"{tmp_path / 'a'} leads out of {tmp_path} (to /elsewhere/a)",
        "Only files inside the folder are read.",
        Where(file=str(tmp_path / "a")),
    )

    def no_proc(p):
        raise OSError(2, "No such file or directory")

    monkeypatch.setattr(os, "readlink", no_proc)  # no /proc: the checks on the resolved name stand
    assert U.read_bytes("a", SMALL, root=tmp_path) == b"x"


def test_a_file_over_its_cap_is_refused_naming_it_with_the_kinds_hint(tmp_path):
    big = tmp_path / "big.conf"
    big.write_bytes(b"x" * 5)
    kind = U.Kind("a test file", 4)
    with pytest.raises(BadInput) as info:
        U.read_bytes(big, kind)
    e = info.value
    assert e.message == f"{big} is too large for a test file (over 4 bytes)"
    assert e.hint == "A test file is at most 4 bytes: is it the right file?"
    assert e.where == Where(file=str(big))
    assert U.read_bytes(big, U.Kind("a test file", 5)) == b"xxxxx"  # at the cap: read

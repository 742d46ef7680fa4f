"""The one atomic writer: devices and pipes are written in place, never replaced by a rename."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from envkit.fsutil import atomic_dir, atomic_stream, atomic_write_bytes


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_bytes(fifo, b"lock text\n")
    reader.join(timeout=10)
    assert got == [b"lock text\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file left beside it


def test_output_to_dev_null_keeps_dev_null_a_device(run_cli):
    r = run_cli("resolve", "-o", "/dev/null")
    assert r.code == 0, r.err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_failed_stream_leaves_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "bundle.tar"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_stream(out) as fh:
            fh.write(b"half")
            raise RuntimeError("killed")
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar"]
    with atomic_stream(out, 0o640) as fh:
        fh.write(b"new")
    assert out.read_bytes() == b"new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar"]


def test_a_folder_is_swapped_in_whole_or_not_at_all(tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "new.txt").write_text("half")
            raise RuntimeError("killed")
    assert [p.name for p in out.iterdir()] == ["old.txt"] and [p.name for p in tmp_path.iterdir()] == ["bundle"]
    with atomic_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new.txt"] and [p.name for p in tmp_path.iterdir()] == ["bundle"]

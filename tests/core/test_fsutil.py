"""The one atomic writer: devices and pipes are written in place, never replaced by a rename."""

from __future__ import annotations

import os
import stat
import threading

from envkit.fsutil import atomic_write_bytes


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

"""A FIFO where the probe reads a host's file (the driver's version.info, the recorded verdict.json, hccn.conf): the
probe reads it as a file that is not there to read (an error it reports), never waits for a writer that never comes
(a plain open() of a FIFO blocks, and `envkit provision` with it); a regular file is read as before."""

from __future__ import annotations

import json
import os
import threading

from tests.provision.conftest import load_probe

P = load_probe()
LOCK_SHA1 = "a" * 40


def _returns(fn, *args):
    """fn(*args) in a daemon thread: (True, its result) when it returned within 20 s, (False, None) when it hung."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    t.join(20)
    return (not t.is_alive(), out[0] if out else None)


def test_a_fifo_is_reported_not_waited_on(tmp_path):
    fifo = tmp_path / "version.info"
    os.mkfifo(fifo)
    done, got = _returns(P._read, str(fifo))
    assert done, "the probe waited on a FIFO"
    assert got["exists"] is True and got["content"] == "" and "not a regular file" in got["error"]
    done, st = _returns(P._stat, str(fifo))
    assert done and st["exists"] and not st["isreg"] and "checksum" not in st
    regular = tmp_path / "real.info"
    regular.write_text("Version=7.5.0.1.129\n")
    assert P._read(str(regular)) == {"exists": True, "content": "Version=7.5.0.1.129\n"}


def test_a_fifo_as_the_recorded_verdict_makes_the_smoke_stale_without_hanging(tmp_path):
    (tmp_path / "envkit.lock").write_text("lock")
    (tmp_path / "doctor.json").write_text("{}")
    (tmp_path / "smoke.json").write_text("{}")
    os.mkfifo(tmp_path / "verdict.json")
    e = {"enabled": True, "rerun": "changed", "remote_dir": str(tmp_path), "lock_sha1": LOCK_SHA1}
    done, got = _returns(P.smoke_decide, e)
    assert done, "smoke_decide waited on a FIFO verdict.json"
    stale, verdict = got
    assert stale is True and verdict["smoke"] == "not run (unchanged)"
    os.unlink(tmp_path / "verdict.json")
    (tmp_path / "verdict.json").write_text(json.dumps({"smoke": "ok: npu", "lock_sha1": LOCK_SHA1}))
    assert P.smoke_decide(e)[1]["smoke"] == "ok: npu (unchanged)"


def test_a_fifo_as_hccn_conf_gives_no_address_without_hanging(tmp_path):
    tool = tmp_path / "hccn_tool"
    tool.write_text("#!/bin/sh\necho 'link status: UP'\n")
    tool.chmod(0o755)
    os.mkfifo(tmp_path / "hccn.conf")
    done, got = _returns(P.hccn_state, str(tool), str(tmp_path / "hccn.conf"), [], 5)
    assert done, "hccn_state waited on a FIFO hccn.conf"
    assert isinstance(got, dict)

"""Running hccl_test and ascend-dmi --bw where the host has them: fake tools printing the recorded samples."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from envkit.executor import collectives as C

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "collectives"


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _host(tmp_path: Path, test_body: str, dmi_body: str, *, mpirun: bool = True) -> dict:
    """bin/ with all_reduce_test, path/ with mpirun (it records its argv and environment) and ascend-dmi."""
    bindir = tmp_path / "hccl_test" / "bin"
    _script(bindir / "all_reduce_test", test_body)
    if mpirun:
        _script(
            tmp_path / "path" / "mpirun",
            f'printf "%s " "$@" > {tmp_path}/mpirun.args\necho "$VENDOR_MARK" > {tmp_path}/mpirun.env\nshift 2\nexec "$@"',
        )
    _script(tmp_path / "path" / "ascend-dmi", dmi_body)
    return {"bin_dirs": [bindir], "dmi_paths": (), "search_path": str(tmp_path / "path")}


def test_recorded_outputs_are_run_and_parsed(tmp_path, monkeypatch):
    monkeypatch.setenv("VENDOR_MARK", "caller-env")
    host = _host(tmp_path, f"cat {FIX / 'hccl_test_all_reduce.txt'}", f"cat {FIX / 'ascend_dmi_bw_h2d.json'}")
    tools = C.vendor_tools("npu", 8, **host)["tools"]
    assert set(tools) == {"all_reduce_test", "ascend-dmi"}  # the other tests are absent: not listed
    ar = tools["all_reduce_test"]
    binary = str(tmp_path / "hccl_test" / "bin" / "all_reduce_test")
    assert ar["path"] == binary and ar["returncode"] == 0 and ar["error"] is None
    assert ar["argv"] == [
        str(tmp_path / "path" / "mpirun"),
        "-n",
        "8",
        binary,
        "-b",
        "8K",
        "-e",
        "64M",
        "-f",
        "2",
        "-d",
        "fp32",
        "-o",
        "sum",
        "-p",
        "8",
    ]
    assert (tmp_path / "mpirun.args").read_text().split() == ar["argv"][1:]
    assert (tmp_path / "mpirun.env").read_text().strip() == "caller-env"
    assert [r["size"] for r in ar["rows"]] == [8192, 16384, 32768, 65536, 1048576, 67108864]
    assert ar["rows"][-1] == {"size": 67108864, "avg_time_us": 1421.90, "alg_bandwidth_gbps": 47.19661, "check_result": "success"}
    dmi = tools["ascend-dmi"]
    assert dmi["argv"] == [str(tmp_path / "path" / "ascend-dmi"), "--bw", "-t", "h2d", "--fmt", "json"]
    assert dmi["error"] is None and [r["bandwidth_gbps"] for r in dmi["rows"]] == [21.35, 24.10, 24.52]
    lines = C.format_table({"backend": "hccl", "world": 8, "results": [], "vendor_tools": {"tools": tools}})
    assert "all_reduce_test: 6 sizes, ok" in lines


def test_argv_without_reduce_op_for_gather():
    argv = C.hccl_test_argv("mpirun", Path("/x/bin/all_gather_test"), 4)
    assert argv == ["mpirun", "-n", "4", "/x/bin/all_gather_test", "-b", "8K", "-e", "64M", "-f", "2", "-d", "fp32", "-p", "4"]


def test_failed_and_garbled_outputs_are_findings(tmp_path):
    host = _host(tmp_path, f"cat {FIX / 'hccl_test_failed.txt'}", f"cat {FIX / 'ascend_dmi_error.json'}")
    tools = C.vendor_tools("npu", 2, **host)["tools"]
    assert tools["all_reduce_test"]["error"] == "check_result is not success on every size"
    assert len(tools["all_reduce_test"]["rows"]) == 3
    assert tools["ascend-dmi"]["error"] == "ascend-dmi error 2: internal error"

    host = _host(tmp_path / "g", "echo 'garbage |||'; echo boom >&2; exit 3", "echo '{not json'")
    tools = C.vendor_tools("npu", 2, **host)["tools"]
    assert tools["all_reduce_test"]["returncode"] == 3 and tools["all_reduce_test"]["error"] == "exited 3: boom"
    assert tools["ascend-dmi"]["returncode"] == 0 and tools["ascend-dmi"]["error"].startswith("not JSON")

    host = _host(tmp_path / "h", "echo 'nothing like a table'", "echo '{}'")
    tools = C.vendor_tools("npu", 2, **host)["tools"]
    assert tools["all_reduce_test"]["error"] == "no result table in its output (1 lines)"
    assert tools["ascend-dmi"]["error"] == "no size / bandwidth values found"


def test_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    host = _host(tmp_path, f"sleep 30 & echo $! > {pidfile}\nsleep 30", "sleep 30")
    t0 = time.monotonic()
    tools = C.vendor_tools("npu", 2, timeout_s=1, **host)["tools"]
    assert time.monotonic() - t0 < 10
    assert tools["all_reduce_test"]["error"] == "timed out after 1 s" and tools["all_reduce_test"]["rows"] == []
    assert tools["ascend-dmi"]["error"] == "timed out after 1 s"
    child = int(pidfile.read_text())
    for _ in range(40):  # the background child is gone (or a zombie awaiting its reaper)
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        raise AssertionError("the tool's child outlived the timeout")


def test_absent_tools_and_mpirun(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    tools = C.vendor_tools("npu", 2, bin_dirs=[empty], dmi_paths=(empty / "ascend-dmi",), search_path=str(empty))["tools"]
    assert tools == {
        "all_reduce_test": {"path": None, "skipped": f"not found in {empty}"},
        "ascend-dmi": {"path": None, "skipped": f"not found on PATH, {empty / 'ascend-dmi'}"},
    }
    host = _host(tmp_path, "exit 0", "exit 0", mpirun=False)
    tools = C.vendor_tools("npu", 2, **host)["tools"]
    assert tools["all_reduce_test"] == {
        "path": str(tmp_path / "hccl_test" / "bin" / "all_reduce_test"),
        "skipped": "mpirun not found",
    }


def test_only_on_npu_and_the_lookup_dirs(tmp_path):
    host = _host(tmp_path, "exit 0", "exit 0")
    for dev in ("cpu", "cuda"):
        assert C.vendor_tools(dev, 2, **host) == {
            "skipped": f"not looked for on {dev}: hccl_test and ascend-dmi are Ascend tools"
        }
    assert not (tmp_path / "mpirun.args").exists()
    assert C.hccl_test_dirs({"ASCEND_HOME_PATH": "/opt/cann"}) == [
        Path("/opt/cann/tools/hccl_test/bin"),
        Path("/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin"),
    ]
    assert C.hccl_test_dirs({}) == [Path("/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin")]

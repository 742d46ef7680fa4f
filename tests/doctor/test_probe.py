"""The probe: reads stay inside the root, subprocesses have timeouts, torch_npu is never imported."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from envkit.jobs.doctor.observe import Target, probe, run_command


def test_absolute_symlink_stays_inside_root(root_copy):
    root = root_copy("healthy-a2")
    link = root / "usr/local/Ascend/ascend-toolkit/latest"
    assert os.readlink(link) == "/usr/local/Ascend/cann-8.5.0"  # absolute, as in images
    t = Target(root)
    assert t.resolve("/usr/local/Ascend/ascend-toolkit/latest") == root / "usr/local/Ascend/cann-8.5.0"
    assert t.realpath("/usr/local/Ascend/ascend-toolkit/latest") == "/usr/local/Ascend/cann-8.5.0"


def test_escaping_symlinks_are_clamped(tmp_path: Path):
    root = tmp_path / "r"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=inside\n")
    (root / "a").symlink_to("../../../../etc")  # would leave the root
    (root / "b").symlink_to("/etc/passwd")  # the host's file, if followed naively
    t = Target(root)
    assert t.resolve("/a/os-release") == root / "etc/os-release"
    assert t.read("/b").error == "not found"  # <root>/etc/passwd does not exist
    (root / "loop").symlink_to("loop")
    assert t.read("/loop").error  # a symlink loop is an error, not a hang


def test_one_cann_for_two_names(root_copy):
    """ascend-toolkit/latest -> cann-8.5.0 is one install, reported with its 8.5 layout."""
    result = probe(str(root_copy("healthy-a2")))
    assert [(c.layout, c.resolved) for c in result.cann] == [("cann-versioned", "/usr/local/Ascend/cann-8.5.0")]
    assert result.cann[0].set_env == "/usr/local/Ascend/cann-8.5.0/set_env.sh"


def test_env_of_a_root_never_comes_from_this_process(root_copy, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", "/from/this/process")
    root = root_copy("image-910b-8.5")
    result = probe(str(root))
    assert not result.env_known and "ASCEND_HOME_PATH" not in result.env
    env_file = Path(__file__).resolve().parent.parent / "fixtures/roots/image-910b-8.5.env"
    result = probe(str(root), env_file=str(env_file))
    assert result.env_known and result.env["ASCEND_HOME_PATH"] == "/usr/local/Ascend/cann-8.5.0"


def _npu_smi_script(root: Path, body: str) -> Path:
    script = root / "usr/local/bin/npu-smi"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def test_npu_smi_of_a_root_is_read_from_its_recording_never_run(root_copy, tmp_path: Path):
    root = root_copy("healthy-a2")
    marker = tmp_path / "ran"
    _npu_smi_script(root, f"touch {marker}\n")
    result = probe(str(root))
    assert not marker.exists()
    assert result.npu_smi is not None and result.npu_smi.recorded == "/var/log/envkit/npu-smi/info.txt"
    assert result.npu_smi.ok and b"910B3" in result.npu_smi.stdout
    assert [b.recorded for b in result.boards] == [f"/var/log/envkit/npu-smi/board-{n}.txt" for n in (0, 1)]
    # without a recording the root has no npu-smi answer at all, and says where it looked
    (root / "var/log/envkit/npu-smi/info.txt").unlink()
    result = probe(str(root))
    assert result.npu_smi is None and not marker.exists()
    assert "/var/log/envkit/npu-smi/info.txt" in (result.npu_smi_skipped or "")


def test_recorded_exit_status(root_copy):
    root = root_copy("hazard-device-used")
    res = probe(str(root)).npu_smi
    assert res is not None and res.returncode == 255 and not res.ok
    (root / "var/log/envkit/npu-smi/info.rc").write_text("not a number\n")
    res = probe(str(root)).npu_smi
    assert res is not None and "unparsed exit status" in (res.error or "")


def test_exec_root_tools_runs_with_an_empty_environment(root_copy, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ENVKIT_SECRET", "leaked")
    root = root_copy("healthy-a2")
    seen = tmp_path / "env.txt"
    rec = root / "var/log/envkit/npu-smi"
    _npu_smi_script(root, f'env > {seen}\ncat "{rec}/info.txt"\n')
    result = probe(str(root), exec_root_tools=True)
    assert result.npu_smi is not None and result.npu_smi.recorded is None and result.npu_smi.ok
    assert result.npu_smi.argv[0] == str(root / "usr/local/bin/npu-smi")
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "ENVKIT_SECRET" not in env and "HOME" not in env  # only what sh sets itself
    assert set(env) <= {"PWD", "OLDPWD", "SHLVL", "_", "PATH"}


def test_exec_root_tools_skips_what_is_not_an_executable_file(root_copy):
    root = root_copy("healthy-a2")
    script = _npu_smi_script(root, "echo hi\n")
    script.chmod(0o644)
    result = probe(str(root), exec_root_tools=True)
    # falls back to the recording, and says why the tool was not run
    assert result.npu_smi is not None and result.npu_smi.recorded
    script.unlink()
    os.mkfifo(script)
    result = probe(str(root), exec_root_tools=True)
    assert result.npu_smi is not None and result.npu_smi.recorded


def test_npu_smi_timeout_kills_the_whole_group(root_copy):
    """A tool that leaves a child holding its output: the timeout still ends the run on time."""
    import time

    root = root_copy("healthy-a2")
    _npu_smi_script(root, "sleep 30 &\nsleep 30\n")
    start = time.monotonic()
    result = probe(str(root), timeout=1, exec_root_tools=True)
    assert time.monotonic() - start < 10
    assert result.npu_smi is not None and "timed out" in (result.npu_smi.error or "")


def test_run_command_caps_output():
    res = run_command([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], timeout=20)
    assert "more than" in (res.error or "") and len(res.stdout) == 1 << 20


def test_run_command_never_raises(tmp_path: Path):
    assert run_command([str(tmp_path / "missing")], timeout=5).error
    res = run_command([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"], timeout=5)
    assert (res.returncode, res.stdout.strip()) == (3, b"x")


def test_host_python_probe_reads_metadata_without_importing(tmp_path: Path):
    """A fake torch_npu whose import would crash: the probe must still read its version."""
    site = tmp_path / "site"
    pkg = site / "torch_npu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('torch_npu was imported')\n")
    dist = site / "torch_npu-2.6.0.post5.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.6.0.post5\nRequires-Dist: torch==2.6.0\n")
    (dist / "RECORD").write_text("")
    env = {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "")}
    from envkit.jobs.doctor.observe import _python_from_host

    res = _python_from_host(sys.executable, env, timeout=30)
    assert res.error is None, res.error
    assert res.data["packages"]["torch_npu"]["version"] == "2.6.0.post5"
    assert res.data["packages"]["torch_npu"]["requires"] == ["torch==2.6.0"]
    assert res.data["python"] == "{}.{}".format(*sys.version_info[:2])


def test_host_python_probe_failures(tmp_path: Path):
    from envkit.jobs.doctor.observe import _python_from_host

    slow = tmp_path / "slowpython"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    assert "timed out" in (_python_from_host(str(slow), {}, timeout=1).error or "")
    noisy = tmp_path / "noisypython"
    noisy.write_text("#!/bin/sh\necho not json\n")
    noisy.chmod(0o755)
    assert "no JSON" in (_python_from_host(str(noisy), {}, timeout=5).error or "")

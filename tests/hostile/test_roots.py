"""Hostile mounted roots through `envkit doctor --root`: a root is data, never code.

Each case breaks one file of a copy of the healthy A2 root the way a hostile image could (a FIFO
that would hang a reader, a device, a socket, a huge file, links out of the root, binary garbage,
an executable `npu-smi` or interpreter that would leave a marker file). The doctor must finish in
time without a traceback, exit 0 or 1 (a report, with warnings or failed checks), name the bad file
in a finding, never read a file outside the root and never run anything from it.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOTS = Path(__file__).resolve().parent.parent / "fixtures" / "roots"
SITE = "usr/local/python3.11.13/lib/python3.11/site-packages"
SECRET = "SECRET-OUTSIDE-THE-ROOT"


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _socket(path: Path) -> None:
    path.unlink()
    cwd = os.getcwd()
    os.chdir(path.parent)  # a relative bind: AF_UNIX paths are short
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()
    finally:
        os.chdir(cwd)


def _char_device(path: Path) -> None:
    path.unlink()
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # what /dev/zero is
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD (root)")


def _huge(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(4 << 30)  # 4 GiB, sparse


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)


def _outside(tmp: Path) -> Path:
    out = tmp / "outside"
    out.mkdir(exist_ok=True)
    (out / "version.info").write_text(f"Version=99.9.9\n# {SECRET}\n")
    return out / "version.info"


def _abs_link(path: Path) -> None:
    target = _outside(Path(os.environ["HOSTILE_TMP"]))
    path.unlink()
    path.symlink_to(target)


def _rel_link(path: Path) -> None:
    target = _outside(Path(os.environ["HOSTILE_TMP"]))
    path.unlink()
    path.symlink_to(os.path.relpath(target, path.parent))  # ../../../.. up and out of the root


DRIVER = "usr/local/Ascend/driver/version.info"
# case -> (file in the root, how it is broken, the check that reads it, how its finding starts)
CASES = {
    "fifo": (DRIVER, _fifo, "driver", "unreadable: /usr/local/Ascend/driver/version.info: not a regular file (a FIFO)"),
    "fifo-recorded-npu-smi": (
        "var/log/envkit/npu-smi/info.txt",
        _fifo,
        "npu-smi",
        "unreadable: /var/log/envkit/npu-smi/info.txt: not a regular file (a FIFO)",
    ),
    "fifo-metadata": (
        f"{SITE}/torch-2.6.0.dist-info/METADATA",
        _fifo,
        "python package",
        f"unreadable: /{SITE}/torch-2.6.0.dist-info/METADATA: not a regular file (a FIFO)",
    ),
    "socket": (
        "etc/environment",
        _socket,
        "set_env.sh not sourced",
        "environment unknown: /etc/environment in the root (unreadable: not a regular file (a socket)",
    ),
    "char-device": (
        "etc/os-release",
        _char_device,
        "os",
        "unreadable: /etc/os-release: not a regular file (a character device)",
    ),
    "huge": ("etc/os-release", _huge, "os", "unreadable: /etc/os-release: too large (over 1048576 bytes)"),
    "garbage": (
        "usr/local/Ascend/firmware/version.info",
        _garbage,
        "firmware",
        "unparsed: /usr/local/Ascend/firmware/version.info: binary data",
    ),
    "garbage-recorded-npu-smi": (
        "var/log/envkit/npu-smi/info.txt",
        _garbage,
        "npu-smi",
        "unparsed: /var/log/envkit/npu-smi/info.txt (recorded output of npu-smi info): binary data",
    ),
    # a link out of the root is followed inside it, where there is no such file
    "absolute-link-out": (DRIVER, _abs_link, "driver", "not in the image (/usr/local/Ascend/driver/version.info)"),
    "relative-link-out": (DRIVER, _rel_link, "driver", "not in the image (/usr/local/Ascend/driver/version.info)"),
}


@pytest.fixture
def hostile_root(tmp_path: Path, monkeypatch):
    """A copy of the healthy A2 root with an `npu-smi` and an interpreter that would leave a marker."""
    import shutil

    monkeypatch.setenv("HOSTILE_TMP", str(tmp_path))
    root = tmp_path / "root"
    shutil.copytree(ROOTS / "healthy-a2", root, symlinks=True)
    marker = tmp_path / "MARKER"
    for rel in ("usr/local/bin/npu-smi", "usr/local/python3.11.13/bin/python3"):
        tool = root / rel
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
        tool.chmod(0o755)
    return root, marker


def _findings(doc: dict, name: str) -> list[str]:
    return [c["detail"] for c in doc["checks"] if c["name"] == name]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_hostile_file(case, hostile_root, run_cli):
    root, marker = hostile_root
    rel, breaks, name, finding = CASES[case]
    breaks(root / rel)
    res = run_cli("doctor", "--root", str(root), "--python", "/usr/local/python3.11.13/bin/python3", "--json")
    assert res.code in (0, 1), res.err
    doc = json.loads(res.out)
    assert any(d.startswith(finding) for d in _findings(doc, name)), _findings(doc, name)
    assert not marker.exists(), marker.read_text()
    assert SECRET not in res.out and "99.9.9" not in res.out
    assert (doc["observed"]["driver"] or {}).get("value") != "99.9.9"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_everything_at_once_in_a_subprocess(fmt, hostile_root, tmp_path: Path):
    """All the cases in one root, through the real entry point: on time, no traceback, no marker."""
    root, marker = hostile_root
    done = set()
    for case, (rel, breaks, _name, _finding) in CASES.items():  # the FIFO on the driver first
        if rel in done or (root / rel).is_symlink():
            continue
        if case == "char-device" and os.geteuid() != 0:
            continue
        breaks(root / rel)
        done.add(rel)
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--root", str(root), "--python", "/usr/local/python3.11.13/bin/python3"] + fmt,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    assert SECRET not in proc.stdout
    out = proc.stdout
    for rel in done:
        assert "/" + rel in out, f"no finding names /{rel}"


@pytest.mark.timeout(60)
def test_exec_root_tools_is_the_only_way_to_run_the_roots_npu_smi(hostile_root, run_cli, monkeypatch):
    root, marker = hostile_root
    monkeypatch.setenv("ENVKIT_CALLER_SECRET", "x")
    res = run_cli("doctor", "--root", str(root), "--json")
    assert res.code in (0, 1) and not marker.exists()
    tool = root / "usr/local/bin/npu-smi"
    tool.write_text(f"#!/bin/sh\nenv > {marker}\nexit 3\n")
    res = run_cli("doctor", "--root", str(root), "--exec-root-tools", "--json")
    assert res.code in (0, 1)
    assert marker.exists() and "ENVKIT_CALLER_SECRET" not in marker.read_text()
    npu = _findings(json.loads(res.out), "npu-smi")
    assert npu and "exit 3" in npu[0]
    res = run_cli("doctor", "--exec-root-tools")
    assert res.code == 2 and "--exec-root-tools needs --root" in res.err

"""End to end with real PyPI downloads: lock a small real closure, build, install inside `unshare -n`.

The install runs with no network namespace, PIP_CONFIG_FILE=/dev/null and every PIP_* variable unset,
so no local mirror can hide a missing wheel (infra-feasibility §3). Negative controls: a removed
wheel, a tampered wheel, a tampered manifest: each fails with a clear message and installs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from envkit.closure import host_arch, host_python

pytestmark = [pytest.mark.network, pytest.mark.root, pytest.mark.slow]

ONLY = "pyyaml,decorator"  # a small real part of the lock: honest, recorded in the closure's roots


def _need_root_unshare() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for unshare -n")
    if not shutil.which("unshare"):
        pytest.skip("unshare is not installed")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is not permitted here")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    _need_root_unshare()
    import sys

    from envkit.closure import find_uv
    from envkit.errors import CannotRun

    try:
        find_uv()
    except CannotRun:
        pytest.skip("uv is not installed (tests/integration/setup/airgap.sh installs it)")

    tmp = tmp_path_factory.mktemp("offline")
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(tmp / "cache")}
    ek = [sys.executable, "-m", "envkit"]
    lock = tmp / "envkit.lock"
    root = Path(__file__).resolve().parents[2]

    def run(*args):
        r = subprocess.run([*ek, *args], capture_output=True, text=True, env=env, cwd=root)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    run("resolve", "--python", host_python(), "--arch", host_arch(), "-o", str(lock))
    run("lock", "--lock", str(lock), "--only", ONLY)
    run("bundle", "build", "--lock", str(lock), "-o", str(tmp / "bundle.tar"))
    return tmp


def _extract(built: Path, dest: Path) -> Path:
    with tarfile.open(built / "bundle.tar") as tf:
        tf.extractall(dest, filter="data")
    return dest / "bundle"


def _install(bundle: Path, venv: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    return subprocess.run(["unshare", "-n", "--", "sh", str(bundle / "install.sh"), str(venv)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_install_offline_and_envkit_runs(built, tmp_path):
    bundle = _extract(built, tmp_path)
    r = _install(bundle, tmp_path / "venv")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "next:" in r.stdout and "OK" in r.stdout
    r = subprocess.run(["unshare", "-n", "--", str(tmp_path / "venv" / "bin" / "envkit"), "bundle", "verify", str(bundle), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the target wheels install offline too (what provisioning does on each node)
    tv = tmp_path / "tvenv"
    subprocess.run(["python3", "-m", "venv", str(tv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": "/dev/null"}
    r = subprocess.run(["unshare", "-n", "--", str(tv / "bin" / "pip"), "install", "-q", "--no-index", "--no-deps", "--require-hashes",
                        "--find-links", str(bundle / "wheels" / "target"), "-r", str(bundle / "requirements" / "target.txt")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(tv / "bin" / "python"), "-c", "import yaml, decorator"]).returncode == 0


def _controller_wheel(bundle: Path, prefix: str) -> Path:
    return next((bundle / "wheels" / "controller").glob(f"{prefix}-*.whl"))


@pytest.mark.parametrize("damage", ["removed-wheel", "tampered-wheel", "tampered-manifest"])
def test_negative_controls_fail_clearly_and_install_nothing(built, tmp_path, damage):
    bundle = _extract(built, tmp_path)
    if damage == "removed-wheel":
        _controller_wheel(bundle, "jinja2").unlink()
        expect = "No matching distribution found for jinja2"
    elif damage == "tampered-wheel":
        w = _controller_wheel(bundle, "typer")
        data = bytearray(w.read_bytes())
        data[100] ^= 0xFF
        w.write_bytes(bytes(data))
        expect = "DO NOT MATCH THE HASHES"
    else:
        m = bundle / "manifest.json"
        text = m.read_text()
        import json

        doc = json.loads(text)
        f = next(x for x in doc["files"] if x["path"] == "envkit.lock")
        f["sha256"] = "0" * 64
        m.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        expect = "modified: envkit.lock"
    venv = tmp_path / "venv"
    r = _install(bundle, venv)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert expect in out, out
    assert "nothing was installed" in out
    assert not venv.exists()
    if damage != "removed-wheel":  # verify alone says so too (a removed wheel: `missing:`)
        pass
    r = subprocess.run([os.sys.executable, "-m", "envkit", "bundle", "verify", str(bundle)], capture_output=True, text=True)
    assert r.returncode == 1 and ("missing:" in r.stdout or "modified:" in r.stdout)

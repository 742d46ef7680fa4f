"""End to end with real PyPI downloads: lock a small real closure, build, install inside `unshare -n`.

Every install runs with no network namespace, PIP_CONFIG_FILE=/dev/null and every PIP_* variable unset,
so no local mirror can hide a missing wheel (infra-feasibility §3).

The bundle is built once per module (one lock, one download into one wheel cache) and installed once
with its own install.sh; the negative controls then each prove a distinct defence, as cheaply as it can be
proved (a virtualenv with pip costs ~10 s, an install of the controller wheels ~25 s):

- removed wheel:      `envkit bundle verify` names it `missing:`; and pip itself, isolated (no index, no
                      network, no config), finds no other source for it: nothing can hide an incomplete bundle.
- tampered wheel:     `envkit bundle verify` names it `modified:`; and with the manifest rewritten to match
                      (so verify passes), install.sh refuses it with `sha256sum -c SHA256SUMS` before any
                      virtualenv or pip, and says nothing was installed.
- tampered manifest:  `envkit bundle verify` names the file it misdescribes `modified:`; and install.sh with
                      the published ENVKIT_BUNDLE_DIGEST refuses it before creating anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envkit.artifacts.closure import host_arch, host_python

pytestmark = [pytest.mark.network, pytest.mark.root, pytest.mark.slow]

ONLY = "pyyaml,decorator"  # a small real part of the lock: honest, recorded in the closure's roots
ROOT = Path(__file__).resolve().parents[2]


def _need_root_unshare() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for unshare -n")
    if not shutil.which("unshare"):
        pytest.skip("unshare is not installed")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is not permitted here")


def _clean_env(**extra: str) -> dict[str, str]:
    """No PIP_* variable of this machine (a PIP_FIND_LINKS mirror would hide a missing wheel), no pip config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    return env | extra


def _offline(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", _clean_env())
    return subprocess.run(["unshare", "-n", "--", *cmd], capture_output=True, text=True, timeout=300, **kw)


def _pip_install(
    python: list[str], bundle: Path, role: str, *, target: Path | None = None, quiet: bool = True
) -> subprocess.CompletedProcess:
    """pip install of the bundle's `role` wheels with its pip rules (no index, no deps, hashes), offline."""
    return _offline(
        [
            *python,
            "-m",
            "pip",
            "install",
            *(["-q"] if quiet else []),
            "--no-index",
            "--no-deps",
            "--require-hashes",
            *(["--target", str(target)] if target is not None else []),
            "--find-links",
            str(bundle / "wheels" / role),
            "-r",
            str(bundle / "requirements" / f"{role}.txt"),
        ]
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """One real bundle, from one lock and one download of real PyPI wheels into one wheel cache."""
    _need_root_unshare()
    from envkit.artifacts.closure import find_uv
    from envkit.errors import CannotRun

    try:
        find_uv()
    except CannotRun:
        pytest.skip("uv is not installed (tests/integration/setup/airgap.sh installs it)")

    tmp = tmp_path_factory.mktemp("offline")
    env = {**_clean_env(), "ENVKIT_CACHE_DIR": str(tmp / "cache")}
    ek = [sys.executable, "-m", "envkit"]
    lock = tmp / "envkit.lock"

    def run(*args):
        r = subprocess.run([*ek, *args], capture_output=True, text=True, env=env, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    run("resolve", "--python", host_python(), "--arch", host_arch(), "-o", str(lock))
    run("lock", "--lock", str(lock), "--only", ONLY)
    run("bundle", "build", "--lock", str(lock), "-o", str(tmp / "bundle.tar"))
    return tmp


def _extract(built: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(built / "bundle.tar") as tf:
        tf.extractall(dest, filter="data")
    return dest / "bundle"


def _install(bundle: Path, venv: Path, **env: str) -> subprocess.CompletedProcess:
    return _offline(["sh", str(bundle / "install.sh"), str(venv)], env=_clean_env(**env))


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> tuple[Path, Path]:
    """The intact bundle, extracted and installed once with its install.sh, offline: (bundle, venv)."""
    tmp = tmp_path_factory.mktemp("installed")
    bundle = _extract(built, tmp)
    venv = tmp / "venv"
    r = _install(bundle, venv)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "next:" in r.stdout and "verified:" in r.stdout  # install.sh checked SHA256SUMS before pip ran
    return bundle, venv


def _verify(venv: Path, bundle: Path) -> subprocess.CompletedProcess:
    """`envkit bundle verify` run from the offline-installed virtualenv, offline."""
    return _offline([str(venv / "bin" / "envkit"), "bundle", "verify", str(bundle)])


def _controller_wheel(bundle: Path, prefix: str) -> Path:
    return next((bundle / "wheels" / "controller").glob(f"{prefix}-*.whl"))


def _tamper(wheel: Path) -> None:
    data = bytearray(wheel.read_bytes())
    data[100] ^= 0xFF
    wheel.unlink()
    wheel.write_bytes(bytes(data))


def _rewrite_manifest(bundle: Path, path: str, sha256: str | None, size: int | None = None) -> None:
    """Make manifest.json describe `path` as given (None: drop it), as a forger would."""
    m = bundle / "manifest.json"
    doc = json.loads(m.read_text())
    if sha256 is None:
        doc["files"] = [f for f in doc["files"] if f["path"] != path]
    else:
        f = next(x for x in doc["files"] if x["path"] == path)
        f["sha256"] = sha256
        if size is not None:
            f["size"] = size
    m.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _digest(bundle: Path) -> str:
    return hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()


def test_install_offline_and_envkit_runs(installed, tmp_path):
    bundle, venv = installed
    r = _verify(venv, bundle)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    # the target wheels install offline too (what provisioning does on each node), with the bundle's pip rules
    target = tmp_path / "target"
    r = _pip_install([str(venv / "bin" / "python")], bundle, "target", target=target)
    assert r.returncode == 0, r.stdout + r.stderr
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r}); import yaml, decorator; "
        f"assert yaml.__file__.startswith({str(target)!r}) and decorator.__file__.startswith({str(target)!r})"
    )
    r = _offline([str(venv / "bin" / "python"), "-c", code])
    assert r.returncode == 0, r.stdout + r.stderr
    # envkit and its runtime dependencies are in the target closure too (the smoke role runs envkit on each host)
    # the base interpreter without any site-packages: only the target folder can provide envkit and its deps
    r = _offline(
        [
            getattr(sys, "_base_executable", sys.executable),
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(target)!r}); "
            "import envkit, pydantic; from envkit.cli import main; sys.argv = ['envkit', '--version']; main()",
        ]
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith(__import__("envkit").__version__), r.stdout


def test_removed_wheel_is_caught_by_verify_and_by_pip(installed, tmp_path):
    src, venv = installed
    bundle = tmp_path / "bundle"
    shutil.copytree(src, bundle)
    wheel = _controller_wheel(bundle, "jinja2")
    wheel.unlink()
    r = _verify(venv, bundle)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"missing:  wheels/controller/{wheel.name}" in r.stdout
    # pip, isolated as install.sh runs it, finds no other source: an incomplete bundle cannot install
    target = tmp_path / "target"
    r = _pip_install([str(venv / "bin" / "python")], bundle, "controller", target=target, quiet=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No matching distribution found for jinja2" in r.stderr
    assert not target.exists() or not any(target.iterdir())


def test_tampered_wheel_is_caught_by_verify_and_by_pip_hashes(installed, tmp_path):
    src, venv = installed
    bundle = tmp_path / "bundle"
    shutil.copytree(src, bundle)
    # the first wheel pip meets (requirements are sorted): it refuses it before preparing the others
    wheel = sorted(p for p in (bundle / "wheels" / "controller").glob("*.whl") if not p.name.startswith("envkit-"))[0]
    _tamper(wheel)
    r = _verify(venv, bundle)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"modified: wheels/controller/{wheel.name}" in r.stdout
    # a forger rewrites the manifest's entry to match: verify still refuses (SHA256SUMS says otherwise), and
    # install.sh checks the wheel against SHA256SUMS before pip
    data = wheel.read_bytes()
    _rewrite_manifest(bundle, f"wheels/controller/{wheel.name}", hashlib.sha256(data).hexdigest(), len(data))
    r = _verify(venv, bundle)
    assert r.returncode == 1 and "SHA256SUMS does not list the manifest's files" in r.stderr, r.stdout + r.stderr
    new_venv = tmp_path / "venv"
    r = _install(bundle, new_venv)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "does not match its sha256" in out and f"{wheel.name}: FAILED" in out
    assert "nothing was installed" in out
    assert not new_venv.exists()


def test_tampered_manifest_is_caught_by_verify_and_by_the_published_digest(installed, tmp_path):
    src, venv = installed
    bundle = tmp_path / "bundle"
    shutil.copytree(src, bundle)
    published = _digest(bundle)
    _rewrite_manifest(bundle, "envkit.lock", "0" * 64)
    r = _verify(venv, bundle)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "modified: envkit.lock" in r.stdout
    new_venv = tmp_path / "venv"
    r = _install(bundle, new_venv, ENVKIT_BUNDLE_DIGEST=f"sha256:{published}")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"not the published sha256:{published}" in out and "nothing was installed" in out
    assert not new_venv.exists()
    # the intact bundle passes the same digest check (so the refusal above is the manifest's doing)
    assert _digest(src) == published

"""install.sh verifies, then acts: the manifest digest, SHA256SUMS against the manifest, every file with
`sha256sum -c`, no file the list does not name; only then pip. No network, no root: the interpreter is a
stand-in (PYTHON=...) that answers the version probe and records every later call, so "pip never ran" is
a fact the test reads (the real offline install is tests/airgap/test_offline.py, marked root)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

FAKE_PYTHON = """#!/bin/sh
# a stand-in python3: answers the version probe, records every other call (venv, pip) in $ENVKIT_TEST_LOG
case "$*" in
  *" -c "*) echo "$ENVKIT_TEST_PY"; exit 0 ;;
esac
echo "$*" >> "$ENVKIT_TEST_LOG"
case "$*" in
  *"-m venv "*) mkdir -p "$4/bin" && ln -s "$0" "$4/bin/python" ;;
esac
"""


@pytest.fixture
def bundle(offline_lock, tmp_path, cli) -> Path:
    path, _ = offline_lock
    out = tmp_path / "bundle"
    r = cli("bundle", "build", "--lock", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    for p in out.rglob("*"):  # cache entries are hard-linked read-only: give the test its own copies
        if p.is_file():
            data = p.read_bytes()
            p.unlink()
            p.write_bytes(data)
    return out


def _install(bundle: Path, tmp: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path, list[str]]:
    fake = tmp / "fake" / "python3"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp / "python-calls.log"
    log.unlink(missing_ok=True)
    venv = tmp / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    want = json.loads((bundle / "manifest.json").read_text())["controller"]["python"]
    full = {"PATH": os.environ["PATH"], "PYTHON": str(fake), "ENVKIT_TEST_LOG": str(log), "ENVKIT_TEST_PY": want} | env
    r = subprocess.run(["sh", str(bundle / "install.sh"), str(venv)], capture_output=True, text=True, env=full, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return r, venv, calls


def _digest(bundle: Path) -> str:
    return hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(r, venv: Path, calls: list[str], why: str) -> None:
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert why in out and "nothing was installed" in out, out
    assert calls == [] and not venv.exists(), (calls, out)  # no virtualenv, no pip: nothing of the bundle ran


def test_a_good_bundle_is_checked_then_installed(bundle, tmp_path):
    sums = (bundle / "SHA256SUMS").read_text().splitlines()
    manifest = json.loads((bundle / "manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"]}
    # SHA256SUMS: every file but itself and the manifest, sorted, in sha256sum's format; its digest in the manifest
    assert [line.split("  ", 1)[1] for line in sums] == sorted(listed - {"SHA256SUMS"})
    assert manifest["sha256sums"] == _sha(bundle / "SHA256SUMS")
    r, venv, calls = _install(bundle, tmp_path, ENVKIT_BUNDLE_DIGEST=f"sha256:{_digest(bundle)}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"manifest sha256:{_digest(bundle)}" in r.stdout and "installed envkit" in r.stdout
    assert calls[0].endswith(f"-I -m venv {venv}")
    pip = calls[1]
    assert "-m pip install" in pip and "--no-index" in pip and "--require-hashes" in pip
    assert f"-r {bundle}/requirements/controller.txt" in pip


def test_a_tampered_wheel_with_a_rehashed_requirements_file_never_reaches_pip(bundle, tmp_path):
    published = _digest(bundle)
    wheel = bundle / "wheels" / "controller" / "gamma-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    req = bundle / "requirements" / "controller.txt"
    req.write_text(req.read_text().replace(hashlib.sha256(wheel.read_bytes()[:-8]).hexdigest(), _sha(wheel)))
    assert _sha(wheel) in req.read_text()  # pip's --require-hashes alone would now accept the tampered wheel
    r, venv, calls = _install(bundle, tmp_path)
    _refused(r, venv, calls, "does not match its sha256")
    assert "requirements/controller.txt: FAILED" in r.stdout + r.stderr
    # the forger rewrites SHA256SUMS to match: the manifest's record of SHA256SUMS refuses it
    sums = bundle / "SHA256SUMS"
    text = sums.read_text()
    for f in (wheel, req):
        rel = f.relative_to(bundle).as_posix()
        text = "".join(f"{_sha(f)}  {rel}\n" if line.endswith(f"  {rel}") else line + "\n" for line in text.splitlines())
    sums.write_text(text)
    r, venv, calls = _install(bundle, tmp_path)
    _refused(r, venv, calls, "the manifest records sha256:")
    # and rewrites the manifest's record too: only the published digest stands in the way, and it holds
    m = bundle / "manifest.json"
    doc = json.loads(m.read_text())
    doc["sha256sums"] = _sha(sums)
    m.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    r, venv, calls = _install(bundle, tmp_path, ENVKIT_BUNDLE_DIGEST=f"sha256:{published}")
    _refused(r, venv, calls, f"not the published sha256:{published}")


def test_a_wrong_digest_is_refused(bundle, tmp_path):
    r, venv, calls = _install(bundle, tmp_path, ENVKIT_BUNDLE_DIGEST="sha256:" + "0" * 64)
    _refused(r, venv, calls, f"manifest.json is sha256:{_digest(bundle)}, not the published sha256:{'0' * 64}")


@pytest.mark.parametrize("case", ["extra wheel", "symlink", "hostile line", "no record", "missing file"])
def test_what_sha256sums_does_not_name_is_refused(bundle, tmp_path, case):
    wheels = bundle / "wheels" / "controller"
    if case == "extra wheel":  # pip would pick it up from --find-links: it is refused before
        (wheels / "evil-1.0-py3-none-any.whl").write_bytes(b"PK")
        why = "files that SHA256SUMS does not list: wheels/controller/evil-1.0-py3-none-any.whl"
    elif case == "symlink":
        (wheels / "link.whl").symlink_to("/etc/passwd")
        why = "links or special files"
    elif case == "hostile line":  # a path leaving the bundle, re-recorded in the manifest as a forger would
        sums = bundle / "SHA256SUMS"
        sums.write_text(sums.read_text() + f"{'0' * 64}  ../outside\n")
        m = bundle / "manifest.json"
        m.write_text(m.read_text().replace(json.loads(m.read_text())["sha256sums"], _sha(sums)))
        why = "not a sha256 and a plain relative path"
    elif case == "no record":
        m = bundle / "manifest.json"
        m.write_text(m.read_text().replace('"sha256sums"', '"sums"'))
        why = "records no digest of SHA256SUMS"
    else:
        (bundle / "requirements" / "controller.txt").unlink()
        why = "does not match its sha256"
    r, venv, calls = _install(bundle, tmp_path)
    _refused(r, venv, calls, why)


def test_verify_checks_that_sha256sums_says_what_the_manifest_says(bundle, tmp_path, cli):
    assert cli("bundle", "verify", str(bundle)).returncode == 0
    m = bundle / "manifest.json"
    doc = json.loads(m.read_text())
    sums = bundle / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(doc["files"][0]["sha256"], "0" * 64))  # SHA256SUMS altered alone
    doc["sha256sums"] = next(f for f in doc["files"] if f["path"] == "SHA256SUMS")["sha256"] = _sha(sums)
    m.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    r = cli("bundle", "verify", str(bundle))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SHA256SUMS does not list the manifest's files" in r.stderr


def test_install_sh_is_posix_sh_and_quotes_its_values(bundle):
    text = (bundle / "install.sh").read_text()
    assert subprocess.run(["sh", "-n", str(bundle / "install.sh")]).returncode == 0
    # the checks come before the first use of the interpreter on the bundle
    assert text.index("sha256sum --check --strict") < text.index("-m venv") < text.index("-m pip install")

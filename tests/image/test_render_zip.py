"""`envkit image render` with the signed zip edition handed in, and a lock whose zip sha256 matches it.

The lock is resolved from the shipped matrix; the fixture zips (make_installers.py --zip) are not the
vendor's, so the lock's zip sha256 is set to theirs, as a site that re-signs its own zips would record.
The rendered Dockerfile must then check that sha256 inside the build, unzip, and run the `.run` it held.
Beyond reading the text, the RUN step's shell up to the installer (sha256sum -c, unzip, move) is run for
real in a copy of the build context: it yields the installer, and refuses a zip whose bytes changed.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import fake_requirements, fixture_installers, render_args, resolve_lock

ZIPPED = ("cann-toolkit", "cann-ops")  # the CANN packages of the 8.5.0 lock with a zip edition


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """(build context, {component: (zip file, its sha256, the .run member, the member's bytes)})."""
    import zipfile

    if shutil.which("sha256sum") is None or shutil.which("bash") is None:
        pytest.skip("needs bash and coreutils sha256sum")
    base = tmp_path_factory.mktemp("render-zip")
    lock = resolve_lock(["--chip", "910b", "--arch", "aarch64", "--cann", "8.5.0", "--python", "3.10"], base / "envkit.lock")
    arts = fixture_installers(lock, base / "artifacts", as_zip=True)
    data = yaml.safe_load(lock.read_text())
    text = lock.read_text()
    zips = {}
    for art in data["artifacts"]:
        if art["component"] not in ZIPPED:
            continue
        assert art["zip"], f"the matrix lost the zip edition of {art['component']}"
        path = arts / art["zip"]["file"]
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        assert text.count(art["zip"]["sha256"]) == 1
        text = text.replace(art["zip"]["sha256"], sha)  # the lock now records the zip handed in
        with zipfile.ZipFile(path) as zf:
            (member,) = zf.namelist()
            zips[art["component"]] = (art["zip"]["file"], sha, member, zf.read(member))
    assert set(zips) == set(ZIPPED)
    lock.write_text(text)
    reqs = fake_requirements(lock, base / "requirements.txt")

    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["-q", "--accept-edited-lock", *render_args(lock, arts, reqs, base / "image")])
    assert exc.value.code in (0, None)
    return base / "image", zips


def _run_step(dockerfile: str, zip_file: str) -> str:
    """The RUN instruction that installs from `zip_file`, joined into one shell line."""
    lines = dockerfile.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("RUN ") and zip_file in ln)
    out = []
    for line in lines[start:]:
        out.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(out).removeprefix("RUN ")


@pytest.mark.parametrize("component", ZIPPED)
def test_the_dockerfile_checks_the_zip_then_unzips_and_runs_its_installer(rendered, component):
    ctx, zips = rendered
    zip_file, sha, member, _ = zips[component]
    run = member.rsplit("/", 1)[-1]
    text = (ctx / "Dockerfile").read_text()
    # the zip, not the bare .run, goes into the build context and the image's build step
    assert (ctx / "artifacts" / zip_file).is_file() and not (ctx / "artifacts" / run).exists()
    assert hashlib.sha256((ctx / "artifacts" / zip_file).read_bytes()).hexdigest() == sha
    assert f'COPY ["artifacts/{zip_file}", "./"]' in text
    parts = [p.strip() for p in _run_step(text, zip_file).split(" && ")]
    assert parts[0] == f"echo '{sha}  {zip_file}' | sha256sum -c -"
    assert parts[1] == f"python3 -m zipfile -e {zip_file} ./unpacked"
    assert parts[2].startswith(f"mv ./unpacked/{member} ./{run}")
    assert f"chmod +x ./{run}" in parts
    installs = [p for p in parts if p.startswith(f"./{run} ")]
    assert installs and parts.index(installs[0]) > parts.index(f"chmod +x ./{run}")


def _prefix(ctx: Path, zip_file: str, run: str) -> str:
    """The step's shell up to (not including) the chmod and the installer, with python3 = this Python."""
    parts = [p.strip() for p in _run_step((ctx / "Dockerfile").read_text(), zip_file).split(" && ")]
    cut = parts.index(f"chmod +x ./{run}")
    return " && ".join(parts[:cut]).replace("python3 -m zipfile", f"{sys.executable} -m zipfile")


@pytest.mark.parametrize("component", ZIPPED)
def test_the_step_yields_the_installer_and_refuses_a_changed_zip(rendered, component, tmp_path):
    ctx, zips = rendered
    zip_file, _, member, payload = zips[component]
    run = member.rsplit("/", 1)[-1]
    shell = _prefix(ctx, zip_file, run)

    good = tmp_path / "good"
    good.mkdir()
    shutil.copy2(ctx / "artifacts" / zip_file, good / zip_file)
    res = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=good, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (good / run).read_bytes() == payload
    assert not (good / zip_file).exists() and not (good / "unpacked").exists()

    bad = tmp_path / "bad"
    bad.mkdir()
    raw = bytearray((ctx / "artifacts" / zip_file).read_bytes())
    raw[10] ^= 0xFF  # the member's modification time in its local header: still a zip that unpacks
    (bad / zip_file).write_bytes(bytes(raw))
    res = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=bad, capture_output=True, text=True)
    assert res.returncode != 0
    assert re.search(r"FAILED|did NOT match", res.stdout + res.stderr)
    assert not (bad / run).exists()

"""`envkit bundle build --controller-python/--controller-arch`: a controller other than the lock's, resolved at build
time from the lock's recorded indexes (real PyPI), recorded as such in the manifest."""

from __future__ import annotations

import json
import os
import re
import tarfile

import pytest

from envkit.artifacts.closure import host_arch, host_python

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_bundle_for_another_controller_python_and_arch(tmp_path, cli):
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(tmp_path / "cache")}
    lock = tmp_path / "envkit.lock"
    for args in (
        ("resolve", "--python", host_python(), "--arch", host_arch(), "-o", str(lock)),
        ("lock", "--lock", str(lock), "--only", "pyyaml"),
    ):
        r = cli(*args, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
    other_arch = "aarch64" if host_arch() == "x86_64" else "x86_64"
    out = tmp_path / "bundle.tar"
    r = cli(
        "bundle",
        "build",
        "--lock",
        str(lock),
        "--controller-python",
        "3.12",
        "--controller-arch",
        other_arch,
        "-o",
        str(out),
        "--json",
        env=env,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resolving envkit's closure for the controller (Python 3.12" in r.stderr
    with tarfile.open(out) as tf:
        manifest = json.loads(tf.extractfile("bundle/manifest.json").read())
        names = tf.getnames()
        install = tf.extractfile("bundle/install.sh").read().decode()
    ctl = manifest["controller"]
    assert ctl["python"] == "3.12" and ctl["arch"] == other_arch and ctl["resolved"].startswith("at bundle build by uv")
    assert manifest["target"]["python"] == host_python()  # the target's closure is still the lock's
    # compiled wheels of the controller are for its Python and arch, not this machine's
    core = [n for n in names if re.search(r"/wheels/controller/pydantic_core-", n)]
    assert core and all("cp312" in n and other_arch in n for n in core), core
    assert "\nWANT_PY=3.12\n" in install and "the bundle's controller wheels are for Python $WANT_PY" in install
    r = cli("bundle", "verify", str(out), "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"]

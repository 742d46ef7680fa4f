"""Build the rendered image for real through Podman's Docker API, run it, and rebuild after a Python-only change.

Needs root and the engine from tests/integration/setup/podman.sh (DOCKER_HOST, ENVKIT_TEST_BASE):
    eval "$(tests/integration/setup/podman.sh)"; pytest tests/image -m podman
The vendor CANN packages are the fixture installers; the Python closure is downloaded on the host
into a cached wheelhouse and installed offline (--no-index, --require-hashes) inside the build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, fixture_installers, resolve_lock

pytestmark = [pytest.mark.podman, pytest.mark.root, pytest.mark.slow]

WORK = Path(os.environ.get("ENVKIT_PODMAN_WORK", "/var/tmp/envkit-podman"))
TORCH = "2.13.0+cpu"  # the CPU wheel this CI has locally (pip find-links)
EXTRA = ["transformers", "accelerate", "safetensors"]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("podman"):
        return "podman is not installed (tests/integration/setup/podman.sh)"
    if not os.environ.get("DOCKER_HOST") or not os.environ.get("ENVKIT_TEST_BASE"):
        return "DOCKER_HOST/ENVKIT_TEST_BASE not set: eval \"$(tests/integration/setup/podman.sh)\""
    return None


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An x86_64 Python 3.11 lock (the base's python3), torch +cpu, fixture CANN, a wheelhouse."""
    d = tmp_path_factory.mktemp("podman")
    lock_path = resolve_lock(["--chip", "910b", "--arch", "x86_64", "--python", "3.11", "--torch", "2.9.0"], d / "resolved.lock")
    lock = yaml.safe_load(lock_path.read_text())
    wheels = WORK / "wheelhouse-py311"
    wheels.mkdir(parents=True, exist_ok=True)
    # envkit itself goes into the image (smoke and doctor run inside); rebuilt each session
    for old in wheels.glob("envkit-*.whl"):
        old.unlink()
    _pip("wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT))
    cann = [r for r in lock["python"]["cann_runtime"]]
    want = [f"torch=={TORCH}", f"numpy=={lock['stack']['numpy']}", *EXTRA, *cann]
    marker = wheels / ".complete"
    if not marker.exists():
        _pip("download", "-q", "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
             "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "-d", str(wheels), *want,
             *[str(w) for w in wheels.glob("envkit-*.whl")])
        marker.write_text("ok\n")
    else:  # the envkit wheel's own dependencies may have changed
        _pip("download", "-q", "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
             "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "-d", str(wheels),
             *[str(w) for w in wheels.glob("envkit-*.whl")])
    got = {}
    for w in wheels.glob("*.whl"):
        name, ver = w.name.split("-")[:2]
        got[name.lower().replace("_", "-")] = ver
    # the test lock: this CI's torch wheel; torch_npu is left out of the Python pins (its wheel pins a
    # torch this CI does not have, and it cannot import without a driver anyway)
    lock["stack"]["torch"] = TORCH
    lock["validated"] = {"torch_npu_cann": False, "cann_hdk": lock["validated"]["cann_hdk"]}
    reqs = []
    for r in lock["python"]["requirements"]:
        if r["name"] == "torch_npu":
            continue
        if r["name"] == "torch":
            r = {**r, "version": TORCH}
        elif r["name"] in ("transformers", "accelerate"):
            r = {**r, "version": got[r["name"]]}
            lock["stack"][r["name"]] = r["version"]
        reqs.append(r)
    reqs.append({"name": "envkit", "version": got["envkit"], "index": None})
    lock["python"]["requirements"] = reqs
    lock_path = d / "envkit.lock"
    lock_path.write_text(yaml.safe_dump(lock, sort_keys=False))
    arts = fixture_installers(lock_path, d / "artifacts")
    (arts / "wheels").symlink_to(wheels)
    bench = WORK / "bench"  # inputs for benchmarks/image.py
    shutil.rmtree(bench, ignore_errors=True)
    shutil.copytree(arts, bench / "artifacts", symlinks=True)
    shutil.copy2(lock_path, bench / "envkit.lock")
    return {"dir": d, "lock": lock_path, "artifacts": arts, "wheels": wheels}


def _envkit(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, timeout=timeout)


def _layers(engine, ref: str) -> list[str]:
    return engine.inspect(ref)["RootFS"]["Layers"]


def test_build_run_and_rebuild(inputs) -> None:
    from envkit.engine import Engine
    from envkit.lockfile import read_lock

    base = os.environ["ENVKIT_TEST_BASE"]
    tag = "localhost/envkit-test:first"
    r = _envkit("image", "build", "--lock", str(inputs["lock"]), "--artifacts", str(inputs["artifacts"]),
                "--base", base, "--tag", tag, "--json")
    assert r.returncode == 0, r.stderr[-4000:]
    first = json.loads(r.stdout)
    eng = Engine()
    lock = read_lock(inputs["lock"])
    info = eng.inspect(tag)
    labels = info["Config"]["Labels"]
    assert labels["io.envkit.lock.digest"] == first["lock_digest"]
    assert labels["io.envkit.stack.cann"] == lock.stack.cann
    assert info["Config"]["User"] == "HwHiAiUser"

    # CANN version files and the baked environment
    home = lock.layout.home
    rc, out = eng.run(tag, ["bash", "-c", f"cat {home}/x86_64-linux/ascend_toolkit_install.info; env | sort; id"])
    assert rc == 0, out
    assert f"version={lock.stack.cann}" in out
    assert f"ASCEND_TOOLKIT_HOME={home}" in out and f"ASCEND_OPP_PATH={home}/opp" in out
    assert "/usr/local/Ascend/driver/lib64" in out and "groups=1000(HwHiAiUser)" in out
    rc, out = eng.run(tag, ["bash", "-c", "ls /usr/local/Ascend/nnal/atb/latest/atb && ls /tmp/envkit-cann 2>&1 | wc -l"])
    assert rc == 0 and "cxx_abi_1" in out, out
    rc, out = eng.run(tag, ["python", "-c", "import torch, numpy; print(torch.__version__, numpy.__version__)"])
    assert rc == 0 and out.split()[0] == TORCH, out

    # envkit smoke inside: cpu passes, npu is refused (exit 2) for the missing driver
    rc, out = eng.run(tag, ["envkit", "smoke", "--device", "cpu", "--dtype", "fp32", "--out", "/tmp/smoke", "--repeat", "2"])
    assert rc == 0, out[-3000:]
    rc, out = eng.run(tag, ["envkit", "smoke", "--device", "npu", "--out", "/tmp/smoke-npu"])
    assert rc == 2, out[-3000:]
    # this test image has no torch_npu (see `inputs`), so smoke stops at that before it reaches the
    # driver check; with torch_npu in the lock's pins the message names the missing driver instead
    assert "driver" in out.lower() or "torch_npu is not installed" in out, out[-3000:]
    # envkit doctor inside reports the image's stack
    rc, out = eng.run(tag, ["envkit", "doctor", "--json"])
    assert rc in (0, 1), out[-3000:]
    assert lock.stack.cann in out and TORCH.split("+")[0] in out

    # rebuild after a Python-only change: the CANN layers are reused
    lock2 = yaml.safe_load(inputs["lock"].read_text())
    for p in lock2["python"]["requirements"]:
        if p["name"] == "accelerate":
            p["version"] = p["version"]  # same pin; the change is a pin added below
    lock2["python"]["requirements"].append({"name": "safetensors", "version": _ver(inputs["wheels"], "safetensors"), "index": None})
    lock2_path = inputs["dir"] / "envkit2.lock"
    lock2_path.write_text(yaml.safe_dump(lock2, sort_keys=False))
    tag2 = "localhost/envkit-test:second"
    r = _envkit("image", "build", "--lock", str(lock2_path), "--artifacts", str(inputs["artifacts"]),
                "--base", base, "--tag", tag2, "--json")
    assert r.returncode == 0, r.stderr[-4000:]
    second = json.loads(r.stdout)
    l1, l2 = _layers(eng, tag), _layers(eng, tag2)
    # base + os layers, then the CANN copy (/usr/local/Ascend, /etc/Ascend): identical
    n_same = next((i for i, (a, b) in enumerate(zip(l1, l2)) if a != b), len(l1))
    assert n_same >= 3, (l1, l2)
    assert second["seconds"] < first["seconds"]
    (WORK / "last-build-times.json").write_text(json.dumps({"first": first["seconds"], "python_only": second["seconds"]}))


def _ver(wheels: Path, name: str) -> str:
    return next(w.name.split("-")[1] for w in wheels.glob(f"{name}-*.whl"))

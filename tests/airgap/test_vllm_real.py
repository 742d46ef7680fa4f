"""The real vLLM, built as the vendor builds it, in an x86_64 serving lock's bundle, installed with no network.

`envkit lock` builds vLLM's real sdist from PyPI with `VLLM_TARGET_DEVICE=empty` against the lock's CPU torch
(`--no-build-isolation --no-deps`), and resolves vLLM's real runtime requirements from PyPI into the closure; the
bundle is built and verified, installed under `unshare -n`, and vLLM imported with plugins off.

What is NOT real here, and why (this machine: x86_64, no NPU, no CANN; download.pytorch.org and the Ascend index
cannot be reached):
- torch: the lock's serving row pins torch 2.10.0; the only CPU torch this machine has is 2.13.0+cpu (a local wheel),
  served on 127.0.0.1 as the PyTorch CPU index. The lock's torch pin is edited to 2.13.0 (`--accept-edited-lock`).
- vllm-ascend, torch-npu and triton-ascend are left out (`--exclude`): vllm-ascend 0.23.0's wheel requires
  torch==2.10.0, torchvision==0.25.0, torchaudio==2.10.0 (no CPU build reachable), torch-npu (never installed into
  a CPU environment: it breaks `import torch` without CANN) and triton-ascend 3.2.2 (only on the Ascend index). The
  stand-in serving tests (test_serving_bundle.py) carry them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from envkit.artifacts.closure import host_arch, host_python

pytestmark = [pytest.mark.network, pytest.mark.root, pytest.mark.slow]

CPU_TORCH = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
LEFT_OUT = ["vllm-ascend", "torch-npu", "triton-ascend"]


@pytest.fixture(scope="module")
def real_serving(tmp_path_factory):
    """(lock path, bundle folder, seconds) of the real serving bundle: locked once, bundled once."""
    from tests.airgap.httpserve import Server
    from tests.airgap.test_offline import _need_root_unshare

    def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env={**os.environ, **env})

    _need_root_unshare()
    if host_arch() != "x86_64" or host_python() != "3.11" or not CPU_TORCH.is_file():
        pytest.skip(f"needs x86_64, Python 3.11 and {CPU_TORCH}")
    tmp = tmp_path_factory.mktemp("vllm-real")
    env = {"ENVKIT_CACHE_DIR": os.environ.get("ENVKIT_TEST_BUILD_CACHE", str(tmp / "cache"))}
    cpu = tmp / "cpu"
    cpu.mkdir()
    os.symlink(CPU_TORCH, cpu / CPU_TORCH.name)
    with zipfile.ZipFile(CPU_TORCH) as zf:  # PEP 658 metadata beside it, as the PyTorch index serves it
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        (cpu / f"{CPU_TORCH.name}.metadata").write_bytes(zf.read(meta))
    path = tmp / "envkit.lock"
    r = run_cli("resolve", "--workload", "serving", "--arch", "x86_64", "--python", "3.11", "-o", str(path), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    from envkit.lock.file import dump_lock, read_lock

    lock = read_lock(path)
    cpu_pin = "2.13.0+cpu" if "+cpu" in next(p.version for p in lock.python.requirements if p.name == "torch") else "2.13.0"
    pins = [p.model_copy(update={"version": cpu_pin}) if p.name == "torch" else p for p in lock.python.requirements]
    path.write_text(dump_lock(lock.model_copy(update={"python": lock.python.model_copy(update={"requirements": pins})})))
    seconds = {}
    with Server(cpu, simple_index=True) as c:
        args = ["--accept-edited-lock", "lock", "--lock", str(path), "--torch-index-url", f"{c.url}/simple", "--json"]
        args += ["--exclude", ",".join(LEFT_OUT)]
        t0 = time.perf_counter()
        r = run_cli(*args, env=env)
        seconds["lock"] = time.perf_counter() - t0
        assert r.returncode == 0, r.stdout + r.stderr
        t0 = time.perf_counter()
        r = run_cli(*args, env=env)  # again: the wheel comes from the build cache
        seconds["lock_again"] = time.perf_counter() - t0
        assert r.returncode == 0 and "taken from the build cache" in r.stderr, r.stdout + r.stderr
        t0 = time.perf_counter()
        r = run_cli("--accept-edited-lock", "bundle", "build", "--lock", str(path), "-o", str(tmp / "bundle"), "--json", env=env)
        seconds["bundle"] = time.perf_counter() - t0
        assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("bundle", "verify", str(tmp / "bundle"), "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
    yield path, tmp / "bundle", seconds
    if "ENVKIT_TEST_BUILD_CACHE" not in os.environ:
        shutil.rmtree(tmp / "cache", ignore_errors=True)


def test_the_real_vllm_is_built_from_its_sdist_and_its_closure_holds_no_cuda(real_serving):
    from envkit.artifacts.closure import CUDA_NAME, cuda_torch
    from envkit.lock.file import read_lock

    path, _, seconds = real_serving
    closure = read_lock(path).python.closure
    got = {p.name: p for p in closure.packages}
    vllm = got["vllm"]
    assert vllm.version == "0.23.0+empty" and vllm.built is not None
    assert vllm.url.startswith("https://files.pythonhosted.org/") and vllm.url.endswith("/vllm-0.23.0.tar.gz")
    assert vllm.built.env["VLLM_TARGET_DEVICE"] == "empty" and vllm.built.torch == "2.13.0+cpu"
    assert got["torch"].version == "2.13.0+cpu" and vllm.built.torch_sha256 == got["torch"].sha256
    assert not [n for n, p in got.items() if CUDA_NAME.match(n) or cuda_torch(p, "x86_64")]  # no nvidia-*, triton, CUDA torch
    assert "triton" in closure.excluded and not set(LEFT_OUT) & set(got)
    for name in ("transformers", "tokenizers", "fastapi", "openai", "xgrammar"):  # vLLM's own requirements, from PyPI
        assert got[name].url.startswith("https://files.pythonhosted.org/") and got[name].sha256, name
    print(f"\nclosure: {len(got)} wheels, {sum(p.size for p in closure.packages) / 1e6:.0f} MB; seconds: {seconds}")


def test_the_real_serving_bundle_installs_offline_and_vllm_imports_with_plugins_off(real_serving, tmp_path):
    from envkit.lock.file import read_lock
    from tests.airgap.test_offline import _clean_env, _offline

    path, bundle, _ = real_serving
    venv = tmp_path / "venv"
    r = _offline(["python3", "-I", "-m", "venv", str(venv)])
    assert r.returncode == 0, r.stdout + r.stderr
    # the bundle's pip rules (no index, no deps, hashes), offline; --no-compile: 470 MB of .pyc would cost minutes
    wheels, reqs = bundle / "wheels" / "target", bundle / "requirements" / "target.txt"
    cmd = [str(venv / "bin/python"), "-I", "-m", "pip", "install", "-q", "--no-compile", "--no-index", "--no-deps"]
    cmd += ["--require-hashes", "--find-links", str(wheels), "-r", str(reqs)]
    r = subprocess.run(["unshare", "-n", "--", *cmd], capture_output=True, text=True, env=_clean_env(), timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _offline([str(venv / "bin/python"), "-I", "-m", "pip", "list", "--format", "json"])
    assert r.returncode == 0, r.stdout + r.stderr
    listed = {p["name"].lower().replace("_", "-").replace(".", "-"): p["version"] for p in json.loads(r.stdout)}
    locked = {p.name.replace(".", "-"): p.version for p in read_lock(path).python.closure.packages}
    assert {n: listed.get(n) for n in locked} == locked  # every locked distribution, at its locked version
    assert not set(listed) - set(locked) - {"pip", "setuptools", "envkit"}
    code = "import importlib.metadata as m, vllm, torch; print(m.version('vllm'), vllm.__version__, torch.__version__)"
    r = _offline([str(venv / "bin/python"), "-I", "-c", code], env=_clean_env(VLLM_PLUGINS=""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split()[-3:] == ["0.23.0+empty", "0.23.0", "2.13.0+cpu"], r.stdout
    r = subprocess.run(["unshare", "-n", "--", "true"], capture_output=True)
    assert r.returncode == 0


def test_the_image_takes_the_built_wheel_of_the_real_lock(real_serving):
    """The image's pip picks the built `linux_x86_64` wheel (setuptools' tag for the empty build) for vllm, and the
    image's pins accept `0.23.0+empty` for the lock's vllm==0.23.0."""
    from envkit.artifacts.wheels import Requirement
    from envkit.export.image import check_closure, closure_files
    from envkit.lock.file import read_lock

    lock = read_lock(real_serving[0])
    files = {p.name: p for p in closure_files(lock)}
    assert files["vllm"].filename.endswith("-cp311-cp311-linux_x86_64.whl") and files["vllm"].built is not None
    reqs = [Requirement(p.name, p.version, (p.sha256,)) for p in files.values()]
    pins = [p for p in lock.python.requirements if p.name.replace("_", "-") not in LEFT_OUT]
    check_closure(lock.model_copy(update={"python": lock.python.model_copy(update={"requirements": pins})}), reqs, "the closure")

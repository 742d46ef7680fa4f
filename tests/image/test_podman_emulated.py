"""The default (aarch64) serving lock's image, built on this x86_64 machine through Podman's Docker API under
user-mode emulation: vLLM built from its real sdist for the lock's platform (`envkit lock --build-image`), then the
serving image with its real closure, for the lock's platform, not the builder's.

Needs root, the engine and the arm64 base from tests/integration/setup/podman.sh (DOCKER_HOST,
ENVKIT_TEST_BASE_ARM64: Debian bookworm's arm64 packages unpacked by mmdebstrap, since no registry is reachable),
qemu-user-static registered with binfmt_misc (the same script does it), and PyPI.

The lock is the default serving stack for Python 3.11 (the arm64 base's python3), locked against real PyPI for
aarch64: torch 2.10.0 (PyPI's aarch64 wheel, its CPU build), vLLM 0.23.0 built from its sdist as the vendor builds it,
and every requirement of theirs (158 wheels, about 400 MB); vllm-ascend, torch-npu and triton-ascend are stand-ins
(LEFT_OUT says why). The CANN packages are the fixture installers, run by the emulated bash. Every RUN step is
emulated: on this 2-core machine the vLLM build took 4 to 7 minutes and the image about 9.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import fixture_installers, resolve_lock

pytestmark = [pytest.mark.podman, pytest.mark.root, pytest.mark.slow, pytest.mark.network]

WORK = Path(os.environ.get("ENVKIT_PODMAN_WORK", "/var/tmp/envkit-podman"))


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not os.environ.get("DOCKER_HOST") or not os.environ.get("ENVKIT_TEST_BASE_ARM64"):
        return 'DOCKER_HOST/ENVKIT_TEST_BASE_ARM64 not set: eval "$(tests/integration/setup/podman.sh)"'
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_file():
        return "qemu-aarch64 is not registered with binfmt_misc (tests/integration/setup/podman.sh does it)"
    return None


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)


# --- the default serving image with the real vLLM, built from its sdist for aarch64 -------------------------------
SERVING_TAG = "localhost/envkit-test:aarch64-serving"
# stand-ins in the serving image: vllm-ascend 0.23.0 requires arctic-inference==0.1.1, which PyPI has as an sdist
# only (no wheel for any platform); torch-npu is never installed where no CANN is (it breaks `import torch`);
# triton-ascend 3.2.2 is on the Ascend index alone, which cannot be reached here
LEFT_OUT = ["vllm-ascend", "torch-npu", "triton-ascend"]
NO_NPU = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "VLLM_PLUGINS": ""}


@pytest.fixture(scope="module")
def real_vllm_serving(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The default serving lock for Python 3.11 (the arm64 base's python3), locked against real PyPI for aarch64 with
    vLLM built from its sdist in the arm64 base under emulation (`envkit lock --build-image`), then bundled. The
    envkit cache lives under WORK: the built wheel is kept by the sdist's sha256 and every download by its own, so
    a machine builds vLLM once (about 4 to 7 minutes emulated) and a rerun takes it from there."""
    d = tmp_path_factory.mktemp("aarch64-serving")
    lock = resolve_lock(["--workload", "serving", "--python", "3.11"], d / "envkit.lock")
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(WORK / "envkit-cache")}
    base = os.environ["ENVKIT_TEST_BASE_ARM64"]
    args = ["lock", "--lock", str(lock), "--build-image", base, "--exclude", ",".join(LEFT_OUT), "--json"]
    r = subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=3000)
    assert r.returncode == 0, r.stderr[-4000:]
    bundle = d / "bundle"
    r2 = subprocess.run(
        [sys.executable, "-m", "envkit", "bundle", "build", "--lock", str(lock), "-o", str(bundle), "--json"],
        capture_output=True, text=True, env=env, timeout=3000,
    )  # fmt: skip
    assert r2.returncode == 0, r2.stderr[-4000:]
    return {"dir": d, "lock": lock, "summary": json.loads(r.stdout), "said": r.stderr, "bundle": bundle, "env": env}


def test_envkit_lock_builds_the_real_vllm_for_aarch64_in_the_emulated_base(real_vllm_serving) -> None:
    """The built wheel is vLLM's own for the target (cp311, linux_aarch64), recorded as built against the lock's
    torch 2.10.0, which is PyPI's aarch64 wheel (its CPU build); the closure holds no CUDA wheel."""
    from envkit.artifacts.closure import cuda_packages
    from envkit.lock.file import read_lock

    closure = read_lock(real_vllm_serving["lock"]).python.closure
    got = {p.name: p for p in closure.packages}
    vllm, torch = got["vllm"], got["torch"]
    assert vllm.filename == "vllm-0.23.0+empty-cp311-cp311-linux_aarch64.whl" and vllm.built is not None
    assert vllm.url.startswith("https://files.pythonhosted.org/") and vllm.url.endswith("/vllm-0.23.0.tar.gz")
    assert vllm.built.env == {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"}
    assert torch.version == "2.10.0" and torch.filename.endswith("-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert vllm.built.torch == "2.10.0" and vllm.built.torch_sha256 == torch.sha256
    assert closure.target.arch == "aarch64" and not cuda_packages(closure) and not set(LEFT_OUT) & set(got)
    said = " ".join(real_vllm_serving["said"].split())
    assert "vllm-0.23.0+empty-cp311-cp311-linux_aarch64.whl: " in said  # built, or taken from the build cache


def test_the_default_serving_image_holds_the_real_vllm(real_vllm_serving) -> None:
    """`envkit image build --variant serving` for linux/arm64 under emulation: the serving layer installs the vLLM
    built from its sdist (with its real requirements from PyPI, all hashed and offline), `import vllm` works in the
    image with plugins off, the entry point is `vllm serve`, and envkit's doctor reads the pairing inside."""
    from envkit.executor.docker import Engine
    from envkit.lock.file import read_lock
    from tests.airgap.torchindex import standin_wheel

    d, bundle = real_vllm_serving["dir"], real_vllm_serving["bundle"]
    lk = read_lock(real_vllm_serving["lock"])
    pins = {p.name.replace("_", "-"): p.version for p in lk.python.requirements}
    arts = fixture_installers(real_vllm_serving["lock"], d / "artifacts")
    wheels = arts / "wheels"
    wheels.mkdir()
    for w in sorted((bundle / "wheels" / "target").iterdir()):
        (wheels / w.name).symlink_to(w)
    made = [
        standin_wheel(
            wheels, "vllm_ascend", pins["vllm-ascend"], "cp311-cp311-manylinux_2_34_aarch64", [f"torch-npu=={pins['torch-npu']}"],
            entry_points={"vllm.platform_plugins": {"ascend": "vllm_ascend:register"}},
        ),
        standin_wheel(wheels, "torch_npu", pins["torch-npu"], "cp311-cp311-manylinux_2_28_aarch64", [f"torch=={pins['torch']}"]),
        standin_wheel(wheels, "triton_ascend", pins["triton-ascend"], "cp311-cp311-manylinux_2_28_aarch64"),
    ]  # fmt: skip
    reqs = d / "requirements.txt"  # the bundle's hashed closure, and the stand-ins'
    reqs.write_text(
        (bundle / "requirements" / "target.txt").read_text()
        + "".join(
            f"{w.name.split('-')[0].replace('_', '-')}=={w.name.split('-')[1]} --hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}\n"
            for w in made
        )
    )
    # the lock's closure lacks the stand-ins: the requirements above are the image's pins (--requirements comes first)
    context = d / "context"
    r = subprocess.run(
        [
            sys.executable, "-m", "envkit", "image", "build", "--lock", str(real_vllm_serving["lock"]),
            "--variant", "serving", "--artifacts", str(arts), "--requirements", str(reqs),
            "--base", os.environ["ENVKIT_TEST_BASE_ARM64"], "--tag", SERVING_TAG, "--context", str(context), "--json",
        ],
        capture_output=True, text=True, timeout=3000, env=real_vllm_serving["env"],
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads(r.stdout)
    assert summary["platform"] == "linux/arm64" and summary["emulated"] is True
    assert "user-mode emulation" in r.stderr  # the user is told the build is emulated
    assert "FROM --platform=linux/arm64 " in (context / "Dockerfile").read_text()
    eng = Engine()
    try:
        info = eng.inspect(SERVING_TAG)
        assert info["Architecture"] == "arm64" and info["Os"] == "linux"
        assert info["Config"]["Entrypoint"] == ["vllm", "serve"]
        rc, out = eng.run(
            SERVING_TAG, ["-c", "uname -m; python3 -c 'import platform; print(platform.machine())'"], entrypoint=["bash"]
        )
        assert rc == 0 and out.split() == ["aarch64", "aarch64"], out
        # the venv's native aarch64 wheels load and compute
        rc, out = eng.run(
            SERVING_TAG, ["-c", "import numpy, pydantic_core, yaml; print(int(numpy.arange(5).sum()))"], entrypoint=["python"]
        )
        assert rc == 0 and out.strip().splitlines()[-1] == "10", out
        code = (
            "import importlib.metadata as m, platform, vllm, torch; "
            "w = m.distribution('vllm').read_text('WHEEL'); "
            "print(m.version('vllm'), vllm.__version__, m.version('torch'), torch.__version__, platform.machine(), "
            "[x.split(': ')[1] for x in w.splitlines() if x.startswith('Tag: ')])"
        )
        rc, out = eng.run(SERVING_TAG, ["-c", code], env=NO_NPU, entrypoint=["python"])
        assert rc == 0, out[-3000:]
        # PyPI's aarch64 torch 2.10.0 is its CPU build: its metadata says 2.10.0, its own version string 2.10.0+cpu
        want = "0.23.0+empty 0.23.0 2.10.0 2.10.0+cpu aarch64 ['cp311-cp311-linux_aarch64']"
        assert out.strip().splitlines()[-1] == want, out
        rc, out = eng.run(SERVING_TAG, ["-c", "envkit doctor --json 2>/dev/null"], entrypoint=["bash"], env=NO_NPU)
        assert rc in (0, 1), out[-3000:]
        report = json.loads(out)
        assert report["observed"]["arch"]["value"] == "aarch64"
        checks = {c["name"]: c for c in report["checks"]}
        assert checks["arch"]["detail"].startswith("aarch64")
        assert checks["vLLM and vllm-ascend"]["status"] == "ok", checks["vLLM and vllm-ascend"]
    finally:
        eng.remove_image(SERVING_TAG)

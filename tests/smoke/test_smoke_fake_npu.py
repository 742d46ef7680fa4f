"""The torch_npu error mapping end to end, with a fake torch_npu on sys.path in a subprocess.

The fake fails the way the real wheel does without CANN; its dist-info registers the same
`torch.backends` entry point, so plain `import torch` autoloads it like the real one.
"""

from __future__ import annotations

import json

import pytest

from .conftest import FAKE_TORCH_NPU, envkit_subprocess

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _needs_torch():
    pytest.importorskip("torch")


def _smoke(device, mode, autoload=True, ascend_home=None, tmp_path=None, extra=()):
    env = {
        "FAKE_TORCH_NPU_MODE": mode,
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if autoload else "0",
        "ASCEND_HOME_PATH": ascend_home or "",
    }
    return envkit_subprocess(
        "smoke", "--device", device, "--out", str(tmp_path / "o"), *extra, env=env, pythonpath=[FAKE_TORCH_NPU]
    )


def test_autoload_without_cann_is_mapped(tmp_path):
    res = _smoke("npu", "libhccl", tmp_path=tmp_path, extra=("--json",))
    assert res.code == 2
    err = json.loads(res.out)["error"]
    assert err["type"] == "CannotRun" and err["details"]["kind"] == "cann_missing"
    assert "backend extension" in err["message"] and "libhccl.so" in err["message"]
    assert "set_env.sh" in err["hint"] and "ASCEND_HOME_PATH is unset" in err["hint"]
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in err["hint"]
    assert not (tmp_path / "o").exists()


def test_explicit_import_without_cann_is_mapped(tmp_path):
    res = _smoke("npu", "libascendcl", autoload=False, ascend_home=str(tmp_path), tmp_path=tmp_path)
    assert res.code == 2
    assert "device 'npu' requested: torch_npu cannot load: CANN library libascendcl.so not found" in res.err
    assert "ASCEND_HOME_PATH is unset" not in res.err and "set_env.sh" in res.err
    assert "Traceback" not in res.err


def test_cuda_build_beside_torch_npu_is_mapped(tmp_path):
    res = _smoke("npu:0", "two_accelerators", autoload=False, tmp_path=tmp_path)
    assert res.code == 2
    assert "CUDA build of torch" in res.err and "whl/cpu" in res.err


def test_importable_torch_npu_without_a_device_exits_2(tmp_path):
    res = _smoke("npu", "no_device", autoload=False, tmp_path=tmp_path)
    assert res.code == 2
    assert "device 'npu' requested but torch.npu.is_available() is False" in res.err
    assert "passed" not in res.out


def test_a_cpu_run_in_a_venv_with_a_broken_torch_npu_explains_itself(tmp_path):
    """The real wheel breaks `import torch` itself (autoload): even --device cpu cannot run, and says why."""
    res = _smoke("cpu", "libhccl", tmp_path=tmp_path)
    assert res.code == 2
    assert "device 'cpu' requested: import torch failed" in res.err
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in res.err

"""Strict device parsing, the torch_npu error mapping and the CANN version, without torch."""

from __future__ import annotations

import pytest

from envkit.errors import BadInput, CannotRun
from envkit.jobs.smoke.device import (
    DeviceSpec,
    cann_version_from_path,
    cannot_run,
    exception_text,
    is_npu_failure,
    map_npu_error,
    no_cuda_error,
    no_npu_error,
    parse_device,
)

AUTOLOAD = (
    "RuntimeError: Failed to load the backend extension: torch_npu. You can disable extension auto-loading "
    "with TORCH_DEVICE_BACKEND_AUTOLOAD=0.\nImportError: libhccl.so: cannot open shared object file: No such file or directory"
)
SET_ENV = {"ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest"}


@pytest.mark.parametrize(
    "text,spec",
    [
        ("npu", DeviceSpec("npu")),
        ("npu:3", DeviceSpec("npu", 3)),
        ("CUDA:0", DeviceSpec("cuda", 0)),
        ("cpu", DeviceSpec("cpu")),
        ("cpu:0", DeviceSpec("cpu", 0)),
    ],
)
def test_parse_device(text, spec):
    assert parse_device(text) == spec
    assert str(parse_device(str(spec))) == str(spec)


@pytest.mark.parametrize("text", ["tpu", "npu:", "npu:x", "cuda:-1", "cpu:1", "", "npu0", "mps"])
def test_parse_device_rejects(text):
    with pytest.raises(BadInput) as info:
        parse_device(text)
    assert info.value.exit_code == 2


def test_autoload_failure_names_cann_and_the_escape_hatch():
    m = map_npu_error(AUTOLOAD, {}, stage="import torch")
    assert m.kind == "cann_missing"
    assert "backend extension" in m.message and "libhccl.so" in m.message
    assert "set_env.sh" in m.hint
    assert "ASCEND_HOME_PATH is unset" in m.hint
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in m.hint


def test_cann_library_missing_with_env_loaded_does_not_blame_the_variable():
    m = map_npu_error("ImportError: libascendcl.so: cannot open shared object file: No such file or directory", SET_ENV)
    assert m.kind == "cann_missing"
    assert "libascendcl.so" in m.message
    assert "ASCEND_HOME_PATH is unset" not in m.hint
    assert "set_env.sh" in m.hint
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" not in m.hint  # not an autoload failure


def test_versioned_library_name_is_recognised():
    m = map_npu_error("ImportError: libhccl.so.8: cannot open shared object file", SET_ENV)
    assert m.kind == "cann_missing" and m.details["library"] == "libhccl.so"


def test_two_accelerators_cuda_build():
    text = (
        "RuntimeError: Two accelerators cannot be used at the same time in PyTorch: npu and cuda. You can install "
        "the cpu version of PyTorch to use your npu device"
    )
    m = map_npu_error(text, SET_ENV)
    assert m.kind == "two_accelerators"
    assert "CUDA build of torch" in m.message
    assert "download.pytorch.org/whl/cpu" in m.hint


def test_two_accelerators_npu_twice():
    m = map_npu_error("RuntimeError: Two accelerators cannot be used at the same time in PyTorch: npu and npu", SET_ENV)
    assert m.kind == "two_accelerators"
    assert "twice" in m.message and "setuptools<81" in m.hint


def test_not_installed_and_mismatch_and_unknown():
    assert map_npu_error("ModuleNotFoundError: No module named 'torch_npu'", SET_ENV).kind == "not_installed"
    assert (
        map_npu_error("ImportError: /x/torch_npu/lib/libtorch_npu.so: undefined symbol: _ZN3c10", SET_ENV).kind
        == "version_mismatch"
    )
    unknown = map_npu_error("RuntimeError: something else entirely", {})
    assert unknown.kind == "unknown" and "ASCEND_HOME_PATH is unset" in unknown.hint


def test_autoload_failure_with_an_unknown_cause():
    m = map_npu_error("RuntimeError: Failed to load the backend extension: torch_npu.\nValueError: odd", SET_ENV)
    assert m.kind == "autoload_failed"
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in m.hint


def test_is_npu_failure():
    assert is_npu_failure("libhccl.so: cannot open shared object file")
    assert is_npu_failure("No module named 'torch_npu'")
    assert not is_npu_failure("No module named 'torch'")


def test_exception_text_follows_the_cause_chain():
    try:
        try:
            raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
        except ImportError as inner:
            raise RuntimeError("Failed to load the backend extension: torch_npu.") from inner
    except RuntimeError as exc:
        text = exception_text(exc)
    assert text.splitlines() == [
        "RuntimeError: Failed to load the backend extension: torch_npu.",
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory",
    ]
    assert map_npu_error(text, SET_ENV).kind == "cann_missing"


def test_absent_devices():
    cpu_build = no_cuda_error(None, torch_version="2.13.0+cpu")
    assert "not a CUDA build" in cpu_build.message and "2.13.0+cpu" in cpu_build.message
    assert "nvidia-smi" in no_cuda_error("12.4").hint
    assert "only 2 GPU" in no_cuda_error("12.4", count=2, index=5, requested="cuda:5").message
    assert "'cuda:5'" in no_cuda_error("12.4", count=2, index=5, requested="cuda:5").message
    assert "torch.npu.is_available() is False" in no_npu_error({}).message
    assert "ASCEND_RT_VISIBLE_DEVICES=7" in no_npu_error({"ASCEND_RT_VISIBLE_DEVICES": "7"}).message
    err = cannot_run(no_npu_error({}, count=1, index=3, requested="npu:3"), "npu:3")
    assert isinstance(err, CannotRun) and err.exit_code == 2 and "npu:3" in err.message
    err = cannot_run(map_npu_error("No module named 'torch_npu'", {}), "npu")
    assert err.message.startswith("device 'npu' requested: ") and err.details["kind"] == "not_installed"


def test_cann_version_from_files(tmp_path):
    assert cann_version_from_path(None) is None
    assert cann_version_from_path(str(tmp_path)) is None
    (tmp_path / "aarch64-linux").mkdir()
    (tmp_path / "aarch64-linux" / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=8.0.RC3\n")
    assert cann_version_from_path(str(tmp_path)) == "8.0.RC3"


def test_cann_version_from_compiler_info_and_version_cfg(tmp_path):
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "version.info").write_text("Version=7.0.0.5.242\n")
    assert cann_version_from_path(str(tmp_path)) == "7.0.0.5.242"
    other = tmp_path / "other"
    other.mkdir()
    (other / "version.cfg").write_text("# version\nruntime_running_version=[7.0.0.5.242:8.1.RC1]\n")
    assert cann_version_from_path(str(other)) == "8.1.RC1"

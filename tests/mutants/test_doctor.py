"""Every hazard and the drift/diagnose functions, pinned check by check on small in-memory facts.

Each test compares whole checks (name, status, detail, fix), so a changed word, operator or
branch in envkit/jobs/doctor/hazards.py or diagnose.py shows. No probe, no subprocess: Facts are built here.
"""

from __future__ import annotations

import pytest

from envkit.core.matrix import load_matrix
from envkit.errors import BadInput, CannotRun, Where
from envkit.jobs.doctor import hazards as hz
from envkit.jobs.doctor.diagnose import _equal, drift, observe, validate
from envkit.jobs.doctor.facts import Cann, Facts
from envkit.jobs.doctor.observe import CannInstall, Evidence, ProbeResult, PythonProbe
from envkit.jobs.doctor.parsers import (
    BoardInfo,
    ChipIdentity,
    ChipRow,
    DriverInfo,
    FirmwareInfo,
    InstallRecord,
    NpuSmiInfo,
    OsRelease,
    ProcessRow,
)
from envkit.jobs.doctor.report import Check, Drift, Observed, ObservedValue

DRV_SRC = "/usr/local/Ascend/driver/version.info"
FW_SRC = "/usr/local/Ascend/firmware/version.info"
ENV_SRC = "/etc/environment"
PY_SRC = "/usr/bin/python3"
DEFAULT_SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"


def _probe(**kw) -> ProbeResult:
    base = dict(
        root="/",
        host=True,
        env={},
        env_source=ENV_SRC,
        env_known=True,
        install_record=Evidence(source="/etc/ascend_install.info"),
        driver_version_info=Evidence(source=DRV_SRC),
        firmware_version_info=Evidence(source=FW_SRC),
        cann=[],
        nnal=None,
        nnal_dir=None,
        os_release=Evidence(source="/etc/os-release"),
        arch_hint=None,
        dev_davinci=[],
        dev_control={},
        npu_smi_path=None,
        npu_smi_skipped=None,
        npu_smi=None,
        boards=[],
        python=PythonProbe(source=PY_SRC),
        path_exists={},
    )
    base.update(kw)
    return ProbeResult(**base)


def _cann(version="8.5.0", layout="cann-versioned", path="/usr/local/Ascend/cann-8.5.0", **kw) -> Cann:
    inst = dict(layout=layout, path=path, resolved=path, dir_version=None, runtime_dir=True, compiler_dir=True)
    inst.update(kw)
    return Cann(version=version, source=f"{path}/version.info", install=CannInstall(**inst))


def _facts(packages: dict | None = None, *, probe: dict | None = None, **kw) -> Facts:
    """Facts with `packages` ({name: version or metadata dict}); None: no Python was read."""
    python = None
    if packages is not None:
        python = {"python": "3.11.13", "packages": {k: {"version": v} if isinstance(v, str) else v for k, v in packages.items()}}
    return Facts(probe=_probe(**(probe or {})), python=python, **kw)


def _chk(name: str, status: str, detail: str, fix: str | None = None) -> Check:
    return Check(name=name, status=status, detail=detail, fix=fix)


# --------------------------------------------------------------------------- torch_npu without CANN
TNC = "torch_npu without CANN"


def test_torch_npu_without_cann_every_branch():
    assert hz.torch_npu_without_cann(_facts({})) == _chk(TNC, "ok", "torch_npu is not installed")
    assert hz.torch_npu_without_cann(_facts(None, cann=_cann())) == _chk(TNC, "ok", "torch_npu is not installed")
    assert hz.torch_npu_without_cann(_facts({"torch_npu": "2.6.0.post5"})) == _chk(
        TNC,
        "fail",
        "torch_npu 2.6.0.post5 is installed but no CANN toolkit was found; `import torch_npu` fails with "
        '"ImportError: libhccl.so: cannot open shared object file"',
        "install the CANN toolkit and operator package that match torch_npu (see `envkit stack`), then "
        "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`",
    )
    assert hz.torch_npu_without_cann(_facts({"torch_npu": "2.6.0"}, cann=_cann())) == _chk(
        TNC, "ok", "torch_npu 2.6.0 with CANN 8.5.0"
    )


@pytest.mark.parametrize(
    "runtime, compiler, lacks",
    [(False, True, "runtime/"), (True, False, "compiler/"), (False, False, "runtime/, compiler/")],
)
def test_torch_npu_with_a_partial_cann(runtime, compiler, lacks):
    cann = _cann("8.3.RC1", path="/opt/cann", runtime_dir=runtime, compiler_dir=compiler)
    assert hz.torch_npu_without_cann(_facts({"torch_npu": "2.6.0"}, cann=cann)) == _chk(
        TNC,
        "fail",
        f"CANN 8.3.RC1 at /opt/cann lacks {lacks}; torch_npu's "
        'import check reports "ASCEND_RUNTIME_PATH/ASCEND_COMPILER_PATH ... does not exist"',
        "reinstall the CANN toolkit 8.3.RC1 (a partial copy of /usr/local/Ascend is not enough)",
    )


# --------------------------------------------------------------------------- CUDA torch
CUDA = "CUDA torch with torch_npu"


def test_torch_cuda_signals():
    assert hz._torch_cuda_signals({"version": "2.6.0"}) == []
    assert hz._torch_cuda_signals({"version": "2.6.0+cpu", "requires": None, "cuda_files": None}) == []
    assert hz._torch_cuda_signals({"version": "2.6.0+CU124"}) == ["local label +cu124"]
    assert hz._torch_cuda_signals({"version": "2.6.0+rocm6.1"}) == ["local label +rocm6.1"]
    pkg = {
        "version": "2.6.0+cu124",
        "requires": [
            'nvidia-extra-x; extra  == "cuda"',
            'nvidia-other; extra == "cuda"',
            "filelock",
            "  nvidia-cublas-cu12==12.4.5.8",
            "nvidia-cudnn-cu12",
        ],
        "cuda_files": ["torch/lib/libc10_cuda.so", "torch/lib/libtorch_cuda.so"],
    }
    assert hz._torch_cuda_signals(pkg) == [
        "local label +cu124",
        "requires nvidia-cublas-cu12",
        "ships libc10_cuda.so",
    ]
    assert hz._torch_cuda_signals({"version": "2.6.0", "cuda_files": ["libcudart.so.12"]}) == ["ships libcudart.so.12"]


def test_cuda_torch_with_torch_npu_every_branch():
    assert hz.cuda_torch_with_torch_npu(_facts({"torch_npu": "2.6.0"})) == _chk(CUDA, "ok", "torch is not installed")
    assert hz.cuda_torch_with_torch_npu(_facts({"torch": "2.6.0+cpu", "torch_npu": "2.6.0"})) == _chk(
        CUDA, "ok", "torch 2.6.0+cpu is a CPU build"
    )
    cuda = {"version": "2.6.0+cu124", "requires": ["nvidia-nccl-cu12"]}
    assert hz.cuda_torch_with_torch_npu(_facts({"torch": cuda})) == _chk(
        CUDA,
        "ok",
        "torch 2.6.0+cu124 is a CUDA build (local label +cu124; requires nvidia-nccl-cu12); torch_npu is not installed",
    )
    assert hz.cuda_torch_with_torch_npu(_facts({"torch": cuda, "torch_npu": "2.6.0.post5"})) == _chk(
        CUDA,
        "fail",
        "torch 2.6.0+cu124 is a CUDA build (local label +cu124; requires nvidia-nccl-cu12) next to torch_npu 2.6.0.post5; "
        '`import torch` fails with "RuntimeError: Two accelerators cannot be used at the same time in PyTorch: npu and cuda"',
        "pip install --force-reinstall 'torch==2.6.0+cpu' --index-url https://download.pytorch.org/whl/cpu "
        "(x86_64; on aarch64 the PyPI wheel torch==2.6.0 is the CPU build); pip uninstall the nvidia-* packages",
    )


# --------------------------------------------------------------------------- numpy 2
NP = "numpy 2 where <2 is needed"
NP_FIX = "pip install 'numpy<2' (the lock's numpy if you have one)"
NP_SYMPTOM = ' (symptom: "A module that was compiled using NumPy 1.x cannot be run in NumPy 2")'


def _np_fail(numpy: str, *reasons: str) -> Check:
    return _chk(NP, "fail", f"numpy {numpy} is installed but " + "; ".join(reasons) + NP_SYMPTOM, NP_FIX)


def _np_ok(numpy: str) -> Check:
    return _chk(NP, "ok", f"numpy {numpy}; nothing installed or locked asks for numpy < 2")


def test_numpy_two_absent_unparsed_and_old():
    assert hz.numpy_two(_facts(None)) == _chk(NP, "ok", "numpy is not installed")
    assert hz.numpy_two(_facts({"torch": "2.6.0"})) == _chk(NP, "ok", "numpy is not installed")
    assert hz.numpy_two(_facts({"torch_npu": "2.6.0"})) == _chk(
        NP,
        "warn",
        'numpy is not installed; CANN\'s Python dependencies need it (missing ones end in "EH9999 ... 500001")',
        "pip install 'numpy<2' decorator sympy cffi pyyaml pathlib2 psutil protobuf scipy requests absl-py attrs",
    )
    assert hz.numpy_two(_facts({"numpy": "two"})) == _chk(NP, "warn", "unparsed: numpy version 'two'")
    assert hz.numpy_two(_facts({"numpy": "1.99.9", "torch": "2.1.0"})) == _chk(NP, "ok", "numpy 1.99.9")
    assert hz.numpy_two(_facts({"numpy": "2.0.0"})) == _np_ok("2.0.0")


def test_numpy_two_metadata_of_each_owner():
    req = {"requires": ["numpy<2.0"]}
    packages = {
        "numpy": "2.1.0",
        "torch": {"version": "2.6.0", **req},
        "torch_npu": {"version": "2.6.0.post5", "requires": ["NumPy>=1.0,<2"]},
        "transformers": {"version": "4.40.0", **req},
        "accelerate": {"version": "0.30.0", **req},
    }
    assert hz.numpy_two(_facts(packages)) == _np_fail(
        "2.1.0",
        "torch 2.6.0 requires numpy<2.0 (its METADATA)",
        "torch_npu 2.6.0.post5 requires numpy<2,>=1.0 (its METADATA)",
        "transformers 4.40.0 requires numpy<2.0 (its METADATA)",
        "accelerate 0.30.0 requires numpy<2.0 (its METADATA)",
    )


def test_numpy_two_requirements_that_do_not_count():
    torch = {
        "version": "2.6.0",
        "requires": [
            "not a requirement ((",
            "numpy",  # no specifier
            "numpy>=1.22",  # allows 2.x
            'numpy<2; extra == "test"',
            "scipy<2",
            'numpy<1.27; python_version >= "3"',  # a marker that is not an extra counts
        ],
    }
    assert hz.numpy_two(_facts({"numpy": "2.2.0", "torch": torch})) == _np_fail(
        "2.2.0", "torch 2.6.0 requires numpy<1.27 (its METADATA)"
    )
    # a numpy release candidate is judged with pre-releases allowed: 2.0.0rc1 satisfies numpy>=1.22,
    # and (PEP 440) not numpy<2
    rc = _facts({"numpy": "2.0.0rc1", "torch": {"version": "2.6.0", "requires": ["numpy>=1.22"]}})
    assert hz.numpy_two(rc) == _np_ok("2.0.0rc1")
    rc = _facts({"numpy": "2.0.0rc1", "torch": {"version": "2.6.0", "requires": ["numpy<2"]}})
    assert hz.numpy_two(rc) == _np_fail("2.0.0rc1", "torch 2.6.0 requires numpy<2 (its METADATA)")
    # owners are looked at one by one: no torch, still accelerate's METADATA
    later = _facts({"numpy": "2.0.0", "accelerate": {"version": "0.30.0", "requires": ["numpy<2"]}})
    assert hz.numpy_two(later) == _np_fail("2.0.0", "accelerate 0.30.0 requires numpy<2 (its METADATA)")
    no_requires = _facts({"numpy": "2.0.0", "torch": {"version": "2.6.0", "requires": None}})
    assert hz.numpy_two(no_requires) == _np_ok("2.0.0")


def test_numpy_two_against_the_lock():
    f = _facts({"numpy": "2.0.2"})
    assert hz.numpy_two(f, {"numpy": "1.26.4"}) == _np_fail("2.0.2", "the lock pins numpy 1.26.4")
    assert hz.numpy_two(f, {"numpy": "1.99"}) == _np_fail("2.0.2", "the lock pins numpy 1.99")
    assert hz.numpy_two(f, {"numpy": "2.0"}) == _np_ok("2.0.2")
    assert hz.numpy_two(f, {"numpy": "not-a-version!"}) == _np_ok("2.0.2")
    assert hz.numpy_two(f, {"numpy": ""}) == _np_ok("2.0.2")
    assert hz.numpy_two(f, {"torch": "2.6.0"}) == _np_ok("2.0.2")
    assert hz.numpy_two(f, {}) == _np_ok("2.0.2")
    assert hz.numpy_two(f) == _np_ok("2.0.2")


def test_numpy_two_with_old_torch_and_cann_8_2():
    def check(torch=None, cann=None):
        packages = {"numpy": "2.0.0"} | ({"torch": torch} if torch else {})
        return hz.numpy_two(_facts(packages, cann=_cann(cann) if cann else None))

    assert check(torch="2.1.9") == _np_fail("2.0.0", "torch 2.1.9 was built against numpy 1.x (hiyouga/LlamaFactory#4382)")
    assert check(torch="1.13.0") == _np_fail("2.0.0", "torch 1.13.0 was built against numpy 1.x (hiyouga/LlamaFactory#4382)")
    assert check(torch="2.2.0") == _np_ok("2.0.0")
    assert check(torch="nightly?") == _np_ok("2.0.0")
    assert check(cann="8.2.RC1") == _np_fail("2.0.0", "CANN 8.2.RC1 still needs numpy < 2.0 (vllm-project/vllm-ascend#2210)")
    assert check(cann="8.3.RC1") == _np_ok("2.0.0")
    assert check(cann="8.1.RC1") == _np_ok("2.0.0")
    assert check(cann="???") == _np_ok("2.0.0")
    both = hz.numpy_two(_facts({"numpy": "2.0.0", "torch": "2.1.0"}, cann=_cann("8.2.RC1")), {"numpy": "1.26.4"})
    assert both == _np_fail(
        "2.0.0",
        "the lock pins numpy 1.26.4",
        "torch 2.1.0 was built against numpy 1.x (hiyouga/LlamaFactory#4382)",
        "CANN 8.2.RC1 still needs numpy < 2.0 (vllm-project/vllm-ascend#2210)",
    )


def test_numpy_two_version_packaging_cannot_read_still_meets_the_lock():
    """2.0.0_1 is an Ascend-style spelling PEP 440 refuses: METADATA cannot judge it, the lock still does."""
    f = _facts({"numpy": "2.0.0_1", "torch": {"version": "2.6.0", "requires": ["numpy<2"]}})
    assert hz.numpy_two(f) == _np_ok("2.0.0_1")
    assert hz.numpy_two(f, {"numpy": "1.26.4"}) == _np_fail("2.0.0_1", "the lock pins numpy 1.26.4")


# --------------------------------------------------------------------------- set_env.sh
SE = "set_env.sh not sourced"
SE_DETAIL_TAIL = " (/etc/environment); torch_npu then says \"Please run 'source set_env.sh' in the CANN installation path.\""
HOME, OPP = "/usr/local/Ascend/cann-8.5.0", "/usr/local/Ascend/cann-8.5.0/opp"


def test_set_env_path():
    assert hz._set_env_path(_facts()) == DEFAULT_SET_ENV
    assert hz._set_env_path(_facts(cann=_cann(set_env="/opt/x/set_env.sh"))) == "/opt/x/set_env.sh"
    assert (
        hz._set_env_path(_facts(cann=_cann(layout="cann", path="/usr/local/Ascend/cann"))) == "/usr/local/Ascend/cann/set_env.sh"
    )
    assert hz._set_env_path(_facts(cann=_cann(layout="toolkit-latest"))) == DEFAULT_SET_ENV


def test_set_env_not_sourced_nothing_to_source_and_unknown_env():
    assert hz.set_env_not_sourced(_facts()) == _chk(SE, "ok", "no CANN found: nothing to source")
    f = _facts(cann=_cann(), probe={"env_known": False, "env_source": "an image: no --env-file"})
    assert hz.set_env_not_sourced(f) == _chk(
        SE,
        "warn",
        "environment unknown: an image: no --env-file",
        "pass --env-file with the image's environment (podman image inspect --format "
        "'{{range .Config.Env}}{{println .}}{{end}}' IMAGE > env.txt)",
    )


def test_set_env_sourced():
    env = {"ASCEND_HOME_PATH": HOME, "ASCEND_OPP_PATH": OPP}
    f = _facts(cann=_cann(), probe={"env": env, "path_exists": {HOME: True, OPP: True}})
    assert hz.set_env_not_sourced(f) == _chk(SE, "ok", f"ASCEND_HOME_PATH={HOME}, ASCEND_OPP_PATH={OPP}")


def test_set_env_not_sourced_problems_status_and_fix():
    unset = _facts({"torch_npu": "2.6.0"}, cann=_cann(set_env="/opt/c/set_env.sh"), probe={"env": {"ASCEND_HOME_PATH": ""}})
    assert hz.set_env_not_sourced(unset) == _chk(
        SE,
        "fail",
        "ASCEND_HOME_PATH is not set; ASCEND_OPP_PATH is not set" + SE_DETAIL_TAIL,
        "source /opt/c/set_env.sh (add it to ~/.bashrc or the image's ENTRYPOINT)",
    )
    env = {"ASCEND_HOME_PATH": HOME, "ASCEND_OPP_PATH": OPP}
    gone = _facts(
        {}, cann=_cann(), probe={"env": env, "path_exists": {HOME: True, OPP: False}, "nnal_dir": "/usr/local/Ascend/nnal/atb"}
    )
    assert hz.set_env_not_sourced(gone) == _chk(
        SE,
        "warn",
        f"ASCEND_OPP_PATH={OPP} does not exist" + SE_DETAIL_TAIL,
        f"source {DEFAULT_SET_ENV} && source /usr/local/Ascend/nnal/atb/set_env.sh (add it to ~/.bashrc or the image's ENTRYPOINT)",
    )
    neither = _facts(None, cann=_cann(), probe={"env": env})  # paths never looked at: not there
    assert hz.set_env_not_sourced(neither).detail == (
        f"ASCEND_HOME_PATH={HOME} does not exist; ASCEND_OPP_PATH={OPP} does not exist" + SE_DETAIL_TAIL
    )
    assert hz.set_env_not_sourced(neither).status == "warn"


# --------------------------------------------------------------------------- driver / firmware
DF = "driver/firmware compatibility"
DF_FIX = (
    "install the firmware and driver of one HDK release (upgrade: firmware first, then driver; "
    "first install: driver, then firmware), then reboot"
)
DF_TAIL = ' (the driver logs "driver and firmware packages do not match")'


def _drv(version="24.1.rc3", ranges=(("7.5.0", "7.5.99"),)) -> DriverInfo:
    text = ",".join(f"[{a},{b}]" for a, b in ranges) if ranges else None
    return DriverInfo(version=version, compatible_fw=list(ranges) if ranges else None, compatible_fw_text=text)


def _fw(version="7.5.0.1.129", ranges=(("24.1", "24.1."),)) -> FirmwareInfo:
    text = ",".join(f"[{a},{b}]" for a, b in ranges) if ranges else None
    return FirmwareInfo(
        version=version, package_version="24.1.rc3", compatible_drv=list(ranges) if ranges else None, compatible_drv_text=text
    )


def _board(npu_id=0, compat=None, sw="24.1.rc3", fw="7.5.0.1.129") -> BoardInfo:
    return BoardInfo(npu_id=npu_id, software_version=sw, firmware_version=fw, compatibility=compat, fields={})


def test_driver_firmware_not_checked():
    ok = _chk(DF, "ok", "not checked: driver and firmware versions are not both visible")
    assert hz.driver_firmware_mismatch(_facts()) == ok
    assert hz.driver_firmware_mismatch(_facts(driver=_drv())) == ok
    assert hz.driver_firmware_mismatch(_facts(driver=_drv(ranges=None), firmware=_fw(ranges=None))) == ok
    assert hz.driver_firmware_mismatch(_facts(firmware=_fw())) == ok  # the firmware's ranges need a driver


def test_driver_firmware_both_ways_inside():
    f = _facts(driver=_drv(), firmware=_fw())
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF,
        "ok",
        "firmware 7.5.0.1.129 in driver's compatible_version_fw [7.5.0,7.5.99]; "
        "driver 24.1.rc3 in firmware's compatible_version_drv [24.1,24.1.]",
    )


def test_driver_firmware_both_ways_outside():
    f = _facts(driver=_drv("23.0.6", ranges=(("7.1.0", "7.1.99"), ("7.3.0", "7.3.99"))), firmware=_fw())
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF,
        "fail",
        "firmware 7.5.0.1.129 is outside the driver 23.0.6's compatible_version_fw [7.1.0,7.1.99],[7.3.0,7.3.99]; "
        "driver 23.0.6 is outside the firmware 7.5.0.1.129's compatible_version_drv [24.1,24.1.]" + DF_TAIL,
        DF_FIX,
    )


def test_driver_firmware_unparsed_versions():
    f = _facts(driver=_drv("weird!"), firmware=_fw("bad!"))
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF, "fail", "unparsed: firmware version 'bad!'; unparsed: driver version 'weird!'" + DF_TAIL, DF_FIX
    )


def test_driver_firmware_from_the_boards():
    # no firmware version.info: the first board that names a firmware version stands in for it
    boards = [_board(0, fw=None), _board(1, fw="7.1.0.5"), _board(2, fw="7.5.0.1")]
    f = _facts(driver=_drv(), boards=boards)
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF, "fail", "firmware 7.1.0.5 is outside the driver 24.1.rc3's compatible_version_fw [7.5.0,7.5.99]" + DF_TAIL, DF_FIX
    )
    # a firmware version.info wins over the boards
    f = _facts(driver=_drv(), firmware=_fw(ranges=None), boards=[_board(0, fw="7.1.0.5")])
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF, "ok", "firmware 7.5.0.1.129 in driver's compatible_version_fw [7.5.0,7.5.99]"
    )


def test_driver_firmware_board_compatibility():
    f = _facts(boards=[_board(0, " ok "), _board(None, "NOK", sw="23.0.6", fw="7.5.0.1"), _board(3, "Warn")])
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF,
        "fail",
        "npu-smi board None reports Compatibility NOK (driver 23.0.6, firmware 7.5.0.1)".replace("None", "?")
        + "; npu-smi board 3 reports Compatibility Warn (driver 24.1.rc3, firmware 7.5.0.1.129)"
        + DF_TAIL,
        DF_FIX,
    )
    f = _facts(boards=[_board(0, "OK"), _board(1, " ok ")])
    assert hz.driver_firmware_mismatch(f) == _chk(
        DF, "ok", "npu-smi board 0: Compatibility OK; npu-smi board 1: Compatibility  ok "
    )


# --------------------------------------------------------------------------- NPU held
HELD = "NPU held by another process"


def _npu(chips, processes=()) -> NpuSmiInfo:
    return NpuSmiInfo(version="24.1.rc3", second_column="none", chips=list(chips), processes=list(processes), idle_npus=[])


def _chip(npu, chip=0, phy_id=None, device=None) -> ChipRow:
    return ChipRow(npu=npu, chip=chip, name="910B3", health="OK", phy_id=phy_id, device=device)


def test_visible():
    assert hz._visible({}) is None
    assert hz._visible({"ASCEND_RT_VISIBLE_DEVICES": " "}) is None
    assert hz._visible({"ASCEND_RT_VISIBLE_DEVICES": ""}) is None
    assert hz._visible({"ASCEND_RT_VISIBLE_DEVICES": " 0, x,3 ,,12"}) == {0, 3, 12}
    assert hz._visible({"ASCEND_RT_VISIBLE_DEVICES": "x"}) == set()


def test_device_index():
    assert hz._device_index(_facts()) == {}
    chips = [_chip(0, 0, phy_id=4), _chip(0, 1, device=7), _chip(1, 0), _chip(1, 1, phy_id=0, device=9)]
    assert hz._device_index(_facts(npu=_npu(chips))) == {(0, 0): 4, (0, 1): 7, (1, 0): 2, (1, 1): 0}


def test_npu_held_error_absent_and_idle():
    assert hz.npu_held(_facts(npu_error="the device is busy")) == _chk(
        HELD,
        "fail",
        "npu-smi: the device is busy",
        "find the process (on the host: `npu-smi info`, `lsof /dev/davinci*`) and stop it, or give this container another device",
    )
    assert hz.npu_held(_facts()) == _chk(HELD, "ok", "not checked: npu-smi is not available")
    assert hz.npu_held(_facts(npu=_npu([_chip(0), _chip(1)]))) == _chk(HELD, "ok", "no processes on 2 chip(s)")


def test_npu_held_processes_and_visible_devices():
    procs = [
        ProcessRow(npu=0, chip=0, pid=11, name="python", memory_mb=3000),
        ProcessRow(npu=1, chip=0, pid=22, name="vllm"),
        ProcessRow(npu=5, chip=0, pid=33, name="ghost", memory_mb=0),
    ]
    info = _npu([_chip(0), _chip(1)], procs)
    texts = [
        "NPU 0 chip 0 (device 0): pid 11 python, 3000 MB",
        "NPU 1 chip 0 (device 1): pid 22 vllm",
        "NPU 5 chip 0 (device None): pid 33 ghost, 0 MB",
    ]
    fix = "stop those processes (`kill <pid>`), or point ASCEND_RT_VISIBLE_DEVICES at free chips"
    assert hz.npu_held(_facts(npu=info)) == _chk(HELD, "fail", "; ".join(texts), fix)
    blank = _facts(npu=info, probe={"env": {"ASCEND_RT_VISIBLE_DEVICES": ""}})
    assert hz.npu_held(blank) == _chk(HELD, "fail", "; ".join(texts), fix)
    one = _facts(npu=info, probe={"env": {"ASCEND_RT_VISIBLE_DEVICES": "1"}})
    assert hz.npu_held(one) == _chk(HELD, "fail", texts[1], fix)
    free = _facts(npu=info, probe={"env": {"ASCEND_RT_VISIBLE_DEVICES": "2,3"}})
    assert hz.npu_held(free) == _chk(HELD, "ok", "busy chips are outside ASCEND_RT_VISIBLE_DEVICES: " + "; ".join(texts))


# --------------------------------------------------------------------------- npu devices
DEV = "npu devices"
CONTROL = {"davinci_manager": True, "devmm_svm": True, "hisi_hdc": True}


def test_npu_devices_without_nodes():
    assert hz.npu_devices(_facts(probe={"host": False})) == _chk(
        DEV, "ok", "no /dev/davinci* in the root: an image gets its devices at run time"
    )
    none_fix = "run on an Ascend host, or in a container started with " + hz.DEVICE_FLAGS
    assert hz.npu_devices(_facts()) == _chk(DEV, "warn", "no /dev/davinci* and no npu-smi: this host has no Ascend NPU", none_fix)
    assert hz.npu_devices(_facts(probe={"npu_smi_path": "/usr/local/bin/npu-smi"})) == _chk(
        DEV, "warn", "no /dev/davinci* and npu-smi lists no chip: this host has no Ascend NPU", none_fix
    )
    # an image with a driver in it is still an image
    assert hz.npu_devices(_facts(driver=_drv(), probe={"host": False})).status == "ok"


def test_npu_devices_nodes_missing_with_evidence():
    fix = "start the container with " + hz.DEVICE_FLAGS + "; on a host, reload the driver or reboot"

    def detail(evidence):
        return f"device nodes missing: {evidence} but there is no /dev/davinci*"

    assert hz.npu_devices(_facts(npu=_npu([_chip(0)]), npu_error="x")) == _chk(DEV, "fail", detail("npu-smi lists chips"), fix)
    assert hz.npu_devices(_facts(npu_error="x", driver=_drv())) == _chk(DEV, "fail", detail("npu-smi answers"), fix)
    assert hz.npu_devices(_facts(driver=_drv())) == _chk(DEV, "fail", detail(f"the driver is installed ({DRV_SRC})"), fix)


def test_npu_devices_control_nodes_missing():
    control = {"davinci_manager": False, "devmm_svm": True, "hisi_hdc": False}
    f = _facts(probe={"dev_davinci": ["davinci0", "davinci1", "davinci7"], "dev_control": control})
    assert hz.npu_devices(f) == _chk(
        DEV,
        "fail",
        "device nodes missing: /dev/davinci_manager, /dev/hisi_hdc (have 3 davinci node(s), /dev/davinci0../dev/davinci7)".replace(
            "../dev/", ".."
        ),
        "add --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc",
    )
    one = _facts(probe={"dev_davinci": ["davinci3"], "dev_control": {"hisi_hdc": False}})
    assert hz.npu_devices(one).detail == "device nodes missing: /dev/hisi_hdc (have 1 davinci node(s), /dev/davinci3)"


def test_npu_devices_present():
    f = _facts(probe={"dev_davinci": ["davinci0"], "dev_control": CONTROL})
    assert hz.npu_devices(f) == _chk(DEV, "ok", "1 davinci node(s) (/dev/davinci0) and the control nodes")
    # a container sees fewer nodes than npu-smi lists chips
    f = _facts(npu=_npu([_chip(0), _chip(1)]), probe={"dev_davinci": ["davinci1"], "dev_control": CONTROL})
    assert hz.npu_devices(f) == _chk(
        DEV,
        "ok",
        "1 davinci node(s) (/dev/davinci1) and the control nodes (npu-smi lists 2 chips: a container sees only its own)",
    )
    f = _facts(npu=_npu([_chip(0), _chip(1)]), probe={"dev_davinci": ["davinci0", "davinci1"], "dev_control": CONTROL})
    assert hz.npu_devices(f) == _chk(DEV, "ok", "2 davinci node(s) (/dev/davinci0..davinci1) and the control nodes")


def test_npu_devices_visible_devices():
    nodes = {"dev_davinci": ["davinci0", "davinci1"], "dev_control": CONTROL}
    fix = "set ASCEND_RT_VISIBLE_DEVICES to ids below the chip count"
    base = "2 davinci node(s) (/dev/davinci0..davinci1) and the control nodes"
    ok = _facts(probe={**nodes, "env": {"ASCEND_RT_VISIBLE_DEVICES": "0,1"}})
    assert hz.npu_devices(ok) == _chk(DEV, "ok", base + "; ASCEND_RT_VISIBLE_DEVICES=0,1")
    beyond = _facts(probe={**nodes, "env": {"ASCEND_RT_VISIBLE_DEVICES": "3,2,1"}})
    assert hz.npu_devices(beyond) == _chk(
        DEV, "warn", base + "; ASCEND_RT_VISIBLE_DEVICES=3,2,1 names device(s) [2, 3] this host does not have", fix
    )
    # with npu-smi, the chip count decides (four chips, two nodes in this container)
    chips = _npu([_chip(0), _chip(1), _chip(2), _chip(3)])
    assert hz.npu_devices(_facts(npu=chips, probe={**nodes, "env": {"ASCEND_RT_VISIBLE_DEVICES": "3"}})) == _chk(
        DEV, "ok", base + "; ASCEND_RT_VISIBLE_DEVICES=3"
    )
    assert hz.npu_devices(_facts(npu=chips, probe={**nodes, "env": {"ASCEND_RT_VISIBLE_DEVICES": "4"}})) == _chk(
        DEV, "warn", base + "; ASCEND_RT_VISIBLE_DEVICES=4 names device(s) [4] this host does not have", fix
    )


# --------------------------------------------------------------------------- driver libraries, autoload
LIBS = "driver libraries"
COMMON, DRIVER = "/usr/local/Ascend/driver/lib64/common", "/usr/local/Ascend/driver/lib64/driver"


def test_driver_libraries_not_applicable():
    assert hz.driver_libraries(_facts({"torch": "2.6.0"}, driver=_drv())) is None
    assert hz.driver_libraries(_facts({"torch_npu": "2.6.0"})) is None  # no driver, no device
    assert hz.driver_libraries(_facts({"torch_npu": "2.6.0"}, driver=_drv(), probe={"host": False, "env_known": False})) is None


def test_driver_libraries_present():
    env = {"LD_LIBRARY_PATH": f"{COMMON}/::{DRIVER}:/usr/lib"}
    exists = {COMMON: True, DRIVER + "/": True}
    f = _facts({"torch_npu": "2.6.0"}, driver=_drv(), probe={"env": env, "path_exists": exists})
    assert hz.driver_libraries(f) == _chk(LIBS, "ok", f"LD_LIBRARY_PATH has {COMMON}, {DRIVER}")
    # an image whose environment is known, a host whose environment is not: both are judged
    image = _facts({"torch_npu": "2.6.0"}, driver=_drv(), probe={"env": env, "path_exists": exists, "host": False})
    assert hz.driver_libraries(image).status == "ok"
    devices_only = _facts(
        {"torch_npu": "2.6.0"}, probe={"env": env, "path_exists": exists, "env_known": False, "dev_davinci": ["davinci0"]}
    )
    assert hz.driver_libraries(devices_only).status == "ok"


def test_driver_libraries_missing_and_absent():
    f = _facts(
        {"torch_npu": "2.6.0"},
        driver=_drv(),
        cann=_cann(set_env="/opt/c/set_env.sh"),
        probe={"env": {"LD_LIBRARY_PATH": COMMON}, "path_exists": {COMMON: True}},
    )
    assert hz.driver_libraries(f) == _chk(
        LIBS,
        "warn",
        f"LD_LIBRARY_PATH lacks {DRIVER} (libascend_hal.so is not found at import)",
        "source /opt/c/set_env.sh (it adds the driver's lib64 folders)",
    )
    none = _facts({"torch_npu": "2.6.0"}, driver=_drv())
    assert hz.driver_libraries(none) == _chk(
        LIBS,
        "warn",
        f"LD_LIBRARY_PATH lacks {COMMON}, {DRIVER} (libascend_hal.so is not found at import)",
        f"source {DEFAULT_SET_ENV} (it adds the driver's lib64 folders)",
    )
    absent = _facts(
        {"torch_npu": "2.6.0"},
        driver=_drv(),
        probe={"env": {"LD_LIBRARY_PATH": f"{COMMON}:{DRIVER}:/usr/local/Ascend/driverX"}, "path_exists": {COMMON: True}},
    )
    assert hz.driver_libraries(absent) == _chk(
        LIBS,
        "fail",
        f"LD_LIBRARY_PATH lists {DRIVER}, /usr/local/Ascend/driverX but it does not exist",
        "mount the driver: -v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
    )


def test_driver_libraries_under_the_install_record_path():
    rec = InstallRecord(driver_install_path="/opt/Ascend/", fields={})
    env = {"LD_LIBRARY_PATH": f"{COMMON}:{DRIVER}:/opt/Ascend/driver/lib64/common"}
    f = _facts(
        {"torch_npu": "2.6.0"},
        driver=_drv(),
        install_record=rec,
        probe={"env": env, "path_exists": {"/opt/Ascend/driver/lib64/common": True}},
    )
    assert hz.driver_libraries(f) == _chk(
        LIBS,
        "warn",
        "LD_LIBRARY_PATH lacks /opt/Ascend/driver/lib64/driver (libascend_hal.so is not found at import)",
        f"source {DEFAULT_SET_ENV} (it adds the driver's lib64 folders)",
    )
    rec_empty = InstallRecord(driver_install_path=None, fields={})
    f = _facts(
        {"torch_npu": "2.6.0"},
        driver=_drv(),
        install_record=rec_empty,
        probe={"env": {"LD_LIBRARY_PATH": f"{COMMON}:{DRIVER}"}, "path_exists": {COMMON: True, DRIVER: True}},
    )
    assert hz.driver_libraries(f).status == "ok"


def test_autoload():
    assert hz.autoload(_facts({"torch_npu": "2.6.0"})) is None
    assert hz.autoload(_facts({}, probe={"env": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}})) is None
    for value in ("0", " 0 "):
        f = _facts({"torch_npu": "2.6.0"}, probe={"env": {"TORCH_DEVICE_BACKEND_AUTOLOAD": value}})
        assert hz.autoload(f) == _chk(
            "torch_npu autoload",
            "warn",
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch will not load torch_npu by itself",
            "`import torch_npu` explicitly, or unset TORCH_DEVICE_BACKEND_AUTOLOAD",
        )
    f = _facts({"torch_npu": "2.6.0"}, probe={"env": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}})
    assert hz.autoload(f) == _chk("torch_npu autoload", "ok", "TORCH_DEVICE_BACKEND_AUTOLOAD=1")


# --------------------------------------------------------------------------- serving frameworks
TC = "upstream triton beside triton-ascend"


def test_triton_clash():
    assert hz.triton_clash(_facts({"triton": "3.6.0"})) == _chk(TC, "ok", "triton-ascend is not installed")
    assert hz.triton_clash(_facts({"triton_ascend": "3.2.0"})) == _chk(TC, "ok", "triton-ascend 3.2.0 without upstream triton")
    assert hz.triton_clash(_facts({"triton_ascend": "3.2.0", "triton": "3.6.0"})) == _chk(
        TC,
        "fail",
        'triton 3.6.0 (upstream) is installed beside triton-ascend 3.2.0; "Community Triton and Triton-Ascend cannot '
        'coexist": vLLM Ascend fails with "Failed to import Triton kernels ... No module named \'triton.language.target_info\'"; '
        "then \"cannot import name 'AttrsDescriptor' from 'triton.backends.compiler'\"; then 'RuntimeError: 0 active drivers ([])'",
        "pip uninstall -y triton && pip install --force-reinstall --no-deps triton-ascend==3.2.0 "
        "--extra-index-url https://mirrors.huaweicloud.com/ascend/repos/pypi (and keep triton out of the closure)",
    )


TAC = "triton-ascend bound to CANN"


def test_triton_ascend_cann():
    none = _chk(TAC, "ok", "triton-ascend or CANN is not installed")
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.0"})) == none
    assert hz.triton_ascend_cann(_facts({}, cann=_cann())) == none
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "0.0.1"}, cann=_cann())) == _chk(
        TAC, "warn", "triton-ascend 0.0.1 is not in the matrix: its CANN binding is unknown"
    )
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.0"}, cann=_cann("8.5.1"))) == _chk(
        TAC, "ok", "triton-ascend 3.2.0 with CANN 8.5.1"
    )
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.0rc4"}, cann=_cann("8.3.rc2"))) == _chk(
        TAC, "ok", "triton-ascend 3.2.0rc4 with CANN 8.3.rc2"
    )
    row = load_matrix().triton_ascend("3.2.2")
    assert row.cann == ["9.1.0", "9.2.0"]
    detail = (
        "triton-ascend 3.2.2 is bound to CANN 9.1.0, 9.2.0 (versions strictly bound to CANN), "
        f"but CANN {{}} is installed ({row.source_text})"
    )
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.2"}, cann=_cann("8.5.0"))) == _chk(
        TAC, "fail", detail.format("8.5.0"), "pip install --force-reinstall --no-deps triton-ascend==3.2.0"
    )
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.2"}, cann=_cann("9.0.1"))) == _chk(
        TAC, "fail", detail.format("9.0.1"), "pip install --force-reinstall --no-deps triton-ascend==3.2.1"
    )
    assert hz.triton_ascend_cann(_facts({"triton_ascend": "3.2.2"}, cann=_cann("7.0.0"))) == _chk(
        TAC, "fail", detail.format("7.0.0"), "install a CANN that triton-ascend 3.2.2 is bound to (9.1.0, 9.2.0)"
    )


VP = "vLLM and vllm-ascend"


def test_vllm_pairing():
    assert hz.vllm_pairing(_facts({"vllm": "0.23.0"})) == _chk(VP, "ok", "vllm-ascend is not installed")
    no_plugin = {"version": "0.23.0", "platform_plugins": ["ascend_kv"]}
    assert hz.vllm_pairing(_facts({"vllm_ascend": no_plugin, "vllm": "0.23.0"})) == _chk(
        VP,
        "fail",
        "vllm-ascend 0.23.0 registers no `ascend` entry point in group vllm.platform_plugins "
        "(entry_points.txt): vLLM will not load the NPU platform and falls back or finds no device",
        "pip install --force-reinstall --no-deps vllm-ascend==0.23.0 (a wheel, not a copied source tree)",
    )
    plugin = {"version": "0.23.0", "platform_plugins": ["ascend"]}
    assert hz.vllm_pairing(_facts({"vllm_ascend": plugin, "vllm": "0.23"})) == _chk(VP, "ok", "vllm-ascend 0.23.0 with vLLM 0.23")
    assert hz.vllm_pairing(_facts({"vllm_ascend": "0.23.0", "vllm": "0.23.0"})) == _chk(
        VP, "ok", "vllm-ascend 0.23.0 with vLLM 0.23.0"
    )
    assert hz.vllm_pairing(_facts({"vllm_ascend": "0.0.1"})) == _chk(
        VP, "warn", "vllm-ascend 0.0.1 is not in the matrix: its vLLM pairing is unknown"
    )
    fix = "pip install vllm==0.23.0, then pip install vllm-ascend==0.23.0rc1 (the vendor's order)"
    assert hz.vllm_pairing(_facts({"vllm_ascend": "0.23.0rc1"})) == _chk(
        VP, "fail", "vllm-ascend 0.23.0rc1 pins vLLM 0.23.0, but vLLM is not installed", fix
    )
    assert hz.vllm_pairing(_facts({"vllm_ascend": "0.23.0rc1", "vllm": "0.23.0.post1"})) == _chk(
        VP, "fail", "vllm-ascend 0.23.0rc1 pins vLLM 0.23.0, but vLLM 0.23.0.post1 is installed", fix
    )


TR = "torch_npu replaced by vllm-ascend"


def test_torch_npu_replaced():
    assert hz.torch_npu_replaced(_facts({"vllm_ascend": "0.23.0"}), None) is None
    assert hz.torch_npu_replaced(_facts({"vllm_ascend": "0.23.0"}), {}) is None
    assert hz.torch_npu_replaced(_facts({"torch_npu": "2.6.0"}), {"torch_npu": "2.7.0"}) is None
    assert hz.torch_npu_replaced(_facts({"vllm_ascend": "0.23.0", "torch_npu": "2.6.0"}), {"torch": "2.6.0"}) == _chk(
        TR, "ok", "torch_npu 2.6.0 as locked"
    )
    assert hz.torch_npu_replaced(
        _facts({"vllm_ascend": "0.23.0", "torch_npu": "2.6.0.POST5"}), {"torch_npu": "2.6.0.post5"}
    ) == _chk(TR, "ok", "torch_npu 2.6.0.POST5 as locked")
    fix = (
        "pip install --force-reinstall --no-deps torch-npu==2.8.0 after vllm-ascend, or install from the "
        "lock's closure (`envkit bundle`, --no-deps --require-hashes)"
    )
    tail = ' is installed beside vllm-ascend 0.23.0: installing vllm-ascend replaced it (its FAQ: "TorchNPU will be overridden when installing vllm-ascend")'
    assert hz.torch_npu_replaced(_facts({"vllm_ascend": "0.23.0"}), {"torch_npu": "2.8.0"}) == _chk(
        TR, "fail", "the lock has torch_npu 2.8.0, but none" + tail, fix
    )
    assert hz.torch_npu_replaced(_facts({"vllm_ascend": "0.23.0", "torch_npu": "2.8.0.post1"}), {"torch_npu": "2.8.0"}) == _chk(
        TR, "fail", "the lock has torch_npu 2.8.0, but 2.8.0.post1" + tail, fix
    )


def test_same():
    assert hz._same("8.5", "8.5.0") and hz._same("24.1.rc3", "24.1.RC3")
    assert not hz._same("2.6.0", "2.6.0.post5")
    assert hz._same("odd!", "odd!") and not hz._same("odd!", "odd?")


def test_run_hazards_order_and_extras():
    base = [TNC, CUDA, NP, SE, DF, HELD, DEV]
    assert [c.name for c in hz.run_hazards(_facts({}))] == base
    f = _facts(
        {"torch_npu": "2.6.0", "vllm_ascend": "0.23.0"},
        driver=_drv(),
        probe={"env": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}},
    )
    checks = hz.run_hazards(f, {"torch_npu": "2.6.0"})
    assert [c.name for c in checks] == base + [TC, TAC, VP, "vllm-ascend device build", LIBS, "torch_npu autoload", TR]
    assert [c.name for c in hz.run_hazards(_facts({"triton_ascend": "3.2.0"}))] == base + [TC, TAC, VP]
    # the lock reaches numpy_two
    assert hz.run_hazards(_facts({"numpy": "2.0.0"}), {"numpy": "1.26.4"})[2] == _np_fail("2.0.0", "the lock pins numpy 1.26.4")


# --------------------------------------------------------------------------- drift
DRIFT_FIX = "reinstall the locked versions (`envkit provision`, or the lock's image), or re-lock"


def _obs(**values: str) -> Observed:
    return Observed(**{k: ObservedValue(value=v, source=f"src-{k}") for k, v in values.items()})


def test_equal():
    assert _equal("chip", " 910B ", "910b") and not _equal("chip", "910b", "910")
    assert _equal("arch", "AARCH64", "aarch64") and _equal("os", "Ubuntu22.04", "ubuntu22.04 ")
    assert not _equal("os", "ubuntu22.04", "ubuntu22.4")  # text keys are compared as text
    assert _equal("cann", "8.5", "8.5.0") and _equal("driver", "24.1.rc3", "24.1.RC3")
    assert not _equal("torch_npu", "2.6.0", "2.6.0.post5")
    assert _equal("python", " Odd! ", "odd!") and not _equal("python", "odd!", "odd?")


def test_drift_all_match_and_skipped_keys():
    obs = _obs(driver="24.1.RC3", cann="8.5.0", chip="910B", torch="2.6.0+cpu")
    lock = {"driver": "24.1.rc3", "cann": "8.5", "chip": "910b", "torch": "2.6.0", "numpy": None, "os": "  ", "mystery": "1"}
    items, check = drift(obs, lock)
    assert items == [
        Drift(component="driver", locked="24.1.rc3", observed="24.1.RC3", status="match", source="src-driver"),
        Drift(component="cann", locked="8.5", observed="8.5.0", status="match", source="src-cann"),
        Drift(component="chip", locked="910b", observed="910B", status="match", source="src-chip"),
        Drift(component="torch", locked="2.6.0", observed="2.6.0+cpu", status="match", source="src-torch"),
    ]
    assert check == _chk("lock drift", "ok", "all 4 locked components match")
    assert drift(Observed(), {}) == ([], _chk("lock drift", "ok", "all 0 locked components match"))


def test_drift_differs_and_missing():
    obs = _obs(driver="24.1.rc2.2", torch_npu="2.6.0.post5", cann="8.3.RC2", python="3.11")
    lock = {
        "driver": "24.1.rc2",
        "firmware": "24.1.rc2",
        "cann": "8.3.RC1",
        "python": "3.11",
        "torch_npu": "2.6.0",
        "numpy": 1.26,
    }
    items, check = drift(obs, lock)
    assert items == [
        Drift(component="driver", locked="24.1.rc2", observed="24.1.rc2.2", status="differs", source="src-driver"),
        Drift(component="firmware", locked="24.1.rc2", observed=None, status="not observed", source=None),
        Drift(component="cann", locked="8.3.RC1", observed="8.3.RC2", status="differs", source="src-cann"),
        Drift(component="python", locked="3.11", observed="3.11", status="match", source="src-python"),
        Drift(component="torch_npu", locked="2.6.0", observed="2.6.0.post5", status="differs", source="src-torch_npu"),
        Drift(component="numpy", locked="1.26", observed=None, status="not observed", source=None),
    ]
    assert check == _chk(
        "lock drift",
        "fail",
        "driver: locked 24.1.rc2, observed 24.1.rc2.2 (src-driver); cann: locked 8.3.RC1, observed 8.3.RC2 (src-cann); "
        "torch_npu: locked 2.6.0, observed 2.6.0.post5 (src-torch_npu); not observed: firmware, numpy",
        DRIFT_FIX,
    )
    _, only_differs = drift(_obs(torch_npu="2.6.0.post5"), {"torch_npu": "2.6.0"})
    assert only_differs == _chk("lock drift", "fail", "torch_npu: locked 2.6.0, observed 2.6.0.post5 (src-torch_npu)", DRIFT_FIX)


def test_drift_only_missing():
    items, check = drift(_obs(torch="2.6.0"), {"torch": "2.6.0", "torch_npu": "2.6.0.post5", "accelerate": "1.0"})
    assert [(d.component, d.status) for d in items] == [
        ("torch", "match"),
        ("torch_npu", "not observed"),
        ("accelerate", "not observed"),
    ]
    assert check == _chk("lock drift", "warn", "1 match; not observed: torch_npu, accelerate")
    _, none = drift(Observed(), {"cann": "8.5.0"})
    assert none == _chk("lock drift", "warn", "0 match; not observed: cann")


# --------------------------------------------------------------------------- observe
def test_observe_a_full_host():
    cann = _cann()
    cann.operator_packages = [("Ascend-cann-kernels-910b", "8.5.0", "src-k"), ("Ascend-cann-nnal", "8.5.0", "src-n")]
    f = _facts(
        {"torch": {"version": "2.6.0", "location": "/site"}, "numpy": "1.26.4", "torch_npu": "2.6.0.post5"},
        driver=DriverInfo(
            version="24.1.rc3", package_version="24.1.rc3", compatible_fw=[("7.5", "7.5.99")], compatible_fw_text="[7.5,7.5.99]"
        ),
        firmware=FirmwareInfo(version="7.5.0.1.129", package_version="24.1.rc3", compatible_drv_text="[24.1,24.1.]"),
        cann=cann,
        nnal_version="8.5.0",
        npu=NpuSmiInfo(
            version="24.1.rc3", second_column="none", chips=[_chip(0), _chip(0, 1), _chip(1)], processes=[], idle_npus=[]
        ),
        chip=ChipIdentity(chip="910b", note="from npu-smi"),
        chip_source="npu-smi info",
        arch=("aarch64", "/bin/sh"),
        os=OsRelease(id="ubuntu", version_id="22.04", pretty_name="Ubuntu 22.04.4 LTS"),
    )
    f.python["python_full"] = "3.11.13 (main)"
    obs = observe(f)
    assert obs.driver == ObservedValue(
        value="24.1.rc3", source=DRV_SRC, details={"package_version": "24.1.rc3", "compatible_version_fw": "[7.5,7.5.99]"}
    )
    assert obs.firmware == ObservedValue(
        value="24.1.rc3", source=FW_SRC, details={"firmware_version": "7.5.0.1.129", "compatible_version_drv": "[24.1,24.1.]"}
    )
    assert obs.cann == ObservedValue(
        value="8.5.0",
        source=cann.source,
        details={
            "layout": "cann-versioned",
            "path": "/usr/local/Ascend/cann-8.5.0",
            "Ascend-cann-kernels-910b": "8.5.0",
            "Ascend-cann-nnal": "8.5.0",
            "nnal": "8.5.0",
        },
    )
    assert obs.chip == ObservedValue(
        value="910b", source="npu-smi info", details={"note": "from npu-smi", "names": "910B3", "chips": "3", "npus": "2"}
    )
    assert obs.arch == ObservedValue(value="aarch64", source="/bin/sh")
    assert obs.os == ObservedValue(value=f.os.key, source="/etc/os-release", details={"pretty_name": "Ubuntu 22.04.4 LTS"})
    assert obs.python == ObservedValue(value="3.11.13", source=PY_SRC, details={"full": "3.11.13 (main)"})
    assert obs.torch == ObservedValue(value="2.6.0", source=PY_SRC, details={"location": "/site"})
    assert obs.torch_npu == ObservedValue(value="2.6.0.post5", source=PY_SRC)
    assert obs.numpy == ObservedValue(value="1.26.4", source=PY_SRC)
    assert obs.transformers is None and obs.accelerate is None


def test_observe_fallbacks():
    f = _facts(None, npu=_npu([_chip(0)]), npu_source="recorded npu-smi", firmware=FirmwareInfo(version="7.5.0.1.129"))
    assert observe(f) == Observed(driver=ObservedValue(value="24.1.rc3", source="recorded npu-smi"))
    f = _facts(None, npu=_npu([_chip(0)]), chip=ChipIdentity(chip="910b"))
    assert observe(f) == Observed(
        driver=ObservedValue(value="24.1.rc3", source="npu-smi info"),
        chip=ObservedValue(value="910b", source="npu-smi info", details={"names": "910B3", "chips": "1", "npus": "1"}),
    )
    boards = [_board(0, sw=None), _board(1, sw="24.1.rc2"), _board(2, sw="24.1.rc1")]
    f = _facts({}, boards=boards, chip=ChipIdentity(chip=None), os=OsRelease(id="openeuler"))
    f.python = {"python": ""}
    assert observe(f) == Observed(
        driver=ObservedValue(value="24.1.rc2", source="npu-smi info -t board"),
        os=ObservedValue(value=OsRelease(id="openeuler").key, source="/etc/os-release"),
    )
    f = _facts(None, chip=ChipIdentity(chip="910b"), chip_source="opp", driver=DriverInfo(version="24.1.rc3"))
    assert observe(f) == Observed(
        driver=ObservedValue(value="24.1.rc3", source=DRV_SRC), chip=ObservedValue(value="910b", source="opp")
    )


# --------------------------------------------------------------------------- validate
VAL = "stack validation"


class _Report:
    def __init__(self, valid=True, hints=(), conflicts=(), suggestions=()):
        self.valid, self.hints, self.conflicts, self.suggestions = valid, list(hints), list(conflicts), list(suggestions)

    def model_dump(self, mode):
        return {"valid": self.valid, "mode": mode}


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _validator(report=None, refuse=(), error=None):
    """A validator that refuses the keys in `refuse` (one BadInput each), raises `error`, or returns `report`."""
    calls = []

    def v(stack, *, origin, where):
        calls.append((dict(stack), origin, dict(where)))
        if error is not None:
            raise error
        for key in refuse:
            if key in stack:
                raise BadInput(f"{key} unknown", details={"key": key})
        return report

    v.calls = calls
    return v


def test_validate_nothing_observed():
    assert validate(Observed(), _validator(_Report())) == (_chk(VAL, "warn", "nothing observed to validate"), None)


def test_validate_fits():
    v = _validator(_Report(hints=["use A", "use B"]))
    check, dump = validate(_obs(cann="8.5.0", torch="2.6.0"), v)
    assert check == _chk(VAL, "ok", "the observed stack fits the matrix (2 components); hints: use A | use B")
    assert dump == {"valid": True, "mode": "json"}
    assert v.calls == [
        ({"cann": "8.5.0", "torch": "2.6.0"}, "observed", {"cann": "observed: src-cann", "torch": "observed: src-torch"})
    ]
    assert validate(_obs(cann="8.5.0"), _validator(_Report()))[0] == _chk(
        VAL, "ok", "the observed stack fits the matrix (1 components)"
    )


def test_validate_sets_unknown_values_aside():
    v = _validator(_Report(), refuse=("driver", "torch_npu"))
    check, _ = validate(_obs(driver="99.0", cann="8.5.0", torch_npu="9.9.9"), v)
    assert check == _chk(
        VAL,
        "warn",
        "the observed stack fits the matrix (1 components); not in the matrix, set aside: "
        "driver 99.0 (driver unknown); torch_npu 9.9.9 (torch_npu unknown)",
    )
    assert v.calls[-1] == ({"cann": "8.5.0"}, "observed", {"cann": "observed: src-cann"})
    everything = _validator(_Report(), refuse=("driver",))
    assert validate(_obs(driver="99.0"), everything) == (
        _chk(VAL, "warn", "nothing the matrix knows to validate; not in the matrix, set aside: driver 99.0 (driver unknown)"),
        None,
    )


def test_validate_errors():
    where_key = BadInput("bad torch", where=Where(key="torch"))
    v = _validator(_Report(), error=where_key)
    assert validate(_obs(torch="2.6.0"), v) == (
        _chk(VAL, "warn", "nothing the matrix knows to validate; not in the matrix, set aside: torch 2.6.0 (bad torch)"),
        None,
    )
    other = _validator(_Report(), error=BadInput("the matrix is broken"))
    assert validate(_obs(torch="2.6.0"), other) == (_chk(VAL, "warn", "could not validate: the matrix is broken"), None)
    cannot = _validator(_Report(), error=CannotRun("no resolver"))
    assert validate(_obs(torch="2.6.0"), cannot) == (_chk(VAL, "warn", "could not validate: no resolver"), None)


def test_validate_conflicts_and_suggestions():
    conflicts = [_Obj(summary="torch 2.6.0 needs torch_npu 2.6.x"), _Obj(summary="CANN too old")]
    sugg = [
        _Obj(change={"torch": {"from": "2.5.1", "to": "2.6.0"}, "cann": {"to": "8.5.0"}}, validated=True),
        _Obj(change={}, validated=False),
    ]
    check, dump = validate(_obs(torch="2.5.1"), _validator(_Report(valid=False, conflicts=conflicts, suggestions=sugg)))
    assert check == _chk(
        VAL,
        "fail",
        "torch 2.6.0 needs torch_npu 2.6.x; CANN too old",
        "change torch 2.5.1 -> 2.6.0, cann None -> 8.5.0 (a vendor-validated combination)",
    )
    assert dump == {"valid": False, "mode": "json"}
    unvalidated = [_Obj(change={"torch": {"from": "2.5.1", "to": "2.6.0"}}, validated=False)]
    check, _ = validate(_obs(torch="2.5.1"), _validator(_Report(valid=False, suggestions=unvalidated), refuse=()))
    assert check == _chk(VAL, "fail", "no stack satisfies the matrix", "change torch 2.5.1 -> 2.6.0")
    check, _ = validate(_obs(torch="2.5.1", driver="99"), _validator(_Report(valid=False), refuse=("driver",)))
    assert check == _chk(VAL, "fail", "no stack satisfies the matrix; not in the matrix, set aside: driver 99 (driver unknown)")


def test_validate_sets_aside_every_key():
    """Each of the twelve keys can be refused in turn; the loop gives every one of them its try."""
    from envkit.jobs.doctor.report import STACK_KEYS

    obs = _obs(**{k: "1.0" for k in STACK_KEYS})
    check, dump = validate(obs, _validator(_Report(), refuse=STACK_KEYS))
    assert dump is None
    assert check == _chk(
        VAL,
        "warn",
        "nothing the matrix knows to validate; not in the matrix, set aside: "
        + "; ".join(f"{k} 1.0 ({k} unknown)" for k in STACK_KEYS),
    )


# --------------------------------------------------------------------------- diagnose
def test_diagnose_on_an_empty_probe():
    from envkit.jobs.doctor.diagnose import diagnose

    v = _validator(_Report())
    report = diagnose(_probe(root="/empty"), validator=v)
    assert report.root == "/empty" and report.lock is None and report.drift == [] and report.validation is None
    names = [c.name for c in report.checks]
    assert names[-1] == VAL and "lock drift" not in names
    assert names[-8:-1] == [TNC, CUDA, NP, SE, DF, HELD, DEV]
    assert report.checks[-1] == _chk(VAL, "warn", "nothing observed to validate")
    assert v.calls == []
    assert report.failures == [f"{c.name}: {c.detail}" for c in report.checks if c.status == "fail"]

    locked = diagnose(
        _probe(root="/empty"), lock_stack={"cann": "8.5.0", "numpy": None, "torch": ""}, lock_path="env.lock", validator=v
    )
    assert locked.lock == "env.lock"
    assert locked.drift == [Drift(component="cann", locked="8.5.0", observed=None, status="not observed")]
    assert locked.checks[-1] == _chk("lock drift", "warn", "0 match; not observed: cann")
    assert [c.name for c in locked.checks][-2] == VAL


def test_observe_partial_details_and_every_package():
    f = _facts(
        {
            "transformers": "4.40.0",
            "accelerate": {"version": "0.30.0", "location": ""},
            "torch_npu": {"version": "2.6.0", "location": "/s"},
        },
        driver=DriverInfo(version="24.1.rc3", compatible_fw_text="[7.5,7.5.99]"),
        firmware=FirmwareInfo(version="7.5.0.1.129", package_version="24.1.rc3"),
    )
    f.python["python_full"] = ""
    assert observe(f) == Observed(
        driver=ObservedValue(value="24.1.rc3", source=DRV_SRC, details={"compatible_version_fw": "[7.5,7.5.99]"}),
        firmware=ObservedValue(value="24.1.rc3", source=FW_SRC, details={"firmware_version": "7.5.0.1.129"}),
        python=ObservedValue(value="3.11.13", source=PY_SRC),
        torch_npu=ObservedValue(value="2.6.0", source=PY_SRC, details={"location": "/s"}),
        transformers=ObservedValue(value="4.40.0", source=PY_SRC),
        accelerate=ObservedValue(value="0.30.0", source=PY_SRC),
    )
    # npu-smi without a version: the boards name the driver
    no_version = NpuSmiInfo(version=None, second_column="none", chips=[_chip(0)], processes=[], idle_npus=[])
    f = _facts(None, npu=no_version, boards=[_board(0, sw="24.1.rc1")])
    assert observe(f) == Observed(driver=ObservedValue(value="24.1.rc1", source="npu-smi info -t board"))
    # a CANN without operator packages or NNAL
    f = _facts(None, cann=_cann("9.0.0", layout="cann", path="/usr/local/Ascend/cann"))
    assert observe(f) == Observed(
        cann=ObservedValue(
            value="9.0.0",
            source="/usr/local/Ascend/cann/version.info",
            details={"layout": "cann", "path": "/usr/local/Ascend/cann"},
        )
    )


# --------------------------------------------------------------------------- survivors of the mutation run
def test_torch_cuda_signals_local_label_and_requirement_spelling():
    """The local label is everything after the first `+`; an upper-case nvidia-* requirement still counts."""
    assert hz._torch_cuda_signals({"version": "2.6.0+cu124+git1"}) == ["local label +cu124+git1"]
    assert hz._torch_cuda_signals({"version": "2.6.0", "requires": ["nvidia-CUBLAS-cu12>=12"]}) == ["requires nvidia-CUBLAS-cu12"]


def test_cuda_torch_without_a_local_label_names_its_cpu_wheel():
    torch = {"version": "2.5.1", "requires": ["nvidia-nccl-cu12"]}
    assert hz.cuda_torch_with_torch_npu(_facts({"torch": torch, "torch_npu": "2.5.1"})) == _chk(
        CUDA,
        "fail",
        "torch 2.5.1 is a CUDA build (requires nvidia-nccl-cu12) next to torch_npu 2.5.1; "
        '`import torch` fails with "RuntimeError: Two accelerators cannot be used at the same time in PyTorch: npu and cuda"',
        "pip install --force-reinstall 'torch==2.5.1+cpu' --index-url https://download.pytorch.org/whl/cpu "
        "(x86_64; on aarch64 the PyPI wheel torch==2.5.1 is the CPU build); pip uninstall the nvidia-* packages",
    )


def test_numpy_two_with_cann_8_2_spelled_in_three_parts():
    assert hz.numpy_two(_facts({"numpy": "2.1.0"}, cann=_cann("8.2.0"))) == _np_fail(
        "2.1.0", "CANN 8.2.0 still needs numpy < 2.0 (vllm-project/vllm-ascend#2210)"
    )


def test_driver_libraries_install_path_ending_in_x():
    """Only the trailing `/` of the install record's path is dropped, never other trailing characters."""
    rec = InstallRecord(driver_install_path="/opt/AscendX/", fields={})
    f = _facts({"torch_npu": "2.6.0"}, driver=_drv(), install_record=rec)
    assert hz.driver_libraries(f) == _chk(
        LIBS,
        "warn",
        "LD_LIBRARY_PATH lacks /opt/AscendX/driver/lib64/common, /opt/AscendX/driver/lib64/driver "
        "(libascend_hal.so is not found at import)",
        f"source {DEFAULT_SET_ENV} (it adds the driver's lib64 folders)",
    )


def test_drift_compares_text_keys_as_text():
    """chip/os/arch values that read as equal versions still differ as text."""
    items, _ = drift(_obs(chip="910.0", os="22.4", cann="8.5.0"), {"chip": "910", "os": "22.04", "cann": "8.5"})
    assert [(d.component, d.status) for d in items] == [("cann", "match"), ("chip", "differs"), ("os", "differs")]


def test_observe_names_every_chip_model():
    chips = [_chip(0), ChipRow(npu=1, chip=0, name="910B4", health="OK")]
    obs = observe(_facts(None, npu=_npu(chips), chip=ChipIdentity(chip="910b")))
    assert obs.chip == ObservedValue(
        value="910b", source="npu-smi info", details={"names": "910B3, 910B4", "chips": "2", "npus": "2"}
    )


def test_validate_a_report_without_hints():
    """The validator is duck-typed (Validator returns Any): a valid report need not carry `hints`."""

    class Bare:
        valid = True

        def model_dump(self, mode):
            return {"valid": True}

    check, dump = validate(_obs(cann="8.5.0"), _validator(Bare()))
    assert check == _chk(VAL, "ok", "the observed stack fits the matrix (1 components)")
    assert dump == {"valid": True}

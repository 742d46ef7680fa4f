"""Named hazards: the ways an Ascend PyTorch stack is known to break, each with its fix.

Every hazard returns one check, ``ok`` when it does not apply, so a report always shows what
was looked at. The texts quote the error users would otherwise meet (compat-facts §6).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion as PackagingInvalidVersion
from packaging.version import Version as PackagingVersion

from envkit.io import bounded
from envkit.jobs.doctor.facts import Facts
from envkit.jobs.doctor.report import Check
from envkit.versions import InvalidVersion, in_any_range, parse

DRIVER_LIBS = (
    "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/lib64/common",
    "/usr/local/Ascend/driver/lib64/driver",
)
DEVICE_FLAGS = (
    "--device /dev/davinci0 --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc "
    "-v /usr/local/dcmi:/usr/local/dcmi -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi "
    "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/ "
    "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info "
    "-v /etc/ascend_install.info:/etc/ascend_install.info"
)


def _check(name: str, status: str, detail: str, fix: str | None = None) -> Check:
    return Check(name=name, status=status, detail=detail, fix=fix)


def _set_env_path(f: Facts) -> str:
    if f.cann is not None and f.cann.install.set_env:
        return f.cann.install.set_env
    if f.cann is not None and f.cann.install.layout == "cann":
        return f"{f.cann.install.path}/set_env.sh"
    return "/usr/local/Ascend/ascend-toolkit/set_env.sh"


# --------------------------------------------------------------------------- hazards


def torch_npu_without_cann(f: Facts) -> Check:
    name = "torch_npu without CANN"
    tnpu = f.version_of("torch_npu")
    if tnpu is None:
        return _check(name, "ok", "torch_npu is not installed")
    if f.cann is None:
        return _check(
            name,
            "fail",
            f"torch_npu {tnpu} is installed but no CANN toolkit was found; `import torch_npu` fails with "
            '"ImportError: libhccl.so: cannot open shared object file"',
            "install the CANN toolkit and operator package that match torch_npu (see `envkit stack`), then "
            "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`",
        )
    inst = f.cann.install
    missing = [d for d, present in (("runtime", inst.runtime_dir), ("compiler", inst.compiler_dir)) if not present]
    if missing:
        return _check(
            name,
            "fail",
            f"CANN {f.cann.version} at {inst.resolved} lacks {', '.join(m + '/' for m in missing)}; torch_npu's "
            'import check reports "ASCEND_RUNTIME_PATH/ASCEND_COMPILER_PATH ... does not exist"',
            f"reinstall the CANN toolkit {f.cann.version} (a partial copy of /usr/local/Ascend is not enough)",
        )
    return _check(name, "ok", f"torch_npu {tnpu} with CANN {f.cann.version}")


def _torch_cuda_signals(pkg: dict) -> list[str]:
    signals: list[str] = []
    version = str(pkg.get("version", ""))
    local = version.partition("+")[2].lower()
    if local.startswith(("cu", "rocm")):
        signals.append(f"local label +{local}")
    for req in pkg.get("requires") or []:
        if "extra ==" in req.replace("  ", " "):
            continue
        m = re.match(r"\s*(nvidia-[A-Za-z0-9_.\-]+)", req)
        if m:
            signals.append(f"requires {m.group(1)}")
            break
    for path in pkg.get("cuda_files") or []:
        signals.append(f"ships {path.rsplit('/', 1)[-1]}")
        break
    return signals


def cuda_torch_with_torch_npu(f: Facts) -> Check:
    name = "CUDA torch with torch_npu"
    torch = f.package("torch")
    if torch is None:
        return _check(name, "ok", "torch is not installed")
    signals = _torch_cuda_signals(torch)
    tnpu = f.version_of("torch_npu")
    if not signals:
        return _check(name, "ok", f"torch {torch['version']} is a CPU build")
    if tnpu is None:
        return _check(name, "ok", f"torch {torch['version']} is a CUDA build ({'; '.join(signals)}); torch_npu is not installed")
    base = str(torch["version"]).partition("+")[0]
    return _check(
        name,
        "fail",
        f"torch {torch['version']} is a CUDA build ({'; '.join(signals)}) next to torch_npu {tnpu}; `import torch` fails with "
        '"RuntimeError: Two accelerators cannot be used at the same time in PyTorch: npu and cuda"',
        f"pip install --force-reinstall 'torch=={base}+cpu' --index-url https://download.pytorch.org/whl/cpu "
        f"(x86_64; on aarch64 the PyPI wheel torch=={base} is the CPU build); pip uninstall the nvidia-* packages",
    )


def _metadata_refusals(f: Facts, npv: PackagingVersion) -> list[str]:
    """The installed packages whose METADATA requires a numpy that excludes `npv`."""
    reasons: list[str] = []
    for owner in ("torch", "torch_npu", "transformers", "accelerate"):
        pkg = f.package(owner)
        if pkg is None:
            continue
        for text in pkg.get("requires") or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.name.lower() != "numpy" or (req.marker is not None and "extra" in str(req.marker)):
                continue
            if req.specifier and not req.specifier.contains(npv, prereleases=True):
                reasons.append(f"{owner} {pkg['version']} requires numpy{req.specifier} (its METADATA)")
    return reasons


def _numpy_constraints(f: Facts, numpy: str, lock_stack: dict[str, str] | None) -> list[str]:
    """Who, among what is installed or locked, refuses this numpy."""
    try:
        reasons = _metadata_refusals(f, PackagingVersion(numpy))
    except PackagingInvalidVersion:  # METADATA specifiers cannot judge it; the lock, torch and CANN still can
        reasons = []
    if lock_stack and lock_stack.get("numpy"):
        try:
            if parse(lock_stack["numpy"]).release[:1] < (2,):
                reasons.append(f"the lock pins numpy {lock_stack['numpy']}")
        except InvalidVersion:
            pass
    torch = f.version_of("torch")
    if torch:
        try:
            if parse(torch).release[:2] <= (2, 1):
                reasons.append(f"torch {torch} was built against numpy 1.x (hiyouga/LlamaFactory#4382)")
        except InvalidVersion:
            pass
    if f.cann is not None:
        try:
            if parse(f.cann.version).release[:2] == (8, 2):
                reasons.append(f"CANN {f.cann.version} still needs numpy < 2.0 (vllm-project/vllm-ascend#2210)")
        except InvalidVersion:
            pass
    return reasons


def numpy_two(f: Facts, lock_stack: dict[str, str] | None = None) -> Check:
    name = "numpy 2 where <2 is needed"
    numpy = f.version_of("numpy")
    if numpy is None:
        if f.version_of("torch_npu") is not None:
            return _check(
                name,
                "warn",
                'numpy is not installed; CANN\'s Python dependencies need it (missing ones end in "EH9999 ... 500001")',
                "pip install 'numpy<2' decorator sympy cffi pyyaml pathlib2 psutil protobuf scipy requests absl-py attrs",
            )
        return _check(name, "ok", "numpy is not installed")
    try:
        major = parse(numpy).release[0]
    except InvalidVersion:
        return _check(name, "warn", f"unparsed: numpy version {numpy!r}")
    if major < 2:
        return _check(name, "ok", f"numpy {numpy}")
    reasons = _numpy_constraints(f, numpy, lock_stack)
    if not reasons:
        return _check(name, "ok", f"numpy {numpy}; nothing installed or locked asks for numpy < 2")
    return _check(
        name,
        "fail",
        f"numpy {numpy} is installed but "
        + "; ".join(reasons)
        + ' (symptom: "A module that was compiled using NumPy 1.x cannot be run in NumPy 2")',
        "pip install 'numpy<2' (the lock's numpy if you have one)",
    )


def set_env_not_sourced(f: Facts) -> Check:
    name = "set_env.sh not sourced"
    if f.cann is None:
        return _check(name, "ok", "no CANN found: nothing to source")
    env = f.probe.env
    script = _set_env_path(f)
    if not f.probe.env_known:
        return _check(
            name,
            "warn",
            f"environment unknown: {f.probe.env_source}",
            "pass --env-file with the image's environment (podman image inspect --format "
            "'{{range .Config.Env}}{{println .}}{{end}}' IMAGE > env.txt)",
        )
    problems: list[str] = []
    for key in ("ASCEND_HOME_PATH", "ASCEND_OPP_PATH"):
        value = env.get(key)
        if not value:
            problems.append(f"{key} is not set")
        elif not f.probe.path_exists.get(value, False):
            problems.append(f"{key}={value} does not exist")
    if not problems:
        return _check(name, "ok", f"ASCEND_HOME_PATH={env['ASCEND_HOME_PATH']}, ASCEND_OPP_PATH={env['ASCEND_OPP_PATH']}")
    status = "fail" if f.version_of("torch_npu") else "warn"
    return _check(
        name,
        status,
        "; ".join(problems)
        + f" ({f.probe.env_source}); torch_npu then says \"Please run 'source set_env.sh' in the CANN installation path.\"",
        f"source {script}"
        + (" && source /usr/local/Ascend/nnal/atb/set_env.sh" if f.probe.nnal_dir else "")
        + " (add it to ~/.bashrc or the image's ENTRYPOINT)",
    )


def driver_firmware_mismatch(f: Facts) -> Check:
    name = "driver/firmware compatibility"
    fix = (
        "install the firmware and driver of one HDK release (upgrade: firmware first, then driver; "
        "first install: driver, then firmware), then reboot"
    )
    problems: list[str] = []
    checked: list[str] = []
    drv, fw = f.driver, f.firmware
    fw_version = fw.version if fw else None
    if fw_version is None:
        for board in f.boards:
            if board.firmware_version:
                fw_version = board.firmware_version
                break
    if drv is not None and drv.compatible_fw and fw_version:
        checked.append(f"firmware {fw_version} in driver's compatible_version_fw {drv.compatible_fw_text}")
        try:
            if not in_any_range(fw_version, drv.compatible_fw):
                problems.append(
                    f"firmware {fw_version} is outside the driver {drv.version}'s compatible_version_fw {drv.compatible_fw_text}"
                )
        except InvalidVersion:
            problems.append(f"unparsed: firmware version {fw_version!r}")
    if fw is not None and fw.compatible_drv and drv is not None:
        checked.append(f"driver {drv.version} in firmware's compatible_version_drv {fw.compatible_drv_text}")
        try:
            if not in_any_range(drv.version, fw.compatible_drv):
                problems.append(
                    f"driver {drv.version} is outside the firmware {fw.version}'s compatible_version_drv {fw.compatible_drv_text}"
                )
        except InvalidVersion:
            problems.append(f"unparsed: driver version {drv.version!r}")
    for board in f.boards:
        if board.compatibility:
            checked.append(f"npu-smi board {board.npu_id}: Compatibility {board.compatibility}")
            if board.compatibility.strip().upper() not in ("OK",):
                problems.append(
                    f"npu-smi board {board.npu_id if board.npu_id is not None else '?'} reports Compatibility {board.compatibility} "
                    f"(driver {board.software_version}, firmware {board.firmware_version})"
                )
    if problems:
        return _check(name, "fail", "; ".join(problems) + ' (the driver logs "driver and firmware packages do not match")', fix)
    if not checked:
        return _check(name, "ok", "not checked: driver and firmware versions are not both visible")
    return _check(name, "ok", "; ".join(checked))


def _device_index(f: Facts) -> dict[tuple[int, int], int]:
    """(NPU, chip) -> logical device id, in the order npu-smi lists the chips."""
    out: dict[tuple[int, int], int] = {}
    if f.npu is None:
        return out
    for i, c in enumerate(f.npu.chips):
        out[(c.npu, c.chip)] = c.phy_id if c.phy_id is not None else (c.device if c.device is not None else i)
    return out


def _visible(env: dict[str, str]) -> set[int] | None:
    value = env.get("ASCEND_RT_VISIBLE_DEVICES")
    if value is None or not value.strip():
        return None
    ids = set()
    for part in value.split(","):
        part = part.strip()
        if bounded.is_digits(part, 6):
            ids.add(int(part))
    return ids


def npu_held(f: Facts) -> Check:
    name = "NPU held by another process"
    if f.npu_error:
        return _check(
            name,
            "fail",
            f"npu-smi: {f.npu_error}",
            "find the process (on the host: `npu-smi info`, `lsof /dev/davinci*`) and stop it, or give this container another device",
        )
    if f.npu is None:
        return _check(name, "ok", "not checked: npu-smi is not available")
    if not f.npu.processes:
        return _check(name, "ok", f"no processes on {len(f.npu.chips)} chip(s)")
    index = _device_index(f)
    visible = _visible(f.probe.env)
    held = []
    for p in f.npu.processes:
        dev = index.get((p.npu, p.chip))
        mem = f", {p.memory_mb} MB" if p.memory_mb is not None else ""
        held.append((dev, f"NPU {p.npu} chip {p.chip} (device {dev}): pid {p.pid} {p.name}{mem}"))
    relevant = [text for dev, text in held if visible is None or dev in visible]
    if not relevant:
        return _check(name, "ok", "busy chips are outside ASCEND_RT_VISIBLE_DEVICES: " + "; ".join(t for _, t in held))
    return _check(
        name,
        "fail",
        "; ".join(relevant),
        "stop those processes (`kill <pid>`), or point ASCEND_RT_VISIBLE_DEVICES at free chips",
    )


def npu_devices(f: Facts) -> Check:
    """The NPU presence check, and the 'device nodes missing' hazard."""
    name = "npu devices"
    p = f.probe
    nodes = p.dev_davinci
    control_missing = [n for n, present in p.dev_control.items() if not present]
    if not nodes:
        if not f.npu_evidence:
            if f.image:
                return _check(name, "ok", "no /dev/davinci* in the root: an image gets its devices at run time")
            why = "no /dev/davinci* and no npu-smi" if p.npu_smi_path is None else "no /dev/davinci* and npu-smi lists no chip"
            return _check(
                name,
                "warn",
                f"{why}: this host has no Ascend NPU",
                "run on an Ascend host, or in a container started with " + DEVICE_FLAGS,
            )
        evidence = (
            "npu-smi lists chips"
            if f.npu is not None
            else ("npu-smi answers" if f.npu_error else f"the driver is installed ({p.driver_version_info.source})")
        )
        return _check(
            name,
            "fail",
            f"device nodes missing: {evidence} but there is no /dev/davinci*",
            "start the container with " + DEVICE_FLAGS + "; on a host, reload the driver or reboot",
        )
    shown = f"/dev/{nodes[0]}" + (f"..{nodes[-1]}" if len(nodes) > 1 else "")
    if control_missing:
        return _check(
            name,
            "fail",
            f"device nodes missing: {', '.join('/dev/' + n for n in control_missing)} (have {len(nodes)} davinci node(s), {shown})",
            "add --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc",
        )
    detail = f"{len(nodes)} davinci node(s) ({shown}) and the control nodes"
    visible = _visible(p.env)
    ids = {int(n[7:]) for n in nodes}
    if visible is not None:
        if f.npu is not None:
            beyond = sorted(v for v in visible if v >= len(f.npu.chips))
        else:
            beyond = sorted(v for v in visible if v >= len(nodes))
        if beyond:
            return _check(
                name,
                "warn",
                f"{detail}; ASCEND_RT_VISIBLE_DEVICES={p.env['ASCEND_RT_VISIBLE_DEVICES']} names device(s) {beyond} this host does not have",
                "set ASCEND_RT_VISIBLE_DEVICES to ids below the chip count",
            )
        detail += f"; ASCEND_RT_VISIBLE_DEVICES={p.env['ASCEND_RT_VISIBLE_DEVICES']}"
    elif f.npu is not None and len(ids) < len(f.npu.chips):
        detail += f" (npu-smi lists {len(f.npu.chips)} chips: a container sees only its own)"
    return _check(name, "ok", detail)


def driver_libraries(f: Facts) -> Check | None:
    """The driver libraries on LD_LIBRARY_PATH (only where torch_npu and a driver are present)."""
    if f.version_of("torch_npu") is None or f.image and not f.probe.env_known:
        return None
    if f.driver is None and not f.probe.dev_davinci:
        return None
    name = "driver libraries"
    entries = [e.rstrip("/") for e in f.probe.env.get("LD_LIBRARY_PATH", "").split(":") if e]
    base = "/usr/local/Ascend"
    if f.install_record is not None and f.install_record.driver_install_path:
        base = f.install_record.driver_install_path.rstrip("/")
    wanted = [f"{base}/driver/lib64/common", f"{base}/driver/lib64/driver"]
    missing = [w for w in wanted if w not in entries]
    absent = [
        e
        for e in entries
        if e.startswith(f"{base}/driver")
        and not f.probe.path_exists.get(e, False)
        and not f.probe.path_exists.get(e + "/", False)
    ]
    if absent:
        return _check(
            name,
            "fail",
            f"LD_LIBRARY_PATH lists {', '.join(absent)} but it does not exist",
            "mount the driver: -v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
        )
    if missing:
        return _check(
            name,
            "warn",
            f"LD_LIBRARY_PATH lacks {', '.join(missing)} (libascend_hal.so is not found at import)",
            f"source {_set_env_path(f)} (it adds the driver's lib64 folders)",
        )
    return _check(name, "ok", f"LD_LIBRARY_PATH has {', '.join(wanted)}")


def autoload(f: Facts) -> Check | None:
    value = f.probe.env.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
    if value is None or f.version_of("torch_npu") is None:
        return None
    if value.strip() == "0":
        return _check(
            "torch_npu autoload",
            "warn",
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch will not load torch_npu by itself",
            "`import torch_npu` explicitly, or unset TORCH_DEVICE_BACKEND_AUTOLOAD",
        )
    return _check("torch_npu autoload", "ok", f"TORCH_DEVICE_BACKEND_AUTOLOAD={value}")


# --------------------------------------------------------------------------- serving frameworks
TRITON_CLASH_ERRORS = (
    "Failed to import Triton kernels ... No module named 'triton.language.target_info'",
    "cannot import name 'AttrsDescriptor' from 'triton.backends.compiler'",
    "RuntimeError: 0 active drivers ([])",
)


def triton_clash(f: Facts) -> Check:
    """Upstream `triton` beside `triton-ascend`: both own the `triton` package, so the one installed last wins."""
    name = "upstream triton beside triton-ascend"
    ta, tr = f.version_of("triton_ascend"), f.version_of("triton")
    if ta is None:
        return _check(name, "ok", "triton-ascend is not installed")
    if tr is None:
        return _check(name, "ok", f"triton-ascend {ta} without upstream triton")
    return _check(
        name,
        "fail",
        f'triton {tr} (upstream) is installed beside triton-ascend {ta}; "Community Triton and Triton-Ascend cannot '
        f'coexist": vLLM Ascend fails with {"; then ".join(repr(e) for e in TRITON_CLASH_ERRORS)}',
        f"pip uninstall -y triton && pip install --force-reinstall --no-deps triton-ascend=={ta} "
        "--extra-index-url https://mirrors.huaweicloud.com/ascend/repos/pypi (and keep triton out of the closure)",
    )


def _matrix():  # noqa: ANN202 - the doctor judges frameworks by the matrix, like its stack validation
    from envkit.core.matrix import load_matrix

    return load_matrix()


def triton_ascend_cann(f: Facts) -> Check:
    """triton-ascend is strictly bound to the CANN releases of its row (matrices/serving.yaml)."""
    name = "triton-ascend bound to CANN"
    ta = f.version_of("triton_ascend")
    if ta is None or f.cann is None:
        return _check(name, "ok", "triton-ascend or CANN is not installed")
    row = _matrix().triton_ascend(ta)
    if row is None:
        return _check(name, "warn", f"triton-ascend {ta} is not in the matrix: its CANN binding is unknown")
    if any(_same(c, f.cann.version) for c in row.cann):
        return _check(name, "ok", f"triton-ascend {ta} with CANN {f.cann.version}")
    fits = [r.version for r in _matrix().model.triton_ascend if any(_same(c, f.cann.version) for c in r.cann)]
    fix = (
        f"pip install --force-reinstall --no-deps triton-ascend=={fits[0]}"
        if fits
        else f"install a CANN that triton-ascend {ta} is bound to ({', '.join(row.cann)})"
    )
    return _check(
        name,
        "fail",
        f"triton-ascend {ta} is bound to CANN {', '.join(row.cann)} (versions strictly bound "
        f"to CANN), but CANN {f.cann.version} is installed ({row.source_text})",
        fix,
    )


def vllm_pairing(f: Facts) -> Check:
    """vllm-ascend pins one vLLM release (matrices/serving.yaml); its platform plugin must be registered."""
    name = "vLLM and vllm-ascend"
    va, vl = f.version_of("vllm_ascend"), f.version_of("vllm")
    if va is None:
        return _check(name, "ok", "vllm-ascend is not installed")
    plugins = (f.package("vllm_ascend") or {}).get("platform_plugins")
    if plugins is not None and "ascend" not in plugins:
        return _check(
            name,
            "fail",
            f"vllm-ascend {va} registers no `ascend` entry point in group vllm.platform_plugins "
            "(entry_points.txt): vLLM will not load the NPU platform and falls back or finds no device",
            f"pip install --force-reinstall --no-deps vllm-ascend=={va} (a wheel, not a copied source tree)",
        )
    row = _matrix().vllm_ascend(va)
    if row is None:
        return _check(name, "warn", f"vllm-ascend {va} is not in the matrix: its vLLM pairing is unknown")
    if vl is None or not _same(row.vllm, vl):
        return _check(
            name,
            "fail",
            f"vllm-ascend {va} pins vLLM {row.vllm}, but vLLM {vl or 'is not installed'}" + (" is installed" if vl else ""),
            f"pip install vllm=={row.vllm}, then pip install vllm-ascend=={va} (the vendor's order)",
        )
    return _check(name, "ok", f"vllm-ascend {va} with vLLM {vl}")


def _said(device_type: str | None, soc_version: str | None) -> str:
    return f"__device_type__ = {device_type!r}" if device_type is not None else f"__soc_version__ = {soc_version!r}"


def _device_build_fix(version: str, chip: str) -> str:
    """The vendor's ways to a vllm-ascend built for `chip`: the release's image for it, a release whose PyPI wheels
    are built for it, or a source build with the chip's SOC_VERSION (matrices/serving.yaml `vllm_ascend_devices`)."""
    lm = _matrix()
    d = lm.vllm_ascend_device(chip)
    if d is None:
        families = sorted({x.chip for x in lm.model.vllm_ascend_devices})
        return (
            f"vllm-ascend builds for no device family of chip {chip} (it supports chips {', '.join(families)}): "
            "serve on one of those, or leave vllm-ascend out of this host's stack"
        )
    ways = []
    if d.image_tag is not None:
        ways.append(f"run the release's image for chip {chip}, quay.io/ascend/vllm-ascend:v{version}{d.image_tag}")
    fits = [r.version for r in lm.model.vllm_ascend if r.device_build is not None and lm.build_chip(r.device_build) == chip]
    if fits:
        shown = ", ".join(fits[:3]) + (", ..." if len(fits) > 3 else "")
        ways.append(f"install a release whose PyPI wheels are built for it ({shown}) with its vLLM")
    ways.append(
        f"build vllm-ascend {version} from source on this host with SOC_VERSION set to the chip's "
        f"{d.soc_versions[0]}* name (family {d.device_types[0]})"
    )
    return "; or ".join(ways)


def vllm_ascend_device_build(f: Facts) -> Check:
    """A vllm-ascend build runs on its own device family only: the build writes the family into
    `vllm_ascend/_build_info.py` (PyPI's wheels: A2, chip 910b) and the worker checks the NPU against it at start
    (`check_ascend_device_type`), stopping on another chip (matrices/serving.yaml `vllm_ascend_devices`)."""
    name = "vllm-ascend device build"
    va = f.version_of("vllm_ascend")
    if va is None:
        return _check(name, "ok", "vllm-ascend is not installed")
    b = f.vllm_ascend_build
    if b is None:
        return _check(name, "ok", f"not checked: where vllm-ascend {va} is installed is unknown")
    if b.problem:
        return _check(
            name,
            "warn",
            f"{b.problem}; the device vllm-ascend {va} is built for is unknown",
            f"reinstall it (pip install --force-reinstall --no-deps vllm-ascend=={va}), or rebuild it for this chip",
        )
    if not b.found or (b.device_type is None and b.soc_version is None):
        why = f"no {b.source}" if not b.found else f"{b.source} names no __device_type__ or __soc_version__"
        return _check(name, "ok", f"vllm-ascend {va}: {why} (a build that names no device)")
    said = _said(b.device_type, b.soc_version)
    built = _matrix().device_chip(b.device_type, b.soc_version)
    npu = f.npu_chip.chip if f.npu_chip is not None else None
    where = f"{b.source}: {said}"
    if built is None:
        return _check(
            name,
            "warn",
            f"vllm-ascend {va} is built for {b.device_type or b.soc_version} ({where}), a device family the matrix "
            "does not know (matrices/serving.yaml vllm_ascend_devices)" + (f"; the NPUs here are chip {npu}" if npu else ""),
            _device_build_fix(va, npu) if npu else None,
        )
    if f.npu is None or npu is None:
        why = "no NPU seen (no npu-smi output to compare with)" if f.npu is None else "the chip npu-smi lists is unknown"
        return _check(name, "ok", f"not checked: vllm-ascend {va} is built for chip {built} ({where}); {why}")
    if built != npu:
        names = ", ".join(f.npu.names)
        return _check(
            name,
            "fail",
            f"vllm-ascend {va} is built for chip {built} ({where}), but the NPUs here are chip {npu} ({names}, "
            f"{f.npu_source}): its worker checks the NPU's device type at start (check_ascend_device_type) and stops "
            "on another family (matrices/serving.yaml vllm_ascend_devices)",
            _device_build_fix(va, npu),
        )
    return _check(name, "ok", f"vllm-ascend {va} is built for chip {built} ({where}), the chip of the NPUs here")


def torch_npu_replaced(f: Facts, lock_stack: dict[str, str] | None) -> Check | None:
    """Installing vllm-ascend can replace torch_npu ("TorchNPU will be overridden when installing vllm-ascend")."""
    if not lock_stack or not f.version_of("vllm_ascend"):
        return None
    name = "torch_npu replaced by vllm-ascend"
    want, have = lock_stack.get("torch_npu"), f.version_of("torch_npu")
    if want is None or (have is not None and _same(want, have)):
        return _check(name, "ok", f"torch_npu {have} as locked")
    return _check(
        name,
        "fail",
        f"the lock has torch_npu {want}, but {have or 'none'} is installed beside vllm-ascend "
        f'{f.version_of("vllm_ascend")}: installing vllm-ascend replaced it (its FAQ: "TorchNPU will be '
        'overridden when installing vllm-ascend")',
        f"pip install --force-reinstall --no-deps torch-npu=={want} after vllm-ascend, or install from the "
        "lock's closure (`envkit bundle`, --no-deps --require-hashes)",
    )


def _same(a: str, b: str) -> bool:
    try:
        return parse(a) == parse(b)
    except InvalidVersion:
        return a == b


HAZARDS: list[Callable[[Facts], Check]] = [
    torch_npu_without_cann,
    cuda_torch_with_torch_npu,
    set_env_not_sourced,
    driver_firmware_mismatch,
    npu_held,
    npu_devices,
]


def run_hazards(f: Facts, lock_stack: dict[str, str] | None = None) -> list[Check]:
    checks = [h(f) for h in HAZARDS]
    checks.insert(2, numpy_two(f, lock_stack))
    if f.version_of("triton_ascend") or f.version_of("vllm_ascend"):
        checks += [triton_clash(f), triton_ascend_cann(f), vllm_pairing(f)]
    if f.version_of("vllm_ascend"):
        checks.append(vllm_ascend_device_build(f))
    for extra in (driver_libraries(f), autoload(f), torch_npu_replaced(f, lock_stack)):
        if extra is not None:
            checks.append(extra)
    return checks

"""Strict device selection: the requested device or an error, never a silent fallback.

The mapping of torch / torch_npu failures to "what to do" is made of pure functions over text and an
environment mapping, so it is tested without torch (and without the real torch_npu, which breaks
`import torch` on a machine without CANN).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, CannotRun

DEVICE_TYPES = ("npu", "cuda", "cpu")
_SPEC = re.compile(r"^(?P<type>npu|cuda|cpu)(?::(?P<index>\d+))?$")

SET_ENV_HINT = "source /usr/local/Ascend/ascend-toolkit/set_env.sh  (or the set_env.sh of your CANN install)"


@dataclass(frozen=True)
class DeviceSpec:
    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    @property
    def ordinal(self) -> int:
        return self.index or 0


def parse_device(spec: str) -> DeviceSpec:
    """`npu`, `npu:1`, `cuda`, `cuda:0`, `cpu`; anything else is bad input."""
    m = _SPEC.match(spec.strip().lower())
    if not m:
        raise BadInput(f"unknown device '{spec}'", hint="use one of npu, npu:N, cuda, cuda:N, cpu")
    index = int(m["index"]) if m["index"] is not None else None
    if m["type"] == "cpu" and index not in (None, 0):
        raise BadInput(f"unknown device '{spec}'", hint="the cpu device has no index other than 0")
    return DeviceSpec(m["type"], index)


# --- the torch_npu error mapping (pure) --------------------------------------------------------


@dataclass(frozen=True)
class MappedError:
    """A known failure: a one-line message and what to do."""

    kind: str
    message: str
    hint: str
    details: dict[str, Any] = field(default_factory=dict)


_CANN_LIBS = (
    "libhccl.so",
    "libascendcl.so",
    "libacl_op_compiler.so",
    "libge_runner.so",
    "libgraph.so",
    "libacl_tdt_channel.so",
    "libruntime.so",
    "libascend_hal.so",
    "libc_sec.so",
    "libmmpa.so",
)


def is_npu_failure(text: str) -> bool:
    """Whether a failure's text points at torch_npu or CANN (then `map_npu_error` explains it)."""
    return "torch_npu" in text or "Two accelerators" in text or any(lib in text for lib in _CANN_LIBS)


def exception_text(exc: BaseException) -> str:
    """The exception and its whole cause/context chain as `Type: message` lines."""
    lines: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        lines.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return "\n".join(lines)


def map_npu_error(text: str, env: Mapping[str, str] | None = None, stage: str = "import torch_npu") -> MappedError:
    """Map the text of a failure while importing torch / torch_npu to a message and a hint."""
    env = os.environ if env is None else env
    ascend_home = env.get("ASCEND_HOME_PATH")
    unset_note = "ASCEND_HOME_PATH is unset: the CANN environment was not loaded in this shell.\n" if not ascend_home else ""
    details = {"stage": stage, "error": text.strip().splitlines()[-1] if text.strip() else "", "ASCEND_HOME_PATH": ascend_home}
    autoload = "Failed to load the backend extension: torch_npu" in text
    prefix = "import torch failed: the torch_npu backend extension (autoloaded by torch) did not load" if autoload else None
    autoload_hint = (
        "\nTo import torch without torch_npu (e.g. for a cpu run): export TORCH_DEVICE_BACKEND_AUTOLOAD=0" if autoload else ""
    )

    m = re.search(r"Two accelerators cannot be used at the same time(?: in PyTorch)?:?\s*(\w+) and (\w+)", text)
    if m or "Two accelerators cannot be used at the same time" in text:
        other = m.group(2) if m else None
        if other and other != "npu":
            return MappedError(
                "two_accelerators",
                f"torch_npu cannot load beside a {other.upper()} build of torch (two accelerators)",
                "torch_npu needs the CPU build of torch with the same X.Y.Z:\n"
                "pip install 'torch==<X.Y.Z>' --index-url https://download.pytorch.org/whl/cpu\n"
                f"(to use the {other} device instead: export TORCH_DEVICE_BACKEND_AUTOLOAD=0)",
                details | {"other_accelerator": other},
            )
        return MappedError(
            "two_accelerators",
            "torch_npu was registered twice (two accelerators: npu and npu)",
            "an extension imported torch_npu's library before torch_npu itself, or setuptools>=81 broke torchair "
            "(pkg_resources removed): import torch_npu first, pip install 'setuptools<81', "
            "or export TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import torch_npu explicitly",
            details | {"other_accelerator": other or "npu"},
        )

    for lib in _CANN_LIBS:
        if re.search(re.escape(lib) + r"[.\d]*: cannot open shared object file", text):
            what = f"CANN library {lib} not found"
            return MappedError(
                "cann_missing",
                f"{prefix}: {what}"
                if prefix
                else f"torch_npu cannot load: {what}" + ("" if stage == "import torch_npu" else f" (during {stage})"),
                f"{unset_note}CANN is not installed, or its set_env.sh was not sourced: {SET_ENV_HINT}" + autoload_hint,
                details | {"library": lib},
            )

    if "undefined symbol" in text and ("torch_npu" in text or "libtorch_npu" in text):
        return MappedError(
            "version_mismatch",
            "torch_npu does not match the installed torch (undefined symbol)",
            "pair torch_npu X.Y.Z with torch X.Y.Z (torch_npu requires torch==X.Y.Z.*)",
            details,
        )

    if re.search(r"No module named '?torch_npu'?", text):
        return MappedError(
            "not_installed",
            "torch_npu is not installed in this Python environment",
            "pip install torch_npu==<your torch X.Y.Z> (on an Ascend machine with CANN installed)",
            details,
        )

    if autoload:
        return MappedError(
            "autoload_failed",
            prefix or "",
            f"{unset_note}see the cause below; check CANN ({SET_ENV_HINT}) and the torch/torch_npu pairing" + autoload_hint,
            details,
        )
    return MappedError(
        "unknown",
        f"torch_npu failed to load ({stage})",
        f"{unset_note}check the CANN install ({SET_ENV_HINT}) and that torch_npu X.Y.Z matches torch X.Y.Z",
        details,
    )


def no_npu_error(env: Mapping[str, str] | None = None, count: int = 0, index: int = 0, requested: str = "npu") -> MappedError:
    env = os.environ if env is None else env
    if count == 0:
        visible = env.get("ASCEND_RT_VISIBLE_DEVICES")
        note = f" (ASCEND_RT_VISIBLE_DEVICES={visible})" if visible is not None else ""
        return MappedError(
            "no_device",
            f"device '{requested}' requested but torch.npu.is_available() is False{note}",
            "check the driver and the device nodes: npu-smi info; in a container, map /dev/davinci*, "
            "/dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc and the driver directory",
        )
    return MappedError(
        "no_device", f"device '{requested}' requested but only {count} NPU(s) are visible", "pick an index below the count"
    )


def no_cuda_error(
    cuda_build: str | None, count: int = 0, index: int = 0, torch_version: str = "", requested: str = "cuda"
) -> MappedError:
    if cuda_build is None:
        return MappedError(
            "no_device",
            f"device '{requested}' requested but torch.cuda.is_available() is False: "
            f"this torch ({torch_version}) is not a CUDA build",
            "install a CUDA build of torch to test on a GPU",
        )
    if count == 0:
        return MappedError(
            "no_device",
            f"device '{requested}' requested but torch.cuda.is_available() is False (torch built with CUDA {cuda_build})",
            "no GPU is visible: check nvidia-smi, the driver, and CUDA_VISIBLE_DEVICES",
        )
    return MappedError(
        "no_device", f"device '{requested}' requested but only {count} GPU(s) are visible", "pick an index below the count"
    )


def cannot_run(mapped: MappedError, requested: str | None = None) -> CannotRun:
    message = (
        mapped.message
        if requested is None or mapped.message.startswith("device ")
        else f"device '{requested}' requested: {mapped.message}"
    )
    details = {"kind": mapped.kind, **mapped.details}
    if requested is not None:
        details["device"] = requested
    return CannotRun(message, hint=mapped.hint, details=details)


# --- CANN version (pure over a directory) ------------------------------------------------------


def cann_version_from_path(ascend_home: str | None) -> str | None:
    """The CANN version recorded under `ASCEND_HOME_PATH`, or None."""
    if not ascend_home:
        return None
    root = Path(ascend_home)
    candidates = sorted(root.glob("*-linux/ascend_toolkit_install.info")) + [
        root / "ascend_toolkit_install.info",
        root / "compiler" / "version.info",
        root / "runtime" / "version.info",
        root / "version.info",
    ]
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(r"^\s*(?:version|Version)\s*=\s*(\S+)\s*$", text, re.MULTILINE)
        if m:
            return m.group(1)
    try:
        text = (root / "version.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"\[([0-9][^:\]]*):([^\]]+)\]", text)
    return m.group(2) if m else None


# --- the live part (needs torch) ---------------------------------------------------------------


@dataclass
class Device:
    """A device that was checked to exist, with what the environment check reports about it."""

    spec: DeviceSpec
    torch_device: Any
    name: str
    count: int
    import_s: float
    versions: dict[str, str | None]
    cann: str | None = None
    notes: list[str] = field(default_factory=list)

    def synchronize(self) -> None:
        import torch

        if self.spec.type == "cuda":
            torch.cuda.synchronize(self.torch_device)
        elif self.spec.type == "npu":
            torch.npu.synchronize(self.torch_device)  # type: ignore[attr-defined]


def import_torch(env: Mapping[str, str] | None = None, requested: str | None = None):
    """`import torch`, mapping a torch_npu autoload failure to CannotRun."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any failure here is mapped and re-raised as CannotRun
        text = exception_text(exc)
        if is_npu_failure(text):
            raise cannot_run(map_npu_error(text, env, stage="import torch"), requested) from exc
        raise CannotRun(f"import torch failed: {exc}", hint="install torch (pip install 'envkit[smoke]')") from exc
    return torch


def _version_of(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def require_device(spec: DeviceSpec, env: Mapping[str, str] | None = None) -> Device:
    """Import torch (and torch_npu for npu), check that the device exists, or raise CannotRun."""
    env = os.environ if env is None else env
    t0 = time.perf_counter()
    torch = import_torch(env, str(spec))
    versions: dict[str, str | None] = {"torch": str(torch.__version__)}
    notes: list[str] = []
    cann = None
    if spec.type == "npu":
        try:
            import torch_npu  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - mapped and re-raised
            raise cannot_run(map_npu_error(exception_text(exc), env), str(spec)) from exc
        versions["torch_npu"] = str(getattr(torch_npu, "__version__", None) or _version_of("torch_npu"))
        import_s = time.perf_counter() - t0
        npu = getattr(torch, "npu", None)
        available = bool(npu is not None and npu.is_available())
        count = int(npu.device_count()) if npu is not None and available else 0
        if npu is None or not available or spec.ordinal >= count:
            raise cannot_run(no_npu_error(env, count, spec.ordinal, str(spec)), str(spec))
        name = str(npu.get_device_name(spec.ordinal))
        cann = cann_version_from_path(env.get("ASCEND_HOME_PATH"))
        if cann is None:
            try:
                from torch_npu.utils import get_cann_version

                cann = get_cann_version(module="CANN") or None
            except Exception:  # noqa: BLE001 - an optional second source
                cann = None
        if not env.get("ASCEND_HOME_PATH"):
            notes.append("ASCEND_HOME_PATH is unset: the CANN environment was not loaded (" + SET_ENV_HINT + ")")
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None and hasattr(accelerator, "current_accelerator"):
            current = accelerator.current_accelerator()
            if current is not None and current.type != "npu":
                notes.append(f"torch.accelerator.current_accelerator() is {current.type}, not npu")
    elif spec.type == "cuda":
        import_s = time.perf_counter() - t0
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
        if not available or spec.ordinal >= count:
            raise cannot_run(no_cuda_error(torch.version.cuda, count, spec.ordinal, str(torch.__version__), str(spec)), str(spec))
        name = str(torch.cuda.get_device_name(spec.ordinal))
        versions["cuda"] = torch.version.cuda
    else:
        import_s = time.perf_counter() - t0
        count = 1
        name = _cpu_name()
    return Device(
        spec=spec,
        torch_device=torch.device(str(spec)),
        name=name,
        count=count,
        import_s=import_s,
        versions=versions,
        cann=cann,
        notes=notes,
    )


def _cpu_name() -> str:
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"

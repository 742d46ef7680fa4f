"""Read what a host (or a mounted root file system) exposes. The only doctor module that runs
subprocesses; every subprocess has a timeout, and torch_npu is never imported.

Two modes:
- host (``root == "/"``): files under ``/``, the current environment, `npu-smi` from ``PATH``
  (or ``/usr/local/bin``), Python packages read by running the interpreter (``--python``,
  default the current one) with a short ``importlib.metadata`` script.
- root (``--root PATH``, an exported image or a fixture): the root is data, never code. Every
  file read is resolved inside the root, absolute symlinks included, and must be a regular file
  (a FIFO, a device or a socket is reported, never opened for reading); reads are capped. The
  environment comes from ``--env-file`` or else ``<root>/etc/environment`` (never from the
  current process: it belongs to another system). `npu-smi` output is read from its recording
  in ``<root>/var/log/envkit/npu-smi/`` (``info.txt``, optional ``info.rc``, ``board-<N>.txt``);
  only with ``exec_root_tools`` is ``<root>/usr/local/bin/npu-smi`` run, with an empty
  environment and the timeout. Python packages are read from the ``*.dist-info`` folders of the
  root's site-packages (``--python`` then names the interpreter inside the root); the root's
  interpreter is never run.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import re
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from envkit.executor.proc import MAX_READ, CommandResult, run_command
from envkit.fleet.hccn import NetProbe, hccn_conf_addresses
from envkit.io.buildinfo import BUILD_INFO, BUILD_INFO_MAX
from envkit.io.evidence import Evidence
from envkit.io.untrusted import not_regular
from envkit.jobs.doctor.parsers import ParseError, parse_kv

MAX_LIST = 10_000  # entries read from one folder
RECORDED_NPU_SMI = "/var/log/envkit/npu-smi"  # recorded `npu-smi` output in a root (see docs/doctor.md)
ASCEND_BASE = "/usr/local/Ascend"
PACKAGES = (
    "torch",
    "torch_npu",
    "transformers",
    "accelerate",
    "numpy",
    "vllm",
    "vllm_ascend",
    "triton",
    "triton_ascend",
)  # serving: read for the framework hazards
PLUGIN_GROUP = "vllm.platform_plugins"  # vllm-ascend registers `ascend = vllm_ascend:register` here
ARCHES = ("aarch64", "x86_64")
CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
MAX_BOARDS = 16

ENV_KEYS = (
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_OPP_PATH",
    "ASCEND_AICPU_PATH",
    "LD_LIBRARY_PATH",
    "ASCEND_RT_VISIBLE_DEVICES",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "ATB_HOME_PATH",
    "PATH",
    "HOME",
)

# Runs inside the target interpreter: metadata only, no import of torch or torch_npu.
# Kept compatible with Python 3.7 (importlib_metadata backport) and newer.
_PY_SCRIPT = r"""
import json, platform, sys
try:
    from importlib import metadata as md
except ImportError:
    import importlib_metadata as md
out = {"python": "%d.%d" % sys.version_info[:2], "python_full": platform.python_version(),
       "executable": sys.executable, "machine": platform.machine(), "packages": {}}
for name in NAMES:
    dist = None
    for cand in (name, name.replace("_", "-")):
        try:
            dist = md.distribution(cand)
            break
        except md.PackageNotFoundError:
            pass
    if dist is None:
        out["packages"][name] = None
        continue
    cuda = []
    if name == "torch":
        try:
            cuda = [str(f) for f in (dist.files or []) if "libc10_cuda" in str(f) or "libcudart" in str(f)][:5]
        except Exception:
            cuda = []
    try:
        location = str(dist.locate_file(""))
    except Exception:
        location = ""
    try:
        plugins = sorted(ep.name for ep in dist.entry_points if ep.group == "vllm.platform_plugins")
    except Exception:
        plugins = []
    out["packages"][name] = {"version": dist.version, "requires": list(dist.requires or []),
                             "cuda_files": cuda, "location": location, "platform_plugins": plugins}
print(json.dumps(out))
"""


@dataclass
class CannInstall:
    """One CANN found on disk: its layout, folder, version sources and operator packages."""

    layout: str  # "toolkit-latest" (< 8.5), "cann-versioned" (>= 8.5), "cann" (9.x)
    path: str  # as the target sees it
    resolved: str  # real folder, inside the target
    dir_version: str | None  # from the folder name (cann-8.5.0, ascend-toolkit/8.0.0)
    version_files: list[Evidence] = field(default_factory=list)
    package_infos: list[Evidence] = field(default_factory=list)
    kernel_socs: list[str] = field(default_factory=list)
    set_env: str | None = None
    runtime_dir: bool = False
    compiler_dir: bool = False


@dataclass
class PythonProbe:
    source: str
    data: dict | None = None
    error: str | None = None
    other_site_packages: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "unreadable: FILE: why" / "unparsed: FILE: why"


@dataclass
class ProbeResult:
    root: str
    host: bool
    env: dict[str, str]
    env_source: str
    env_known: bool
    install_record: Evidence
    driver_version_info: Evidence
    firmware_version_info: Evidence
    cann: list[CannInstall]
    nnal: Evidence | None
    nnal_dir: str | None
    os_release: Evidence
    arch_hint: tuple[str, str] | None
    dev_davinci: list[str]
    dev_control: dict[str, bool]
    npu_smi_path: str | None
    npu_smi_skipped: str | None
    npu_smi: CommandResult | None
    boards: list[CommandResult]
    python: PythonProbe
    path_exists: dict[str, bool]
    container: bool = False
    vllm_ascend_build: Evidence | None = None  # the installed vllm_ascend's _build_info.py (None: not installed)


class Target:
    """File access to a host (``/``) or a root file system, with symlinks kept inside the root."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root).resolve()
        self.host = str(self.root) == "/"

    # paths ----------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """The real path of a target path; symlinks (absolute ones too) stay inside the root."""
        if self.host:
            return Path(path)
        stack = [p for p in PurePosixPath(path).parts if p not in ("/", "", ".")]
        cur = self.root
        hops = 0
        while stack:
            part = stack.pop(0)
            if part == "..":
                if cur != self.root:
                    cur = cur.parent
                continue
            nxt = cur / part
            if nxt.is_symlink():
                hops += 1
                if hops > 40:
                    raise OSError(f"too many symbolic links at {path}")
                target = os.readlink(nxt)
                tparts = [p for p in PurePosixPath(target).parts if p not in ("", ".")]
                if target.startswith("/"):
                    cur = self.root
                    tparts = tparts[1:]
                stack = tparts + stack
                continue
            cur = nxt
        return cur

    def display(self, real: Path) -> str:
        """The target's view of a real path."""
        if self.host:
            return str(real)
        try:
            return "/" + str(real.relative_to(self.root))
        except ValueError:
            return str(real)

    def exists(self, path: str) -> bool:
        try:
            real = self.resolve(path)
            return real.exists() or real.is_symlink()
        except OSError:
            return False

    def is_dir(self, path: str) -> bool:
        try:
            return self.resolve(path).is_dir()
        except OSError:
            return False

    def listdir(self, path: str) -> list[str]:
        """Names in a folder (at most MAX_LIST of them), sorted."""
        names: list[str] = []
        try:
            with os.scandir(self.resolve(path)) as it:
                for entry in it:
                    names.append(entry.name)
                    if len(names) >= MAX_LIST:
                        break
        except OSError:
            return []
        return sorted(names)

    def glob(self, pattern: str) -> list[str]:
        """Target paths matching a ``/``-rooted pattern (``*``, ``?``, ``[...]`` within one name),
        expanded with this target's own reads, so that links are followed inside the root only."""
        found = [""]
        for part in PurePosixPath(pattern).parts:
            if part == "/":
                continue
            if any(c in part for c in "*?["):
                found = [f"{base}/{n}" for base in found for n in self.listdir(base or "/") if fnmatch.fnmatchcase(n, part)]
            else:
                found = [f"{base}/{part}" for base in found]
        return [p for p in found if p]

    def read(self, path: str, *, limit: int = MAX_READ, partial: bool = False) -> Evidence:
        """A regular file's bytes. Never blocks: a FIFO, a device or a socket is refused from its
        ``lstat`` before any open, and the open is non-blocking anyway. A file over ``limit`` bytes is
        an error, unless ``partial`` (then its first ``limit`` bytes are read)."""
        try:
            real = self.resolve(path)
            # in a root, resolve() has followed every link already: the final name must not be one
            st = os.lstat(real) if not self.host else os.stat(real)
            kind = _kind(st.st_mode)
            if kind:
                return Evidence(path, error=kind)
            flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
            if not self.host:
                flags |= getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(real, flags)
            try:
                kind = _kind(os.fstat(fd).st_mode)  # what was opened, should the name have changed meanwhile
                if kind:
                    return Evidence(path, error=kind)
                chunks: list[bytes] = []
                size = 0
                while size <= limit:
                    chunk = os.read(fd, min(1 << 16, limit + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return Evidence(path, error="not found")
        except OSError as exc:
            return Evidence(path, error=exc.strerror or str(exc))
        data = b"".join(chunks)
        if len(data) > limit:
            if not partial:
                return Evidence(path, error=f"too large (over {limit} bytes)")
            data = data[:limit]
        return Evidence(path, data=data)

    def realpath(self, path: str) -> str:
        try:
            return self.display(self.resolve(path))
        except OSError:
            return path


def _kind(mode: int) -> str | None:
    """Why a file of this mode is not read (None for a regular file), in the words of `envkit.io.untrusted`."""
    what = not_regular(mode)
    if what is None or what == "not a regular file":
        return what
    return "is a directory" if what == "a directory" else f"not a regular file ({what})"


# --------------------------------------------------------------------------- environment


def load_env(target: Target, env_file: str | None) -> tuple[dict[str, str], str, bool]:
    """The target's environment: (values, where from, known?)."""
    if env_file is not None:
        try:
            with open(env_file, "rb") as fh:
                data = fh.read(MAX_READ + 1)
        except OSError as exc:
            return {}, f"{env_file} (unreadable: {exc.strerror})", False
        if len(data) > MAX_READ:
            return {}, f"{env_file} (unreadable: too large, over {MAX_READ} bytes)", False
        try:
            return parse_kv(data), env_file, True
        except ParseError as exc:
            return {}, f"{env_file} (unparsed: {exc})", False
    if target.host:
        return dict(os.environ), "the current environment", True
    ev = target.read("/etc/environment")
    if ev.data is None and ev.error != "not found":
        return {}, f"/etc/environment in the root (unreadable: {ev.error}; pass --env-file)", False
    if ev.data is None:
        return {}, "unknown (no /etc/environment in the root; pass --env-file)", False
    try:
        return parse_kv(ev.data), "/etc/environment in the root", True
    except ParseError as exc:
        return {}, f"/etc/environment in the root (unparsed: {exc})", False


# --------------------------------------------------------------------------- CANN


def _cann_candidates(target: Target, env: dict[str, str], bases: list[str]) -> list[tuple[str, str, str | None]]:
    """(layout, path, set_env) of every CANN-looking folder."""
    out: list[tuple[str, str, str | None]] = []
    for base in bases:
        toolkit = f"{base}/ascend-toolkit"
        toolkit_env = f"{toolkit}/set_env.sh" if target.exists(f"{toolkit}/set_env.sh") else None
        for name in target.listdir(base):
            path = f"{base}/{name}"
            if re.fullmatch(r"cann-\d[\w.\-]*", name) and target.is_dir(path):
                own = f"{path}/set_env.sh" if target.exists(f"{path}/set_env.sh") else toolkit_env
                out.append(("cann-versioned", path, own))
            elif name == "cann" and target.is_dir(path):
                own = f"{path}/set_env.sh" if target.exists(f"{path}/set_env.sh") else None
                out.append(("cann", path, own))
        # after the specific layouts: in 8.5 images ascend-toolkit/latest points at cann-<ver>
        if target.is_dir(f"{toolkit}/latest"):
            out.append(("toolkit-latest", f"{toolkit}/latest", toolkit_env))
    for key in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        value = env.get(key)
        if value and value.startswith("/") and target.is_dir(value):
            out.append(("env", value.rstrip("/"), None))
    return out


def _probe_cann(target: Target, env: dict[str, str], bases: list[str]) -> list[CannInstall]:
    seen: dict[str, CannInstall] = {}
    for layout, path, set_env in _cann_candidates(target, env, bases):
        resolved = target.realpath(path)
        if resolved in seen:
            if seen[resolved].set_env is None and set_env:
                seen[resolved].set_env = set_env
            continue
        leaf = PurePosixPath(resolved).name
        dir_version = None
        m = re.fullmatch(r"(?:cann-)?(\d[\w.\-]*)", leaf)
        if m:
            dir_version = m.group(1)
        if layout == "env":
            parent = PurePosixPath(resolved).parent.name
            layout = "toolkit-latest" if parent == "ascend-toolkit" else ("cann" if leaf == "cann" else "cann-versioned")
        inst = CannInstall(layout=layout, path=path, resolved=resolved, dir_version=dir_version, set_env=set_env)
        infos: list[str] = []
        for arch in ARCHES:
            infos.append(f"{resolved}/{arch}-linux/ascend_toolkit_install.info")
        infos.append(f"{resolved}/ascend_toolkit_install.info")
        for p in infos:
            ev = target.read(p)
            if ev.found or ev.error not in ("not found",):
                inst.version_files.append(ev)
        for p in (f"{resolved}/version.cfg", f"{resolved}/compiler/version.info", f"{resolved}/opp/version.info"):
            ev = target.read(p)
            if ev.found:
                inst.version_files.append(ev)
        # operator packages and other components: ascend_*_install.info one or two levels down
        dirs = [resolved] + [f"{resolved}/{d}" for d in target.listdir(resolved) if target.is_dir(f"{resolved}/{d}")]
        for d in dirs[:64]:
            for name in target.listdir(d):
                if re.fullmatch(r"ascend_\w+_install\.info", name) and name != "ascend_toolkit_install.info":
                    inst.package_infos.append(target.read(f"{d}/{name}"))
        kernel = f"{resolved}/opp/built-in/op_impl/ai_core/tbe/kernel"
        inst.kernel_socs = [n for n in target.listdir(kernel) if n.startswith("ascend") and target.is_dir(f"{kernel}/{n}")]
        inst.runtime_dir = target.is_dir(f"{resolved}/runtime")
        inst.compiler_dir = target.is_dir(f"{resolved}/compiler")
        seen[resolved] = inst
    return list(seen.values())


# --------------------------------------------------------------------------- arch, devices


_ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}


def _elf_arch(target: Target) -> tuple[str, str] | None:
    for path in ("/bin/sh", "/usr/bin/env", "/bin/bash", "/usr/bin/bash"):
        ev = target.read(path, limit=64, partial=True)  # the ELF header only
        data = ev.data
        if data and len(data) > 20 and data[:4] == b"\x7fELF":
            little = data[5] == 1
            machine = int.from_bytes(data[18:20], "little" if little else "big")
            if machine in _ELF_MACHINES:
                return _ELF_MACHINES[machine], f"ELF header of {path}"
    for arch in ARCHES:
        if target.is_dir(f"/usr/lib/{arch}-linux-gnu"):
            return arch, f"/usr/lib/{arch}-linux-gnu"
    return None


# --------------------------------------------------------------------------- npu-smi


def _find_npu_smi(target: Target, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(executable, skipped reason) on a host."""
    found = shutil.which("npu-smi", path=env.get("PATH") or os.defpath)
    if found:
        return found, None
    fallback = "/usr/local/bin/npu-smi"
    if os.path.isfile(fallback) and os.access(fallback, os.X_OK):
        return fallback, None
    return None, "npu-smi not found on PATH or in /usr/local/bin"


def _root_npu_smi(target: Target) -> tuple[str | None, str | None]:
    """(real path, skipped reason) of the root's own npu-smi, for ``exec_root_tools`` only."""
    try:
        real = target.resolve("/usr/local/bin/npu-smi")
        mode = os.lstat(real).st_mode
    except OSError:
        return None, "no /usr/local/bin/npu-smi in the root"
    if not stat.S_ISREG(mode) or not mode & 0o111:
        return None, "the root's /usr/local/bin/npu-smi is not an executable regular file"
    return str(real), None


def _recorded_npu_smi(target: Target, argv: list[str], name: str) -> CommandResult | None:
    """``npu-smi`` output recorded in the root (``<RECORDED_NPU_SMI>/<name>.txt``, exit status in
    ``<name>.rc``, 0 when absent); None when not recorded."""
    path = f"{RECORDED_NPU_SMI}/{name}.txt"
    ev = target.read(path)
    if ev.error == "not found":
        return None
    if ev.data is None:
        return CommandResult(argv, error=ev.error, recorded=path)
    returncode = 0
    rc = target.read(f"{RECORDED_NPU_SMI}/{name}.rc", limit=16)
    if rc.data is not None:
        text = rc.data.decode("ascii", "replace").strip()
        if not re.fullmatch(r"-?\d{1,3}", text):
            return CommandResult(argv, error=f"unparsed exit status in {rc.source}", recorded=path)
        returncode = int(text)
    elif rc.error != "not found":
        return CommandResult(argv, error=f"{rc.source}: {rc.error}", recorded=path)
    return CommandResult(argv, returncode, ev.data, b"", recorded=path)


# --------------------------------------------------------------------------- Python


def _dist_info(target: Target, folder: str, problems: list[str]) -> dict | None:
    meta = target.read(f"{folder}/METADATA", partial=True)  # the headers come first
    if meta.data is None and meta.error == "not found":
        meta = target.read(f"{folder}/PKG-INFO", partial=True)
    if meta.data is None:
        if meta.error != "not found":
            problems.append(f"unreadable: {meta.source}: {meta.error}")
        return None
    text = meta.data.decode("utf-8", "replace")
    headers, _, _ = text.partition("\n\n")
    name = version = None
    requires: list[str] = []
    for line in headers.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "name":
            name = value
        elif key == "version":
            version = value
        elif key == "requires-dist":
            requires.append(value)
    if not name or not version:
        problems.append(f"unparsed: {meta.source}: no Name and Version headers")
        return None
    cuda: list[str] = []
    if name.lower() == "torch":
        record = target.read(f"{folder}/RECORD", partial=True)
        if record.data:
            for line in record.data.decode("utf-8", "replace").splitlines():
                path = line.split(",", 1)[0]
                if "libc10_cuda" in path or "libcudart" in path:
                    cuda.append(path)
                    if len(cuda) >= 5:
                        break
    return {
        "name": name,
        "version": version,
        "requires": requires,
        "cuda_files": cuda,
        "location": folder,
        "platform_plugins": _platform_plugins(target, folder),
    }


def _platform_plugins(target: Target, folder: str) -> list[str]:
    """The names a dist-info's entry_points.txt registers in the vLLM platform-plugin group (metadata only)."""
    ep = target.read(f"{folder}/entry_points.txt", partial=True)
    if not ep.data:
        return []
    names, group = [], None
    for line in ep.data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif group == PLUGIN_GROUP and "=" in line:
            names.append(line.split("=", 1)[0].strip())
    return sorted(names)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _scan_site_packages(target: Target, folder: str, problems: list[str]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    wanted = {_norm(p) for p in PACKAGES}
    for entry in target.listdir(folder):
        if not entry.endswith((".dist-info", ".egg-info")):
            continue
        stem = entry.rsplit(".", 1)[0]
        if _norm(stem.split("-", 1)[0]) not in wanted:
            continue
        info = _dist_info(target, f"{folder}/{entry}", problems)
        if info and _norm(info["name"]) in wanted:
            found[_norm(info["name"])] = info
    return found


_SITE_GLOBS = (
    "/usr/local/python3*/lib/python3*/site-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/opt/conda/lib/python3*/site-packages",
    "/opt/*/lib/python3*/site-packages",
    "/root/.venv/lib/python3*/site-packages",
)


def _python_from_root(target: Target, python: str | None) -> PythonProbe:
    if python is not None:
        prefix = PurePosixPath(python).parent.parent
        patterns = [f"{prefix}/lib/python3*/site-packages", f"{prefix}/lib/python3*/dist-packages"]
    else:
        patterns = list(_SITE_GLOBS)
    folders: list[str] = []
    for pattern in patterns:
        for shown in target.glob(pattern):
            if shown not in folders and target.is_dir(shown):
                folders.append(shown)
    if not folders:
        where = f"under {prefix}" if python is not None else "in the usual places"
        return PythonProbe(source="site-packages in the root", error=f"no site-packages {where}")
    problems: list[str] = []
    scanned = [(f, _scan_site_packages(target, f, problems)) for f in folders]

    def rank(item: tuple[str, dict]) -> tuple[int, int, int]:
        pkgs = item[1]
        return ("torch_npu" in pkgs, "torch" in pkgs, len(pkgs))

    best_folder, best = max(scanned, key=rank)
    m = re.search(r"/python(3\.\d+)/", best_folder + "/")
    packages: dict[str, dict | None] = {}
    for name in PACKAGES:
        info = best.get(_norm(name))
        packages[name] = (
            None if info is None else {k: info[k] for k in ("version", "requires", "cuda_files", "location", "platform_plugins")}
        )
    data = {
        "python": m.group(1) if m else None,
        "python_full": None,
        "executable": python,
        "machine": None,
        "packages": packages,
    }
    return PythonProbe(
        source=f"{best_folder}/*.dist-info",
        data=data,
        other_site_packages=[f for f, _ in scanned if f != best_folder],
        problems=problems,
    )


def _vllm_ascend_build(target: Target, py: PythonProbe) -> Evidence | None:
    """The installed vllm_ascend's `_build_info.py` (the device it was built for), read as a file beside its
    dist-info, never imported: a FIFO, a device, a link out of the root or a file over `BUILD_INFO_MAX` bytes is an
    error of the Evidence, never opened for reading or read whole. None when vllm_ascend is not installed or its
    location is unknown."""
    pkg = (py.data or {}).get("packages", {}).get("vllm_ascend")
    location = pkg.get("location") if isinstance(pkg, dict) else None
    if not isinstance(location, str) or not location.startswith("/") or "\0" in location:
        return None
    folder = location.rstrip("/")
    if folder.endswith((".dist-info", ".egg-info")):  # a root: the metadata folder; a host: site-packages
        folder = str(PurePosixPath(folder).parent)
    return target.read(f"{folder.rstrip('/')}/{BUILD_INFO}", limit=BUILD_INFO_MAX)


def _python_from_host(python: str | None, env: dict[str, str], timeout: float) -> PythonProbe:
    exe = python or sys.executable
    script = f"NAMES = {list(PACKAGES)!r}\n" + _PY_SCRIPT
    argv = [exe, "-c", script]
    shown = f"{exe} -c <importlib.metadata probe>"
    if python is not None and not (os.path.isfile(exe) and os.access(exe, os.X_OK)) and shutil.which(exe) is None:
        return PythonProbe(source=shown, error=f"{exe}: not an executable")
    result = run_command(argv, timeout=timeout, env=env, cwd="/")
    if result.error:
        return PythonProbe(source=shown, error=result.error)
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return PythonProbe(source=shown, error=f"exit {result.returncode}: {tail[0][:200]}")
    try:
        data = json.loads(result.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return PythonProbe(source=shown, error="the probe printed no JSON")
    if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
        return PythonProbe(source=shown, error="the probe printed unexpected JSON")
    return PythonProbe(source=shown, data=data)


def _npu_smi(
    target: Target, env: dict[str, str], timeout: float, exec_root_tools: bool
) -> tuple[str | None, str | None, CommandResult | None, list[CommandResult]]:
    """(npu-smi path, skipped reason, `npu-smi info`, the board queries): run on a host (or, with
    ``exec_root_tools``, the root's own with an empty environment), else read from the root's recording."""
    if target.host:
        path, skipped = _find_npu_smi(target, env)
        run_env: dict[str, str] | None = dict(env)
    elif exec_root_tools:
        path, skipped = _root_npu_smi(target)
        run_env = {}
    else:
        path, skipped, run_env = None, None, None
    if path is None and not target.host:
        recorded = _recorded_npu_smi(target, ["npu-smi", "info"], "info")
        if recorded is None:
            why = f"no recorded npu-smi output in the root ({RECORDED_NPU_SMI}/info.txt)"
            return None, f"{skipped}; {why}" if skipped else why, None, []
        path, skipped, run_env = f"{RECORDED_NPU_SMI}/info.txt", None, None

    def query(args: list[str], name: str) -> CommandResult | None:
        assert path is not None
        if run_env is None:
            return _recorded_npu_smi(target, ["npu-smi", *args], name)
        return run_command([path, *args], timeout=timeout, env=run_env, cwd=str(target.root))

    if path is None:
        return None, skipped, None, []
    info_res = query(["info"], "info")
    boards: list[CommandResult] = []
    if info_res is not None and info_res.ok:
        from envkit.jobs.doctor.parsers import parse_npu_smi_info

        try:
            info = parse_npu_smi_info(info_res.stdout)
        except ParseError:
            info = None
        for npu in info.npu_ids[:MAX_BOARDS] if info else []:
            board = query(["info", "-t", "board", "-i", str(npu)], f"board-{npu}")
            if board is not None:  # a board query that was not recorded is left out
                boards.append(board)
    return path, skipped, info_res, boards


# --------------------------------------------------------------------------- entry point


def probe(
    root: str = "/",
    *,
    python: str | None = None,
    env_file: str | None = None,
    timeout: float = 20.0,
    exec_root_tools: bool = False,
) -> ProbeResult:
    """Read everything the doctor needs from the target. Never raises for what it finds.

    In a root nothing is executed, unless ``exec_root_tools``: then the root's ``npu-smi`` runs,
    with an empty environment and the timeout."""
    target = Target(root)
    env, env_source, env_known = load_env(target, env_file)

    install_record = target.read("/etc/ascend_install.info")
    driver_bases, firmware_bases = _install_bases(install_record)
    driver = _first(target, [f"{b}/driver/version.info" for b in driver_bases])
    firmware = _first(target, [f"{b}/firmware/version.info" for b in firmware_bases])
    cann_bases = [ASCEND_BASE]
    home = env.get("HOME")
    if home and home.startswith("/") and target.is_dir(f"{home}/Ascend"):
        cann_bases.append(f"{home.rstrip('/')}/Ascend")
    cann = _probe_cann(target, env, cann_bases)
    nnal_dir, nnal_ev = _nnal(target, cann_bases)
    arch_hint = (platform.machine(), "uname -m (platform.machine())") if target.host else _elf_arch(target)
    dev = target.listdir("/dev")
    davinci = sorted((n for n in dev if re.fullmatch(r"davinci\d+", n)), key=lambda n: int(n[7:]))
    control = {n: n in dev for n in CONTROL_NODES}

    npu_smi_path, skipped, npu_smi, boards = _npu_smi(target, env, timeout, exec_root_tools)

    if target.host:
        py = _python_from_host(python, env, timeout)
    else:
        py = _python_from_root(target, python)
    build = _vllm_ascend_build(target, py)

    return ProbeResult(
        root=str(target.root),
        host=target.host,
        env={k: env[k] for k in ENV_KEYS if k in env},
        env_source=env_source,
        env_known=env_known,
        install_record=install_record,
        driver_version_info=driver,
        firmware_version_info=firmware,
        cann=cann,
        nnal=nnal_ev,
        nnal_dir=nnal_dir,
        os_release=_first(target, ["/etc/os-release", "/usr/lib/os-release"]),
        arch_hint=arch_hint,
        dev_davinci=davinci,
        dev_control=control,
        npu_smi_path=npu_smi_path,
        npu_smi_skipped=skipped,
        npu_smi=npu_smi,
        boards=boards,
        python=py,
        path_exists=_env_paths(target, env),
        container=target.exists("/.dockerenv") or target.exists("/run/.containerenv"),
        vllm_ascend_build=build,
    )


def _install_bases(install_record: Evidence) -> tuple[list[str], list[str]]:
    """Where the driver and the firmware are installed: the install record's paths (an absolute one first), then
    /usr/local/Ascend; a record that does not parse adds none."""
    driver_bases = [ASCEND_BASE]
    firmware_bases = [ASCEND_BASE]
    if install_record.data is not None:
        try:
            kv = {k.lower(): v for k, v in parse_kv(install_record.data).items()}
            for key, bases in (
                ("driver_install_path_param", driver_bases),
                ("firmware_install_path_param", firmware_bases),
            ):
                value = kv.get(key, "").rstrip("/")
                if value.startswith("/") and value not in bases:
                    bases.insert(0, value)
        except ParseError:
            pass
    return driver_bases, firmware_bases


def _first(target: Target, paths: list[str]) -> Evidence:
    """The first of `paths` that is there or cannot be read for another reason than its absence; else the last."""
    evs = [target.read(p) for p in paths]
    for ev in evs:
        if ev.found or ev.error != "not found":
            return ev
    return evs[-1]


def _nnal(target: Target, cann_bases: list[str]) -> tuple[str | None, Evidence | None]:
    """The NNAL (ATB) folder under the first CANN base that has one, and its version.info (latest/ first), or where
    its `latest` link points when it has none."""
    for base in cann_bases:
        atb = f"{base}/nnal/atb"
        if not target.is_dir(atb):
            continue
        latest = f"{atb}/latest"
        for p in (f"{latest}/version.info", f"{atb}/version.info"):
            ev = target.read(p)
            if ev.found:
                return atb, ev
        return atb, Evidence(source=f"{latest} -> {target.realpath(latest)}") if target.is_dir(latest) else None
    return None, None


def _env_paths(target: Target, env: dict[str, str]) -> dict[str, bool]:
    """Whether each folder the environment names (CANN's homes, each LD_LIBRARY_PATH entry) is there."""
    paths: dict[str, bool] = {}
    for key in ("ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_TOOLKIT_HOME"):
        env_path = env.get(key)
        if env_path:
            paths[env_path] = target.is_dir(env_path)
    for part in env.get("LD_LIBRARY_PATH", "").split(":"):
        if part:
            paths[part] = target.is_dir(part)
    return paths


# --------------------------------------------------------------------------- hccn_tool (`doctor --net`)

RECORDED_HCCN = "/var/log/envkit/hccn_tool"  # <dev>-<what>.txt, e.g. 0-link.txt, 0-ping-10.20.0.11.txt
HCCN_TOOL = "/usr/local/Ascend/driver/tools/hccn_tool"
HCCN_CONF = "/etc/hccn.conf"
HCCN_QUERIES: dict[str, list[str]] = {  # read-only queries only (`-g`), never a set (`-s`)
    "link": ["-link", "-g"],
    "net_health": ["-net_health", "-g"],
    "tls": ["-tls", "-g"],
    "ip": ["-ip", "-g"],
}
MAX_DEVICES = 16
MAX_PEERS = 64


def _hccn_tool(target: Target, env: dict[str, str], exec_root_tools: bool) -> tuple[str | None, str | None]:
    """(executable, skipped reason): on a host the driver's tools folder, then PATH; in a root only with
    ``exec_root_tools`` (the root's own, in its driver folder)."""
    if target.host:
        if os.path.isfile(HCCN_TOOL) and os.access(HCCN_TOOL, os.X_OK):
            return HCCN_TOOL, None
        found = shutil.which("hccn_tool", path=env.get("PATH") or os.defpath)
        return (found, None) if found else (None, f"hccn_tool not found in {os.path.dirname(HCCN_TOOL)} or on PATH")
    try:
        real = target.resolve(HCCN_TOOL)
        mode = os.lstat(real).st_mode
    except OSError:
        return None, f"no {HCCN_TOOL} in the root"
    if not stat.S_ISREG(mode) or not mode & 0o111:
        return None, f"the root's {HCCN_TOOL} is not an executable regular file"
    return str(real), None


def _hccn_devices(target: Target, conf: dict[int, str], recorded: bool) -> list[int]:
    """Devices to ask about: hccn.conf's address_N, else /dev/davinciN, else (a recording) its file names."""
    devs = set(conf)
    if not devs:
        devs = {int(n[7:]) for n in target.listdir("/dev") if re.fullmatch(r"davinci\d{1,3}", n)}
    if not devs and recorded:
        devs = {int(m.group(1)) for n in target.listdir(RECORDED_HCCN) if (m := re.fullmatch(r"(\d{1,3})-link\.txt", n))}
    return sorted(devs)[:MAX_DEVICES]


def probe_net(
    root: str = "/",
    *,
    peers: list[str] | dict[int, list[str]] | None = None,
    env_file: str | None = None,
    timeout: float = 20.0,
    exec_root_tools: bool = False,
) -> NetProbe:
    """hccn_tool's link, net_health, tls and ip per device, and a ping from each device to its peers
    (``peers``: the same list for every device, or per device id). On a host hccn_tool runs (each query with
    the timeout); in a root its recorded output is read (``RECORDED_HCCN``), unless ``exec_root_tools``."""
    target = Target(root)
    env, _src, _known = load_env(target, env_file)
    conf_ev = target.read(HCCN_CONF)
    conf = hccn_conf_addresses(conf_ev.data)
    if target.host or exec_root_tools:
        tool, skipped = _hccn_tool(target, env, exec_root_tools)
        run_env: dict[str, str] | None = dict(env) if target.host else {}
    else:
        tool, skipped, run_env = None, None, None
        if target.is_dir(RECORDED_HCCN):
            tool = RECORDED_HCCN
        else:
            skipped = f"no recorded hccn_tool output in the root ({RECORDED_HCCN}/<dev>-<what>.txt)"
    net = NetProbe(tool=tool, skipped=skipped, hccn_conf=conf_ev)
    if tool is None:
        return net

    def ask(dev: int, what: str, args: list[str], name: str) -> bytes | None:
        if run_env is None:
            ev = target.read(f"{RECORDED_HCCN}/{dev}-{name}.txt")
            if ev.data is None:
                net.errors[(dev, what)] = f"{ev.source}: {ev.error}"
            return ev.data
        assert tool is not None
        res = run_command([tool, "-i", str(dev), *args], timeout=timeout, env=run_env, cwd="/")
        if res.error:
            net.errors[(dev, what)] = f"hccn_tool -i {dev} {' '.join(args)}: {res.error}"
            return None
        return res.stdout + res.stderr

    for dev in _hccn_devices(target, conf, run_env is None):
        net.outputs[dev] = {what: ask(dev, what, args, what) for what, args in HCCN_QUERIES.items()}
        wanted = peers.get(dev, []) if isinstance(peers, dict) else (peers or [])
        own = conf.get(dev)
        net.pings[dev] = {
            p: ask(dev, f"ping {p}", ["-ping", "-g", "address", p], f"ping-{p}")
            for p in list(dict.fromkeys(wanted))[:MAX_PEERS]
            if p != own
        }
    return net

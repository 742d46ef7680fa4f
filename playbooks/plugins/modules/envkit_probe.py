#!/usr/bin/python
# envkit: read everything the envkit roles decide on, in one module run per host (reads only).
from __future__ import annotations

DOCUMENTATION = r"""
module: envkit_probe
short_description: Read an Ascend host's state for the envkit roles in one pass (changes nothing)
description:
  - Returns, as facts, the OS and architecture (the same values as Ansible's own distribution facts),
    Huawei PCI devices, the npu-smi chip names, processes holding C(/dev/davinci*), free disk under the
    install path, kernel headers and dkms, the Python, users and groups, and the contents or checksums of
    the files the roles compare with the lock (C(version.info), C(*_install.info), stamps, env files).
  - One module run (it pipelines) replaces a fact gathering, a script and a slurp or stat per file, so a
    host that is already converged costs one remote round trip and every install task is skipped.
options:
  install_path:
    description: The Ascend install path (free disk is measured under it).
    type: str
    default: /usr/local/Ascend
  pci_vendor:
    description: PCI vendor id of the NPUs (Huawei is 19e5).
    type: str
    default: "19e5"
  read:
    description: Files whose text is returned (C(content)); a missing file gives C(exists=false).
    type: list
    elements: str
    default: []
  stat:
    description: Paths whose existence, type, mode, sha1 and link target are returned.
    type: list
    elements: str
    default: []
  users:
    description: Users whose passwd entry is returned (name, uid, group, home, shell, home_exists).
    type: list
    elements: str
    default: []
  groups:
    description: Groups whose existence is returned.
    type: list
    elements: str
    default: []
  npu_smi:
    description: Run C(npu-smi info) when present, for the chip names.
    type: bool
    default: true
  hccn:
    description: Where hccn_tool exists, return its read-only answers per device (C(-link -g), C(-net_health -g),
      C(-tls -g), C(-ip -g), C(-ping -g address PEER)) and C(/etc/hccn.conf), unparsed (the controller checks them).
    type: bool
    default: true
  hccn_tool:
    description: The hccn_tool to run (default the driver's C(/usr/local/Ascend/driver/tools/hccn_tool), else PATH).
    type: str
    default: ""
  hccn_conf:
    description: The hccn.conf whose C(address_N) lists the devices (else C(/dev/davinciN)).
    type: str
    default: /etc/hccn.conf
  hccn_peers:
    description: Peer device IPs each device pings (its own address is skipped).
    type: list
    elements: str
    default: []
  hccn_timeout:
    description: Seconds allowed to each hccn_tool query.
    type: int
    default: 10
  expect:
    description:
      - What the lock gives, per role (C(preflight), C(hdk), C(cann), C(python), C(smoke); a role left out or null
        decides nothing). The module reads the files each role compares and returns the roles' decisions in
        C(envkit_state.decide), so that the controller templates none of them (issue 26).
      - Only indices, booleans, names from a fixed set and messages come back; the controller keeps what it acts on
        (the packages, their sources) and takes from a host only which of them it needs.
    type: dict
    default: {}
author: envkit developers
"""

RETURN = r"""
ansible_facts:
  description: C(distribution), C(distribution_version), C(distribution_major_version), C(os_family),
    C(architecture), C(kernel), and C(envkit_state) (the probe and the files).
  returned: always
  type: dict
msg:
  description: The host's report (C(warnings), hccn_tool's answers as C(network), and where the smoke role runs the
    verdict recorded on the host), where C(envkit_state.decide.end) is true (nothing to do, no preflight error,
    C(end_unchanged) set); the host then ends its play, and envkit provision reads the report from here.
  returned: when envkit_state.decide.end is true
  type: dict
"""

import functools
import glob
import grp
import hashlib
import json
import os
import platform
import pwd
import re
import shutil
import stat as stat_mod
import subprocess

MAX_READ = 1 << 20


def _open_regular(path):
    """A read-only file object of `path` if it is a regular file when opened; OSError otherwise. Opened without
    blocking (a FIFO at version.info, verdict.json or hccn.conf would hang the probe, and the play with it: a plain
    open() waits for a writer) and judged on the descriptor opened, not on an earlier lstat a swap could outrun."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("%s is not a regular file" % path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read(path):
    try:
        with _open_regular(path) as fh:
            data = fh.read(MAX_READ)
    except (FileNotFoundError, NotADirectoryError):
        return {"exists": False, "content": ""}
    except OSError as exc:
        return {"exists": True, "content": "", "error": str(exc)}
    return {"exists": True, "content": data.decode("utf-8", "replace")}


def _stat(path):
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return {"exists": False}
    out = {
        "exists": True,
        "isdir": stat_mod.S_ISDIR(st.st_mode),
        "isreg": stat_mod.S_ISREG(st.st_mode),
        "islnk": stat_mod.S_ISLNK(st.st_mode),
        "mode": "%04o" % stat_mod.S_IMODE(st.st_mode),
    }
    if out["islnk"]:
        out["lnk_target"] = os.readlink(path)
    if out["isreg"]:
        h = hashlib.sha1()
        try:
            with _open_regular(path) as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out["checksum"] = h.hexdigest()
        except OSError:
            out["checksum"] = ""
    return out


def _pci_devices(vendor):
    want = ("0x" + vendor.lower(),)
    n = 0
    for f in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(f) as fh:
                if fh.read().strip().lower() in want:
                    n += 1
        except OSError:
            continue
    return n


def _npu_smi():
    for cand in ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi", shutil.which("npu-smi") or ""):
        if cand and os.access(cand, os.X_OK):
            return cand
    return ""


def _npu_names(smi):
    try:
        p = subprocess.run([smi, "info"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False, ""
    if p.returncode != 0:
        return False, ""
    names = set()
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        m = re.match(r"^\| (\d+) +([A-Za-z0-9][^ |]*)", line)
        if m:
            names.add(m.group(2))
    return True, " ".join(sorted(names))


def _busy_pids():
    """Processes holding an NPU device (/dev/davinci<N>) open."""
    busy = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = "/proc/%s/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd_dir + "/" + fd)
            except OSError:
                continue
            if re.match(r"^/dev/davinci\d+$", target):
                busy.add(int(pid))
                break
    return " ".join(str(p) for p in sorted(busy))


def _free_kb(path):
    d = path
    while d and not os.path.isdir(d):
        d = os.path.dirname(d)
    st = os.statvfs(d or "/")
    return st.f_bavail * st.f_frsize // 1024


def kernel_headers(kernel, root="/"):
    """Where the running kernel's headers are, or "": Debian/Ubuntu install them to /lib/modules/<k>/build
    (linux-headers-<k>), the RHEL family (openEuler, Kylin) to /usr/src/kernels/<k> (kernel-devel-<k>)."""
    for rel in ("lib/modules/%s/build" % kernel, "usr/src/kernels/%s" % kernel):
        path = os.path.join(root, rel)
        if os.path.isdir(path):
            return "/" + rel
    return ""


HCCN_TOOL = "/usr/local/Ascend/driver/tools/hccn_tool"
HCCN_QUERIES = (("link", ["-link", "-g"]), ("net_health", ["-net_health", "-g"]), ("tls", ["-tls", "-g"]), ("ip", ["-ip", "-g"]))
HCCN_MAX_OUT = 1 << 16
HCCN_MAX_DEVICES = 16


def _hccn_run(argv, timeout):
    """(output, error): stdout+stderr of a read-only query, capped; its own session, killed whole at the timeout."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    except OSError as exc:
        return None, str(exc)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            p.kill()
        p.communicate()
        return None, "timed out after %d s" % timeout
    return out[:HCCN_MAX_OUT].decode("utf-8", "replace"), None


def hccn_state(tool, conf_path, peers, timeout):
    """hccn_tool's answers per device, unparsed; {} where no hccn_tool exists."""
    if not tool:
        for cand in (HCCN_TOOL, shutil.which("hccn_tool") or ""):
            if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
                tool = cand
                break
    if not tool or not os.access(tool, os.X_OK):
        return {}
    conf = _read(conf_path)
    addresses = {}
    for line in conf.get("content", "").splitlines():
        m = re.match(r"^\s*address_(\d{1,3})\s*=\s*(\S+)\s*$", line)
        if m:
            addresses[int(m.group(1))] = m.group(2)
    devices = sorted(addresses) or sorted(int(n[7:]) for n in os.listdir("/dev") if re.match(r"^davinci\d{1,3}$", n))
    outputs, pings, errors = {}, {}, {}
    for dev in devices[:HCCN_MAX_DEVICES]:
        outputs[str(dev)] = {}
        for what, args in HCCN_QUERIES:
            out, err = _hccn_run([tool, "-i", str(dev)] + args, timeout)
            outputs[str(dev)][what] = out
            if err:
                errors["%d %s" % (dev, what)] = "hccn_tool -i %d %s: %s" % (dev, " ".join(args), err)
        pings[str(dev)] = {}
        for peer in peers:
            if peer == addresses.get(dev) or not re.match(r"^[0-9A-Fa-f.:]+$", peer):
                continue
            out, err = _hccn_run([tool, "-i", str(dev), "-ping", "-g", "address", peer], timeout)
            pings[str(dev)][peer] = out
            if err:
                errors["%d ping %s" % (dev, peer)] = "hccn_tool -i %d -ping -g address %s: %s" % (dev, peer, err)
    return {"tool": tool, "conf": conf, "outputs": outputs, "pings": pings, "errors": errors}


def _user(name):
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return {"exists": False}
    try:
        group = grp.getgrgid(pw.pw_gid).gr_name
    except KeyError:
        group = str(pw.pw_gid)
    return {"exists": True, "uid": pw.pw_uid, "group": group, "home": pw.pw_dir, "shell": pw.pw_shell,
            "home_exists": os.path.isdir(pw.pw_dir)}


def _group(name):
    try:
        grp.getgrnam(name)
        return {"exists": True}
    except KeyError:
        return {"exists": False}


# >>> the ordering: one definition, envkit.versions's, shipped byte for byte to the hosts in envkit_probe
# (playbooks/plugins/modules/envkit_probe.py), where the envkit_hdk role's firmware range check is
# decided; tests/provision/test_firmware_ranges.py holds the two copies equal. Standard library only (re,
# functools), for any Python 3.7 on a host.
_TAGS = {"dev": 0, "alpha": 1, "a": 1, "beta": 2, "b": 2, "rc": 3, "c": 3, "post": 5}
_END = 4
_NUMBER = 6
_TOKEN = re.compile(r"(?P<num>\d+)|(?P<tag>dev|alpha|beta|rc|post|a|b|c)(?P<tagnum>\d*)")
_VALID = re.compile(r"^v?[0-9][0-9a-z.\-_]*(\+[0-9a-z.]+)?$")
_RANGE = re.compile(r"\[([^,\]]+),([^\]]+)\]")
MAX_LENGTH = 128  # the longest real version is ~30 characters; a 5,000-digit one is an attack, not a version
MAX_RANGES_LENGTH = 1024  # a real list is at most ~100 characters; the range regex is quadratic in its length


class InvalidVersion(ValueError):
    pass


@functools.lru_cache(maxsize=8192)
def version_key(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...], str | None]:
    """(key, release, local) of a version in any of Ascend's or Python's spellings: the key it sorts and compares by,
    its leading numbers as written, its local label (None without one); InvalidVersion when the text is none."""
    raw = str(text).strip()
    if len(raw) > MAX_LENGTH:
        raise InvalidVersion(f"not a version: {raw[:20]!r}... is {len(raw)} characters long (at most {MAX_LENGTH})")
    low = raw.lower()
    if not low or not _VALID.match(low):
        raise InvalidVersion(f"not a version: {text!r}")
    public, _, local = low.partition("+")
    if public.startswith("v"):
        public = public[1:]
    tokens: list[tuple[int, int]] = []
    for piece in re.split(r"[.\-_]", public):
        if not piece:
            continue
        pos = 0
        while pos < len(piece):
            m = _TOKEN.match(piece, pos)
            if not m:
                raise InvalidVersion(f"not a version: {text!r}")
            if m.group("num") is not None:
                tokens.append((_NUMBER, int(m.group("num"))))
            else:
                tokens.append((_TAGS[m.group("tag")], int(m.group("tagnum") or 0)))
            pos = m.end()
    if not tokens or tokens[0][0] != _NUMBER:
        raise InvalidVersion(f"not a version: {text!r}")
    lead = 0
    while lead < len(tokens) and tokens[lead][0] == _NUMBER:
        lead += 1
    release = [n for _, n in tokens[:lead]]
    trimmed = list(release)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    key = [(_NUMBER, n) for n in trimmed] + tokens[lead:] + [(_END, 0)]
    return tuple(key), tuple(release), local or None


def in_range(version: str, lower: str, upper: str) -> bool:
    """Closed range as Ascend writes it.

    An upper bound ending with '.' (``[24.1,24.1.]``) is a prefix range: it compares the leading
    numbers only, so every build of the 24.1 line (``24.1.rc3``, ``24.1.0.3``) is inside. The
    trailing zeros of a release do not count there either (``7`` is ``7.0``, at the bottom of
    ``[7.0,7.1.]``); a pre-release's do (``23.0.rc3`` comes before ``23.0.0``, below ``[23.0.0,23.0.0.]``).
    """
    key, release, _ = version_key(version)
    if upper.endswith("."):
        lo = version_key(lower)[1]
        hi = version_key(upper.rstrip("."))[1]
        line = release + (0,) * (len(lo) - len(release)) if all(k >= _END for k, _ in key) else release
        return line[: len(lo)] >= lo and release[: len(hi)] <= hi
    return version_key(lower)[0] <= key <= version_key(upper)[0]


def parse_ranges(text: str) -> list[tuple[str, str]]:
    """``[7.0.0,7.5.99],[8.0,8.0.]`` -> [("7.0.0", "7.5.99"), ("8.0", "8.0.")]."""
    if len(text) > MAX_RANGES_LENGTH:
        raise InvalidVersion(f"not a list of version ranges: {len(text)} characters long (at most {MAX_RANGES_LENGTH})")
    found = _RANGE.findall(text.replace(" ", ""))
    if not found:
        raise InvalidVersion(f"not a list of version ranges: {text!r}")
    for lo, hi in found:
        version_key(lo)
        version_key(hi.rstrip("."))
    return found


def in_any_range(version: str, ranges: list[tuple[str, str]]) -> bool:
    return any(in_range(version, lo, hi) for lo, hi in ranges)


# <<< the ordering


# --- the roles' decisions (what differs from the lock), from the probe's own reads ----------------------------
MIRROR_URL = re.compile(r"^https?://[A-Za-z0-9._~:\[\]%-]+(/[A-Za-z0-9._~!$&()*+,;=:@%/-]*)?\Z")
HDK_COMPONENTS = ("driver", "firmware")


def info_value(text, key):
    """The value of the first `key=...` line of a version/install info file ("" if none), as the vendor writes it."""
    m = re.search(r"(?m)^%s=.*$" % re.escape(key), text)
    return m.group(0)[len(key) + 1:].strip() if m else ""


def _content(path):
    return _read(path)["content"]


def os_family_of(families, os_family):
    """The lock's family name (debian, rhel) whose list holds Ansible's os_family; "unknown" if none does."""
    for name, members in (families or {}).items():
        if os_family in (members or []):
            return name
    return "unknown"


def preflight_decide(e, facts, state):
    """(errors, warnings, user_todo): the checks that refuse a host, the warnings, and whether the driver's user
    needs creating or fixing."""
    host = str(e.get("host", ""))
    arch, dist, ver, fam = (facts.get("ansible_" + k, "") for k in ("architecture", "distribution", "distribution_version", "os_family"))
    family = os_family_of(e.get("os_families"), fam)
    errors, warnings = [], []
    bad = [str(m) for m in e.get("mirrors") or [] if not MIRROR_URL.match(str(m))]
    if bad:
        errors.append("Not a mirror URL (http or https, a host, no credentials, query or quotes): " + ", ".join(bad))
    if not (arch == e.get("lock_arch") and family == e.get("lock_os_family")):
        errors.append(
            "%s is %s %s %s (%s); the lock is for %s %s (%s family). Resolve a lock for this host (envkit resolve --arch/--os)."
            % (host, arch, dist, ver, fam, e.get("lock_arch"), e.get("lock_os", ""), e.get("lock_os_family"))
        )
    if e.get("require_npu") and state["pci_devices"] <= 0:
        errors.append("No PCI device of vendor %s (Huawei) on %s: not an Ascend host." % (e.get("pci_vendor"), host))
    min_free_gb = e.get("min_free_gb", 0)
    if state["free_kb"] < int(min_free_gb) * 1024 * 1024:
        errors.append("%s has %s GiB free; the stack needs %s GiB." % (e.get("install_path"), round(state["free_kb"] / 1048576, 1), min_free_gb))
    if e.get("require_kernel_headers") and not (state["kernel_headers"] and state["dkms"]):
        hints = e.get("headers_hint") or {}
        hint = hints.get(family, "%s; %s" % (hints.get("debian", ""), hints.get("rhel", "")))
        errors.append(
            "The NPU driver builds kernel modules: install the headers of kernel %s and dkms (%s), or set "
            "envkit_preflight_require_kernel_headers=false." % (state["kernel"], hint.replace("KVER", state["kernel"]))
        )
    lock_os = e.get("lock_os") or ""
    if lock_os and dist.lower() + ver != lock_os:
        warnings.append("OS %s %s is not the lock's %s (same family)" % (dist, ver, lock_os))
    if state["pci_devices"] <= 0:
        warnings.append("no Huawei PCI device (vendor %s) found" % e.get("pci_vendor"))
    names = state["npu_names"].split()
    if names and not set(e.get("npu_smi_names") or []) & set(names):
        warnings.append("npu-smi shows %s, not the lock's chip %s" % (state["npu_names"], e.get("lock_chip")))
    user = e.get("user") or {}
    u = state["users"].get(user.get("name"), {})
    user_ok = (
        state["groups"].get(user.get("name"), {}).get("exists") and u.get("exists") and u.get("group") == user.get("name")
        and u.get("home") == user.get("home") and u.get("shell") == "/bin/bash" and u.get("home_exists")
    )
    return errors, warnings, bool(user.get("manage")) and not user_ok


def hdk_decide(e):
    """What of the driver and firmware differs from the lock, in the vendor's order (a first install: driver then
    firmware; an upgrade: firmware then driver), the plan's lines and the installed driver's firmware range."""
    root = str(e.get("install_path", "/usr/local/Ascend"))
    driver_text, firmware_text = _content(root + "/driver/version.info"), _content(root + "/firmware/version.info")
    current = {"driver": info_value(driver_text, "package_version"), "firmware": info_value(firmware_text, "package_version")}
    want = {c: str((e.get(c) or {}).get("package_version", "")) for c in HDK_COMPONENTS if e.get(c)}
    needed = [c for c in HDK_COMPONENTS if e.get("enabled") and c in want and current[c].lower() != want[c].lower()]
    order = HDK_COMPONENTS if current["driver"] == "" else HDK_COMPONENTS[::-1]
    todo = [c for c in order if c in needed]
    installed_range = info_value(driver_text, "compatible_version_fw")
    return {
        "todo": todo,
        "plan": ["%s %s -> %s" % (c, current[c] or "none", want[c]) for c in todo],
        "driver_fw_range": installed_range,
        **firmware_range_check(e, todo, installed_range),
    }


def firmware_range_check(e, todo, installed_range):
    """The check envkit_hdk makes before it changes the firmware (tasks/converge.yml asserts fw_in_range where
    fw_checked): the lock's firmware Version inside the compatible range of the driver it will run with (the lock's
    driver's where the driver changes too, else the installed driver's), by envkit.versions' ordering (the block
    above). Checked where the firmware changes and both are known; a range or Version that is none is outside,
    with the reason in fw_error."""
    version = str((e.get("firmware") or {}).get("firmware_version") or "")
    ranges = str((e.get("driver") or {}).get("compatible_firmware") or "") if "driver" in todo else installed_range
    out = {"fw_range": ranges, "fw_checked": False, "fw_in_range": None, "fw_error": ""}
    if "firmware" not in todo or not version or not ranges:
        return out
    out["fw_checked"] = True
    try:
        out["fw_in_range"] = in_any_range(version, parse_ranges(ranges))
    except InvalidVersion as exc:
        out.update(fw_in_range=False, fw_error=str(exc))
    return out


def cann_decide(e):
    """The first CANN package whose installed version is not the lock's (-1: none): it and every package after it
    are (re)installed, in order; the plan's lines. `e`: the packages' components, versions and info files, in the
    lock's order."""
    if not e.get("enabled"):
        return {"first": -1, "plan": []}
    packages = list(zip(*(e.get(k) or [] for k in ("components", "versions", "info_files"))))
    current = [info_value(_content(str(f)), "version") for _, _, f in packages]
    first = next((i for i, (_, v, _) in enumerate(packages) if current[i].lower() != str(v).lower()), -1)
    plan = ["%s %s -> %s" % (c, current[i] or "none", v) for i, (c, v, _) in enumerate(packages) if 0 <= first <= i]
    return {"first": first, "plan": plan}


def python_decide(e):
    """(todo, env_todo): the venv is (re)built when its stamp is not the bundle's requirements sha256; the env files
    are written when one differs from what the lock gives (content, mode, the profile.d link)."""
    if not e.get("enabled"):
        return False, False
    todo = bool(e.get("requirements")) and _content(str(e.get("stamp", ""))).strip() != e.get("requirements_sha256")
    d = str(e.get("env_dir", ""))
    folder, env, env_sh = _stat(d), _stat(d + "/env"), _stat(d + "/env.sh")
    link = _stat(str(e.get("profile_link", "/etc/profile.d/envkit.sh")))
    same = (
        folder.get("isdir") and folder.get("mode") == "0755"
        and env.get("checksum", "") == e.get("env_sha1") and env.get("mode", "") == "0644"
        and env_sh.get("checksum", "") == e.get("env_sh_sha1") and env_sh.get("mode", "") == "0644"
        and (not e.get("profile_d") or link.get("lnk_target", "") == d + "/env.sh")
    )
    return todo, not same


def smoke_decide(e):
    """(stale, the verdict recorded on the host): doctor and smoke run again when the host's lock is not the
    controller's, the host holds no verdict for this lock, or the last smoke test failed (until it passes)."""
    d = str(e.get("remote_dir", "/var/lib/envkit"))
    recorded, doctor, smoke = _read(d + "/verdict.json"), _read(d + "/doctor.json"), _read(d + "/smoke.json")
    try:
        last = json.loads(recorded["content"]) if recorded["content"].strip() else {}
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth (a file read is at most 1 MiB)
        last = {}
    last = last if isinstance(last, dict) else {}
    lock_sha1 = str(e.get("lock_sha1", ""))
    stale = (
        e.get("rerun") == "always" or str(last.get("smoke", "")).startswith("failed") or lock_sha1 == ""
        or _stat(d + "/envkit.lock").get("checksum", "") != lock_sha1 or last.get("lock_sha1", "") != lock_sha1
        or not doctor["exists"] or not smoke["exists"]
    )
    verdict = {
        "smoke": "%s (unchanged)" % last.get("smoke", "not run"),
        "doctor": "%s (unchanged)" % last.get("doctor", "not run"),
        "reports": {"doctor.json": doctor["content"], "smoke.json": smoke["content"]},
    }
    return bool(stale), verdict


def decide(expect, facts, state):
    """Every role's decision for this host (envkit_state.decide): a role not expected decides nothing."""
    pre = expect.get("preflight") or {}
    errors, warnings, user_todo = preflight_decide(pre, facts, state) if pre else ([], [], False)
    hdk = hdk_decide(expect["hdk"]) if expect.get("hdk") else {"todo": [], "plan": []}
    cann = cann_decide(expect["cann"]) if expect.get("cann") else {"first": -1, "plan": []}
    python_todo, env_todo = python_decide(expect["python"]) if expect.get("python") else (False, False)
    smoke = expect.get("smoke") or {}
    smoke_runs = bool(smoke.get("enabled")) and not smoke.get("check_mode")
    stale, verdict = smoke_decide(smoke) if smoke else (False, {})
    changed = user_todo or bool(hdk["todo"]) or cann["first"] >= 0 or python_todo
    unchanged = not (changed or env_todo or (smoke_runs and stale))
    report = {"warnings": warnings, "network": state.get("hccn") or {}}
    if smoke_runs:
        report.update(verdict)
    return {
        "errors": errors,
        "warnings": warnings,
        "user": user_todo,
        "hdk": hdk,
        "cann": cann,
        "python": python_todo,
        "python_env": env_todo,
        "smoke_stale": stale,
        "smoke_verdict": verdict,
        # this run changes the host (envkit_smoke reruns doctor and smoke), the env files aside: those count when
        # written (envkit_python_env_written)
        "changed": changed,
        # nothing for any role to do (a fan-out head still serves its group: the controller knows that)
        "unchanged": unchanged,
        # the host ends its play after the probe (the preflight's end_unchanged: site.yml, not a fan-out head), with
        # the report as the probe's own message: a host with errors goes on to the preflight's check, which fails
        "end": unchanged and not errors and bool(pre.get("end_unchanged")),
        "report": report,
    }


FACTS_PACKAGE = "ansible.module_utils.facts"


def distribution_facts(module):
    """Ansible's own distribution facts (its DistributionFactCollector, the values `setup` gives), without running the
    `ansible.module_utils.facts` package's __init__: that imports every fact collector of every platform (hardware,
    network, virtual) to re-export two functions the probe does not use, about 0.12 s of CPU of a 0.33 s probe on
    every host and run. An empty package over the same folder stands in for it, so its submodules import as they
    are; where that fails (another ansible-core's layout), the package is imported as usual."""
    import sys
    import types

    import ansible.module_utils

    if FACTS_PACKAGE not in sys.modules:
        stand_in = types.ModuleType(FACTS_PACKAGE)
        stand_in.__path__ = [os.path.join(p, "facts") for p in ansible.module_utils.__path__]
        sys.modules[FACTS_PACKAGE] = stand_in
    try:
        from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    except ImportError:
        for name in [n for n in sys.modules if n == FACTS_PACKAGE or n.startswith(FACTS_PACKAGE + ".")]:
            del sys.modules[name]
        from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    return DistributionFactCollector().collect(module=module)


def main():
    # imported here: the decisions above import without Ansible (the tests load them in-process; importing
    # ansible.module_utils there patches sys.intern). Ansible finds these imports wherever they are in the module.
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "install_path": {"type": "str", "default": "/usr/local/Ascend"},
            "pci_vendor": {"type": "str", "default": "19e5"},
            "read": {"type": "list", "elements": "str", "default": []},
            "stat": {"type": "list", "elements": "str", "default": []},
            "users": {"type": "list", "elements": "str", "default": []},
            "groups": {"type": "list", "elements": "str", "default": []},
            "npu_smi": {"type": "bool", "default": True},
            "hccn": {"type": "bool", "default": True},
            "hccn_tool": {"type": "str", "default": ""},
            "hccn_conf": {"type": "str", "default": "/etc/hccn.conf"},
            "hccn_peers": {"type": "list", "elements": "str", "default": []},
            "hccn_timeout": {"type": "int", "default": 10},
            "expect": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    dist = distribution_facts(module)
    kernel = platform.release()
    smi = _npu_smi()
    smi_ok, names = _npu_names(smi) if (smi and p["npu_smi"]) else (False, "")
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401

        has_venv = True
    except ImportError:
        has_venv = False
    files = {}
    for path in p["read"]:
        files[path] = _read(path)
    for path in p["stat"]:
        files.setdefault(path, {}).update(_stat(path))
    state = {
        "pci_devices": _pci_devices(p["pci_vendor"]),
        "npu_smi": smi,
        "npu_smi_ok": smi_ok,
        "npu_names": names,
        "busy_pids": _busy_pids(),
        "free_kb": _free_kb(p["install_path"]),
        "kernel": kernel,
        "kernel_headers": kernel_headers(kernel) != "",
        "kernel_headers_path": kernel_headers(kernel),
        "dkms": shutil.which("dkms", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is not None,
        "python_venv": has_venv,
        "python_version": "%d.%d" % tuple(__import__("sys").version_info[:2]),
        "files": files,
        "users": {u: _user(u) for u in p["users"]},
        "groups": {g: _group(g) for g in p["groups"]},
        "hccn": hccn_state(p["hccn_tool"], p["hccn_conf"], p["hccn_peers"], p["hccn_timeout"]) if p["hccn"] else {},
    }
    facts = {"ansible_" + k if not k.startswith("ansible_") else k: v for k, v in dist.items()}
    facts.update({"ansible_architecture": platform.machine(), "ansible_kernel": kernel})
    report = None
    if p["expect"]:
        state["decide"] = decide(p["expect"], facts, state)
        # no role reads the report from the facts: it goes back once, as the message (the host's reports in it are
        # also in decide.smoke_verdict, for the smoke role)
        report = state["decide"].pop("report")
    facts["envkit_state"] = state
    if state.get("decide", {}).get("end"):
        # what the later tasks would have reported (the warnings, hccn_tool's answers, the verdict recorded on the
        # host): envkit provision reads it from this task's result, so an unchanged host needs no task but this one
        module.exit_json(changed=False, ansible_facts=facts, msg=report)
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()

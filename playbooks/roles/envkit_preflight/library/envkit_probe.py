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
author: envkit developers
"""

RETURN = r"""
ansible_facts:
  description: C(distribution), C(distribution_version), C(distribution_major_version), C(os_family),
    C(architecture), C(kernel), and C(envkit_state) (the probe and the files).
  returned: always
  type: dict
"""

import glob
import grp
import hashlib
import os
import platform
import pwd
import re
import shutil
import stat as stat_mod
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts.system.distribution import DistributionFactCollector

MAX_READ = 1 << 20


def _read(path):
    try:
        with open(path, "rb") as fh:
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
            with open(path, "rb") as fh:
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


def main():
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
        },
        supports_check_mode=True,
    )
    p = module.params
    dist = DistributionFactCollector().collect(module=module)
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
    facts.update({"ansible_architecture": platform.machine(), "ansible_kernel": kernel, "envkit_state": state})
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()

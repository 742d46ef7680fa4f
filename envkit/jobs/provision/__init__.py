"""Provisioning, the pure part: the vars file rendered from a lock and a bundle, and the run's summary.

`envkit provision` = `render_vars()` (lock + bundle -> the vars the hand-written roles in playbooks/
read) -> `envkit.executor.ansible` (ansible-playbook, JSON-lines events) -> `summarize()` (events ->
per-host rows, plans, smoke verdicts) -> a table and an exit code.

The bundle is a plain directory (the interface issue 5's bundle builder fills):

    DIR/vendor/     the lock's vendor files, named as in the lock: bare `.run` installers
                    (run.file, or a name matching run.pattern) and/or the signed `.zip` editions
    DIR/vendor/SHA256SUMS   `sha256sum` lines for files whose hash the lock does not carry
    DIR/wheels/     every wheel of the Python stack (envkit's own wheel included, for the smoke step)
    DIR/wheels/requirements.txt   `name==version --hash=sha256:...` for each wheel (pip --require-hashes)

`--artifacts DIR` and `--wheels DIR` name the two folders separately.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit import versions
from envkit.artifacts.wheels import FOLDER_REQUIREMENTS as REQUIREMENTS_NAME
from envkit.artifacts.wheels import BundleLayout, parse_requirements
from envkit.errors import BadInput, CheckFailed, Where
from envkit.io.outputs import sha256_file
from envkit.lock.gate import SCHEMA_ONLY, LockCheck
from envkit.models.lock import Artifact, Lock

if TYPE_CHECKING:
    from envkit.executor.ansible import HostRow, Summary

DEFAULT_INSTALL_PATH = "/usr/local/Ascend"
SUMS_NAME = "SHA256SUMS"

_INFO_FILE = {
    "cann-toolkit": "{home}/{arch}-linux/ascend_toolkit_install.info",
    "cann-ops": "{home}/{arch}-linux/ascend_ops_install.info",
    "cann-kernels": "{home}/{arch}-linux/ascend_kernels_install.info",
    "cann-nnal": "{install_path}/nnal/atb/latest/version.info",
}


# --- the bundle ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BundlePaths:
    vendor: Path
    wheels: Path | None
    requirements: Path | None


def locate_bundle(bundle: Path | None, artifacts: Path | None, wheels: Path | None) -> BundlePaths:
    """The vendor and wheels folders from `--bundle DIR` or `--artifacts`/`--wheels` (which win)."""
    if bundle is not None and bundle.is_file():  # the archive `envkit bundle build -o X.tar` writes: its folder is wanted
        root = bundle.name
        for suffix in (".tar.gz", ".tgz", ".tar"):
            root = root[: -len(suffix)] if root.endswith(suffix) else root
        raise BadInput(
            f"--bundle {bundle} is a file: provision reads the bundle's folder",
            where=Where(str(bundle)),
            hint=f"Extract it (`tar -xf {shlex.quote(str(bundle))}` writes the folder {root}/ where it runs) and pass "
            f"--bundle {shlex.quote(root)}, or build the bundle as a folder: envkit bundle build --lock LOCK --artifacts DIR "
            "-o FOLDER",
        )
    layout = BundleLayout(bundle) if bundle is not None else None
    vendor = artifacts or (Path(layout.vendor) if layout else None)
    wheel_dir: Path | None = wheels or (Path(layout.wheels().parent) if layout else None)
    if layout is not None and wheels is None and Path(layout.requirements()).is_file():
        # the layout `envkit bundle build` writes: wheels/target/ + requirements/target.txt + manifest.json
        reqs = Path(layout.requirements())
        parse_requirements(reqs.read_text(), str(reqs), options_allowed=True)  # pip --require-hashes, checked early
        if vendor is None or not vendor.is_dir():
            raise BadInput(f"{vendor}: not a directory", hint="The bundle's vendor/ folder holds the lock's .run/.zip files.")
        return BundlePaths(vendor=vendor.resolve(), wheels=Path(layout.wheels()).resolve(), requirements=reqs.resolve())
    if vendor is None:
        raise BadInput(
            "no vendor files given",
            hint="Pass --bundle DIR (with DIR/vendor/ and DIR/wheels/) or --artifacts DIR.",
        )
    if not vendor.is_dir():
        raise BadInput(f"{vendor}: not a directory", hint="The bundle's vendor/ folder holds the lock's .run/.zip files.")
    if wheel_dir is not None and not wheel_dir.is_dir():
        if wheels is not None:
            raise BadInput(f"--wheels {wheel_dir}: not a directory")
        wheel_dir = None
    req = None
    if wheel_dir is not None:
        req = wheel_dir / REQUIREMENTS_NAME
        if not req.is_file():
            raise BadInput(
                f"{req}: missing",
                hint="The wheels folder needs a hashed requirements.txt (`name==version --hash=sha256:...` per wheel).",
            )
        parse_requirements(req.read_text(), str(req), options_allowed=True)  # pip --require-hashes, checked early
    return BundlePaths(
        vendor=vendor.resolve(), wheels=wheel_dir.resolve() if wheel_dir else None, requirements=req.resolve() if req else None
    )


def read_sums(vendor: Path) -> dict[str, str]:
    """Hashes of vendor files from vendor/SHA256SUMS, or from the bundle's manifest.json (files[].path/sha256)."""
    out: dict[str, str] = {}
    manifest = Path(BundleLayout(vendor.parent).manifest)
    if manifest.is_file():
        try:
            for f in json.loads(manifest.read_text()).get("files", []):
                if str(f.get("path", "")).startswith("vendor/") and f.get("sha256"):
                    out[Path(f["path"]).name] = str(f["sha256"]).lower()
        except (ValueError, AttributeError):
            pass
    path = vendor / SUMS_NAME
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        m = re.match(r"^([0-9a-fA-F]{64})\s+\*?(.+)$", line.strip())
        if m:
            out[Path(m.group(2)).name] = m.group(1).lower()
    return out


@dataclass(frozen=True)
class Staged:
    """One lock artifact as the bundle holds it."""

    component: str
    version: str
    src: str
    edition: str  # "run" or "zip"
    sha256: str
    run_pattern: str
    flags: list[str]
    size: int = 0  # bytes (pull mode: a mirror that sends more is refused)

    def as_vars(self) -> dict[str, Any]:
        """The file as the roles' vars name it (all but the component): version, src, edition, sha256, size, ..."""
        return {
            "version": self.version,
            "src": self.src,
            "edition": self.edition,
            "sha256": self.sha256,
            "size": self.size,
            "run_pattern": self.run_pattern,
            "flags": self.flags,
        }


def select_file(art: Artifact, names: Iterable[str]) -> tuple[str, str] | None:
    """(file name, edition) of the artifact in a folder: the bare .run first, then the zip edition."""
    names = sorted(names)
    if art.run.file and art.run.file in names:
        return art.run.file, "run"
    if not art.run.file:
        hits = [n for n in names if fnmatch.fnmatchcase(n, art.run.pattern)]
        if hits:
            return hits[-1], "run"
    if art.zip and art.zip.file in names:
        return art.zip.file, "zip"
    return None


def stage_artifacts(lock: Lock, vendor: Path, *, verify: bool = True) -> list[Staged]:
    """Find each artifact in the vendor folder and its expected sha256 (lock first, then SHA256SUMS)."""
    names = [p.name for p in vendor.iterdir() if p.is_file()]
    sums = read_sums(vendor)
    out: list[Staged] = []
    missing: list[str] = []
    for art in lock.artifacts:
        hit = select_file(art, names)
        if hit is None:
            wanted = art.run.file or art.run.pattern
            missing.append(f"{art.component}: {wanted}" + (f" or {art.zip.file}" if art.zip else ""))
            continue
        name, edition = hit
        lock_sha = art.run.sha256 if edition == "run" else (art.zip.sha256 if art.zip else None)
        expected = lock_sha or sums.get(name)
        if expected is None:
            raise BadInput(
                f"{vendor / name}: no sha256 in the lock or in {SUMS_NAME}",
                hint=f"Add `sha256sum {name} >> {SUMS_NAME}` from a trusted source; every vendor file is checksum-verified.",
            )
        if verify:
            actual = sha256_file(vendor / name)
            if actual != expected:
                where = "the lock" if lock_sha else SUMS_NAME
                raise BadInput(
                    f"{vendor / name}: sha256 {actual} does not match {where} ({expected})",
                    hint="The file is not the one the lock names: fetch it again from the vendor.",
                )
        out.append(
            Staged(
                component=art.component,
                version=art.version,
                src=name,
                edition=edition,
                sha256=expected,
                run_pattern=art.run.file or art.run.pattern,
                flags=list(art.run.flags),
                size=(vendor / name).stat().st_size,
            )
        )
    if missing:
        raise BadInput(
            f"{vendor}: missing vendor files for " + "; ".join(missing),
            hint="Put the lock's files in the bundle's vendor/ folder (names as in the lock).",
        )
    return out


def pack_wheels(wheels: Path, dest: Path, requirements: Path | None = None) -> Path:
    """wheels/ (+ requirements.txt) as one deterministic tar: one transfer per host, reused when unchanged."""
    import tarfile

    files = sorted((p for p in wheels.iterdir() if p.is_file() and p.name != REQUIREMENTS_NAME), key=lambda p: p.name)
    req = requirements or (wheels / REQUIREMENTS_NAME)
    if req.is_file():
        files.append(req)
    key = hashlib.sha256()
    for p in files:
        st = p.stat()
        key.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    target = dest / f"wheels-{key.hexdigest()[:16]}.tar"
    if target.is_file():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
        for p in files:
            info = tar.gettarinfo(str(p), arcname=REQUIREMENTS_NAME if p == req else p.name)
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "root", "root", 0o644
            with open(p, "rb") as fh:
                tar.addfile(info, fh)
    tmp.rename(target)
    for old in dest.glob("wheels-*.tar"):
        if old != target:
            old.unlink()
    return target


# --- pull mode: the hosts fetch the bundle from mirrors ----------------------------------------------
MAX_URL = 2048
_GROUP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
# the characters a URL may hold unencoded (RFC 3986) less the quote: no space, control character, brace (so no
# `{{`), backslash or quote; the same classes as envkit_preflight's check of the URLs it is given (vars/main.yml)
_URL_HOST = re.compile(r"[A-Za-z0-9._~:\[\]%-]")
_URL_PATH = re.compile(r"[A-Za-z0-9._~!$&()*+,;=:@%/-]")


@dataclass(frozen=True)
class Mirror:
    """One `--bundle-url`: a mirror's root URL (the bundle folder's root), for every host or for one group."""

    url: str
    group: str | None = None


def parse_mirror(value: str) -> Mirror:
    """`URL` or `GROUP=URL` (GROUP: an inventory group name). The URL is untrusted: http or https, a host, no
    credentials (they would land in vars.yml, the logs and every host's process list), no query or fragment (file
    paths are appended to it), only the characters a URL may hold, at most MAX_URL characters. BadInput otherwise."""
    from urllib.parse import urlsplit

    group = None
    m = _GROUP.match(value)
    if m and "://" not in m.group(1):
        group, value = m.group(1), m.group(2)

    def bad(why: str) -> BadInput:
        shown = value if len(value) <= 120 else value[:117] + "..."
        return BadInput(
            f"--bundle-url {shown!r}: {why}",
            hint="Give a mirror's root URL, e.g. --bundle-url http://10.0.0.5:8080 or, for one inventory group, "
            "--bundle-url rack1=http://10.0.1.5:8080 (envkit bundle serve DIR, or any static web server of the bundle).",
        )

    if not value:
        raise bad("empty")
    if len(value) > MAX_URL:
        raise bad(f"longer than {MAX_URL} characters")
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise bad("not an http:// or https:// URL")
    if "?" in rest or "#" in rest:
        raise bad("a query or fragment: the bundle's paths are appended to the URL")
    netloc, _, path = rest.partition("/")
    if "@" in netloc:
        raise bad("credentials in a URL are refused (they would be written to vars.yml and the logs)")
    for part, pattern in ((netloc, _URL_HOST), ("/" + path, _URL_PATH)):
        c = next((ch for ch in part if not pattern.fullmatch(ch)), None)
        if c is not None or not part:
            raise bad(f"the character {c!r} has no place there (percent-encode it)" if c else "no host")
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        raise bad("its port is not a number from 0 to 65535") from None
    if not parts.hostname or port == 0:
        raise bad("no host" if not parts.hostname else "port 0")
    try:
        from envkit.io.urlpath import decoded_path

        decoded_path(value)
    except ValueError as exc:
        raise bad(str(exc)) from None
    return Mirror(url=value.rstrip("/"), group=group)


def parse_mirrors(values: Iterable[str]) -> tuple[Mirror, ...]:
    """Every `--bundle-url`, in the order given (the order each host tries them in), without repeats."""
    out: list[Mirror] = []
    for v in values:
        m = parse_mirror(v)
        if m not in out:
            out.append(m)
    return tuple(out)


@dataclass(frozen=True)
class PullPlan:
    """What a pull-mode host fetches: the bundle's paths of its files (relative to a mirror's root) and their
    sha256, from the bundle's manifest (the bundle verified on the controller first)."""

    mirrors: tuple[Mirror, ...]
    vendor: str  # the vendor folder in the bundle, e.g. "vendor"
    wheels: tuple[tuple[str, str], ...]  # (path, sha256) of each wheel
    requirements: str  # the hashed requirements file's path ("" without wheels)
    sizes: tuple[tuple[str, int], ...] = ()  # (path, bytes) of every file of the manifest

    @cached_property
    def _size_of(self) -> dict[str, int]:
        return dict(self.sizes)

    def size(self, path: str) -> int:
        """The bytes of a file of the bundle, as its manifest lists them (0: not listed)."""
        return self._size_of.get(path, 0)

    def fetch_file(self, path: str, sha256: str, **extra: str) -> dict[str, Any]:
        """A file as envkit_preflight's fetch.yml takes it: path, sha256, size (and `extra`, e.g. its name)."""
        return {"path": path, "sha256": sha256, "size": self.size(path), **extra}


def plan_pull(bundle: Path | None, paths: BundlePaths, mirrors: tuple[Mirror, ...], staged: list[Staged]) -> PullPlan:
    """The pull plan of a bundle folder with a manifest. Every file a host will fetch is checked here first: the
    vendor files `stage_artifacts` found (their sha256, from the lock or SHA256SUMS, already matched) must be the
    manifest's, and each wheel and the requirements file must hash to the manifest's sha256.

    BadInput: no --bundle folder with a valid manifest.json, or vendor/wheels outside it; CheckFailed: a file is not
    the manifest's (the bundle was altered: `envkit bundle verify` names every difference)."""
    from pydantic import ValidationError

    from envkit.models.bundle import BundleManifest

    manifest_path = Path(BundleLayout(bundle).manifest) if bundle is not None else None
    if bundle is None or manifest_path is None or not manifest_path.is_file():
        raise BadInput(
            "--bundle-url needs --bundle DIR, the folder the mirror serves, with its manifest.json",
            hint="Pass the same bundle folder the mirror serves (envkit bundle build -o DIR writes one): the hosts "
            "check each file they fetch against its sha256.",
        )
    root = bundle.resolve()
    try:
        manifest = BundleManifest.model_validate_json(manifest_path.read_bytes())
    except ValidationError as exc:
        raise BadInput(
            f"{manifest_path}: not a bundle manifest ({str(exc).splitlines()[0]})", where=Where(str(manifest_path))
        ) from None
    sha = {f.path: f.sha256 for f in manifest.files}

    def rel(path: Path, what: str) -> str:
        if not path.is_relative_to(root):
            raise BadInput(
                f"{what} {path} lies outside --bundle {bundle}: a mirror serves the bundle folder alone",
                hint="Drop --artifacts/--wheels with --bundle-url: the bundle's own vendor/ and wheels are fetched.",
            )
        return path.relative_to(root).as_posix()

    vendor = rel(paths.vendor, "the vendor folder")
    checked = {f"{vendor}/{s.src}": s.sha256 for s in staged}  # hashed by stage_artifacts
    wheels: list[tuple[str, str]] = []
    requirements = ""
    if paths.wheels is not None and paths.requirements is not None:
        requirements = rel(paths.requirements, "the requirements file")
        folder = rel(paths.wheels, "the wheels folder") + "/"
        names = sorted(p.name for p in paths.wheels.iterdir() if p.is_file() and p.name.endswith(".whl"))
        for path in [*(folder + n for n in names), requirements]:
            checked[path] = sha256_file(root / path)
        wheels = [(folder + n, checked[folder + n]) for n in names]
    bad = sorted(p for p, h in checked.items() if sha.get(p) != h)
    if bad:
        raise CheckFailed(
            f"{bundle}: {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''} not as the bundle's manifest lists "
            "(missing from it or another sha256): no host is told to fetch them",
            where=Where(str(bundle), key=bad[0]),
            hint="Run `envkit bundle verify` on it, then get the bundle again from its source.",
        )
    sizes = tuple((f.path, f.size) for f in manifest.files)
    return PullPlan(mirrors=mirrors, vendor=vendor, wheels=tuple(wheels), requirements=requirements, sizes=sizes)


def pull_vars(plan: PullPlan | None) -> dict[str, Any]:
    """The pull-mode vars (empty: push mode, every file copied from the controller)."""
    if plan is None:
        return {}
    return {
        "envkit_preflight_bundle_urls": [m.url for m in plan.mirrors if m.group is None],
        "envkit_preflight_bundle_group_urls": [{"group": m.group, "url": m.url} for m in plan.mirrors if m.group is not None],
        "envkit_hdk_bundle_dir": plan.vendor,
        "envkit_cann_bundle_dir": plan.vendor,
        "envkit_python_bundle_wheels": [plan.fetch_file(p, h) for p, h in plan.wheels],
        "envkit_python_bundle_requirements": plan.requirements,
        "envkit_python_bundle_requirements_size": plan.size(plan.requirements),
    }


# --- fan-out: the first host of each group serves its group ---------------------------------------------
FANOUT_PORT = 8931  # a group head's mirror listens there on its fleet address (ansible_host)
# a head's name becomes an Ansible host pattern (the play that stops the mirrors): no pattern character
_PLAIN_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$")


@dataclass(frozen=True)
class FanOutGroup:
    group: str
    head: str
    bind: str  # the head's fleet address (ansible_host): its mirror listens there
    url: str  # the head's mirror, as its group's hosts reach it
    members: tuple[str, ...]  # the group's other hosts: they try the head first

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "head": self.head, "url": self.url, "members": list(self.members)}


@dataclass(frozen=True)
class FanOut:
    """Tree distribution: the mirrors send one copy per group (to its head), each head one per other host of its
    group (they try the head first, then their mirrors)."""

    groups: tuple[FanOutGroup, ...]
    port: int = FANOUT_PORT

    @property
    def heads(self) -> dict[str, FanOutGroup]:
        return {g.head: g for g in self.groups}

    def mirror_of(self, host: str) -> str | None:
        """The head URL a host tries first (None: a head, or a host outside the plan)."""
        return next((g.url for g in self.groups if host in g.members), None)

    def to_dict(self) -> dict[str, Any]:
        return {"port": self.port, "groups": [g.to_dict() for g in self.groups]}


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def plan_fan_out(
    groups: dict[str, list[str]], addresses: dict[str, str], mirrors: tuple[Mirror, ...], port: int = FANOUT_PORT
) -> FanOut:
    """Who heads which group. `groups`: each inventory group's own hosts in inventory order (`ansible-inventory`,
    `--limit` applied). A host belongs to one fan-out group: the first group with a `--bundle-url GROUP=URL` that
    lists it (in the order given), else the first of its groups by name (`ungrouped` for a host in none). The
    group's head is its first host; its mirror is http://ADDRESS:PORT (ADDRESS: the head's ansible_host), a URL held
    to the rules of --bundle-url. BadInput: a head name that is not a plain host name, an address no URL can hold."""
    named = [m.group for m in mirrors if m.group is not None]
    order = [g for g in named if g in groups] + sorted(g for g in groups if g not in named and g != "all")
    hosts_of: dict[str, list[str]] = {}
    seen: set[str] = set()
    for g in order:
        for h in groups[g]:
            if h not in seen:
                seen.add(h)
                hosts_of.setdefault(g, []).append(h)
    out = []
    for g in order:
        hosts = hosts_of.get(g)
        if not hosts:
            continue
        head = hosts[0]
        if not _PLAIN_HOST.match(head):
            raise BadInput(
                f"--fan-out: the head of group {g[:80]!r}, host {head[:80]!r}, is not a plain host name",
                hint="Host names of letters, digits and _ . - only (they become an Ansible host pattern), "
                "or put another host first in the group.",
            )
        address = addresses.get(head, head)
        try:
            url = parse_mirror(f"http://{_url_host(address)}:{port}").url
        except BadInput:
            raise BadInput(
                f"--fan-out: host {head} (head of group {g[:80]}) has ansible_host {address[:80]!r}, which no URL can hold",
                hint="Set ansible_host to the head's IP address or DNS name on the fleet's network.",
            ) from None
        out.append(FanOutGroup(group=g, head=head, bind=address, url=url, members=tuple(hosts[1:])))
    return FanOut(groups=tuple(out), port=port)


def fan_out_vars(fan: FanOut | None, plan: PullPlan | None, staged: list[Staged], requirements_sha256: str) -> dict[str, Any]:
    """The fan-out vars: the heads (where each listens), each other host's head URL, and every file of the bundle a
    head fetches and serves (its path in the bundle, sha256, and the role whose folder stages it)."""
    if fan is None or plan is None:
        return {}
    files = [
        plan.fetch_file(
            f"{plan.vendor}/{s.src}", s.sha256, role="hdk" if s.component in ("driver", "firmware") else "cann", name=s.src
        )
        for s in staged
    ]
    files += [plan.fetch_file(p, h, role="python", name=p.rsplit("/", 1)[-1]) for p, h in plan.wheels]
    if plan.requirements:
        files.append(plan.fetch_file(plan.requirements, requirements_sha256, role="python", name="requirements.txt"))
    return {
        "envkit_preflight_fanout_heads": {
            g.head: {"group": g.group, "bind": g.bind, "port": fan.port, "url": g.url} for g in fan.groups
        },
        "envkit_preflight_fanout_members": {m: g.url for g in fan.groups for m in g.members},
        "envkit_preflight_fanout_files": files,
    }


def format_fan_out(fan: FanOut) -> list[str]:
    """One line per group: its head, the head's mirror and the hosts it serves."""
    lines = ["fan-out (group: head -> the hosts it serves):"]
    for g in fan.groups:
        served = ", ".join(g.members[:8]) + (f" and {len(g.members) - 8} more" if len(g.members) > 8 else "")
        lines.append(f"  {g.group}: {g.head} ({g.url}) -> {served or 'no other host'}")
    return lines


# --- the vars file ------------------------------------------------------------------------------
def _hdk_details(lock: Lock) -> dict[str, dict[str, Any]]:
    """package_version (as version.info writes it), firmware Version and compatible range, from the lock."""
    out: dict[str, dict[str, Any]] = {"driver": {}, "firmware": {}}
    for art in lock.artifacts:
        if art.component == "driver":
            out["driver"] = {
                "package_version": art.package_version or art.version.lower(),
                "compatible_firmware": art.compatible or "",
            }
        elif art.component == "firmware":
            out["firmware"] = {
                "package_version": art.package_version or art.version.lower(),
                "firmware_version": art.firmware_version or "",
            }
    return out


def firmware_in_range(firmware_version: str, ranges: str) -> bool | None:
    """Is the firmware Version inside the driver's `compatible_version_fw` ranges? None when unknown (either is
    empty, or not a version or list of ranges: the host's check refuses those). envkit.versions' ordering, the one
    the host decides by too (envkit_probe's copy of it, tests/provision/test_firmware_ranges.py)."""
    if not firmware_version or not (ranges or "").strip():
        return None
    try:
        return versions.in_any_range(firmware_version, versions.parse_ranges(ranges))
    except versions.InvalidVersion:
        return None


def render_vars(
    lock: Lock,
    *,
    lock_path: Path,
    bundle: BundlePaths,
    staged: list[Staged] | None = None,
    wheels_archive: Path | None = None,
    accept_edited: bool = False,
    pull: PullPlan | None = None,
    fan_out: FanOut | None = None,
) -> dict[str, Any]:
    """The vars file: everything the roles need from the lock and the bundle, role-prefixed (`accept_edited`: the
    hosts' `envkit smoke` reads the lock with --accept-edited-lock, as this run did; `pull`: the hosts fetch the
    bundle's files from its mirrors instead of receiving them from the controller)."""
    staged = staged if staged is not None else stage_artifacts(lock, bundle.vendor)
    by_comp = {s.component: s for s in staged}
    details = _hdk_details(lock)
    stack = lock.stack
    arch = stack.arch
    family, npu_names = lock.platform.os_family, list(lock.platform.npu_smi_names)

    def hdk(comp: str) -> dict[str, Any]:
        s = by_comp.get(comp)
        if s is None:
            return {}
        return {**s.as_vars(), **details[comp]}

    driver, firmware = hdk("driver"), hdk("firmware")
    if driver and firmware:
        ok = firmware_in_range(firmware.get("firmware_version", ""), driver.get("compatible_firmware", ""))
        if ok is False:
            raise BadInput(
                f"the lock pairs firmware {firmware['firmware_version']} with driver {driver['package_version']}, "
                f"whose compatible firmware range is {driver['compatible_firmware']}",
                hint="Use the firmware of the driver's HDK release (envkit resolve --firmware).",
            )
    home = lock.layout.home
    packages = []
    for comp in ("cann-toolkit", "cann-ops", "cann-kernels", "cann-nnal"):
        s = by_comp.get(comp)
        if s is None:
            continue
        packages.append(
            {
                "component": comp,
                **s.as_vars(),
                "info_file": _INFO_FILE[comp].format(home=home, arch=arch, install_path=DEFAULT_INSTALL_PATH),
                "needs_env": comp == "cann-nnal",
            }
        )
    toolkit_env = next(
        (p for p in lock.layout.set_env if p.endswith("ascend-toolkit/set_env.sh")),
        f"{DEFAULT_INSTALL_PATH}/ascend-toolkit/set_env.sh",
    )
    req_sha = sha256_file(bundle.requirements) if bundle.requirements else ""
    vendor = str(bundle.vendor)
    return {
        "envkit_lock": {"path": str(lock_path), "stack": lock.stack.model_dump(mode="json")},
        "envkit_preflight_lock_arch": arch,
        "envkit_preflight_lock_os": stack.os,
        "envkit_preflight_lock_os_family": family or "debian",
        "envkit_preflight_lock_chip": stack.chip,
        "envkit_preflight_npu_smi_names": npu_names,
        "envkit_hdk_artifacts_dir": vendor,
        "envkit_hdk_driver": driver,
        "envkit_hdk_firmware": firmware,
        "envkit_cann_artifacts_dir": vendor,
        "envkit_cann_packages": packages,
        "envkit_cann_set_env": toolkit_env,
        "envkit_python_enabled": bundle.requirements is not None,
        "envkit_python_wheels_dir": str(bundle.wheels) if bundle.wheels else "",
        "envkit_python_requirements": str(bundle.requirements) if bundle.requirements else "",
        "envkit_python_requirements_sha256": req_sha,
        "envkit_python_wheels_archive": str(wheels_archive) if wheels_archive else "",
        "envkit_python_lock_python": stack.python,
        "envkit_python_cann_home": home,
        "envkit_python_cann_set_env": list(lock.layout.set_env),
        "envkit_python_cann_env": dict(sorted(lock.layout.env.items())),
        "envkit_smoke_lock_src": str(lock_path),
        "envkit_smoke_lock_sha1": hashlib.sha1(Path(lock_path).read_bytes()).hexdigest(),  # noqa: S324 - as the copy module
        "envkit_smoke_accept_edited_lock": accept_edited,
        **pull_vars(pull),
        **fan_out_vars(fan_out, pull, staged, req_sha),
    }


# the preflight's check (playbooks/roles/envkit_preflight/tasks/main.yml): its success message is the list of warnings
PREFLIGHT_CHECK = "Preflight | Check architecture, OS family, NPU, disk space, kernel headers and dkms (and report warnings)"
NO_WARNING = "All assertions passed"  # ansible's assert says this where the preflight has no warning
# the preflight's probe: on a host where no role has anything to do, its message is the host's report (its warnings,
# hccn_tool's answers, the verdict recorded on it) and the host's play ends there
PROBE_TASK = "Preflight | Probe the host (OS, PCI, npu-smi, NPU users, disk, kernel headers, installed versions)"


def on_provision_result(row: HostRow, task: str, ev: dict[str, Any]) -> None:
    """What provision's own tasks report back: the plan (check mode), the preflight's warnings and hccn_tool state
    (checked here by the fleet layer), the smoke role's verdict with its reports; a host on which nothing changes
    reports all three in the probe's message (PROBE_TASK) and ends its play there."""
    from envkit.executor.ansible import msg_list

    msg = ev.get("msg")
    if task.endswith("| Report plan"):
        row.plan.extend(msg_list(msg))
    if task.endswith(PREFLIGHT_CHECK):
        _warnings(row, msg_list(msg))
    if task.endswith("Preflight | Report network") and isinstance(msg, dict):
        _network(row, msg)
    if task.endswith("Smoke | Report verdict") and isinstance(msg, dict):
        _verdict(row, msg)
    if task.endswith(PROBE_TASK) and isinstance(msg, dict):
        _warnings(row, msg_list(msg.get("warnings")))
        if isinstance(msg.get("network"), dict) and msg["network"]:
            _network(row, msg["network"])
        if "smoke" in msg:
            _verdict(row, msg)


def _warnings(row: HostRow, warnings: list[str]) -> None:
    row.warnings.extend(w for w in warnings if w != NO_WARNING and w not in row.warnings)


def _network(row: HostRow, hccn: dict[str, Any]) -> None:
    from envkit.fleet.hccn import check_net, finding_dict, net_from_probe_facts, net_verdict

    found = check_net(net_from_probe_facts(hccn), host=row.host)
    row.net, row.net_findings = net_verdict(found), [finding_dict(f) for f in found]


def _verdict(row: HostRow, msg: dict[str, Any]) -> None:
    row.smoke = str(msg.get("smoke", row.smoke)).strip()
    row.doctor = str(msg.get("doctor", row.doctor)).strip()
    reports = msg.get("reports")
    if isinstance(reports, dict):
        row.reports = {
            str(k): str(v)
            for k, v in reports.items()
            if re.fullmatch(r"[a-z]+\.json", str(k)) and isinstance(v, str) and v.strip()
        }


def summarize_provision(events: Iterable[dict[str, Any]]) -> Summary:
    """The provisioning run's rows: the executor's fold with provision's own task reports read."""
    from envkit.executor.ansible import summarize

    return summarize(events, on_result=on_provision_result)


def write_reports(summary: Summary, report_dir: Path) -> list[Path]:
    """Each host's doctor/smoke reports (they come back in the smoke role's verdict) to <dir>/<host>/<name>."""
    from envkit.io.outputs import atomic_write_text

    written = []
    for row in summary.hosts.values():
        if not re.fullmatch(r"[A-Za-z0-9_.:@\[\]-]+", row.host) or row.host in (".", ".."):
            continue
        for name, text in sorted(row.reports.items()):
            path = report_dir / row.host / name
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text if text.endswith("\n") else text + "\n")
            written.append(path)
    return written


def format_table(summary: Summary) -> list[str]:
    head: tuple[str, ...] = ("host", "status", "ok", "changed", "failed", "unreachable", "smoke", "doctor")
    rows = [head] + [
        (r.host, r.status, str(r.ok), str(r.changed), str(r.failed), str(r.unreachable), r.smoke, r.doctor)
        for r in (summary.hosts[h] for h in sorted(summary.hosts))
    ]
    if any(r.net != "not checked" for r in summary.hosts.values()):  # a net column only where hccn_tool answered
        rows = [row + ((summary.hosts[row[0]].net,) if i else ("net",)) for i, row in enumerate(rows)]
        head = rows[0]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def format_warnings(summary: Summary) -> list[str]:
    """The hosts' warnings (the preflight's: another OS release than the lock's, no Huawei PCI device, npu-smi names
    of another chip), one line each; none: no line."""
    lines = [f"  {h}: {w}" for h in sorted(summary.hosts) for w in summary.hosts[h].warnings]
    return ["warnings:", *lines] if lines else []


def format_plan(summary: Summary) -> list[str]:
    lines = []
    for h in sorted(summary.hosts):
        row = summary.hosts[h]
        if row.status in ("failed", "unreachable", "not run"):
            lines.append(f"{h}: {row.status}" + (f" ({row.errors[0]})" if row.errors else ""))
        elif row.plan:
            lines.append(f"{h}: would change")
            lines.extend(f"  - {p}" for p in row.plan)
        else:
            lines.append(f"{h}: nothing to change")
    return lines


# --- the run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProvisionRequest:
    """`envkit provision`'s options: what to run against which hosts."""

    inventory: str  # an inventory file or a comma-separated host list
    lock: Path
    out: Path = Path("envkit-provision")
    bundle: Path | None = None
    artifacts: Path | None = None
    wheels: Path | None = None
    check: bool = False
    limit: str | None = None
    serial: int | None = None
    forks: int | None = None
    extra_vars: tuple[str, ...] = ()
    bundle_urls: tuple[str, ...] = ()  # --bundle-url URL | GROUP=URL: pull mode (the hosts fetch from these mirrors)
    fan_out: bool = False  # --fan-out: the first host of each group serves its group (needs bundle_urls)
    lock_check: LockCheck = SCHEMA_ONLY  # what the lock is held to after its schema (the CLI: the matrix's gate)


@dataclass(frozen=True)
class ProvisionResult:
    summary: Summary
    vars_file: Path
    reports: Path
    logs: tuple[Path, Path]  # events.jsonl, ansible.log
    returncode: int
    fan_out: FanOut | None = None


def check_fan_out(req: ProvisionRequest) -> None:
    """--fan-out's own rules, before anything is read: it needs --bundle-url, and no --serial (a group's head must
    serve before, and while, its group fetches: every head and its group in one batch)."""
    if not req.fan_out:
        return
    if not req.bundle_urls:
        raise BadInput(
            "--fan-out needs --bundle-url: the group heads fetch the bundle from a mirror",
            hint="Serve the bundle inside the air gap (envkit bundle serve DIR --bind ADDR) and add --bundle-url http://ADDR:PORT.",
        )
    if req.serial is not None:
        raise BadInput(
            "--fan-out with --serial: a group's hosts fetch from their head while the play runs, so every head and "
            "its group must be in the same batch",
            hint="Drop --serial, or roll out group by group with --limit GROUP --fan-out.",
        )


def run(req: ProvisionRequest, on_event: Callable[[dict[str, Any]], None] | None = None) -> ProvisionResult:
    """Render the vars from the lock, run the site playbook, summarize per host and write each host's reports.

    `on_event` sees every event of the run as it happens (progress). Raises BadInput before anything runs, and
    CannotRun when ansible-playbook stops before any host ran; a host that failed is in the summary, not raised.
    """
    from envkit.errors import CannotRun
    from envkit.executor.ansible import (
        PlaybookRun,
        ansible_playbook_path,
        dump_vars,
        playbook_command,
        playbook_env,
        run_playbook,
    )
    from envkit.io.outputs import PROVISION, claim_output
    from envkit.lock.file import read_lock
    from envkit.resources import data_dir

    if not req.lock.is_file():
        raise BadInput(f"--lock {req.lock}: no such file", hint="Create one with `envkit resolve`.")
    inv_path = Path(req.inventory)
    if "," not in req.inventory and not inv_path.exists():
        raise BadInput(f"-i {req.inventory}: no such inventory", hint="Give an inventory file or a comma-separated host list.")
    check_fan_out(req)
    mirrors = parse_mirrors(req.bundle_urls)
    lock = read_lock(req.lock, req.lock_check)
    paths = locate_bundle(req.bundle, req.artifacts, req.wheels)
    staged_files = stage_artifacts(lock, paths.vendor)
    pull = plan_pull(req.bundle, paths, mirrors, staged_files) if mirrors else None
    fan = None
    if req.fan_out:
        from envkit.executor.ansible import inventory_groups, playbook_env

        groups, addresses = inventory_groups(
            str(inv_path.resolve()) if inv_path.exists() else req.inventory, playbook_env(data_dir("playbooks")), req.limit
        )
        fan = plan_fan_out(groups, addresses, mirrors)
    out = req.out.resolve()
    inputs = [req.lock, inv_path if inv_path.exists() else None, req.bundle, paths.vendor, paths.wheels, paths.requirements]
    claim = claim_output(out, PROVISION, inputs=inputs)  # an earlier run's folder, or a new one: nothing else
    reports = out / "reports"
    stage = claim.stage()  # the run's logs, until the run ends
    before = claim.writer()
    archive = None
    push_wheels = paths.wheels is not None and pull is None  # pull mode: the hosts fetch the wheels, nothing is packed
    for rel in claim.ours:  # an earlier archive is reused when the wheels are unchanged (and dropped in pull mode)
        if re.fullmatch(r"wheels-[0-9a-f]{16}\.tar", rel):
            if push_wheels:
                try:
                    os.link(out / rel, stage / rel)
                except OSError:
                    pass  # packed again
            before.remove(rel)
    if push_wheels:
        assert paths.wheels is not None
        staged = pack_wheels(paths.wheels, stage, paths.requirements)
        archive = out / staged.name
        before.staged(staged.name, staged)
    variables = render_vars(
        lock,
        lock_path=req.lock.resolve(),
        bundle=paths,
        staged=staged_files,
        wheels_archive=archive,
        accept_edited=req.lock_check.accept_edited,
        pull=pull,
        fan_out=fan,
    )
    vars_file = out / "vars.yml"
    before.text("vars.yml", dump_vars(variables, f"envkit provision --lock {req.lock}"))
    before.commit(keep=True)
    reports.mkdir(exist_ok=True)
    playbooks = data_dir("playbooks")
    playbook_run = PlaybookRun(
        playbook=playbooks / "site.yml",
        inventory=str(inv_path.resolve()) if inv_path.exists() else req.inventory,
        vars_file=vars_file,
        check=req.check,
        limit=req.limit,
        forks=req.forks,
        serial=req.serial,
        extra_vars=req.extra_vars,
    )
    argv = playbook_command(playbook_run, ansible_playbook_path())
    logs = (out / "events.jsonl", out / "ansible.log")
    written: list[Path] = []
    try:
        result = run_playbook(
            argv,
            playbook_env(playbooks),
            on_event=on_event or (lambda ev: None),
            events_log=stage / logs[0].name,
            stderr_log=stage / logs[1].name,
        )
        summary = summarize_provision(result.events)
        # written beside the output first: a run killed meanwhile leaves nothing in it that its manifest lacks
        written = write_reports(summary, stage / "reports")
    finally:  # what the run wrote, also when it stopped: its logs, the reports fetched and written
        after = claim.writer()
        for log in logs:
            if (stage / log.name).is_file():
                after.staged(log.name, stage / log.name)
        after.adopt_tree("reports")  # what a playbook fetched there itself (`-e envkit_smoke_report_dir=...`)
        for path in written:
            after.staged(path.relative_to(stage).as_posix(), path)
        after.commit(keep=True)
        claim.unstage()
    if not summary.complete and not summary.hosts:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise CannotRun(f"ansible-playbook exited {result.returncode} before running any host", hint=(tail or f"see {logs[1]}"))
    return ProvisionResult(
        summary=summary, vars_file=vars_file, reports=reports, logs=logs, returncode=result.returncode, fan_out=fan
    )

"""Test helpers: a bundle folder (fixture installers + wheels) and a fleet of nspawn nodes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NSPAWN = ROOT / "tests" / "integration" / "setup" / "nspawn.sh"
CACHE = Path(os.environ.get("ENVKIT_NSPAWN_CACHE", "/var/cache/envkit-test"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "installers"))

import make_installers  # noqa: E402


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def envkit_bin() -> str:
    return str(Path(sys.executable).parent / "envkit")


def envkit_env(**extra: str) -> dict[str, str]:
    """The environment of an `envkit_bin()` subprocess that runs this checkout's envkit (and its playbooks), also
    where the interpreter's envkit is an editable install of another checkout (a git worktree)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""), **extra}


def resolve_lock(path: Path, *args: str) -> Path:
    subprocess.run(
        [envkit_bin(), "-q", "resolve", "--arch", "x86_64", "--python", "3.11", *args, "-o", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def with_fixture_zip_hashes(lock_path: Path, vendor: Path, out: Path) -> Path:
    """A copy of the lock whose zip-edition sha256 are those of the fixture zips in `vendor`."""
    text = lock_path.read_text()
    data = yaml.safe_load(text)
    for art in data["artifacts"]:
        z = art.get("zip")
        if z and (vendor / z["file"]).is_file():
            text = text.replace(z["sha256"], sha256(vendor / z["file"]))
    out.write_text(text)
    return out


def write_vendor(lock_path: Path, vendor: Path, *, as_zip: bool = False, fail_halfway: str | None = None) -> None:
    vendor.mkdir(parents=True, exist_ok=True)
    lock = yaml.safe_load(lock_path.read_text())
    make_installers.write_installers(lock, vendor, as_zip=as_zip, fail_halfway=fail_halfway)
    sums = [f"{sha256(p)}  {p.name}" for p in sorted(vendor.iterdir()) if p.is_file() and p.name != "SHA256SUMS"]
    (vendor / "SHA256SUMS").write_text("\n".join(sums) + "\n")


def wheelhouse() -> Path:
    """envkit's wheel and its dependencies for the nodes' Python, cached per envkit source state."""
    src = [p for p in (ROOT / "envkit").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    src += [ROOT / "pyproject.toml"]
    key = hashlib.sha256()
    for p in sorted(src):
        key.update(str(p.relative_to(ROOT)).encode())
        key.update(p.read_bytes())
    return _cached(CACHE / f"wheels-{key.hexdigest()[:16]}", "requirements.txt", _fill_wheelhouse)


def _fill_wheelhouse(tmp: Path) -> None:
    py = sys.executable
    subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp)], check=True)
    whl = next(tmp.glob("envkit-*.whl"))
    subprocess.run([py, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(tmp), str(whl)], check=True)
    from pip._vendor.packaging.utils import parse_wheel_filename

    lines = []
    for w in sorted(tmp.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(w.name)
        lines.append(f"{name}=={version} --hash=sha256:{sha256(w)}")
    (tmp / "requirements.txt").write_text("\n".join(lines) + "\n")


def _cached(out: Path, marker: str, fill) -> Path:
    """`out` once `marker` is in it; else filled by `fill(tmp)` in a sibling folder, then renamed into place."""
    if (out / marker).is_file():
        return out
    tmp = Path(str(out) + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fill(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def torch_wheelhouse() -> Path:
    """This interpreter's torch wheel and its dependencies (for the nodes' Python: the same 3.11 x86_64), cached
    per torch version; pip's own configuration (its local indexes and find-links) supplies them."""
    from importlib.metadata import version

    torch = version("torch")

    def fill(tmp: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(tmp), f"torch=={torch}"],
            check=True,
            timeout=900,
        )
        (tmp / ".complete").write_text("ok\n")

    return _cached(CACHE / f"torch-{torch}", ".complete", fill)


# the marks of every test that needs the fleet
FLEET_MARKS = [
    pytest.mark.nspawn,
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (systemd-nspawn, network namespaces)"),
    pytest.mark.skipif(
        shutil.which("systemd-nspawn") is None, reason="systemd-nspawn missing: run tests/integration/setup/nspawn.sh deps"
    ),
    pytest.mark.skipif(os.environ.get("ENVKIT_SKIP_NSPAWN") == "1", reason="ENVKIT_SKIP_NSPAWN=1"),
]


def make_bundle(dest: Path, lock_path: Path, *, as_zip: bool = False, fail_halfway: str | None = None) -> Path:
    """DIR/vendor (fixture installers + SHA256SUMS) and DIR/wheels (a symlink to the cached wheelhouse)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    write_vendor(lock_path, dest / "vendor", as_zip=as_zip, fail_halfway=fail_halfway)
    (dest / "wheels").symlink_to(wheelhouse())
    return dest


class Fleet:
    def __init__(self, work: Path, n: int) -> None:
        self.work, self.n = work, n
        self.inventory = work / "inventory.ini"
        self.key = work / "keys" / "id_ed25519"

    def up(self) -> None:
        subprocess.run([str(NSPAWN), "up", str(self.work), str(self.n)], check=True, timeout=300)

    def down(self) -> None:
        subprocess.run([str(NSPAWN), "down", str(self.work)], check=False, timeout=120)

    def link(self, i: int, state: str) -> None:
        subprocess.run([str(NSPAWN), "link", str(self.work), str(i), state], check=True)

    def ip(self, i: int) -> str:
        return f"10.231.2.{10 + i}"

    def ssh_options(self) -> list[str]:
        # the fleet's own known_hosts, never /dev/null: ssh may rewrite a known_hosts file by rename, and as root
        # that would replace the host's /dev/null with a regular file
        return [
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            f"UserKnownHostsFile={self.key.parent / 'known_hosts'}",
            "-o",
            "UpdateHostKeys=no",
        ]

    def ssh(self, i: int, command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                "ssh",
                "-i",
                str(self.key),
                *self.ssh_options(),
                "-o",
                "LogLevel=ERROR",
                "-o",
                "ConnectTimeout=5",
                f"root@{self.ip(i)}",
                command,
            ],
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def upper(self, i: int) -> Path:
        """The node's own changes (overlay upper dir): what the node wrote, seen from the host."""
        return self.work / "hosts" / f"node{i}" / "upper"


def provision(
    fleet: Fleet, lock: Path, bundle: Path, out: Path, *args: str, timeout: int = 600, edited: bool = False
) -> tuple[int, dict, str]:
    """`envkit provision`; `edited`: the lock was edited on purpose (`with_fixture_zip_hashes`): --accept-edited-lock."""
    # the nodes' disk is this machine's, shared with whatever else runs here: ask for 1 GiB free, not the real 10
    cmd = [
        envkit_bin(),
        *(["--accept-edited-lock"] if edited else []),
        "provision",
        "-i",
        str(fleet.inventory),
        "--lock",
        str(lock),
        "--bundle",
        str(bundle),
        "--out",
        str(out),
        "--json",
        "-e",
        "envkit_preflight_min_free_gb=1",
        *args,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=envkit_env())
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        data = {}
    return p.returncode, data, p.stderr

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_wheel(name: str, version: str) -> tuple[str, bytes]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(f"{name}/__init__.py", date_time=(1980, 1, 1, 0, 0, 0))
        zf.writestr(info, f"VERSION = {version!r}\n")
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


def _lock_with_closure(tmp_path: Path, monkeypatch, target: list[tuple[str, str]], python: str = "3.10"):
    """A real resolved lock (the default stack, Python 3.10) whose closure names small stand-in wheels served
    from a local 127.0.0.1 server (no PyPI): `target` as (name, version), and `gamma` for the controller."""
    from envkit.artifacts.closure import make_target
    from envkit.core.derive import build_lock
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import pins_from_mapping, solve
    from envkit.lock.file import dump_lock
    from envkit.models.lock import ClosurePackage, PythonClosure
    from tests.airgap.httpserve import Server

    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    lm = load_matrix()
    res = solve(lm, pins_from_mapping(lm, {"python": python}))
    lock = build_lock(lm, res, f"envkit resolve --python {python}")
    srv_dir = tmp_path / "srv"
    srv_dir.mkdir(parents=True)
    server = Server(srv_dir).__enter__()

    def closure(rows, py, arch):
        pkgs = []
        for n, v in rows:
            fn, data = fake_wheel(n.replace("-", "_"), v)
            (srv_dir / fn).write_bytes(data)
            pkgs.append(
                ClosurePackage(
                    name=n,
                    version=v,
                    filename=fn,
                    url=f"{server.url}/{fn}",
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                )
            )
        return PythonClosure(
            target=make_target(py, arch),
            roots=[n for n, _ in rows],
            index_url=server.url,
            resolver="test",
            packages=pkgs,
            mirrors=[f"{server.url}/"],
        )  # the local http index

    python = lock.python.model_copy(
        update={"closure": closure(target, python, lock.stack.arch), "controller": closure([("gamma", "1.0")], "3.11", "x86_64")}
    )
    lock = lock.model_copy(update={"python": python})
    path = tmp_path / "envkit.lock"
    path.write_text(dump_lock(lock))
    return path, lock, server


@pytest.fixture
def offline_lock(tmp_path, monkeypatch):
    """A lock whose closure is a part of the stack (two stand-in wheels): no image context can be made."""
    path, lock, server = _lock_with_closure(tmp_path, monkeypatch, [("alpha", "1.0"), ("beta", "1.0")])
    yield path, lock
    server.__exit__(None, None, None)


@pytest.fixture
def full_offline_lock(tmp_path, monkeypatch):
    """A lock whose closure covers every pin of the stack, envkit's own dependencies (as `envkit lock` roots them) and
    CANN's Python dependencies (stand-in wheels)."""
    import importlib.util
    import re

    from envkit.lock.file import read_lock

    probe = _lock_with_closure(tmp_path / "probe", monkeypatch, [])
    probe[2].__exit__(None, None, None)
    lock = probe[1]
    rows = {p.name.replace("_", "-"): p.version for p in lock.python.requirements}
    spec = importlib.util.spec_from_file_location("stand_in_requirements", ROOT / "tools" / "stand_in_requirements.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for name, version in tool.envkit_pins().items():
        rows.setdefault(name, version)
    for spec in lock.python.cann_runtime:
        m = re.match(r"^([A-Za-z0-9._-]+)\s*(?:==\s*([^\s,;]+))?", spec)
        rows.setdefault(m[1].replace("_", "-"), m[2] or "1.0")
    path, lock, server = _lock_with_closure(tmp_path, monkeypatch, sorted(rows.items()))
    assert read_lock(path).python.closure is not None
    yield path, lock
    server.__exit__(None, None, None)


@pytest.fixture
def cli():
    """Run the CLI in a subprocess (its real entry point and exit codes)."""
    import subprocess

    def run(*args: str, env=None, **kw):
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, cwd=ROOT, **kw)

    return run

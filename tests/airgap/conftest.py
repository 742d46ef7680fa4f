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


@pytest.fixture
def offline_lock(tmp_path, monkeypatch):
    """A real resolved lock whose closure names small wheels on a local 127.0.0.1 server (no PyPI)."""
    from envkit.lockfile import build_lock, dump_lock
    from envkit.matrix import load_matrix
    from envkit.models.lock import ClosurePackage, PythonClosure
    from envkit.closure import make_target
    from envkit.resolve import pins_from_mapping, solve
    from tests.airgap.httpserve import Server

    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    lm = load_matrix()
    res = solve(lm, pins_from_mapping(lm, {"python": "3.10"}))
    lock = build_lock(lm, res, "envkit resolve --python 3.10")
    srv_dir = tmp_path / "srv"
    srv_dir.mkdir()
    server = Server(srv_dir).__enter__()

    def closure(names, py, arch):
        pkgs = []
        for n in names:
            fn, data = fake_wheel(n, "1.0")
            (srv_dir / fn).write_bytes(data)
            pkgs.append(ClosurePackage(name=n, version="1.0", filename=fn, url=f"{server.url}/{fn}",
                                       sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
        return PythonClosure(target=make_target(py, arch), roots=list(names), index_url=server.url, resolver="test",
                             packages=pkgs)

    python = lock.python.model_copy(update={"closure": closure(["alpha", "beta"], "3.10", "aarch64"),
                                            "controller": closure(["gamma"], "3.11", "x86_64")})
    lock = lock.model_copy(update={"python": python})
    path = tmp_path / "envkit.lock"
    path.write_text(dump_lock(lock))
    yield path, lock
    server.__exit__(None, None, None)


@pytest.fixture
def cli():
    """Run the CLI in a subprocess (its real entry point and exit codes)."""
    import subprocess

    def run(*args: str, env=None, **kw):
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, cwd=ROOT, **kw)

    return run

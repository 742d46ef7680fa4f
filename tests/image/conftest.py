"""Helpers of the image tests: locks resolved from the shipped matrix, fixture CANN installers, hashed pins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "images"
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "installers"))

# name -> the `envkit resolve` arguments of the golden lock
GOLDEN_CASES = {
    "910b-aarch64-cann8.0.0": ["--chip", "910b", "--arch", "aarch64", "--cann", "8.0.0", "--python", "3.10"],
    "a3-aarch64-cann8.5.0": ["--chip", "a3", "--arch", "aarch64", "--cann", "8.5.0", "--python", "3.10"],
    "910b-x86_64-cpu-torch": ["--chip", "910b", "--arch", "x86_64", "--torch", "2.9.0", "--python", "3.10"],
    "910b-aarch64-serving": ["--workload", "serving", "--chip", "910b", "--arch", "aarch64", "--python", "3.10"],
}
# name -> the `envkit image render --variant` of the golden (default: base)
GOLDEN_VARIANTS = {"910b-aarch64-serving": "serving"}


def resolve_lock(args: list[str], out: Path) -> Path:
    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", *args, "-o", str(out)])
    assert exc.value.code in (0, None), f"resolve {args} failed"
    return out


def render_args(lock: Path, arts: Path, reqs: Path, out: Path, *extra: str) -> list[str]:
    """The `envkit image render` arguments for a lock, its artifacts and requirements into `out`, `extra` before `-o`."""
    return [
        "image",
        "render",
        "--lock",
        str(lock),
        "--artifacts",
        str(arts),
        "--requirements",
        str(reqs),
        *extra,
        "-o",
        str(out),
    ]


def fake_requirements(lock_path: Path, out: Path) -> Path:
    """A hashed requirements file for the lock: the lock's pins and CANN's deps, with stand-in hashes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stand_in_requirements", ROOT / "tools" / "stand_in_requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.stand_in_requirements(lock_path, out)


def fixture_installers(lock_path: Path, out: Path, *, as_zip: bool = False) -> Path:
    import yaml
    from make_installers import write_installers

    write_installers(yaml.safe_load(lock_path.read_text()), out, as_zip=as_zip)
    return out


@pytest.fixture(scope="session")
def golden_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, Path]]:
    """name -> (lock, artifacts dir, requirements), made once per session."""
    base = tmp_path_factory.mktemp("golden-inputs")
    out = {}
    for name, args in GOLDEN_CASES.items():
        d = base / name
        d.mkdir()
        lock = resolve_lock(args, d / "envkit.lock")
        out[name] = (lock, fixture_installers(lock, d / "artifacts"), fake_requirements(lock, d / "requirements.txt"))
    return out


def run_pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, capture_output=True, text=True)


def wheelhouse(cache: Path, reqs: list[str], platforms: list[str], python: str = "3.11") -> list[Path]:
    """The wheels of envkit and `reqs`, with their closure for `python` on `platforms` (pip `--platform` arguments),
    as pip picks them from the cached folder `cache` alone: the cache keeps every wheel an earlier run downloaded
    (older releases, a former envkit's dependencies), and only the picked ones go into a build. envkit's wheel is
    built afresh into the cache each time, so that pip picks envkit's dependencies (the image installs them: smoke and
    doctor run inside; `envkit image render` adds envkit's own wheel, to which this one gives way); what else the
    cache lacks is downloaded into it first."""
    import json
    import tempfile
    from urllib.parse import unquote, urlparse

    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("envkit-*.whl"):
        old.unlink()
    run_pip("wheel", "--no-deps", "-q", "-w", str(cache), str(ROOT))
    reqs = [*reqs, *map(str, cache.glob("envkit-*.whl"))]
    where = ["--only-binary=:all:", "--python-version", python, *platforms]

    def pick() -> list[Path]:
        with tempfile.TemporaryDirectory() as t:
            report = Path(t) / "report.json"
            run_pip(
                "--isolated", "install", "-q", "--dry-run", "--ignore-installed", "--report", str(report), "--no-index",
                "--find-links", str(cache), *where, "--target", str(Path(t) / "target"), *reqs,
            )  # fmt: skip
            urls = [i["download_info"]["url"] for i in json.loads(report.read_text())["install"]]
        files = sorted(Path(unquote(urlparse(u).path)) for u in urls)
        assert all(f.parent == cache for f in files), files  # nothing but the cache (--isolated: no pip config)
        return files

    try:
        return pick()
    except subprocess.CalledProcessError:
        run_pip("download", "-q", *where, "-d", str(cache), *reqs)
        return pick()


def have(cmd: str) -> bool:
    try:
        subprocess.run([cmd, "--version"], capture_output=True, check=False)
    except OSError:
        return False
    return True

"""Local stand-ins for PyPI and the PyTorch CPU index (tests; these machines cannot reach download.pytorch.org).

`standin_wheel` writes a small, installable wheel with real METADATA (Name, Version, Requires-Dist), the tags
in its file name and WHEEL, and a `<wheel>.metadata` file beside it (PEP 714: served as core-metadata).
`stack_indexes` fills two folders served by `httpserve.Server(simple_index=True)`:

- the CPU index: `torch-X+cpu` for the target's Python and arch, with the Requires-Dist of the real CPU
  wheel (filelock, typing-extensions, sympy, networkx, jinja2, fsspec: no nvidia-*);
- "PyPI": a stand-in for every other root of the lock's closure (torch_npu requiring torch==X, as the real
  wheel does; numpy, transformers, ... each at a version its specifiers accept), torch's own dependencies,
  and PyPI's CUDA torch X (Requires-Dist nvidia-cublas-cu13, triton: the wheels an Ascend closure must never
  hold), so a resolver that took torch from "PyPI" would show it.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

CPU_TORCH_REQUIRES = ["filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3", "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5"]
CUDA_TORCH_REQUIRES = [
    *CPU_TORCH_REQUIRES,
    'nvidia-cublas-cu13==13.1.0.3; platform_system == "Linux"',
    'triton==3.7.0; platform_system == "Linux"',
]


def standin_wheel(
    folder: Path,
    name: str,
    version: str,
    tag: str = "py3-none-any",
    requires: list[str] = (),
    entry_points: dict[str, dict[str, str]] | None = None,
    modules: dict[str, str] | None = None,
) -> Path:
    """`entry_points`: {group: {name: "module:attr"}}, written as the dist-info's entry_points.txt; `modules`: more
    files of the package ({path in the wheel: text}), e.g. the module a console script names."""
    dist = f"{name.replace('-', '_')}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{name.replace('-', '_')}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}.dist-info/METADATA": meta,
        **(modules or {}),
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }
    if entry_points:
        files[f"{dist}.dist-info/entry_points.txt"] = "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(eps.items())) + "\n"
            for group, eps in sorted(entry_points.items())
        )
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{dist}.dist-info/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, text in files.items():
            zf.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), text)
    path = folder / f"{dist}-{tag}.whl"
    path.write_bytes(buf.getvalue())
    (folder / f"{path.name}.metadata").write_text(meta)
    return path


STANDIN_BACKEND = """\
# A PEP 517 backend standing in for vLLM's setup.py: the wheel's version gets `+<VLLM_TARGET_DEVICE>` as vLLM's does
# (`0.23.0+empty`), the build imports torch (the build venv's, as vLLM's setup.py does) and records its version and
# the device in the package; SOURCE_DATE_EPOCH fixes the members' time.
import io, os, time, zipfile

NAME, VERSION, REQUIRES = {name!r}, {version!r}, {requires!r}


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    import torch

    device = os.environ.get("VLLM_TARGET_DEVICE", "cuda")
    version = f"{{VERSION}}+{{device}}"
    dist = f"{{NAME}}-{{version}}"
    meta = f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{version}}\\n" + "".join(
        f"Requires-Dist: {{r}}\\n" for r in REQUIRES
    )
    files = {{
        f"{{NAME}}/__init__.py": f"__version__ = {{version!r}}\\n",
        f"{{NAME}}/_build.py": f"DEVICE = {{device!r}}\\nTORCH = {{torch.__version__!r}}\\n",
        f"{{dist}}.dist-info/METADATA": meta,
        f"{{dist}}.dist-info/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }}
    files[f"{{dist}}.dist-info/RECORD"] = "".join(f"{{n}},,\\n" for n in files) + f"{{dist}}.dist-info/RECORD,,\\n"
    when = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())))[:6]
    name = f"{{dist}}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for n, text in files.items():
            zf.writestr(zipfile.ZipInfo(n, date_time=max(when, (1980, 1, 1, 0, 0, 0))), text)
    return name
"""


def standin_sdist(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A stand-in sdist `name-version.tar.gz` built by an in-tree PEP 517 backend (`STANDIN_BACKEND`) that needs
    nothing but torch: what `envkit.artifacts.sdist` builds as vLLM's (`VLLM_TARGET_DEVICE=empty`)."""
    import tarfile

    base = f"{name}-{version}"
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "standin_backend"\nbackend-path = ["."]\n',
        "standin_backend.py": STANDIN_BACKEND.format(name=name, version=version, requires=list(requires)),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    path = folder / f"{base}.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for n, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{n}")
            info.size, info.mtime, info.mode = len(data), 315532800, 0o644
            tf.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


def _version_for(reqs: list[Requirement]) -> str:
    """A version every specifier of `reqs` accepts (their own bounds first, then a plain 1.0 or 99.0)."""
    candidates = [s.version for r in reqs for s in r.specifier if s.operator in ("==", ">=", "~=", "===")] + ["1.0", "99.0"]
    for v in candidates:
        if all(r.specifier.contains(v, prereleases=True) for r in reqs):
            return v
    raise AssertionError(f"no stand-in version fits {[str(r) for r in reqs]}")


def stack_indexes(pypi: Path, cpu: Path, roots: list[str], torch: str, python: str, arch: str) -> dict[str, Path]:
    """Stand-ins for every root (torch from `cpu` as `torch` X+cpu, the rest from `pypi`); returns name -> wheel."""
    pypi.mkdir(parents=True, exist_ok=True)
    cpu.mkdir(parents=True, exist_ok=True)
    cp = "cp" + python.replace(".", "")
    tag = f"{cp}-{cp}-manylinux_2_28_{arch}"
    public = torch.split("+")[0]
    made = {"torch": standin_wheel(cpu, "torch", f"{public}+cpu", tag, CPU_TORCH_REQUIRES)}
    standin_wheel(pypi, "torch", public, tag, CUDA_TORCH_REQUIRES)  # PyPI's CUDA build: never to be taken
    standin_wheel(pypi, "nvidia-cublas-cu13", "13.1.0.3", f"py3-none-manylinux_2_27_{arch}")
    standin_wheel(pypi, "triton", "3.7.0", tag)
    by_name: dict[str, list[Requirement]] = {}
    for spec in [*roots, *CPU_TORCH_REQUIRES]:
        r = Requirement(spec)
        by_name.setdefault(r.name.lower().replace("_", "-"), []).append(r)
    for name, reqs in sorted(by_name.items()):
        if name == "torch":
            continue
        if name == "torch-npu":
            version = _version_for(reqs)
            made[name] = standin_wheel(pypi, "torch_npu", version, tag, [f"torch=={public}"])
        else:
            made[name] = standin_wheel(pypi, name, _version_for(reqs))
    return made


def default_stack(tmp_path: Path, monkeypatch) -> tuple[Path, object, Path, Path]:
    """The default target's lock (Atlas A2, aarch64, Python 3.10, torch X) written to `tmp_path/envkit.lock`, and two
    folders of stand-in wheels, `pypi` (the rest) and `cpu` (torch X+cpu); the cache under `tmp_path` (uv needed)."""
    import pytest

    from envkit.artifacts.closure import envkit_roots, find_uv, target_roots
    from envkit.core.derive import build_lock
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import pins_from_mapping, solve
    from envkit.errors import CannotRun
    from envkit.lock.file import dump_lock

    try:
        find_uv()
    except CannotRun:
        pytest.skip("uv is not installed")
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    lm = load_matrix()
    lock = build_lock(lm, solve(lm, pins_from_mapping(lm, {})), "envkit resolve")
    path = tmp_path / "envkit.lock"
    path.write_text(dump_lock(lock))
    s = lock.stack
    stack_indexes(tmp_path / "pypi", tmp_path / "cpu", target_roots(lock) + envkit_roots(), s.torch, s.python, s.arch)
    return path, lock, tmp_path / "pypi", tmp_path / "cpu"


def installs_offline_for_target(bundle: Path, tmp_path: Path, platform: str = "manylinux_2_28_aarch64") -> dict[str, str]:
    """What pip installs from a bundle folder's wheels/target for the default target (CPython 3.10, `platform`):
    offline (`--no-index`, the bundle's wheels only), every hash checked, `--dry-run` into a --target folder (the
    wheels are for another machine than this one). name -> version, from pip's own report."""
    import json
    import os
    import subprocess
    import sys

    report = tmp_path / "pip-report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": "/dev/null"}
    # fmt: off
    args = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index", "--no-deps",
        "--require-hashes", "--only-binary=:all:", "--platform", platform, "--python-version", "3.10",
        "--implementation", "cp", "--target", str(tmp_path / "pip-target"),
        "--find-links", str(bundle / "wheels" / "target"), "-r", str(bundle / "requirements" / "target.txt"),
        "--report", str(report), "-q",
    ]
    # fmt: on
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return {
        i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }

"""Shared fixtures of the smoke/compare tests: one model build and a few CPU runs per session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Result  # one declaration for in-process and subprocess runs

REPO = Path(__file__).resolve().parents[2]
FAKE_TORCH_NPU = REPO / "tests" / "fixtures" / "fake_torch_npu"
# One intra-op thread: on a small shared CI machine, OpenMP threads competing with other jobs make the
# tiny model 10x slower. Results do not depend on it (bitwise equal with 1 and 2 threads).
THREADS = os.environ.get("ENVKIT_TEST_THREADS", "1")


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory) -> Path:
    """A private model cache for the session (ENVKIT_CACHE_DIR), so tests never touch ~/.cache."""
    path = tmp_path_factory.mktemp("envkit-cache")
    old = os.environ.get("ENVKIT_CACHE_DIR")
    os.environ["ENVKIT_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ENVKIT_CACHE_DIR", None)
    else:
        os.environ["ENVKIT_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def tiny_model(smoke_cache) -> Path:
    pytest.importorskip("tokenizers")
    pytest.importorskip("numpy")
    from envkit.jobs.smoke.model import ensure_tiny_model

    try:
        import torch
    except ImportError:
        pass
    else:
        torch.set_num_threads(int(THREADS))
    return ensure_tiny_model()


def _run_in_process(smoke_cache, out: Path, dtype: str, **kw):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    torch.set_num_threads(int(THREADS))
    from envkit.jobs.smoke.runner import SmokeOptions, run_smoke

    return run_smoke(SmokeOptions(device="cpu", dtype=dtype, out=out, layers=True, repeat=3, **kw))


@pytest.fixture(scope="session")
def run_fp32(smoke_cache, tiny_model, tmp_path_factory):
    return _run_in_process(smoke_cache, tmp_path_factory.mktemp("smoke") / "cpu-fp32", "fp32")


@pytest.fixture(scope="session")
def run_bf16(smoke_cache, tiny_model, tmp_path_factory):
    return _run_in_process(smoke_cache, tmp_path_factory.mktemp("smoke") / "cpu-bf16", "bf16")


@pytest.fixture(scope="session")
def run_bf16_again(smoke_cache, tiny_model, tmp_path_factory):
    return _run_in_process(smoke_cache, tmp_path_factory.mktemp("smoke") / "cpu-bf16-again", "bf16")


def envkit_subprocess(*args: str, env: dict[str, str] | None = None, pythonpath: list[Path] = (), timeout: int = 180) -> Result:
    """Run `python -m envkit ARGS` in a fresh process (own imports, own environment)."""
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", THREADS)
    full_env.update(env or {})
    paths = [str(p) for p in pythonpath] + [str(REPO)] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else [])
    full_env["PYTHONPATH"] = os.pathsep.join(paths)
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=str(REPO)
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)

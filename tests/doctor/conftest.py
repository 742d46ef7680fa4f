from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOTS = FIXTURES / "roots"
SAMPLES = FIXTURES / "samples"


def sample(rel: str) -> str:
    return (SAMPLES / rel).read_text()


@pytest.fixture
def root_copy(tmp_path: Path):
    """Copy a fixture root (symlinks kept) so a test may change it; npu-smi stays executable."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(ROOTS / name, dest, symlinks=True)
        script = dest / "usr/local/bin/npu-smi"
        if script.exists():
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return dest

    return make


@pytest.fixture
def run_cli(capsys):
    """Run `envkit ...` in-process through the single error boundary; returns (rc, stdout, stderr)."""
    from envkit.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out = capsys.readouterr()
        code = exc.value.code
        return (code if isinstance(code, int) else 0), out.out, out.err

    return run

"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


def plain_id(text: str) -> str:
    """`text` as a test id of printable ASCII without backslashes (U+XXXX for any other character). pytest escapes
    such ids itself (`\\u0663`, `\\n`) but, run twice in one process as mutmut runs it (its clean run after its
    stats run), no longer finds the escaped ids it listed: the clean run then fails with exit 4."""
    return "".join(c if " " <= c <= "~" and c != "\\" else f"U+{ord(c):04X}" for c in text)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A parameter's string value as its id, made plain (`plain_id`) when pytest would escape it."""
    if isinstance(val, str) and plain_id(val) != val:
        return plain_id(val)
    return None


def load_tool(name: str):  # noqa: ANN201 - a module
    """tools/NAME.py as a module (the generators' tests render with it and compare with the committed file)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(f"envkit_tool_{name}", root / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Result:
    """What one `envkit` run gave: exit code, stdout, stderr (`run_cli`, smoke's `envkit_subprocess`)."""

    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process through its real entry point (error boundary included)."""

    def _run(*args: str) -> Result:
        from envkit.cli import main

        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run


@pytest.fixture
def golden() -> Callable[[Path, str], None]:
    """Compare a text with its committed golden file; `ENVKIT_UPDATE_GOLDEN=1` rewrites the file first."""

    def _check(path: Path, got: str) -> None:
        if os.environ.get("ENVKIT_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(got)
        assert got == path.read_text(), (
            f"{path.parent.name}/{path.name} differs from the golden (ENVKIT_UPDATE_GOLDEN=1 rewrites it)"
        )

    return _check


@pytest.fixture(autouse=True)
def _host_dev_null_intact():
    """No test may damage the machine it runs on. A root process that renames a file over /dev/null (ssh
    rewriting a known_hosts of /dev/null, an atomic write to it) breaks every later shell and boot; this names
    the test that did it."""
    import os
    import stat
    import sys

    intern = sys.intern
    yield
    if sys.intern is not intern:  # importing ansible.module_utils patches it process-wide; torch._dynamo then fails
        sys.intern = intern
        pytest.fail(
            "this test patched sys.intern in the pytest process (an in-process import of ansible.module_utils?); "
            "import ansible in a subprocess"
        )
    try:
        mode = os.lstat("/dev/null").st_mode
    except OSError:  # pragma: no cover - no /dev/null at all
        return
    if not stat.S_ISCHR(mode):
        pytest.fail(
            "/dev/null is no longer a character device after this test "
            "(repair as root: rm /dev/null && mknod -m 666 /dev/null c 1 3)"
        )


def _podman_ids(*args: str) -> set[str] | None:
    """Full ids that `podman ARGS -q --no-trunc` lists, or None where no Podman set-up is in force."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("podman") or not os.environ.get("CONTAINERS_CONF"):
        return None
    r = subprocess.run(["podman", *args, "-q", "--no-trunc"], capture_output=True, text=True, timeout=120)
    return set(r.stdout.split()) if r.returncode == 0 else None


@pytest.fixture(scope="session", autouse=True)
def _no_test_image_left_behind():
    """The images and containers a test session builds are removed when it ends (a CI run once left about
    13 GB of them). What existed before the session (the set-up's base image, a user's images) stays."""
    import subprocess

    images, containers = _podman_ids("images", "-a"), _podman_ids("ps", "-a")
    yield
    if images is None or containers is None:
        return
    for cid in sorted((_podman_ids("ps", "-a") or set()) - containers):
        subprocess.run(["podman", "rm", "-f", cid], capture_output=True, timeout=120)
    made = sorted((_podman_ids("images", "-a") or set()) - images)
    if made:
        subprocess.run(["podman", "rmi", "-f", "-i", *made], capture_output=True, timeout=600)
    left = (_podman_ids("images", "-a") or set()) - images
    if left:  # pragma: no cover - podman refused: say so rather than leave gigabytes silently
        import warnings

        warnings.warn(f"{len(left)} test images could not be removed: podman rmi -f {' '.join(sorted(left))}", stacklevel=1)


@pytest.fixture(scope="session", autouse=True)
def _internal_error_files_stay_in_the_session(tmp_path_factory):
    """An internal error (exit 3) writes its traceback under $XDG_STATE_HOME/envkit: in a test session, a folder of
    the session's (subprocesses inherit it), never the home folder of whoever runs the tests."""
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if old is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = old

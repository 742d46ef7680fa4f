"""An unexpected exception is a bug: exit 3 (never 1, "a check failed") with one line naming the file that holds its
traceback (0600, created anew, never through a planted link); `--debug` prints the traceback instead; `--json`
prints an error document; Ctrl-C is 130 without either. Envkit's own errors keep their codes."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envkit.errors import EXIT_INTERNAL, BadInput

LINE = re.compile(r"^envkit: internal error \((?P<what>.*)\), please report it; the traceback is in (?P<file>\S+)\n$")
ROOT = Path(__file__).resolve().parents[2]


def _boom(exc: BaseException):
    def raiser(*_a, **_k):
        raise exc

    return raiser


def _zero(*_a, **_k):
    return 1 / 0


def _recurse(*_a, **_k):
    return _recurse()


# (the function a command calls, argv): the start-up path without typer, and a typer command
PATHS = {
    "validate": ("envkit.core.validation.judge_file", ["validate", "stack.yaml"]),
    "matrix check": ("envkit.core.matrix.check_matrix", ["matrix", "check"]),
}


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    """$XDG_STATE_HOME in tmp_path, and a temporary folder of its own: where traceback files go."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    return tmp_path / "state" / "envkit"


def _files(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize(
    "raiser, what",
    [
        (_boom(RuntimeError("the cache index is torn")), "RuntimeError: the cache index is torn"),
        (_zero, "ZeroDivisionError: division by zero"),
        (_recurse, "RecursionError: maximum recursion depth exceeded"),
        (_boom(KeyError("torch")), "KeyError: 'torch'"),
        (_boom(RuntimeError()), "RuntimeError"),
    ],
)
def test_an_unexpected_exception_is_exit_3_with_its_traceback_in_a_file(path, raiser, what, state, monkeypatch, run_cli):
    target, argv = PATHS[path]
    monkeypatch.setattr(target, raiser)
    r = run_cli(*argv)
    assert r.code == EXIT_INTERNAL == 3, (r.out, r.err)
    m = LINE.match(r.err)
    assert m, r.err
    assert m["what"] == what or (what.startswith("RecursionError") and m["what"].startswith(what)), m["what"]
    assert "Traceback" not in r.err and r.out == ""
    file = Path(m["file"])
    assert _files(state) == [file]
    assert stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_IMODE(state.stat().st_mode) == 0o700
    text = file.read_text()
    assert text.startswith("envkit ") and "Traceback (most recent call last):" in text
    assert text.rstrip().splitlines()[-1].startswith(what.split(":")[0])
    assert raiser.__name__ in text  # the frame that raised


def test_each_internal_error_has_its_own_file(state, monkeypatch, run_cli):
    monkeypatch.setattr("envkit.core.validation.judge_file", _zero)
    files = {LINE.match(run_cli("validate", "x.yaml").err)["file"] for _ in range(3)}
    assert len(files) == 3 and all(str(os.getpid()) in Path(f).name for f in files)
    assert sorted(map(str, _files(state))) == sorted(files)


def test_json_commands_print_an_error_document(state, monkeypatch, run_cli):
    monkeypatch.setattr("envkit.core.matrix.check_matrix", _zero)
    r = run_cli("matrix", "check", "--json")
    assert r.code == 3
    doc = json.loads(r.out)["error"]
    file = LINE.match(r.err)["file"]
    assert doc["type"] == "InternalError" and doc["exit_code"] == 3
    assert doc["message"] == "internal error (ZeroDivisionError: division by zero), please report it"
    assert doc["details"] == {"exception": "ZeroDivisionError", "traceback_file": file}


def test_debug_prints_the_traceback_and_writes_no_file(state, monkeypatch, run_cli):
    for target, argv in PATHS.values():
        monkeypatch.setattr(target, _zero)
        r = run_cli("--debug", *argv)
        assert r.code == 3, r.err
        assert "Traceback (most recent call last):" in r.err and "ZeroDivisionError: division by zero" in r.err
        assert "internal error" not in r.err
    assert _files(state) == [] and _files(state.parent.parent / "tmp") == []


@pytest.mark.parametrize("path", sorted(PATHS))
def test_ctrl_c_is_130_without_the_internal_error_message(path, state, monkeypatch, run_cli):
    target, argv = PATHS[path]
    monkeypatch.setattr(target, _boom(KeyboardInterrupt()))
    r = run_cli(*argv)
    assert r.code == 130 and "internal error" not in r.err and "Traceback" not in r.err, r.err
    assert _files(state) == []


@pytest.mark.parametrize("path", sorted(PATHS))
def test_envkit_errors_keep_their_own_exit_code(path, state, monkeypatch, run_cli):
    target, argv = PATHS[path]
    monkeypatch.setattr(target, _boom(BadInput("the stack names no chip")))
    r = run_cli(*argv)
    assert r.code == 2 and r.err.startswith("error: the stack names no chip") and "internal error" not in r.err
    monkeypatch.setattr(target, _boom(ModuleNotFoundError("No module named 'numpy'", name="numpy")))
    r = run_cli(*argv)
    assert r.code == 2 and "envkit[smoke]" in r.err
    assert _files(state) == []


def test_a_missing_module_that_is_no_optional_extra_is_an_internal_error(state, monkeypatch, run_cli):
    monkeypatch.setattr(
        "envkit.core.validation.judge_file", _boom(ModuleNotFoundError("No module named 'pydantic'", name="pydantic"))
    )
    r = run_cli("validate", "x.yaml")
    assert r.code == 3 and LINE.match(r.err)["what"] == "ModuleNotFoundError: No module named 'pydantic'", r.err


@pytest.mark.parametrize("length, shown", [(200, "x" * 200), (201, "x" * 200 + "...")])
def test_the_message_is_one_printable_line_of_at_most_200_characters(length, shown, state, monkeypatch, run_cli):
    monkeypatch.setattr("envkit.core.validation.judge_file", _boom(RuntimeError("x" * length + "\n\x1b[2Jsecond line")))
    r = run_cli("validate", "x.yaml")
    assert r.code == 3 and LINE.match(r.err)["what"] == f"RuntimeError: {shown}", r.err
    monkeypatch.setattr("envkit.core.validation.judge_file", _boom(RuntimeError("a\x1b[31mred\x07")))
    r = run_cli("validate", "x.yaml")
    assert LINE.match(r.err)["what"] == "RuntimeError: a?[31mred?" and "\x1b" not in r.err


def test_a_planted_link_is_never_followed(state, monkeypatch, run_cli, tmp_path):
    """A link planted at the very name the file would get (the random part fixed here) is refused by O_EXCL: the
    traceback goes to the temporary folder, the link's target is untouched."""
    monkeypatch.setattr("secrets.token_hex", lambda _n: "feedbeef")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    state.mkdir(parents=True, mode=0o700)
    (state / f"envkit-traceback-{os.getpid()}-feedbeef.txt").symlink_to(victim)
    monkeypatch.setattr("envkit.core.validation.judge_file", _zero)
    r = run_cli("validate", "x.yaml")
    assert r.code == 3
    file = Path(LINE.match(r.err)["file"])
    assert file == tmp_path / "tmp" / f"envkit-traceback-{os.getpid()}-feedbeef.txt" and not file.is_symlink()
    assert "ZeroDivisionError" in file.read_text() and victim.read_text() == "keep me\n"


@pytest.mark.parametrize("unsafe", ["link", "group-writable", "a file"])
def test_a_state_folder_that_is_not_safe_is_passed_over_for_the_temporary_folder(unsafe, state, monkeypatch, run_cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    state.parent.mkdir()
    if unsafe == "link":
        state.symlink_to(elsewhere)
    elif unsafe == "group-writable":
        state.mkdir()
        state.chmod(0o770)
    else:
        state.write_text("not a folder\n")
    monkeypatch.setattr("envkit.core.validation.judge_file", _zero)
    r = run_cli("validate", "x.yaml")
    assert r.code == 3
    assert Path(LINE.match(r.err)["file"]).parent == tmp_path / "tmp"
    assert _files(elsewhere) == [] and (unsafe != "group-writable" or _files(state) == [])


def test_a_relative_xdg_state_home_is_ignored(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr("envkit.core.validation.judge_file", _zero)
    r = run_cli("validate", "x.yaml")
    assert r.code == 3 and not (tmp_path / "relative").exists()
    assert Path(LINE.match(r.err)["file"]).parent == tmp_path / "home" / ".local" / "state" / "envkit"


def test_nowhere_to_write_still_exit_3_and_says_so(state, monkeypatch, run_cli, tmp_path):
    state.parent.mkdir()
    state.write_text("not a folder\n")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "no-such-folder"))
    monkeypatch.setattr("envkit.core.validation.judge_file", _zero)
    r = run_cli("validate", "x.yaml")
    assert r.code == 3
    assert r.err == (
        "envkit: internal error (ZeroDivisionError: division by zero), please report it; "
        "the traceback could not be written (No such file or directory); run again with --debug to see it\n"
    )


# --- through `python -m envkit` -------------------------------------------------------------------------
def _envkit(tmp_path: Path, patch: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m envkit ARGV` in a fresh interpreter whose sitecustomize applies `patch` first."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(patch))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TMPDIR": str(tmp_path),
    }
    return subprocess.run([sys.executable, "-m", "envkit", *argv], capture_output=True, text=True, env=env, timeout=120)


def test_python_m_envkit_exits_3_with_the_file(tmp_path):
    p = _envkit(tmp_path, "import envkit.core.validation as v\nv.judge_file = lambda *a: 1 / 0\n", "validate", "x.yaml")
    assert p.returncode == 3, p.stderr
    m = LINE.match(p.stderr)
    assert m and m["what"] == "ZeroDivisionError: division by zero", p.stderr
    file = Path(m["file"])
    assert file.parent == tmp_path / "state" / "envkit" and stat.S_IMODE(file.stat().st_mode) == 0o600
    assert "Traceback (most recent call last):" in file.read_text() and "Traceback" not in p.stderr
    p = _envkit(
        tmp_path, "import envkit.core.validation as v\nv.judge_file = lambda *a: 1 / 0\n", "--debug", "validate", "x.yaml"
    )
    assert p.returncode == 3 and "Traceback (most recent call last):" in p.stderr and "internal error" not in p.stderr


def test_python_m_envkit_ctrl_c_is_130(tmp_path):
    patch = """
    import envkit.core.matrix as m

    def interrupted(*a):
        raise KeyboardInterrupt

    m.check_matrix = interrupted
    """
    p = _envkit(tmp_path, patch, "matrix", "check")
    assert p.returncode == 130 and "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr

"""Shell completion: `envkit --show-completion SHELL` prints the script, `--install-completion` installs it, and the
script, sourced by a real bash, completes commands, subcommands and options through the real `envkit`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _envkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    # typer detects the shell from the parent process unless told not to; then the option takes the shell's name
    full = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1", **env}
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=full, cwd=ROOT, timeout=60)


def test_show_completion_bash_prints_the_script_for_envkit():
    r = _envkit("--show-completion", "bash", env={})
    assert r.returncode == 0, r.stderr
    assert "complete -o default -F _envkit_completion envkit" in r.stdout
    assert "_ENVKIT_COMPLETE=complete_bash" in r.stdout


def test_the_root_help_offers_both_completion_options():
    r = _envkit("--help", env={})
    assert r.returncode == 0, r.stderr
    assert "--install-completion" in r.stdout and "--show-completion" in r.stdout


def test_install_completion_bash_writes_the_script_and_sources_it_from_bashrc(tmp_path):
    r = _envkit("--install-completion", "bash", env={"HOME": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    script = tmp_path / ".bash_completions" / "envkit.sh"
    assert "complete -o default -F _envkit_completion envkit" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


@pytest.mark.skipif(shutil.which("bash") is None or not (BIN / "envkit").exists(), reason="needs bash and the envkit script")
@pytest.mark.parametrize(
    "words, expected",
    [
        ("envkit ima", ["image"]),
        ("envkit image r", ["render", "run-args"]),
        ("envkit resolve --ch", ["--chip"]),
        ("envkit matrix s", ["schema", "show"]),
    ],
)
def test_bash_completes_through_the_installed_script(words, expected):
    """The printed script sourced by bash: its completion function runs the real `envkit` with _ENVKIT_COMPLETE."""
    script = _envkit("--show-completion", "bash", env={}).stdout
    program = (
        f"{script}\n"
        f'read -ra COMP_WORDS <<< "{words}"; COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n'
        '_envkit_completion envkit; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == expected, r.stdout + r.stderr

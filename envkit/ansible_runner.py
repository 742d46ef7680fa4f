"""The thin executor: run ansible-playbook with envkit's JSON-lines callback and stream its events.

Everything it decides is in `playbook_command()` / `playbook_env()` (assertable without Ansible);
`run_playbook()` only starts the process, reads its stdout line by line and hands each event on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import CannotRun
from envkit.provision import parse_lines


@dataclass(frozen=True)
class PlaybookRun:
    playbook: Path
    inventory: str
    vars_file: Path
    check: bool = False
    limit: str | None = None
    forks: int | None = None
    serial: int | None = None
    extra_vars: tuple[str, ...] = ()


def ansible_playbook_path() -> str:
    """ansible-playbook beside this interpreter (the venv envkit lives in), else on PATH."""
    here = Path(sys.executable).parent / "ansible-playbook"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("ansible-playbook")
    if not found:
        raise CannotRun(
            "ansible-playbook not found",
            hint="Install ansible-core into envkit's environment (pip install 'ansible-core>=2.15').",
        )
    return found


def playbook_command(run: PlaybookRun, executable: str = "ansible-playbook") -> list[str]:
    argv = [executable, "-i", run.inventory, "-e", f"@{run.vars_file}"]
    if run.check:
        argv += ["--check", "--diff"]
    if run.limit:
        argv += ["--limit", run.limit]
    if run.forks:
        argv += ["--forks", str(run.forks)]
    if run.serial:
        # a failed host in a batch stops the roll-out before the next batch
        argv += ["-e", f"envkit_serial={run.serial}", "-e", "envkit_max_fail_percentage=0"]
    for extra in run.extra_vars:
        argv += ["-e", extra]
    argv.append(str(run.playbook))
    return argv


def playbook_env(playbooks_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "ANSIBLE_CONFIG": str(playbooks_dir / "ansible.cfg"),
            "ANSIBLE_STDOUT_CALLBACK": "envkit_jsonl",
            "ANSIBLE_CALLBACK_PLUGINS": str(playbooks_dir / "callback_plugins"),
            "ANSIBLE_ROLES_PATH": str(playbooks_dir / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    # the interpreter's bin first: ansible-playbook finds its own ansible-* helpers
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


@dataclass
class RunResult:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str


def run_playbook(
    argv: list[str],
    env: dict[str, str],
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    events_log: Path | None = None,
    stderr_log: Path | None = None,
) -> RunResult:
    """Run ansible-playbook; each JSON event goes to `on_event` as it arrives."""
    events: list[dict[str, Any]] = []
    err_path = stderr_log
    err_fh = open(err_path, "w+") if err_path else subprocess.PIPE  # noqa: SIM115
    log_fh = open(events_log, "w") if events_log else None  # noqa: SIM115
    try:
        try:
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err_fh, text=True, bufsize=1)
        except OSError as exc:
            raise CannotRun(f"cannot start {argv[0]}: {exc}") from None
        assert proc.stdout is not None
        for line in proc.stdout:
            if log_fh:
                log_fh.write(line)
            for ev in parse_lines([line]):
                events.append(ev)
                if on_event:
                    on_event(ev)
        rc = proc.wait()
        if err_path:
            err_fh.seek(0)  # type: ignore[union-attr]
            stderr = err_fh.read()  # type: ignore[union-attr]
        else:
            stderr = proc.stderr.read() if proc.stderr else ""
    finally:
        if log_fh:
            log_fh.close()
        if err_path:
            err_fh.close()  # type: ignore[union-attr]
    return RunResult(returncode=rc, events=events, stderr=stderr)

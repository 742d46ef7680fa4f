"""The Ansible executor, shared by `provision` and `launch profile`: run ansible-playbook with envkit's JSON-lines
callback and stream its events, write its vars file, fold its events per host.

Everything it decides is in `playbook_command()` / `playbook_env()` (assertable without Ansible);
`run_playbook()` only starts the process, reads its stdout line by line (`parse_lines`) and hands each event on;
`dump_vars()` writes the vars file with every data string that could hold Jinja tagged `!unsafe`; `summarize()`
folds the events into one row per host, handing each job's own task reports to its hook. It imports no job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import CannotRun


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
            # envkit's modules (envkit_probe, envkit_fetch) are the collection's: a user's ANSIBLE_LIBRARY would
            # override ansible.cfg's `library` and hide them
            "ANSIBLE_LIBRARY": str(playbooks_dir / "plugins" / "modules"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    # the interpreter's bin first: ansible-playbook finds its own ansible-* helpers
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def inventory_groups(
    inventory: str, env: dict[str, str], limit: str | None = None, timeout: int = 120
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The inventory as Ansible reads it (`ansible-inventory --list`, any inventory source, `--limit` applied):
    each group's own hosts (not its children's) in inventory order, and each host's `ansible_host` (its name when
    unset). CannotRun when ansible-inventory fails or answers something else than its JSON."""
    exe = Path(ansible_playbook_path()).with_name("ansible-inventory")
    argv = [str(exe), "-i", inventory, "--list", *(["--limit", limit] if limit else [])]
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CannotRun(f"ansible-inventory -i {inventory}: {exc}") from None
    try:
        data = json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        raise CannotRun(f"ansible-inventory -i {inventory} exited {p.returncode}", hint=tail or "Check the inventory.")
    hostvars = data.get("_meta", {}).get("hostvars", {}) if isinstance(data.get("_meta"), dict) else {}
    groups: dict[str, list[str]] = {}
    for name, group in data.items():
        if name in ("_meta", "all") or not isinstance(group, dict):
            continue
        hosts = group.get("hosts")
        if isinstance(hosts, list) and hosts:
            groups[str(name)] = [str(h) for h in hosts]
    addresses = {}
    for hosts in groups.values():
        for h in hosts:
            hv = hostvars.get(h) if isinstance(hostvars, dict) else None
            address = hv.get("ansible_host") if isinstance(hv, dict) else None
            addresses[h] = str(address) if isinstance(address, (str, int)) and str(address) else h
    return groups, addresses


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


class _Unsafe(str):
    """A string from the lock or the bundle: written with Ansible's `!unsafe` tag, never templated."""


def _mark_unsafe(value: Any) -> Any:
    # Only a string with a `{` can hold Jinja ({{ }}, {% %}, {# #}). The others stay plain: ansible-core 2.19
    # loads `!unsafe '3.11'` as the float 3.11, so tagging every string would change the lock's versions.
    if isinstance(value, str):
        return _Unsafe(value) if "{" in value else value
    if isinstance(value, dict):
        return {_mark_unsafe(k): _mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mark_unsafe(v) for v in value]
    return value


# The vars file keeps to playbooks/.yamllint (line-length max 200): a value that would end past VARS_WIDTH is written
# double-quoted, its lines broken where they reach VARS_WIDTH with an escaped line break (a trailing `\`: no character
# added or lost; a space that would start the next line is escaped, `\ `, so that YAML keeps it).
VARS_WIDTH = 160


def dump_vars(data: dict[str, Any], command: str) -> str:
    """The vars file: every string in it that could hold Jinja (values and the keys of nested maps, all of them
    from the lock or the bundle) is tagged `!unsafe`, so that Ansible never evaluates Jinja found in data; the
    variable names themselves are envkit's and stay plain. The text passes the playbooks' yamllint settings
    (playbooks/.yamllint): lists indented under their key, no line longer than VARS_WIDTH but a mapping key."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            # a list inside a mapping is indented under its key (yamllint's indentation: indent-sequences)
            return super().increase_indent(flow, False)

        def choose_scalar_style(self) -> str:
            style = super().choose_scalar_style()
            assert isinstance(self.event, yaml.ScalarEvent)
            fits = self.column + len(self.event.value) + len(" !unsafe ''") <= VARS_WIDTH
            return style if fits or self.simple_key_context or self.flow_level else '"'

        def write_double_quoted(self, text: str, split: bool = True) -> None:
            # PyYAML breaks a double-quoted scalar only at a space; this breaks it at any character
            self.write_indicator('"', True)
            for i, ch in enumerate(text):
                printable = "\x20" <= ch <= "\x7e" or (
                    self.allow_unicode and ("\xa0" <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd")
                )
                if printable and ch not in '"\\\x85\u2028\u2029\ufeff':  # what PyYAML escapes, escaped alike
                    piece = ch
                elif ch in self.ESCAPE_REPLACEMENTS:
                    piece = "\\" + self.ESCAPE_REPLACEMENTS[ch]
                else:
                    piece = (
                        f"\\x{ord(ch):02X}" if ch <= "\xff" else (f"\\u{ord(ch):04X}" if ch <= "\uffff" else f"\\U{ord(ch):08X}")
                    )
                if split and i and self.column + len(piece) + 1 > VARS_WIDTH:
                    self._write("\\")
                    self.write_indent()
                    self.whitespace = self.indention = False
                    if ch == " ":
                        piece = "\\ "
                self._write(piece)
            self.write_indicator('"', False)

        def _write(self, data: str) -> None:
            self.column += len(data)
            self.stream.write(data.encode(self.encoding) if self.encoding else data)

    Dumper.add_representer(_Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value)))
    # the command line (paths included) stays one comment line: a newline in it would start a YAML key of its own
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in command)
    header = f"# GENERATED by `{shown}`\n# from the lock and the bundle; DO NOT EDIT (rerun the command).\n"
    marked = {str(k): _mark_unsafe(v) for k, v in data.items()}
    return header + "---\n" + yaml.dump(marked, Dumper=Dumper, sort_keys=True, default_flow_style=False, width=VARS_WIDTH)


# --- the run's summary --------------------------------------------------------------------------
@dataclass
class HostRow:
    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    smoke: str = "not run"
    doctor: str = "not run"
    net: str = "not checked"  # hccn_tool's state (the preflight probe, where hccn_tool exists), checked here
    net_findings: list[dict[str, Any]] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what a job's tasks report as worth a look, not a failure
    ran: bool = False
    reports: dict[str, str] = field(default_factory=dict)  # file name -> text (doctor.json, smoke.json)

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        if not self.ran:
            return "not run"
        return "changed" if self.changed else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "status": self.status,
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "unreachable": self.unreachable,
            "skipped": self.skipped,
            "smoke": self.smoke,
            "doctor": self.doctor,
            "plan": self.plan,
            "errors": self.errors,
            "warnings": self.warnings,
            "net": self.net,
            "net_findings": self.net_findings,
        }


@dataclass
class Summary:
    hosts: dict[str, HostRow]
    check: bool
    complete: bool  # the run reached its stats (ansible did not crash)

    @property
    def bad_hosts(self) -> list[HostRow]:
        return [h for h in self.hosts.values() if h.status in ("failed", "unreachable", "not run")]

    @property
    def exit_code(self) -> int:
        return 1 if (self.bad_hosts or not self.complete) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "complete": self.complete,
            "exit_code": self.exit_code,
            "hosts": [self.hosts[h].to_dict() for h in sorted(self.hosts)],
        }


def msg_list(msg: Any) -> list[str]:
    if isinstance(msg, list):
        return [str(m) for m in msg if str(m).strip()]
    if isinstance(msg, str) and msg.strip():
        return [msg.strip()]
    return []


def summarize(
    events: Iterable[dict[str, Any]],
    hosts: Iterable[str] = (),
    on_result: Callable[[HostRow, str, dict[str, Any]], None] | None = None,
) -> Summary:
    """Fold the callback's JSON events into one row per host; each ok/changed result also goes to `on_result`
    (row, task name, event), where a job reads the reports its own tasks return."""
    rows: dict[str, HostRow] = {h: HostRow(h) for h in hosts}
    check = False
    complete = False
    for ev in events:
        kind = ev.get("event")
        if kind == "play":
            check = check or bool(ev.get("check"))
            for h in ev.get("hosts") or []:
                rows.setdefault(h, HostRow(h))
        elif kind == "result":
            host = ev.get("host", "?")
            row = rows.setdefault(host, HostRow(host))
            row.ran = True
            task = ev.get("task", "")
            status = ev.get("status")
            if status in ("failed", "unreachable"):
                text = ev.get("msg") or ev.get("stderr") or ""
                row.errors.append(f"{task}: {str(text).strip()}"[:600])
            if status in ("ok", "changed") and on_result is not None:
                on_result(row, task, ev)
        elif kind == "stats":
            complete = True
            for host, s in (ev.get("hosts") or {}).items():
                row = rows.setdefault(host, HostRow(host))
                row.ran = True
                row.ok, row.changed, row.failed = s.get("ok", 0), s.get("changed", 0), s.get("failed", 0)
                row.unreachable, row.skipped = s.get("unreachable", 0), s.get("skipped", 0)
    return Summary(hosts=rows, check=check, complete=complete)


def parse_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """JSON lines from the callback; any other line (a stray print) is ignored."""
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out

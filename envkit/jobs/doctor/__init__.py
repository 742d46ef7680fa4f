"""`envkit doctor`: probe a host or a mounted image, report the observed stack, its hazards and
its drift from a lock.

Modules: ``parsers`` (pure text parsers), ``probe`` (file reads under a root and subprocesses
with timeouts; the only module that runs commands), ``facts`` (parsed facts, one check per
source), ``hazards`` (named failure modes, each with its fix), ``diagnose`` (observed stack,
validation by the resolver, drift), ``report`` (pydantic models and the text rendering).

    doctor(DoctorRequest(root=Path("/mnt/image"), lock=Path("envkit.lock"))) -> DoctorReport

``doctor`` checks the command line's options and reads its files (the lock, the peers, the log),
then calls ``run_doctor``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.errors import BadInput, CannotRun
from envkit.jobs.doctor.report import DoctorReport

if TYPE_CHECKING:
    from envkit.lock.gate import LockCheck


def run_doctor(
    root: str = "/",
    *,
    python: str | None = None,
    env_file: str | None = None,
    lock_stack: dict[str, Any] | None = None,
    lock_path: str | None = None,
    timeout: float = 20.0,
    validator: Any = None,
    exec_root_tools: bool = False,
    net: bool = False,
    peers: list[str] | dict[int, list[str]] | None = None,
    net_log: str | None = None,
) -> DoctorReport:
    """Probe ``root`` and return the report (never raises for what it finds on the target).

    A root other than ``/`` is data: nothing in it runs unless ``exec_root_tools``. With ``net``, hccn_tool's
    state of every device is checked too (pinging ``peers``; EI codes of the ``net_log`` text explained)."""
    from envkit.jobs.doctor.diagnose import diagnose
    from envkit.jobs.doctor.observe import probe

    result = probe(root, python=python, env_file=env_file, timeout=timeout, exec_root_tools=exec_root_tools)
    report = diagnose(result, lock_stack=lock_stack, lock_path=lock_path, validator=validator)
    if not net:
        return report
    from envkit.jobs.doctor.net import net_section
    from envkit.jobs.doctor.observe import probe_net

    got = probe_net(root, peers=peers, env_file=env_file, timeout=timeout, exec_root_tools=exec_root_tools)
    chip = report.observed.chip.value if report.observed.chip is not None else (lock_stack or {}).get("chip")
    report.net = net_section(got, chip, peers, net_log)
    return report.finalize()


@dataclass(frozen=True)
class DoctorRequest:
    """`envkit doctor`'s options as given: nothing is checked or read until `doctor`."""

    root: Path = Path("/")
    python: str | None = None
    env_file: Path | None = None
    lock: Path | None = None
    lock_check: LockCheck | None = None  # the command line's (the lock compared with what the matrix derives)
    timeout: float = 20.0
    exec_root_tools: bool = False
    net: bool = False
    peers: str | None = None  # --peers IP,IP,...
    inventory: Path | None = None  # an inventory whose hosts' hccn.conf name the peers
    net_log: Path | None = None


def doctor(request: DoctorRequest, progress: Callable[[str], None] = lambda _m: None) -> DoctorReport:
    """Check the request's options and read its files (CannotRun or BadInput, exit 2, at the first that fails, in
    the order of `_check_target`, `_net_inputs`, --env-file, `_lock_stack`), say `probing ROOT ...` through
    `progress`, then `run_doctor`."""
    _check_target(request)
    peers, log_text = _net_inputs(request)
    if request.env_file is not None and not request.env_file.is_file():
        raise BadInput(f"--env-file {request.env_file}: no such file")
    lock_stack = _lock_stack(request)
    progress(f"probing {request.root} ...")
    return run_doctor(
        str(request.root),
        python=request.python,
        env_file=str(request.env_file) if request.env_file is not None else None,
        lock_stack=lock_stack,
        lock_path=str(request.lock) if request.lock is not None else None,
        timeout=request.timeout,
        exec_root_tools=request.exec_root_tools,
        net=request.net,
        peers=peers,
        net_log=log_text,
    )


def _check_target(request: DoctorRequest) -> None:
    """--root a directory; --exec-root-tools only with a --root other than /; --python an executable file on this
    host, or a file inside the root."""
    from envkit.jobs.doctor.observe import Target

    root, python = request.root, request.python
    if not root.is_dir():
        raise CannotRun(f"--root {root}: not a directory", hint="Mount or export the image first, e.g. `podman export`.")
    host = root.resolve() == Path("/")
    if request.exec_root_tools and host:
        raise BadInput("--exec-root-tools needs --root: on this host, npu-smi is run anyway")
    if python is None:
        return
    if host:
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise CannotRun(f"--python {python}: not an executable file", hint="Give the interpreter's full path.")
    elif not Target(root).exists(python):
        raise CannotRun(
            f"--python {python}: no such file in {root}",
            hint="With --root, --python names the interpreter inside the root, e.g. /usr/local/python3.11.13/bin/python3.",
        )


def _net_inputs(request: DoctorRequest) -> tuple[list[str] | dict[int, list[str]] | None, str | None]:
    """The peers (--peers parsed, or per device from --inventory) and the --net-log text; --peers, --inventory and
    --net-log only with --net, and not --peers with --inventory."""
    peers, inventory, net_log = request.peers, request.inventory, request.net_log
    if (peers or inventory or net_log) and not request.net:
        raise BadInput("--peers, --inventory and --net-log go with --net")
    if peers and inventory:
        raise BadInput("give --peers or --inventory, not both")
    peer_list = None
    if request.net and (peers or inventory):
        from envkit.fleet.hccn import inventory_peers, parse_peers

        peer_list = parse_peers(peers) if peers else inventory_peers(inventory)
    log_text = None
    if net_log is not None:
        from envkit.io.yamlio import read_text

        log_text = read_text(net_log)
    return peer_list, log_text


def _lock_stack(request: DoctorRequest) -> dict[str, Any] | None:
    """The --lock's stack, read through the request's lock check (None without --lock)."""
    if request.lock is None:
        return None
    from envkit.lock.file import SCHEMA_ONLY, read_lock

    if not request.lock.is_file():
        raise BadInput(f"--lock {request.lock}: no such file", hint="Create one with `envkit resolve`.")
    return read_lock(request.lock, request.lock_check or SCHEMA_ONLY).stack.model_dump()


__all__ = ["DoctorReport", "DoctorRequest", "doctor", "run_doctor"]

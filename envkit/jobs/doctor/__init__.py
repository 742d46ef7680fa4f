"""`envkit doctor`: probe a host or a mounted image, report the observed stack, its hazards and
its drift from a lock.

Modules: ``parsers`` (pure text parsers), ``probe`` (file reads under a root and subprocesses
with timeouts; the only module that runs commands), ``facts`` (parsed facts, one check per
source), ``hazards`` (named failure modes, each with its fix), ``diagnose`` (observed stack,
validation by the resolver, drift), ``report`` (pydantic models and the text rendering).
"""

from __future__ import annotations

from typing import Any

from envkit.jobs.doctor.report import DoctorReport


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


__all__ = ["DoctorReport", "run_doctor"]

"""From a probe to a report: observed stack, hazards, validation by the resolver, drift from a lock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envkit.errors import BadInput, EnvkitError
from envkit.jobs.doctor.facts import Facts, gather
from envkit.jobs.doctor.hazards import run_hazards
from envkit.jobs.doctor.observe import ProbeResult
from envkit.jobs.doctor.report import STACK_KEYS, Check, DoctorReport, Drift, Observed, ObservedValue
from envkit.versions import InvalidVersion, same

Validator = Callable[..., Any]

_TEXT_KEYS = {"chip", "arch", "os"}


def observe(f: Facts) -> Observed:
    """The observed stack with the lock's keys, each with the file or command it came from."""
    p = f.probe
    obs: dict[str, ObservedValue] = {}
    if f.driver is not None:
        details = {"package_version": f.driver.package_version} if f.driver.package_version else {}
        if f.driver.compatible_fw_text:
            details["compatible_version_fw"] = f.driver.compatible_fw_text
        obs["driver"] = ObservedValue(value=f.driver.version, source=p.driver_version_info.source, details=details)
    elif f.npu is not None and f.npu.version:
        obs["driver"] = ObservedValue(value=f.npu.version, source=f.npu_source or "npu-smi info")
    else:
        for board in f.boards:
            if board.software_version:
                obs["driver"] = ObservedValue(value=board.software_version, source="npu-smi info -t board")
                break
    if f.firmware is not None:
        details = {"firmware_version": f.firmware.version}
        if f.firmware.compatible_drv_text:
            details["compatible_version_drv"] = f.firmware.compatible_drv_text
        if f.firmware.package_version:
            obs["firmware"] = ObservedValue(
                value=f.firmware.package_version, source=p.firmware_version_info.source, details=details
            )
    if f.cann is not None:
        details = {"layout": f.cann.install.layout, "path": f.cann.install.resolved}
        for name, version, _source in f.cann.operator_packages:
            details[name] = version
        if f.nnal_version:
            details["nnal"] = f.nnal_version
        obs["cann"] = ObservedValue(value=f.cann.version, source=f.cann.source, details=details)
    if f.chip is not None and f.chip.chip:
        details = {"note": f.chip.note} if f.chip.note else {}
        if f.npu is not None:
            details["names"] = ", ".join(f.npu.names)
            details["chips"] = str(len(f.npu.chips))
            details["npus"] = str(len(f.npu.npu_ids))
        obs["chip"] = ObservedValue(value=f.chip.chip, source=f.chip_source or "npu-smi info", details=details)
    if f.arch is not None:
        obs["arch"] = ObservedValue(value=f.arch[0], source=f.arch[1])
    if f.os is not None:
        obs["os"] = ObservedValue(
            value=f.os.key,
            source=p.os_release.source,
            details={"pretty_name": f.os.pretty_name} if f.os.pretty_name else {},
        )
    if f.python is not None:
        if f.python.get("python"):
            details = {"full": f.python["python_full"]} if f.python.get("python_full") else {}
            obs["python"] = ObservedValue(value=f.python["python"], source=p.python.source, details=details)
        for name in ("torch", "torch_npu", "numpy", "transformers", "accelerate"):
            pkg = f.package(name)
            if pkg is not None:
                details = {"location": pkg["location"]} if pkg.get("location") else {}
                obs[name] = ObservedValue(value=str(pkg["version"]), source=p.python.source, details=details)
    return Observed(**obs)


def validate(observed: Observed, validator: Validator | None) -> tuple[Check, dict[str, Any] | None]:
    """Validate the observed stack with the resolver, facts marked as observed.

    Values the matrix does not know (a newer driver, a nightly torch_npu) are set aside one by one
    and named in the detail, so the rest of the stack is still judged.
    """
    name = "stack validation"
    stack = observed.stack()
    if not stack:
        return Check(name=name, status="warn", detail="nothing observed to validate"), None
    if validator is None:
        from envkit.core.resolve import validate_stack

        validator = validate_stack
    where = {k: f"observed: {getattr(observed, k).source}" for k in stack}
    unknown: list[str] = []
    report = None
    for _ in range(len(STACK_KEYS) + 1):
        try:
            report = validator(stack, origin="observed", where=where)
            break
        except BadInput as exc:
            key = (exc.details or {}).get("key") or (exc.where.key if exc.where else None)
            if key not in stack:
                return Check(name=name, status="warn", detail=f"could not validate: {exc.message}"), None
            unknown.append(f"{key} {stack.pop(key)} ({exc.message})")
            where.pop(key, None)
            if not stack:
                break
        except EnvkitError as exc:
            return Check(name=name, status="warn", detail=f"could not validate: {exc.message}"), None
    set_aside = f"; not in the matrix, set aside: {'; '.join(unknown)}" if unknown else ""
    if report is None:
        return Check(name=name, status="warn", detail="nothing the matrix knows to validate" + set_aside), None
    dump = report.model_dump(mode="json")
    if report.valid:
        hints = f"; hints: {' | '.join(report.hints)}" if getattr(report, "hints", None) else ""
        status = "warn" if unknown else "ok"
        return Check(
            name=name,
            status=status,
            detail=f"the observed stack fits the matrix ({len(stack)} components){set_aside}{hints}",
        ), dump
    summaries = "; ".join(c.summary for c in report.conflicts) or "no stack satisfies the matrix"
    fix = None
    if report.suggestions:
        s = report.suggestions[0]
        changes = ", ".join(f"{k} {v.get('from')} -> {v.get('to')}" for k, v in s.change.items())
        fix = f"change {changes}" + (" (a vendor-validated combination)" if s.validated else "")
    return Check(name=name, status="fail", detail=summaries + set_aside, fix=fix), dump


def _equal(key: str, a: str, b: str) -> bool:
    if key in _TEXT_KEYS:
        return a.strip().lower() == b.strip().lower()
    try:
        return same(a, b)
    except InvalidVersion:
        return a.strip().lower() == b.strip().lower()


def drift(observed: Observed, locked: dict[str, Any]) -> tuple[list[Drift], Check]:
    out: list[Drift] = []
    for key in STACK_KEYS:
        want = locked.get(key)
        if want is None or str(want).strip() == "":
            continue
        got = getattr(observed, key)
        if got is None:
            out.append(Drift(component=key, locked=str(want), observed=None, status="not observed"))
        elif _equal(key, str(want), got.value):
            out.append(Drift(component=key, locked=str(want), observed=got.value, status="match", source=got.source))
        else:
            out.append(Drift(component=key, locked=str(want), observed=got.value, status="differs", source=got.source))
    differs = [d for d in out if d.status == "differs"]
    missing = [d for d in out if d.status == "not observed"]
    if differs:
        detail = "; ".join(f"{d.component}: locked {d.locked}, observed {d.observed} ({d.source})" for d in differs)
        if missing:
            detail += f"; not observed: {', '.join(d.component for d in missing)}"
        return out, Check(
            name="lock drift",
            status="fail",
            detail=detail,
            fix="reinstall the locked versions (`envkit provision`, or the lock's image), or re-lock",
        )
    if missing:
        return out, Check(
            name="lock drift",
            status="warn",
            detail=f"{len(out) - len(missing)} match; not observed: {', '.join(d.component for d in missing)}",
        )
    return out, Check(name="lock drift", status="ok", detail=f"all {len(out)} locked components match")


def diagnose(
    probe_result: ProbeResult,
    *,
    lock_stack: dict[str, Any] | None = None,
    lock_path: str | None = None,
    validator: Validator | None = None,
) -> DoctorReport:
    facts = gather(probe_result)
    checks = list(facts.checks)
    checks.extend(run_hazards(facts, {k: str(v) for k, v in (lock_stack or {}).items() if v}))
    observed = observe(facts)
    vcheck, vdump = validate(observed, validator)
    checks.append(vcheck)
    drift_items: list[Drift] = []
    if lock_stack is not None:
        drift_items, dcheck = drift(observed, lock_stack)
        checks.append(dcheck)
    report = DoctorReport(
        root=probe_result.root,
        checks=checks,
        observed=observed,
        drift=drift_items,
        validation=vdump,
        lock=lock_path,
    )
    return report.finalize()

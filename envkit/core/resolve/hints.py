"""Hints on a valid stack, and suggestions for an invalid one (the nearest valid stacks). Pure: no I/O."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from envkit.core.constraints import Assignment, RuleConstraint, installs_triton, served_on
from envkit.core.matrix import LoadedMatrix
from envkit.core.matrix_records import HdkRelease
from envkit.core.resolve.pins import CHANGE_COST, Pin
from envkit.core.resolve.search import Chosen, solve
from envkit.versions import in_any_range, parse_ranges, same

if TYPE_CHECKING:
    from envkit.models.report import Conflict, Suggestion


def suggest(
    lm: LoadedMatrix, pins: dict[str, Pin], conflicts: list[Conflict], limit: int = 3, extra: tuple[str, ...] | None = None
) -> list[Suggestion]:
    """Nearest valid stacks: drop one pin (the cheapest to change first) and re-resolve (with the same optional
    keys in play, `extra`)."""
    from envkit.models.report import Suggestion

    involved = sorted({k for c in conflicts for k in c.pins}, key=lambda k: CHANGE_COST[k])
    out: list[Suggestion] = []
    tried: list[tuple[str, ...]] = [(k,) for k in involved]
    tried += itertools.combinations(involved, 2)  # pairs only when no single pin works (below)
    for drop in tried:
        if len(out) >= limit:
            break
        if len(drop) == 2 and out:
            break
        keep = {k: v for k, v in pins.items() if k not in drop}
        res = solve(lm, keep, extra)
        if res is None:
            continue
        if all(res.stack.get(k) == pins[k].value for k in drop):
            continue  # the same release again (a patch pin whose own range the pairing tables cannot see)
        change = {k: {"from": pins[k].given, "to": res.stack.get(k)} for k in drop}
        out.append(Suggestion(change=change, stack=res.stack, validated=res.validated_cann and res.validated_hdk))
    return out


def _patch_hints(lm: LoadedMatrix, stack: Assignment, pins: dict[str, Pin], firmware: HdkRelease) -> list[str]:
    """A patch spelling is validated as its release; say so, and check the patch's own firmware range (`firmware`:
    the row of the stack's firmware)."""
    out = []
    for key in ("driver", "firmware"):
        pin = pins.get(key)
        if pin is not None and not same(pin.given, pin.value) and lm.hdk(pin.given) is lm.hdk(pin.value):
            out.append(f"{key} {pin.given} is validated as HDK {pin.value}")
    drv = pins.get("driver")
    patch = lm.hdk_patch(drv.given) if drv else None
    fw = firmware.firmware_version
    if patch and patch.compatible_firmware and fw and not in_any_range(fw, parse_ranges(patch.compatible_firmware)):
        out.append(
            f"the driver patch {patch.version} allows firmware {patch.compatible_firmware} only, not the firmware "
            f"{fw} of HDK {stack['firmware']}: install a firmware in that range"
        )
    return out


def _served_hints(lm: LoadedMatrix, stack: Assignment, rows: Chosen) -> list[str]:
    """A serving stack that follows what the vendor runs (`runs_on`): a chip its torch_npu's TorchNPU line leaves out,
    and a chip whose vendor image installs no triton-ascend."""
    r = rows.vllm_ascend
    if r is None or r.runs_on is None:
        return []
    out = []
    chip, t = stack["chip"], rows.torch_npu
    line = lm.lines.get(t.line) if t.line else None
    if (line is None or chip not in line.chips) and served_on(r, chip, t.version):
        out.append(
            f"chip {chip} is not among the chips of TorchNPU {t.line}; torch_npu {t.version} is taken because the vendor "
            f"runs vllm-ascend {r.version} with it on {chip} ({r.runs_on.sources[0]})"
        )
    if r.triton_ascend is not None and installs_triton(r, chip) is None:
        out.append(
            f"vllm-ascend {r.version} installs no triton-ascend on chip {chip} (the vendor's image there uninstalls it): "
            "remove triton and triton-ascend if pip pulls them in"
        )
    return out


def hints_for(lm: LoadedMatrix, stack: Assignment, pins: dict[str, Pin], rows: Chosen) -> list[str]:
    """What to know about a valid stack (`rows`: the matrix rows of its values, as `solve` chose them): the x86_64
    torch index, `severity: hint` rules, pre-releases, missing NNAL, contested chips, uncaptured firmware Versions
    and inferred matrix rows."""
    out: list[str] = []
    t = rows.torch_npu
    if stack["arch"] == "x86_64" and t.x86_64_torch_local:
        url = lm.index_url("pytorch-cpu")
        out.append(
            f"x86_64 needs torch {stack['torch']}+{t.x86_64_torch_local} from the PyTorch CPU index ({url}): "
            f"torch_npu {t.version} pins torch=={stack['torch']}+{t.x86_64_torch_local} on x86_64"
        )
    for rule in lm.model.rules:
        if rule.severity == "hint":
            rc = RuleConstraint(rule, lm)
            a = dict(stack)
            if rc.applies(a):
                out.append(f"{rc.message(a)} [{rule.id}]")
    c = rows.cann
    if c.prerelease:
        out.append(f"CANN {c.version} is a pre-release")
    if t.prerelease:
        out.append(f"torch_npu {t.version} is a pre-release: resolve never picks one unless it is pinned")
    va = rows.vllm_ascend
    if va is not None and va.sdist_only:
        out.append(
            f"vllm-ascend {va.version} is on PyPI as an sdist only: pip builds it from source (with CANN's set_env.sh "
            "sourced), and `envkit lock`, which takes wheels only, cannot close it; resolve never picks one unless it is pinned"
        )
    if t.cann is None and t.line is not None:
        out.append(
            f"torch_npu {t.version} has no CANN pairing of its own: it is judged by TorchNPU {t.line}'s CANN range (inferred)"
        )
    out.extend(_patch_hints(lm, stack, pins, rows.firmware))
    out.extend(_served_hints(lm, stack, rows))
    if not c.nnal:
        out.append(f"no NNAL release is recorded for CANN {c.version}: the lock lists none")
    chip = rows.chip
    if chip.hint:
        out.append(f"chip {chip.id} ({chip.name}): {chip.hint}")
    fw = rows.firmware
    if not fw.firmware_version:
        out.append(
            f"the firmware Version of HDK {fw.version} is not captured in the matrix: the lock names its installer "
            "by pattern (it is found inside the HDK package)"
        )
    inferred = []
    for name, row in (("cann", c), ("driver", rows.driver), ("torch_npu", t)):
        if row.confidence == "inferred":
            inferred.append(f"{name} {stack[name]}")
    if inferred:
        out.append("this stack relies on inferred matrix rows: " + ", ".join(inferred) + " (see `envkit matrix show`)")
    return out

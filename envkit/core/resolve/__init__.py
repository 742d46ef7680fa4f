"""The resolver: validate a proposed stack, complete a partial one, explain every conflict.

Pure: (pins, matrix) -> solution or conflicts. No I/O.

How it decides
- Domains: chip/arch/os/python/HDK/CANN/torch_npu/torch are enumerated in the matrix; numpy,
  Transformers and Accelerate are judged by rules, and resolve picks from short recommended lists.
- Preference: vendor-validated first, then newest. The search runs in passes: first only the
  vendor's pairings (torch_npu with the CANN of its table, CANN with its mapped HDK, driver with
  the firmware of the same release), then loosening one edge at a time, then everything the
  matrix calls compatible. Within a pass values are tried in preference order (the embedded
  default chip/arch/os first, then newest), so the first solution is the best; it is
  deterministic.
- Search: depth-first with forward checking over the constraints of `envkit.core.constraints`.
- Explanation: a minimal set of conflicting pins (deletion filter), then arc-consistency
  propagation from those pins that records why each domain shrank; the chain of facts runs from
  the pins to the emptied key. Suggestions re-resolve with one pin dropped.

Modules: `pins` (Pin, checking and spelling what was asked), `search` (domains, the passes, `solve`),
`explain` (conflict chains), `hints` (hints on a valid stack, suggestions of the nearest valid ones).
This package re-exports what other modules use and validates a stack end to end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.core.matrix import LoadedMatrix, load_matrix
from envkit.core.resolve.hints import hints_for
from envkit.core.resolve.pins import Pin, PinOrigin, pins_from_mapping
from envkit.core.resolve.search import _CONSTRAINT_CACHE, WORKLOADS, Chosen, Resolution, framework_keys, solve

if TYPE_CHECKING:
    from envkit.core.report_records import ValidationReport as ValidReport
    from envkit.models.report import ValidationReport

# What other modules and tests import from `envkit.core.resolve` (`_CONSTRAINT_CACHE`: the determinism test clears it).
__all__ = [
    "_CONSTRAINT_CACHE",
    "Chosen",
    "Pin",
    "Resolution",
    "WORKLOADS",
    "framework_keys",
    "hints_for",
    "pins_from_mapping",
    "solve",
    "valid_report",
    "valid_resolution",
    "validate_pins",
    "validate_stack",
]


def valid_resolution(lm: LoadedMatrix, pins: dict[str, Pin], workload: str | None = None) -> Resolution | None:
    """The best full stack of pins that make a valid one (no pin with a problem of its own, and a solution), or None
    (`validate_pins` then explains why). No pydantic: the start-up path of `envkit validate`."""
    from envkit.core.resolve.explain import pin_checks

    if pin_checks(lm, pins):
        return None
    return solve(lm, pins, framework_keys(pins, workload))


def valid_report(lm: LoadedMatrix, pins: dict[str, Pin], res: Resolution) -> ValidReport:
    """The report of a valid stack (`res`: its `valid_resolution`) as a plain record (`envkit.core.report_records`)."""
    from envkit.core.report_records import ValidationReport as ValidReport

    given = {k: p.given for k, p in pins.items()}
    return ValidReport(valid=True, input=given, stack=res.stack, hints=hints_for(lm, res.stack, pins, res.rows))


def validate_pins(lm: LoadedMatrix, pins: dict[str, Pin], workload: str | None = None) -> ValidationReport:
    """Valid with the resolved stack and its hints, or invalid with every conflict and the nearest valid stacks.
    `workload` (serving, training-mindspeed) brings its optional keys into play. The report models and the
    explanation load here: a resolve that succeeds needs neither."""
    from envkit.core.resolve.explain import explain
    from envkit.core.resolve.hints import suggest
    from envkit.lock.text import plain
    from envkit.models.report import ValidationReport

    res = valid_resolution(lm, pins, workload)
    if res is not None:
        return ValidationReport.model_validate(plain(valid_report(lm, pins, res)))
    given = {k: p.given for k, p in pins.items()}
    extra = framework_keys(pins, workload)
    conflicts = explain(lm, pins, extra=extra)
    return ValidationReport(valid=False, input=given, conflicts=conflicts, suggestions=suggest(lm, pins, conflicts, extra=extra))


def validate_stack(
    stack: dict[str, str],
    *,
    matrix: LoadedMatrix | None = None,
    origin: PinOrigin = "declared",
    where: dict[str, str] | None = None,
) -> ValidationReport:
    """Validate a (partial) stack given as a mapping. Unknown versions raise BadInput (exit 2)."""
    lm = matrix or load_matrix()
    return validate_pins(lm, pins_from_mapping(lm, stack, where=where, origin=origin))

"""Explanations: why pins conflict, as a chain of facts from the pins to the emptied key.

A minimal set of conflicting pins (deletion filter), then arc-consistency propagation from those
pins that records why each domain shrank. Pure: no I/O.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from envkit import versions
from envkit.core.constraints import Constraint, RuleConstraint
from envkit.core.matrix import LoadedMatrix
from envkit.core.resolve.pins import CHANGE_COST, Pin
from envkit.core.resolve.search import (
    SEARCH_ORDER,
    framework_keys,
    in_play,
    initial_domains,
    pass_constraints,
    satisfiable,
    supported,
)
from envkit.verdict import Verdict

if TYPE_CHECKING:
    from envkit.models.report import Conflict, Fact

# The report models (pydantic) load where a conflict is built, not with this module: `pin_checks` of a stack that
# has none, `envkit validate`'s fast path, builds nothing.


def _minimal_core(lm: LoadedMatrix, pins: dict[str, Pin], extra: tuple[str, ...] = ()) -> dict[str, Pin]:
    core = dict(pins)
    for key in sorted(pins, key=lambda k: -CHANGE_COST[k]):
        trial = {k: v for k, v in core.items() if k != key}
        if not satisfiable(lm, trial, extra):
            core = trial
    return core


def _fact_of_pin(pin: Pin) -> Fact:
    from envkit.models.report import Fact

    shown = pin.given if pin.given == pin.value else f"{pin.given} (= {pin.value})"
    verb = "you pinned" if pin.origin == "declared" else "observed"
    return Fact(fact=f"{verb} {pin.key} = {shown}", rule="input", source=pin.where or "input", kind=pin.origin)


def _stmt_fact(s: Verdict) -> Fact:
    from envkit.models.report import Fact

    return Fact(fact=s.message, rule=s.rule, source=s.source, kind="derived", confidence=s.confidence)


def _fmt_values(values: list[str], limit: int = 6) -> str:
    if len(values) <= limit:
        return "{" + ", ".join(values) + "}"
    return "{" + ", ".join(values[:limit]) + f", … {len(values)} in all" + "}"


def _explain_core(lm: LoadedMatrix, core: dict[str, Pin], extra: tuple[str, ...] = ()) -> Conflict:
    from envkit.models.report import Conflict, Fact

    base = initial_domains(lm, {}, False, extra)
    constraints = in_play(pass_constraints(lm), base)
    # the free domains, after pruning that holds regardless of the pins
    dom = {k: list(v) for k, v in base.items()}
    for k, pin in core.items():
        dom[k] = [pin.value]
    reasons: dict[str, list[tuple[Constraint, str, list[str]]]] = {k: [] for k in base}
    wipe: tuple[Constraint, str] | None = None
    changed = True
    rounds = 0
    while changed and wipe is None and rounds < 50:
        changed = False
        rounds += 1
        for c in constraints:
            for target in c.scope:
                others = [k for k in c.scope if k != target]
                # only propagate from keys narrowed by the pins (a one-key rule applies to its pinned key)
                if others and not any(k in core or reasons[k] for k in others):
                    continue
                if not others and target not in core:
                    continue
                kept = supported(c, target, others, dom)
                if len(kept) != len(dom[target]):
                    source_key = next((k for k in others if k in core or reasons[k]), others[0] if others else target)
                    reasons[target].append((c, source_key, kept))
                    dom[target] = kept
                    changed = True
                    if not kept:
                        wipe = (c, target)
                        break
            if wipe:
                break
    pins_list = sorted(core, key=lambda k: SEARCH_ORDER.index(k))
    chain: list[Fact] = []
    done: set[str] = set()

    def visit(key: str) -> None:
        if key in done:
            return
        done.add(key)
        if key in core:
            chain.append(_fact_of_pin(core[key]))
            return
        for c, src, kept in reasons[key]:
            visit(src)
            for v in dom_at(src)[:3]:
                stmt = c.says(src, v)
                if stmt is not None:
                    chain.append(_stmt_fact(stmt))
            if kept:
                chain.append(
                    Fact(fact=f"so {key} must be one of {_fmt_values(kept)}", rule=c.id, source="derived", kind="derived")
                )

    def dom_at(key: str) -> list[str]:
        return dom[key] if dom[key] else base[key]

    if wipe is not None:
        c, target = wipe
        others = [k for k in c.scope if k != target]
        for k in others:
            visit(k)
        # a pinned target is told as a pin; a free one with what narrowed it before this rule emptied it
        visit(target)
        if target in core:
            both = c.explain_both_sides
            for k in [target, *[o for o in others if o in core and both]]:
                stmt = c.says(k, core[k].value)
                if stmt is not None:
                    chain.append(_stmt_fact(stmt))
        else:
            for k in others:
                for v in dom[k][:3]:
                    stmt = c.says(k, v)
                    if stmt is not None:
                        chain.append(_stmt_fact(stmt))
        if target in core and not others:
            end = f"contradiction: {target} {core[target].value} is refused by this rule"
        elif target in core:
            end = f"contradiction: {target} {core[target].value} is excluded by the {', '.join(others)} above"
        else:
            end = f"contradiction: no {target} is left that fits the {', '.join(others)} above"
        chain.append(Fact(fact=end, rule=c.id, source="derived", kind="derived"))
        summary = _summary(core, c, target, dom)
    else:
        for k in pins_list:
            visit(k)
        chain.append(
            Fact(
                fact="no full stack satisfies these pins together (exhaustive search over the matrix)",
                rule="search",
                source="derived",
                kind="derived",
            )
        )
        summary = " + ".join(f"{k} {core[k].value}" for k in pins_list) + " cannot be completed into a valid stack"
    # de-duplicate while keeping order
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in chain:
        if (f.fact, f.rule) not in seen:
            seen.add((f.fact, f.rule))
            unique.append(f)
    return Conflict(summary=summary, pins=pins_list, chain=unique)


def _summary(core: dict[str, Pin], c: Constraint, target: str, dom: dict[str, list[str]]) -> str:
    pins = " + ".join(f"{k} {p.value}" for k, p in sorted(core.items(), key=lambda kv: SEARCH_ORDER.index(kv[0])))
    if all(len(dom[k]) == 1 or k in core for k in c.scope if k != target) and target in core:
        a = {k: (core[k].value if k in core else dom[k][0]) for k in c.scope}
        text = c.summary(a)
        if text:
            return f"{pins}: {text}"
    if isinstance(c, RuleConstraint):
        return f"{pins}: {c.rule.message.format_map(_Fmt({k: p.value for k, p in core.items()}))}"
    names = {  # other keys are named as they are spelled
        "cann": "CANN release",
        "driver": "HDK release",
        "torch_npu": "torch_npu release",
        "python": "Python",
        "os": "operating system",
    }
    them = "it" if len(core) == 1 else "all of them"
    if target not in core:
        return f"{pins}: no {names.get(target, target)} works with {them}"
    free = [k for k in c.scope if k != target and k not in core]
    if free and c.summary_with_free:
        a = {k: (core[k].value if k in core else (dom[k][0] if dom[k] else "")) for k in c.scope}
        text = c.summary(a)
        if text:
            return f"{pins}: {text}"
    if free:
        return f"{pins}: no {names.get(free[0], free[0])} works with {them}"
    return f"{pins}: no {target} fits ({c.id.replace('-', ' ↔ ')})"


class _Fmt(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _one_pin(pin: Pin, summary: str, fact: Fact) -> Conflict:
    from envkit.models.report import Conflict

    return Conflict(summary=summary, pins=[pin.key], chain=[_fact_of_pin(pin), fact])


def pin_checks(lm: LoadedMatrix, pins: dict[str, Pin]) -> list[Conflict]:
    """Conflicts that a single pin carries by itself, beyond the version tables."""
    out = []
    torch = pins.get("torch")
    if torch and torch.local and (torch.local.startswith("cu") or torch.local.startswith("rocm")):
        from envkit.models.report import Fact

        out.append(
            _one_pin(
                torch,
                f"torch {torch.given} is a CUDA/ROCm build: torch_npu refuses it",
                Fact(
                    fact="torch_npu with a CUDA build of torch fails at import: 'RuntimeError: Two accelerators cannot be "
                    "used at the same time in PyTorch: npu and cuda.' Use the +cpu build (x86_64) or the plain aarch64 wheel",
                    rule="torch_npu/cuda-torch",
                    source="torch_npu/__init__.py@v2.6.0-7.3.0 (ERR00007)",
                    kind="derived",
                    confidence="stated",
                ),
            )
        )
    patch = _patch_firmware(lm, pins)
    if patch is not None:
        out.append(patch)
    pin = pins.get("torch_npu")
    t = lm.torch_npu_row(pin.value) if pin else None
    if pin and t and t.line is None:
        out.append(
            _one_pin(
                pin,
                f"torch_npu {pin.value} has no published CANN pairing, so no stack with it can be validated",
                _stmt_fact(
                    Verdict(
                        message=f"torch_npu {pin.value} is on PyPI, but no source read maps it to a CANN release",
                        rule=f"torch_npu/{pin.value}",
                        source=t.source_text,
                        confidence=t.confidence,
                    )
                ),
            )
        )
    return out


def _patch_firmware(lm: LoadedMatrix, pins: dict[str, Pin]) -> Conflict | None:
    """A driver patch (24.1.rc2.2) whose own compatible_version_fw excludes the pinned firmware's Version."""
    drv, fw = pins.get("driver"), pins.get("firmware")
    patch = lm.hdk_patch(drv.given) if drv else None
    if drv is None or fw is None or patch is None or not patch.compatible_firmware:
        return None
    row = lm.hdk(fw.given)
    fw_version = row.firmware_version if row is not None else fw.given  # an HDK release, or the firmware's Version=
    if not fw_version or versions.in_any_range(fw_version, versions.parse_ranges(patch.compatible_firmware)):
        return None
    from envkit.models.report import Conflict

    return Conflict(
        summary=f"driver {drv.given} (a patch of HDK {drv.value}) allows firmware {patch.compatible_firmware}, "
        f"not {fw_version}: 'driver and firmware packages do not match'",
        pins=["driver", "firmware"],
        chain=[
            _fact_of_pin(drv),
            _fact_of_pin(fw),
            _stmt_fact(
                Verdict(
                    message=f"the driver patch {patch.version} declares compatible_version_fw={patch.compatible_firmware}",
                    rule=f"hdk/{drv.value}/patch/{patch.version}",
                    source=patch.source_text,
                    confidence=patch.confidence,
                )
            ),
        ],
    )


def explain(lm: LoadedMatrix, pins: dict[str, Pin], limit: int = 6, extra: tuple[str, ...] | None = None) -> list[Conflict]:
    """Every conflict among the pins: single-pin problems, then minimal conflicting sets. `extra`: the optional
    keys in play (default: those the pins imply)."""
    extra = framework_keys(pins) if extra is None else extra
    conflicts = pin_checks(lm, pins)
    blocked = {k for c in conflicts for k in c.pins}
    rest = {k: v for k, v in pins.items() if k not in blocked}
    # pairs first: they give the most readable chains. A single or a pair conflicts only if no release a user could
    # pin keeps it: a pinned vllm-ascend release with a Transformers outside its range is explained by that release's
    # range, not by the releases resolve would not pick by itself (pre-releases, sdists)
    found_cores: list[dict[str, Pin]] = []
    for k in rest:
        if not satisfiable(lm, {k: rest[k]}, extra, pinnable=True):
            found_cores.append({k: rest[k]})
    singles = {next(iter(c)) for c in found_cores}
    keys = [k for k in rest if k not in singles]
    for a, b in itertools.combinations(keys, 2):
        pair = {a: rest[a], b: rest[b]}
        if not satisfiable(lm, pair, extra, pinnable=True):
            found_cores.append(pair)
    if not found_cores and not satisfiable(lm, rest, extra):
        found_cores.append(_minimal_core(lm, rest, extra))
    for core in found_cores[:limit]:
        conflicts.append(_explain_core(lm, core, extra))
    return conflicts

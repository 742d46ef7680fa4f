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
- Search: depth-first with forward checking over the constraints of `envkit.constraints`.
- Explanation: a minimal set of conflicting pins (deletion filter), then arc-consistency
  propagation from those pins that records why each domain shrank; the chain of facts runs from
  the pins to the emptied key. Suggestions re-resolve with one pin dropped.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field

from envkit import versions
from envkit.constraints import Assignment, Constraint, RuleConstraint, Statement, build_constraints
from envkit.errors import BadInput, CannotRun, Where
from envkit.matrix import LoadedMatrix, load_matrix
from envkit.models.report import Conflict, Fact, Suggestion, ValidationReport
from envkit.models.stack import STACK_KEYS

SEARCH_ORDER: tuple[str, ...] = (
    "chip",
    "arch",
    "os",
    "torch_npu",
    "torch",
    "cann",
    "driver",
    "firmware",
    "python",
    "numpy",
    "transformers",
    "accelerate",
)
# Which pin to give up first when suggesting a change (hardware last).
CHANGE_COST: dict[str, int] = {
    "accelerate": 0,
    "transformers": 1,
    "numpy": 2,
    "python": 3,
    "torch": 4,
    "torch_npu": 5,
    "cann": 6,
    "firmware": 7,
    "driver": 8,
    "os": 9,
    "arch": 10,
    "chip": 11,
}
NODE_BUDGET = 200_000
PASSES: tuple[tuple[bool, bool], ...] = ((True, True), (True, False), (False, True), (False, False))


# --- pins ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pin:
    key: str
    value: str  # canonical spelling in the matrix
    given: str  # what the user wrote
    where: str  # "stack.yaml:3", "--torch", "observed: /usr/local/Ascend/driver/version.info"
    origin: str = "declared"  # declared | observed
    local: str | None = None  # torch local label (+cpu / +cu124)


@dataclass
class Problem:
    pins: dict[str, Pin]
    lm: LoadedMatrix
    domains: dict[str, list[str]] = field(default_factory=dict)


def _nearest(value: str, known: list[str], n: int = 5) -> list[str]:
    try:
        target = versions.parse(value)
    except versions.InvalidVersion:
        return difflib.get_close_matches(value, known, n=n, cutoff=0.3) or known[:n]
    ranked = sorted(known, key=lambda k: (_distance(target, k), versions.sort_key(k) if versions.is_valid(k) else ()))
    return versions.newest_first(ranked[:n]) if all(versions.is_valid(k) for k in ranked[:n]) else ranked[:n]


def _distance(target: versions.Version, other: str) -> tuple:
    try:
        o = versions.parse(other)
    except versions.InvalidVersion:
        return (99,)
    rel = list(itertools.zip_longest(target.release, o.release, fillvalue=0))
    return tuple(abs(a - b) for a, b in rel[:4])


def _unknown(key: str, value: str, known: list[str], where: str, what: str) -> BadInput:
    near = _nearest(value, known)
    return BadInput(
        f"unknown {what} {value!r} for '{key}'",
        where=_where(where, key),
        hint=f"Known {what}s nearest to it: {', '.join(near)}. `envkit matrix show {key}` lists them all.",
        details={"key": key, "value": value, "nearest": near},
    )


def _where(where: str, key: str) -> Where:
    if ":" in where and not where.startswith("--") and not where.startswith("observed"):
        file, _, line = where.rpartition(":")
        if line.isdigit():
            return Where(file, int(line), key)
    return Where(where if where else None, None, key)


def canonical_pin(lm: LoadedMatrix, key: str, given: str, where: str = "", origin: str = "declared") -> Pin:
    """Check that a pinned value exists (or is at least a version) and return its canonical spelling."""
    m = lm.model
    value = str(given).strip()
    if key not in STACK_KEYS:
        raise BadInput(f"unknown key {key!r}", where=_where(where, key))
    if key == "chip":
        ids = [c.id for c in m.chips]
        low = value.lower()
        if low in ids:
            return Pin(key, low, given, where, origin)
        aliases = {n.lower(): c.id for c in m.chips for n in c.npu_smi_names}
        aliases.update({"atlas-a2": "910b", "a2": "910b", "910c": "a3", "910_93": "a3", "910a": "910", "910b1": "910b"})
        if low in aliases:
            return Pin(key, aliases[low], given, where, origin)
        raise BadInput(
            f"unknown chip {value!r}",
            where=_where(where, key),
            hint=f"Chips: {', '.join(ids)} (910b = Atlas A2, a3 = Atlas A3, 310p = Atlas 300I Duo).",
            details={"key": key, "value": value, "known": ids},
        )
    if key == "arch":
        norm = {"aarch64": "aarch64", "arm64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64", "x86-64": "x86_64"}
        if value.lower() in norm:
            return Pin(key, norm[value.lower()], given, where, origin)
        raise _unknown(key, value, [a.id for a in m.arches], where, "arch")
    if key == "os":
        low = value.lower().replace(" ", "").replace("-", "")
        if low in lm.oses:
            return Pin(key, low, given, where, origin)
        raise _unknown(key, value, list(lm.oses), where, "operating system")
    try:
        parsed = versions.parse(value)
    except versions.InvalidVersion:
        raise BadInput(
            f"{value!r} is not a version (key '{key}')", where=_where(where, key), hint="Write an exact version, e.g. 8.5.0."
        ) from None
    if key == "python":
        short = ".".join(str(n) for n in parsed.release[:2])
        for p in m.pythons:
            if versions.same(p.version, short):
                return Pin(key, p.version, given, where, origin)
        raise _unknown(key, value, [p.version for p in m.pythons], where, "Python version")
    releases = {
        "driver": (lm.hdk, lambda: [x.version for x in m.hdk], "HDK (driver) release"),
        "firmware": (
            lm.firmware,
            lambda: [x.version for x in m.hdk] + [x.firmware_version for x in m.hdk if x.firmware_version],
            "firmware (HDK release or firmware Version)",
        ),
        "cann": (lm.cann, lambda: [x.version for x in m.cann], "CANN release"),
        "torch_npu": (lm.torch_npu, lambda: [x.version for x in m.torch_npu], "torch_npu release"),
    }
    if key in releases:
        lookup, known, what = releases[key]
        row = lookup(value)
        if row is None:
            raise _unknown(key, value, known(), where, what)
        return Pin(key, row.version, given, where, origin)
    if key == "torch":
        known = _torch_versions(lm, mapped_only=False)
        for k in known:
            if versions.parse(k).key == parsed.key:
                return Pin(key, k, given, where, origin, local=parsed.local)
        raise _unknown(key, value, known, where, "torch version (one that a torch_npu release pins)")
    # numpy / transformers / accelerate: any release is accepted, judged by ranges
    return Pin(key, value, given, where, origin)


def _torch_versions(lm: LoadedMatrix, *, mapped_only: bool) -> list[str]:
    seen: dict[tuple, str] = {}
    for t in lm.model.torch_npu:
        if mapped_only and t.cann is None:
            continue
        seen.setdefault(versions.parse(t.torch).key, t.torch)
    return versions.newest_first(list(seen.values()))


def _domains(lm: LoadedMatrix, pins: dict[str, Pin], strict_cann: bool) -> dict[str, list[str]]:
    m = lm.model
    d = m.defaults

    def prefer(default: str | None, values: list[str]) -> list[str]:
        return ([default] if default in values else []) + [v for v in values if v != default]

    dom: dict[str, list[str]] = {
        "chip": prefer(d.get("chip"), [c.id for c in m.chips]),
        "arch": prefer(d.get("arch"), [a.id for a in m.arches]),
        "os": prefer(d.get("os"), [o.id for o in m.operating_systems]),
        "python": versions.newest_first([p.version for p in m.pythons]),
        "driver": versions.newest_first([h.version for h in m.hdk]),
        "firmware": versions.newest_first([h.version for h in m.hdk]),
        "cann": versions.newest_first([c.version for c in m.cann if not c.prerelease]),
        "torch_npu": [
            t.version for t in m.torch_npu if t.cann is not None and (t.validated or not strict_cann)
        ],
        "torch": _torch_versions(lm, mapped_only=True),
        "numpy": lm.package("numpy"),
        "transformers": lm.package("transformers"),
        "accelerate": lm.package("accelerate"),
    }
    # in a pass, a pinned value is the whole domain (even one outside the preferred lists)
    for key, pin in pins.items():
        dom[key] = [pin.value]
    return dom


# --- search ----------------------------------------------------------------------------------
class _Solver:
    def __init__(
        self, constraints: list[Constraint], domains: dict[str, list[str]], lm: LoadedMatrix | None = None
    ):
        self.constraints = constraints
        self.domains = domains
        self.lm = lm
        self.nodes = 0
        self.by_key: dict[str, list[Constraint]] = {k: [] for k in STACK_KEYS}
        for c in constraints:
            for k in c.scope:
                self.by_key[k].append(c)

    def solve(self, start: list[str] | None = None) -> Assignment | None:
        dom = {k: list(v) for k, v in self.domains.items()}
        pruned = propagate(self.by_key, dom, list(start or []))
        if pruned is None:
            return None
        return self._dfs({}, pruned, 0)

    def _dfs(self, a: Assignment, dom: dict[str, list[str]], depth: int) -> Assignment | None:
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise CannotRun(
                "the resolver exceeded its search budget",
                hint="This is a bug in envkit's matrix or resolver: report the stack that caused it.",
            )
        if depth == len(SEARCH_ORDER):
            return dict(a)
        key = SEARCH_ORDER[depth]
        values = dom[key]
        if key == "python" and self.lm is not None and "os" in a:
            # prefer the python3 the OS ships (no Python to build), then newest
            system = self.lm.oses[a["os"]].system_python
            if system in values:
                values = [system] + [v for v in values if v != system]
        for value in values:
            a[key] = value
            if self._consistent(key, a):
                pruned = self._forward(key, a, dom)
                if pruned is not None:
                    found = self._dfs(a, pruned, depth + 1)
                    if found is not None:
                        return found
            del a[key]
        return None

    def _consistent(self, key: str, a: Assignment) -> bool:
        for c in self.by_key[key]:
            if all(k in a for k in c.scope) and not c.check(a):
                return False
        return True

    def _forward(self, key: str, a: Assignment, dom: dict[str, list[str]]) -> dict[str, list[str]] | None:
        new = dom
        copied = False
        for c in self.by_key[key]:
            free = [k for k in c.scope if k not in a]
            if len(free) != 1:
                continue
            f = free[0]
            kept = []
            trial = dict(a)
            for v in new[f]:
                trial[f] = v
                if c.check(trial):
                    kept.append(v)
            if len(kept) != len(new[f]):
                if not kept:
                    return None
                if not copied:
                    new = dict(new)
                    copied = True
                new[f] = kept
        return new


def supported(c: Constraint, target: str, others: list[str], dom: dict[str, list[str]]) -> list[str]:
    """The values of `target` that some combination of the other keys' values allows under `c`."""
    kept = []
    for v in dom[target]:
        for combo in itertools.product(*(dom[k] for k in others)):
            a = dict(zip(others, combo))
            a[target] = v
            if c.check(a):
                kept.append(v)
                break
    return kept


def propagate(
    by_key: dict[str, list[Constraint]], dom: dict[str, list[str]], start: list[str]
) -> dict[str, list[str]] | None:
    """Arc consistency from the keys in `start`: drop values with no support. None on a wipe-out."""
    dom = dict(dom)
    # unary constraints (a rule about one key) first
    for key in by_key:
        for c in by_key[key]:
            if c.scope == (key,):
                kept = [v for v in dom[key] if c.check({key: v})]
                if not kept:
                    return None
                if len(kept) != len(dom[key]):
                    dom[key] = kept
                    if key not in start:
                        start = [*start, key]
    queue = list(start)
    queued = set(queue)
    while queue:
        key = queue.pop(0)
        queued.discard(key)
        for c in by_key[key]:
            for target in c.scope:
                if target == key:
                    continue
                others = [k for k in c.scope if k != target]
                kept = supported(c, target, others, dom)
                if len(kept) != len(dom[target]):
                    if not kept:
                        return None
                    dom[target] = kept
                    if target not in queued:
                        queue.append(target)
                        queued.add(target)
    return dom


@dataclass
class Resolution:
    stack: Assignment
    validated_cann: bool
    validated_hdk: bool
    pins: dict[str, Pin]


def solve(lm: LoadedMatrix, pins: dict[str, Pin]) -> Resolution | None:
    """The best full stack that keeps every pin, or None."""
    for strict_cann, strict_hdk in PASSES:
        constraints = _constraints(lm, strict_cann, strict_hdk)
        found = _Solver(constraints, _domains(lm, pins, strict_cann), lm).solve(list(pins))
        if found is not None:
            return Resolution(found, strict_cann, strict_hdk, pins)
    return None


# --- explanation -----------------------------------------------------------------------------
_CONSTRAINT_CACHE: dict[tuple[int, bool, bool], list[Constraint]] = {}


def _constraints(lm: LoadedMatrix, strict_cann: bool = False, strict_hdk: bool = False) -> list[Constraint]:
    key = (id(lm), strict_cann, strict_hdk)
    if key not in _CONSTRAINT_CACHE:
        _CONSTRAINT_CACHE[key] = build_constraints(lm, strict_cann=strict_cann, strict_hdk=strict_hdk)
    return _CONSTRAINT_CACHE[key]


def _sat(lm: LoadedMatrix, pins: dict[str, Pin]) -> bool:
    return _Solver(_constraints(lm), _domains(lm, pins, False)).solve(list(pins)) is not None


def _minimal_core(lm: LoadedMatrix, pins: dict[str, Pin]) -> dict[str, Pin]:
    core = dict(pins)
    for key in sorted(pins, key=lambda k: -CHANGE_COST[k]):
        trial = {k: v for k, v in core.items() if k != key}
        if not _sat(lm, trial):
            core = trial
    return core


def _fact_of_pin(pin: Pin) -> Fact:
    shown = pin.given if pin.given == pin.value else f"{pin.given} (= {pin.value})"
    verb = "you pinned" if pin.origin == "declared" else "observed"
    return Fact(fact=f"{verb} {pin.key} = {shown}", rule="input", source=pin.where or "input", kind=pin.origin)


def _stmt_fact(s: Statement) -> Fact:
    return Fact(fact=s.text, rule=s.rule, source=s.source, kind="derived", confidence=s.confidence)  # type: ignore[arg-type]


def _fmt_values(values: list[str], limit: int = 6) -> str:
    if len(values) <= limit:
        return "{" + ", ".join(values) + "}"
    return "{" + ", ".join(values[:limit]) + f", … {len(values)} in all" + "}"


def _explain_core(lm: LoadedMatrix, core: dict[str, Pin]) -> Conflict:
    constraints = _constraints(lm)
    base = _domains(lm, {}, False)
    # the free domains, after pruning that holds regardless of the pins
    dom = {k: list(v) for k, v in base.items()}
    for k, pin in core.items():
        dom[k] = [pin.value]
    reasons: dict[str, list[tuple[Constraint, str, list[str]]]] = {k: [] for k in STACK_KEYS}
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
        if target in core:
            visit(target)
            both = getattr(c, "explain_both_sides", False)
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
    names = {"cann": "CANN release", "driver": "HDK release", "firmware": "firmware", "torch_npu": "torch_npu release",
             "python": "Python", "torch": "torch", "os": "operating system", "arch": "arch", "chip": "chip"}
    them = "it" if len(core) == 1 else "all of them"
    if target not in core:
        return f"{pins}: no {names.get(target, target)} works with {them}"
    free = [k for k in c.scope if k != target and k not in core]
    if free and getattr(c, "summary_with_free", False):
        a = {k: (core[k].value if k in core else (dom[k][0] if dom[k] else "")) for k in c.scope}
        text = c.summary(a)
        if text:
            return f"{pins}: {text}"
    if free:
        return f"{pins}: no {names.get(free[0], free[0])} works with {them}"
    return f"{pins}: no {target} fits ({c.id.replace('-', ' ↔ ')})"


class _Fmt(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _pin_checks(lm: LoadedMatrix, pins: dict[str, Pin]) -> list[Conflict]:
    """Conflicts that a single pin carries by itself, beyond the version tables."""
    out = []
    torch = pins.get("torch")
    if torch and torch.local and (torch.local.startswith("cu") or torch.local.startswith("rocm")):
        out.append(
            Conflict(
                summary=f"torch {torch.given} is a CUDA/ROCm build: torch_npu refuses it",
                pins=["torch"],
                chain=[
                    _fact_of_pin(torch),
                    Fact(
                        fact="torch_npu with a CUDA build of torch fails at import: 'RuntimeError: Two accelerators cannot be "
                        "used at the same time in PyTorch: npu and cuda.' Use the +cpu build (x86_64) or the plain aarch64 wheel",
                        rule="torch_npu/cuda-torch",
                        source="torch_npu/__init__.py@v2.6.0-7.3.0 (ERR00007)",
                        kind="derived",
                        confidence="stated",
                    ),
                ],
            )
        )
    pin = pins.get("torch_npu")
    t = lm.torch_npu(pin.value) if pin else None
    if pin and t.cann is None:
        out.append(
            Conflict(
                summary=f"torch_npu {pin.value} has no published CANN pairing, so no stack with it can be validated",
                pins=["torch_npu"],
                chain=[
                    _fact_of_pin(pin),
                    Fact(fact=f"torch_npu {pin.value} is on PyPI, but no source read maps it to a CANN release",
                         rule=f"torch_npu/{pin.value}", source=t.source_text, kind="derived", confidence=t.confidence),
                ],
            )
        )
    return out


def explain(lm: LoadedMatrix, pins: dict[str, Pin], limit: int = 6) -> list[Conflict]:
    """Every conflict among the pins: single-pin problems, then minimal conflicting sets."""
    conflicts = _pin_checks(lm, pins)
    blocked = {k for c in conflicts for k in c.pins}
    rest = {k: v for k, v in pins.items() if k not in blocked}
    # pairs first: they give the most readable chains
    found_cores: list[dict[str, Pin]] = []
    for k in rest:
        if not _sat(lm, {k: rest[k]}):
            found_cores.append({k: rest[k]})
    singles = {next(iter(c)) for c in found_cores}
    keys = [k for k in rest if k not in singles]
    for a, b in itertools.combinations(keys, 2):
        pair = {a: rest[a], b: rest[b]}
        if not _sat(lm, pair):
            found_cores.append(pair)
    if not found_cores and not _sat(lm, rest):
        found_cores.append(_minimal_core(lm, rest))
    for core in found_cores[:limit]:
        conflicts.append(_explain_core(lm, core))
    return conflicts


def suggest(lm: LoadedMatrix, pins: dict[str, Pin], conflicts: list[Conflict], limit: int = 3) -> list[Suggestion]:
    """Nearest valid stacks: drop one pin (the cheapest to change first) and re-resolve."""
    involved = sorted({k for c in conflicts for k in c.pins}, key=lambda k: CHANGE_COST[k])
    out: list[Suggestion] = []
    tried: list[tuple[str, ...]] = [(k,) for k in involved]
    if len(involved) > 1:
        tried += [tuple(p) for p in itertools.combinations(involved, 2)]
    for drop in tried:
        if len(out) >= limit:
            break
        if len(drop) == 2 and out:
            break
        keep = {k: v for k, v in pins.items() if k not in drop}
        res = solve(lm, keep)
        if res is None:
            continue
        change = {k: {"from": pins[k].given, "to": res.stack[k]} for k in drop}
        out.append(
            Suggestion(change=change, stack=res.stack, validated=res.validated_cann and res.validated_hdk)
        )
    return out


# --- hints -----------------------------------------------------------------------------------
def hints_for(lm: LoadedMatrix, stack: Assignment, pins: dict[str, Pin]) -> list[str]:
    out: list[str] = []
    t = lm.torch_npu(stack["torch_npu"])
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
    c = lm.cann(stack["cann"])
    if c.prerelease:
        out.append(f"CANN {c.version} is a pre-release")
    if not c.nnal:
        out.append(f"no NNAL release is recorded for CANN {c.version}: the lock lists none")
    chip = lm.chips[stack["chip"]]
    if stack["chip"] in ("310p", "310b"):
        out.append(
            f"chip {chip.id} ({chip.name}): official torch_npu support is contradictory (COMPATIBILITY.en.md lists it, "
            "the TorchNPU 26.1 install guide does not)"
        )
    fw = lm.hdk(stack["firmware"])
    if not fw.firmware_version:
        out.append(
            f"the firmware Version of HDK {fw.version} is not captured in the matrix: the lock names its installer "
            "by pattern (it is found inside the HDK package)"
        )
    inferred = []
    h = lm.hdk(stack["driver"])
    for name, row in (("cann", c), ("driver", h), ("torch_npu", t)):
        if row.confidence == "inferred":
            inferred.append(f"{name} {stack[name]}")
    if inferred:
        out.append("this stack relies on inferred matrix rows: " + ", ".join(inferred) + " (see `envkit matrix show`)")
    return out


# --- public API --------------------------------------------------------------------------------
def pins_from_mapping(
    lm: LoadedMatrix, values: dict[str, str], *, where: dict[str, str] | None = None, origin: str = "declared"
) -> dict[str, Pin]:
    where = where or {}
    out = {}
    for key in STACK_KEYS:
        value = values.get(key)
        if value is None or str(value).strip() == "":
            continue
        out[key] = canonical_pin(lm, key, str(value), where.get(key, ""), origin)
    return out


def validate_pins(lm: LoadedMatrix, pins: dict[str, Pin]) -> ValidationReport:
    given = {k: p.given for k, p in pins.items()}
    pre = _pin_checks(lm, pins)
    res = solve(lm, pins) if not pre else None
    if res is not None:
        return ValidationReport(valid=True, input=given, stack=res.stack, hints=hints_for(lm, res.stack, pins))
    conflicts = explain(lm, pins)
    return ValidationReport(
        valid=False, input=given, conflicts=conflicts, suggestions=suggest(lm, pins, conflicts)
    )


def validate_stack(
    stack: dict[str, str], *, matrix: LoadedMatrix | None = None, origin: str = "declared",
    where: dict[str, str] | None = None,
) -> ValidationReport:
    """Validate a (partial) stack given as a mapping. Unknown versions raise BadInput (exit 2)."""
    lm = matrix or load_matrix()
    return validate_pins(lm, pins_from_mapping(lm, stack, where=where, origin=origin))

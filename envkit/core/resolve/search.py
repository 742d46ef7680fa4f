"""The search: the best full stack that keeps every pin, in validated-first passes.

Depth-first with forward checking over the constraints of `envkit.core.constraints`; arc consistency
(`propagate`) prunes the domains first. Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeVar

from envkit import versions
from envkit.core.constraints import ABSENT, Assignment, Constraint, build_constraints
from envkit.core.matrix import LoadedMatrix, known, with_bounds
from envkit.core.matrix_records import (
    Arch,
    CannRelease,
    Chip,
    HdkRelease,
    MindSpeedRelease,
    OperatingSystem,
    RayRelease,
    TorchBuild,
    TorchNpuRelease,
    TritonAscendRelease,
    VllmAscendRelease,
)
from envkit.core.resolve.pins import Pin, torch_versions, vllm_versions
from envkit.errors import BadInput, CannotRun
from envkit.models.stackkeys import FRAMEWORK_KEYS
from envkit.records import Record

_R = TypeVar("_R")

# The frameworks come before torch_npu: a workload asks for the newest framework release, and the rest follows it.
SEARCH_ORDER: tuple[str, ...] = (
    "chip",
    "arch",
    "os",
    "vllm_ascend",
    "vllm",
    "triton_ascend",
    "mindspeed",
    "ray",
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
NODE_BUDGET = 200_000
PASSES: tuple[tuple[bool, bool], ...] = ((True, True), (True, False), (False, True), (False, False))

# `envkit resolve --workload W`: the optional keys W completes. Serving across nodes is vllm-ascend's Ray way: the
# serving set and the Ray the matrix pins for its vllm-ascend release (matrices/serving.yaml `ray`).
WORKLOADS: dict[str, tuple[str, ...]] = {
    "serving": ("vllm", "vllm_ascend", "triton_ascend"),
    "serving-multi-node": ("vllm", "vllm_ascend", "triton_ascend", "ray"),
    "training-mindspeed": ("mindspeed",),
}
SERVING_KEYS = WORKLOADS["serving"]


def framework_keys(pins: dict[str, Pin], workload: str | None = None) -> tuple[str, ...]:
    """The optional keys in play: those of the workload, the serving set where vllm, vllm_ascend or ray is pinned,
    and every pinned one. A plain stack has none, so it resolves exactly as without frameworks."""
    if workload is not None and workload not in WORKLOADS:
        raise BadInput(f"unknown workload {workload!r}", hint=f"Workloads: {', '.join(WORKLOADS)} (or none: a plain stack).")
    keys = set(WORKLOADS[workload]) if workload is not None else set()
    if "vllm" in pins or "vllm_ascend" in pins or "ray" in pins:
        keys.update(SERVING_KEYS)
    keys.update(k for k in pins if k in FRAMEWORK_KEYS)
    return tuple(k for k in FRAMEWORK_KEYS if k in keys)


def stack_of(found: Assignment) -> Assignment:
    """A solver assignment as a stack: optional keys left out (ABSENT) are dropped."""
    return {k: v for k, v in found.items() if v != ABSENT}


def initial_domains(
    lm: LoadedMatrix, pins: dict[str, Pin], strict_cann: bool, extra: tuple[str, ...] = (), pinnable: bool = False
) -> dict[str, list[str]]:
    """Every key's values in preference order (default chip/arch/os first, then newest); a pin is its key's domain.
    The optional keys in `extra` join the twelve (pre-releases and sdist-only vllm-ascend releases only when pinned,
    or with `pinnable`: every release a user could pin; triton_ascend may be ABSENT when the serving set is in play,
    for a vllm-ascend release without it)."""
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
            t.version for t in m.torch_npu if t.cann is not None and not t.prerelease and (t.validated or not strict_cann)
        ],
        "torch": torch_versions(lm, mapped_only=True),
        "numpy": lm.package("numpy"),
        "transformers": lm.package("transformers"),
        "accelerate": lm.package("accelerate"),
    }
    optional = {
        "vllm_ascend": [r.version for r in m.vllm_ascend if pinnable or not (r.prerelease or r.sdist_only)],
        "vllm": vllm_versions(lm),
        "triton_ascend": [r.version for r in m.triton_ascend if not r.prerelease] + ([ABSENT] if "vllm_ascend" in extra else []),
        "mindspeed": [r.version for r in m.mindspeed],
        "ray": lm.ray_versions(),
    }
    for key in extra:
        dom[key] = optional[key]
    if "vllm_ascend" in extra:
        # a vllm-ascend release may pin a Transformers the recommended list lacks (==5.14.1): the bounds the releases
        # name join the list after it, so a release whose range holds a recommended one still takes that
        specs = [r.transformers.spec for r in m.vllm_ascend if r.transformers is not None]
        dom["transformers"] = with_bounds(dom["transformers"], specs)
    # in a pass, a pinned value is the whole domain (even one outside the preferred lists)
    for key, pin in pins.items():
        dom[key] = [pin.value]
    return dom


class _Solver:
    def __init__(self, constraints: list[Constraint], domains: dict[str, list[str]], lm: LoadedMatrix | None = None):
        self.domains = domains
        self.lm = lm
        self.nodes = 0
        self.order = [k for k in SEARCH_ORDER if k in domains]
        self.by_key: dict[str, list[Constraint]] = {k: [] for k in domains}
        for c in in_play(constraints, domains):
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
        if depth == len(self.order):
            return dict(a)
        key = self.order[depth]
        values = dom[key]
        if key == "python" and self.lm is not None and "os" in a:
            # prefer the python3 the OS ships (no Python to build), then newest
            system = self.lm.oses[a["os"]].system_python
            if system in values:
                values = [system] + [v for v in values if v != system]
        # No check of the value itself: it satisfies every constraint whose other keys are assigned, since forward
        # checking pruned this domain when its key became the last free one of each (one-key rules: `propagate`).
        for value in values:
            a[key] = value
            pruned = self._forward(key, a, dom)
            if pruned is not None:
                found = self._dfs(a, pruned, depth + 1)
                if found is not None:
                    return found
            del a[key]
        return None

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


def in_play(constraints: list[Constraint], keys: dict[str, list[str]] | set[str]) -> list[Constraint]:
    """The constraints whose every key is in play (an edge of an optional key left out does not apply), less those a
    wider edge supersedes when its extra key is in play (`Constraint.superseded_by`)."""
    return [c for c in constraints if all(k in keys for k in c.scope) and not any(k in keys for k in c.superseded_by)]


def supported(c: Constraint, target: str, others: list[str], dom: dict[str, list[str]]) -> list[str]:
    """The values of `target` that some combination of the other keys' values allows under `c`."""
    kept = []
    for v in dom[target]:
        for combo in itertools.product(*(dom[k] for k in others)):
            a = dict(zip(others, combo, strict=True))
            a[target] = v
            if c.check(a):
                kept.append(v)
                break
    return kept


def propagate(by_key: dict[str, list[Constraint]], dom: dict[str, list[str]], start: list[str]) -> dict[str, list[str]] | None:
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


class Chosen(Record):
    """The matrix rows of a resolved stack: what deriving its lock reads (`envkit.core.derive`), with no second lookup.
    `torch_build`: torch's CPU build for the arch (`torch_builds`); None: no row. `ray`: the row of the vllm-ascend
    release's Ray (`ray_for`: its range holds the release), where the stack serves across nodes."""

    __slots__ = (
        "chip",
        "arch",
        "os",
        "driver",
        "firmware",
        "cann",
        "torch_npu",
        "torch_build",
        "vllm_ascend",
        "triton_ascend",
        "mindspeed",
        "ray",
    )
    _fields = __slots__
    chip: Chip
    arch: Arch
    os: OperatingSystem
    driver: HdkRelease
    firmware: HdkRelease
    cann: CannRelease
    torch_npu: TorchNpuRelease
    torch_build: TorchBuild | None
    vllm_ascend: VllmAscendRelease | None
    triton_ascend: TritonAscendRelease | None
    mindspeed: MindSpeedRelease | None
    ray: RayRelease | None

    def __init__(
        self,
        *,
        chip: Chip,
        arch: Arch,
        os: OperatingSystem,
        driver: HdkRelease,
        firmware: HdkRelease,
        cann: CannRelease,
        torch_npu: TorchNpuRelease,
        torch_build: TorchBuild | None,
        vllm_ascend: VllmAscendRelease | None,
        triton_ascend: TritonAscendRelease | None,
        mindspeed: MindSpeedRelease | None,
        ray: RayRelease | None,
    ) -> None:
        values = (chip, arch, os, driver, firmware, cann, torch_npu, torch_build, vllm_ascend, triton_ascend, mindspeed, ray)
        for name, value in zip(self._fields, values, strict=True):
            object.__setattr__(self, name, value)


def chosen(lm: LoadedMatrix, stack: Assignment) -> Chosen:
    """The rows of a full stack's values (KeyError for a value the matrix lacks: a resolved stack has none)."""

    def optional(key: str, find: Callable[[str], _R | None]) -> _R | None:
        value = stack.get(key)
        return None if value is None else known(find(value), f"{key} {value}")

    return Chosen(
        chip=lm.chips[stack["chip"]],
        arch=known(next((a for a in lm.model.arches if a.id == stack["arch"]), None), f"arch {stack['arch']}"),
        os=lm.oses[stack["os"]],
        driver=lm.hdk_row(stack["driver"]),
        firmware=lm.hdk_row(stack["firmware"]),
        cann=lm.cann_row(stack["cann"]),
        torch_npu=lm.torch_npu_row(stack["torch_npu"]),
        torch_build=lm.torch_build(stack["torch"], stack["arch"]),
        vllm_ascend=optional("vllm_ascend", lm.vllm_ascend),
        triton_ascend=optional("triton_ascend", lm.triton_ascend),
        mindspeed=optional("mindspeed", lm.mindspeed),
        # Ray's row is the one whose range holds the stack's vllm-ascend (a release has a row per range)
        ray=optional("ray", lambda _: lm.ray_for(stack["vllm_ascend"]) if stack.get("vllm_ascend") else None),
    )


class Resolution:
    """A resolved stack, the passes that found it, the pins it keeps and the matrix rows it chose."""

    stack: Assignment
    validated_cann: bool
    validated_hdk: bool
    pins: dict[str, Pin]
    rows: Chosen

    def __init__(self, stack: Assignment, validated_cann: bool, validated_hdk: bool, pins: dict[str, Pin], rows: Chosen) -> None:
        self.stack = stack
        self.validated_cann = validated_cann
        self.validated_hdk = validated_hdk
        self.pins = pins
        self.rows = rows

    def _values(self) -> tuple[object, ...]:
        return (self.stack, self.validated_cann, self.validated_hdk, self.pins, self.rows)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Resolution)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Resolution(stack={self.stack!r}, validated_cann={self.validated_cann!r}, "
            f"validated_hdk={self.validated_hdk!r}, pins={self.pins!r}, rows={self.rows!r})"
        )


def solve(lm: LoadedMatrix, pins: dict[str, Pin], extra: tuple[str, ...] | None = None) -> Resolution | None:
    """The best full stack that keeps every pin, or None. `extra`: the optional keys in play (default: those the
    pins imply, `framework_keys`)."""
    extra = framework_keys(pins) if extra is None else extra
    for strict_cann, strict_hdk in PASSES:
        constraints = pass_constraints(lm, strict_cann, strict_hdk)
        found = _Solver(constraints, initial_domains(lm, pins, strict_cann, extra), lm).solve(list(pins))
        if found is not None:
            stack = stack_of(found)
            return Resolution(stack, strict_cann, strict_hdk, pins, chosen(lm, stack))
    return None


# (id of the matrix, pass) -> (the matrix, its constraints): the matrix is kept so that its id is not reused by
# another one (a matrix edited in memory) while its entry is here
_CONSTRAINT_CACHE: dict[tuple[int, bool, bool], tuple[LoadedMatrix, list[Constraint]]] = {}


def pass_constraints(lm: LoadedMatrix, strict_cann: bool = False, strict_hdk: bool = False) -> list[Constraint]:
    """The constraints of one pass, built once per matrix (the defaults: everything the matrix calls compatible)."""
    key = (id(lm), strict_cann, strict_hdk)
    cached = _CONSTRAINT_CACHE.get(key)
    if cached is None or cached[0] is not lm:
        cached = _CONSTRAINT_CACHE[key] = (lm, build_constraints(lm, strict_cann=strict_cann, strict_hdk=strict_hdk))
    return cached[1]


def satisfiable(lm: LoadedMatrix, pins: dict[str, Pin], extra: tuple[str, ...] | None = None, pinnable: bool = False) -> bool:
    """Whether some full stack keeps every pin (the loosest pass); with `pinnable`, the unpinned vllm-ascend may be
    any release a user could pin (a pre-release, an sdist), not only one resolve picks by itself."""
    extra = framework_keys(pins) if extra is None else extra
    domains = initial_domains(lm, pins, False, extra, pinnable)
    return _Solver(pass_constraints(lm), domains).solve(list(pins)) is not None

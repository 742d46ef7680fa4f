"""Pins: what the user (or the host) asked for, checked against the matrix and canonically spelled.

Pure: no I/O.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable
from typing import Literal, Protocol

from envkit import versions
from envkit.core.matrix import LoadedMatrix
from envkit.errors import BadInput, Where, shown
from envkit.models.stackkeys import ALL_KEYS
from envkit.records import Value

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
    # the frameworks: a workload's choice, given up before the hardware but after the Python packages
    "mindspeed": 2,
    "triton_ascend": 3,
    "vllm": 3,
    "vllm_ascend": 4,
    "ray": 2,
}


PinOrigin = Literal["declared", "observed"]  # a pin the user wrote, or one read from a host


class _Release(Protocol):
    """A matrix row with a version (HDK, CANN, torch_npu, vllm-ascend, triton-ascend)."""

    @property
    def version(self) -> str: ...


class Pin(Value):
    """A pinned key: `value` its canonical spelling in the matrix, `given` what the user wrote, `where` it was said
    ("stack.yaml:3", "--torch", "observed: /usr/local/Ascend/driver/version.info"), `local` torch's local label
    (+cpu / +cu124)."""

    __slots__ = ("key", "value", "given", "where", "origin", "local")
    _fields = __slots__
    key: str
    value: str
    given: str
    where: str
    origin: PinOrigin
    local: str | None

    def __init__(
        self, key: str, value: str, given: str, where: str, origin: PinOrigin = "declared", local: str | None = None
    ) -> None:
        for name, item in zip(self._fields, (key, value, given, where, origin, local), strict=True):
            object.__setattr__(self, name, item)


def _nearest(value: str, known: list[str], n: int = 5) -> list[str]:
    try:
        target = versions.parse(value)
    except versions.InvalidVersion:
        return difflib.get_close_matches(value, known, n=n, cutoff=0.3) or known[:n]
    ranked = sorted(known, key=lambda k: (_distance(target, k), versions.sort_key(k) if versions.is_valid(k) else ()))
    return versions.newest_first(ranked[:n]) if all(versions.is_valid(k) for k in ranked[:n]) else ranked[:n]


def _distance(target: versions.Version, other: str) -> tuple[int, ...]:
    try:
        o = versions.parse(other)
    except versions.InvalidVersion:
        return (99,)
    rel = list(itertools.zip_longest(target.release, o.release, fillvalue=0))
    return tuple(abs(a - b) for a, b in rel[:4])


def _unknown(key: str, value: str, known: list[str], where: str, what: str, known_as: str = "") -> BadInput:
    """`what`: the kind of value ("CANN release"); `known_as`: the known ones, when not just `what` + "s"."""
    near = _nearest(value, known)
    return BadInput(
        f"unknown {what} {shown(value)} for '{key}'",
        where=_where(where, key),
        hint=f"Known {known_as or what + 's'} nearest to it: {', '.join(near)}. `envkit matrix show {key}` lists them all.",
        details={"key": key, "value": value, "nearest": near},
    )


def _where(where: str, key: str) -> Where:
    if ":" in where and not where.startswith("--") and not where.startswith("observed"):
        file, _, line = where.rpartition(":")
        if line.isdigit():
            return Where(file, int(line), key)
    return Where(where if where else None, None, key)


def canonical_pin(lm: LoadedMatrix, key: str, given: str, where: str = "", origin: PinOrigin = "declared") -> Pin:
    """Check that a pinned value exists (or is at least a version) and return its canonical spelling."""
    m = lm.model
    value = str(given).strip()
    if key not in ALL_KEYS:
        raise BadInput(f"unknown key {shown(key)}", where=_where(where, key), hint=f"Keys: {', '.join(ALL_KEYS)}.")
    if key == "mindspeed":
        release = lm.mindspeed(value)
        if release is None:
            raise _unknown(key, value, [r.version for r in m.mindspeed], where, "MindSpeed release")
        return Pin(key, release.version, given, where, origin)
    if key == "ray":
        ray = lm.ray(value)
        if ray is None:
            raise _unknown(
                key,
                value,
                lm.ray_versions(),
                where,
                "Ray release",
                "Ray releases (those the matrix pins for serving across nodes)",
            )
        return Pin(key, ray.version, given, where, origin)
    if key == "chip":
        ids = [c.id for c in m.chips]
        low = value.lower()
        if low in ids:
            return Pin(key, low, given, where, origin)
        aliases = {n.lower(): c.id for c in m.chips for n in (*c.npu_smi_names, *c.aliases)}
        if low in aliases:
            return Pin(key, aliases[low], given, where, origin)
        also = "; ".join(f"{', '.join(c.aliases)} = {c.id}" for c in m.chips if c.aliases)
        raise BadInput(
            f"unknown chip {shown(value)}",
            where=_where(where, key),
            hint=f"Chips: {', '.join(ids)}" + (f" (also: {also})." if also else "."),
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
            f"{shown(value)} is not a version (key '{key}')", where=_where(where, key), hint="Write an exact version, e.g. 8.5.0."
        ) from None
    if key == "python":
        short = ".".join(str(n) for n in parsed.release[:2])
        for p in m.pythons:
            if versions.same(p.version, short):
                return Pin(key, p.version, given, where, origin)
        raise _unknown(key, value, [p.version for p in m.pythons], where, "Python version")
    releases: dict[str, tuple[Callable[[str], _Release | None], Callable[[], list[str]], str, str]] = {
        "driver": (lm.hdk, lambda: [x.version for x in m.hdk], "HDK (driver) release", ""),
        "firmware": (
            lm.firmware,
            lambda: [x.version for x in m.hdk] + [x.firmware_version for x in m.hdk if x.firmware_version],
            "firmware version",
            "firmware versions (HDK releases or firmware Version= values)",
        ),
        "cann": (lm.cann, lambda: [x.version for x in m.cann], "CANN release", ""),
        "torch_npu": (lm.torch_npu, lambda: [x.version for x in m.torch_npu], "torch_npu release", ""),
        "vllm_ascend": (lm.vllm_ascend, lambda: [x.version for x in m.vllm_ascend], "vllm-ascend release", ""),
        "triton_ascend": (lm.triton_ascend, lambda: [x.version for x in m.triton_ascend], "triton-ascend release", ""),
    }
    if key in releases:
        lookup, known_of, what, known_as = releases[key]
        row = lookup(value)
        if row is None:
            raise _unknown(key, value, known_of(), where, what, known_as)
        return Pin(key, row.version, given, where, origin)
    if key == "torch":
        known = torch_versions(lm, mapped_only=False)
        for k in known:
            if versions.parse(k).key == parsed.key:
                return Pin(key, k, given, where, origin, local=parsed.local)
        raise _unknown(key, value, known, where, "torch version", "torch versions (those a torch_npu release pins)")
    if key == "vllm":
        known = vllm_versions(lm)
        for k in known:
            if versions.same(k, value):
                return Pin(key, k, given, where, origin)
        raise _unknown(key, value, known, where, "vLLM release", "vLLM releases (those a vllm-ascend release pins)")
    # numpy / transformers / accelerate: any release is accepted, judged by ranges
    return Pin(key, value, given, where, origin)


def torch_versions(lm: LoadedMatrix, *, mapped_only: bool) -> list[str]:
    """The torch versions that torch_npu releases pin, newest first (`mapped_only`: of releases a stack can take: with
    a CANN pairing, or in a TorchNPU line whose CANN range judges them)."""
    seen: dict[tuple[tuple[int, int], ...], str] = {}
    for t in lm.model.torch_npu:
        if mapped_only and t.cann is None and t.line is None:
            continue
        seen.setdefault(versions.parse(t.torch).key, t.torch)
    return versions.newest_first(list(seen.values()))


def vllm_versions(lm: LoadedMatrix) -> list[str]:
    """The vLLM releases that vllm-ascend releases pin, newest first."""
    return versions.newest_first(list({versions.parse(r.vllm).key: r.vllm for r in lm.model.vllm_ascend}.values()))


def pins_from_mapping(
    lm: LoadedMatrix, values: dict[str, str], *, where: dict[str, str] | None = None, origin: PinOrigin = "declared"
) -> dict[str, Pin]:
    """The pins of a (partial) stack mapping, in ALL_KEYS order; empty values are no pin."""
    where = where or {}
    out = {}
    for key in ALL_KEYS:
        value = values.get(key)
        if value is None or str(value).strip() == "":
            continue
        out[key] = canonical_pin(lm, key, str(value), where.get(key, ""), origin)
    return out

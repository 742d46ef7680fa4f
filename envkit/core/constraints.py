"""The compatibility rules of the matrix as constraints between stack keys.

Each constraint has a scope (the keys it relates), a check over a full assignment of that scope,
and, for explanations, what the matrix says about one value of one of its keys (`says`), with
the rule id and source of that statement. Pure: no I/O.

The matrix rules are a table: `EDGES` holds one small function per edge (its docstring says the rule and
the matrix rows it reads), and `build_constraints` builds each of them, then the generic rules of
matrices/python_packages.yaml.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from envkit import versions
from envkit.core.matrix import LoadedMatrix, SourcedRow, known
from envkit.core.matrix_records import (
    MindSpeedRelease,
    RayRelease,
    Rule,
    TorchNpuLine,
    TritonAscendRelease,
    VllmAscendRelease,
)
from envkit.records import Value
from envkit.verdict import Verdict

Assignment = dict[str, str]


def _row(rule: str, row: SourcedRow | None, text: str) -> Verdict:
    if row is None:
        return Verdict(message=text, rule=rule, source="envkit matrix", confidence=None)
    if row.disagreement:
        text += f" (sources disagree: {row.disagreement})"
    return Verdict(message=text, rule=rule, source=row.source_text, confidence=row.confidence)


# the framework releases of matrices/serving.yaml (a versioned row each)
_Framework = TypeVar("_Framework", VllmAscendRelease, TritonAscendRelease, MindSpeedRelease)


def _fmt(values: list[str], limit: int = 8) -> str:
    if not values:
        return "none"
    if len(values) <= limit:
        return ", ".join(values)
    return ", ".join(values[:limit]) + f", … ({len(values)} in all)"


class Constraint:
    id: str
    scope: tuple[str, ...]
    explain_both_sides: bool = False  # both keys carry a statement that can exclude the other
    summary_with_free: bool = False  # summary() can name a key the pins leave free (its first value left)
    # keys whose presence in play hands this constraint over to a wider edge that reads them too (`in_play` drops it)
    superseded_by: tuple[str, ...] = ()

    def check(self, a: Assignment) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def says(self, key: str, value: str) -> Verdict | None:  # pragma: no cover - interface
        raise NotImplementedError

    def summary(self, a: Assignment) -> str | None:
        """A one-line statement of the violation when every key of the scope is known."""
        return None


class Relation(Constraint):
    """A binary relation given by a predicate, with per-side statements."""

    def __init__(
        self,
        cid: str,
        left: str,
        right: str,
        ok: Callable[[str, str], bool],
        say_left: Callable[[str], Verdict],
        say_right: Callable[[str], Verdict | None],
        summary: Callable[[Assignment], str] | None = None,
    ) -> None:
        self.id = cid
        self.scope = (left, right)
        self._ok = ok
        self._say: dict[str, Callable[[str], Verdict | None]] = {left: say_left, right: say_right}
        self._summary = summary

    def summary(self, a: Assignment) -> str | None:
        return self._summary(a) if self._summary else None

    def check(self, a: Assignment) -> bool:
        return self._ok(a[self.scope[0]], a[self.scope[1]])

    def says(self, key: str, value: str) -> Verdict | None:
        return self._say[key](value)


class RuleConstraint(Constraint):
    """A generic `when ... requires ...` rule of matrices/python_packages.yaml."""

    def __init__(self, rule: Rule, lm: LoadedMatrix) -> None:
        self.rule = rule
        self.id = f"rule:{rule.id}"
        keys = [*rule.when, *rule.requires]
        scope = []
        for k in keys:
            k = "os" if k == "glibc" else k
            if k not in scope:
                scope.append(k)
        self.scope = tuple(scope)
        self._lm = lm

    def _value(self, key: str, a: Assignment) -> str:
        if key == "glibc":
            return self._lm.oses[a["os"]].glibc
        return a[key]

    @staticmethod
    def _holds(value: str, cond: str | list[str]) -> bool:
        if isinstance(cond, list):
            return value in cond
        return versions.satisfies(value, cond)

    def applies(self, a: Assignment) -> bool:
        return all(self._holds(self._value(k, a), c) for k, c in self.rule.when.items())

    def check(self, a: Assignment) -> bool:
        if not self.applies(a):
            return True
        if self.rule.forbid:
            return False
        return all(self._holds(self._value(k, a), c) for k, c in self.rule.requires.items())

    def summary(self, a: Assignment) -> str | None:
        return self.message(a)

    def message(self, a: Assignment) -> str:
        try:
            return self.rule.message.format(**a)
        except (KeyError, IndexError):
            return self.rule.message

    def says(self, key: str, value: str) -> Verdict:
        cond = "; ".join(f"{k} {v}" for k, v in self.rule.when.items())
        if self.rule.forbid:
            text = f"when {cond}: refused ({self.rule.message.format_map(_Blank({key: value}))})"
        else:
            req = "; ".join(f"{k} {v}" for k, v in self.rule.requires.items())
            text = f"when {cond}, requires {req} ({self.rule.message.format_map(_Blank({key: value}))})"
        return _row(self.rule.id, self.rule, text)


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class _GlibcConstraint(Constraint):
    """A release (`key`: torch_npu, vllm_ascend, triton_ascend) ↔ os/arch: its manylinux wheels on an arch need at
    least the glibc of their tag, and the OS must ship it; no wheel for the arch, no install. A row whose
    `manylinux` is null (a framework release with no wheel on PyPI: built where it installs), or an optional key the
    stack leaves out (ABSENT), meets every OS."""

    summary_with_free = True  # the arch left free: the summary names the first one

    def __init__(self, lm: LoadedMatrix, key: str, what: str, row: Callable[[str], Any], cid: str) -> None:
        self._lm, self._what, self._row_of = lm, what, row
        self.id = cid
        self.scope = (key, "os", "arch")
        self._key = key

    def _manylinux(self, value: str) -> dict[str, str] | None:
        return None if value == ABSENT else self._row_of(value).manylinux

    def check(self, a: Assignment) -> bool:
        wheels = self._manylinux(a[self._key])
        if wheels is None:
            return True
        need = wheels.get(a["arch"])
        have = self._lm.oses[a["os"]].glibc
        return need is not None and versions.parse(have) >= versions.parse(need)

    def says(self, key: str, value: str) -> Verdict | None:
        lm = self._lm
        if key == self._key and value != ABSENT:
            wheels = self._manylinux(value)
            if wheels is None:
                return _row(
                    f"{key}/{value}", self._row_of(value), f"{self._what} {value} has no wheel on PyPI (built where it installs)"
                )
            ml = ", ".join(f"{arch}: glibc >= {g}" for arch, g in sorted(wheels.items()))
            return _row(f"{key}/{value}", self._row_of(value), f"{self._what} {value} wheels are manylinux ({ml})")
        if key == "os":
            o = lm.oses[value]
            return _row(f"os/{value}", o, f"{o.name} has glibc {o.glibc}")
        return None

    def summary(self, a: Assignment) -> str | None:
        wheels = self._manylinux(a[self._key]) or {}
        o = self._lm.oses[a["os"]]
        if a.get("arch"):
            need = f"glibc >= {wheels.get(a['arch'], '?')} on {a['arch']}"
        else:
            need = ", ".join(f"glibc >= {g} on {arch}" for arch, g in sorted(wheels.items()))
        return f"{self._what} {a[self._key]} wheels need {need}; {o.name} has glibc {o.glibc}"


class Strictness(Value):
    """Which edges a search pass keeps to the vendor's pairings (the validated-first passes of the resolver): `cann`,
    torch_npu only with the CANN of the vendor's table; `hdk`, CANN only with its paired HDK and a driver only with
    the firmware of its own HDK release."""

    __slots__ = ("cann", "hdk")
    _fields = __slots__
    cann: bool
    hdk: bool

    def __init__(self, cann: bool = False, hdk: bool = False) -> None:
        object.__setattr__(self, "cann", cann)
        object.__setattr__(self, "hdk", hdk)


Edge = Callable[[LoadedMatrix, Strictness], Constraint]


# --- the edges: one function per matrix rule ---------------------------------------------------
def chip_cann(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """chip ↔ cann: a CANN release supports the chips of its chip list (matrices/cann.yaml, `cann[].chips`)."""
    m = lm.model
    return Relation(
        "chip-cann",
        "chip",
        "cann",
        lambda chip, cann: chip in lm.cann_row(cann).chips,
        lambda chip: Verdict(
            message=f"chip {chip} is supported by CANN {_fmt([c.version for c in m.cann if chip in c.chips])}",
            rule="cann/*.chips",
            source="matrices/cann.yaml (per-release chip lists)",
        ),
        lambda cann: _row(f"cann/{cann}", lm.cann_row(cann), f"CANN {cann} supports chips {_fmt(lm.cann_row(cann).chips)}"),
        lambda a: f"chip {a['chip']} is not supported by CANN {a['cann']}",
    )


def _chip_hdk(lm: LoadedMatrix, key: str, what: str) -> Constraint:
    m = lm.model
    return Relation(
        f"chip-{key}",
        "chip",
        key,
        lambda chip, v: chip in lm.hdk_row(v).chips,
        lambda chip: Verdict(
            message=f"chip {chip}: the matrix knows {what} packages in HDK {_fmt([h.version for h in m.hdk if chip in h.chips])}",
            rule="hdk/*.chips",
            source="matrices/hdk.yaml (per-release chip lists)",
        ),
        lambda v: _row(
            f"hdk/{lm.hdk_row(v).version}", lm.hdk_row(v), f"HDK {v} ships {what} packages for chips {_fmt(lm.hdk_row(v).chips)}"
        ),
        lambda a: f"HDK {a[key]} has no {what} package for chip {a['chip']} in the matrix",
    )


def chip_driver(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """chip ↔ driver: an HDK release ships NPU driver packages for the chips of its chip list
    (matrices/hdk.yaml, `hdk[].chips`)."""
    return _chip_hdk(lm, "driver", "NPU driver")


def chip_firmware(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """chip ↔ firmware: an HDK release ships NPU firmware packages for the chips of its chip list
    (matrices/hdk.yaml, `hdk[].chips`)."""
    return _chip_hdk(lm, "firmware", "NPU firmware")


def _disputed_lines(lines: list[TorchNpuLine], chip: str) -> str:
    """Lines that leave `chip` out while their sources disagree about it (the line's `disagreement` names it)."""
    disputed = [ln for ln in lines if chip not in ln.chips and ln.disagreement and chip in ln.disagreement.lower()]
    if not disputed:
        return ""
    return f" (sources disagree for TorchNPU {', '.join(ln.line for ln in disputed)}: {disputed[0].disagreement})"


def _line_chips(lm: LoadedMatrix) -> Relation:
    """chip ↔ torch_npu as the TorchNPU lines say (`chip_torch_npu`; `chip_torch_npu_serving` widens it)."""
    m = lm.model

    def npu_line(v: str) -> TorchNpuLine | None:
        t = lm.torch_npu(v)
        return lm.lines.get(t.line) if t and t.line else None

    def chip_tn_ok(chip: str, tn: str) -> bool:
        ln = npu_line(tn)
        return ln is not None and chip in ln.chips

    def say_tn_chips(tn: str) -> Verdict:
        rule = f"torch_npu_line/{lm.torch_npu_row(tn).line}"
        ln = npu_line(tn)
        text = (
            f"torch_npu {tn} (TorchNPU {lm.torch_npu_row(tn).line}) supports chips {_fmt(ln.chips)}"
            if ln
            else f"torch_npu {tn} belongs to no TorchNPU line with published hardware support"
        )
        return _row(rule, ln, text)

    return Relation(
        "chip-torch_npu",
        "chip",
        "torch_npu",
        chip_tn_ok,
        lambda chip: Verdict(
            message=f"chip {chip} is supported by TorchNPU lines {_fmt([ln.line for ln in m.torch_npu_lines if chip in ln.chips])}"
            + _disputed_lines(m.torch_npu_lines, chip),
            rule="torch_npu_lines/*.chips",
            source="matrices/torch_npu.yaml (TorchNPU lines)",
        ),
        say_tn_chips,
        lambda a: f"chip {a['chip']} is not supported by torch_npu {a['torch_npu']}",
    )


def chip_torch_npu(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """chip ↔ torch_npu: a torch_npu release supports the chips of its TorchNPU line; a release without a line
    supports none (matrices/torch_npu.yaml, `torch_npu[].line` → `torch_npu_lines[].chips`). With vllm_ascend in play
    `chip_torch_npu_serving` takes its place."""
    edge = _line_chips(lm)
    edge.superseded_by = ("vllm_ascend",)
    return edge


def served_on(r: VllmAscendRelease | None, chip: str, torch_npu: str) -> bool:
    """Whether the vendor runs vllm-ascend release `r` on `chip` with its torch_npu `torch_npu` (`runs_on`)."""
    return (
        r is not None
        and r.runs_on is not None
        and chip in r.runs_on.chips
        and r.torch_npu is not None
        and versions.same(r.torch_npu, torch_npu)
    )


class _ServedChipTorchNpu(Constraint):
    id = "chip-torch_npu-vllm_ascend"
    scope = ("vllm_ascend", "chip", "torch_npu")

    def __init__(self, lm: LoadedMatrix) -> None:
        self._lm = lm
        self._lines = _line_chips(lm)

    def _served(self, a: Assignment) -> bool:
        va = a["vllm_ascend"]
        return va != ABSENT and served_on(self._lm.vllm_ascend(va), a["chip"], a["torch_npu"])

    def check(self, a: Assignment) -> bool:
        return self._lines.check(a) or self._served(a)

    def says(self, key: str, value: str) -> Verdict | None:
        if key == "vllm_ascend":
            r = self._lm.vllm_ascend(value)
            if r is None:
                return None
            if r.runs_on is None:
                return _row(
                    f"vllm_ascend/{value}",
                    r,
                    f"vllm-ascend {value} states no chips it runs on: the TorchNPU line of its torch_npu decides",
                )
            return _row(
                f"vllm_ascend/{value}.runs_on",
                r.runs_on,
                f"the vendor runs vllm-ascend {value} with torch_npu {r.torch_npu} on chips {_fmt(r.runs_on.chips)}",
            )
        said = self._lines.says(key, value)
        if key != "chip" or said is None:
            return said
        served = [r.version for r in self._lm.model.vllm_ascend if r.runs_on is not None and value in r.runs_on.chips]
        if not served:
            return said
        return Verdict(
            message=f"{said.message}; the vendor runs vllm-ascend {_fmt(served)} on it, with their own torch_npu",
            rule=f"{said.rule}, vllm_ascend/*.runs_on",
            source=f"{said.source}; matrices/serving.yaml (vllm_ascend runs_on)",
        )

    def summary(self, a: Assignment) -> str | None:
        text = f"chip {a['chip']} is not supported by torch_npu {a['torch_npu']}"
        if a.get("vllm_ascend", ABSENT) != ABSENT:
            text += f", and the vendor does not run vllm-ascend {a['vllm_ascend']} with it there"
        return text


def chip_torch_npu_serving(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """chip ↔ torch_npu ↔ vllm_ascend: a serving stack follows what the vendor runs. The TorchNPU line's chips
    apply, and beyond them a chip the vllm-ascend release states it runs on (`runs_on`, with its source) may use
    that release's torch_npu, although the line's install guide leaves the chip out (matrices/serving.yaml,
    `vllm_ascend[].runs_on.chips`, `vllm_ascend[].torch_npu`; matrices/torch_npu.yaml `torch_npu_lines[].chips`)."""
    return _ServedChipTorchNpu(lm)


def driver_firmware(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """driver ↔ firmware: the driver and firmware of one HDK release always pair; across releases (not under
    `strict.hdk`) the firmware Version must be in the driver's `compatible_firmware` range and, where the firmware
    states one, the driver in its `compatible_driver` range (matrices/hdk.yaml, `hdk[].compatible_firmware`,
    `firmware_version`, `compatible_driver`: the version.info files of the packages)."""

    def fw_ok(driver: str, firmware: str) -> bool:
        d, f = lm.hdk_row(driver), lm.hdk_row(firmware)
        if d is f:
            return True
        if strict.hdk:
            return False
        if not (d.compatible_firmware and f.firmware_version):
            return False
        if not versions.in_any_range(f.firmware_version, versions.parse_ranges(d.compatible_firmware)):
            return False
        if f.compatible_driver:
            return versions.in_any_range(d.package_version or d.version, versions.parse_ranges(f.compatible_driver))
        return True

    def say_driver_fw(driver: str) -> Verdict:
        d = lm.hdk_row(driver)
        text = f"driver {driver} pairs with the firmware of HDK {d.version}"
        if d.compatible_firmware:
            text += f"; its version.info allows firmware {d.compatible_firmware}"
        else:
            text += " (its compatible_version_fw range is not captured, so no other firmware is accepted)"
        return _row(f"hdk/{d.version}", d, text)

    def say_fw_driver(firmware: str) -> Verdict:
        f = lm.hdk_row(firmware)
        fwv = f" (firmware Version {f.firmware_version})" if f.firmware_version else " (firmware Version not captured)"
        text = f"the firmware of HDK {f.version}{fwv} pairs with driver {f.version}"
        if f.compatible_driver:
            text += f"; its version.info allows drivers {f.compatible_driver}"
        return _row(f"hdk/{f.version}", f, text)

    drv_fw = Relation(
        "driver-firmware",
        "driver",
        "firmware",
        fw_ok,
        say_driver_fw,
        say_fw_driver,
        lambda a: f"driver {a['driver']} and the firmware of HDK {a['firmware']} are not known to be compatible",
    )
    drv_fw.explain_both_sides = True
    return drv_fw


def cann_driver(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """cann ↔ driver: a CANN release works with the HDK releases (or series such as 25.5.X, matched by HDK version
    or alias) of its vendor mapping `hdk_paired`, and, not under `strict.hdk`, of `hdk_compatible`
    (matrices/cann.yaml, `cann[].hdk_paired`, `cann[].hdk_compatible`; matrices/hdk.yaml `hdk[].aliases`)."""
    cann_versions = [c.version for c in lm.model.cann]

    def cann_hdk_ok(cann: str, driver: str) -> bool:
        c = lm.cann_row(cann)
        refs = c.hdk_paired if strict.hdk else [*c.hdk_paired, *c.hdk_compatible]
        h = lm.hdk_row(driver)
        names = [h.version, *h.aliases]
        return any(versions.in_series(n, s) for n in names for s in refs)

    def say_cann_hdk(cann: str) -> Verdict:
        c = lm.cann_row(cann)
        text = f"CANN {cann} pairs with HDK {_fmt(c.hdk_paired)}"
        if c.hdk_compatible:
            text += f" and also works with HDK {_fmt(c.hdk_compatible)}"
        return _row(f"cann/{cann}", c, text)

    def say_hdk_cann(driver: str) -> Verdict:
        ok = [c for c in cann_versions if cann_hdk_ok(c, driver)]
        return Verdict(
            message=f"HDK {driver} works with CANN {_fmt(ok)}", rule="cann/*.hdk", source="matrices/cann.yaml (HDK mappings)"
        )

    return Relation(
        "cann-driver",
        "cann",
        "driver",
        cann_hdk_ok,
        say_cann_hdk,
        say_hdk_cann,
        lambda a: f"CANN {a['cann']} does not work with NPU driver (HDK) {a['driver']}",
    )


def torch_npu_cann(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """torch_npu ↔ cann: a torch_npu release works with the CANN of the vendor's table, and, not under
    `strict.cann`, with every CANN its TorchNPU line is compatible with; a release without a CANN pairing works
    with none (matrices/torch_npu.yaml, `torch_npu[].cann`, `torch_npu_lines[].cann_compatible`)."""
    m = lm.model

    def tn_cann_ok(tn: str, cann: str) -> bool:
        t = lm.torch_npu_row(tn)
        if t.cann is not None and versions.same(t.cann, cann):
            return True
        if strict.cann or t.line is None:
            return False
        return lm.series_members(lm.lines[t.line].cann_compatible, [cann]) != []

    def say_tn_cann(tn: str) -> Verdict:
        t = lm.torch_npu_row(tn)
        if t.line is None:
            return _row(f"torch_npu/{tn}", t, f"torch_npu {tn} has no published CANN pairing")
        ln = lm.lines[t.line]
        if t.cann is None:
            text = (
                f"torch_npu {tn} has no CANN pairing of its own; as a release of TorchNPU {t.line} (inferred) it "
                f"works with that line's CANN {_fmt(ln.cann_compatible)}"
            )
            return Verdict(
                message=text,
                rule=f"torch_npu/{tn}, torch_npu_line/{t.line}",
                source=f"{t.source_text}; {ln.source_text}",
                confidence="inferred",
            )
        text = f"torch_npu {tn} is paired with CANN {t.cann} in the vendor's table, and TorchNPU {t.line} works with CANN {_fmt(ln.cann_compatible)}"
        return Verdict(
            message=text,
            rule=f"torch_npu/{tn}, torch_npu_line/{t.line}",
            source=f"{t.source_text}; {ln.source_text}",
            confidence=ln.confidence,
        )

    def say_cann_tn(cann: str) -> Verdict:
        ok = [t.version for t in m.torch_npu if tn_cann_ok(t.version, cann)]
        return Verdict(
            message=f"CANN {cann} works with torch_npu {_fmt(ok)}", rule="torch_npu/*.cann", source="matrices/torch_npu.yaml"
        )

    return Relation(
        "torch_npu-cann",
        "torch_npu",
        "cann",
        tn_cann_ok,
        say_tn_cann,
        say_cann_tn,
        lambda a: f"torch_npu {a['torch_npu']} does not work with CANN {a['cann']}",
    )


def torch_npu_torch(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """torch_npu ↔ torch: a torch_npu release pins exactly one torch version (matrices/torch_npu.yaml,
    `torch_npu[].torch`: the wheel METADATA Requires-Dist torch)."""
    m = lm.model
    return Relation(
        "torch_npu-torch",
        "torch_npu",
        "torch",
        lambda tn, torch: versions.same(lm.torch_npu_row(tn).torch, torch),
        lambda tn: _row(f"torch_npu/{tn}", lm.torch_npu_row(tn), f"torch_npu {tn} pins torch=={lm.torch_npu_row(tn).torch}"),
        lambda torch: Verdict(
            message=f"torch {torch} is pinned by torch_npu "
            + _fmt(
                [
                    t.version + ("" if t.cann else " (no published CANN pairing)")
                    for t in m.torch_npu
                    if versions.same(t.torch, torch)
                ]
            ),
            rule="torch_npu/*.torch",
            source="wheel METADATA Requires-Dist torch (compat-facts §1.7)",
        ),
        lambda a: f"torch_npu {a['torch_npu']} needs torch {lm.torch_npu_row(a['torch_npu']).torch}, not {a['torch']}",
    )


def _tags(pythons: list[str]) -> str:
    return ", ".join(versions.python_tag(p) for p in pythons)


class _TorchNpuPython(Constraint):
    """torch_npu ↔ python ↔ arch (`torch_npu_python`)."""

    id = "torch_npu-python"
    scope = ("torch_npu", "python", "arch")
    summary_with_free = True  # the arch left free: the summary names the wheels of every arch

    def __init__(self, lm: LoadedMatrix) -> None:
        self._lm = lm

    def _ok(self, tn: str, py: str, arch: str | None) -> bool:
        t = self._lm.torch_npu_row(tn)
        tags = t.python if arch is None else t.pythons_on(arch)
        return tags is not None and any(versions.same(py, p) for p in tags)

    def check(self, a: Assignment) -> bool:
        return self._ok(a["torch_npu"], a["python"], a["arch"])

    def _wheels(self, tn: str) -> str:
        """'cp310, cp311, cp312 on aarch64; cp310, cp311 on x86_64' (per arch where they differ), else 'cp310, cp311'."""
        t = self._lm.torch_npu_row(tn)
        if t.python_by_arch is None:
            return _tags(t.python or [])
        return "; ".join(f"{_tags(tags) or 'none'} on {arch}" for arch, tags in sorted(t.python_by_arch.items()))

    def says(self, key: str, value: str) -> Verdict | None:
        m = self._lm.model
        if key == "torch_npu":
            t = self._lm.torch_npu_row(value)
            if t.python is None:
                return _row(f"torch_npu/{value}", t, f"torch_npu {value}: wheel tags not captured")
            if t.python_by_arch is None:
                return _row(f"torch_npu/{value}", t, f"torch_npu {value} has wheels for {_tags(t.python)} only")
            return _row(f"torch_npu/{value}.python_by_arch", t, f"torch_npu {value} has wheels for {self._wheels(value)} only")
        if key == "python":
            fits = [t.version for t in m.torch_npu if self._ok(t.version, value, None)]
            some = [
                f"{t.version} on {', '.join(a for a, tags in sorted(t.python_by_arch.items()) if self._ok(t.version, value, a))} only"
                for t in m.torch_npu
                if t.python_by_arch is not None
                and t.version in fits
                and not all(self._ok(t.version, value, a) for a in t.python_by_arch)
            ]
            return Verdict(
                message=f"{versions.python_tag(value)} wheels exist for torch_npu {_fmt(fits)}"
                + (f" ({'; '.join(some)})" if some else ""),
                rule="torch_npu/*.python",
                source="PyPI torch-npu wheel tags (compat-facts §1.5)",
            )
        return None

    def summary(self, a: Assignment) -> str | None:
        tn, tag, arch = a["torch_npu"], versions.python_tag(a["python"]), a.get("arch")
        t = self._lm.torch_npu_row(tn)
        if t.python_by_arch is not None and arch is not None:
            return f"no torch_npu {tn} wheel for {tag} on {arch} (PyPI's files: {self._wheels(tn)})"
        wheels = f" (wheels: {self._wheels(tn)})" if t.python else ""
        return f"no torch_npu {tn} wheel for {tag}" + wheels


def torch_npu_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """torch_npu ↔ python ↔ arch: a torch_npu release installs only on the Pythons it has wheels for on the arch
    (2.10.0.post6: cp312 on aarch64 only); none where the wheel tags are not captured (matrices/torch_npu.yaml,
    `torch_npu[].python`: the PyPI wheel tags, `torch_npu[].python_by_arch` where the arches differ; both derived by
    `envkit matrix refresh`)."""
    return _TorchNpuPython(lm)


def cann_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """cann ↔ python: a CANN release supports the Pythons of its stated range; any where none is stated
    (matrices/cann.yaml, `cann[].python`)."""
    m = lm.model

    def cann_py_ok(cann: str, py: str) -> bool:
        stated = lm.cann_row(cann).python
        return stated is None or versions.satisfies(py, stated)

    return Relation(
        "cann-python",
        "cann",
        "python",
        cann_py_ok,
        lambda cann: _row(
            f"cann/{cann}",
            lm.cann_row(cann),
            f"CANN {cann} supports Python {lm.cann_row(cann).python}"
            if lm.cann_row(cann).python
            else f"CANN {cann}: Python range not stated",
        ),
        lambda py: Verdict(
            message=f"Python {py} is supported by CANN {_fmt([c.version for c in m.cann if c.python is None or versions.satisfies(py, c.python)])}",
            rule="cann/*.python",
            source="matrices/cann.yaml",
        ),
        lambda a: f"CANN {a['cann']} does not support Python {a['python']} ({lm.cann_row(a['cann']).python})",
    )


def os_arch(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """os ↔ arch: an operating system is available on the arches of its row (matrices/platform.yaml,
    `operating_systems[].arches`)."""
    return Relation(
        "os-arch",
        "os",
        "arch",
        lambda os_, arch: arch in lm.oses[os_].arches,
        lambda os_: _row(f"os/{os_}", lm.oses[os_], f"{lm.oses[os_].name} runs on {_fmt(lm.oses[os_].arches)}"),
        lambda arch: None,
        lambda a: f"{a['os']} is not available on {a['arch']} in the matrix",
    )


def torch_npu_glibc(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """torch_npu ↔ os/arch: the manylinux wheels of a torch_npu release need at least the glibc of their tag on that
    arch, and the OS must ship it; no wheel for the arch, no install (matrices/torch_npu.yaml,
    `torch_npu[].manylinux`; matrices/platform.yaml, `operating_systems[].glibc`)."""
    return _GlibcConstraint(lm, "torch_npu", "torch_npu", lm.torch_npu_row, "torch_npu-glibc")


# --- serving and training frameworks (matrices/serving.yaml) -----------------------------------------
# These edges relate the optional keys (vllm, vllm_ascend, triton_ascend, mindspeed); the search uses an edge only
# when every key of its scope is in play, so a plain stack never meets them. ABSENT is the value of an optional
# key that the stack leaves out (a serving stack whose vllm-ascend release installs no triton-ascend).
ABSENT = "none"


def _spec_relation(
    lm: LoadedMatrix,
    cid: str,
    key: str,
    what: str,
    lookup: Callable[[str], _Framework | None],
    field: str,
    other: str,
    ok_other: Callable[[_Framework, str], bool],
    said: Callable[[_Framework], str],
    cite: Callable[[_Framework], SourcedRow | None] | None = None,
) -> Relation:
    """A framework release (`key`) that allows only some values of `other`, as its row says (`field`). `cite`: the
    part of the row that carries its own source (the statement then names that part and its source)."""
    rows: list[_Framework] = getattr(lm.model, key)

    def row(v: str) -> _Framework:
        return known(lookup(v), f"{what} {v}")

    def cited(v: str) -> tuple[str, SourcedRow | None]:
        r = lookup(v)
        if cite is None or r is None:
            return f"{key}/{v}", r
        return f"{key}/{v}.{field}", cite(r)

    return Relation(
        cid,
        key,
        other,
        lambda v, o: v == ABSENT or ok_other(row(v), o),
        lambda v: _row(*cited(v), f"{what} {v} {said(row(v))}"),
        lambda o: Verdict(
            message=f"{other} {o} fits {what} {_fmt([r.version for r in rows if ok_other(r, o)])}",
            rule=f"{key}/*.{field}",
            source="matrices/serving.yaml",
        ),
        lambda a: f"{what} {a[key]} {said(row(a[key]))}, not {other} {a[other]}",
    )


def vllm_ascend_vllm(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ vllm: a vllm-ascend release pins one vLLM release; install `vllm==X` first, then
    `vllm-ascend==X` (matrices/serving.yaml, `vllm_ascend[].vllm`: the release compatibility matrix)."""
    return _spec_relation(
        lm,
        "vllm_ascend-vllm",
        "vllm_ascend",
        "vllm-ascend",
        lm.vllm_ascend,
        "vllm",
        "vllm",
        lambda r, v: versions.same(r.vllm, v),
        lambda r: f"pins vLLM {r.vllm}",
    )


def vllm_ascend_torch_npu(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ torch_npu: a vllm-ascend release is built against one torch_npu release (installing it can
    replace torch_npu); a row whose torch_npu the matrix lacks (`needs`) allows none (matrices/serving.yaml,
    `vllm_ascend[].torch_npu`)."""
    return _spec_relation(
        lm,
        "vllm_ascend-torch_npu",
        "vllm_ascend",
        "vllm-ascend",
        lm.vllm_ascend,
        "torch_npu",
        "torch_npu",
        lambda r, t: r.torch_npu is not None and versions.same(r.torch_npu, t),
        lambda r: f"pins torch_npu {r.torch_npu}" if r.torch_npu else f"needs {'; '.join(r.needs)}",
    )


def vllm_ascend_cann(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ cann: a vllm-ascend release is released with one CANN (the "Stable CANN" of the release table,
    or the CANN image of its Dockerfile) (matrices/serving.yaml, `vllm_ascend[].cann`)."""
    return _spec_relation(
        lm,
        "vllm_ascend-cann",
        "vllm_ascend",
        "vllm-ascend",
        lm.vllm_ascend,
        "cann",
        "cann",
        lambda r, c: r.cann is not None and versions.same(r.cann, c),
        lambda r: f"is released with CANN {r.cann}" if r.cann else f"needs {'; '.join(r.needs)}",
    )


def installs_triton(r: VllmAscendRelease, chip: str) -> str | None:
    """The triton-ascend release `r` installs on `chip`: none where it has none, or where the vendor's image for that
    chip uninstalls it (`runs_on.without_triton_ascend`)."""
    if r.triton_ascend is None or (r.runs_on is not None and chip in r.runs_on.without_triton_ascend):
        return None
    return r.triton_ascend


class _VllmAscendTriton(Constraint):
    id = "vllm_ascend-triton_ascend"
    scope = ("vllm_ascend", "triton_ascend", "chip")

    def __init__(self, lm: LoadedMatrix) -> None:
        self._lm = lm

    def _row(self, v: str) -> VllmAscendRelease:
        return known(self._lm.vllm_ascend(v), f"vllm-ascend {v}")

    def check(self, a: Assignment) -> bool:
        if a["vllm_ascend"] == ABSENT:
            return True
        want = installs_triton(self._row(a["vllm_ascend"]), a["chip"])
        t = a["triton_ascend"]
        return t == ABSENT if want is None else t != ABSENT and versions.same(want, t)

    @staticmethod
    def _installs(r: VllmAscendRelease) -> str:
        if r.triton_ascend is None:
            return "installs no triton-ascend"
        text = f"installs triton-ascend {r.triton_ascend}"
        if r.runs_on is not None and r.runs_on.without_triton_ascend:
            text += f", none on chips {_fmt(r.runs_on.without_triton_ascend)} (the vendor's image there uninstalls it)"
        return text

    def says(self, key: str, value: str) -> Verdict | None:
        m = self._lm.model
        if key == "vllm_ascend":
            r = self._row(value)
            verdict = _row(f"vllm_ascend/{value}", r, f"vllm-ascend {value} {self._installs(r)}")
            if r.triton_ascend is not None and r.runs_on is not None and r.runs_on.without_triton_ascend:
                verdict = Verdict(
                    message=verdict.message,
                    rule=f"{verdict.rule}, vllm_ascend/{value}.runs_on",
                    source=f"{verdict.source}; {r.runs_on.source_text}",
                    confidence=verdict.confidence,
                )
            return verdict
        if key == "triton_ascend":
            if value == ABSENT:  # a release without one, or with a chip its image leaves without one
                fits = [
                    r.version
                    for r in m.vllm_ascend
                    if r.triton_ascend is None or (r.runs_on is not None and r.runs_on.without_triton_ascend)
                ]
            else:
                fits = [r.version for r in m.vllm_ascend if r.triton_ascend is not None and versions.same(r.triton_ascend, value)]
            return Verdict(
                message=f"triton_ascend {value} fits vllm-ascend {_fmt(fits)}",
                rule="vllm_ascend/*.triton_ascend",
                source="matrices/serving.yaml",
            )
        without = [r.version for r in m.vllm_ascend if r.runs_on is not None and value in r.runs_on.without_triton_ascend]
        if not without:
            return None
        return Verdict(
            message=f"chip {value}: vllm-ascend {_fmt(without)} installs no triton-ascend there",
            rule="vllm_ascend/*.runs_on.without_triton_ascend",
            source="matrices/serving.yaml",
        )

    def summary(self, a: Assignment) -> str | None:
        r = self._row(a["vllm_ascend"])
        want = installs_triton(r, a["chip"])
        installs = f"installs triton-ascend {want}" if want else "installs no triton-ascend"
        return f"vllm-ascend {r.version} {installs} on chip {a['chip']}, not triton_ascend {a['triton_ascend']}"


def vllm_ascend_triton_ascend(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ triton_ascend ↔ chip: a vllm-ascend release installs one triton-ascend release, or none where its
    stack has none or where the vendor's image for the chip uninstalls it (matrices/serving.yaml,
    `vllm_ascend[].triton_ascend`, `vllm_ascend[].runs_on.without_triton_ascend`)."""
    return _VllmAscendTriton(lm)


def vllm_ascend_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ python: a vllm-ascend release installs on the Pythons of its wheels' tags (Requires-Python where
    PyPI has no wheel), within the bound its documentation states beyond that where the row has one (an sdist-only
    release's versioning table: <3.13) (matrices/serving.yaml, `vllm_ascend[].python`,
    `vllm_ascend[].python_documented`)."""

    def ok(r: VllmAscendRelease, py: str) -> bool:
        documented = r.python_documented
        return versions.satisfies(py, r.python) and (documented is None or versions.satisfies(py, documented.spec))

    def said(r: VllmAscendRelease) -> str:
        documented = r.python_documented
        if documented is None:
            return f"needs Python {r.python}"
        where = documented.sources[0].split(" in ")[0].split(":")[0]  # the document, e.g. its versioning_policy.md
        return f"needs Python {r.python} and {documented.spec} ({where}, {documented.confidence})"

    edge = _spec_relation(lm, "vllm_ascend-python", "vllm_ascend", "vllm-ascend", lm.vllm_ascend, "python", "python", ok, said)
    say_row = edge._say["vllm_ascend"]

    def say_release(v: str) -> Verdict | None:  # a documented bound is cited with its own source
        r = lm.vllm_ascend(v)
        if v == ABSENT or r is None or r.python_documented is None:
            return say_row(v)
        return _row(f"vllm_ascend/{v}.python_documented", r.python_documented, f"vllm-ascend {v} {said(r)}")

    say_python = edge._say["python"]

    def say_py(py: str) -> Verdict | None:  # the releases only their documentation keeps from it, with its source
        fits = say_python(py)
        bounded = [
            r
            for r in lm.model.vllm_ascend
            if r.python_documented is not None and versions.satisfies(py, r.python) and not ok(r, py)
        ]
        if fits is None or not bounded:
            return fits
        docs = sorted({d.sources[0].split(" in ")[0] for r in bounded if (d := r.python_documented) is not None})
        return Verdict(
            message=f"{fits.message}; vllm-ascend {_fmt([r.version for r in bounded])} allow it by Requires-Python, "
            f"but their documentation bounds Python ({_fmt(sorted({d.spec for r in bounded if (d := r.python_documented)}))})",
            rule=f"{fits.rule}, vllm_ascend/*.python_documented",
            source=f"{fits.source} (vllm_ascend[].python_documented: {', '.join(docs)} in their sdists)",
        )

    edge._say["vllm_ascend"] = say_release
    edge._say["python"] = say_py
    return edge


def vllm_ascend_glibc(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ os/arch: the wheels of a vllm-ascend release on an arch are manylinux_2_<N>, so the OS must ship
    glibc ≥ 2.N there; no wheel for the arch, no install (matrices/serving.yaml, `vllm_ascend[].manylinux`, derived
    from PyPI's files by `envkit matrix refresh`; matrices/platform.yaml, `operating_systems[].glibc`)."""
    return _GlibcConstraint(
        lm, "vllm_ascend", "vllm-ascend", lambda v: known(lm.vllm_ascend(v), f"vllm-ascend {v}"), "vllm_ascend-glibc"
    )


def _build_text(lm: LoadedMatrix, r: VllmAscendRelease) -> str | None:
    """'built for A2 (chip 910b)' of a release whose PyPI wheels carry a device build; None without one."""
    b = r.device_build
    if b is None:
        return None
    return f"has PyPI wheels built for {b.device_type or b.soc_version} (chip {lm.build_chip(b) or 'unknown'})"


def vllm_ascend_chip(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ chip: vllm-ascend builds for the device families of `vllm_ascend_devices` only (a chip with none,
    e.g. 910, is unsupported), and a release whose PyPI wheels are built for one family (`device_build`, derived from
    their `vllm_ascend/_build_info.py`) runs on that family's chip only: its worker refuses another NPU at start. An
    sdist-only release has no device build (it is built for the chip where it installs). A release that states its
    chips (`runs_on`) runs on those only (matrices/serving.yaml, `vllm_ascend_devices`, `vllm_ascend[].device_build`,
    `vllm_ascend[].runs_on`)."""
    m = lm.model
    families = {d.chip for d in m.vllm_ascend_devices}

    def ok(v: str, chip: str) -> bool:
        if v == ABSENT:
            return True
        r = known(lm.vllm_ascend(v), f"vllm-ascend {v}")
        if families and chip not in families:
            return False
        if r.runs_on is not None and chip not in r.runs_on.chips:
            return False
        return r.device_build is None or lm.build_chip(r.device_build) == chip

    def say_release(v: str) -> Verdict:
        r = known(lm.vllm_ascend(v), f"vllm-ascend {v}")
        built = _build_text(lm, r)
        if built is not None and r.device_build is not None:
            return _row(
                f"vllm_ascend/{v}.device_build",
                r.device_build,
                f"vllm-ascend {v} {built}: its worker refuses an NPU of another family at start",
            )
        if r.runs_on is not None:
            return _row(f"vllm_ascend/{v}.runs_on", r.runs_on, f"vllm-ascend {v} runs on chips {_fmt(r.runs_on.chips)}")
        return Verdict(
            message=f"vllm-ascend {v} builds for chips {_fmt(sorted(families))}",
            rule="vllm_ascend_devices",
            source=m.vllm_ascend_devices[0].source_text if m.vllm_ascend_devices else "matrices/serving.yaml",
        )

    def say_chip(chip: str) -> Verdict:
        d = lm.vllm_ascend_device(chip)
        if families and d is None:
            return Verdict(
                message=f"vllm-ascend builds for no device family of chip {chip} (it supports chips {_fmt(sorted(families))})",
                rule="vllm_ascend_devices",
                source=m.vllm_ascend_devices[0].source_text,
            )
        fits = [r.version for r in m.vllm_ascend if r.device_build is not None and lm.build_chip(r.device_build) == chip]
        sdists = [r.version for r in m.vllm_ascend if r.sdist_only and (r.runs_on is None or chip in r.runs_on.chips)]
        family = f" ({d.device_types[0]}, SOC_VERSION {d.soc_versions[0]}*)" if d is not None else ""
        return Verdict(
            message=f"chip {chip}{family}: vllm-ascend releases with PyPI wheels built for it: {_fmt(fits)}; "
            f"sdist-only releases, built for the chip where they install (pin one): {_fmt(sdists)}",
            rule="vllm_ascend/*.device_build",
            source="matrices/serving.yaml (vllm_ascend_devices, vllm_ascend[].device_build)",
        )

    def summary(a: Assignment) -> str:
        r = known(lm.vllm_ascend(a["vllm_ascend"]), f"vllm-ascend {a['vllm_ascend']}")
        if families and a["chip"] not in families:
            return f"vllm-ascend does not support chip {a['chip']}"
        if r.runs_on is not None and a["chip"] not in r.runs_on.chips:
            return f"vllm-ascend {a['vllm_ascend']} runs on chips {_fmt(r.runs_on.chips)}, not chip {a['chip']}"
        return f"vllm-ascend {a['vllm_ascend']} {_build_text(lm, r)}, not chip {a['chip']}"

    return Relation("vllm_ascend-chip", "vllm_ascend", "chip", ok, say_release, say_chip, summary)


def vllm_ascend_transformers(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """vllm_ascend ↔ transformers: a vllm-ascend release installs with the Transformers that both its wheel METADATA
    and its vLLM's accept (Requires-Dist): an exact pin (`==X`) where the release pins one, else the range of both
    bounds (0.11.0: vllm-ascend `transformers<=4.57.1` and vLLM 0.11.0 `transformers>=4.55.2`); any where none was
    read (matrices/serving.yaml, `vllm_ascend[].transformers`: its `spec` and the sources of each bound)."""

    def ok(r: VllmAscendRelease, version: str) -> bool:
        return r.transformers is None or versions.satisfies(version, r.transformers.spec)

    return _spec_relation(
        lm,
        "vllm_ascend-transformers",
        "vllm_ascend",
        "vllm-ascend",
        lm.vllm_ascend,
        "transformers",
        "transformers",
        ok,
        lambda r: f"needs transformers {r.transformers.spec}" if r.transformers else "states no Transformers bound",
        cite=lambda r: r.transformers,
    )


def triton_ascend_cann(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """triton_ascend ↔ cann: triton-ascend versions are strictly bound to CANN: a release works with the CANN of its
    row only (matrices/serving.yaml, `triton_ascend[].cann`)."""
    return _spec_relation(
        lm,
        "triton_ascend-cann",
        "triton_ascend",
        "triton-ascend",
        lm.triton_ascend,
        "cann",
        "cann",
        lambda r, c: any(versions.same(x, c) for x in r.cann),
        lambda r: f"is bound to CANN {_fmt(r.cann)} (versions strictly bound to CANN)",
    )


def triton_ascend_chip(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """triton_ascend ↔ chip: triton-ascend supports Atlas A2/A3 only (matrices/serving.yaml, `triton_ascend[].chips`)."""
    return _spec_relation(
        lm,
        "triton_ascend-chip",
        "triton_ascend",
        "triton-ascend",
        lm.triton_ascend,
        "chips",
        "chip",
        lambda r, chip: chip in r.chips,
        lambda r: f"supports chips {_fmt(r.chips)} only",
    )


def triton_ascend_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """triton_ascend ↔ python: a triton-ascend release has wheels for the Pythons of its range; any where none is
    stated (matrices/serving.yaml, `triton_ascend[].python`)."""
    return _spec_relation(
        lm,
        "triton_ascend-python",
        "triton_ascend",
        "triton-ascend",
        lm.triton_ascend,
        "python",
        "python",
        lambda r, py: r.python is None or versions.satisfies(py, r.python),
        lambda r: f"needs Python {r.python}" if r.python else "states no Python range",
    )


def triton_ascend_glibc(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """triton_ascend ↔ os/arch: as vllm_ascend_glibc, for the triton-ascend releases on PyPI (matrices/serving.yaml,
    `triton_ascend[].manylinux`)."""
    return _GlibcConstraint(
        lm, "triton_ascend", "triton-ascend", lambda v: known(lm.triton_ascend(v), f"triton-ascend {v}"), "triton_ascend-glibc"
    )


def mindspeed_torch_npu(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """mindspeed ↔ torch_npu: a MindSpeed release supports the torch_npu releases of its TorchNPU lines
    (matrices/serving.yaml, `mindspeed[].torch_npu_lines`; matrices/torch_npu.yaml `torch_npu[].line`)."""
    return _spec_relation(
        lm,
        "mindspeed-torch_npu",
        "mindspeed",
        "MindSpeed",
        lm.mindspeed,
        "torch_npu_lines",
        "torch_npu",
        lambda r, t: lm.torch_npu_row(t).line in r.torch_npu_lines,
        lambda r: f"supports TorchNPU {_fmt(r.torch_npu_lines)} only",
    )


def mindspeed_cann(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """mindspeed ↔ cann: a MindSpeed release supports the CANN of its version table (matrices/serving.yaml,
    `mindspeed[].cann`)."""
    return _spec_relation(
        lm,
        "mindspeed-cann",
        "mindspeed",
        "MindSpeed",
        lm.mindspeed,
        "cann",
        "cann",
        lambda r, c: bool(lm.series_members(r.cann, [c])),
        lambda r: f"supports CANN {_fmt(r.cann)} only",
    )


def mindspeed_torch(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """mindspeed ↔ torch: a MindSpeed release supports the PyTorch versions it lists; any its TorchNPU line pins
    where none is listed (matrices/serving.yaml, `mindspeed[].torch`)."""
    return _spec_relation(
        lm,
        "mindspeed-torch",
        "mindspeed",
        "MindSpeed",
        lm.mindspeed,
        "torch",
        "torch",
        lambda r, t: not r.torch or any(versions.same(x, versions.parse(t).public) for x in r.torch),
        lambda r: f"supports PyTorch {_fmt(r.torch)} only" if r.torch else "lists no PyTorch versions",
    )


def mindspeed_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """mindspeed ↔ python: a MindSpeed release supports the Pythons of its range (26.1.0: Python 3.10 only)
    (matrices/serving.yaml, `mindspeed[].python`)."""
    return _spec_relation(
        lm,
        "mindspeed-python",
        "mindspeed",
        "MindSpeed",
        lm.mindspeed,
        "python",
        "python",
        lambda r, py: r.python is None or versions.satisfies(py, r.python),
        lambda r: f"needs Python {r.python}" if r.python else "states no Python range",
    )


def mindspeed_chip(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """mindspeed ↔ chip: a MindSpeed release supports the chips its install guide or download page names; any where
    none is stated (matrices/serving.yaml, `mindspeed[].chips`)."""
    return _spec_relation(
        lm,
        "mindspeed-chip",
        "mindspeed",
        "MindSpeed",
        lm.mindspeed,
        "chips",
        "chip",
        lambda r, chip: r.chips is None or chip in r.chips.chips,
        lambda r: f"supports chips {_fmt(r.chips.chips)} only" if r.chips else "states no chips",
        cite=lambda r: r.chips,
    )


# --- Ray: serving across nodes (matrices/serving.yaml `ray`) ------------------------------------------
def _ray_row_name(r: RayRelease) -> str:
    return f"ray/{r.version} (vllm_ascend {r.vllm_ascend})"


def ray_vllm_ascend(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """ray ↔ vllm_ascend: serving across nodes is vllm-ascend's Ray way; a vllm-ascend release takes the Ray the
    matrix pins for its range (the bound its images install); one without a row serves on one node only
    (matrices/serving.yaml, `ray[].vllm_ascend`)."""

    def fits(va: str, ray: str) -> bool:
        r = lm.ray_for(va)
        return r is not None and versions.same(r.version, ray)

    def says_va(va: str) -> Verdict:
        r = lm.ray_for(va)
        if r is None:
            return Verdict(
                message=f"the matrix has no Ray for vllm-ascend {va}: it serves on one node only",
                rule="ray/*.vllm_ascend",
                source="matrices/serving.yaml",
            )
        return _row(
            _ray_row_name(r), r, f"vllm-ascend {va} serves across nodes with ray {r.version} (its images install ray {r.spec})"
        )

    def says_ray(ray: str) -> Verdict:
        ranges = [r.vllm_ascend for r in lm.model.ray if versions.same(r.version, ray)]
        return Verdict(
            message=f"ray {ray} is the Ray of vllm-ascend {_fmt(ranges)}",
            rule="ray/*.vllm_ascend",
            source="matrices/serving.yaml",
        )

    def summary(a: Assignment) -> str:
        r = lm.ray_for(a["vllm_ascend"])
        took = f"takes ray {r.version}" if r is not None else "has no Ray in the matrix (one node only)"
        return f"vllm-ascend {a['vllm_ascend']} {took}, not ray {a['ray']}"

    return Relation("vllm_ascend-ray", "vllm_ascend", "ray", fits, says_va, says_ray, summary)


def _ray(lm: LoadedMatrix, v: str) -> RayRelease:
    return known(lm.ray(v), f"ray {v}")


def ray_python(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """ray ↔ python: a Ray release has wheels for the Pythons of its range (matrices/serving.yaml, `ray[].python`)."""

    def says(v: str) -> Verdict:
        return _row(f"ray/{v}", _ray(lm, v), f"ray {v} has wheels for Python {_ray(lm, v).python}")

    def says_python(py: str) -> Verdict | None:
        # what the matrix's Ray releases have wheels for (the python side of a chain that empties ray)
        releases = versions.newest_first(list({versions.parse(r.version).key: r.version for r in lm.model.ray}.values()))
        if len(releases) == 1:
            return says(releases[0])
        fits = [v for v in releases if versions.satisfies(py, _ray(lm, v).python)]
        text = f"cp{py.replace('.', '')} wheels exist for ray {_fmt(fits) or 'none'}"
        return Verdict(message=text, rule="ray/*.python", source="matrices/serving.yaml")

    return Relation(
        "ray-python",
        "ray",
        "python",
        lambda v, py: v == ABSENT or versions.satisfies(py, _ray(lm, v).python),
        says,
        says_python,
        lambda a: f"ray {a['ray']} has wheels for Python {_ray(lm, a['ray']).python}, not Python {a['python']}",
    )


def ray_glibc(lm: LoadedMatrix, strict: Strictness) -> Constraint:
    """ray ↔ os/arch: as vllm_ascend_glibc, for the Ray release's manylinux wheels (matrices/serving.yaml,
    `ray[].manylinux`)."""
    return _GlibcConstraint(lm, "ray", "ray", lambda v: _ray(lm, v), "ray-glibc")


# The fixed edges, in the order the resolver checks and explains them.
EDGES: tuple[Edge, ...] = (
    chip_cann,
    chip_driver,
    chip_firmware,
    chip_torch_npu,
    chip_torch_npu_serving,
    driver_firmware,
    cann_driver,
    torch_npu_cann,
    torch_npu_torch,
    torch_npu_python,
    cann_python,
    os_arch,
    torch_npu_glibc,
    vllm_ascend_vllm,
    vllm_ascend_torch_npu,
    vllm_ascend_cann,
    vllm_ascend_triton_ascend,
    vllm_ascend_python,
    vllm_ascend_glibc,
    vllm_ascend_transformers,
    vllm_ascend_chip,
    triton_ascend_cann,
    triton_ascend_chip,
    triton_ascend_python,
    triton_ascend_glibc,
    mindspeed_torch_npu,
    mindspeed_cann,
    mindspeed_torch,
    mindspeed_python,
    mindspeed_chip,
    ray_vllm_ascend,
    ray_python,
    ray_glibc,
)


def build_constraints(lm: LoadedMatrix, *, strict_cann: bool = False, strict_hdk: bool = False) -> list[Constraint]:
    """All constraints of the matrix: each edge of `EDGES`, then the generic `severity: error` rules of
    matrices/python_packages.yaml. `strict_*` keep only vendor-paired edges (validated-first passes)."""
    strict = Strictness(cann=strict_cann, hdk=strict_hdk)
    out = [edge(lm, strict) for edge in EDGES]
    out += [RuleConstraint(rule, lm) for rule in lm.model.rules if rule.severity == "error"]
    return out

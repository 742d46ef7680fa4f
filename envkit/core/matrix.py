"""Load the compatibility matrix (matrices/*.yaml), index it, and prove it consistent."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from envkit import versions
from envkit.core.matrix_records import (
    NESTED,
    CannRelease,
    Chip,
    DeviceBuild,
    HdkPatch,
    HdkRelease,
    Matrix,
    MindSpeedRelease,
    OperatingSystem,
    RayRelease,
    Rule,
    TorchBuild,
    TorchNpuLine,
    TorchNpuRelease,
    TritonAscendRelease,
    VllmAscendDevice,
    VllmAscendRelease,
)
from envkit.errors import MatrixError, Where
from envkit.io.yamlio import fast_load, load_file
from envkit.models.stackkeys import STACK_KEYS
from envkit.records import Value, fields
from envkit.resources import matrices_dir

_set = object.__setattr__

if typing.TYPE_CHECKING:
    from envkit.models import matrix as schema

# The order in which sections must appear sorted (key function, reverse).
SORTED_SECTIONS: dict[str, tuple[str, bool]] = {
    "hdk": ("version", False),
    "cann": ("version", False),
    "pythons": ("version", False),
    "torch_npu": ("version", True),
    "torch_builds": ("torch", True),
}


_Row = TypeVar("_Row")


class SourcedRow(Protocol):
    """A sourced matrix record (every row with source and confidence): what a verdict or a lock cites of it."""

    @property
    def confidence(self) -> Literal["stated", "derived", "inferred"]: ...
    @property
    def disagreement(self) -> str | None: ...
    @property
    def sources(self) -> list[str]: ...
    @property
    def source_text(self) -> str: ...


VersionKey = tuple[tuple[int, int], ...]


class LoadedMatrix:
    """The matrix (plain records, `envkit.core.matrix_records`) with its lookups, its digest and where each section came
    from. (A plain class, not a dataclass: see `envkit.records.Value`.)"""

    model: Matrix
    digest: str
    files: dict[str, Path]
    chips: dict[str, Chip]
    oses: dict[str, OperatingSystem]
    lines: dict[str, TorchNpuLine]
    rules: dict[str, Rule]

    def __init__(self, model: Matrix, digest: str, files: dict[str, Path]) -> None:
        self.model = model
        self.digest = digest
        self.files = files
        m = self.model
        self.chips = {c.id: c for c in m.chips}
        self.oses = {o.id: o for o in m.operating_systems}
        self.lines = {ln.line: ln for ln in m.torch_npu_lines}
        self.rules = {r.id: r for r in m.rules}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, LoadedMatrix)
        return (self.model, self.digest, self.files) == (other.model, other.digest, other.files)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LoadedMatrix(digest={self.digest!r}, files={self.files!r})"

    # --- lookups -------------------------------------------------------------------------------
    @functools.cached_property
    def hdk_by_key(self) -> dict[VersionKey, HdkRelease]:
        """Release, alias, file spelling (package_version, per chip) and patch builds -> the release."""
        out: dict[VersionKey, HdkRelease] = {}
        for h in self.model.hdk:
            spellings = [h.version, *h.aliases, *h.chip_package_versions.values(), *(p.version for p in h.patches)]
            if h.package_version:
                spellings.append(h.package_version)
            for spelling in spellings:
                out.setdefault(versions.parse(spelling).key, h)
        return out

    @functools.cached_property
    def hdk_patch_by_key(self) -> dict[VersionKey, HdkPatch]:
        return {versions.parse(p.version).key: p for h in self.model.hdk for p in h.patches}

    @functools.cached_property
    def cann_by_key(self) -> dict[VersionKey, CannRelease]:
        return {versions.parse(c.version).key: c for c in self.model.cann}

    @functools.cached_property
    def torch_npu_by_key(self) -> dict[VersionKey, TorchNpuRelease]:
        return {versions.parse(t.version).key: t for t in self.model.torch_npu}

    @functools.cached_property
    def firmware_alias(self) -> dict[VersionKey, HdkRelease]:
        """Firmware given by its own Version= (7.x) -> the HDK release that ships it."""
        return {versions.parse(h.firmware_version).key: h for h in self.model.hdk if h.firmware_version}

    def hdk(self, version: str) -> HdkRelease | None:
        """The HDK release of a version as the host or a user spells it: ``25.0.RC1``, ``25.0.rc1.1``
        (its package_version), ``24.1.rc2.2`` (a patch build: accepted as its release)."""
        row = _lookup(self.hdk_by_key, version)
        if row is None:
            base = versions.patch_base(version)
            row = _lookup(self.hdk_by_key, base) if base else None
        return row

    def hdk_patch(self, version: str) -> HdkPatch | None:
        """The sourced patch row of a patch spelling (24.1.rc2.2), None for a release or an unrecorded patch."""
        return _lookup(self.hdk_patch_by_key, version)

    def compatible_firmware(self, driver: str) -> str | None:
        """The driver's compatible_version_fw: the patch's own range where sourced, else its release's."""
        patch = self.hdk_patch(driver)
        if patch is not None and patch.compatible_firmware:
            return patch.compatible_firmware
        row = self.hdk(driver)
        return row.compatible_firmware if row else None

    def cann(self, version: str) -> CannRelease | None:
        return _lookup(self.cann_by_key, version)

    def torch_npu(self, version: str) -> TorchNpuRelease | None:
        return _lookup(self.torch_npu_by_key, version)

    # the rows of versions known to be in the matrix (a search domain, a resolved stack): KeyError otherwise
    def hdk_row(self, version: str) -> HdkRelease:
        return known(self.hdk(version), f"HDK {version}")

    def cann_row(self, version: str) -> CannRelease:
        return known(self.cann(version), f"CANN {version}")

    def torch_npu_row(self, version: str) -> TorchNpuRelease:
        return known(self.torch_npu(version), f"torch_npu {version}")

    @functools.cached_property
    def torch_builds_by_key(self) -> dict[tuple[VersionKey, str], TorchBuild]:
        return {(versions.parse(b.torch).key, b.arch): b for b in self.model.torch_builds}

    def torch_build(self, torch: str, arch: str) -> TorchBuild | None:
        """Where torch's CPU build for `arch` comes from (index id, pin spelling); None: no row."""
        key = _key(versions.parse(torch).public)
        return self.torch_builds_by_key.get((key, arch)) if key is not None else None

    # --- serving and training frameworks (matrices/serving.yaml) ------------------------------------
    @functools.cached_property
    def vllm_ascend_by_key(self) -> dict[VersionKey, VllmAscendRelease]:
        return {versions.parse(r.version).key: r for r in self.model.vllm_ascend}

    @functools.cached_property
    def triton_ascend_by_key(self) -> dict[VersionKey, TritonAscendRelease]:
        return {versions.parse(r.version).key: r for r in self.model.triton_ascend}

    def vllm_ascend(self, version: str) -> VllmAscendRelease | None:
        return _lookup(self.vllm_ascend_by_key, version)

    def triton_ascend(self, version: str) -> TritonAscendRelease | None:
        return _lookup(self.triton_ascend_by_key, version)

    def build_chip(self, build: DeviceBuild) -> str | None:
        """The chip a wheel's device build is for (`device_chip` of its `__device_type__` and `__soc_version__`)."""
        return self.device_chip(build.device_type, build.soc_version)

    def device_chip(self, device_type: str | None, soc_version: str | None) -> str | None:
        """The chip a vllm-ascend build is for (`vllm_ascend_devices`: the family of its `__device_type__`, or, without
        one, the family whose SOC_VERSION prefix its `__soc_version__` starts with); None: a build the matrix does not
        know, or one that says neither."""
        soc = (soc_version or "").lower()
        for d in self.model.vllm_ascend_devices:
            if device_type is not None and device_type in d.device_types:
                return d.chip
            if device_type is None and soc and any(soc.startswith(p) for p in d.soc_versions):
                return d.chip
        return None

    def vllm_ascend_device(self, chip: str) -> VllmAscendDevice | None:
        """The vllm-ascend device family of `chip` (`vllm_ascend_devices`); None: vllm-ascend builds for none."""
        return next((d for d in self.model.vllm_ascend_devices if d.chip == chip), None)

    def ray(self, version: str) -> RayRelease | None:
        """A Ray release of the `ray` table: of its rows (which agree on its wheels: `check_ray`), the surest one."""
        key = _key(version)
        rows = [r for r in self.model.ray if key is not None and versions.parse(r.version).key == key]
        return min(rows, key=lambda r: ("stated", "derived", "inferred").index(r.confidence), default=None)

    def ray_versions(self) -> list[str]:
        """The Ray releases the `ray` table pins, each once, newest first."""
        return versions.newest_first(list({versions.parse(r.version).key: r.version for r in self.model.ray}.values()))

    def ray_for(self, vllm_ascend: str) -> RayRelease | None:
        """The `ray` row whose vllm-ascend range holds `vllm_ascend` (the ranges do not overlap); None: the matrix
        has no Ray for it, so it serves on one node only."""
        return next((r for r in self.model.ray if versions.satisfies(vllm_ascend, r.vllm_ascend)), None)

    def mindspeed(self, version: str) -> MindSpeedRelease | None:
        """A MindSpeed release by its docs' spelling (``2.2.0_core_r0.12.1``), case-insensitively."""
        return next((r for r in self.model.mindspeed if r.version.lower() == str(version).strip().lower()), None)

    def firmware(self, version: str) -> HdkRelease | None:
        return self.hdk(version) or _lookup(self.firmware_alias, version)

    def package(self, name: str) -> list[str]:
        for p in self.model.packages:
            if p.name == name:
                return list(p.recommended)
        return []

    def series_members(self, series: list[str], candidates: list[str]) -> list[str]:
        return [c for c in candidates if any(versions.in_series(c, s) for s in series)]

    def index_url(self, index_id: str) -> str:
        for idx in self.model.indexes:
            if idx.id == index_id:
                return idx.url
        raise KeyError(index_id)


def _key(version: str) -> VersionKey | None:
    try:
        return versions.parse(version).key
    except versions.InvalidVersion:
        return None


def known(row: _Row | None, what: str) -> _Row:
    """A row the caller knows is there (a value of a search domain, of a resolved stack)."""
    if row is None:
        raise KeyError(f"{what} is not in the matrix")
    return row


def _lookup(table: dict[VersionKey, _Row], version: str) -> _Row | None:
    """The row of `version` in a table keyed by version key; None for an unknown or unparsable version."""
    key = _key(version)
    return table.get(key) if key is not None else None


def _section_line(path: Path, loc: tuple[Any, ...], section: str) -> tuple[int | None, str]:
    """The line of a validation error inside a matrix file, found by re-reading it with line tracking."""
    try:
        _, lines = load_file(path)
    except Exception:  # noqa: BLE001 - best effort for an error message
        return None, section
    parts = [section, *[str(p) for p in loc[1:]]]
    while parts:
        key = ".".join(parts)
        if key in lines:
            return lines[key], key
        parts.pop()
    return None, section


def _cache_dir() -> Path:
    base = os.environ.get("ENVKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "envkit"
    )
    return Path(base) / "matrix"


# --- the compiled matrix store -----------------------------------------------------------------
# One JSON file per matrix digest (and per text of the matrix models, `_model_fingerprint`) in the cache dir: a
# header line (format, key, sha256 of the rest) and the validated matrix as plain data with the file of each
# section. A hit is one read and plain records (`envkit.core.matrix_records`): no YAML, no pydantic. Plain JSON only, so
# loading a file from the cache dir runs no code; anything unexpected (a truncated, edited or foreign file) is a
# miss, and the YAML path rebuilds the file.
STORE_FORMAT = "envkit-matrix-store/1"


def record(cls: type[_Row], data: Any) -> _Row:
    """A plain record (and the records it nests, `matrix_records.NESTED`) from its plain data. TypeError, KeyError or
    ValueError when the data does not have the record's shape."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: not a mapping")
    kwargs = dict(data)
    for name, how, sub in NESTED.get(cls, ()):
        value = kwargs[name]
        if how == "one" or how == "optional" and value is not None:
            kwargs[name] = record(sub, value)
        elif how == "list":
            if not isinstance(value, list):
                raise TypeError(f"{cls.__name__}.{name}: not a list")
            kwargs[name] = [record(sub, item) for item in value]
    return cls(**kwargs)


def plain(model: schema.Matrix) -> Matrix:
    """The plain records of a validated matrix model (what the store holds, rebuilt the same way)."""
    return record(Matrix, model.model_dump(mode="json"))


@functools.lru_cache(maxsize=1)
def _model_fingerprint() -> str:
    """Changes with the text of the matrix models, of what their validators call and of the records."""
    from envkit.core.matrix_records import MODEL_SOURCES

    digest = hashlib.sha256(STORE_FORMAT.encode())
    base = Path(__file__).parents[1]  # envkit/: MODEL_SOURCES are relative to it
    for rel in (*MODEL_SOURCES, "models/tables.py", "core/matrix_records.py", "records.py"):
        try:
            digest.update(b"\0" + rel.encode() + b"\0" + (base / rel).read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()[:16]


def _store_path(digest: str) -> Path:
    return _cache_dir() / f"{digest.split(':', 1)[1]}-{_model_fingerprint()}.json"


def _from_store(digest: str, folder: Path, names: set[str]) -> LoadedMatrix | None:
    """The matrix of `digest` from the store; None on a miss (absent, unreadable, corrupt, foreign)."""
    path = _store_path(digest)
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        if json.loads(head) != {"format": STORE_FORMAT, "key": path.stem, "sha256": hashlib.sha256(body).hexdigest()}:
            return None
        data = json.loads(body)
        files = {str(section): name for section, name in data["files"].items()}
        if not all(isinstance(name, str) and name in names for name in files.values()):
            return None
        model = record(Matrix, data["matrix"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return LoadedMatrix(model=model, digest=digest, files={s: folder / n for s, n in files.items()})


def _to_store(digest: str, data: dict[str, Any], origin: dict[str, Path]) -> None:
    path = _store_path(digest)
    body = json.dumps({"files": {s: p.name for s, p in origin.items()}, "matrix": data}, separators=(",", ":")).encode()
    head = json.dumps({"format": STORE_FORMAT, "key": path.stem, "sha256": hashlib.sha256(body).hexdigest()}).encode()
    try:
        from envkit.io.outputs import atomic_write_bytes

        atomic_write_bytes(path, head + b"\n" + body, fsync=False)
    except OSError:
        pass  # a read-only home is fine: the store is only for speed


def _digest(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


# matrices/*.yaml files that are not part of the stack matrix (nor of its digest): each is read by its own job
NOT_MATRIX_FILES = frozenset({"migration.yaml"})  # `envkit scan`'s rules and dependency table (envkit.artifacts.project.table)


def load_matrix_from(folder: Path, *, use_cache: bool = False) -> LoadedMatrix:
    """Load and validate every matrices/*.yaml (but NOT_MATRIX_FILES). With use_cache, the compiled store of the
    digest skips the YAML and the validation (one read, plain records)."""
    files = sorted(p for p in folder.glob("*.yaml") if p.name not in NOT_MATRIX_FILES)
    if not files:
        raise MatrixError(f"no matrix files in {folder}", where=Where(str(folder)))
    digest_text = _digest(files)
    if use_cache:
        cached = _from_store(digest_text, folder, {p.name for p in files})
        if cached is not None:
            return cached
    merged: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    for path in files:
        try:
            data = fast_load(path)
        except Exception as exc:  # noqa: BLE001 - re-read with marks for the message
            load_file(path)
            raise MatrixError(f"{path} cannot be read: {exc}", where=Where(str(path))) from None
        if not isinstance(data, dict):
            raise MatrixError(f"{path} must be a mapping of sections", where=Where(str(path), 1))
        if data.get("schema_version") != 1:
            raise MatrixError(
                f"{path}: schema_version must be 1, not {data.get('schema_version')!r}",
                where=Where(str(path), None, "schema_version"),
            )
        for section, value in data.items():
            if section == "schema_version":
                continue
            if section in merged:
                raise MatrixError(
                    f"section '{section}' appears in both {origin[section].name} and {path.name}",
                    where=Where(str(path), None, section),
                )
            merged[section] = value
            origin[section] = path
    from pydantic import ValidationError

    from envkit.models.matrix import Matrix as MatrixModel

    try:
        model = MatrixModel.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        section = str(loc[0]) if loc else ""
        src = origin.get(section)
        line, key = _section_line(src, loc, section) if src else (None, section)
        raise MatrixError(
            f"matrix row invalid: {first['msg']} ({len(exc.errors())} error(s))",
            where=Where(str(src) if src else None, line, ".".join(str(p) for p in loc)),
            hint="Fix the row; every row needs source and confidence (stated | derived | inferred).",
        ) from None
    data = model.model_dump(mode="json")
    if use_cache:
        _to_store(digest_text, data, origin)
    return LoadedMatrix(model=record(Matrix, data), digest=digest_text, files=origin)


@functools.lru_cache(maxsize=4)
def _load_cached(folder: str) -> LoadedMatrix:
    return load_matrix_from(Path(folder), use_cache=True)


def load_matrix(folder: Path | None = None) -> LoadedMatrix:
    """The shipped matrix (cached), or the one in `folder`."""
    return _load_cached(str(folder or matrices_dir()))


# --- consistency -----------------------------------------------------------------------------
class Problem(Value):
    """One inconsistency `check_matrix` found: the section, the row, what is wrong."""

    __slots__ = ("section", "row", "message")
    _fields = __slots__
    section: str
    row: str
    message: str

    def __init__(self, section: str, row: str, message: str) -> None:
        _set(self, "section", section)
        _set(self, "row", row)
        _set(self, "message", message)


AddProblem = Callable[[str, str, str], None]  # (section, row, message)


def check_matrix(lm: LoadedMatrix) -> list[Problem]:
    """Every reference resolves, no duplicates, sections sorted, every row sourced (the problems in the order of
    the checks below)."""
    problems: list[Problem] = []

    def add(section: str, row: str, msg: str) -> None:
        problems.append(Problem(section, row, msg))

    for check in (
        check_unique,
        check_sorted,
        check_hccl,
        check_platform_refs,
        check_torch_npu_rows,
        check_rules,
        check_artifacts,
        check_defaults,
        check_torch_builds,
        check_frameworks,
        check_sourced,
        check_images,
    ):
        check(lm, add)
    return problems


def _dupes(add: AddProblem, section: str, values: list[str], *, as_version: bool) -> None:
    """A problem for each value that repeats an earlier one (as a version: `8.5` repeats `8.5.0`)."""
    seen: dict[Any, str] = {}
    for v in values:
        k = versions.parse(v).key if as_version else v
        if k in seen:
            add(section, v, f"duplicate of {seen[k]}")
        seen[k] = v


def check_unique(lm: LoadedMatrix, add: AddProblem) -> None:
    """Each section's rows by their id, once; a chip's names (id, aliases, npu-smi names) one namespace."""
    m = lm.model
    _dupes(add, "chips", [c.id for c in m.chips], as_version=False)
    # a name a user or a host writes must mean one chip: ids, aliases and npu-smi names are one namespace
    _dupes(add, "chips", [n.lower() for c in m.chips for n in (c.id, *c.aliases, *c.npu_smi_names)], as_version=False)
    _dupes(add, "chips", [soc for c in m.chips for soc in c.soc_names], as_version=False)
    _dupes(add, "operating_systems", [o.id for o in m.operating_systems], as_version=False)
    _dupes(add, "pythons", [p.version for p in m.pythons], as_version=True)
    _dupes(
        add,
        "hdk",
        [h.version for h in m.hdk] + [a for h in m.hdk for a in h.aliases] + [p.version for h in m.hdk for p in h.patches],
        as_version=True,
    )
    _dupes(add, "cann", [c.version for c in m.cann], as_version=True)
    _dupes(add, "torch_npu", [t.version for t in m.torch_npu], as_version=True)
    _dupes(add, "torch_npu_lines", [ln.line for ln in m.torch_npu_lines], as_version=False)
    _dupes(add, "rules", [r.id for r in m.rules], as_version=False)
    _dupes(add, "artifacts", [a.file for a in m.artifacts], as_version=False)


def check_sorted(lm: LoadedMatrix, add: AddProblem) -> None:
    """The version sections in their order (SORTED_SECTIONS), the first row out of it named."""
    for section, (attr, reverse) in SORTED_SECTIONS.items():
        rows = [getattr(r, attr) for r in getattr(lm.model, section)]
        want = sorted(rows, key=versions.sort_key, reverse=reverse)
        if rows != want:
            first = next(i for i, (a, b) in enumerate(zip(rows, want, strict=True)) if a != b)
            add(section, rows[first], f"not sorted ({'newest' if reverse else 'oldest'} first): expected {want[first]} here")


def check_hccl(lm: LoadedMatrix, add: AddProblem) -> None:
    """matrices/hccl.yaml: one row per known chip in each per-chip table, a default among its values, unique names."""
    hccl = lm.model.hccl
    for section, rows in (("hccl.rank_tables", hccl.rank_tables), ("hccl.op_expansion_modes", hccl.op_expansion_modes),
                          ("hccl.ip_plans", hccl.ip_plans)):  # fmt: skip
        _dupes(add, section, [row.chip for row in rows], as_version=False)
        for row in rows:
            if row.chip not in lm.chips:
                add(section, row.chip, f"unknown chip {row.chip}")
    for op in hccl.op_expansion_modes:
        if op.default not in op.values:
            add("hccl.op_expansion_modes", op.chip, f"default {op.default} is not one of its values {op.values}")
    _dupes(add, "hccl.env", [e.name for e in hccl.env], as_version=False)
    _dupes(add, "hccl.error_codes", [e.code for e in hccl.error_codes], as_version=False)


def check_platform_refs(lm: LoadedMatrix, add: AddProblem) -> None:
    """What the OS, HDK, CANN and TorchNPU line rows name exists: arches, chips, HDK and CANN releases."""
    m = lm.model
    arch_ids = {a.id for a in m.arches}
    hdk_versions = [h.version for h in m.hdk]
    cann_versions = [c.version for c in m.cann]
    for o in m.operating_systems:
        for a in o.arches:
            if a not in arch_ids:
                add("operating_systems", o.id, f"unknown arch {a}")
    for h in m.hdk:
        for chip in [*h.chips, *h.chip_package_versions, *(c for p in h.patches for c in p.chips)]:
            if chip not in lm.chips:
                add("hdk", h.version, f"unknown chip {chip}")
        for p in h.patches:
            if lm.hdk(versions.patch_base(p.version) or "") is not h:
                add("hdk", h.version, f"patch {p.version} is not a patch spelling of {h.version}")
    for c in m.cann:
        for chip in c.chips:
            if chip not in lm.chips:
                add("cann", c.version, f"unknown chip {chip}")
        for ref in [*c.hdk_paired, *c.hdk_compatible]:
            if not lm.series_members([ref], hdk_versions + [a for h in m.hdk for a in h.aliases]):
                add("cann", c.version, f"HDK {ref} matches no HDK release")
        if c.python:
            try:
                versions.satisfies("3.10", c.python)
            except versions.InvalidVersion as exc:
                add("cann", c.version, str(exc))
    for ln in m.torch_npu_lines:
        for chip in ln.chips:
            if chip not in lm.chips:
                add("torch_npu_lines", ln.line, f"unknown chip {chip}")
        for ref in ln.cann_compatible:
            if not lm.series_members([ref], cann_versions):
                add("torch_npu_lines", ln.line, f"CANN {ref} matches no CANN release")


def _python_keys(lm: LoadedMatrix) -> set[Any]:
    return {versions.parse(p.version).key for p in lm.model.pythons}


def check_torch_npu_rows(lm: LoadedMatrix, add: AddProblem) -> None:
    """Each torch_npu row: its line and CANN exist and agree, its prerelease flag, Pythons and manylinux arches."""
    arch_ids = {a.id for a in lm.model.arches}
    python_versions = _python_keys(lm)
    for t in lm.model.torch_npu:
        if t.line is not None and t.line not in lm.lines:
            add("torch_npu", t.version, f"unknown TorchNPU line {t.line}")
        if t.cann is not None and lm.cann(t.cann) is None:
            add("torch_npu", t.version, f"CANN {t.cann} is not a CANN release of the matrix")
        if t.cann is not None and t.line is None:
            add("torch_npu", t.version, "a CANN pairing needs its TorchNPU line")
        if t.prerelease != versions.parse(t.version).is_prerelease:
            add("torch_npu", t.version, "prerelease must be true exactly for an rc/alpha/beta/dev version")
        for py in t.python or []:
            if versions.parse(py).key not in python_versions:
                add("torch_npu", t.version, f"Python {py} is not in pythons")
        for arch in t.manylinux:
            if arch not in arch_ids:
                add("torch_npu", t.version, f"unknown arch {arch} in manylinux")
        if t.line and lm.cann(t.cann or "") and not lm.series_members(lm.lines[t.line].cann_compatible, [t.cann or ""]):
            add("torch_npu", t.version, f"paired CANN {t.cann} is not in line {t.line}'s compatible list")


def check_rules(lm: LoadedMatrix, add: AddProblem) -> None:
    """Each rule names stack keys (or the OS's glibc) with valid specifiers, and either forbids or requires."""
    stack_keys = {*STACK_KEYS, "glibc"}  # rules name stack keys, and the OS's glibc
    for r in lm.model.rules:
        for k, v in [*r.when.items(), *r.requires.items()]:
            if k not in stack_keys:
                add("rules", r.id, f"unknown key {k}")
            if isinstance(v, str):
                try:
                    versions.satisfies("1.0", v)
                except versions.InvalidVersion as exc:
                    add("rules", r.id, str(exc))
        if r.forbid == bool(r.requires):
            add("rules", r.id, "a rule either forbids or requires, exactly one")


def check_artifacts(lm: LoadedMatrix, add: AddProblem) -> None:
    """Each vendor artifact's chip, release and arch exist."""
    arch_ids = {a.id for a in lm.model.arches}
    for art in lm.model.artifacts:
        if art.chip is not None and art.chip not in lm.chips:
            add("artifacts", art.file, f"unknown chip {art.chip}")
        release = lm.cann(art.release) if art.component == "cann" else lm.hdk(art.release)
        if release is None:
            add("artifacts", art.file, f"{art.component} release {art.release} is not in the matrix")
        if art.arch is not None and art.arch not in arch_ids:
            add("artifacts", art.file, f"unknown arch {art.arch}")


def check_defaults(lm: LoadedMatrix, add: AddProblem) -> None:
    """The embedded default chip, arch and OS exist."""
    arch_ids = {a.id for a in lm.model.arches}
    for key, value in lm.model.defaults.items():
        if key == "chip" and value not in lm.chips:
            add("defaults", key, f"unknown chip {value}")
        if key == "arch" and value not in arch_ids:
            add("defaults", key, f"unknown arch {value}")
        if key == "os" and value not in lm.oses:
            add("defaults", key, f"unknown os {value}")


def check_sourced(lm: LoadedMatrix, add: AddProblem) -> None:
    """Every row of a sourced section names a source."""
    for section in sourced_sections():
        for row in getattr(lm.model, section):
            if not row.sources or any(not s.strip() for s in row.sources):
                add(section, _row_name(row), "row without a source")


def check_images(lm: LoadedMatrix, add: AddProblem) -> None:
    """Base images (matrices/images.yaml): a known OS, one row per OS, a tag with the digest apart, a known Python,
    a source, and a note where no digest is pinned."""
    _dupes(add, "images", [i.os for i in lm.model.images], as_version=False)
    python_versions = _python_keys(lm)
    for img in lm.model.images:
        if img.os not in lm.oses:
            add("images", img.os, f"unknown os {img.os}")
        if "@" in img.image:
            add("images", img.os, "image must be repository:tag; the digest goes in `digest`")
        if img.python is not None and versions.parse(img.python).key not in python_versions:
            add("images", img.os, f"Python {img.python} is not in pythons")
        if not img.sources or any(not s.strip() for s in img.sources):
            add("images", img.os, "row without a source")
        if img.digest is None and not img.note:
            add("images", img.os, "a null digest needs a note saying why none is pinned")


# sections whose rows `check` holds to their source on their own terms (naming the row by its OS)
_OWN_SOURCE_CHECK = frozenset({"images"})


def sourced_sections() -> tuple[str, ...]:
    """The matrix's sections of sourced rows, in the model's order: every list of records with `sources` (the
    generated Matrix record's nested fields, `NESTED`), so that a section added to the model is checked with no
    change here; less those with their own check (`images`)."""
    return tuple(
        name for name, how, rec in NESTED[Matrix] if how == "list" and hasattr(rec, "sources") and name not in _OWN_SOURCE_CHECK
    )


def _row_name(row: Any) -> str:
    """How a problem names a row: its id or version, else its first text field of its own (a line, a torch
    release, a package name, a component)."""
    for attr in ("id", "version"):
        value = getattr(row, attr, None)
        if isinstance(value, str):
            return value
    own = (f for f in fields(row) if f not in ("source", "confidence", "validated", "note", "disagreement"))
    return next((v for v in (getattr(row, f) for f in own) if isinstance(v, str)), "?")


def check_torch_builds(lm: LoadedMatrix, add: AddProblem) -> None:
    """`torch_builds`: one row per torch release the torch_npu rows pin and per arch, a known index, a PyPI
    row without a local label (PyPI serves no `+cpu`), and the x86_64 `+label` a torch_npu wheel pins."""
    m = lm.model
    index_ids = {i.id for i in m.indexes}
    seen: set[tuple[VersionKey, str]] = set()
    for b in m.torch_builds:
        row = f"{b.torch} {b.arch}"
        key = (versions.parse(b.torch).key, b.arch)
        if key in seen:
            add("torch_builds", row, "duplicate row")
        seen.add(key)
        if b.index not in index_ids:
            add("torch_builds", row, f"unknown index {b.index}")
        if b.index == "pypi" and b.local:
            add("torch_builds", row, f"PyPI serves no +{b.local} build; a local label needs the index that serves it")
    if not m.torch_builds:
        return
    for t in m.torch_npu:
        for arch in sorted({a.id for a in m.arches}):
            build = lm.torch_build(t.torch, arch)
            if build is None:
                add("torch_builds", f"{t.torch} {arch}", f"no row for torch {t.torch} on {arch} (torch_npu {t.version} pins it)")
            elif arch == "x86_64" and t.x86_64_torch_local and build.local != t.x86_64_torch_local:
                add(
                    "torch_builds",
                    f"{t.torch} {arch}",
                    f"torch_npu {t.version} pins torch=={t.torch}+{t.x86_64_torch_local} on x86_64; this row gives "
                    + (f"+{build.local}" if build.local else "the plain version"),
                )


def check_ray(lm: LoadedMatrix, add: AddProblem) -> None:
    """`ray`: each row's pin within its own bound, one set of wheels per Ray release, and at most one row per
    vllm-ascend release of the matrix (the ranges do not overlap)."""
    m = lm.model
    wheels: dict[VersionKey, tuple[str, str]] = {}
    for r in m.ray:
        if not versions.satisfies(r.version, r.spec):
            add("ray", r.version, f"ray {r.version} is outside its own bound {r.spec}")
        key = versions.parse(r.version).key
        own = (r.python, repr(sorted(r.manylinux.items())))
        if wheels.setdefault(key, own) != own:
            add("ray", r.version, "rows of one Ray release name different Pythons or manylinux glibc")
    for va in m.vllm_ascend:
        rows = [r for r in m.ray if versions.satisfies(va.version, r.vllm_ascend)]
        if len(rows) > 1:
            ranges = ", ".join(r.vllm_ascend for r in rows)
            add("ray", rows[0].version, f"vllm-ascend {va.version} is in more than one range ({ranges})")


def with_bounds(values: list[str], specs: list[str]) -> list[str]:
    """`values`, then the versions the specifiers name as inclusive bounds (==X, >=X, <=X) and admit, newest first."""
    named = []
    for spec in specs:
        for part in spec.split(","):
            op, version = part.strip()[:2], part.strip()[2:].strip()
            if op in ("==", ">=", "<=") and not version.endswith(".*") and versions.satisfies(version, spec):
                named.append(version)
    seen = {versions.parse(v).key for v in values}
    extra = {versions.parse(v).key: v for v in named if versions.parse(v).key not in seen}
    return [*values, *versions.newest_first(list(extra.values()))]


def check_frameworks(lm: LoadedMatrix, add: AddProblem) -> None:
    """matrices/serving.yaml: no duplicates, newest first, and every CANN, torch_npu, triton-ascend, chip, TorchNPU
    line and index it names is in the matrix, unless the row says in `needs` that the matrix lacks it."""
    m = lm.model
    index_ids = {i.id for i in m.indexes}
    for section in ("vllm_ascend", "triton_ascend"):
        rows = [r.version for r in getattr(m, section)]
        if len({versions.parse(v).key for v in rows}) != len(rows):
            add(section, ",".join(rows), "duplicate version")
        if rows != versions.newest_first(rows):
            add(section, ",".join(rows), "not sorted (newest first)")
    for r in m.vllm_ascend:
        needs = " ".join(r.needs)
        if r.cann is None and "CANN" not in needs:
            add("vllm_ascend", r.version, "cann is null: say in `needs` which CANN the matrix lacks")
        if r.torch_npu is None and "torch_npu" not in needs:
            add("vllm_ascend", r.version, "torch_npu is null: say in `needs` which torch_npu the matrix lacks")
        if r.cann is not None and lm.cann(r.cann) is None:
            add("vllm_ascend", r.version, f"CANN {r.cann} is not a CANN release of the matrix")
        t = lm.torch_npu(r.torch_npu) if r.torch_npu else None
        if r.torch_npu is not None and t is None:
            add("vllm_ascend", r.version, f"torch_npu {r.torch_npu} is not a torch_npu release of the matrix")
        if t is not None and not versions.same(t.torch, r.torch):
            add("vllm_ascend", r.version, f"torch_npu {t.version} pins torch {t.torch}, not {r.torch}")
        if r.triton_ascend is not None and lm.triton_ascend(r.triton_ascend) is None:
            add("vllm_ascend", r.version, f"triton-ascend {r.triton_ascend} is not in triton_ascend")
        if r.prerelease != versions.parse(r.version).is_prerelease:
            add("vllm_ascend", r.version, "prerelease must be true exactly for an rc/alpha/beta/dev version")
        if r.sdist_only and r.manylinux is not None:
            add("vllm_ascend", r.version, "an sdist-only release has no wheels, so no manylinux glibc: leave manylinux out")
        if r.runs_on is not None:
            for chip in r.runs_on.chips:
                if chip not in lm.chips:
                    add("vllm_ascend", r.version, f"unknown chip {chip} in runs_on")
            for chip in r.runs_on.without_triton_ascend:
                if chip not in r.runs_on.chips:
                    add("vllm_ascend", r.version, f"runs_on.without_triton_ascend names {chip}, which runs_on.chips lacks")
            if not r.runs_on.sources or any(not s.strip() for s in r.runs_on.sources):
                add("vllm_ascend", r.version, "runs_on without a source")
        if r.device_build is not None and lm.build_chip(r.device_build) is None:
            build = r.device_build.device_type or r.device_build.soc_version or "no device"
            add("vllm_ascend", r.version, f"device_build {build} is no family of vllm_ascend_devices")
        if r.device_build is not None and r.sdist_only:
            add("vllm_ascend", r.version, "an sdist-only release has no wheels, so no device_build: leave it out")
        documented = r.python_documented
        if documented is not None and not any(
            versions.satisfies(p.version, r.python) and versions.satisfies(p.version, documented.spec) for p in m.pythons
        ):
            add(
                "vllm_ascend",
                r.version,
                f"python {r.python} with python_documented {documented.spec} leaves no Python of pythons",
            )
        spec = r.transformers.spec if r.transformers else None
        if spec and not any(versions.satisfies(v, spec) for v in with_bounds(lm.package("transformers"), [spec])):
            add(
                "vllm_ascend",
                r.version,
                f"transformers {spec} admits no release resolve can pick: no recommended one and no bound ==X, >=X or <=X",
            )
    for tr in m.triton_ascend:
        for c in tr.cann:
            if lm.cann(c) is None:
                add("triton_ascend", tr.version, f"CANN {c} is not a CANN release of the matrix")
        for chip in tr.chips:
            if chip not in lm.chips:
                add("triton_ascend", tr.version, f"unknown chip {chip}")
        if tr.index not in index_ids:
            add("triton_ascend", tr.version, f"unknown index {tr.index}")
    check_ray(lm, add)
    for d in m.vllm_ascend_devices:
        if d.chip not in lm.chips:
            add("vllm_ascend_devices", d.device_types[0], f"unknown chip {d.chip}")
    if len({d.chip for d in m.vllm_ascend_devices}) != len(m.vllm_ascend_devices):
        add("vllm_ascend_devices", ",".join(d.device_types[0] for d in m.vllm_ascend_devices), "two families name one chip")
    seen: set[str] = set()
    for ms in m.mindspeed:
        for chip in ms.chips.chips if ms.chips else []:
            if chip not in lm.chips:
                add("mindspeed", ms.version, f"unknown chip {chip} in chips")
        if ms.version.lower() in seen:
            add("mindspeed", ms.version, "duplicate version")
        seen.add(ms.version.lower())
        for line in ms.torch_npu_lines:
            if line not in lm.lines:
                add("mindspeed", ms.version, f"unknown TorchNPU line {line}")
        for c in ms.cann:
            if not lm.series_members([c], [x.version for x in m.cann]):
                add("mindspeed", ms.version, f"CANN {c} matches no CANN release")

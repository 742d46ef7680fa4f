"""The full Python closure of a lock: plan the resolution (data), run uv once (thin executor), pick wheels.

`plan_closure` turns a lock's python section into a `ClosurePlan` (roots, target, indexes,
exclusions, projects pinned to their own index); `run_uv` is the only function here that runs a
process; `closure_from_pylock` turns uv's `pylock.toml` into the lock's `PythonClosure`, choosing for
each package the one wheel the target's pip would choose (by tag preference).

torch comes from the index the lock names for it (its CPU build: the PyTorch CPU index, or a mirror
given with `--torch-index-url`) and from no other: uv gets it as an explicit index that only torch
may use (`[tool.uv.sources]`), so an unreachable index is an error, never a fall-back to PyPI's CUDA
build. Every pin that names an index (triton-ascend: `ascend-pypi`) is taken the same way; `--index-for
ID=URL` replaces the URL of any index the lock records (a mirror; `--torch-index-url` is `pytorch-cpu`'s). A closure that still holds a CUDA wheel (nvidia-*, cuda-*, triton, nccl) is refused, naming
what pulled it in.

Cross-platform resolution is uv's (`uv pip compile --python-platform`): pip's `--platform`
evaluates environment markers against the machine it runs on, so a closure for aarch64 resolved
on x86_64 would be wrong.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.artifacts.wheels import normalize, tag_order, wheel_rank
from envkit.errors import BadInput, CannotRun, CheckFailed, Where
from envkit.lock.gate import SCHEMA_ONLY, LockCheck
from envkit.models.lock import ClosurePackage, ClosureTarget, Lock, ProjectDependencies, PythonClosure

DEFAULT_GLIBC = "2.28"
PYPI = "https://pypi.org/simple"
UV_DEADLINE = 1800.0  # seconds for one `uv pip compile` (it reads the index pages itself): then it is stopped


def req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    if not m:
        raise BadInput(f"not a requirement: {req!r}")
    return normalize(m.group(1))


@dataclass(frozen=True)
class ClosurePlan:
    """What to resolve and for which target; pure data."""

    roots: tuple[str, ...]
    target: ClosureTarget
    index_url: str = PYPI
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    overrides: tuple[str, ...] = field(default=())
    pinned: tuple[tuple[str, str], ...] = ()  # (project, index URL): taken from that index alone
    pinned_ids: tuple[tuple[str, str], ...] = ()  # (project, the lock's id of that index), for error messages
    built: tuple[ClosurePackage, ...] = ()  # wheels envkit built from their sdist (`envkit.artifacts.sdist`): not resolved
    built_requires: tuple[str, ...] = ()  # their Requires-Dist, resolved in their place
    constraints: tuple[str, ...] = ()  # what the user's project's `-c` files pin: they bound versions, add nothing

    @property
    def resolve_roots(self) -> tuple[str, ...]:
        """What uv resolves: the roots, each built project replaced by what its built wheel requires."""
        built = {p.name for p in self.built}
        return tuple(r for r in self.roots if req_name(r) not in built) + self.built_requires

    def requirements_in(self) -> str:
        return "".join(f"{r}\n" for r in self.resolve_roots)

    def project_toml(self) -> str:
        """The roots as a project whose `tool.uv.sources` pin each `pinned` project to its own explicit index."""
        import json

        text = '[project]\nname = "envkit-closure"\nversion = "0"\ndependencies = [\n'
        text += "".join(f"  {json.dumps(r)},\n" for r in self.resolve_roots) + "]\n\n[tool.uv.sources]\n"
        text += "".join(f'{json.dumps(n)} = {{ index = "envkit-pinned-{i}" }}\n' for i, (n, _) in enumerate(self.pinned))
        for i, (_, url) in enumerate(self.pinned):
            text += f'\n[[tool.uv.index]]\nname = "envkit-pinned-{i}"\nurl = {json.dumps(url)}\nexplicit = true\n'
        return text

    @property
    def mirrors(self) -> list[str]:
        """The http:/file: sources given (index, extra indexes, find-links, pinned indexes) as the URL prefixes the
        closure records: an http origin (`http://127.0.0.1:8080/`) or a file folder. Only under these may the
        closure's URLs be other than https (`PythonClosure`'s URL policy)."""
        out = [mirror_prefix(u) for u in (self.index_url, *self.extra_index_urls, *self.find_links, *(u for _, u in self.pinned))]
        return sorted({m for m in out if m})

    @property
    def recorded_extra_index_urls(self) -> list[str]:
        """The extra indexes the closure records: those given, then each pinned project's index."""
        return list(dict.fromkeys([*self.extra_index_urls, *(u for _, u in self.pinned)]))

    def overrides_in(self) -> str:
        # an override with a marker that is never true removes the project and what only it needs
        # so are the built projects: no package may pull the index's own build of them (PyPI's CUDA vllm)
        gone = [*self.excluded, *(p.name for p in self.built)]
        lines = list(self.overrides) + [f"{n} ; sys_platform == 'never'" for n in gone]
        return "".join(f"{x}\n" for x in lines)


def mirror_prefix(source: str) -> str | None:
    """The URL prefix an http:/file: source (or a find-links folder) stands for; None for https. An http:/file: URL
    whose path, decoded, could climb (`..%2f`, `%2e%2e`, a backslash: `envkit.io.urlpath`) is bad input; a file: URL
    stands for the folder its decoded path names."""
    from urllib.parse import urlsplit

    from envkit.io.urlpath import decoded_path

    if source.startswith("https://"):
        return None
    path = source
    if source.startswith(("http://", "file://")):
        try:
            path = decoded_path(source)
        except ValueError as exc:
            raise BadInput(f"the source {source[:120]!r} is refused: {exc}", hint="Give the mirror's URL without it.") from None
        if source.startswith("file://") and urlsplit(source).netloc:
            raise BadInput(f"the source {source[:120]!r} names a host: a file: URL is file:///PATH")
    if source.startswith("http://"):
        parts = urlsplit(source)
        return f"http://{parts.netloc}/"
    folder = Path(path).resolve()
    if source.startswith("file://") and folder.name == "simple":  # a PEP 503 file index: its files lie beside it
        folder = folder.parent
    return folder.as_uri().rstrip("/") + "/"


def make_target(python: str, arch: str, glibc: str = DEFAULT_GLIBC) -> ClosureTarget:
    if not re.fullmatch(r"3\.[0-9]+", python):
        raise BadInput(f"--target-python {python!r} is not a Python minor version like 3.10")
    if arch not in ("aarch64", "x86_64"):
        raise BadInput(f"--target-arch {arch!r}: use aarch64 or x86_64")
    minor = glibc.split(".")[1] if re.fullmatch(r"2\.[0-9]+", glibc) else None
    if minor is None:
        raise BadInput(f"--glibc {glibc!r} is not a glibc version like 2.28")
    return ClosureTarget(python=python, arch=arch, glibc=glibc, platform=f"manylinux_2_{minor}_{arch}")


TORCH_INDEX = "pytorch-cpu"  # the index id `--torch-index-url` stands for


def index_overrides(lock: Lock, index_for: tuple[str, ...] = (), torch_index_url: str | None = None) -> dict[str, str]:
    """`--index-for ID=URL` (repeatable) as {index id: mirror URL}, each id one the lock records
    (python.indexes); `--torch-index-url URL` is `--index-for pytorch-cpu=URL`."""
    known = lock.python.indexes
    out: dict[str, str] = {}
    for item in index_for:
        iid, sep, url = (x.strip() for x in item.partition("="))
        if not sep or not iid or not url.startswith(("https://", "http://", "file://")):
            raise BadInput(
                f"--index-for {item!r} is not ID=URL (an http(s):// or file:// index URL)",
                hint=f"e.g. --index-for ascend-pypi=http://127.0.0.1:8080/simple; the lock's indexes: {', '.join(known)}",
            )
        if iid == "pypi":
            raise BadInput(
                "--index-for pypi: PyPI is the index everything else resolves against",
                hint="Give its mirror with --index-url URL.",
            )
        if iid not in known:
            raise BadInput(
                f"--index-for names index {iid!r}, which the lock does not record",
                where=Where("envkit.lock", None, "python.indexes"),
                hint=f"The lock's indexes: {', '.join(known)}.",
            )
        if out.get(iid, url) != url:
            raise BadInput(f"--index-for {iid} is given twice, as {out[iid]} and {url}")
        out[iid] = url
    if torch_index_url:
        if out.get(TORCH_INDEX, torch_index_url) != torch_index_url:
            raise BadInput(
                f"--torch-index-url {torch_index_url} and --index-for {TORCH_INDEX}={out[TORCH_INDEX]} differ",
                hint=f"--torch-index-url is --index-for {TORCH_INDEX}=URL: give one of them.",
            )
        out[TORCH_INDEX] = torch_index_url
    return out


def pinned_sources(
    lock: Lock, roots: list[str], torch_index_url: str | None = None, index_for: dict[str, str] | None = None
) -> tuple[tuple[str, str, str], ...]:
    """(project, index id, index URL) for each root whose lock pin names an index (torch: its CPU build's;
    triton-ascend: the Ascend index), the URL replaced by its `index_for` mirror; torch with --torch-index-url
    comes from that index even when its pin names none. uv takes those projects from that index alone."""
    names = {req_name(r) for r in roots}
    mirrors = dict(index_for or {})
    if torch_index_url:
        mirrors[TORCH_INDEX] = torch_index_url
    out: dict[str, tuple[str, str]] = {}
    for pin in lock.python.requirements:
        name = normalize(pin.name)
        if name not in names or not (pin.index or (name == "torch" and torch_index_url)):
            continue
        if name == "torch" and torch_index_url:
            out[name] = (pin.index or TORCH_INDEX, torch_index_url)
        elif pin.index in lock.python.indexes:
            out[name] = (pin.index, mirrors.get(pin.index, lock.python.indexes[pin.index]))
        else:
            raise BadInput(
                f"the lock's {pin.name} pin names index {pin.index!r}, which python.indexes does not list",
                where=Where("envkit.lock", None, "python.requirements"),
                hint="Re-resolve the lock (`envkit resolve`), or give the index with --index-for ID=URL.",
            )
    return tuple((n, i, u) for n, (i, u) in sorted(out.items()))


def pinned_indexes(
    lock: Lock, roots: list[str], torch_index_url: str | None = None, index_for: dict[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """(project, index URL) of `pinned_sources`."""
    return tuple((n, u) for n, _, u in pinned_sources(lock, roots, torch_index_url, index_for))


def target_roots(lock: Lock, only: list[str] | None = None, exclude: list[str] | None = None) -> list[str]:
    """The lock's pinned requirements and CANN's runtime dependencies, as requirement strings."""
    roots: list[str] = [f"{p.name}=={p.version}" for p in lock.python.requirements]
    pinned = {req_name(r) for r in roots}
    for r in lock.python.cann_runtime:
        if req_name(r) not in pinned:  # `numpy` in CANN's list is the lock's numpy
            roots.append(r)
    if only:
        wanted = {normalize(n) for n in only}
        unknown = wanted - {req_name(r) for r in roots}
        if unknown:
            raise BadInput(
                f"--only names {', '.join(sorted(unknown))}, which the lock does not require",
                hint="Use names from the lock's python.requirements or python.cann_runtime.",
            )
        roots = [r for r in roots if req_name(r) in wanted]
    if exclude:
        gone = {normalize(n) for n in exclude}
        roots = [r for r in roots if req_name(r) not in gone]
    return roots


def envkit_roots() -> list[str]:
    """envkit's own runtime requirements (no extras); envkit itself is added to a bundle as a wheel.

    The controller needs them to run `envkit provision`; every target needs them too, because the smoke
    role runs `envkit smoke` and `envkit doctor` from the stack's venv."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        reqs = requires("envkit") or []
    except PackageNotFoundError as exc:  # pragma: no cover - envkit always installed when it runs
        raise CannotRun("envkit is not installed as a distribution; cannot read its requirements") from exc
    return sorted(r for r in reqs if "extra ==" not in r)


def envkit_supports(python: str) -> bool:
    """Whether envkit itself installs on `python` (its Requires-Python); older targets get the stack without it."""
    from importlib.metadata import PackageNotFoundError, metadata

    from packaging.specifiers import SpecifierSet

    try:
        # an email.message.Message at run time; the PackageMetadata protocol of the stubs omits get()
        spec = metadata("envkit").get("Requires-Python") or ""  # type: ignore[attr-defined]
    except PackageNotFoundError:  # pragma: no cover - envkit always installed when it runs
        return True
    return SpecifierSet(spec).contains(f"{python}.0", prereleases=True)


def host_python() -> str:
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def host_arch() -> str:
    import platform

    m = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(m, m)


def host_glibc() -> str:
    import platform

    lib, ver = platform.libc_ver()
    return ver if lib == "glibc" and ver else DEFAULT_GLIBC


# --- choosing the wheel ------------------------------------------------------------------------
def link_filename(url: str, project: str) -> str:
    """The file name an index link stands for: the last segment of the URL's path, percent-decoded once (the
    PyTorch index writes `torch-2.12.0%2Bcpu-...whl` for `torch-2.12.0+cpu-...whl`), as pip and uv take it.
    BadInput when the name is not a plain file name (a decoded `/`, `\\`, `..`, a control character) or the URL's
    path could climb (`envkit.io.urlpath`): an index page is untrusted."""
    from urllib.parse import unquote, urlsplit

    from envkit.io.urlpath import decoded_path

    hint = "The index's page for this project links a file envkit will not name; use another index or mirror."
    try:
        decoded_path(url)
        raw = urlsplit(url).path.rsplit("/", 1)[-1]
        name = unquote(raw, errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"the index's link for {project} {url[:160]!r} is refused: {exc}", hint=hint) from None
    from envkit.models.safe import PLAIN_NAME

    if not re.fullmatch(PLAIN_NAME, name) or ".." in name:
        raise BadInput(
            f"the index's link for {project} {url[:160]!r} names the file {name[:120]!r}, which is not a plain file name "
            "(it must not leave its folder)",
            hint=hint,
        )
    return name


@dataclass(frozen=True)
class Picked:
    """The wheel chosen for one package, as the resolver gave it: the index's hashes and size, where published."""

    name: str
    version: str
    filename: str
    url: str
    hashes: dict[str, str]
    size: int | None


@dataclass(frozen=True)
class Completed:
    sha256: str
    size: int
    computed: bool  # the sha256 was computed from the download (the index published none)
    checked: tuple[str, ...] = ()  # the published hashes the download matched (md5 ...)


Complete = Callable[[Picked], Completed]


def pick_wheels(data: dict[str, Any], plan: ClosurePlan) -> list[Picked]:
    """The wheel the target's pip would choose for each package of uv's pylock (its best tag), with its file name
    from the link (`link_filename`) and what the index published of it."""
    from packaging.utils import InvalidWheelFilename, canonicalize_version, parse_wheel_filename

    order = tag_order(plan.target)
    picked: list[Picked] = []
    for pkg in data.get("packages", []):
        name, version = normalize(pkg["name"]), str(pkg["version"])
        best: tuple[int, dict[str, Any], str, str] | None = None
        for w in pkg.get("wheels", []):
            url = str(w.get("url") or w.get("path") or "")
            if "://" not in url:  # a find-links file: record an absolute file URL
                url = Path(url).resolve().as_uri()
            fname = link_filename(url, name)
            if w.get("name") and w["name"] != fname:
                raise BadInput(
                    f"the resolver names {name}'s file {str(w['name'])[:120]!r}, but its URL {url[:160]!r} names {fname!r}",
                    hint="The index's link text and URL disagree; use another index or mirror.",
                )
            try:
                wname, wversion, _, _ = parse_wheel_filename(fname)
            except InvalidWheelFilename:
                continue
            if normalize(str(wname)) != name or canonicalize_version(wversion) != canonicalize_version(version):
                raise BadInput(
                    f"the index lists {fname!r} (at {url[:160]}) as a file of {name} {version}, and it is not one",
                    hint="The index serves a file under another project's or version's name; use another index or mirror.",
                )
            rank = wheel_rank(fname, order)
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, w, fname, url)
        if best is None:
            raise CannotRun(
                f"{name} {version} has no wheel for Python {plan.target.python} on {plan.target.platform}",
                hint="An offline bundle installs wheels only; pick another version or target, or exclude it.",
            )
        _, w, fname, url = best
        hashes = {str(k).lower(): str(v) for k, v in (w.get("hashes") or {}).items()}
        size = w.get("size")
        picked.append(Picked(name, version, fname, url, hashes, int(size) if isinstance(size, int) else None))
    return picked


def complete_from_download(plan: ClosurePlan, cache: Any = None) -> Complete:
    """What fills in a wheel uv gave without a size or a sha256 (an HTML index never gives a size; uv computes the
    sha256 of a link without a hash itself). The index's page for the project (`envkit.artifacts.index`: the pinned
    index, else the plan's indexes and find-links pages) says what it published of the file. A published sha256
    is kept, its size taken from a HEAD request (or the download); else the file is downloaded into the bundle
    cache, its sha256 computed and every hash the index or uv gave (an md5 fragment, uv's own sha256) checked
    against it. Redirects must stay within the closure's URL policy (https, or under a mirror given)."""
    from envkit.artifacts.download import WheelCache, head_size, measure
    from envkit.artifacts.index import Published, link_key, project_page, read_page
    from envkit.models.rules import mirror_refusal

    store = cache or WheelCache()
    mirrors = plan.mirrors
    pinned = dict(plan.pinned)
    pages: dict[str, dict[str, Published]] = {}

    def check(url: str) -> str | None:
        return mirror_refusal(url, mirrors)

    def published(p: Picked) -> Published | None:
        if p.name in pinned:
            sources = [project_page(pinned[p.name], p.name)]
        else:
            sources = [project_page(u, p.name) for u in (plan.index_url, *plan.extra_index_urls)]
            sources += [u for u in plan.find_links if u.startswith(("http://", "https://"))]
        key = link_key(p.url)
        for page in sources:
            if page is None:
                continue
            if page not in pages:
                pages[page] = read_page(page, redirect_check=check)
            if key in pages[page]:
                return pages[page][key]
        return None

    def complete(p: Picked) -> Completed:
        pub = published(p) or Published()
        sha = pub.hashes.get("sha256")
        size = p.size if p.size is not None else pub.size
        if sha:
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise BadInput(
                    f"the index gives {p.filename} the sha256 {sha[:80]!r}, which is not 64 hex digits",
                    hint="Use another index or mirror.",
                )
            if p.hashes.get("sha256", sha).lower() != sha:
                raise BadInput(f"the resolver and the index give {p.filename} different sha256 values", hint="Run again.")
            if size is not None:
                return Completed(sha, size, computed=False)
            if store.valid(sha):
                return Completed(sha, store.path(sha).stat().st_size, computed=False)
            size = head_size(p.url, redirect_check=check)
            if size is not None:
                return Completed(sha, size, computed=False)
            got = measure(p.url, p.filename, {"sha256": sha}, store, redirect_check=check)
            return Completed(sha, got.size, computed=False, checked=got.checked)
        # nothing published: the index's other hashes (md5) and uv's own sha256 are checked against the download
        got = measure(p.url, p.filename, {**p.hashes, **pub.hashes}, store, redirect_check=check)
        return Completed(got.sha256, got.size, computed=True, checked=tuple(a for a in got.checked if a != "sha256"))

    return complete


def closure_from_pylock(
    data: dict[str, Any], plan: ClosurePlan, resolver: str, complete: Complete | None = None
) -> PythonClosure:
    """The closure of uv's pylock: one wheel per package (`pick_wheels`), each with its sha256 and size; where the
    index published neither or one (an HTML index: the PyTorch index gives no size, a Nexus an md5, a find-links
    folder nothing), `complete` (default: `complete_from_download`) finds them, and a computed sha256 is recorded
    as such (`sha256_from: download`)."""
    from pydantic import ValidationError

    from envkit.models.rules import mirror_refusal

    hint = (
        "Give every http: or file: source explicitly (--index-url, --extra-index-url, --find-links, "
        "--index-for ID=URL, --torch-index-url), or use https indexes."
    )
    picked = pick_wheels(data, plan)
    for p in picked:  # before anything is downloaded from it
        refusal = mirror_refusal(p.url, plan.mirrors)
        if refusal is not None:
            raise BadInput(
                f"the resolved closure cannot be recorded: {p.name}'s file {p.url[:160]!r} {refusal} "
                f"(mirrors: {', '.join(plan.mirrors) or 'none'})",
                hint=hint,
            )
    if complete is None and any(p.size is None or "sha256" not in p.hashes for p in picked):
        complete = complete_from_download(plan)
    try:
        packages: list[ClosurePackage] = []
        for p in picked:
            sha, size = p.hashes.get("sha256", ""), p.size
            computed = False
            if complete is not None and (size is None or not sha):
                done = complete(p)
                sha, size, computed = done.sha256, done.size, done.computed
            packages.append(
                ClosurePackage(
                    name=p.name,
                    version=p.version,
                    filename=p.filename,
                    url=p.url,
                    sha256=sha.lower(),
                    size=-1 if size is None else size,
                    sha256_from="download" if computed else None,
                )
            )
        packages += list(plan.built)
        packages.sort(key=lambda p: (p.name, p.version, p.filename))
        return _closure(plan, resolver, packages)
    except ValidationError as exc:  # e.g. an index that sends a wheel to an http host it was not given as
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise BadInput(f"the resolved closure cannot be recorded: {where}: {err['msg']}", hint=hint) from None


def _closure(plan: ClosurePlan, resolver: str, packages: list[ClosurePackage]) -> PythonClosure:
    return PythonClosure(
        target=plan.target,
        roots=list(plan.roots),
        index_url=plan.index_url,
        extra_index_urls=plan.recorded_extra_index_urls,
        find_links=list(plan.find_links),
        excluded=sorted(plan.excluded),
        resolver=resolver,
        packages=packages,
        mirrors=plan.mirrors,
    )


def _unmeasured(p: Picked) -> Completed:
    """A stand-in for a sha256 and size nobody published, for a closure that is only shown (`refuse_cuda`)."""
    return Completed(p.hashes.get("sha256") or "0" * 64, p.size or 0, computed=False)


# --- the executor ------------------------------------------------------------------------------
def find_uv() -> str:
    import shutil

    env = os.environ.get("ENVKIT_UV")
    if env:
        return env
    try:
        from uv import find_uv_bin  # the `uv` wheel

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    raise CannotRun(
        "`envkit lock` needs uv for cross-platform resolution, and uv is not installed",
        hint="pip install uv   (or set ENVKIT_UV to its path)",
    )


def uv_env() -> dict[str, str]:
    """uv without the machine's config files or index variables: the plan alone decides the sources."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["UV_NO_CONFIG"] = "1"
    # uv reads SSL_CERT_FILE only when told to use native/explicit roots
    if env.get("SSL_CERT_FILE") or env.get("REQUESTS_CA_BUNDLE"):
        env.setdefault("SSL_CERT_FILE", env.get("REQUESTS_CA_BUNDLE", ""))
    return env


def _uv_compile(plan: ClosurePlan, workdir: Path, out: Path, fmt: list[str]) -> list[str]:
    """The `uv pip compile` command of a plan (its input files written into workdir), writing `out` in `fmt`."""
    uv = find_uv()
    workdir.mkdir(parents=True, exist_ok=True)
    if plan.pinned:  # a project file: its sources pin projects to their own explicit index
        (workdir / "pyproject.toml").write_text(plan.project_toml())
        source = workdir / "pyproject.toml"
    else:
        (workdir / "requirements.in").write_text(plan.requirements_in())
        source = workdir / "requirements.in"
    (workdir / "overrides.txt").write_text(plan.overrides_in())
    constraints = ["--constraints", str(workdir / "constraints.txt")] if plan.constraints else []
    if plan.constraints:
        (workdir / "constraints.txt").write_text("".join(f"{c}\n" for c in plan.constraints))
    cmd = [
        uv,
        "pip",
        "compile",
        str(source),
        "--overrides",
        str(workdir / "overrides.txt"),
        *constraints,
        "--python-platform",
        f"{plan.target.arch}-manylinux_{plan.target.glibc.replace('.', '_')}",
        "--python-version",
        plan.target.python,
        "--only-binary",
        ":all:",
        "--no-python-downloads",
        # every cached page and metadata revalidated with its index: a lock records what the indexes serve now, and
        # a static mirror's pages are otherwise fresh for hours by heuristic (10 % of their Last-Modified age), so a
        # synced or re-pointed mirror would be read as it was (files it no longer serves, releases it now has missed)
        "--refresh",
        *fmt,
        "--no-header",
        "--quiet",
        "--index-url",
        plan.index_url,
        "-o",
        str(out),
    ]
    for u in plan.extra_index_urls:
        cmd += ["--extra-index-url", u]
    for f in plan.find_links:
        cmd += ["--find-links", f]
    if plan.extra_index_urls:
        cmd += ["--index-strategy", "unsafe-best-match"]
    return cmd


def _run_uv(cmd: list[str], plan: ClosurePlan) -> subprocess.CompletedProcess[str]:
    """uv, killed after UV_DEADLINE seconds: uv reads the index pages, and its own HTTP timeout is per read, so
    an index that answers one byte at a time would hold it (and `envkit lock`) for ever."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=uv_env(), check=False, timeout=UV_DEADLINE)
    except subprocess.TimeoutExpired:
        sources = ", ".join(dict.fromkeys([plan.index_url, *plan.extra_index_urls, *(u for _, u in plan.pinned)]))
        raise CannotRun(
            f"uv did not resolve the closure for Python {plan.target.python} on {plan.target.platform} within "
            f"{UV_DEADLINE:g} s (stopped); the indexes: {sources}",
            hint="An index is too slow or hangs: check it (or its mirror) answers, then run `envkit lock` again.",
        ) from None


def run_uv(plan: ClosurePlan, workdir: Path, complete: Complete | None = None) -> PythonClosure:
    return closure_from_pylock(*resolve_pylock(plan, workdir), complete)


NO_SOLUTION = "No solution found when resolving"  # uv's words for a resolution that cannot hold (not an unreachable index)


def resolve_pylock(
    plan: ClosurePlan, workdir: Path, explain: Callable[[str], CheckFailed | None] | None = None
) -> tuple[dict[str, Any], ClosurePlan, str]:
    """uv's pylock of the plan's resolution, the plan and the resolver that made it (`closure_from_pylock`'s input).
    `explain`: turns uv's failure into the caller's own error where it can (the user's project in the closure)."""
    out = workdir / "pylock.toml"
    cmd = _uv_compile(plan, workdir, out, ["--format", "pylock.toml"])
    proc = _run_uv(cmd, plan)
    if proc.returncode != 0:
        err = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
        explained = explain(err) if explain is not None else None
        if explained is not None:
            raise explained
        no_wheel_failure(plan, err)
        pinned_failure(plan, err)
        raise CannotRun(f"uv could not resolve the closure for Python {plan.target.python} on {plan.target.platform}", hint=err)
    version = subprocess.run([cmd[0], "--version"], capture_output=True, text=True, check=False).stdout.split()
    resolver = " ".join(version[:2]) if version else "uv"
    return _read_toml(out), plan, resolver


def uv_via(plan: ClosurePlan, workdir: Path) -> dict[str, list[str]]:
    """Who requires each package of the plan's resolution (uv's `# via` annotations), e.g. {"triton": ["torch"]}."""
    out = workdir / "requirements.txt"
    cmd = _uv_compile(plan, workdir, out, ["--format", "requirements.txt", "--annotation-style", "line"])
    if _run_uv(cmd, plan).returncode != 0:
        return {}
    return parse_via(out.read_text())


def parse_via(text: str) -> dict[str, list[str]]:
    via: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+\s+#\s*via\s+(.*)$", line)
        if m:
            via[normalize(m[1])] = [p.strip().split(" ")[0] for p in m[2].split(",") if p.strip()]
    return via


# uv 0.13's words when the indexes have files of a version but no wheel the target takes (an sdist only, or wheels
# of other platforms), and who needs it: another project's pin, or the roots' own ("you require")
_NO_WHEEL = re.compile(
    r"Because (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+) has no usable wheels and "
    r"(?:(?P<by>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<by_version>\S+) depends on|you require)"
)


def no_wheel_failure(plan: ClosurePlan, err: str) -> None:
    """uv failed because a version has no wheel for the target on the indexes (PyPI's arctic-inference 0.1.1, which
    vllm-ascend 0.23.0 pins, is an sdist only): envkit locks wheels alone, so say which project, what needs it, and
    the two ways on."""
    m = _NO_WHEEL.search(re.sub(r"\s+", " ", err))
    if m is None:
        return
    name, version, by = m["name"], m["version"], m["by"]
    needs = f", which {by} {m['by_version']} requires," if by else ""
    sources = ", ".join(dict.fromkeys([plan.index_url, *plan.extra_index_urls, *plan.find_links]))
    raise CannotRun(
        f"{name} {version}{needs} has no wheel for Python {plan.target.python} on {plan.target.platform} on the "
        f"indexes ({sources}): envkit locks wheels only (an sdist's code never runs to resolve or install)",
        hint=f"Build a wheel of {name} {version} for the target once and give its folder with --find-links DIR, or "
        f"point --extra-index-url at an index that has one; or leave {by or name} out with --exclude {by or name}."
        f"\nuv: {err[-1200:]}",
    )


def pinned_failure(plan: ClosurePlan, err: str) -> None:
    """uv failed where a pinned project's own index is involved: say which index (its id), and the option that
    sets it (`--index-for ID=URL`; for torch also `--torch-index-url`)."""
    ids = dict(plan.pinned_ids)
    for name, url in plan.pinned:
        iid = ids.get(name, "")
        label = f"the {iid} index ({name}'s)" if iid else f"the {name} index"
        if url.rstrip("/") in err:
            what = f"{label} {url} cannot be reached"
        elif re.search(rf"(?<![A-Za-z0-9_.-]){re.escape(name)}(?![A-Za-z0-9_-])", err):
            what = f"uv could not take {name} from {label} {url}"
        else:
            continue
        option = f"--index-for {iid or TORCH_INDEX}=URL"
        if name == "torch" or iid == TORCH_INDEX:
            option = f"--torch-index-url (or {option})"
        raise CannotRun(
            what,
            hint=(
                f"{name} comes from {url} alone, never from PyPI (whose {name} may be a CUDA build or lack it). Point "
                f"{option} at a reachable mirror of that index, or leave {name} out with --exclude {name}.\nuv: {err[-1200:]}"
            ),
        )


# --- no CUDA wheel in an Ascend closure ------------------------------------------------------------
CUDA_NAME = re.compile(r"^(nvidia-.*|cuda-.*|triton|pytorch-triton.*|.*nccl.*)$")
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")  # PyPI's x86_64 builds of these are CUDA builds


def cuda_torch(p: ClosurePackage, arch: str) -> bool:
    """A CUDA (or ROCm) build of torch, torchvision or torchaudio: a `+cu…`/`+rocm…` local version anywhere, and on
    x86_64 any build without `+cpu` (PyPI's default x86_64 torch is the CUDA build; the PyTorch CPU index labels
    its builds `+cpu`). On aarch64 PyPI's torch is the CPU build."""
    if p.name not in TORCH_FAMILY:
        return False
    local = p.version.partition("+")[2].lower()
    if local.startswith(("cu", "rocm")):
        return True
    return arch == "x86_64" and not local.startswith("cpu")


def cuda_packages(closure: PythonClosure) -> list[ClosurePackage]:
    arch = closure.target.arch
    return [p for p in closure.packages if CUDA_NAME.match(normalize(p.name)) or cuda_torch(p, arch)]


def refuse_cuda(closure: PythonClosure, via: dict[str, list[str]]) -> None:
    """CheckFailed (exit 1) naming the CUDA wheels of the closure (`cuda_packages`) and the packages that pulled
    them in (uv's `# via`)."""
    cuda = cuda_packages(closure)
    if not cuda:
        return
    names = {p.name for p in cuda}
    pullers: set[str] = set()
    todo, seen = list(names), set(names)
    while todo:
        for parent in via.get(todo.pop(), []):
            parent = normalize(parent) if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", parent) else "the roots"
            if parent in names and parent not in seen:
                seen.add(parent)
                todo.append(parent)
            elif parent not in names:
                pullers.add(parent)
    by_name = {p.name: p for p in closure.packages}
    pulled = (
        ", ".join(
            f"{n} {by_name[n].version} (from {by_name[n].url.split('://', 1)[-1].split('/', 1)[0]})" if n in by_name else n
            for n in sorted(pullers)
        )
        or "the roots"
    )
    shown = "; ".join(f"{p.name} {p.version}" + (f" (via {', '.join(via[p.name])})" if via.get(p.name) else "") for p in cuda[:8])
    raise CheckFailed(
        f"the closure for Python {closure.target.python} on {closure.target.platform} holds {len(cuda)} CUDA wheel(s), "
        f"which an Ascend stack never uses: {shown}{' ...' if len(cuda) > 8 else ''}; pulled in by {pulled}",
        hint="torch (and torchvision, torchaudio) must be its CPU build (`+cpu` on x86_64), from the index the lock "
        "names for it (python.requirements: torch's index). "
        "Re-resolve with this envkit (`envkit resolve`), point --torch-index-url at the PyTorch CPU index or its mirror, "
        "or leave the packages out with --exclude.",
    )


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    with open(path, "rb") as fh:
        return tomllib.load(fh)


# --- `envkit lock`: the lock's python section completed with both closures ------------------------
@dataclass(frozen=True)
class LockedPython:
    """What `lock_python` wrote: the lock's path, and per side its platform, Python, wheels and bytes."""

    lock: Path
    target: ClosureTarget
    controller: ClosureTarget
    target_closure: PythonClosure
    controller_closure: PythonClosure
    # file name -> the published hashes its download was checked against, for each sha256 envkit computed
    checked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    project: ProjectDependencies | None = None  # the user's project's dependencies, with their versions

    def computed(self, closure: PythonClosure) -> list[dict[str, Any]]:
        """The files of `closure` whose sha256 was computed from the download, not published by the index."""
        return [
            {"file": p.filename, "sha256": p.sha256, "checked": list(self.checked.get(p.filename, ()))}
            for p in closure.packages
            if p.sha256_from == "download"
        ]

    def to_dict(self) -> dict[str, Any]:
        t, c = self.target_closure, self.controller_closure
        return {
            "lock": str(self.lock),
            "target": {
                "platform": self.target.platform,
                "python": self.target.python,
                "wheels": len(t.packages),
                "bytes": sum(p.size for p in t.packages),
                "excluded": list(t.excluded),
                "torch": next(({"version": p.version, "url": p.url} for p in t.packages if p.name == "torch"), None),
                "sha256_computed": self.computed(t),
            },
            "controller": {
                "platform": self.controller.platform,
                "python": self.controller.python,
                "wheels": len(c.packages),
                "bytes": sum(p.size for p in c.packages),
                "sha256_computed": self.computed(c),
            },
            "project": None if self.project is None else self.project.model_dump(mode="json"),
        }


def cann_runtime_yields(lk: Lock, roots: list[str], requires: list[str], say: Callable[[str], None]) -> list[str]:
    """CANN's own Python requirements (python.cann_runtime, e.g. protobuf==3.20.0 from its install guide) that a built
    wheel also requires are left to its bound (`protobuf`): the vendor's serving image installs vLLM after CANN, and
    pip then takes vLLM's protobuf>=5.29.6. The lock's own pins never yield."""
    cann = {req_name(r): r for r in lk.python.cann_runtime}
    pinned = {normalize(p.name) for p in lk.python.requirements}
    wanted = {req_name(r) for r in requires}
    out = []
    for r in roots:
        name = req_name(r)
        if name in wanted and name not in pinned and cann.get(name) == r and r.strip() != name:
            say(f"{r} (CANN's install guide) yields to what the built wheel requires: {name} resolved by its bound")
            r = name
        out.append(r)
    return out


def build_from_sdists(
    lk: Lock,
    roots: list[str],
    target: ClosureTarget,
    pinned: dict[str, str],
    sources: dict[str, Any],
    say: Callable[[str], None],
    place_in: Callable[[Path, ClosureTarget], Any] | None = None,
) -> list[Any]:
    """The roots envkit builds from their sdist (`envkit.models.rules.SDIST_BUILDS`: vLLM), each built (or taken from the
    built-wheel cache) against the lock's CPU torch, from the index the lock names for torch (`pinned`) or, where it
    names none (aarch64: PyPI's torch is its CPU build), the closure's own index. Built where `place_in` says
    (`envkit.artifacts.sdist.BuildPlace`: a container of the target's platform); by default on this machine, which
    must be the target (`refuse_foreign_target`): that is said first, before anything is looked up."""
    from envkit.artifacts.sdist import build_wheel, find_sdist, refuse_foreign_target
    from envkit.models.rules import SDIST_BUILDS, mirror_refusal

    wanted = [r for r in roots if req_name(r) in SDIST_BUILDS]
    if not wanted:
        return []
    if place_in is None:
        refuse_foreign_target(req_name(wanted[0]), target)
    torch = next((r for r in roots if req_name(r) == "torch"), None)
    if torch is None:
        raise BadInput(
            f"{', '.join(req_name(r) for r in wanted)} is built from its sdist against the lock's CPU torch, and the "
            "closure leaves torch out",
            hint="Keep torch in the closure (no --exclude torch / --only without it), or leave "
            f"{req_name(wanted[0])} out with --exclude {req_name(wanted[0])}.",
        )
    mirrors = ClosurePlan(roots=(), target=target, pinned=tuple(pinned.items()), **sources).mirrors
    indexes = [sources["index_url"], *sources["extra_index_urls"]]
    out = []
    for req in wanted:
        name, _, version = req.partition("==")
        if not version:
            raise BadInput(f"{req!r}: a project built from its sdist needs an exact pin (name==version)")
        sdist = find_sdist(name.strip(), version.strip(), indexes, lambda u: mirror_refusal(u, mirrors))
        b = build_wheel(
            sdist,
            target=target,
            torch=torch,
            torch_index=pinned.get("torch", sources["index_url"]),
            index_url=sources["index_url"],
            extra_index_urls=sources["extra_index_urls"],
            find_links=sources["find_links"],
            say=say,
            place_in=place_in,
        )
        say(f"{b.package.filename}: {'taken from the build cache' if b.cached else 'built'} from {sdist.filename}")
        out.append(b)
    return out


def lock_python(
    lock_path: Path,
    *,
    output: Path | None = None,
    target_python: str | None = None,
    target_arch: str | None = None,
    glibc: str | None = None,
    controller_python: str | None = None,
    controller_arch: str | None = None,
    controller_glibc: str | None = None,
    only: list[str] | None = None,
    exclude: list[str] | None = None,
    index_url: str = PYPI,
    extra_index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
    torch_index_url: str | None = None,
    index_for: tuple[str, ...] = (),
    on_progress: Callable[[str], None] | None = None,
    lock_check: LockCheck = SCHEMA_ONLY,
    project: Callable[[Lock], ProjectDependencies] | None = None,
    build_place: Callable[[Path, ClosureTarget], Any] | None = None,
) -> LockedPython:
    """`envkit lock`: resolve the full closure for the lock's target and envkit's for the controller, and write
    the lock with both (`output`, default the lock itself). Each pin that names an index (torch, triton-ascend)
    comes from that index alone: `index_for` ("ID=URL", a mirror of the lock's index ID) or `torch_index_url`
    (pytorch-cpu's) replaces its URL; a closure with a CUDA wheel is refused. `project`: what reads the user's project's
    dependencies for the lock read here (`envkit.artifacts.project.requirements.lock_requirements`), resolved with the stack's roots under the same rules
    (those `exclude` names left out; what its `-c` files pin given to uv as constraints) and recorded in
    python.project with the version each got; a conflict the
    resolver finds is CheckFailed naming the project's files and lines (`project_conflict`). `build_place`: where a
    wheel envkit builds from its sdist is built, given the build's folder and the target (`envkit lock --build-image`:
    a container of the target's platform; default this machine)."""
    from envkit.lock.file import read_lock, write_lock

    say = on_progress or (lambda _line: None)
    lk = read_lock(lock_path, lock_check)
    target = _lock_target(lk, lock_path, target_python, target_arch, glibc)
    ctl_target = make_target(
        controller_python or host_python(),
        controller_arch or host_arch(),
        controller_glibc or (host_glibc() if controller_arch in (None, host_arch()) else DEFAULT_GLIBC),
    )
    excluded = tuple(sorted({normalize(x) for x in exclude or ()}))
    sources: dict[str, Any] = dict(index_url=index_url, extra_index_urls=tuple(extra_index_urls), find_links=tuple(find_links))
    # envkit runs on every target (the smoke role), where its Python allows it
    ek_roots = envkit_roots() if envkit_supports(target.python) else []
    roots = target_roots(lk, list(only or []), list(excluded))
    deps = project(lk) if project is not None else None  # before anything is resolved: a refusal costs nothing
    constraints: tuple[str, ...] = ()
    if deps is not None:
        roots += [r.spec for r in deps.requirements if r.name not in excluded]
        constraints = tuple(r.spec for r in deps.constraints if r.name not in excluded)
    sourced = pinned_sources(lk, roots, torch_index_url, index_overrides(lk, tuple(index_for), torch_index_url))
    pinned = tuple((n, u) for n, _, u in sourced)
    built = build_from_sdists(lk, roots, target, dict((n, u) for n, u in pinned), sources, say, build_place)
    if built:  # a serving closure: upstream triton never (the vendor uninstalls it; triton-ascend is the one)
        excluded = tuple(sorted({*excluded, "triton"}))
        roots = cann_runtime_yields(lk, roots, [r for b in built for r in b.requires], say)
    tplan = ClosurePlan(
        roots=tuple(roots + ek_roots),
        target=target,
        excluded=excluded,
        pinned=pinned,
        pinned_ids=tuple((n, i) for n, i, _ in sourced),
        built=tuple(b.package for b in built),
        built_requires=tuple(r for b in built for r in b.requires),
        constraints=constraints,
        **sources,
    )
    cplan = ClosurePlan(roots=tuple(envkit_roots()), target=ctl_target, **sources)
    say(
        f"resolving the closure for Python {target.python} on {target.platform} ..."
        + "".join(f" ({n} from {u} alone)" for n, u in pinned)
    )
    explain = None
    if deps is not None:
        found = deps

        def explain(err: str) -> CheckFailed | None:
            return project_conflict(found, lk, target, err, lock_path.name) if NO_SOLUTION in err else None

    tclos, cclos, checked = _resolve_closures(tplan, cplan, explain, say)
    python = lk.python.model_copy(update={"closure": tclos, "controller": cclos, "project": project_versions(deps, tclos)})
    out = output or lock_path
    write_lock(lk.model_copy(update={"python": python}), out)
    return LockedPython(
        lock=out,
        target=target,
        controller=ctl_target,
        target_closure=tclos,
        controller_closure=cclos,
        checked=checked,
        project=python.project,
    )


def _lock_target(
    lk: Lock, lock_path: Path, target_python: str | None, target_arch: str | None, glibc: str | None
) -> ClosureTarget:
    """The lock's target: its stack's Python and arch (BadInput where the options name others: resolve for them
    first), and the glibc given or the lock's OS's."""
    py = target_python or lk.stack.python
    arch = target_arch or lk.stack.arch
    if py != lk.stack.python or arch != lk.stack.arch:
        raise BadInput(
            f"--target-python/--target-arch ({py}, {arch}) differ from the lock's stack ({lk.stack.python}, {lk.stack.arch})",
            hint=f"Resolve for that target first: envkit resolve --python {py} --arch {arch} -o {lock_path}",
        )
    return make_target(py, arch, glibc or lk.platform.glibc)


def _resolve_closures(
    tplan: ClosurePlan,
    cplan: ClosurePlan,
    explain: Callable[[str], CheckFailed | None] | None,
    say: Callable[[str], None],
) -> tuple[PythonClosure, PythonClosure, dict[str, tuple[str, ...]]]:
    """The target's closure (refused where it holds a CUDA wheel; `explain`: a resolver failure in the user's terms)
    and the controller's, each wheel with its size and sha256, and the published hashes checked for the files whose
    sha256 was computed from the download (by file name)."""
    import tempfile

    checked: dict[str, tuple[str, ...]] = {}

    def completing(plan: ClosurePlan) -> Complete:
        """`complete_from_download`, saying what it downloads and remembering which published hashes it checked."""
        inner = complete_from_download(plan)

        def complete(p: Picked) -> Completed:
            say(f"{p.filename}: the resolver gives no size or sha256 for it; reading its index page (and the file) ...")
            done = inner(p)
            if done.computed:
                checked[p.filename] = done.checked
            return done

        return complete

    with tempfile.TemporaryDirectory(prefix="envkit-lock-") as tmp:
        resolved = resolve_pylock(tplan, Path(tmp) / "target", explain)
        shown = closure_from_pylock(*resolved, _unmeasured)  # nothing downloaded yet for a hash nobody published
        if cuda_packages(shown):
            refuse_cuda(shown, uv_via(tplan, Path(tmp) / "target-via"))
        tclos = closure_from_pylock(*resolved, completing(tplan))
        say(f"resolving envkit's own closure for the controller (Python {cplan.target.python} on {cplan.target.platform}) ...")
        cclos = run_uv(cplan, Path(tmp) / "controller", completing(cplan))
    return tclos, cclos, checked


# --- the user's project in the closure (`envkit lock --project`) --------------------------------------------------
def project_versions(project: ProjectDependencies | None, closure: PythonClosure) -> ProjectDependencies | None:
    """`project` with each requirement's version as the closure holds it (null: left out, or off the target)."""
    if project is None:
        return None
    got = {p.name: p.version for p in closure.packages}
    reqs = [r.model_copy(update={"version": got.get(r.name)}) for r in project.requirements]
    cons = [r.model_copy(update={"version": got.get(r.name)}) for r in project.constraints]
    return project.model_copy(update={"requirements": reqs, "constraints": cons})


def project_conflict(project: ProjectDependencies, lk: Lock, target: ClosureTarget, err: str, lock_name: str) -> CheckFailed:
    """uv found no closure for the stack and the project together: CheckFailed (exit 1) with the chain, as facts: the
    project's requirements uv names (file:line), uv's own derivation, the lock's pins it names (torch beside
    torch_npu), and the target a wheel must fit."""
    words = set(re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", err))
    named = {normalize(w) for w in words}
    chain: list[str] = []
    for r in project.requirements:
        if r.name in named:
            chain.append(f"[declared] {r.spec} at {project.path}/{r.source}")
    for r in project.constraints:
        if r.name in named:
            chain.append(f"[constraint] {r.spec} at {project.path}/{r.source} (a -c file: it bounds {r.name}'s version)")
    chain += [f"[resolver] {step}" for step in uv_reasons(err)]
    pins = {normalize(p.name): p for p in lk.python.requirements}
    for name, pin in pins.items():
        if name in named and name != "torch-npu":
            chain.append(f"[locked]   {lock_name} pins {pin.name} {pin.version} (python.requirements, from stack.{pin.name})")
    if "torch" in named and "torch-npu" in pins and "torch" in pins:
        chain.append(
            f"[locked]   torch_npu {pins['torch-npu'].version} is built for torch {pins['torch'].version} alone "
            "(stack.torch_npu): another torch is another stack"
        )
    chain.append(f"[target]   Python {target.python} on {target.platform}: wheels only (an offline bundle installs no sdist)")
    mine = sorted({r.name for r in (*project.requirements, *project.constraints) if r.name in named})
    leave = f" or leave {', '.join(mine)} out with --exclude {','.join(mine)}" if mine else ""
    return CheckFailed(
        f"the project's dependencies cannot join the lock's closure for Python {target.python} on {target.platform}:\n"
        + "\n".join(f"  {i:>2}. {c}" for i, c in enumerate(chain, 1)),
        hint="Require a version that has a wheel for the target and allows the lock's pins, resolve a stack the "
        f"dependency allows (envkit resolve --torch VERSION),{leave}.",
        details={"project": project.path, "resolver": err[-2000:]},
    )


def uv_reasons(err: str) -> list[str]:
    """uv's derivation of a failed resolution, one sentence a step (uv wraps its lines to the terminal), with its
    name for the roots (`envkit-closure`) said plainly."""
    lines = []
    for line in err.splitlines():
        text = line.strip().lstrip("╰─▶│├ ").strip()
        if not text or text.startswith(("×", "error:", "hint:", "help:")) or NO_SOLUTION in text:
            continue
        lines.append(text.removeprefix("cause:").strip())
    joined = re.sub(r"\s+", " ", " ".join(lines)).replace("envkit-closure depends on", "the lock's closure requires")
    return [s.strip() for s in re.split(r"(?<=\.)\s+(?=[A-Z])", joined) if s.strip()][:16]

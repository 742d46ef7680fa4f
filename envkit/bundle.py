"""Air-gapped bundles: plan (data), assemble (directory or reproducible tar), verify.

`plan_bundle` decides every entry (path, bytes or source file, sha256, size, mode) from the
lock alone; `fetch_plan` is the only network step (the download executor); `write_dir` and
`write_tar` turn a plan into a folder or a byte-identical archive; `verify` checks a folder or an
archive against its manifest without extracting anything.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import posixpath
import stat
import tarfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from envkit import __version__
from envkit.errors import BadInput, CannotRun, CheckFailed, Where
from envkit.models.bundle import BundleFile, BundleManifest, TrustedArtifact
from envkit.models.lock import Lock, PythonClosure
from envkit.uptodate import archive_stamp, envkit_key, envkit_metadata, envkit_sources, output_key

MANIFEST = "manifest.json"
IMAGE_DIR = "image"
MTIME = 315532800  # 1980-01-01, the zip epoch: every entry gets it, so archives are reproducible
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Entry:
    path: str
    sha256: str
    size: int
    mode: int = 0o644
    data: bytes | None = None
    source: Path | None = None
    link: bool = False  # may be hard-linked from the cache into a folder bundle


@dataclass(frozen=True)
class ImageContext:
    """The rendered image build context a bundle carries: its text files are bundle entries under
    image/context/; its large inputs (vendor packages, wheels) are the bundle's own files, listed in
    image/context.sha256 and linked into place by image/assemble.sh (never stored twice)."""

    tag: str
    key: str  # sha256 over every file of the context (path and sha256): equal keys, equal contexts
    links: tuple[tuple[str, str, str], ...]  # (sha256, path in the context, path in the bundle)


@dataclass
class BundlePlan:
    root: str
    entries: list[Entry]
    manifest: BundleManifest
    fetch: list = field(default_factory=list)  # list[download.Fetch]
    trusted: list[TrustedArtifact] = field(default_factory=list)
    state: Path | None = None  # where write_tar records the archives it wrote (the cache's folder), if anywhere
    image: ImageContext | None = None
    _all: list[Entry] | None = field(default=None, repr=False)

    def assemble_image_context(self, out: Path) -> Path:
        """Write the image build context into `out` from the plan's own entries (the executor then builds it):
        the rendered text files, then the vendor packages and wheels linked (or copied) from their sources."""
        from envkit.fsutil import link_or_copy

        assert self.image is not None
        by_path = {e.path: e for e in self.entries}
        prefix = f"{IMAGE_DIR}/context/"
        for path, e in by_path.items():
            if path.startswith(prefix):  # rendered text: always data
                dest = out / path[len(prefix):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(e.data)
        for _sha, rel, src in self.image.links:
            e = by_path[src]
            if e.data is not None:  # envkit's own wheel is built in memory
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / rel).write_bytes(e.data)
            else:
                link_or_copy(e.source, out / rel)
        return out

    def all_entries(self) -> list[Entry]:
        if self._all is None:
            data = manifest_bytes(self.manifest)
            m = Entry(MANIFEST, hashlib.sha256(data).hexdigest(), len(data), data=data)
            self._all = sorted([*self.entries, m], key=lambda e: e.path)
        return list(self._all)


def _blob(path: str, data: bytes, mode: int = 0o644) -> Entry:
    return Entry(path, hashlib.sha256(data).hexdigest(), len(data), mode, data=data)


def manifest_bytes(m: BundleManifest) -> bytes:
    return (json.dumps(m.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def requirements_txt(closure: PythonClosure, extra: list[tuple[str, str, str]] = ()) -> bytes:
    lines = [f"# {len(closure.packages) + len(extra)} wheels for Python {closure.target.python} on {closure.target.platform}; "
             "install with --no-index --no-deps --require-hashes\n"]
    rows = [(p.name, p.version, p.sha256) for p in closure.packages] + list(extra)
    for name, version, sha in sorted(rows):
        lines.append(f"{name}=={version} --hash=sha256:{sha}\n")
    return "".join(lines).encode()


def _requires_python() -> str:
    from importlib.metadata import metadata

    return metadata("envkit").get("Requires-Python") or "any"


def _target_dict(c: PythonClosure) -> dict[str, str]:
    return {k: str(v) for k, v in c.target.model_dump().items()}


# --- envkit's own wheel, built deterministically from the running installation -------------------
def envkit_wheel(cache_dir: Path | None = None) -> tuple[str, bytes]:
    """A wheel of the running envkit: its package, its data folders, its installed metadata. Reproducible.

    With `cache_dir`, the wheel is kept there under a key of every source file's name, size and mtime (as make
    does), so that a rebuild with unchanged sources does not compress the package again."""
    from importlib.metadata import distribution

    dist = distribution("envkit")
    version = __version__
    tag = "py3-none-any"
    name = f"envkit-{version}-{tag}.whl"
    sources = envkit_sources()
    meta, entry_points = envkit_metadata(dist)
    cached = None
    if cache_dir is not None:
        key = envkit_key(sources, dist)
        cached = Path(cache_dir) / "self" / f"{key[:32]}.whl"
        try:
            return name, cached.read_bytes()
        except OSError:
            pass
    distinfo = f"envkit-{version}.dist-info"
    files = {arc: p.read_bytes() for arc, p in sources}
    files[f"{distinfo}/METADATA"] = meta.encode()
    files[f"{distinfo}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: envkit {version}\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    files[f"{distinfo}/entry_points.txt"] = entry_points.encode()
    record = []
    for arc in sorted(files):
        digest = base64.urlsafe_b64encode(hashlib.sha256(files[arc]).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(files[arc])}\n")
    record.append(f"{distinfo}/RECORD,,\n")
    files[f"{distinfo}/RECORD"] = "".join(record).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc in sorted(files, key=lambda n: (n.startswith(distinfo), n)):
            info = zipfile.ZipInfo(arc, date_time=ZIP_TIME)
            info.external_attr = (0o644 | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[arc])
    data = buf.getvalue()
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only cache only costs the compression next time
    return name, data


# --- the plan ----------------------------------------------------------------------------------
def image_tag(lock: Lock) -> str:
    s = lock.stack
    return f"envkit/{s.chip}:cann{s.cann}-torch{s.torch.replace('+', '-')}-py{s.python}".lower()


def _image_entries(lock: Lock, artifacts: Path | None, stamps, have: dict[str, Entry], envkit_row: tuple[str, str, str] | None,
                   base: str | None = None) -> tuple[list[Entry], ImageContext | None, list[str]]:
    """The rendered build context of the lock's image, against the bundle's own files (pure: no engine).

    `have` is the bundle's entries by path. A lock whose closure cannot make the image (an `--only` part of
    the stack, another Python) gets no context, and the bundle says why in `lacks`."""
    from envkit import image as im
    from envkit import render
    from envkit.matrix import load_matrix

    ek = [] if envkit_row is None else [envkit_row]  # (wheel, version, sha256): envkit in the image, as on the hosts
    try:
        chosen = [p for p in im.closure_files(lock) if im.normalize(p.name) != "envkit"]  # the bundle's envkit wins
        reqs = im._merge([im.Requirement(im.normalize(p.name), p.version, (p.sha256,)) for p in chosen]
                         + [im.Requirement("envkit", version, (sha,)) for _, version, sha in ek])
        im.check_closure(lock, reqs, "the lock's Python closure (python.closure)")
        wheels = sorted([Path(p.filename) for p in chosen] + [Path(name) for name, _, _ in ek], key=lambda w: w.name)
        plan = im.plan_build(load_matrix(), lock, generated_by="envkit bundle build", artifacts=artifacts, base=base,
                             hasher=stamps.sha256, python=(reqs, wheels, [], "bundle"))
    except BadInput as exc:
        return [], None, [f"the image build context ({exc.message})"]
    wheel_sha = {p.filename: p.sha256 for p in chosen} | {name: sha for name, _, sha in ek}
    entries = [_blob(f"{IMAGE_DIR}/context/{rel}", text.encode()) for rel, text in sorted(render.context_files(plan).items())]
    links, lacks = [], []
    for rel, _source, sha in render.context_inputs(plan):
        name = rel.rsplit("/", 1)[-1]
        src = f"vendor/{name}" if rel.startswith("artifacts/") else f"wheels/target/{name}"
        sha = sha or wheel_sha[name]
        if src not in have:
            lacks.append(f"{src}, which the image build context needs as {rel}")
        links.append((sha, rel, src))
    links.sort(key=lambda t: t[1])
    listing = "".join(f"{sha} {rel} {src}\n" for sha, rel, src in links)
    entries.append(_blob(f"{IMAGE_DIR}/context.sha256", (
        "# sha256, path in the image build context, path in the bundle: `sh image/assemble.sh DIR` links them into place\n"
        + listing).encode()))
    from envkit.resources import data_dir

    entries.append(_blob(f"{IMAGE_DIR}/assemble.sh", (data_dir("airgap") / "assemble-image.sh").read_bytes(), 0o755))
    key = hashlib.sha256(json.dumps(sorted([[e.path, e.sha256] for e in entries] + [list(x) for x in links])).encode())
    return entries, ImageContext(tag=image_tag(lock), key=key.hexdigest(), links=tuple(links)), lacks


def _tree_entries(src: Path, prefix: str) -> list[Entry]:
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith(".pyc"):
                continue
            full = Path(dirpath) / fn
            data = full.read_bytes()
            mode = 0o755 if os.access(full, os.X_OK) else 0o644
            out.append(_blob(f"{prefix}/{full.relative_to(src).as_posix()}", data, mode))
    return out


def _vendor_entries(lock: Lock, artifacts: Path | None, trust: bool, stamps) -> tuple[list[Entry], list[TrustedArtifact], list[str]]:
    """Each vendor package once: the signed zip edition when present, else the bare .run."""
    entries: dict[str, Entry] = {}
    trusted: list[TrustedArtifact] = []
    lacks: list[str] = []
    for art in lock.artifacts:
        candidates: list[tuple[str, str | None]] = []
        if art.zip:
            candidates.append((art.zip.file, art.zip.sha256))
        if art.run.file:
            candidates.append((art.run.file, art.run.sha256))
        if artifacts is None:
            if art.zip and any(art.zip.file in x for x in lacks):
                continue
            lacks.append(f"vendor package {candidates[0][0] if candidates else art.run.pattern} ({art.component}); "
                         "build with --artifacts DIR to include it")
            continue
        chosen: tuple[Path, str | None] | None = None
        for name, sha in candidates:
            if (artifacts / name).is_file():
                chosen = (artifacts / name, sha)
                break
        if chosen is None and not art.run.file:
            matches = sorted(artifacts.glob(art.run.pattern))
            if len(matches) == 1:
                chosen = (matches[0], art.run.sha256)
        if chosen is None:
            names = " or ".join(n for n, _ in candidates) or art.run.pattern
            raise CheckFailed(
                f"vendor package for {art.component} is missing from {artifacts}: {names}",
                where=Where(str(artifacts)),
                hint="Download it from the vendor (the lock has its URL where known) into the --artifacts folder.",
            )
        path, expected = chosen
        if path.name in entries:
            continue
        actual = stamps.sha256(path)
        if expected is None:
            if not trust:
                raise CheckFailed(
                    f"the lock has no sha256 for {path.name} ({art.component}); its file hashes to {actual}",
                    where=Where(str(path)),
                    hint="Check that hash against the vendor's published one, then rebuild with --trust-artifacts "
                         "(the manifest records it as trusted on first use).",
                )
            trusted.append(TrustedArtifact(file=path.name, sha256=actual))
        elif actual != expected:
            raise CheckFailed(
                f"{path.name} does not match the lock: expected sha256 {expected}, got {actual}",
                where=Where(str(path)),
                hint="The file is corrupt or another release; download it again from the vendor.",
            )
        mode = 0o755 if path.suffix == ".run" else 0o644
        entries[path.name] = Entry(f"vendor/{path.name}", actual, path.stat().st_size, mode, source=path)
    return list(entries.values()), trusted, lacks


def plan_bundle(
    lock: Lock,
    lock_bytes: bytes,
    *,
    root: str,
    cache,
    stamps,
    artifacts: Path | None = None,
    trust_artifacts: bool = False,
    controller: PythonClosure | None = None,
    image_archive: Path | None = None,
    base: str | None = None,
) -> BundlePlan:
    """`controller`: envkit's closure for the controller, when not the lock's (`bundle build --controller-python`)."""
    from envkit.download import Fetch
    from envkit.resources import data_dir

    target, locked_controller = lock.python.closure, lock.python.controller
    controller = controller or locked_controller
    if target is None or controller is None:
        raise BadInput(
            "the lock has no Python closure: it names versions, not the wheels to bundle",
            hint="Run `envkit lock --lock envkit.lock` first (it records every wheel with URL, sha256 and size).",
        )
    entries: list[Entry] = []
    fetch: list[Fetch] = []
    for kind, closure in (("target", target), ("controller", controller)):
        for p in closure.packages:
            fetch.append(Fetch(p.url, p.sha256, p.size, p.filename))
            entries.append(Entry(f"wheels/{kind}/{p.filename}", p.sha256, p.size, source=cache.path(p.sha256), link=True))
    base_dir = getattr(cache, "base", None)
    ek_name, ek_bytes = envkit_wheel(Path(base_dir) if base_dir is not None else None)
    ek_sha = hashlib.sha256(ek_bytes).hexdigest()
    ek_row = [("envkit", __version__, ek_sha)]
    # envkit runs on the controller (provision) and on every target (the smoke role's smoke and doctor),
    # where the target's Python allows it
    from envkit.closure import envkit_supports

    on_target = envkit_supports(target.target.python)
    for kind, closure in (("target", target), ("controller", controller)):
        with_envkit = kind == "controller" or on_target
        if with_envkit:
            entries.append(_blob(f"wheels/{kind}/{ek_name}", ek_bytes))
        entries.append(_blob(f"requirements/{kind}.txt", requirements_txt(closure, ek_row if with_envkit else [])))
    entries.append(_blob("envkit.lock", lock_bytes))
    vendor, trusted, lacks = _vendor_entries(lock, artifacts, trust_artifacts, stamps)
    entries += vendor
    try:
        entries += _tree_entries(data_dir("playbooks"), "playbooks")
    except FileNotFoundError:
        lacks.append("playbooks/ (not shipped with this envkit)")
    image_entries, image_ctx, image_lacks = _image_entries(lock, artifacts, stamps, {e.path: e for e in entries},
                                                           (ek_name, __version__, ek_sha) if on_target else None, base)
    entries += image_entries
    lacks += image_lacks
    if image_archive is not None:
        in_cache = base_dir is not None and Path(image_archive).resolve().is_relative_to(Path(base_dir).resolve())
        entries.append(Entry(f"{IMAGE_DIR}/{image_archive.name}", stamps.sha256(image_archive), image_archive.stat().st_size,
                             source=image_archive, link=in_cache))  # the cache's own archive may be hard-linked
    else:
        lacks.append("the built container image (build with --image, or --image-archive FILE, to include one)")
    airgap = data_dir("airgap")
    install = (airgap / "install.sh.in").read_text()
    install = (install.replace("@ENVKIT_VERSION@", __version__)
               .replace("@CONTROLLER_PYTHON@", controller.target.python)
               .replace("@CONTROLLER_ARCH@", controller.target.arch))
    entries.append(_blob("install.sh", install.encode(), 0o755))
    if (airgap / "README.md").is_file():
        entries.append(_blob("README.md", (airgap / "README.md").read_bytes()))
    if not on_target:
        lacks.append(f"envkit on the targets: it needs Python {_requires_python()}, the targets have {target.target.python} "
                     "(provisioning skips its smoke and doctor steps there)")
    for name in target.excluded:
        lacks.append(f"Python project {name} and what only it needs (excluded from the closure on purpose)")
    entries.sort(key=lambda e: e.path)
    dup = {e.path for e in entries if sum(1 for x in entries if x.path == e.path) > 1}
    if dup:
        raise BadInput(f"two bundle entries share a path: {sorted(dup)}")
    manifest = BundleManifest(
        envkit_version=__version__,
        lock_sha256=hashlib.sha256(lock_bytes).hexdigest(),
        target=_target_dict(target),
        controller=_target_dict(controller) | ({} if controller == locked_controller else
                                                {"resolved": f"at bundle build by {controller.resolver}, not in the lock"}),
        lacks=sorted(lacks),
        trusted_on_first_use=sorted(trusted, key=lambda t: t.file),
        files=[BundleFile(path=e.path, sha256=e.sha256, size=e.size) for e in entries],
        lock=lock.model_dump(mode="json"),
    )
    base = getattr(cache, "base", None)
    return BundlePlan(root=root, entries=entries, manifest=manifest, fetch=fetch, trusted=trusted,
                      state=Path(base) / "bundles" if base is not None else None, image=image_ctx)


# --- writers -----------------------------------------------------------------------------------
def _tmp_sibling(out: Path) -> Path:
    return out.with_name(f".{out.name}.partial-{os.getpid()}")


def write_dir(plan: BundlePlan, out: Path) -> None:
    """A folder bundle; cache entries are hard-linked when on the same file system (read-only), else copied."""
    import shutil

    tmp = _tmp_sibling(out)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for e in plan.all_entries():
            dest = tmp / e.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            if e.data is not None:
                dest.write_bytes(e.data)
                os.chmod(dest, e.mode)
            elif e.link:
                try:
                    os.link(e.source, dest)
                except OSError:
                    shutil.copyfile(e.source, dest)
                    os.chmod(dest, 0o444)
            else:
                shutil.copyfile(e.source, dest)
                os.chmod(dest, e.mode)
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class _HashingWriter:
    """A write-only file that hashes what passes through it (the archive's sha256 without reading it back)."""

    def __init__(self, raw) -> None:
        self.raw, self.h, self.n = raw, hashlib.sha256(), 0

    def write(self, b) -> int:
        self.h.update(b)
        self.n += len(b)
        return self.raw.write(b)

    def tell(self) -> int:
        return self.n

    def flush(self) -> None:
        self.raw.flush()


def _tar_mode(e: Entry) -> int:
    return 0o755 if e.mode & 0o111 else 0o644


def archive_key(plan: BundlePlan, out: Path) -> str:
    """Everything the bytes of `write_tar(plan, out)` depend on: equal keys, byte-identical archives.

    Each entry by path, sha256, size and mode (the manifest's digest among them), the root folder, the
    compression, and the writers (envkit's, Python's tarfile, zlib's deflate)."""
    import sys
    import zlib

    gz = out.name.endswith((".tar.gz", ".tgz"))
    doc = {"v": 1, "envkit": __version__, "python": sys.version, "zlib": zlib.ZLIB_RUNTIME_VERSION if gz else None,
           "gzip": gz, "root": plan.root,
           "entries": [[e.path, e.sha256, e.size, _tar_mode(e)] for e in plan.all_entries()]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _record_path(plan: BundlePlan, out: Path) -> Path | None:
    if plan.state is None:
        return None
    return plan.state / output_key(out)


def _reusable(plan: BundlePlan, out: Path, key: str) -> str | None:
    """The sha256 of `out` when envkit wrote it from an identical plan and it has not changed since; else None."""
    rec = _record_path(plan, out)
    if rec is None:
        return None
    try:
        lines = rec.read_text().split("\n")
        st = os.stat(out)
    except OSError:
        return None
    if len(lines) >= 3 and lines[0] == key and lines[1] == archive_stamp(st) and len(lines[2]) == 64:
        return lines[2]
    return None


def _remember(plan: BundlePlan, out: Path, key: str, digest: str) -> None:
    rec = _record_path(plan, out)
    if rec is None:
        return
    try:
        rec.parent.mkdir(parents=True, exist_ok=True)
        tmp = rec.with_name(f".{rec.name}.{os.getpid()}")
        tmp.write_text(f"{key}\n{archive_stamp(os.stat(out))}\n{digest}\n")
        os.replace(tmp, rec)
    except OSError:
        pass


def write_tar(plan: BundlePlan, out: Path) -> str:
    """A reproducible archive: sorted entries, fixed times and owners, no directories; gzip without a timestamp.

    Returns the archive's sha256. When `out` is an archive this envkit wrote from an identical plan (same
    `archive_key`) and it is unchanged since (size, mtime, ctime, inode, device, recorded in the cache like the
    wheel entries' `.ok`), it is kept as it is: writing it again would give the same bytes."""
    import gzip

    key = archive_key(plan, out)
    digest = _reusable(plan, out, key)
    if digest is not None:
        return digest
    tmp = _tmp_sibling(out)
    try:
        with open(tmp, "wb") as raw:
            hashing = _HashingWriter(raw)
            fileobj = gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=6) \
                if out.name.endswith((".tar.gz", ".tgz")) else hashing
            with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT, copybufsize=1 << 20) as tf:
                for e in plan.all_entries():
                    info = tarfile.TarInfo(f"{plan.root}/{e.path}")
                    info.size, info.mtime, info.mode = e.size, MTIME, _tar_mode(e)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    if e.data is not None:
                        tf.addfile(info, io.BytesIO(e.data))
                    else:
                        with open(e.source, "rb") as fh:
                            tf.addfile(info, fh)
            if fileobj is not hashing:
                fileobj.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    digest = hashing.h.hexdigest()
    _remember(plan, out, key, digest)
    return digest


def is_archive(path: Path) -> bool:
    return path.name.endswith((".tar", ".tar.gz", ".tgz"))


# --- verify ------------------------------------------------------------------------------------
@dataclass
class VerifyReport:
    bundle: str
    files: int = 0
    bytes: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    modified: list[dict] = field(default_factory=list)
    digest: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.modified)

    def to_dict(self) -> dict:
        return {"bundle": self.bundle, "ok": self.ok, "files": self.files, "bytes": self.bytes,
                "manifest_sha256": self.digest, "missing": self.missing, "extra": self.extra, "modified": self.modified}


def _parse_manifest(data: bytes, where: str) -> BundleManifest:
    from pydantic import ValidationError

    try:
        return BundleManifest.model_validate(json.loads(data))
    except (ValueError, ValidationError) as exc:
        raise CheckFailed(
            f"{where}: manifest.json is not a valid bundle manifest ({str(exc).splitlines()[0]})",
            where=Where(where),
            hint="The manifest was altered or truncated; get the bundle again from its source.",
        ) from None


def check_members(tf: tarfile.TarFile, archive: str) -> tuple[str, list[tarfile.TarInfo]]:
    """Refuse unsafe members before anything is read or written; returns the root folder and the files."""
    filt = getattr(tarfile, "data_filter", None)
    if filt is None:  # pragma: no cover - Python < 3.10.12 / 3.11.4
        raise CannotRun("this Python's tarfile has no extraction filters (PEP 706)", hint="Use Python >= 3.11.4 or 3.10.12.")
    dest = os.path.realpath("/nonexistent-envkit-verify-root")
    files, roots = [], set()
    for m in tf.getmembers():
        why = None
        if m.islnk():
            why = "a hard link"
        elif m.isdev() or m.isfifo():
            why = "a device or special file"
        else:
            try:
                safe = filt(m, dest)
                if safe.name != m.name or (safe.linkname or "") != (m.linkname or ""):
                    why = "an absolute path"  # the filter would rewrite it: refuse rather than guess
            except tarfile.FilterError as exc:
                why = str(exc)
        if why:
            raise CheckFailed(
                f"{archive}: refused: member {m.name!r} is unsafe ({why}); nothing was extracted",
                where=Where(archive, key=m.name),
                hint="Do not extract this archive; get the bundle again from a trusted source.",
            )
        parts = posixpath.normpath(m.name).split("/")
        roots.add(parts[0])
        if m.isfile() and len(parts) > 1:
            files.append(m)
    if len(roots) != 1:
        raise BadInput(f"{archive}: not an envkit bundle (expected one top folder, found {sorted(roots)[:5]})")
    return roots.pop(), files


def _hash_stream(fh) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    while chunk := fh.read(1 << 20):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


def verify(path: Path, expect_digest: str | None = None, jobs: int | None = None) -> VerifyReport:
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: no such bundle", where=Where(str(path)))
    rep = VerifyReport(bundle=str(path))
    actual: dict[str, tuple[str, int]] = {}
    if path.is_dir():
        mpath = path / MANIFEST
        if not mpath.is_file():
            raise BadInput(f"{path}: not an envkit bundle (no {MANIFEST})", where=Where(str(path)))
        mdata = mpath.read_bytes()
        manifest_obj = _parse_manifest(mdata, str(path))
        present = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for fn in filenames:
                full = Path(dirpath) / fn
                rel = full.relative_to(path).as_posix()
                if rel != MANIFEST:
                    present.append(rel)
        expected = {f.path: f for f in manifest_obj.files}

        def h(rel: str) -> tuple[str, tuple[str, int]]:
            full = path / rel
            if full.is_symlink() or not full.is_file():
                return rel, ("not a regular file", -1)
            with open(full, "rb", buffering=0) as fh:
                return rel, _hash_stream(fh)

        with ThreadPoolExecutor(max_workers=jobs or min(8, (os.cpu_count() or 2))) as pool:
            # biggest first keeps every worker busy to the end
            order = sorted(present, key=lambda r: -(expected[r].size if r in expected else 0))
            for rel, res in pool.map(h, order):
                actual[rel] = res
    else:
        if not is_archive(path):
            raise BadInput(f"{path}: not a bundle folder or a .tar/.tar.gz archive", where=Where(str(path)))
        try:
            tf = tarfile.open(path, "r:*")
        except tarfile.TarError as exc:
            raise CheckFailed(f"{path}: not a readable archive ({exc})", where=Where(str(path))) from None
        with tf:
            root, members = check_members(tf, str(path))
            mdata = None
            # an uncompressed archive: each member's bytes lie at a known offset, so they hash in parallel
            plain = isinstance(tf.fileobj, io.BufferedReader)
            todo = []
            for m in members:
                rel = m.name[len(root) + 1:]
                if rel == MANIFEST:
                    mdata = tf.extractfile(m).read()
                elif plain and not m.issparse():
                    todo.append((rel, m))
                else:
                    actual[rel] = _hash_stream(tf.extractfile(m))
            if todo:
                fd = tf.fileobj.fileno()

                def h_member(m: tarfile.TarInfo) -> tuple[str, int]:
                    hm, off, end = hashlib.sha256(), m.offset_data, m.offset_data + m.size
                    while off < end:
                        chunk = os.pread(fd, min(1 << 20, end - off), off)
                        if not chunk:
                            raise CheckFailed(f"{path}: truncated archive (member {m.name!r})", where=Where(str(path)))
                        hm.update(chunk)
                        off += len(chunk)
                    return hm.hexdigest(), m.size

                with ThreadPoolExecutor(max_workers=jobs or min(8, (os.cpu_count() or 2))) as pool:
                    order = sorted(todo, key=lambda t: -t[1].size)  # biggest first keeps every worker busy
                    done = dict(zip((id(m) for _, m in order), pool.map(h_member, (m for _, m in order))))
                for rel, m in todo:  # in archive order: a later member of the same name wins, as before
                    actual[rel] = done[id(m)]
            if mdata is None:
                raise BadInput(f"{path}: not an envkit bundle (no {root}/{MANIFEST})", where=Where(str(path)))
            manifest_obj = _parse_manifest(mdata, str(path))
            expected = {f.path: f for f in manifest_obj.files}
    rep.digest = hashlib.sha256(mdata).hexdigest()
    if expect_digest is not None and expect_digest.removeprefix("sha256:") != rep.digest:
        raise CheckFailed(
            f"{path}: manifest.json has sha256 {rep.digest}, not the expected {expect_digest.removeprefix('sha256:')}",
            hint="The bundle is not the one that was published; do not install it.",
        )
    for rel, f in sorted(expected.items()):
        if rel not in actual:
            rep.missing.append(rel)
            continue
        sha, size = actual[rel]
        if sha != f.sha256 or size != f.size:
            rep.modified.append({"path": rel, "expected_sha256": f.sha256, "actual_sha256": sha,
                                 "expected_size": f.size, "actual_size": size})
        rep.files += 1
        rep.bytes += max(size, 0)
    rep.extra = sorted(set(actual) - set(expected))
    return rep

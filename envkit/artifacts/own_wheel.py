"""envkit's own wheel, built deterministically from the running installation: the bundle's controller and targets
install envkit from it, offline, and so does every image `envkit image render | build` makes (the smoke Jobs and
`envkit doctor` run `envkit` inside it).

Light on purpose (no pydantic, no zip until a wheel is built): `envkit bundle build`'s up-to-date check keys on
`envkit_key` before anything else is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from envkit import __version__

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: every member gets it, so the wheel is reproducible


def envkit_sources() -> list[tuple[str, Path]]:
    """(name in the wheel, file) for envkit's package and its data folders, sorted."""
    from envkit.resources import DATA_FOLDERS, PACKAGE_DIR, data_dir

    out: list[tuple[str, Path]] = []

    def add_tree(src: Path, prefix: str) -> None:
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__",) and not d.startswith("."))
            if Path(dirpath) == PACKAGE_DIR:
                dirnames[:] = [d for d in dirnames if d != "_data"]
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")) or fn.startswith("."):
                    continue
                full = Path(dirpath) / fn
                out.append((f"{prefix}/{full.relative_to(src).as_posix()}", full))

    add_tree(PACKAGE_DIR, "envkit")
    for name in DATA_FOLDERS:
        try:
            add_tree(data_dir(name), f"envkit/_data/{name}")
        except FileNotFoundError:
            pass
    return out


def envkit_metadata(dist) -> tuple[str, str]:  # noqa: ANN001
    meta = dist.read_text("METADATA") or f"Metadata-Version: 2.1\nName: envkit\nVersion: {__version__}\n"
    entry_points = dist.read_text("entry_points.txt") or "[console_scripts]\nenvkit = envkit.cli:main\n"
    return meta, entry_points


def envkit_key(sources: list[tuple[str, Path]] | None = None, dist=None) -> str:  # noqa: ANN001
    """What envkit's own wheel (and so every file envkit puts in a bundle) depends on: its version, metadata,
    and each source file's name, size and mtime."""
    from importlib.metadata import distribution

    dist = dist or distribution("envkit")
    meta, entry_points = envkit_metadata(dist)
    sources = envkit_sources() if sources is None else sources
    return hashlib.sha256(
        json.dumps(
            [
                __version__,
                meta,
                entry_points,
                [[arc, str(p), st.st_size, st.st_mtime_ns] for arc, p in sources for st in [p.stat()]],
            ]
        ).encode()
    ).hexdigest()


def envkit_wheel(cache_dir: Path | None = None) -> tuple[str, bytes]:
    """A wheel of the running envkit: its package, its data folders, its installed metadata. Reproducible.

    With `cache_dir`, the wheel is kept there under a key of every source file's name, size and mtime (as make
    does), so that a rebuild with unchanged sources does not compress the package again."""
    import base64
    import io
    import stat
    import zipfile
    from importlib.metadata import distribution

    from envkit.errors import CannotRun
    from envkit.io.outputs import atomic_write_bytes

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
            atomic_write_bytes(cached, data, fsync=False)
        except (OSError, CannotRun):
            pass  # a read-only cache only costs the compression next time
    return name, data

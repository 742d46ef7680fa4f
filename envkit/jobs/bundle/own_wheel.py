"""envkit's own wheel, built deterministically from the running installation (the bundle's controller and
targets install envkit from it, offline)."""

from __future__ import annotations

import base64
import hashlib
import io
import stat
import zipfile
from pathlib import Path

from envkit import __version__
from envkit.errors import CannotRun
from envkit.io.outputs import atomic_write_bytes
from envkit.jobs.bundle.uptodate import envkit_key, envkit_metadata, envkit_sources

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: every member gets it, so the wheel is reproducible


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
            atomic_write_bytes(cached, data, fsync=False)
        except (OSError, CannotRun):
            pass  # a read-only cache only costs the compression next time
    return name, data

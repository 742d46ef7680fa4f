"""The files of the recorded PyPI snapshot (tests/fixtures/pypi-snapshot) as a file host serves them to
`envkit matrix refresh`: wheels read by range (their METADATA, a vllm-ascend release's `_build_info.py`) and sdists read
whole (PKG-INFO, a vllm-ascend release's versioning table), each built from the snapshot's recorded documents."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

from envkit.jobs.matrix import refresh

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"


def wheel(filename: str) -> bytes:
    """A wheel whose METADATA says Requires-Python >=3.99 (no release says so: it is seen to come from the wheel);
    a vllm-ascend wheel also holds the `_build_info.py` its release's recorded build document says (the way a build
    writes it: one assignment a line)."""
    name, version = filename.split("-")[:2]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            f"{name}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.99\nRequires-Dist: torch>=9.0\n\n",
        )
        build = SNAPSHOT / "vllm-ascend" / f"{version}.build.json"
        if name == "vllm_ascend" and build.is_file():
            doc = json.loads(build.read_text())
            lines = [f"__{k}__ = '{doc[k]}'\n" for k in ("soc_version", "device_type") if doc[k]]
            z.writestr("vllm_ascend/_build_info.py", "# Auto-generated file\n" + "".join(lines))
    return out.getvalue()


def sdist(filename: str) -> bytes:
    """An sdist (tar.gz) with a PKG-INFO, and for a vllm-ascend release whose recorded versioning document names a
    row, the versioning table with that row (its Python cell as recorded) beside another release's."""
    name, version = filename.removesuffix(".tar.gz").split("-")[:2]
    members = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.10\n"}
    docs = SNAPSHOT / "vllm-ascend" / f"{version}.docs.json"
    if name == "vllm_ascend" and docs.is_file():
        doc = json.loads(docs.read_text())
        rows = [f"| {doc['row']} | v0.0.0 | {doc['python']} | 9.1.0 |\n"] if doc["row"] else []
        members[refresh.VERSIONING_DOC] = (
            "# Versioning policy\n\n| vLLM Ascend | vLLM | Python | Stable CANN |\n|---|---|---|---|\n"
            + "".join(rows)
            + "| v0.0.1 | v0.0.1 | >= 3.8, < 3.9 | 7.0.0 |\n"  # another release's row, of no real release
        )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for rel, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def ranged(body: bytes, headers: dict | None) -> bytes:
    """A `Range: bytes=-N` or `bytes=A-B` answer of `body`, as a file host gives it (the whole body without one)."""
    spec = (headers or {}).get("Range", "").removeprefix("bytes=")
    if not spec:
        return body
    first, _, last = spec.partition("-")
    if not first:
        return body[-int(last) :]
    return body[int(first) : int(last) + 1]


def file_body(filename: str) -> bytes:
    """The snapshot file `filename` (an sdist or a wheel) as built above."""
    return sdist(filename) if filename.endswith(".tar.gz") else wheel(filename)

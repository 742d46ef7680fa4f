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


# The shape of vllm-ascend's docs/source/community/versioning_policy.md (at 182b75ea8): prose, the release
# compatibility matrix (seven padded columns, one row a release), the main branch's table (template placeholders in
# its cells) and the release window (dates first, release names in the text).
_VERSIONING = """\
# Versioning Policy

## Release compatibility matrix

The table below is the release compatibility matrix for vLLM Ascend release.

| vLLM Ascend | vLLM              | Python          | Stable CANN |        PyTorch/torch_npu        |   Triton Ascend   |    Mooncake  |
|-------------|-------------------|-----------------|-------------|---------------------------------|-------------------|--------------|
{rows}| v0.0.1      | v0.0.1            | >= 3.8, < 3.9   | 7.0.0       | 2.0.0 / 2.0.0                   |                   |              |

For main branch of vLLM Ascend, we usually make it compatible with the latest vLLM release.

| vLLM Ascend | vLLM         | Python           | Stable CANN | PyTorch/torch_npu  | Triton Ascend |
|-------------|--------------|------------------|-------------|--------------------|---------------|
|     main    | {{{{main_vllm_commit}}}} | {{{{main_python_version}}}}   | {{{{main_cann_version}}}} | {{{{main_pytorch_torch_npu_version}}}} | {{{{main_triton_ascend_version}}}} |

### Release window

| Date       | Event                                     |
|------------|-------------------------------------------|
| 2026.08.16 | {event} Final release, {event}            |
"""


def sdist(filename: str) -> bytes:
    """An sdist (tar.gz) with a PKG-INFO, and for a vllm-ascend release whose recorded versioning document names a
    row, the versioning policy in the shape of the real file (`_VERSIONING`) with that row (its Python cell as
    recorded) beside another release's; the release is named in the release window either way."""
    name, version = filename.removesuffix(".tar.gz").split("-")[:2]
    members = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.10\n"}
    docs = SNAPSHOT / "vllm-ascend" / f"{version}.docs.json"
    if name == "vllm_ascend" and docs.is_file():
        doc = json.loads(docs.read_text())
        rows = ""
        if doc["row"]:
            cells = [doc["row"], "v0.0.0", doc["python"], "9.1.0", "2.10.0 / 2.10.0.post4", "3.2.2", "v0.3.11.post1"]
            widths = [11, 17, 15, 11, 31, 17, 12]
            rows = "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |\n"
        members[refresh.VERSIONING_DOC] = _VERSIONING.format(rows=rows, event=f"v{version}")
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

"""The smoke run's files, one owner for their format: `report.json` (the SmokeReport, `envkit.models.smoke`) and
`logits.safetensors` (per prompt the logits, inputs and kept positions, with the run's facts as metadata).

`envkit smoke` writes them through here, `envkit compare` and the collectives' comparison read them through here,
and so will any export of smoke runs. A shared layer: it imports no job.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.errors import BadInput, Where

if TYPE_CHECKING:
    from envkit.models.smoke import SmokeReport

REPORT_FILE = "report.json"
LOGITS_FILE = "logits.safetensors"
METADATA_FORMAT = "envkit-smoke-logits/1"  # the logits file's `envkit_format`
# the logits file's metadata that a comparison needs
REQUIRED_META = (
    "envkit_format",
    "device",
    "device_type",
    "param_device",
    "dtype",
    "model_digest",
    "prompt_digest",
    "prompts",
    "token_ids",
)


def report_text(report: SmokeReport) -> str:
    """report.json's text (what `write_report` writes, and a claimed output's writer takes)."""
    return report.model_dump_json(indent=2) + "\n"


def write_report(out_dir: Path, report: SmokeReport) -> Path:
    """`out_dir/report.json`, atomically."""
    from envkit.io.outputs import atomic_write_text

    path = Path(out_dir) / REPORT_FILE
    atomic_write_text(path, report_text(report))
    return path


def read_report(path: Path) -> dict[str, Any]:
    """A report.json read strictly (`envkit.io.jsonread`: size, depth, no NaN): a JSON object with a smoke report's keys
    only. BadInput (exit 2) naming the file and the key otherwise."""
    from envkit.io.jsonread import read_json

    return report_keys(read_json(path, what="smoke report"), path)


def report_keys(report: Any, path: Path) -> dict[str, Any]:
    """`report` (read from `path`) when it is a JSON object with a smoke report's keys only; BadInput otherwise."""
    from envkit.models.smoke import SmokeReport

    if not isinstance(report, dict):
        raise BadInput(f"{path}: not a smoke report (a JSON object)", where=Where(file=str(path)))
    unknown = sorted(set(report) - set(SmokeReport.model_fields))
    if unknown:
        raise BadInput(f"{path}: {unknown[0]}: not a key of a smoke report", where=Where(str(path), None, unknown[0]))
    return report


def write_logits(path: Path, tensors: dict[str, Any], meta: dict[str, str]) -> None:
    """The run's logits file: `tensors` (numpy arrays) with `meta` (every REQUIRED_META key) as its metadata."""
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing or meta.get("envkit_format") != METADATA_FORMAT:
        raise ValueError(f"logits metadata lacks {missing or ['envkit_format']}")
    write_safetensors(path, tensors, meta)


def read_logits(path: Path, label: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(metadata, tensors) of a logits file that envkit wrote; BadInput naming `label` and the file otherwise."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = dict(fh.metadata() or {})
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as exc:  # noqa: BLE001 - any unreadable file is bad input
        raise BadInput(f"{label}: cannot read {path}: {exc}", where=Where(file=str(path))) from exc
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing or meta.get("envkit_format") != METADATA_FORMAT:
        raise BadInput(
            f"{label}: {path} is not an envkit smoke logits file (metadata {', '.join(missing) or 'envkit_format'} missing or wrong)",
            where=Where(file=str(path)),
        )
    return meta, tensors


_ST_DTYPES = {
    "float32": "F32",
    "float64": "F64",
    "float16": "F16",
    "int64": "I64",
    "int32": "I32",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}


def write_safetensors(path: Path, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write numpy arrays as a safetensors file, byte for byte deterministic.

    Tensors in name order, header keys sorted (the safetensors library orders its metadata as a hash
    map does: differently from one call to the next). Little-endian, as the format requires.
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = tensors[name]
        kind = _ST_DTYPES.get(arr.dtype.name)
        if kind is None:
            raise TypeError(f"cannot write dtype {arr.dtype} of {name} to safetensors")
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": kind, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for blob in blobs:
            fh.write(blob)

"""A bundle manifest for any folder of files (test helper): what `envkit bundle serve` and pull mode need to verify,
without building a bundle from a lock."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def seal(root: Path) -> Path:
    """Write root/manifest.json listing every file under `root` (sha256, size); no SHA256SUMS. Returns root."""
    files = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not p.is_symlink() and rel != "manifest.json":
            files.append({"path": rel, "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "size": p.stat().st_size})
    manifest = {
        "schema_version": 1,
        "envkit_version": "0",
        "lock_sha256": "0" * 64,
        "target": {},
        "controller": {},
        "lacks": [],
        "files": files,
        "lock": {},
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return root

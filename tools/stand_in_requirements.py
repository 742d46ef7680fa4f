#!/usr/bin/env python3
"""Write a hashed requirements file for a lock's Python pins (and envkit's own dependencies, which the image's
envkit layer needs) with STAND-IN hashes (sha256 of "name==version").

For demos and render tests where the real wheels are not at hand: `envkit image render --requirements` needs
hashed pins, and these let it render. An image built from them fails at pip's hash check, as it should.

    python tools/stand_in_requirements.py envkit.lock requirements.txt
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def envkit_pins() -> dict[str, str]:
    """envkit's own runtime requirements (`envkit lock` adds them to a lock's closure, so that the image installs
    envkit), each at the lowest version it allows: stand-in versions, stable while pyproject.toml's bounds are."""
    from packaging.requirements import Requirement

    from envkit.artifacts.closure import envkit_roots
    from envkit.artifacts.wheels import normalize

    out = {}
    for root in envkit_roots():
        req = Requirement(root)
        floors = sorted(s.version for s in req.specifier if s.operator in (">=", "==", "~=", "==="))
        out[normalize(req.name)] = floors[0] if floors else "1.0.0"
    return out


def stand_in_requirements(lock_path: Path, out: Path) -> Path:
    """The lock's pins, envkit's own dependencies and CANN's deps, each with a stand-in hash."""
    from envkit.artifacts.wheels import normalize
    from envkit.lock.file import read_lock

    lock = read_lock(lock_path)
    pins = {p.name: p.version for p in lock.python.requirements}
    have = {normalize(n) for n in pins}
    for name, ver in envkit_pins().items():
        if name not in have:
            pins[name] = ver
            have.add(name)
    for spec in lock.python.cann_runtime:
        name, _, ver = spec.partition("==")
        if normalize(name) not in have:
            pins[name] = ver or "1.0.0"
            have.add(normalize(name))
    lines = []
    for name, ver in sorted(pins.items()):
        h = hashlib.sha256(f"{name}=={ver}".encode()).hexdigest()
        lines.append(f"{name}=={ver} \\\n    --hash=sha256:{h}")
    out.write_text("\n".join(lines) + "\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    stand_in_requirements(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

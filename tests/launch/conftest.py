from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HCCN = ROOT / "tests" / "fixtures" / "hccn"


def resolve_lock(chip: str, out: Path) -> Path:
    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", "--chip", chip, "--arch", "aarch64", "-o", str(out)])
    assert exc.value.code in (0, None), f"resolve --chip {chip} failed"
    return out


@pytest.fixture(scope="session")
def locks(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("locks")
    return {chip: resolve_lock(chip, base / f"{chip}.lock") for chip in ("910b", "a3", "950", "310p")}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with the recorded hccn.conf files; tests write their inventory beside them."""
    for name in ("a2_node0.hccn.conf", "a2_node1.hccn.conf", "a3_node0.hccn.conf"):
        shutil.copy(HCCN / name, tmp_path / name)
    return tmp_path


def write_inventory(folder: Path, text: str) -> Path:
    path = folder / "hosts.ini"
    path.write_text(text)
    return path

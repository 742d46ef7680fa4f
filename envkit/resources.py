"""Where the data folders are: inside the installed wheel (envkit/_data/...) or beside the source tree."""

from __future__ import annotations

from pathlib import Path
from typing import Final

PACKAGE_DIR: Final = Path(__file__).resolve().parent
_BUNDLED: Final = PACKAGE_DIR / "_data"
_SOURCE_ROOT: Final = PACKAGE_DIR.parent

DATA_FOLDERS: Final = ("matrices", "images", "playbooks", "airgap")


def data_dir(name: str) -> Path:
    """The folder `name` (one of DATA_FOLDERS), wherever envkit is installed."""
    if name not in DATA_FOLDERS:
        raise ValueError(f"unknown data folder {name!r}")
    for base in (_BUNDLED, _SOURCE_ROOT):
        candidate = base / name
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"envkit data folder {name!r} is missing from {_BUNDLED} and {_SOURCE_ROOT}")


def matrices_dir() -> Path:
    return data_dir("matrices")

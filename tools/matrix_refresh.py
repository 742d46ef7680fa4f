#!/usr/bin/env python3
"""Refresh the Python-package rules of the matrix from PyPI metadata (the same as `envkit matrix refresh`).

    python tools/matrix_refresh.py                       # read PyPI, print the diff and the torch/torch_npu report
    python tools/matrix_refresh.py --write               # apply the diff to matrices/python_packages.yaml
    python tools/matrix_refresh.py --record DIR          # also record the documents read (a test snapshot)
    python tools/matrix_refresh.py --snapshot DIR        # offline, from a recorded snapshot

Exit 0: nothing to change (or written); 1: the rules differ from the metadata; 2: bad input or PyPI unreachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    """`envkit matrix refresh` with these arguments; exits with its code."""
    from envkit.cli import main as envkit_main

    envkit_main(["matrix", "refresh", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()

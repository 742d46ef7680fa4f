"""Fixtures shared by every test folder."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process through its real entry point (error boundary included)."""

    def _run(*args: str) -> Result:
        from envkit.cli import main

        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run

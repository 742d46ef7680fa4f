"""Fixtures of the scan tests: the projects written for them (tests/fixtures/projects/) and locks to scan against."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"


def _resolve(out: Path, *args: str) -> Path:
    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", *args, "-o", str(out)])
    assert exc.value.code in (0, None)
    return out


@pytest.fixture(scope="session")
def lock_aarch64(tmp_path_factory) -> Path:
    """The default stack's lock (910b, aarch64, Python 3.10: torch 2.12.0+cpu, numpy 2.2.6, transformers 5.10.1)."""
    return _resolve(tmp_path_factory.mktemp("lock-a") / "envkit.lock")


@pytest.fixture(scope="session")
def lock_x86(tmp_path_factory) -> Path:
    return _resolve(tmp_path_factory.mktemp("lock-x") / "envkit.lock", "--arch", "x86_64")


@pytest.fixture
def scan_json(run_cli):
    """`envkit scan ARGS --json`: (exit code, the document)."""
    import json

    def _run(*args: str) -> tuple[int, dict]:
        r = run_cli("scan", *args, "--json")
        assert "Traceback" not in r.err, r.err
        return r.code, json.loads(r.out)

    return _run


def by_rule(doc: dict) -> dict[tuple[str, str], str]:
    """(path:line, rule) -> severity of each finding."""
    return {(f"{f['path']}:{f['line']}", f["rule"]): f["severity"] for f in doc["findings"]}

"""An edited lock is caught: `envkit validate` of a lock with one artifact field changed by hand fails.

Only the command line and the lock's YAML text: `envkit resolve -o`, one line of the cann-toolkit
artifact edited, `envkit validate` (so these tests hold whatever module reads and writes the lock).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

COMPONENT = "cann-toolkit"
RESOLVE = ["--chip", "910b", "--arch", "aarch64", "--cann", "8.5.0", "--python", "3.10"]


def _sha(value: str) -> str:
    return value[:-1] + ("0" if value[-1] != "0" else "1")


# name -> (the field as a lock path names it, old line pattern, how the value is replaced)
EDITS = {
    "zip sha256": ("zip.sha256", r"^(    sha256: )([0-9a-f]{64})$", lambda m: m[1] + _sha(m[2])),
    "zip url": ("zip.url", r"^(    url: https://)([^/]+)(/.*)$", lambda m: m[1] + "mirror.example.org" + m[3]),
    "zip file name": ("zip.file", r"^(    file: )(\S+)(\.zip)$", lambda m: m[1] + m[2].replace("8.5.0", "8.5.1") + m[3]),
    "run file name": ("run.file", r"^(    file: )(\S+)(\.run)$", lambda m: m[1] + m[2].replace("8.5.0", "8.5.1") + m[3]),
    "run sha256 (null in the lock)": ("run.sha256", r"^(    sha256: )(null)$", lambda m: m[1] + "ab" * 32),
}


@pytest.fixture(scope="module")
def lock_text(tmp_path_factory) -> str:
    from envkit.cli import main

    out = tmp_path_factory.mktemp("lock-edits") / "envkit.lock"
    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", *RESOLVE, "-o", str(out)])
    assert exc.value.code in (0, None)
    return out.read_text(encoding="utf-8")


def _artifact_block(text: str) -> tuple[int, int]:
    """Start and end offsets of the cann-toolkit artifact in the lock's text."""
    start = text.index(f"- component: {COMPONENT}\n")
    nxt = re.compile(r"^(- component: |\S)", re.M).search(text, start + 1)
    return start, nxt.start() if nxt else len(text)


def _edited(text: str, pattern: str, repl) -> str:
    start, end = _artifact_block(text)
    block, n = re.subn(pattern, repl, text[start:end], count=1, flags=re.M)
    assert n == 1 and block != text[start:end], f"{pattern} is not in the {COMPONENT} artifact"
    return text[:start] + block + text[end:]


def _validate(run_cli, path: Path):
    res = run_cli("validate", str(path), "--json")
    return res, res.out + res.err


def test_the_lock_as_written_is_valid(lock_text, tmp_path, run_cli):
    path = tmp_path / "envkit.lock"
    path.write_text(lock_text, encoding="utf-8")
    res, _ = _validate(run_cli, path)
    assert res.code == 0, res.out + res.err
    assert json.loads(res.out)["valid"] is True


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_artifact_field_is_refused_and_named(lock_text, tmp_path, run_cli, name):
    """Refused, and not only "the artifacts differ": which artifact, and which of its fields."""
    field, pattern, repl = EDITS[name]
    path = tmp_path / "envkit.lock"
    path.write_text(_edited(lock_text, pattern, repl), encoding="utf-8")
    res, text = _validate(run_cli, path)
    assert res.code in (1, 2), (name, text)
    if res.code == 1:
        doc = json.loads(res.out)
        assert doc["valid"] is False
        assert any(f["rule"] == "lock/artifacts" for c in doc["conflicts"] for f in c["chain"]), text
    assert f"{COMPONENT}: {field}" in text or (COMPONENT in text and field in text), text


def test_a_size_field_is_refused_by_the_schema(lock_text, tmp_path, run_cli):
    """The lock records no size: a `size` written into an artifact's zip is an unknown key, exit 2, named."""
    path = tmp_path / "envkit.lock"
    path.write_text(_edited(lock_text, r"^(    url: .*)$", lambda m: m[1] + "\n    size: 1048576"), encoding="utf-8")
    res, text = _validate(run_cli, path)
    assert res.code == 2, text
    assert "size" in res.err and "artifacts" in res.err

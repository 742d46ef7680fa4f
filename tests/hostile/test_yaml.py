"""Hostile YAML through every command that reads a stack file or a lock.

The corpus (tests/hostile/yaml/, plus what is too big to keep in git, made here): an alias bomb,
deep nesting, Python and custom tags, a 5,000-digit version, a date that is no date, a mapping as
a key, a huge scalar, a file over the size cap. Each must end in exit 2 with a message that names
the file, fast, without a traceback and without writing anything. A property test then feeds
random YAML-ish documents to `validate` and `resolve -f`: never an exception, never a write.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CORPUS = Path(__file__).resolve().parent / "yaml"
ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "roots" / "healthy-a2"
FILES = sorted(p.name for p in CORPUS.glob("*.yaml"))
MADE = ["huge-scalar.yaml", "over-the-size-cap.yaml"]

# every command that reads YAML, up to the failure before any action; OUT is a path it could write
COMMANDS = {
    "validate": ["validate", "{f}"],
    "resolve": ["resolve", "-f", "{f}", "-o", "{out}/envkit.lock"],
    "image render": ["image", "render", "--lock", "{f}", "-o", "{out}/image"],
    "lock": ["lock", "--lock", "{f}", "-o", "{out}/locked.lock"],
    "bundle build": ["bundle", "build", "--lock", "{f}", "-o", "{out}/bundle.tar"],
    "doctor": ["doctor", "--lock", "{f}", "--root", str(ROOT)],
    "provision --check": ["provision", "-i", "localhost,", "--check", "--lock", "{f}"],
}


def _make(name: str, folder: Path) -> Path:
    path = folder / name
    if name == "huge-scalar.yaml":
        path.write_text("chip: 910b\ntorch: '" + "2" * 2_000_000 + "'\n")
    elif name == "over-the-size-cap.yaml":
        path.write_text("chip: 910b\n" + "# padding\n" * 1_000_000)
    return path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """(input folder, an empty current folder that must stay empty)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    inputs = tmp_path / "in"
    inputs.mkdir()
    return inputs, cwd


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", FILES + MADE)
def test_hostile_yaml_is_refused(name, command, workdir, run_cli):
    inputs, cwd = workdir
    src = CORPUS / name
    f = inputs / name
    if src.exists():
        f.write_bytes(src.read_bytes())
    else:
        _make(name, inputs)
    args = [a.format(f=f, out=cwd) for a in COMMANDS[command]]
    start = time.monotonic()
    res = run_cli(*args)  # an exception other than SystemExit would fail the test: no traceback
    took = time.monotonic() - start
    assert res.code == 2, (res.code, res.err[-500:])
    assert str(f) in res.err, res.err[-500:]
    assert "Traceback" not in res.err
    # an alias bomb or a quadratic parse unbounded takes minutes or all memory; 20 s leaves room for a starved
    # process (CI's year-ahead pass runs niced beside the whole suite)
    assert took < 20, f"{took:.1f} s"
    assert list(cwd.iterdir()) == []  # nothing written, not even the -o folder
    assert sorted(p.name for p in inputs.iterdir()) == [name]
    assert len(res.err) < 2000  # a message, not the 5,000 digits or the bomb echoed back


@pytest.mark.parametrize("command", ["validate", "resolve"])
def test_a_5000_digit_version_is_not_echoed(command, run_cli):
    f = str(CORPUS / "version-5000-digits-quoted.yaml")
    res = run_cli(*(["validate", f] if command == "validate" else ["resolve", "-f", f, "-o", "-"]))
    assert res.code == 2 and len(res.err) < 2000


@pytest.mark.parametrize(
    "name, message",
    [
        ("alias-bomb.yaml", "aliases expand to more than"),
        ("deep-flow.yaml", "nested deeper than 64 levels"),
        ("deep-block.yaml", "nested deeper than 64 levels"),
        ("python-tag.yaml", "unknown YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
        ("custom-tag.yaml", "unknown YAML tag '!foo'"),
        ("set-tag.yaml", "unknown YAML tag 'tag:yaml.org,2002:set'"),
        ("bad-date.yaml", "unknown CANN release '2024-13-45'"),  # a stack file's value is text, as for resolve -f
        ("bad-date-lock.yaml", "not a valid timestamp"),  # a lock is read with YAML's types
        ("mapping-key.yaml", "a mapping key must be a plain value"),
    ],
)
def test_what_validate_says(name, message, run_cli):
    res = run_cli("validate", str(CORPUS / name))
    assert res.code == 2 and message in res.err, res.err
    assert f"{CORPUS / name}:" in res.err  # file:line


def test_the_size_cap_names_the_limit(workdir, run_cli):
    inputs, _ = workdir
    f = _make("over-the-size-cap.yaml", inputs)
    res = run_cli("validate", str(f))
    assert res.code == 2 and "too large" in res.err


# --------------------------------------------------------------------------- property test

_TOKENS = [
    "chip",
    "arch",
    "os",
    "python",
    "cann",
    "torch",
    "torch_npu",
    "driver",
    "numpy",
    "schema_version",
    "stack",
    "910b",
    "a3",
    "aarch64",
    "ubuntu22.04",
    "3.11",
    "8.5.0",
    "2.6.0",
    "24.1.RC3",
    "2.6.0.post5",
    "8" * 60,
    ":",
    ": ",
    "- ",
    "\n",
    "\n  ",
    "\n    ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "!foo ",
    "!!str ",
    "!!int ",
    "!!python/name:os.system ",
    "? ",
    "---\n",
    "...\n",
    "'",
    '"',
    "#",
    "|\n  ",
    ">\n  ",
    "~",
    "null",
    "2024-13-45",
    "0x1F",
    ".inf",
    "yes",
    "\t",
    "%YAML 1.1\n",
    "<<: *a\n",
    "\x00",
    "\ufeff",
    "é",
]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    doc=st.one_of(
        st.lists(st.sampled_from(_TOKENS), max_size=40).map("".join),
        st.text(max_size=200),
    ),
    command=st.sampled_from(["validate", "resolve"]),
)
def test_random_yamlish_documents_never_crash(doc, command, workdir, run_cli):
    inputs, cwd = workdir
    f = inputs / "stack.yaml"
    f.write_text(doc, encoding="utf-8", errors="surrogatepass")
    if command == "validate":
        res = run_cli("validate", str(f))
    else:
        res = run_cli("resolve", "-f", str(f), "-o", "-")  # stdout: nothing is written
    assert res.code in (0, 1, 2), res.code
    assert "Traceback" not in res.err
    if res.code == 2 and "error:" in res.err:
        assert "stack.yaml" in res.err or "--" in res.err, res.err  # says which input
    assert list(cwd.iterdir()) == []

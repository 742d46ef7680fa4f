"""The committed JSON Schemas (envkit/schemas/, generated from the pydantic models) hold for JSON Schema validators:
every `pattern` is an ECMA-262 regular expression (what validators use), answering as the Python validation does,
and `check-jsonschema` run against the committed files accepts a real lock and refuses broken ones."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envkit.errors import BadInput
from envkit.schemas import HERE

SCHEMAS = sorted(HERE.glob("*.schema.json"))


def check_jsonschema(*args: str) -> subprocess.CompletedProcess:
    """The `check-jsonschema` command (the test extra) with `args`; skips where it is not installed."""
    here = Path(sys.executable).parent / "check-jsonschema"
    found = str(here) if here.exists() else shutil.which("check-jsonschema")
    if not found:
        pytest.skip("check-jsonschema not installed (the test extra)")
    return subprocess.run([found, *args], capture_output=True, text=True, timeout=120)


def _patterns(node: Any) -> set[str]:
    """Every `pattern` keyword of a schema (a property *named* pattern has an object as its value: not taken)."""
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(_patterns(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_patterns(v) for v in node))
    return set()


PATTERNS = sorted(set().union(*(_patterns(json.loads(p.read_text())) for p in SCHEMAS)))


def test_the_generated_set_holds_the_smoke_report():
    assert [p.name for p in SCHEMAS] == [
        "lock.schema.json",
        "matrix.schema.json",
        "report.schema.json",
        "smoke-report.schema.json",
        "stack.schema.json",
    ]
    assert len(PATTERNS) > 20


def test_every_committed_schema_passes_the_metaschema_with_ecma_regexes(tmp_path):
    """check-jsonschema checks each `pattern` as an ECMA-262 regex (unicode mode, through regress); a pattern in
    Python-only syntax (here the `\\"` escape the requirement grammar had) fails it."""
    r = check_jsonschema("--check-metaschema", *map(str, SCHEMAS))
    assert r.returncode == 0, r.stdout + r.stderr
    old = tmp_path / "old-lock.schema.json"
    old.write_text((HERE / "lock.schema.json").read_text().replace("""<>=!'\\"-]""", """<>=!'\\\\\\"-]"""))
    assert old.read_text() != (HERE / "lock.schema.json").read_text()
    r = check_jsonschema("--check-metaschema", str(old))
    assert r.returncode == 1 and "is not a 'regex'" in r.stdout, r.stdout + r.stderr


def _ecma():
    regress = pytest.importorskip("regress")  # the ECMA-262 engine check-jsonschema uses
    cache: dict[str, Any] = {}

    def answer(pattern: str, text: str) -> bool:
        if pattern not in cache:
            cache[pattern] = regress.Regex(pattern, "u")
        return cache[pattern].find(text) is not None

    return answer


def _pydantic():
    from pydantic import Field, TypeAdapter, ValidationError

    cache: dict[str, Any] = {}

    def answer(pattern: str, text: str) -> bool:
        if pattern not in cache:
            cache[pattern] = TypeAdapter(Annotated[str, Field(pattern=pattern)])
        try:
            cache[pattern].validate_python(text)
        except ValidationError:
            return False
        return True

    return answer


ECMA, PYDANTIC = _ecma(), _pydantic()


def _agree(pattern: str, text: str) -> None:
    """The model's validation (pydantic), ECMA-262 (a JSON Schema validator) and Python's re.fullmatch give one answer."""
    answers = (PYDANTIC(pattern, text), ECMA(pattern, text), re.fullmatch(pattern, text) is not None)
    assert len(set(answers)) == 1, (pattern, text, answers)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_compiles_as_ecma_262(pattern):
    ECMA(pattern, "")


@pytest.mark.parametrize(
    "text, ok",
    [
        ('numpy==1.26.4; python_version < "3.11"', True),
        ("numpy==1.26.4; python_version < '3.11'", True),
        ('numpy[extra]>=1.2, <2 ; sys_platform != "win32"', True),
        ('numpy; python_version < "3.11"\n', False),
        ("numpy==1\n-e .", False),
        ('numpy; os_name == "\\"', False),
    ],
)
def test_the_requirement_grammar_takes_double_quotes_in_both_engines(text, ok):
    from pydantic import TypeAdapter, ValidationError

    from envkit.models.safe import Requirement

    (pattern,) = [p for p in PATTERNS if p.startswith("^[A-Za-z0-9][A-Za-z0-9._-]*(\\[")]
    _agree(pattern, text)
    try:
        TypeAdapter(Requirement).validate_python(text)
        assert ok
    except ValidationError:
        assert not ok


EDGES = ["", "\n", "a", " ", '"', "'", "\\", "é", "\u2028", "\x00", "\x7f", "😀", "{{", "%", "/", "."]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(data=st.data())
def test_pydantic_and_ecma_give_the_same_answer_on_boundary_strings(data):
    """For every schema pattern: a string it matches (drawn from the regex) and that string changed at its edges
    (a trailing newline, which Python's `re.search` with `$` would take, a quote, a backslash, a non-ASCII or control
    character)."""
    pattern = data.draw(st.sampled_from(PATTERNS))
    base = data.draw(st.from_regex(pattern, fullmatch=True) | st.text(max_size=12), label="base")
    edge = data.draw(st.sampled_from(EDGES), label="edge")
    for text in {base, base + edge, edge + base, base[:-1], base[1:], base[: len(base) // 2] + edge + base[len(base) // 2 :]}:
        _agree(pattern, text)


# the requirement grammar before it was written for ECMA-262 (a `\"` escape, and spaces matched two ways per clause)
OLD_REQUIREMENT = (
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])? *((==|>=|<=|~=|!=|<|>) *[0-9A-Za-z.*+!_-]+ *,? *)*"
    r"""(; *[A-Za-z0-9_. <>=!'\"-]+)?$"""
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(data=st.data())
def test_the_requirement_grammar_takes_exactly_what_it_took_before(data):
    """The model validates with pydantic's regex engine (linear time): the rewritten requirement pattern answers as
    the old one on strings drawn from either, and on those strings changed around their spaces and commas."""
    from envkit.models.safe import Requirement

    new = next(m.pattern for m in Requirement.__metadata__[0].metadata if hasattr(m, "pattern"))
    text = data.draw(st.from_regex(OLD_REQUIREMENT, fullmatch=True) | st.from_regex(new, fullmatch=True))
    cut = data.draw(st.integers(0, len(text)))
    piece = data.draw(st.sampled_from([" ", ",", ", ", " ,", ";", "; ", '"', "\n", "=="]))
    for candidate in (text, text[:cut] + piece + text[cut:], text[:cut] + text[cut + 1 :]):
        assert PYDANTIC(new, candidate) == PYDANTIC(OLD_REQUIREMENT, candidate), repr(candidate)


CHUNKS = ["a", "1", " ", "==1 ", ">=1 , ", "/a", "a.", "a-", "[1,1],", "; a", "x" * 7, "é"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_no_pattern_takes_exponential_time_on_a_string_that_fails(pattern):
    """A validator's engine backtracks (ECMA-262 requires it; so does Python's re): a pattern whose runs of
    characters can be matched several ways takes exponential time on a long string that fails at its end. Each
    pattern, on repetitions of likely pieces up to 4,100 characters, answers within a second in both."""
    import time

    for chunk in CHUNKS:
        for end in ("\n", "\x00", "!"):
            text = (chunk * (4100 // len(chunk)))[:4100] + end
            start = time.monotonic()
            ECMA(pattern, text)
            re.fullmatch(pattern, text)
            assert time.monotonic() - start < 1.0, (pattern, chunk, end)


def test_the_old_requirement_grammar_was_exponential_in_ecma():
    """What the bound above catches: with the old grammar each `==1 ` clause doubles the time of a failing match
    (measured as a ratio, whatever the machine's speed: 20 clauses take about a second on 2 slow cores, 10 about a
    thousandth of that; the short one is timed at its best of five, as a busy machine only adds time)."""
    import time

    old = OLD_REQUIREMENT.replace('\\"', '"')  # the escape alone, so that the ECMA engine compiles it
    ECMA(old, "a")  # compiled before any timing

    def seconds(clauses: int) -> float:
        start = time.monotonic()
        ECMA(old, "a" + "==1 " * clauses + "\n")
        return time.monotonic() - start

    assert seconds(20) > 50 * max(min(seconds(10) for _ in range(5)), 1e-4)


# --- documents against the committed schema files, with check-jsonschema ------------------------------------
@pytest.fixture(scope="module")
def resolved(tmp_path_factory) -> Path:
    from envkit.cli import main

    out = tmp_path_factory.mktemp("schema-lock") / "envkit.lock"
    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", "--workload", "serving", "-o", str(out)])
    assert exc.value.code in (0, None)
    return out


def _closure() -> dict:
    """A Python closure as `envkit lock` records it, with roots whose markers quote with " and '."""
    return {
        "target": {"python": "3.10", "arch": "aarch64", "glibc": "2.28", "platform": "manylinux_2_28_aarch64"},
        "roots": ["alpha==1.0", 'beta>=2; python_version < "3.11"', "gamma; sys_platform != 'win32'"],
        "index_url": "https://pypi.org/simple",
        "resolver": "uv 0.9 (test)",
        "packages": [
            {
                "name": "alpha",
                "version": "1.0",
                "filename": "alpha-1.0-py3-none-any.whl",
                "url": "https://files.example/alpha-1.0-py3-none-any.whl",
                "sha256": "0" * 64,
                "size": 1,
            }
        ],
    }


def _write(doc: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _lock_schema(*files: Path) -> subprocess.CompletedProcess:
    return check_jsonschema("--default-filetype", "yaml", "--schemafile", str(HERE / "lock.schema.json"), *map(str, files))


def test_check_jsonschema_accepts_real_locks_and_refuses_broken_ones(resolved, tmp_path):
    """A lock `envkit resolve` wrote (a serving one: every optional section) and the same lock with a closure pass
    check-jsonschema against the committed lock.schema.json, as they pass envkit's own reading; each broken copy
    fails both."""
    from envkit.lock.file import read_lock

    doc = yaml.safe_load(resolved.read_text())
    closed = copy.deepcopy(doc)
    closed["python"]["closure"] = _closure()
    closed_path = _write(closed, tmp_path / "closed.lock")
    read_lock(closed_path)  # the Python side takes it too
    r = _lock_schema(resolved, closed_path)
    assert r.returncode == 0, r.stdout + r.stderr

    def broken(name: str, edit) -> Path:  # noqa: ANN001
        bad = copy.deepcopy(closed)
        edit(bad)
        return _write(bad, tmp_path / f"{name}.lock")

    cases = {
        "unknown-key": lambda d: d.update(extra_key=1),
        "version-with-space": lambda d: d["stack"].update(driver="26.0.RC1 x"),
        "root-with-newline": lambda d: d["python"]["closure"]["roots"].append("six==1\n-e ."),
        "short-sha256": lambda d: d["python"]["closure"]["packages"][0].update(sha256="0" * 63),
        "schema-version": lambda d: d.update(schema_version="3"),
    }
    for name, edit in cases.items():
        path = broken(name, edit)
        r = _lock_schema(path)
        assert r.returncode == 1, (name, r.stdout + r.stderr)
        with pytest.raises(BadInput):
            read_lock(path)

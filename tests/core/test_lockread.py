"""The lock's strict plain reader (`envkit.lock.read`, its table generated from the pydantic lock models into
envkit/lock/spec.py) and `envkit validate`'s start-up path built on it.

The promise: a lock the plain reader takes is one the pydantic Lock model takes, with the same values
(`plain(record) == model_dump(mode="json")`); whatever it does not take is judged by the model as before, so that
`envkit validate` accepts and refuses exactly what it did, with the same messages, exit codes and output. Held here
on resolved locks, on both sides of every kind of limit the models set, on the hostile corpora (generated locks,
mirror URLs), and through the command line.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from envkit.lock.read import read_lock_records
from envkit.lock.text import plain
from envkit.models.lock import Lock
from tests.hostile.test_lock_properties import mutations

ROOT = Path(__file__).resolve().parents[2]
MIRROR_URLS = ROOT / "tests" / "hostile" / "mirror_urls"
STACKS = {
    "default": [],
    "a3-cann85": ["--chip", "a3", "--cann", "8.5.0"],
    "x86_64": ["--arch", "x86_64", "--python", "3.11"],
    "serving": ["--workload", "serving"],
    "310p": ["--chip", "310p"],
}


def _resolve(tmp: Path, args: list[str]) -> dict[str, Any]:
    from envkit.cli import main

    out = tmp / "envkit.lock"
    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", *args, "-o", str(out)])
    assert exc.value.code in (0, None)
    return yaml.safe_load(out.read_text())


def _package(name: str, version: str, url_base: str, **extra: Any) -> dict[str, Any]:
    filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return {
        "name": name,
        "version": version,
        "filename": filename,
        "url": url_base + filename,
        "sha256": "a" * 64,
        "size": 123,
        **extra,
    }


def _closure(base: str = "https://files.example/", mirrors: list[str] | None = None) -> dict[str, Any]:
    return {
        "target": {"python": "3.10", "arch": "aarch64", "glibc": "2.28", "platform": "manylinux_2_28_aarch64"},
        "roots": ["alpha==1.0", "beta>=2.0; python_version >= '3.8'"],
        "index_url": "https://pypi.org/simple",
        "extra_index_urls": [],
        "find_links": [],
        "excluded": ["torch"],
        "resolver": "uv 0.13.9",
        "mirrors": mirrors or [],
        "packages": [
            _package("alpha", "1.0", base),
            _package("beta", "2.0", base, sha256_from="download"),
            _package(
                "vllm",
                "0.23.0",
                base,
                url=base + "vllm-0.23.0.tar.gz",
                built={
                    "sdist": "vllm-0.23.0.tar.gz",
                    "sdist_sha256": "b" * 64,
                    "env": {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"},
                    "command": "pip wheel --no-build-isolation --no-deps",
                    "torch": "2.13.0+cpu",
                    "torch_sha256": None,
                },
            ),
        ],
    }


@pytest.fixture(scope="module")
def locks(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Resolved locks of several stacks, and one with both closures filled as `envkit lock` fills them."""
    out = {name: _resolve(tmp_path_factory.mktemp(name), args) for name, args in STACKS.items()}
    closed = copy.deepcopy(out["default"])
    closed["python"]["closure"] = _closure()
    closed["python"]["controller"] = _closure("http://127.0.0.1:8080/", ["http://127.0.0.1:8080/"])
    out["closures"] = closed
    return out


def _model(data: Any) -> dict[str, Any] | None:
    try:
        return Lock.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return None


def _agree(data: Any) -> tuple[bool, bool]:
    """(the plain reader took it, the model took it); where the reader took it, the very same values."""
    record = read_lock_records(copy.deepcopy(data))
    dumped = _model(copy.deepcopy(data))
    if record is not None:
        assert dumped is not None, "the plain reader took a lock the pydantic model refuses"
        assert plain(record) == dumped
    return record is not None, dumped is not None


def test_the_generated_read_table_is_current():
    from tests.conftest import load_tool

    text = load_tool("matrix_records").render_spec()
    assert (ROOT / "envkit" / "lock" / "spec.py").read_text() == text, (
        "envkit/lock/spec.py is out of date: run `make matrix-records`"
    )


def test_every_resolved_lock_is_taken_as_the_model_takes_it(locks):
    for name, doc in locks.items():
        assert _agree(doc) == (True, True), name


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


# (path into the lock, a value at the limit, the value one past it): every kind of limit the models set. Past it the
# plain reader never takes the value; the model refuses it too, but for the values it coerces (COERCED), which the
# reader leaves to it.
LIMITS: list[tuple[tuple[Any, ...], Any, Any]] = [
    (("hints",), ["h"] * 64, ["h"] * 65),  # list max_length
    (("generated_by",), "e" * 4000, "e" * 4001),  # Text max_length
    (("generated_by",), "envkit resolve {x}", "envkit resolve {{x}}"),  # Text's rule (no template markup)
    (("generated_by",), "tab-free é ünïcode", "a\x1fcontrol"),  # Text's pattern
    (("stack", "chip"), "a" * 32, "a" * 33),  # Ident max_length
    (("stack", "chip"), "910b", "910B"),  # Ident pattern
    (("stack", "cann"), "9" * 64, "9" * 65),  # Version
    (("stack", "python"), "3.10", "3.100"),  # PythonMinor
    (("artifacts", 0, "order"), 99, 100),  # int le
    (("artifacts", 0, "order"), 0, -1),  # int ge
    (("artifacts", 0, "order"), 5, True),  # a bool is no int
    (("artifacts", 0, "order"), 5, "5"),  # nor a str (the model coerces it: the reader leaves it to the model)
    (("platform", "davinci_devices"), 64, 65),  # a nullable int's range
    (("platform", "davinci_devices"), 1, 0),
    (("platform", "davinci_devices"), None, "8"),
    (("platform", "glibc"), "2.35", "2.35\n"),  # a full match: no newline after `$`
    (("platform", "mount_driver_dir"), False, 0),  # bool
    (("platform", "os_family"), "rhel", "suse"),  # Literal
    (("platform", "hccl", "env"), [], "not a list"),
    (("platform", "kubernetes", "pod_npus"), [1], []),  # list min_length
    (("platform", "kubernetes", "pod_npus"), [64], [65]),  # NpuCount
    (("platform", "kubernetes", "source"), ["s"] * 8, ["s"] * 9),
    (("platform", "kubernetes", "accelerator_type"), {"8": "x"}, {8: "x"}),  # a dict key is a str
    (("platform", "kubernetes", "accelerator_type"), {"99": "x"}, {"100": "x"}),  # NpuCountKey
    (("layout", "env"), {f"K{i}": "v" for i in range(64)}, {f"K{i}": "v" for i in range(65)}),  # dict max_length
    (("layout", "home"), "/usr/local/Ascend/cann-9.1.0", "/usr/local/Ascend/../cann"),  # AbsPath
    (("schema_version",), 3, 3.0),
    (("validated", "cann_hdk"), True, "yes"),
    (
        ("provenance",),
        {f"k{i}": {"declared": True, "origin": "declared"} for i in range(32)},
        {f"k{i}": {"declared": True, "origin": "declared"} for i in range(33)},
    ),
    (("provenance", "chip", "origin"), "default", "guessed"),
    (("matrix_digest",), "sha256:" + "0" * 64, "sha256:" + "0" * 63),
    (("python", "indexes", "pypi"), "https://pypi.org/simple", "ftp://pypi.org/simple"),  # Url
    (("python", "cann_runtime"), ["numpy<2", "attrs"], ["numpy<2\nattrs"]),  # Requirement
    (("python", "requirements", 0, "index"), None, "PyTorch CPU"),
]


COERCED = {
    ("order", "True"),
    ("order", "'5'"),
    ("davinci_devices", "'8'"),
    ("mount_driver_dir", "0"),
    ("cann_hdk", "'yes'"),
    ("schema_version", "3.0"),
}


@pytest.mark.parametrize("path, at, past", LIMITS, ids=[".".join(map(str, p)) + f"={str(b)[:12]!r}" for p, _, b in LIMITS])
def test_both_sides_of_each_limit_agree_with_the_model(locks, path, at, past):
    doc = locks["default"] if path[:2] != ("platform", "kubernetes") else locks["a3-cann85"]
    assert _agree(_set(doc, path, at)) == (True, True)
    assert _agree(_set(doc, path, past)) == (False, (path[-1], repr(past)) in COERCED)


def test_closure_rules_are_the_models(locks):
    doc = locks["closures"]
    bad_file = _set(doc, ("python", "closure", "packages", 0, "filename"), "other-1.0-py3-none-any.whl")
    assert _agree(bad_file) == (False, False)  # ClosurePackage's rule: the file is the project's
    not_a_wheel = _set(doc, ("python", "closure", "packages", 0, "filename"), "alpha-1.0.exe")
    assert _agree(not_a_wheel) == (False, False)
    http = _set(doc, ("python", "closure", "packages", 0, "url"), "http://files.example/alpha-1.0-py3-none-any.whl")
    assert _agree(http) == (False, False)  # PythonClosure's rule: https or under a recorded mirror
    zip_http = _set(
        locks["default"], ("artifacts", 0, "zip"), {"file": "a.zip", "sha256": "c" * 64, "url": "http://x/a.zip", "source": "s"}
    )
    assert _agree(zip_http) == (False, False)  # a zip edition is https only
    run = _set(locks["default"], ("artifacts", 0, "run", "file"), "Ascend-hdk-other.run")
    assert _agree(run) == (False, False)  # Artifact's rule: the file matches its pattern
    climbing_mirror = _set(doc, ("python", "controller", "mirrors"), ["http://127.0.0.1:8080/%2e%2e/"])
    assert _agree(climbing_mirror)[0] is False


def _urls(name: str) -> list[str]:
    lines = (MIRROR_URLS / name).read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("name", ["accepted.txt", "refused.txt"])
def test_the_mirror_url_corpus_agrees_with_the_model(locks, name):
    mirrors = ["file:///srv/wheels/", "http://127.0.0.1:8080/", "http://10.0.0.1:81/pypi/"]
    for url in _urls(name):
        doc = _set(locks["closures"], ("python", "closure", "mirrors"), mirrors)
        doc = _set(doc, ("python", "closure", "packages", 0, "url"), url)
        took, model = _agree(doc)
        assert took == model, url


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_generated_hostile_locks_are_never_taken_where_the_model_refuses_them(locks, data, tmp_path_factory):
    doc = locks["closures"] if data.draw(st.booleans()) else locks["serving"]
    _, mutated = data.draw(mutations(doc, Path("/nonexistent/MARK")))
    took, model = _agree(mutated)
    if took:
        assert model


# --- the command line -----------------------------------------------------------------------------
def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return env | {"PYTHONPATH": str(ROOT), "ENVKIT_CACHE_DIR": os.environ.get("ENVKIT_CACHE_DIR", str(tmp / "cache"))}


def _slow(lock: Path, json_out: bool) -> str:
    """What `envkit validate` printed before its start-up path: the pydantic report through rich (or JSON)."""
    code = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from envkit.core.validation import _validate_text\n"
        "from envkit.cli.stack_body import render_report\n"
        "from envkit import console\n"
        f"p = Path({str(lock)!r})\n"
        "r = _validate_text(p.read_text(), p)\n"
        f"if {json_out}: console.emit_json(r.model_dump(mode='json'))\n"
        "else:\n"
        "    console.out\n"  # rich, as before
        "    render_report(r, str(p))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=_env(lock.parent), timeout=120
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("name", ["default", "serving", "closures"])
def test_validate_prints_what_it_printed_through_pydantic_and_rich_and_loads_neither(locks, name, tmp_path):
    lock = tmp_path / "envkit.lock"
    lock.write_text(yaml.safe_dump(locks[name], sort_keys=False))
    probe = (
        "import sys\n"
        "from envkit.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    print('LOADED', sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('pydantic', 'rich', 'typer')}), file=sys.stderr)\n"
    )
    warm = [sys.executable, "-m", "envkit", "validate", str(lock)]  # a first run may compile the matrix store (pydantic)
    subprocess.run(warm, capture_output=True, cwd=ROOT, env=_env(tmp_path), timeout=120, check=True)
    for json_out in (False, True):
        argv = ["validate", str(lock), *(["--json"] if json_out else [])]
        res = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT, env=_env(tmp_path), timeout=120
        )
        assert res.returncode == 0, res.stderr
        assert "LOADED []" in res.stderr, res.stderr
        assert res.stdout == _slow(lock, json_out)
        if json_out:
            assert json.loads(res.stdout)["valid"] is True


def test_what_the_start_up_path_does_not_take_is_judged_as_before(locks, tmp_path, run_cli):
    text = yaml.safe_dump(locks["default"], sort_keys=False)
    cases = {
        "repeated key": text.replace("stack:\n", "stack:\n  chip: 910\n", 1),  # load_text refuses it; C would not
        "merge key": text.replace("validated:\n", "validated:\n  <<: {extra: 1}\n", 1),
        "coerced int": text.replace("  order: 0\n", "  order: 0.0\n", 1),
        "edited": text.replace("glibc: '2.35'", "glibc: '2.34'", 1),
        "stack file": "chip: 910b\ncann: 8.5.0\n",
    }
    for case, body in cases.items():
        lock = tmp_path / f"{case.replace(' ', '-')}.lock"
        lock.write_text(body)
        from envkit.core.validation import _validate_text, judge_file

        try:
            want: Any = plain(_validate_text(body, lock))
        except Exception as exc:  # noqa: BLE001 - the refusal itself is compared
            want = (type(exc).__name__, str(exc))
        try:
            got: Any = plain(judge_file(lock))
        except Exception as exc:  # noqa: BLE001
            got = (type(exc).__name__, str(exc))
        assert got == want, case
    assert run_cli("validate", str(tmp_path / "repeated-key.lock")).code == 2
    assert run_cli("validate", str(tmp_path / "merge-key.lock")).code == 2
    assert run_cli("validate", str(tmp_path / "edited.lock")).code == 1


@pytest.mark.parametrize(
    "title, plain_path",
    [
        ("/tmp/x/envkit.lock", True),
        ("a lock with spaces.lock", True),
        ("weird:smile:.lock", False),  # rich would print an emoji
        ("tab\there.lock", False),  # rich expands it
        ("bell\x07.lock", False),  # the console shows it escaped
    ],
)
def test_the_valid_report_is_printed_as_rich_prints_it(title, plain_path, monkeypatch, capsys):
    from rich.console import Console

    from envkit import console
    from envkit.cli import stack_body as stack
    from envkit.core.report_records import ValidationReport

    report = ValidationReport(
        valid=True,
        input={"chip": "910b"},
        stack={"chip": "910b", "arch": "aarch64", "os": "ubuntu22.04", "python": "3.10", "transformers": "5.10.1"},
        hints=["one: hint", "x86_64 needs torch 2.6.0+cpu from https://download.pytorch.org/whl/cpu"],
    )
    monkeypatch.setattr(console, "_consoles", {})
    stack.render_report(report, title)
    ours = capsys.readouterr().out
    assert ("out" not in console._consoles) == plain_path  # rich was left alone: written by console.print_plain
    monkeypatch.setattr(console, "_consoles", {})
    assert isinstance(console.out, Console)  # envkit's rich console (its text escaped), made now: print_plain steps aside
    stack.render_report(report, title)
    assert ours == capsys.readouterr().out


@pytest.mark.parametrize(
    "line",
    [
        "bundle /tmp/b: OK, 12 files, 110.3 MB match the manifest (sha256:" + "a" * 64 + ")",
        "bundle /tmp/my bundle é…: OK",
        "bundle /tmp/:bundle:/x: OK",
        "bundle /tmp/a\tb: OK",
        "bundle /tmp/[bold]x[/bold]: OK",
    ],
)
def test_print_plain_writes_what_rich_prints_or_leaves_it_to_rich(line, monkeypatch, capsys):
    from rich.console import Console

    from envkit import console

    monkeypatch.setattr(console, "_consoles", {})
    wrote = console.print_plain([line])
    ours = capsys.readouterr().out
    rich_console = Console(soft_wrap=True, highlight=False)
    rich_console.width = max(rich_console.width, 200)
    rich_console.print(line, markup=False)
    theirs = capsys.readouterr().out
    assert ours == (theirs if wrote else "")
    assert wrote == (":" not in line.split("/tmp/")[1].split(": OK")[0] and "\t" not in line)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not console.print_plain([line])

"""Property tests: generated locks and stack files through every command that reads them.

A lock is made by `envkit resolve`, then mutated the way an attacker or a careless editor would: a string from an
alphabet rich in shell, Jinja, YAML and path metacharacters (`$(touch MARK)`, backticks, `{{ lookup('pipe', ...) }}`,
newlines, `../`) into a random string field, a value of another type, a key deleted or added, a huge list, a
5,000-digit integer. Each goes through `validate`, `image render`, `bundle build`, `lock` (an unreachable index),
`launch render` (a one-host inventory) and `provision --check` (no vendor files: it stops before Ansible). Whatever
the input: no traceback, exit 0/1/2, nothing written outside the command's output folder, and no payload ran (the
marker file never appears). An edited field that the schema lets through is refused by the lock gate (exit 2).
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

HCCN = Path(__file__).resolve().parents[1] / "fixtures" / "hccn"
MARK = "MARK"
_PIECES = [
    "$(touch {m})",
    "`touch {m}`",
    "{{ lookup('pipe','touch {m}') }}",
    "{% raw %}",
    "'; touch {m}; '",
    '"; touch {m}; "',
    "\n",
    "\r\n",
    "/",
    "..",
    "../../",
    "/etc/passwd",
    "${PATH}",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "'",
    '"',
    "\\",
    "*",
    "?",
    "~",
    "#",
    ":",
    " ",
    "-",
    "=",
    ",",
    ";",
    "&",
    "|",
    "<",
    ">",
    "!",
    "%",
    "@",
    "a",
    "Z",
    "9",
    "8.5.0",
    "910b",
    "--quiet",
    "https://",
    "http://127.0.0.1:9/",
    "file:///dev/zero",
    "\x00",
    "é",
]
HUGE_INT = "__envkit_huge_int__"
COMMANDS = ["validate", "image render", "bundle build", "lock", "launch render", "provision --check"]


def _hostile_text(draw_list: list[str], marker: Path) -> str:
    return "".join(p.replace("{m}", str(marker)) for p in draw_list)


hostile_pieces = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8)
other_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.just(HUGE_INT),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.sampled_from(["a", "file", "x"]), st.integers(), max_size=2),
)


def _paths(node, at=()) -> list[tuple]:
    """Every path into the document (mapping keys, list indexes), leaves and containers alike."""
    out = [at] if at else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, at + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, at + (i,))
    return out


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutations(draw, doc: dict, marker: Path):
    """(kinds, the mutated document) for one to three random edits."""
    doc = copy.deepcopy(doc)
    kinds = []
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(doc, path[:-1]), path[-1]
        kind = draw(st.sampled_from(["string", "string", "swap", "swap", "type", "delete", "add", "huge list"]))
        kinds.append(kind)
        if kind == "string":
            strings = [p for p in paths if isinstance(_get(doc, p), str)]
            path = draw(st.sampled_from(strings)) if strings else path
            parent, key = _get(doc, path[:-1]), path[-1]
            parent[key] = _hostile_text(draw(hostile_pieces), marker)
        elif kind == "swap":  # a well-formed value from elsewhere in the lock: the grammar passes, the gate must not
            strings = [p for p in paths if isinstance(_get(doc, p), str)]
            if strings:
                path, other = draw(st.sampled_from(strings)), draw(st.sampled_from(strings))
                _get(doc, path[:-1])[path[-1]] = _get(doc, other)
        elif kind == "type":
            parent[key] = draw(other_values)
        elif kind == "delete":
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif kind == "add":
            target = parent if isinstance(parent, dict) else doc
            target[_hostile_text(draw(hostile_pieces), marker)[:40] or "x"] = _hostile_text(draw(hostile_pieces), marker)
        else:
            parent[key] = [copy.deepcopy(parent[key])] * draw(st.sampled_from([17, 2000]))
    return kinds, doc


def _dump(doc) -> str:
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=4096)
    return text.replace(f"{HUGE_INT}", "9" * 5000)


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _argv(command: str, lock: Path, out: Path, site: Path) -> list[str]:
    if command == "validate":
        return ["validate", str(lock)]
    if command == "image render":
        return ["image", "render", "--lock", str(lock), "-o", str(out / "image")]
    if command == "bundle build":
        return ["bundle", "build", "--lock", str(lock), "-o", str(out / "bundle.tar")]
    if command == "lock":
        return [
            "lock",
            "--lock",
            str(lock),
            "--only",
            "numpy",
            "--index-url",
            "http://127.0.0.1:9/simple",
            "-o",
            str(out / "locked.lock"),
        ]
    if command == "launch render":
        inv = site / "hosts.ini"
        return ["launch", "render", "-i", str(inv), "--lock", str(lock), "-o", str(out / "launch")]
    return [
        "provision",
        "-i",
        "envkit-unreachable.invalid,",
        "--check",
        "--lock",
        str(lock),
        "--artifacts",
        str(site / "empty-vendor"),
        "--out",
        str(out / "provision"),
    ]


def _site(base: Path) -> Path:
    site = base / "site"
    site.mkdir()
    shutil.copy(HCCN / "a2_node0.hccn.conf", site / "a2_node0.hccn.conf")
    (site / "hosts.ini").write_text("[ascend]\nnode-a ansible_host=192.0.2.11 envkit_hccn_conf=a2_node0.hccn.conf\n")
    (site / "empty-vendor").mkdir()
    return site


def _check(run_cli, argv: list[str], base: Path, marker: Path, out: Path):
    before = _snapshot(base)
    res = run_cli(*argv)
    assert res.code in (0, 1, 2), (argv, res.code, res.err[-800:])
    assert "Traceback" not in res.err, res.err[-2000:]
    assert not marker.exists(), f"a payload ran: {argv}"
    assert not Path(MARK).exists() and not (Path.cwd() / MARK).exists()
    new = {p for p in _snapshot(base) - before if not (base / p).resolve().is_relative_to(out.resolve())}
    assert not new, f"written outside the output folder: {sorted(new)[:5]}"
    return res


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", COMMANDS)
def test_generated_locks_never_crash_write_outside_or_run_a_payload(command, lock_doc, run_cli, monkeypatch, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"lockprop-{command.replace(' ', '-')}")
    monkeypatch.chdir(work)
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(work / "cache"))
    examples = 12 if command in ("lock", "provision --check") else 30

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def run(data):
        base = Path(tempfile.mkdtemp(dir=work))
        marker = base / MARK
        kinds, doc = data.draw(mutations(lock_doc, marker))
        lock = base / "envkit.lock"
        lock.write_text(_dump(doc), encoding="utf-8", errors="surrogatepass")
        site = _site(base)
        out = base / "out"
        out.mkdir()
        res = _check(run_cli, _argv(command, lock, out, site), base, marker, out)
        event(f"{'+'.join(sorted(set(kinds)))}: exit {res.code}" + (" (gate)" if "from what the matrix" in res.err else ""))
        if res.code == 0 and command != "validate":  # what went through is what the gate and the schema allow
            assert doc.get("schema_version") == 3
        shutil.rmtree(base)

    run()


def test_a_schema_valid_edit_is_refused_by_every_command_that_reads_a_lock(lock_doc, run_cli, tmp_path):
    """The gate, not only the grammar: a well-formed value that is not what the matrix derives (a flag from the
    allow-list of another component, a layout path) is refused by each command, exit 2, nothing written."""
    doc = copy.deepcopy(lock_doc)
    doc["layout"]["home"] = "/opt/elsewhere"
    lock = tmp_path / "envkit.lock"
    lock.write_text(_dump(doc))
    site = _site(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for command in COMMANDS:
        res = _check(run_cli, _argv(command, lock, out, site), tmp_path, tmp_path / MARK, out)
        if command == "validate":
            assert res.code == 1 and "layout" in res.out + res.err, res.out
            continue
        assert res.code == 2 and "layout.home" in res.err and "--accept-edited-lock" in res.err, (command, res.err)
        assert not any(out.iterdir()), (command, sorted(p.name for p in out.iterdir()))


# --- stack files -------------------------------------------------------------------------------------------
STACK = {"chip": "910b", "arch": "aarch64", "os": "ubuntu22.04", "python": "3.10", "cann": "8.5.0"}


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=st.sampled_from([*STACK, "torch", "torch_npu", "numpy", "bogus"]),
    value=st.one_of(hostile_pieces, other_values),
    command=st.sampled_from(["validate", "resolve"]),
)
def test_generated_stack_files_never_crash_write_outside_or_run_a_payload(key, value, command, run_cli, tmp_path_factory):
    base = tmp_path_factory.mktemp("stackprop")
    marker = base / MARK
    doc = dict(STACK)
    doc[key] = _hostile_text(value, marker) if isinstance(value, list) and value and isinstance(value[0], str) else value
    f = base / "stack.yaml"
    f.write_text(_dump(doc), encoding="utf-8", errors="surrogatepass")
    out = base / "out"
    out.mkdir()
    argv = ["validate", str(f)] if command == "validate" else ["resolve", "-f", str(f), "-o", str(out / "envkit.lock")]
    _check(run_cli, argv, base, marker, out)
    shutil.rmtree(base)

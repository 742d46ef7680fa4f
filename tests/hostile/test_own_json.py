"""envkit's own JSON documents, read back: a collective profile (`envkit compare`, bare or in a run's report.json), a
smoke run's report.json (`envkit compare` of two runs), a host's profile.json (`envkit launch profile`) and a PyPI
snapshot (`envkit matrix refresh --snapshot`: _recorded.json, NAME.json, NAME/VERSION.json).

Each is made valid first (the command accepts it), then broken one way at a time: NaN, Infinity, 1e999, -1.0 for a
time, "false" for a bool, 10,000-deep nesting (inside and as the whole document), another top-level type, a key
missing, an unknown key, a key given twice, a 5,000-digit integer, bytes that are not UTF-8, a truncated document, a
file over the size cap (sparse: it claims 2 GiB). Every case is exit 2 naming the file (and the key, where there is
one), never a traceback. `envkit/io/jsonread.py` and the strict models hold it."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.io.jsonread import MAX_BYTES, MAX_DEPTH, parse_json, read_json

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "pypi-snapshot"
HOLE = "__HOLE__"  # a placeholder value, replaced in the text by what JSON cannot say through json.dumps


# --- the valid documents ---------------------------------------------------------------------------------
def _rank(rank: int, seconds: float) -> dict:
    return {"rank": rank, "results": [{"op": "all_reduce", "size": 8192, "seconds": seconds, "iters": 20, "correct": True}]}


def _profile(ranks: list[dict], world: int = 2) -> dict:
    """A profile as `run_profile` writes it (its table made by `aggregate`)."""
    from envkit.executor.collectives import aggregate

    return {
        "format": "envkit-collectives/1",
        "ok": True,
        "backend": "gloo",
        "device_type": "cpu",
        "world": world,
        "sizes": [8192],
        "ops": ["all_reduce"],
        "bus_factors": {"all_reduce": "2(n-1)/n = 1.0000"},
        "results": aggregate(ranks, world, len(ranks)),
        "ranks": ranks,
        "errors": [],
        "copies": {"skipped": "no device: host<->device copies need --device cuda or npu"},
    }


PROFILE = _profile([_rank(0, 1e-4), _rank(1, 1.2e-4)])


def _host(rank: int) -> dict:
    """Host `rank`'s part of a two-host profile, as `envkit launch node` writes it."""
    prof = _profile([_rank(rank, 1e-4 * (rank + 1))])
    prof.update(nnodes=2, node_rank=rank, master="127.0.0.1:29511", hostname=f"h{rank}")
    return prof


def _smoke_report() -> dict:
    """The fields of a smoke report.json: what `compare` checks against the logits file, and more."""
    return {
        "schema_version": 1,
        "envkit": "0.1.0",
        "device": "cpu",
        "device_type": "cpu",
        "param_device": "cpu",
        "dtype": "fp32",
        "ok": True,
        "model": {"digest": "sha256:" + "a" * 64},
        "prompt_digest": "sha256:" + "b" * 64,
        "timings": {"import_s": 0.5, "forward_median_s": 0.01, "forward_runs": 5},
        "outputs": {"logits_sha256": None},  # filled with the file's
        "nproc": 1,
        "serve": None,
    }


@dataclass
class Kind:
    """One kind of document: its valid form, where a number, a bool, a nested value, a deletable key and a
    nested object are, and how the command is run on a file of it (returns the file the error must name)."""

    doc: Callable[[], object]
    number: list
    boolean: list | None
    nest: list
    required: list
    inner: list


KINDS = {
    "profile": Kind(
        lambda: copy.deepcopy(PROFILE),
        ["results", 0, "time_us"],
        ["results", 0, "correct"],
        ["copies"],
        ["world"],
        ["results", 0],
    ),
    "run-profile": Kind(
        lambda: {"ok": True, "collectives": copy.deepcopy(PROFILE)},
        ["collectives", "results", 0, "time_us"],
        ["collectives", "results", 0, "correct"],
        ["collectives", "copies"],
        ["collectives", "world"],
        ["collectives", "ranks", 0, "results", 0],
    ),
    "smoke-report": Kind(_smoke_report, ["timings", "forward_median_s"], ["ok"], ["serve"], ["device"], ["outputs"]),
    "host-profile": Kind(
        lambda: _host(1),
        ["ranks", 0, "results", 0, "seconds"],
        ["ranks", 0, "results", 0, "correct"],
        ["copies"],
        ["ranks"],
        ["ranks", 0],
    ),
    "snapshot-date": Kind(lambda: {"date": "2026-11-30"}, ["date"], None, ["date"], ["date"], []),
    "snapshot-project": Kind(
        lambda: json.loads((SNAPSHOT / "transformers.json").read_text()),
        ["info", "version"],
        None,
        ["info", "version"],
        ["info"],
        ["info"],
    ),
    "snapshot-release": Kind(
        lambda: json.loads((SNAPSHOT / "transformers" / "4.32.0.json").read_text()),
        ["info", "requires_python"],
        None,
        ["info", "requires_dist"],
        ["info", "requires_dist"],
        ["info"],
    ),
}


def _at(doc, path: list):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path: list, value) -> object:
    doc = copy.deepcopy(doc)
    _at(doc, path[:-1])[path[-1]] = value
    return doc


def _hole(doc, path: list, text: str) -> str:
    return json.dumps(_set(doc, path, HOLE), indent=1).replace(json.dumps(HOLE), text, 1)


def _key(path: list) -> str:
    return ".".join(map(str, path))


# --- the hostile forms: (kind, doc) -> (bytes, the key the error must name or None); None: not for this kind -----
def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _required_gone(kind: Kind, doc):
    doc = copy.deepcopy(doc)
    del _at(doc, kind.required[:-1])[kind.required[-1]]
    return doc


def _extra(kind: Kind, doc, path: list):
    doc = copy.deepcopy(doc)
    _at(doc, path)["surprise"] = 1
    return doc


HOSTILE: dict[str, Callable[[Kind, object], tuple[bytes, str | None] | None]] = {
    "NaN": lambda k, d: (_hole(d, k.number, "NaN").encode(), None),
    "Infinity": lambda k, d: (_hole(d, k.number, "Infinity").encode(), None),
    "-Infinity": lambda k, d: (_hole(d, k.number, "-Infinity").encode(), None),
    "1e999": lambda k, d: (_hole(d, k.number, "1e999").encode(), None),
    "-1.0": lambda k, d: (json.dumps(_set(d, k.number, -1.0)).encode(), _key(k.number)),
    "'false'": lambda k, d: None if k.boolean is None else (json.dumps(_set(d, k.boolean, "false")).encode(), _key(k.boolean)),
    "1 for true": lambda k, d: None if k.boolean is None else (json.dumps(_set(d, k.boolean, 1)).encode(), _key(k.boolean)),
    "10,000-deep inside": lambda k, d: (_hole(d, k.nest, _deep(10_000)).encode(), None),
    "10,000-deep document": lambda k, d: (_deep(10_000).encode(), None),
    "10,000-deep objects": lambda k, d: (('{"a":' * 10_000 + "1" + "}" * 10_000).encode(), None),
    "a list": lambda k, d: (b"[]", None),
    "a string": lambda k, d: (b'"profile"', None),
    "a number": lambda k, d: (b"42", None),
    "null": lambda k, d: (b"null", None),
    "missing key": lambda k, d: (json.dumps(_required_gone(k, d)).encode(), k.required[-1]),
    "extra key": lambda k, d: (json.dumps(_extra(k, d, [])).encode(), "surprise"),
    "extra nested key": lambda k, d: None if not k.inner else (json.dumps(_extra(k, d, k.inner)).encode(), "surprise"),
    "key twice": lambda k, d: (f'{{"{next(iter(d))}": 1, '.encode() + json.dumps(d)[1:].encode(), None),
    "5,000-digit integer": lambda k, d: (_hole(d, k.number, "9" * 5000).encode(), None),
    "not UTF-8": lambda k, d: (b'{"\xff": 1}', None),
    "truncated": lambda k, d: (json.dumps(d).encode()[: len(json.dumps(d)) // 2], None),
    "empty": lambda k, d: (b"", None),
}


# --- running the commands -----------------------------------------------------------------------------------
def _write_run(folder: Path, report: dict | None) -> Path:
    """A smoke run folder (logits.safetensors of one prompt) with `report` as report.json; its logits digest filled."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("safetensors")
    from envkit.models.smokerun import METADATA_FORMAT, write_safetensors

    folder.mkdir(parents=True, exist_ok=True)
    meta = dict.fromkeys(("device", "device_type", "param_device"), "cpu")
    meta.update(
        envkit_format=METADATA_FORMAT, dtype="fp32", model_digest="sha256:" + "a" * 64, prompt_digest="sha256:" + "b" * 64
    )
    meta.update(prompts=json.dumps(["a"]), token_ids=json.dumps({"a": [[7]]}), torch="2.1.0", transformers="4.40.0")
    tensors = {
        "logits.a": np.array([[1.0, 0.0]], dtype=np.float32),
        "input_ids.a": np.arange(1, dtype=np.int64)[None, :],
        "attention_mask.a": np.ones((1, 1), dtype=np.int64),
        "positions.a": np.arange(1, dtype=np.int64),
    }
    write_safetensors(folder / "logits.safetensors", tensors, meta)
    if report is not None:
        report = copy.deepcopy(report)
        report["outputs"] = {"logits_sha256": hashlib.sha256((folder / "logits.safetensors").read_bytes()).hexdigest()}
        (folder / "report.json").write_text(json.dumps(report))
    return folder


def _fake_ansible(monkeypatch, written: list[Path], write: Callable[[Path], None]) -> None:
    """`envkit launch profile` without Ansible: the playbook run leaves h0's good profile.json and h1's by `write`
    in the folder the run fetches into (the staging folder beside the output); h1's path goes to `written`."""
    from envkit.executor import ansible as ansible_runner

    def run_playbook(argv, env, *, events_log=None, stderr_log=None, **_kw):
        Path(events_log).write_text("")  # as the real run does: its logs exist
        Path(stderr_log).write_text("")
        hosts = Path(stderr_log).parent / "hosts"
        for host in ("h0", "h1"):
            (hosts / host).mkdir(parents=True, exist_ok=True)
        (hosts / "h0" / "profile.json").write_text(json.dumps(_host(0)))
        written.append(hosts / "h1" / "profile.json")
        write(written[-1])
        return ansible_runner.RunResult(0, [], "")

    monkeypatch.setattr(ansible_runner, "run_playbook", run_playbook)
    monkeypatch.setattr(ansible_runner, "ansible_playbook_path", lambda: "ansible-playbook")


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def _sparse(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with open(path, "wb") as fh:
            fh.truncate(size)

    return write


SNAPSHOT_FILES = {
    "snapshot-date": "_recorded.json",
    "snapshot-project": "transformers.json",
    "snapshot-release": "transformers/4.32.0.json",
}


def run(kind: str, write: Callable[[Path], None], tmp_path: Path, run_cli, monkeypatch):
    """The command that reads a `kind` document, on the file `write` makes as that document: (result, the file)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(PROFILE))
    if kind == "profile":
        bad = tmp_path / "cand.json"
        write(bad)
        return run_cli("compare", str(ref), str(bad)), bad
    if kind == "run-profile":
        (tmp_path / "run").mkdir()
        bad = tmp_path / "run" / "report.json"
        write(bad)
        return run_cli("compare", str(ref), str(tmp_path / "run")), bad
    if kind == "smoke-report":
        good = _write_run(tmp_path / "ref", _smoke_report())
        cand = _write_run(tmp_path / "cand", None)
        bad = cand / "report.json"
        write(bad)
        if bad.stat().st_size < 1 << 20:  # the logits digest the valid report records
            bad.write_bytes(bad.read_bytes().replace(b'"logits_sha256": null', f'"logits_sha256": "{_sha(cand)}"'.encode()))
        return run_cli("compare", str(good), str(cand)), bad
    if kind == "host-profile":
        inv = tmp_path / "inv.ini"
        inv.write_text("[fleet]\nh0 ansible_host=127.0.0.1\nh1 ansible_host=127.0.0.1\n")
        out, written = tmp_path / "out", []
        _fake_ansible(monkeypatch, written, write)
        r = run_cli("launch", "profile", "-i", str(inv), "--nproc", "1", "--device", "cpu", "-o", str(out))
        return r, written[0]
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    bad = snap / SNAPSHOT_FILES[kind]
    write(bad)
    return run_cli("matrix", "refresh", "--snapshot", str(snap)), bad


def _sha(folder: Path) -> str:
    return hashlib.sha256((folder / "logits.safetensors").read_bytes()).hexdigest()


def _valid(kind: str) -> Callable[[Path], None]:
    return _bytes(json.dumps(KINDS[kind].doc(), indent=1).encode())


# --- the tests ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_valid_document_is_accepted(kind, tmp_path, run_cli, monkeypatch):
    """The base every hostile case breaks: read without a complaint (0: equal / merged / up to date)."""
    r, _ = run(kind, _valid(kind), tmp_path, run_cli, monkeypatch)
    assert r.code == 0, (r.out, r.err)


CASES = [(kind, name) for kind in sorted(KINDS) for name in HOSTILE if HOSTILE[name](KINDS[kind], KINDS[kind].doc()) is not None]


@pytest.mark.parametrize("kind, name", CASES)
def test_a_hostile_document_is_exit_2_naming_the_file(kind, name, tmp_path, run_cli, monkeypatch):
    made = HOSTILE[name](KINDS[kind], KINDS[kind].doc())
    assert made is not None
    data, key = made
    r, bad = run(kind, _bytes(data), tmp_path, run_cli, monkeypatch)
    assert r.code == 2, (r.out, r.err)
    assert str(bad) in r.err, r.err
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    if key is not None:
        assert key in r.err or (kind == "smoke-report" and name == "missing key" and "device differ" in r.err), r.err


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("size", [MAX_BYTES + 1, 2 << 30])
def test_a_file_over_the_size_cap_is_refused_unread(kind, size, tmp_path, run_cli, monkeypatch):
    """A sparse file that claims `size` bytes: refused after at most MAX_BYTES + 1 of them."""
    r, bad = run(kind, _sparse(size), tmp_path, run_cli, monkeypatch)
    assert r.code == 2 and str(bad) in r.err and f"over {MAX_BYTES} bytes" in r.err, r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("extra, code", [(0, 0), (1, 2)])
def test_the_size_cap_on_both_sides_through_compare(extra, code, tmp_path, run_cli, monkeypatch):
    """A valid profile padded with spaces to exactly MAX_BYTES is read; one byte more is refused."""
    text = json.dumps(PROFILE).encode()
    r, bad = run("profile", _bytes(text + b" " * (MAX_BYTES - len(text) + extra)), tmp_path, run_cli, monkeypatch)
    assert bad.stat().st_size == MAX_BYTES + extra
    assert r.code == code, r.err
    assert (f"over {MAX_BYTES} bytes" in r.err) == bool(extra)


@pytest.mark.parametrize("depth, code", [(MAX_DEPTH, 0), (MAX_DEPTH + 1, 2)])
def test_the_depth_cap_on_both_sides_through_compare(depth, code, tmp_path, run_cli, monkeypatch):
    """The profile object is level 1, `copies` level 2: nested lists below it make `depth` levels in all."""
    text = _hole(PROFILE, ["copies", "deep"], _deep(depth - 2))
    r, bad = run("profile", _bytes(text.encode()), tmp_path, run_cli, monkeypatch)
    assert r.code == code, r.err
    assert (f"{bad}: nested deeper than {MAX_DEPTH} levels" in r.err) == (code == 2)


@pytest.mark.parametrize("kind", ["profile", "host-profile"])
def test_times_on_both_sides_of_zero(kind, tmp_path, run_cli, monkeypatch):
    k = KINDS[kind]
    for value, code in ((0.0, 0), (-0.0, 0), (-5e-324, 2)):
        doc = _set(k.doc(), k.number, value)
        r, _ = run(kind, _bytes(json.dumps(doc).encode()), tmp_path / str(value), run_cli, monkeypatch)
        assert r.code == code, (value, r.err)


# --- the reader itself ---------------------------------------------------------------------------------------
def test_parse_json_depth_is_counted_outside_strings_only():
    assert MAX_DEPTH == 64
    assert parse_json(_deep(64), "x") is not None
    assert parse_json('{"a": ' * 63 + "[]" + "}" * 63, "x") is not None
    for text in (_deep(65), '{"a": ' * 64 + "[]" + "}" * 64, "[" * 65):
        with pytest.raises(BadInput, match="x: nested deeper than 64 levels"):
            parse_json(text, "x")
    # brackets inside strings, escaped quotes included, are no nesting
    assert parse_json(json.dumps(["[" * 100, '\\"[[[', "{" * 100]), "x") == ["[" * 100, '\\"[[[', "{" * 100]
    assert parse_json('["\\"' + "[" * 100 + '"]', "x") == ['"' + "[" * 100]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[NaN]", "NaN is not a JSON number"),
        ('{"a":\n Infinity}', "Infinity is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[1e999]", "1e999 is too large for a number"),
        ('{"a": 1, "a": 2}', "the key 'a' is given twice"),
        ("[" + "9" * 5000 + "]", "not a JSON document: Exceeds the limit"),
        ("[1,]", "not JSON: Expecting value (line 1)"),
    ],
)
def test_parse_json_refuses(text, reason):
    with pytest.raises(BadInput) as exc:
        parse_json(text, "doc.json")
    assert exc.value.message.startswith(f"doc.json: {reason}") and exc.value.exit_code == 2, exc.value.message


def test_parse_json_names_the_line_of_a_refused_value():
    with pytest.raises(BadInput) as exc:
        parse_json('{\n "a": "NaN",\n "b": [1,\n  NaN]}', "doc.json")
    assert exc.value.where is not None and exc.value.where.line == 4


def test_parse_json_keeps_what_envkit_writes():
    doc = {"a": [1, 2.5, -0.0, 1e300, True, None, "NaN", "é"], "b": {"c": "d"}}
    assert parse_json(json.dumps(doc), "x") == doc
    assert parse_json(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False), "x") == doc


@pytest.mark.parametrize("cap, ok", [(10, True), (9, False)])
def test_read_json_size_cap_on_both_sides(cap, ok, tmp_path):
    path = tmp_path / "ten.json"
    path.write_text('{"a": 12}\n')
    assert path.stat().st_size == 10
    if ok:
        assert read_json(path, max_bytes=cap) == {"a": 12}
    else:
        with pytest.raises(BadInput, match=f"ten.json is too large for a JSON document \\(over {cap} bytes\\)"):
            read_json(path, max_bytes=cap)


def test_read_json_names_a_missing_file_and_a_folder(tmp_path):
    with pytest.raises(BadInput, match="nope.json does not exist"):
        read_json(tmp_path / "nope.json")
    with pytest.raises(BadInput, match="is a directory, not a regular file"):
        read_json(tmp_path)


def test_the_report_fields_compare_reads_are_the_smoke_reports_own():
    """compare's view of report.json forbids unknown keys in `model` and `outputs`: exactly the report's own."""
    from envkit.jobs.smoke import compare
    from envkit.models import smoke as report

    assert set(compare._Digest.model_fields) == set(report.ModelInfo.model_fields)
    assert set(compare._Outputs.model_fields) == set(report.Outputs.model_fields)
    assert set(compare._ReportFields.model_fields) <= set(report.SmokeReport.model_fields)


def test_a_key_given_twice_among_200000_is_named_in_one_pass():
    """The first key given again last of 200,000 (the old search compared each key with all before it: minutes of
    CPU here, hours on 16 MiB): refused naming that key, read in one pass (benchmarks/hostile_parsers.py times it
    against distinct keys)."""
    from envkit.errors import BadInput
    from envkit.io.jsonread import parse_json

    body = ",\n".join(f'"k{i:07d}": 0' for i in range(200_000))
    with pytest.raises(BadInput) as info:
        parse_json("{" + body + ',\n"k0000001": 1}', "many.json")
    assert "'k0000001' is given twice" in info.value.message and info.value.where.line == 200_001
    assert parse_json("{" + body + "}", "many.json")["k0199999"] == 0

"""envkit/io/outputs.py, pinned for `make mutation MODULES=outputs`: each refusal's words, hint and place, each limit on
both sides, the manifest's exact parse and bytes, and what a claim and a commit replace, keep and refuse.

Fast unit tests on tmp_path, fsutil's functions called directly (no CLI). Names are looked up on the module at call
time (`fsutil.X`), so a mutated module is what each test runs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path, PurePosixPath

import pytest

from envkit.errors import BadInput, CannotRun, Where
from envkit.io import outputs as fsutil

KIND = fsutil.LAUNCH_SET
M = fsutil.OUTPUT_MARKER
DEAD = 1 << 30  # above any pid_max: os.kill says no such process
HINT = "Choose another output path, or move it away yourself."
NEVER = " (--force never replaces what envkit did not write.)"
SHA0 = "0" * 64


def refusal(kind, fn, *args, **kwargs):
    with pytest.raises(kind) as info:
        fn(*args, **kwargs)
    return info.value


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "sha256": sha(data), "size": len(data)}


def manifest(*files: dict, kind: str = KIND, **extra) -> bytes:
    return json.dumps({"envkit_output": 1, "kind": kind, "files": list(files), **extra}).encode()


def listed(out: Path) -> dict:
    return json.loads((out / M).read_text())


def tree(folder: Path) -> dict[str, bytes | str]:
    got: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            got[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            got[rel] = p.read_bytes()
    return got


def mode_of(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def owned(out: Path, files: dict[str, bytes], kind: str = KIND, pending: dict[str, bytes] | None = None) -> None:
    """A folder envkit wrote: the files and a manifest listing them (pending ones listed but not written)."""
    out.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    extra = {"pending": [entry(r, d) for r, d in sorted(pending.items())]} if pending else {}
    (out / M).write_bytes(manifest(*(entry(r, d) for r, d in sorted(files.items())), kind=kind, **extra))


class _Alarm:
    """Fail (not hang) when a call blocks: an open of a FIFO without O_NONBLOCK waits for a writer forever."""

    def __init__(self, seconds: float = 3.0) -> None:
        self.seconds = seconds

    def __enter__(self):
        def boom(*_):
            raise TimeoutError("blocked")

        self.old = signal.signal(signal.SIGALRM, boom)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old)


def _fake_lstat(monkeypatch, target: Path, as_if: Path) -> None:
    """os.lstat of `target` answers what `as_if` is (a race: a regular file swapped for a link or a FIFO)."""
    real = os.lstat

    def lstat(p, *a, **k):
        return real(as_if) if str(p) == str(target) else real(p, *a, **k)

    monkeypatch.setattr(fsutil.os, "lstat", lstat)


# --- constants -----------------------------------------------------------------------------------------
def test_limits_and_names():
    assert (fsutil.MAX_MANIFEST, fsutil.MAX_FILES, fsutil.MANIFEST_FORMAT, fsutil._LIST_AT_MOST) == (8 << 20, 100_000, 1, 20)
    assert M == ".envkit-output"
    assert fsutil.KINDS[KIND] == "launch set" and fsutil.KINDS[fsutil.BUNDLE] == "bundle"


# --- atomic writes ---------------------------------------------------------------------------------------
def test_atomic_write_bytes_modes_and_no_temp_left(tmp_path):
    p = tmp_path / "a.txt"
    fsutil.atomic_write_bytes(p, b"one")
    assert p.read_bytes() == b"one" and mode_of(p) == 0o644
    fsutil.atomic_write_bytes(p, b"two", 0o600)
    assert p.read_bytes() == b"two" and mode_of(p) == 0o600
    fsutil.atomic_write_bytes(p, b"three", 0o751, fsync=False)
    assert p.read_bytes() == b"three" and mode_of(p) == 0o751
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.txt"]
    deep = tmp_path / "x" / "y" / "z.txt"
    fsutil.atomic_write_bytes(deep, b"deep")  # the folders on the way are made
    assert deep.read_bytes() == b"deep"


def test_atomic_write_bytes_fsyncs_unless_told_not_to(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(fsutil.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    fsutil.atomic_write_bytes(tmp_path / "a", b"x")
    assert len(calls) == 1
    fsutil.atomic_write_bytes(tmp_path / "b", b"x", fsync=False)
    assert len(calls) == 1
    fsutil.atomic_write_bytes(tmp_path / "c", b"x", 0o600, fsync=True)
    assert len(calls) == 2


def test_atomic_write_text_is_utf8_with_its_mode(tmp_path):
    p = tmp_path / "t.txt"
    fsutil.atomic_write_text(p, "héllo ✓")
    assert p.read_bytes() == "héllo ✓".encode() and mode_of(p) == 0o644
    fsutil.atomic_write_text(p, "x", 0o600)
    assert mode_of(p) == 0o600


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    fsutil.atomic_write_bytes(fifo, b"data")
    reader.join(timeout=10)
    assert got == [b"data"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("kind", [stat.S_IFCHR, stat.S_IFBLK])
def test_a_device_is_written_in_place_never_renamed_over(tmp_path, kind):
    """A device node of no driver (major 250): opened in place it fails, and stays a device node."""
    dev = tmp_path / "dev"
    try:
        os.mknod(dev, kind | 0o600, os.makedev(250, 250))
    except OSError:
        pytest.skip("mknod is not allowed here")
    try:
        open(dev, "wb").close()
        pytest.skip("a driver answers major 250 here")
    except OSError as exc:
        why = exc.strerror
    e = refusal(CannotRun, fsutil.atomic_write_bytes, dev, b"x")
    assert (e.message, e.where, e.hint) == (f"cannot write {dev}: {why}", Where(str(dev)), None)
    assert stat.S_IFMT(os.lstat(dev).st_mode) == kind
    assert sorted(x.name for x in tmp_path.iterdir()) == ["dev"]


def test_temp_prefix_names_the_file_and_the_pid():
    assert fsutil._temp_prefix(Path("/x/a.txt")) == f".a.txt.{os.getpid()}-"


def test_an_unwritable_place_is_cannot_run(tmp_path):
    (tmp_path / "file").write_text("x")
    p = tmp_path / "file" / "a.txt"
    e = refusal(CannotRun, fsutil.atomic_write_bytes, p, b"x")
    assert (e.message, e.where, e.hint) == (
        f"cannot write {p}: File exists",
        Where(str(p)),
        "Choose a writable output path.",
    )


def test_cannot_write_names_another_file_only():
    p = Path("/o/out")
    hint = "Choose a writable output path with room for it."
    e = fsutil._cannot_write(p, OSError(errno.ENOSPC, "No space left on device", "/src/big"))
    assert (e.message, e.where, e.hint) == ("cannot write /o/out: No space left on device (/src/big)", Where("/o/out"), hint)
    assert fsutil._cannot_write(p, OSError(errno.ENOSPC, "No space", "/o/out")).message == "cannot write /o/out: No space"
    assert (
        fsutil._cannot_write(p, OSError(errno.ENOSPC, "No space", "/o/.out.1-x.tmp")).message == "cannot write /o/out: No space"
    )
    assert (
        fsutil._cannot_write(p, OSError(errno.ENOSPC, "No space", "/o/.outx")).message
        == "cannot write /o/out: No space (/o/.outx)"
    )
    assert fsutil._cannot_write(p, OSError(errno.ENOSPC, "No space")).message == "cannot write /o/out: No space"
    assert fsutil._cannot_write(p, OSError("boom")).message == "cannot write /o/out: boom"


# --- link_or_copy, sha256_file ----------------------------------------------------------------------------
def test_link_or_copy_links_the_resolved_source_into_new_folders(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"big")
    via = tmp_path / "via"
    via.symlink_to(src)
    dst = tmp_path / "a" / "b" / "dst.bin"
    fsutil.link_or_copy(via, dst)
    assert not dst.is_symlink() and os.path.samefile(dst, src)
    other = tmp_path / "a" / "other.bin"  # the folder exists already
    other.write_bytes(b"old")
    fsutil.link_or_copy(src, other)
    assert os.path.samefile(other, src) and other.read_bytes() == b"big"
    assert sorted(x.name for x in (tmp_path / "a").iterdir()) == ["b", "other.bin"]


def test_link_or_copy_keeps_a_source_already_in_place_and_replaces_a_link(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"big")
    ino = os.stat(src).st_ino
    fsutil.link_or_copy(src, src)
    assert src.read_bytes() == b"big" and os.stat(src).st_ino == ino
    link = tmp_path / "link.bin"
    link.symlink_to(src)
    fsutil.link_or_copy(src, link)  # a link at dst is replaced by the file itself
    assert not link.is_symlink() and os.path.samefile(link, src)


def test_link_or_copy_copies_when_it_cannot_link(tmp_path, monkeypatch):
    src = tmp_path / "src.bin"
    src.write_bytes(b"big")

    def no_link(*_a, **_k):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(fsutil.os, "link", no_link)
    dst = tmp_path / "dst.bin"
    fsutil.link_or_copy(src, dst)
    assert dst.read_bytes() == b"big" and not os.path.samefile(dst, src)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["dst.bin", "src.bin"]


def test_link_or_copy_leaves_no_temp_when_it_fails(tmp_path, monkeypatch):
    src = tmp_path / "src.bin"
    src.write_bytes(b"big")

    def fails(*_a, **_k):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(fsutil.os, "replace", fails)
    with pytest.raises(OSError, match="I/O error"):
        fsutil.link_or_copy(src, tmp_path / "dst.bin")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["src.bin"]


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 10])
def test_sha256_file_in_small_chunks(tmp_path, size):
    p = tmp_path / "f"
    data = bytes(range(size))
    p.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # buffering=1 in binary mode warns
        assert fsutil.sha256_file(p, chunk=4) == sha(data)
        assert fsutil.sha256_file(p) == sha(data)


# --- plain paths -------------------------------------------------------------------------------------------
PLAIN_HINT = "A lock or manifest names files outside the output; get it again from its source."


@pytest.mark.parametrize("rel", ["", "/etc/passwd", "a/../b", "..", ".", "a\x00b", "a\nb", "a\rb"])
def test_plain_relpath_refusals(rel):
    e = refusal(BadInput, fsutil.plain_relpath, rel, "lock.yaml")
    assert (e.message, e.where, e.hint) == (
        f"{rel!r} is not a plain relative path: refusing to write it",
        Where("lock.yaml"),
        PLAIN_HINT,
    )
    assert refusal(BadInput, fsutil.plain_relpath, rel).where is None
    assert refusal(BadInput, fsutil.plain_relpath, rel, "").where is None


@pytest.mark.parametrize(
    ("rel", "parts"),
    [
        ("a", ("a",)),
        ("a/b", ("a", "b")),
        ("a//b", ("a", "b")),
        ("./a", ("a",)),
        ("X", ("X",)),
        ("a\\b", ("a\\b",)),
        ("..a", ("..a",)),
    ],
)
def test_plain_relpath_accepts(rel, parts):
    assert fsutil.plain_relpath(rel).parts == parts


def test_inside_refuses_a_link_out_and_allows_a_link_within(tmp_path):
    base = tmp_path / "out"
    (base / "in").mkdir(parents=True)
    (base / "up").symlink_to(tmp_path)
    (base / "same").symlink_to(base / "in")
    assert fsutil.inside(base, "a/b") == base / "a" / "b"
    assert fsutil.inside(base, "same/x") == base / "same" / "x"
    e = refusal(BadInput, fsutil.inside, base, "up/x")
    assert (e.message, e.where, e.hint) == (
        f"{base / 'up' / 'x'} leads outside {base} (a link on the way): refusing to write it",
        Where(str(base / "up" / "x")),
        f"Remove the link from {base}, or pass another output.",
    )
    e = refusal(BadInput, fsutil.inside, base, "../x")
    assert (e.message, e.where) == ("'../x' is not a plain relative path: refusing to write it", Where(str(base)))
    linked = tmp_path / "linked"
    linked.symlink_to(base)
    assert fsutil.inside(linked, "in/x") == linked / "in" / "x"


# --- manifest entries ---------------------------------------------------------------------------------------
GOOD = {"path": "a.txt", "sha256": SHA0, "size": 1}


@pytest.mark.parametrize(
    ("e", "why"),
    [
        ([], "an entry is not an object"),
        ("a.txt", "an entry is not an object"),
        ({"sha256": SHA0, "size": 1}, "an entry has no path"),
        ({**GOOD, "path": 5}, "an entry has no path"),
        ({**GOOD, "path": ""}, "an entry has no path"),
        ({**GOOD, "path": "a" * 4097}, "an entry has no path"),
        ({**GOOD, "path": "/a"}, "'/a' is not a plain relative path"),
        ({**GOOD, "path": "a//b"}, "'a//b' is not a plain relative path"),
        ({**GOOD, "path": "./a"}, "'./a' is not a plain relative path"),
        ({**GOOD, "path": "a/"}, "'a/' is not a plain relative path"),
        ({**GOOD, "path": "a/../b"}, "'a/../b' is not a plain relative path"),
        ({**GOOD, "path": ".."}, "'..' is not a plain relative path"),
        ({**GOOD, "path": "a\x00b"}, "'a\\x00b' is not a plain relative path"),
        ({**GOOD, "path": "a\nb"}, "'a\\nb' is not a plain relative path"),
        ({**GOOD, "path": "a\rb"}, "'a\\rb' is not a plain relative path"),
        ({**GOOD, "path": "a\\b"}, "'a\\\\b' is not a plain relative path"),
        ({**GOOD, "path": M}, "'.envkit-output' is not a plain relative path"),
        ({**GOOD, "path": M + "/x"}, "'.envkit-output/x' is not a plain relative path"),
        ({"path": "l", "link": ""}, "'l': a bad link"),
        ({"path": "l", "link": "t" * 4097}, "'l': a bad link"),
        ({"path": "l", "link": "a\x00b"}, "'l': a bad link"),
        ({"path": "l", "link": 5}, "'l': a bad link"),
        ({**GOOD, "extra": 1}, "'a.txt': keys ['extra', 'path', 'sha256', 'size'] (path, sha256, size or path, link)"),
        ({"path": "a.txt", "sha256": SHA0}, "'a.txt': keys ['path', 'sha256'] (path, sha256, size or path, link)"),
        ({"path": "a.txt"}, "'a.txt': keys ['path'] (path, sha256, size or path, link)"),
        ({"path": "l", "link": "t", "size": 1}, "'l': keys ['link', 'path', 'size'] (path, sha256, size or path, link)"),
        ({**GOOD, "sha256": "0" * 63}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "sha256": "0" * 65}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "sha256": "A" * 64}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "sha256": "g" * 64}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "sha256": 5}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "size": -1}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "size": 1 << 50}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "size": True}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "size": 1.0}, "'a.txt': a bad sha256 or size"),
        ({**GOOD, "size": "1"}, "'a.txt': a bad sha256 or size"),
    ],
)
def test_entry_problem_says_why(e, why):
    assert fsutil._entry_problem(e) == why


@pytest.mark.parametrize(
    "e",
    [
        GOOD,
        {**GOOD, "path": "a" * 4096},
        {**GOOD, "path": "x/.envkit-output"},
        {**GOOD, "path": M + ".bak"},
        {**GOOD, "path": "X/Y.txt"},
        {**GOOD, "path": "..a"},
        {**GOOD, "sha256": "0123456789abcdef" * 4},
        {**GOOD, "size": 0},
        {**GOOD, "size": (1 << 50) - 1},
        {"path": "l", "link": "t"},
        {"path": "l", "link": "t" * 4096},
        {"path": "l", "link": "/abs/../x\nX"},
    ],
)
def test_entry_problem_accepts(e):
    assert fsutil._entry_problem(e) is None


def test_entries_order_and_folders(monkeypatch):
    a, b = {**GOOD, "path": "a"}, {**GOOD, "path": "b"}
    assert fsutil._entries([a, b], "files") == {"a": a, "b": b}
    assert fsutil._entries([], "files") == {}
    for items, why in (
        ([b, a], "files is not sorted by path, each path once"),
        ([a, a], "files is not sorted by path, each path once"),
        ([a, {**GOOD, "path": "a/b/c"}], "'a' is listed as a file and as a folder"),
        ([{**GOOD, "path": "a/b"}, {**GOOD, "path": "a/b/c"}], "'a/b' is listed as a file and as a folder"),
        ([{**GOOD, "path": "/a"}], "'/a' is not a plain relative path"),
        ({"a": 1}, "files is not a list of at most 100000 entries"),
        (None, "files is not a list of at most 100000 entries"),
    ):
        with pytest.raises(ValueError) as info:
            fsutil._entries(items, "files")
        assert str(info.value) == why
    with pytest.raises(ValueError, match="^pending is not sorted by path, each path once$"):
        fsutil._entries([b, a], "pending")
    # siblings and look-alikes are no file-and-folder
    got = fsutil._entries([{**GOOD, "path": "a-b"}, {**GOOD, "path": "a/b"}, {**GOOD, "path": "ab/c"}], "files")
    assert list(got) == ["a-b", "a/b", "ab/c"]
    monkeypatch.setattr(fsutil, "MAX_FILES", 3)
    assert len(fsutil._entries([{**GOOD, "path": c} for c in "abc"], "files")) == 3
    with pytest.raises(ValueError, match="^files is not a list of at most 3 entries$"):
        fsutil._entries([1, 2, 3, 4], "files")


def test_entries_copies_each_entry():
    e = {**GOOD}
    got = fsutil._entries([e], "files")
    assert got == {"a.txt": GOOD} and got["a.txt"] is not e


def test_no_duplicates():
    assert fsutil._no_duplicates([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="^a key appears twice$"):
        fsutil._no_duplicates([("a", 1), ("a", 1)])


# --- the manifest ----------------------------------------------------------------------------------------
def test_to_bytes_exactly():
    a, b = entry("a", b"a"), {"path": "b", "link": "t"}
    m = fsutil.Manifest(KIND, {"b": b, "a": a})
    assert (
        m.to_bytes()
        == (
            "{\n"
            ' "envkit_output": 1,\n'
            ' "files": [\n'
            "  {\n"
            f'   "path": "a",\n   "sha256": "{sha(b"a")}",\n   "size": 1\n'
            "  },\n"
            "  {\n"
            '   "link": "t",\n   "path": "b"\n'
            "  }\n"
            " ],\n"
            ' "kind": "launch-set"\n'
            "}\n"
        ).encode()
    )
    p = fsutil.Manifest("smoke-run", {}, {"z": {"path": "z", "link": "1"}, "y": {"path": "y", "link": "2"}})
    assert p.to_bytes() == (
        b'{\n "envkit_output": 1,\n "files": [],\n "kind": "smoke-run",\n "pending": [\n'
        b'  {\n   "link": "2",\n   "path": "y"\n  },\n  {\n   "link": "1",\n   "path": "z"\n  }\n ]\n}\n'
    )
    assert fsutil.parse_manifest(p.to_bytes()) == p


def test_parse_manifest_accepts_files_and_pending():
    a, b = entry("a", b"a"), {"path": "b", "link": "t"}
    m = fsutil.parse_manifest(manifest(a, b, pending=[entry("c", b"c")]))
    assert m == fsutil.Manifest(KIND, {"a": a, "b": b}, {"c": entry("c", b"c")}, False)
    assert fsutil.parse_manifest(manifest()) == fsutil.Manifest(KIND)
    assert fsutil.parse_manifest(manifest(kind="a" * 40)).kind == "a" * 40
    assert fsutil.parse_manifest(manifest(kind="-")).kind == "-"


def test_parse_manifest_legacy_marker():
    m = fsutil.parse_manifest(b"launch-set\n")
    assert m == fsutil.Manifest("launch-set", {}, {}, True) and m.legacy is True
    assert fsutil.parse_manifest(b"a" * 40 + b"\n") == fsutil.Manifest("a" * 40, legacy=True)
    for bad in (b"a" * 41 + b"\n", b"\n", b"launch-set", b"Launch-set\n", b"launch-set\n\n", b"launch set\n"):
        with pytest.raises(ValueError):
            fsutil.parse_manifest(bad)


def test_parse_manifest_size_cap(monkeypatch):
    monkeypatch.setattr(fsutil, "MAX_MANIFEST", 11)
    assert fsutil.parse_manifest(b"launch-set\n").legacy  # 11 bytes: at the cap
    monkeypatch.setattr(fsutil, "MAX_MANIFEST", 10)
    with pytest.raises(ValueError, match="^larger than 10 bytes$"):
        fsutil.parse_manifest(b"launch-set\n")


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (b"[]", "not an envkit output manifest (format 1)"),
        (b'"x"', "not an envkit output manifest (format 1)"),
        (b'{"kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": true, "kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": 1.0, "kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": "1", "kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": 2, "kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": 0, "kind": "launch-set", "files": []}', "not an envkit output manifest (format 1)"),
        (b'{"envkit_output": 1, "kind": "launch-set"}', "keys ['envkit_output', 'kind']"),
        (b'{"envkit_output": 1, "kind": "launch-set", "files": [], "x": 1}', "keys ['envkit_output', 'files', 'kind', 'x']"),
        (b'{"envkit_output": 1, "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": 5, "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": "", "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": "Launch", "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": "' + b"a" * 41 + b'", "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": "a\\n", "files": []}', "no kind"),
        (b'{"envkit_output": 1, "kind": "a", "files": {}}', "files is not a list of at most 100000 entries"),
        (b'{"envkit_output": 1, "kind": "a", "files": [], "pending": null}', "pending is not a list of at most 100000 entries"),
        (b'{"envkit_output": 1, "kind": "a", "kind": "a", "files": []}', "a key appears twice"),
    ],
)
def test_parse_manifest_refusals(doc, why):
    with pytest.raises(ValueError) as info:
        fsutil.parse_manifest(doc)
    assert str(info.value) == why


def test_parse_manifest_pending_is_checked_as_pending():
    with pytest.raises(ValueError, match="^pending is not sorted by path, each path once$"):
        fsutil.parse_manifest(manifest(pending=[{**GOOD, "path": "b"}, {**GOOD, "path": "a"}]))


def test_an_entry_named_dot_is_a_bad_entry_not_a_crash(tmp_path):
    assert fsutil._entry_problem({**GOOD, "path": "."}) == "'.' is not a plain relative path"


def test_a_manifest_listing_dot_owns_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_bytes(manifest({**GOOD, "path": "."}))
    (out / "a.txt").write_text("x")
    e = refusal(BadInput, fsutil.claim_output, out, KIND)
    assert e.message.startswith(f"{out} is a folder envkit did not write (.envkit-output is not a valid manifest (")


# --- reading a folder's manifest -----------------------------------------------------------------------
def test_read_manifest_why_not(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    assert fsutil._read_manifest(out) == (None, "no .envkit-output")
    (tmp_path / "file").write_text("x")
    assert fsutil._read_manifest(tmp_path / "file") == (None, ".envkit-output cannot be read (Not a directory)")
    (out / M).mkdir()
    assert fsutil._read_manifest(out) == (None, ".envkit-output is not a regular file")
    (out / M).rmdir()
    (tmp_path / "real").write_bytes(b"launch-set\n")
    (out / M).symlink_to(tmp_path / "real")
    assert fsutil._read_manifest(out) == (None, ".envkit-output is not a regular file")
    (out / M).unlink()
    (out / M).write_bytes(b"launch-set\n")
    assert fsutil._read_manifest(out) == (fsutil.Manifest(KIND, legacy=True), "")
    monkeypatch.setattr(fsutil, "MAX_MANIFEST", 11)
    assert fsutil._read_manifest(out) == (fsutil.Manifest(KIND, legacy=True), "")
    monkeypatch.setattr(fsutil, "MAX_MANIFEST", 10)
    assert fsutil._read_manifest(out) == (None, ".envkit-output is larger than 10 bytes")


def test_read_manifest_says_what_is_invalid(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_bytes(b'{"envkit_output": 1, "files": []}')
    assert fsutil._read_manifest(out) == (None, ".envkit-output is not a valid manifest (no kind)")
    (out / M).write_bytes(b"{")
    assert fsutil._read_manifest(out)[1] == (
        ".envkit-output is not a valid manifest (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )
    long = json.dumps({"envkit_output": 1, "kind": "a", "files": [], "k" * 300: 1}).encode()
    (out / M).write_bytes(long)
    why = str(f"keys {sorted(['envkit_output', 'kind', 'files', 'k' * 300])}")[:200]
    assert fsutil._read_manifest(out) == (None, f".envkit-output is not a valid manifest ({why})")
    (out / M).write_bytes(b"[" * 100_000)
    got = fsutil._read_manifest(out)
    assert got[0] is None and got[1].startswith(".envkit-output is not a valid manifest (maximum recursion depth exceeded")

    def raises(msg):
        def parse(_data):
            raise ValueError(msg)

        return parse

    monkeypatch.setattr(fsutil, "parse_manifest", raises(""))
    assert fsutil._read_manifest(out) == (None, ".envkit-output is not a valid manifest (nested too deep)")
    monkeypatch.setattr(fsutil, "parse_manifest", raises("first\nsecond"))
    assert fsutil._read_manifest(out) == (None, ".envkit-output is not a valid manifest (first)")


def test_read_manifest_never_follows_a_link_swapped_in(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "planted").write_bytes(b"launch-set\n")
    (out / M).symlink_to(tmp_path / "planted")
    _fake_lstat(monkeypatch, out / M, tmp_path / "planted")  # lstat saw a regular file; a link is there now
    assert fsutil._read_manifest(out) == (None, ".envkit-output cannot be read (Too many levels of symbolic links)")


def test_read_manifest_never_blocks_on_a_fifo_swapped_in(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / M)
    (tmp_path / "reg").write_bytes(b"")
    _fake_lstat(monkeypatch, out / M, tmp_path / "reg")
    with _Alarm():
        got = fsutil._read_manifest(out)
    assert got == (None, ".envkit-output is not a valid manifest (Expecting value: line 1 column 1 (char 0))")


# --- entries of what is on disk ------------------------------------------------------------------------
def test_entry_of_files_links_and_others(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert fsutil._entry_of(f, "x/f") == {"path": "x/f", "sha256": sha(b"abc"), "size": 3}
    (tmp_path / "l").symlink_to("nowhere")
    assert fsutil._entry_of(tmp_path / "l", "l") == {"path": "l", "link": "nowhere"}
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "p")
    assert [fsutil._entry_of(tmp_path / n, n) for n in ("d", "p", "missing")] == [None, None, None]
    f.write_bytes(b"abd")  # same size, new content: hashed again (the cache is keyed by mtime and ctime too)
    os.utime(f, ns=(1, 1))
    assert fsutil._entry_of(f, "f")["sha256"] == sha(b"abd")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = tmp_path / "g"
        g.write_bytes(b"x" * 10)
        assert fsutil._entry_of(g, "g") == entry("g", b"x" * 10)


def test_entry_of_never_follows_nor_blocks_on_a_swap(tmp_path, monkeypatch):
    (tmp_path / "reg").write_bytes(b"reg")
    (tmp_path / "target").write_bytes(b"target")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    real = os.lstat

    def lstat(p, *a, **k):
        return real(tmp_path / "reg") if Path(p).name in ("link", "fifo") else real(p, *a, **k)

    monkeypatch.setattr(fsutil.os, "lstat", lstat)
    with _Alarm():
        assert fsutil._entry_of(tmp_path / "link", "link") is None
        assert fsutil._entry_of(tmp_path / "fifo", "fifo") is None


def test_matches(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert fsutil._matches(f, entry("f", b"abc"))
    assert not fsutil._matches(f, entry("f", b"abd"))  # same size, other content
    assert not fsutil._matches(f, entry("f", b"abcd"))
    assert not fsutil._matches(f, {"path": "f", "size": 3})
    assert not fsutil._matches(f, {"path": "f", "link": "x"})
    assert not fsutil._matches(tmp_path / "missing", entry("missing", b""))
    (tmp_path / "l").symlink_to("f")
    assert fsutil._matches(tmp_path / "l", {"path": "l", "link": "f"})
    assert not fsutil._matches(tmp_path / "l", {"path": "l", "link": "g"})
    assert not fsutil._matches(tmp_path / "l", entry("l", b"abc"))  # a link where a file was listed
    (tmp_path / "d").mkdir()
    assert not fsutil._matches(tmp_path / "d", {"path": "d", "sha256": SHA0, "size": os.lstat(tmp_path / "d").st_size})


# --- the inputs of a command ---------------------------------------------------------------------------
def test_inputs_by_path_and_inode(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("stdin is no file")
    f = tmp_path / "f"
    f.write_text("x")
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "g").write_text("g")
    ins = fsutil._Inputs([None, "", "-", tmp_path / "missing", "f", d])
    assert ins.files == {f} and ins.dirs == {d}
    assert ins.ids == {(os.stat(f).st_dev, os.stat(f).st_ino)}
    assert ins.dir_ids == {(os.stat(d).st_dev, os.stat(d).st_ino)}
    assert ins.by_path(f) and ins.by_path(d) and ins.by_path(d / "sub" / "g") and ins.by_path(d / "missing")
    assert not ins.by_path(tmp_path / "-") and not ins.by_path(tmp_path) and not ins.by_path(tmp_path / "dd")
    (tmp_path / "via").symlink_to(f)
    assert ins.by_path(tmp_path / "via")
    os.link(f, tmp_path / "hard")
    assert ins.by_inode(tmp_path / "hard") and ins.by_inode(d) and not ins.by_inode(d / "sub")
    assert not ins.by_inode(tmp_path / "-") and not ins.by_inode(tmp_path / "missing")
    only_dir = fsutil._Inputs([d])
    assert not only_dir.by_inode(f) and only_dir.by_inode(d)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert not ins.by_path(tmp_path / "loop")


# --- scanning ------------------------------------------------------------------------------------------------
def test_debris_inside():
    assert fsutil._debris_inside(".a.txt.123-x.tmp") == ("a.txt", 123)
    assert fsutil._debris_inside(".a.123456789012-.tmp") == ("a", 123456789012)
    for name in (".a.1234567890123-x.tmp", "a.txt.1-x.tmp", ".a.txt.1-x.tm", ".a.txt.x-1.tmp", ".a.txt.-x.tmp"):
        assert fsutil._debris_inside(name) is None


def test_scan_order_links_and_inputs(tmp_path):
    root = tmp_path / "r"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "b").mkdir()
    for rel in ("z.txt", "y.txt", "a/1", "a/deep/2", "b/3"):
        (root / rel).write_text(rel)
    (root / "ln").symlink_to(root / "b")  # a link to a folder is an entry, never followed
    got = [(r, e.name, i) for r, e, i in fsutil._scan(root)]
    assert got == [
        ("ln", "ln", False),
        ("y.txt", "y.txt", False),
        ("z.txt", "z.txt", False),
        ("b/3", "3", False),
        ("a/1", "1", False),
        ("a/deep/2", "2", False),
    ]
    st = os.stat(root / "a")
    got = {r: i for r, _e, i in fsutil._scan(root, ((st.st_dev, st.st_ino),))}
    assert got == {"ln": False, "y.txt": False, "z.txt": False, "b/3": False, "a/1": True, "a/deep/2": True}


def test_listing_cut_at_twenty():
    assert fsutil._listing([]) == ""
    assert fsutil._listing(["a", "b"]) == "a, b"
    names = [f"f{i}" for i in range(22)]
    assert fsutil._listing(names[:20]) == ", ".join(names[:20])
    assert fsutil._listing(names[:21]) == ", ".join(names[:20]) + " and 1 more"
    assert fsutil._listing(iter(names)) == ", ".join(names[:20]) + " and 2 more"


# --- staging -----------------------------------------------------------------------------------------------
def test_stage_is_made_once_and_removed(tmp_path, monkeypatch):
    registered = []
    monkeypatch.setattr(fsutil.atexit, "register", lambda fn, *args: registered.append((fn, args)))
    out = tmp_path / "new" / "out"
    claim = fsutil.claim_output(out, KIND)
    stage = tmp_path / "new" / f".out.partial-{os.getpid()}"
    assert claim.stage() == stage and stage.is_dir()
    assert registered == [(fsutil._remove_quietly, (stage,))]
    (stage / "log").write_text("x")
    assert claim.stage() == stage and (stage / "log").read_text() == "x"  # the same, not made again
    assert len(registered) == 1
    claim.unstage()
    assert not stage.exists() and claim._stage is None
    claim.unstage()  # twice is fine
    (stage).mkdir()
    (stage / "old").write_text("a killed call's")
    with claim.staging() as s:
        assert s == stage and list(s.iterdir()) == []
    assert not stage.exists()


def test_stage_that_cannot_be_made_is_cannot_run(tmp_path):
    (tmp_path / "file").write_text("x")
    claim = fsutil.Claim(path=tmp_path / "file" / "out", kind=KIND)
    e = refusal(CannotRun, claim.stage)
    assert (e.message, e.where, e.hint) == (
        f"cannot write {tmp_path / 'file' / 'out'}: Not a directory",
        Where(str(tmp_path / "file" / "out")),
        "Choose a writable output path with room for it.",
    )


def test_remove_and_remove_quietly(tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("x")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "keep").write_text("k")
    (tmp_path / "ld").symlink_to(tmp_path / "t")
    (tmp_path / "f").write_text("x")
    for n in ("d", "ld", "f", "missing"):
        fsutil._remove(tmp_path / n)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"] and (tmp_path / "t" / "keep").exists()
    fsutil._remove_quietly(tmp_path / "t" / "keep" / "x")  # ENOTDIR: swallowed
    with pytest.raises(NotADirectoryError):
        fsutil._remove(tmp_path / "t" / "keep" / "x")


def test_prune_removes_only_emptied_folders_never_out(tmp_path):
    out = tmp_path / "out"
    (out / "a" / "b" / "c").mkdir(parents=True)
    (out / "a" / "keep").write_text("k")
    fsutil._prune(out, PurePosixPath("a/b/c"))
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["a", "a/keep"]
    (out / "x").mkdir()
    fsutil._prune(out, PurePosixPath("x"))
    assert sorted(p.name for p in out.iterdir()) == ["a"]
    (out / "a" / "keep").unlink()
    fsutil._prune(out, PurePosixPath("a"))
    assert out.is_dir() and list(out.iterdir()) == []
    fsutil._prune(out, PurePosixPath("."))
    assert out.is_dir()


# --- debris of killed runs ---------------------------------------------------------------------------------
def test_debris_pid():
    assert fsutil._debris_pid(".out.partial-12", "out") == 12
    assert fsutil._debris_pid(".out.old-34", "out") == 34
    assert fsutil._debris_pid(".out.56-abc.tmp", "out") == 56
    assert fsutil._debris_pid(".out.78-.tmp", "out") == 78
    for name in (
        ".out.partial-",
        ".out.other-1",
        ".outx.partial-1",
        "XoutYpartial-1",
        ".out.partial-1x",
        ".out.1-a/b.tmp",
        "out.old-1",
    ):
        assert fsutil._debris_pid(name, "out") is None
    assert fsutil._debris_pid(".a+b.old-9", "a+b") == 9


@pytest.fixture
def live_child():
    """A live process of the test's own, SIGHUP at its default: `_alive` must only ask (signal 0), never signal it.
    (A parent's pid would do as a live one, but a mutant sending it a real signal would stop the test run.)"""
    code = "import signal, sys, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); print('ready', flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    yield p
    p.kill()
    p.wait()
    p.stdout.close()


@pytest.fixture
def live(live_child):
    """The pid of `live_child`."""
    return live_child.pid


def test_alive(live_child, monkeypatch):
    assert fsutil._alive(os.getpid()) is False  # this run: what it left is from an earlier call
    assert fsutil._alive(live_child.pid) is True
    time.sleep(0.2)
    assert live_child.poll() is None  # still running: asked, not signalled (a signalled child is a zombie kill(0) still finds)
    assert fsutil._alive(DEAD) is False
    assert fsutil._alive(4_000_000_000) is False  # OverflowError: no such pid

    def denied(pid, sig):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(fsutil.os, "kill", denied)
    assert fsutil._alive(1 << 22) is True and fsutil._alive((1 << 22) + 1) is False


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_clean_debris_removes_only_a_dead_runs(tmp_path, monkeypatch, live):
    monkeypatch.chdir(tmp_path)
    dead = DEAD
    names = {
        f".out.partial-{dead}": "dir",
        f".out.old-{dead}": "dir",
        f".out.{dead}-x.tmp": "file",
        f".out.partial-{os.getpid()}": "dir",  # this run's, from an earlier call
        f".out.partial-{live}": "dir",
        f".out.{live}-x.tmp": "file",
        ".out.txt": "file",
        f".other.partial-{dead}": "dir",
        f"out.partial-{dead}": "dir",
        "out": "dir",
    }
    for n, what in names.items():
        if what == "dir":
            (tmp_path / n).mkdir()
            (tmp_path / n / "inner").write_text("x")
        else:
            (tmp_path / n).write_text("x")
    removed = fsutil.clean_debris(Path("out"))
    gone = {f".out.partial-{dead}", f".out.old-{dead}", f".out.{dead}-x.tmp", f".out.partial-{os.getpid()}"}
    assert sorted(removed) == sorted(tmp_path / n for n in gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(names) - gone)
    assert fsutil.clean_debris(tmp_path / "missing" / "out") == []


# --- claiming a file output ----------------------------------------------------------------------------------
def test_claim_a_file_output(tmp_path):
    f = tmp_path / "b.tar"
    assert fsutil.claim_output(f, fsutil.BUNDLE, folder=False).ours == {}
    f.write_text("x")
    seen = []
    c = fsutil.claim_output(f, fsutil.BUNDLE, folder=False, is_ours=lambda p: seen.append(p) or p == f)
    assert c.path == f and seen == [f]
    e = refusal(BadInput, fsutil.claim_output, f, fsutil.BUNDLE, folder=False, is_ours=lambda p: False)
    assert (e.message, e.where, e.hint) == (
        f"{f} exists and is a file envkit did not write (not an earlier envkit bundle): refusing to replace it",
        Where(str(f)),
        HINT,
    )
    e = refusal(BadInput, fsutil.claim_output, f, fsutil.BUNDLE, folder=False, force=False)
    assert e.hint == HINT + NEVER
    e = refusal(BadInput, fsutil.claim_output, f, fsutil.BUNDLE, folder=False, is_ours=lambda p: True, inputs=[f])
    assert (e.message, e.where, e.hint) == (
        f"{f} is an input of this command: refusing to replace it with the bundle",
        Where(str(f)),
        HINT,
    )
    os.link(f, tmp_path / "hard.tar")
    e = refusal(
        BadInput, fsutil.claim_output, f, fsutil.BUNDLE, folder=False, is_ours=lambda p: True, inputs=[tmp_path / "hard.tar"]
    )
    assert e.message == f"{f} is an input of this command: refusing to replace it with the bundle"
    link = tmp_path / "l.tar"
    link.symlink_to(f)
    e = refusal(BadInput, fsutil.claim_output, link, fsutil.BUNDLE, folder=False, is_ours=lambda p: True, inputs=[f], force=True)
    assert (e.message, e.hint) == (
        f"{link} exists and is a symbolic link (not an earlier envkit bundle): refusing to replace it",
        HINT + NEVER,
    )
    os.mkfifo(tmp_path / "p")
    e = refusal(BadInput, fsutil.claim_output, tmp_path / "p", "x-y", folder=False)
    assert (
        e.message
        == f"{tmp_path / 'p'} exists and is a device, pipe or socket (not an earlier envkit x-y): refusing to replace it"
    )
    e = refusal(BadInput, fsutil.claim_output, tmp_path, fsutil.BUNDLE, folder=False, is_ours=lambda p: True)
    assert (e.message, e.where, e.hint) == (
        f"{tmp_path} is a folder; the bundle written there is a file",
        Where(str(tmp_path)),
        "Pass an archive path that is not a folder.",
    )


# --- claiming a folder ---------------------------------------------------------------------------------------
def test_claim_nothing_there_and_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = fsutil.claim_output("out", KIND, force=True, inputs=[tmp_path / "missing"])
    assert (c.path, c.kind, c.force, c.ours, c.theirs, c.inputs_inside) == (tmp_path / "out", KIND, True, {}, {}, [])
    assert fsutil.claim_output("out", KIND).force is False
    (tmp_path / "out").mkdir()
    c = fsutil.claim_output("out", KIND)
    assert (c.ours, c.theirs) == ({}, {})


def test_claim_cannot_look(tmp_path):
    (tmp_path / "file").write_text("x")
    p = tmp_path / "file" / "out"
    e = refusal(CannotRun, fsutil.claim_output, p, KIND)
    assert (e.message, e.where, e.hint) == (f"cannot look at {p}: Not a directory", Where(str(p)), None)


def test_claim_a_non_folder_where_the_folder_goes(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    (tmp_path / "l").symlink_to(tmp_path)
    os.mkfifo(tmp_path / "p")
    for name, what, force, hint in (
        ("f", "a file", None, HINT),
        ("l", "a symbolic link", True, HINT + NEVER),
        ("p", "a device, pipe or socket", False, HINT + NEVER),
    ):
        p = tmp_path / name
        e = refusal(BadInput, fsutil.claim_output, p, KIND, force=force)
        assert (e.message, e.where, e.hint) == (
            f"{p} exists and is {what}, where the launch set folder goes: refusing to replace it",
            Where(str(p)),
            hint,
        )


def test_claim_another_kind(tmp_path):
    out = tmp_path / "out"
    owned(out, {"Dockerfile": b"FROM x\n"}, kind=fsutil.IMAGE_CONTEXT)
    for force, never in ((None, ""), (True, NEVER)):
        e = refusal(BadInput, fsutil.claim_output, out, KIND, force=force)
        assert (e.message, e.where, e.hint) == (
            f"{out} is an envkit image build context, not a launch set: refusing to replace it",
            Where(str(out)),
            "Choose another output path for the launch set." + never,
        )
    owned(out, {"Dockerfile": b"FROM x\n"}, kind="some-" + "x" * 35)
    e = refusal(BadInput, fsutil.claim_output, out, "my-kind")
    assert e.message == f"{out} is an envkit {'some-' + 'x' * 35!r}, not a my-kind: refusing to replace it"


def test_claim_an_owned_folder(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "d/b.txt": b"b"})
    c = fsutil.claim_output(out, KIND)
    assert (c.ours, c.theirs, c.inputs_inside) == ({"a.txt": entry("a.txt", b"a"), "d/b.txt": entry("d/b.txt", b"b")}, {}, [])


def test_claim_refuses_the_users_files_listing_each(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "b.txt": b"b"})
    (out / "b.txt").write_text("edited")
    (out / "z").mkdir()
    (out / "z" / "mine.txt").write_text("mine")
    (out / "c.txt").symlink_to(tmp_path)
    for force, tail in ((None, ""), (False, " --force writes beside them, never replacing or deleting one.")):
        e = refusal(BadInput, fsutil.claim_output, out, KIND, force=force)
        assert (e.message, e.where, e.hint) == (
            f"{out} holds files envkit did not write or that were changed since: b.txt (changed since envkit wrote it), "
            "c.txt (not written by envkit), z/mine.txt (not written by envkit); refusing to replace it",
            Where(str(out)),
            f"Move them out of {out}, or choose another output path." + tail,
        )
    c = fsutil.claim_output(out, KIND, force=True)  # --force: claimed, the user's files known as theirs
    assert c.ours == {"a.txt": entry("a.txt", b"a")}
    assert c.theirs == {
        "b.txt": "changed since envkit wrote it",
        "c.txt": "not written by envkit",
        "z/mine.txt": "not written by envkit",
    }


def test_claim_a_folder_envkit_did_not_write(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "b").write_text("b")
    (out / "a").write_text("a")
    e = refusal(BadInput, fsutil.claim_output, out, KIND)
    assert (e.message, e.hint) == (
        f"{out} is a folder envkit did not write (no .envkit-output): a (not written by envkit), b (not written by envkit); "
        "refusing to replace it",
        f"Move them out of {out}, or choose another output path.",
    )
    names = [f"f{i:02}" for i in range(22)]
    for n in names:
        (out / n).write_text(n)
    e = refusal(BadInput, fsutil.claim_output, out, KIND)
    shown = ", ".join(f"{n} (not written by envkit)" for n in (["a", "b", *names])[:20])
    assert e.message == f"{out} is a folder envkit did not write (no .envkit-output): {shown} and 4 more; refusing to replace it"


def test_claim_the_marker_itself_is_never_theirs(tmp_path):
    out = tmp_path / "out"
    owned(out, {})
    assert fsutil.claim_output(out, KIND).theirs == {}


def test_claim_pending_entries_after_a_killed_commit(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"old", "b.txt": b"b"}, pending={"a.txt": b"new", "c.txt": b"c"})
    (out / "a.txt").write_bytes(b"new")
    (out / "c.txt").write_bytes(b"c")
    c = fsutil.claim_output(out, KIND)
    assert c.ours == {"a.txt": entry("a.txt", b"new"), "b.txt": entry("b.txt", b"b"), "c.txt": entry("c.txt", b"c")}
    (out / "a.txt").write_bytes(b"old")
    assert fsutil.claim_output(out, KIND).ours["a.txt"] == entry("a.txt", b"old")
    (out / "a.txt").write_bytes(b"neither")
    assert fsutil.claim_output(out, KIND, force=True).theirs == {"a.txt": "changed since envkit wrote it"}


def test_claim_too_many_files(tmp_path, monkeypatch):
    monkeypatch.setattr(fsutil, "MAX_FILES", 3)
    out = tmp_path / "out"
    owned(out, {"a": b"a", "b": b"b"})  # with the marker: 3 entries
    assert set(fsutil.claim_output(out, KIND).ours) == {"a", "b"}
    (out / "c").write_text("c")
    for force in (None, True):
        e = refusal(BadInput, fsutil.claim_output, out, KIND, force=force)
        assert (e.message, e.where, e.hint) == (
            f"{out} holds more than 3 files: refusing to write the launch set there",
            Where(str(out)),
            HINT,
        )


def test_claim_cannot_look_into(tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    real = os.scandir

    def scandir(p="."):
        if str(p) == str(out / "sub"):
            raise PermissionError(errno.EACCES, "Permission denied", str(p))
        return real(p)

    monkeypatch.setattr(fsutil.os, "scandir", scandir)
    e = refusal(CannotRun, fsutil.claim_output, out, KIND)
    assert (e.message, e.where, e.hint) == (f"cannot look into {out}: Permission denied", Where(str(out)), None)


def test_claim_keeps_inputs_inside(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a"})
    (out / "hosts.ini").write_text("[a]\n")
    (out / "conf" / "deep").mkdir(parents=True)
    (out / "conf" / "deep" / "n0.conf").write_text("x")
    elsewhere = tmp_path / "lock"
    elsewhere.write_text("lock")
    os.link(elsewhere, out / "lock.hard")
    (out / "a.txt").write_text("a")  # listed, and an input too
    c = fsutil.claim_output(out, KIND, inputs=[out / "hosts.ini", out / "conf", elsewhere, out / "a.txt"])
    assert c.theirs == {} and c.ours == {"a.txt": entry("a.txt", b"a")}
    assert sorted(c.inputs_inside) == ["a.txt", "conf/deep/n0.conf", "hosts.ini", "lock.hard"]
    # an input folder matched by inode, not by path (named through a link)
    (tmp_path / "conf-link").symlink_to(out / "conf")
    c = fsutil.claim_output(out, KIND, inputs=[tmp_path / "conf-link", out / "hosts.ini", elsewhere])
    assert sorted(c.inputs_inside) == ["conf/deep/n0.conf", "hosts.ini", "lock.hard"] and c.theirs == {}


def test_claim_written_by_this_run_is_not_theirs(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a"})
    (out / "logs").mkdir()
    (out / "logs" / "x.log").write_text("x")
    (out / "log.txt").write_text("x")
    (out / "logs2").write_text("x")
    c = fsutil.claim_output(out, KIND, written=("logs", "log.txt"), force=True)
    assert c.theirs == {"logs2": "not written by envkit"}
    e = refusal(BadInput, fsutil.claim_output, out, KIND, written=("../x",))
    assert (e.message, e.where) == ("'../x' is not a plain relative path: refusing to write it", Where(str(out)))


def test_claim_debris_of_a_listed_file(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "d/b.txt": b"b"})
    debris = [f"..envkit-output.{DEAD}-z.tmp", f".a.txt.{DEAD}-x.tmp", f"d/.b.txt.{DEAD}-y.tmp"]
    for n in debris:
        (out / n).write_text("half")
    (out / f".mine.{DEAD}-x.tmp").write_text("not envkit's")
    (out / f"d/.a.txt.{DEAD}-x.tmp").write_text("not envkit's: a.txt is listed at the top only")
    e = refusal(BadInput, fsutil.claim_output, out, KIND)
    assert e.message == (
        f"{out} holds files envkit did not write or that were changed since: .mine.{DEAD}-x.tmp (not written by envkit), "
        f"d/.a.txt.{DEAD}-x.tmp (not written by envkit); refusing to replace it"
    )
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.tmp")) == sorted(
        [*debris, f".mine.{DEAD}-x.tmp", f"d/.a.txt.{DEAD}-x.tmp"]
    )  # refused: nothing removed
    (out / f".mine.{DEAD}-x.tmp").unlink()
    (out / f"d/.a.txt.{DEAD}-x.tmp").unlink()
    c = fsutil.claim_output(out, KIND)
    assert c.theirs == {} and list(out.rglob("*.tmp")) == []


def test_claim_refuses_while_another_run_writes(tmp_path, live):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a"})
    (out / f".a.txt.{live}-x.tmp").write_text("half")
    e = refusal(CannotRun, fsutil.claim_output, out, KIND, force=True)
    assert (e.message, e.where, e.hint) == (
        f"{out} is being written by another envkit run (process {live}): .a.txt.{live}-x.tmp",
        Where(str(out)),
        "Wait for it to end, or choose another output path.",
    )


# --- the marker of an earlier envkit -------------------------------------------------------------------------
def test_legacy_take_over(tmp_path):
    out = tmp_path / "out"
    (out / "hosts" / "n0").mkdir(parents=True)
    (out / M).write_text("launch-set\n")
    (out / "rank_table.json").write_text("old")
    (out / "hosts" / "n0" / "torchrun.sh").write_text("sh")
    (out / f".launch.json.{DEAD}-x.tmp").write_text("half")
    (out / "in.ini").write_text("input")
    c = fsutil.claim_output(out, KIND, inputs=[out / "in.ini"])
    assert c.ours == {
        "rank_table.json": entry("rank_table.json", b"old"),
        "hosts/n0/torchrun.sh": entry("hosts/n0/torchrun.sh", b"sh"),
    }
    assert c.theirs == {} and c.inputs_inside == ["in.ini"]
    assert not (out / f".launch.json.{DEAD}-x.tmp").exists()


def test_legacy_beside_other_files_owns_nothing(tmp_path, live):
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_text("launch-set\n")
    (out / "rank_table.json").write_text("old")
    (out / "launch.json").symlink_to(tmp_path)  # a link with a legacy name is no legacy file
    (out / f".x.{live}-x.tmp").write_text("a live run's")
    for force, tail in ((None, ""), (True, " --force writes beside them, never replacing or deleting one.")):
        if force:
            c = fsutil.claim_output(out, KIND, force=True)
            assert c.ours == {}
            assert c.theirs == {
                f".x.{live}-x.tmp": "not written by envkit",
                "launch.json": "not written by envkit",
                "rank_table.json": "not known to be envkit's (a marker of an earlier envkit, no file list)",
            }
            continue
        e = refusal(BadInput, fsutil.claim_output, out, KIND, force=force)
        assert (e.message, e.hint) == (
            f"{out} holds the marker of an earlier envkit (no file list) and files it would not have written there: "
            f".x.{live}-x.tmp (not written by envkit), launch.json (not written by envkit), "
            "rank_table.json (not known to be envkit's (a marker of an earlier envkit, no file list)); refusing to replace it",
            f"Move them out of {out}, or choose another output path." + tail,
        )


def test_legacy_unreadable_file_and_hardlinked_input(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_text("image-context\n")
    (out / "Dockerfile").write_text("FROM x\n")
    (out / "envkit.lock").write_text("lock")
    elsewhere = tmp_path / "in"
    elsewhere.write_text("in")
    os.link(elsewhere, out / "hard")
    real = fsutil._entry_of
    monkeypatch.setattr(fsutil, "_entry_of", lambda full, rel: None if rel == "envkit.lock" else real(full, rel))
    c = fsutil.claim_output(out, fsutil.IMAGE_CONTEXT, inputs=[elsewhere], force=True)
    assert c.inputs_inside == ["hard"]
    assert c.theirs == {
        "Dockerfile": "not known to be envkit's (a marker of an earlier envkit, no file list)",
        "envkit.lock": "cannot be read",
    }


def test_a_legacy_marker_of_a_kind_without_legacy_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_text("smoke-run\n")
    assert fsutil.claim_output(out, fsutil.SMOKE).ours == {}
    (out / "rank_table.json").write_text("x")
    (out / f".rank_table.json.{DEAD}-x.tmp").write_text("x")
    c = fsutil.claim_output(out, fsutil.SMOKE, force=True)
    assert c.ours == {} and set(c.theirs) == {"rank_table.json", f".rank_table.json.{DEAD}-x.tmp"}


def test_no_marker_is_no_legacy(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "Dockerfile").write_text("FROM x\n")
    e = refusal(BadInput, fsutil.claim_output, out, fsutil.IMAGE_CONTEXT)
    assert e.message == (
        f"{out} is a folder envkit did not write (no .envkit-output): Dockerfile (not written by envkit); refusing to replace it"
    )


# --- a bundle: its own listing, replaced whole -------------------------------------------------------------
def test_bundle_listing(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "install.sh").write_text("sh")
    seen = []

    def listing(p):
        seen.append(p)
        return {"install.sh": entry("install.sh", b"sh")}

    c = fsutil.claim_output(out, fsutil.BUNDLE, listing=listing)
    assert seen == [out] and c.ours == {"install.sh": entry("install.sh", b"sh")}
    (out / M).write_text("launch-set\n")  # a marker in a bundle is no bundle file
    e = refusal(BadInput, fsutil.claim_output, out, fsutil.BUNDLE, listing=listing, force=True)
    assert (e.message, e.hint) == (
        f"{out} holds files envkit did not write or that were changed since: .envkit-output (not written by envkit); "
        "refusing to replace it",
        f"Move them out of {out}, or choose another output path. --force cannot help: the bundle is replaced whole.",
    )
    (out / M).unlink()
    e = refusal(BadInput, fsutil.claim_output, out, fsutil.BUNDLE, listing=lambda p: None)
    assert e.message == (
        f"{out} is a folder envkit did not write (no bundle manifest.json): install.sh (not written by envkit); refusing to replace it"
    )
    e = refusal(BadInput, fsutil.claim_output, out, fsutil.BUNDLE, listing=listing, inputs=[out / "install.sh"], force=True)
    assert (e.message, e.where, e.hint) == (
        f"{out} holds inputs of this command (install.sh), and the bundle there is replaced whole: refusing to replace it",
        Where(str(out)),
        f"Move the inputs out of {out}, or choose another output path.",
    )


# --- the writer ------------------------------------------------------------------------------------------------
def test_writer_refuses_paths_it_never_writes(tmp_path):
    out = tmp_path / "out"
    w = fsutil.claim_output(out, KIND).writer()
    assert w.claim.path == out
    for rel in (M, M + "/x", "a//b", "./a", "a/"):
        e = refusal(BadInput, w.bytes, rel, b"x")
        assert (e.message, e.where, e.hint) == (f"{rel!r} is not a path envkit writes into an output", Where(str(out)), None)
    e = refusal(BadInput, w.bytes, "../a", b"x")
    assert (e.message, e.where) == ("'../a' is not a plain relative path: refusing to write it", Where(str(out)))
    w.bytes("x/.envkit-output", b"x")
    assert list(w.plan) == ["x/.envkit-output"]


def test_commit_writes_lists_and_returns(tmp_path):
    out = tmp_path / "new" / "out"
    c = fsutil.claim_output(out, KIND)
    w = c.writer()
    w.text("b/c.txt", "ç")
    w.bytes("a.bin", b"a", 0o600)
    w.bytes("z.bin", b"z")
    w.bytes("zero.bin", b"0", 0)  # mode 0: the default mode
    w.symlink("ln", Path("/some/where"))
    got = w.commit()
    assert got == [out / "a.bin", out / "b/c.txt", out / "ln", out / "z.bin", out / "zero.bin"]
    assert tree(out) == {
        M: fsutil.Manifest(KIND, {e["path"]: e for e in c.ours.values()}).to_bytes(),
        "a.bin": b"a",
        "b/c.txt": "ç".encode(),
        "ln": "-> /some/where",
        "z.bin": b"z",
        "zero.bin": b"0",
    }
    assert [mode_of(out / n) for n in ("a.bin", "b/c.txt", "z.bin", "zero.bin")] == [0o600, 0o644, 0o644, 0o644]
    files = {
        "a.bin": entry("a.bin", b"a"),
        "b/c.txt": entry("b/c.txt", "ç".encode()),
        "ln": {"path": "ln", "link": "/some/where"},
        "z.bin": entry("z.bin", b"z"),
        "zero.bin": entry("zero.bin", b"0"),
    }
    assert listed(out) == {"envkit_output": 1, "kind": KIND, "files": [files[k] for k in sorted(files)]}
    assert c.ours == files and c.theirs == {}
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["out"]


def test_text_and_bytes_default_mode(tmp_path):
    out = tmp_path / "out"
    w = fsutil.claim_output(out, KIND).writer()
    w.text("t", "t")
    w.text("u", "u", 0o600)
    w.commit()
    assert (mode_of(out / "t"), mode_of(out / "u")) == (0o644, 0o600)


def test_commit_replaces_unchanged_and_removes_stale_pruning_folders(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "d/e/old.txt": b"o", "d/keep/k.txt": b"k", "l": b"l"})
    (out / "l").unlink()
    (out / "l").symlink_to("a.txt")
    (out / M).write_bytes(
        manifest(entry("a.txt", b"a"), entry("d/e/old.txt", b"o"), entry("d/keep/k.txt", b"k"), {"path": "l", "link": "a.txt"})
    )
    c = fsutil.claim_output(out, KIND)
    w = c.writer()
    w.bytes("a.txt", b"A")
    w.bytes("d/keep/k.txt", b"K")
    w.symlink("l", "d")
    w.commit()
    assert tree(out) | {M: b""} == {M: b"", "a.txt": b"A", "d/keep/k.txt": b"K", "l": "-> d"}
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_dir() and not p.is_symlink()) == ["d", "d/keep"]


def test_commit_keeps_a_stale_file_changed_meanwhile(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "b.txt": b"b"})
    c = fsutil.claim_output(out, KIND)
    (out / "b.txt").write_text("changed after the claim")
    w = c.writer()
    w.bytes("a.txt", b"A")
    w.commit()
    assert (out / "b.txt").read_text() == "changed after the claim"
    assert [f["path"] for f in listed(out)["files"]] == ["a.txt"]


def test_commit_a_listed_file_may_become_a_folder(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a": b"file"})
    w = fsutil.claim_output(out, KIND).writer()
    w.bytes("a/b", b"b")
    w.commit()
    assert tree(out) | {M: b""} == {M: b"", "a/b": b"b"}


def test_commit_refusals_list_each_problem(tmp_path):
    out = tmp_path / "out"
    owned(out, {"ok.txt": b"ok"})
    (out / "f").write_text("user's file")
    (out / "dir").mkdir()
    (out / "in").symlink_to("dir")
    (out / "dir" / "sub").mkdir()
    (out / "dir" / "deep").symlink_to(tmp_path)
    (out / "up").symlink_to(tmp_path)
    c = fsutil.claim_output(out, KIND, force=True)
    w = c.writer()
    w.bytes("ok.txt", b"OK")
    w.bytes("up/x", b"x")
    w.bytes("in/x", b"x")
    w.bytes("dir/deep/x", b"x")
    w.bytes("f/x", b"x")
    w.bytes("dir", b"x")
    w.bytes("f", b"x")
    w.bytes("dir/sub/new.txt", b"x")  # into a real folder: fine
    before = tree(out)
    e = refusal(BadInput, w.commit)
    problems = [
        "up/x: up is a symbolic link on the way (it leads outside the output)",
        "in/x: in is a symbolic link on the way",
        "dir/deep/x: dir/deep is a symbolic link on the way (it leads outside the output)",
        "f/x: f is a file where envkit writes a folder",
        "dir is a folder where envkit writes a file",
        "f (not written by envkit): --force never replaces a file envkit did not write",
    ]
    assert (e.message, e.where, e.hint) == (
        f"{out}: refusing to write the launch set: {', '.join(problems)}",
        Where(str(out)),
        f"Move these out of {out}, or choose another output path.",
    )
    assert tree(out) == before


def test_commit_a_file_appearing_after_the_claim(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a": b"a"})
    (out / "b").write_text("changed")
    c = fsutil.claim_output(out, KIND, force=True)
    (out / "new").write_text("appeared after the claim")
    (out / "b").unlink()
    w = c.writer()
    w.bytes("new", b"x")
    e = refusal(BadInput, w.commit)
    assert (
        e.message
        == f"{out}: refusing to write the launch set: new (not written by envkit): --force never replaces a file envkit did not write"
    )
    w = c.writer()
    w.bytes("b", b"B")  # the user's changed file was removed meanwhile: written, and no longer theirs
    w.bytes("a", b"a")
    w.commit()
    assert c.theirs == {} and (out / "b").read_bytes() == b"B"


def test_commit_inputs_inside_are_kept(tmp_path):
    out = tmp_path / "out"
    owned(out, {"same.txt": b"same", "stale.txt": b"s"})
    (out / "in.txt").write_text("input")
    elsewhere = tmp_path / "lock"
    elsewhere.write_text("lock")
    os.link(elsewhere, out / "hard")
    inputs = [out / "in.txt", elsewhere, out / "same.txt", out / "stale.txt"]
    c = fsutil.claim_output(out, KIND, inputs=inputs)
    ino = os.stat(out / "same.txt").st_ino
    w = c.writer()
    w.bytes("in.txt", b"input")  # the same content: left as it is, not listed
    w.bytes("hard", b"lock")
    w.bytes("same.txt", b"same")  # listed before: still listed
    w.bytes("new.txt", b"n")
    assert w.commit() == [out / "hard", out / "in.txt", out / "new.txt", out / "same.txt"]
    assert os.stat(out / "same.txt").st_ino == ino and os.path.samefile(out / "hard", elsewhere)
    assert (out / "stale.txt").read_bytes() == b"s"  # stale but an input: kept, unlisted
    assert [f["path"] for f in listed(out)["files"]] == ["new.txt", "same.txt"]
    c = fsutil.claim_output(out, KIND, inputs=inputs)
    w = c.writer()
    w.bytes("in.txt", b"other")
    w.bytes("hard", b"other")
    e = refusal(BadInput, w.commit)
    assert e.message == (
        f"{out}: refusing to write the launch set: in.txt is an input of this command, where envkit writes another file, "
        "hard is an input of this command, where envkit writes another file"
    )


def test_commit_a_hard_linked_input_listed_before_is_replaced(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a": b"a"})
    os.link(out / "a", tmp_path / "elsewhere")
    c = fsutil.claim_output(out, KIND, inputs=[tmp_path / "elsewhere"])
    assert c.ours == {"a": entry("a", b"a")} and c.inputs_inside == []
    w = c.writer()
    w.bytes("a", b"A")
    w.commit()
    assert (out / "a").read_bytes() == b"A" and (tmp_path / "elsewhere").read_bytes() == b"a"
    c = fsutil.claim_output(out, KIND, inputs=[tmp_path / "elsewhere"])
    c.writer().commit()  # listed before, now stale: removed (the input is another file now)
    assert sorted(p.name for p in out.iterdir()) == [M]


def test_commit_killed_half_way_leaves_pending(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a"})
    src = tmp_path / "src.bin"
    src.write_bytes(b"big")
    c = fsutil.claim_output(out, KIND)
    w = c.writer()
    w.bytes("a.txt", b"A")
    w.copy("z.bin", src)
    src.unlink()  # gone before the commit copies it
    e = refusal(CannotRun, w.commit)
    assert (e.message, e.where, e.hint) == (
        f"cannot write {out}: No such file or directory ({src})",
        Where(str(out)),
        "Choose a writable output path with room for it.",
    )
    assert (out / "a.txt").read_bytes() == b"A"
    assert listed(out) == {
        "envkit_output": 1,
        "kind": KIND,
        "files": [entry("a.txt", b"a")],
        "pending": [entry("a.txt", b"A"), entry("z.bin", b"big")],
    }
    assert set(fsutil.claim_output(out, KIND).ours) == {"a.txt"}


def test_commit_keep_and_drop(tmp_path):
    out = tmp_path / "out"
    owned(out, {"a": b"a", "b": b"b", "c": b"c"})
    c = fsutil.claim_output(out, KIND)
    w = c.writer()
    w.bytes("n", b"n")
    w.remove("b")
    w.commit(keep=True)
    assert tree(out) | {M: b""} == {M: b"", "a": b"a", "c": b"c", "n": b"n"}
    assert [f["path"] for f in listed(out)["files"]] == ["a", "c", "n"] and set(c.ours) == {"a", "c", "n"}


def test_commit_cannot_make_the_folder(tmp_path):
    out = tmp_path / "p" / "out"
    c = fsutil.claim_output(out, KIND)
    (tmp_path / "p").write_text("a file now")  # after the claim
    e = refusal(CannotRun, c.writer().commit)
    assert (e.message, e.where, e.hint) == (
        f"cannot write {out}: Not a directory",
        Where(str(out)),
        "Choose a writable output path with room for it.",
    )


def test_commit_a_folder_on_the_way_became_a_file(tmp_path):
    out = tmp_path / "p" / "out"
    c = fsutil.claim_output(out, KIND)
    (tmp_path / "p").write_text("a file now")
    w = c.writer()
    w.bytes("a", b"a")
    e = refusal(CannotRun, w.commit)
    assert (e.message, e.where) == (f"cannot write {out}: Not a directory", Where(str(out)))


def test_copy_and_staged_refusals(tmp_path):
    out = tmp_path / "out"
    c = fsutil.claim_output(out, KIND)
    w = c.writer()
    (tmp_path / "d").mkdir()
    for source in (tmp_path / "d", tmp_path / "missing"):
        e = refusal(CannotRun, w.copy, "x", source)
        assert (e.message, e.where, e.hint) == (f"cannot read {source}: not a regular file", Where(str(source)), None)
    (tmp_path / "f").write_text("f")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    w.copy("via-link", tmp_path / "l")  # resolved: the file's content
    assert w.plan["via-link"].entry == entry("via-link", b"f") and w.plan["via-link"].source == tmp_path / "f"
    for p in (tmp_path / "l", tmp_path / "missing", tmp_path / "d"):
        e = refusal(CannotRun, w.staged, "y", p)
        assert (e.message, e.where, e.hint) == (f"{p} is not a regular file: it cannot be moved into {out}", None, None)


def test_copy_and_staged_into_place(tmp_path):
    out = tmp_path / "out"
    c = fsutil.claim_output(out, KIND)
    src = tmp_path / "src"
    src.write_bytes(b"src")
    with c.staging() as stage:
        (stage / "s1").write_bytes(b"s1")
        (stage / "s2").write_bytes(b"s2")
        w = c.writer()
        w.copy("c/copied", src)
        w.staged("s/one", stage / "s1")
        w.staged("s/two", stage / "s2", 0o600)
        w.commit()
        assert sorted(p.name for p in stage.iterdir()) == []  # moved, not copied
    assert os.path.samefile(out / "c/copied", src)
    assert (out / "s/one").read_bytes() == b"s1" and mode_of(out / "s/one") == 0o644
    assert (out / "s/two").read_bytes() == b"s2" and mode_of(out / "s/two") == 0o600


def test_move_across_file_systems(tmp_path, monkeypatch):
    real = os.replace
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.write_bytes(b"data")

    def across(a, b):
        if Path(a) == src:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(a, b)

    monkeypatch.setattr(fsutil.os, "replace", across)
    fsutil._move(src, dest, 0o600)
    assert dest.read_bytes() == b"data" and mode_of(dest) == 0o600

    def denied(a, b):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(fsutil.os, "replace", denied)
    with pytest.raises(PermissionError):
        fsutil._move(src, tmp_path / "other", 0o644)
    assert not (tmp_path / "other").exists()


def test_move_in_place(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.write_bytes(b"data")
    fsutil._move(src, dest, 0o640)
    assert not src.exists() and dest.read_bytes() == b"data" and mode_of(dest) == 0o640


# --- adopt ---------------------------------------------------------------------------------------------------
def test_adopt_and_adopt_tree(tmp_path):
    out = tmp_path / "out"
    owned(out, {"r.json": b"{}"})
    (out / "log").write_text("log")
    (out / "view" / "deep").mkdir(parents=True)
    (out / "view" / "deep" / "w").write_text("w")
    (out / "view" / "ln").symlink_to(tmp_path)
    (out / "linked").symlink_to(out / "view")
    (out / "mine").write_text("mine")
    c = fsutil.claim_output(out, KIND, written=("log", "view", "linked"), force=True)
    assert c.theirs == {"mine": "not written by envkit"}
    w = c.writer()
    for rel in ("log", "view", "linked", "mine", "missing"):
        w.adopt(rel)
        w.adopt_tree(rel)
    assert sorted(w.plan) == ["linked", "log", "missing", "view", "view/deep/w", "view/ln"]
    w.commit(keep=True)
    assert listed(out)["files"] == [
        {"path": "linked", "link": str(out / "view")},
        entry("log", b"log"),
        entry("r.json", b"{}"),
        entry("view/deep/w", b"w"),
        {"path": "view/ln", "link": str(tmp_path)},
    ]
    e = refusal(BadInput, w.adopt_tree, "../x")
    assert e.where == Where(str(out))


def test_adopt_skips_inputs_inside(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "in").write_text("in")
    c = fsutil.claim_output(out, KIND, inputs=[out / "in"])
    w = c.writer()
    w.adopt("in")
    assert w.plan == {}


# --- write_output, update_output, replace_file -------------------------------------------------------------
def test_write_output_modes_contents_and_force(tmp_path):
    out = tmp_path / "out"
    got = fsutil.write_output(out, KIND, {"run.sh": "#!/bin/sh\n", "b.bin": b"\x00", "t.txt": "é", "x.SH": "x"})
    assert got == [out / "b.bin", out / "run.sh", out / "t.txt", out / "x.SH"]
    assert [mode_of(out / n) for n in ("run.sh", "b.bin", "t.txt", "x.SH")] == [0o755, 0o644, 0o644, 0o644]
    assert (out / "t.txt").read_bytes() == "é".encode()
    (out / "mine").write_text("mine")
    with pytest.raises(BadInput):
        fsutil.write_output(out, KIND, {"t.txt": "e"})
    fsutil.write_output(out, KIND, {"t.txt": "e"}, force=True)
    assert tree(out) | {M: b""} == {M: b"", "mine": b"mine", "t.txt": b"e"}
    (out / "in").write_text("in")
    fsutil.write_output(out, KIND, {"t.txt": "e"}, force=True, inputs=[out / "in"])
    assert (out / "in").read_text() == "in"
    fsutil.write_output(out, KIND, {"in": "in"}, force=True, inputs=[out / "in"])
    assert [f["path"] for f in listed(out)["files"]] == []  # an input with the same content: kept, unlisted


def test_update_output_keeps_and_adopts(tmp_path):
    out = tmp_path / "out"
    fsutil.write_output(out, KIND, {"a": "a", "b": "b"})
    (out / "logs").mkdir()
    (out / "logs" / "x.log").write_text("x")
    (out / "in").write_text("in")
    got = fsutil.update_output(out, KIND, {"b": "B", "c": "ç"}, adopt=["logs"], inputs=[out / "in"])
    assert got == [out / "b", out / "c", out / "logs/x.log"]
    assert [f["path"] for f in listed(out)["files"]] == ["a", "b", "c", "logs/x.log"]
    assert (out / "c").read_bytes() == "ç".encode() and mode_of(out / "c") == 0o644
    assert (out / "in").read_text() == "in"


def test_replace_file(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("old")
    p.chmod(0o640)
    fsutil.replace_file(p, b"new", was=b"old")
    assert p.read_bytes() == b"new" and mode_of(p) == 0o640
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(p)
    for target, was in ((p, b"old"), (p, b"nex"), (tmp_path / "l", b"new"), (tmp_path / "d", b""), (tmp_path / "missing", b"")):
        e = refusal(BadInput, fsutil.replace_file, target, b"x", was=was)
        assert (e.message, e.where, e.hint) == (
            f"{target} is not the regular file that was read (a link, or changed meanwhile): refusing to write it",
            Where(str(target)),
            "Pass the folder that holds the file itself, and run again.",
        )
    assert p.read_bytes() == b"new"


def test_update_output_writes_bytes_as_they_are(tmp_path):
    out = tmp_path / "out"
    fsutil.update_output(out, KIND, {"a.bin": b"\xff\x00", "b.txt": "é"})
    assert (out / "a.bin").read_bytes() == b"\xff\x00" and (out / "b.txt").read_bytes() == "é".encode()


def test_a_listed_file_that_became_an_input_after_the_claim_is_kept(tmp_path):
    """Between the claim and the commit, a listed file is replaced by a hard link to an input of the command (same
    bytes, so it looks unchanged): the commit still finds it an input by its inode and keeps it, unlisted."""
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "b.txt": b"b"})
    given = tmp_path / "given.txt"
    given.write_bytes(b"b")
    c = fsutil.claim_output(out, KIND, inputs=[given])
    assert c.inputs_inside == []  # not yet an input at the claim
    w = c.writer()
    w.bytes("a.txt", b"a2")
    (out / "b.txt").unlink()
    os.link(given, out / "b.txt")
    w.commit()
    assert (out / "b.txt").read_bytes() == b"b" and os.path.samefile(out / "b.txt", given)
    assert [e["path"] for e in json.loads((out / M).read_bytes())["files"]] == ["a.txt"]


def test_a_legacy_name_linked_to_a_file_is_no_legacy_file(tmp_path):
    """A link named like a legacy file is the user's, also when it leads to a regular file (never followed)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / M).write_text("launch-set\n")
    (tmp_path / "elsewhere.json").write_text("{}")
    (out / "launch.json").symlink_to(tmp_path / "elsewhere.json")
    c = fsutil.claim_output(out, KIND, force=True)
    assert c.ours == {} and c.theirs == {"launch.json": "not written by envkit"}


def test_a_forced_writer_keeps_each_files_own_reason(tmp_path):
    """A file envkit listed and the user edited: --force claims the folder, and writing that file is refused with its
    own reason (changed since envkit wrote it), not the generic one."""
    out = tmp_path / "out"
    owned(out, {"a.txt": b"a", "b.txt": b"b"})
    (out / "b.txt").write_text("edited")
    w = fsutil.claim_output(out, KIND, force=True).writer()
    w.bytes("b.txt", b"new")
    e = refusal(BadInput, w.commit)
    assert "b.txt (changed since envkit wrote it): --force never replaces a file envkit did not write" in e.message
    assert (out / "b.txt").read_text() == "edited"

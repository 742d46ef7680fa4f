"""The one atomic writer: devices and pipes are written in place, never replaced by a rename. Outputs owned by a
manifest: envkit replaces only what it wrote and finds unchanged, never an input, a user's file or anything outside."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import threading

import pytest

from envkit.errors import BadInput
from envkit.io.outputs import (
    IMAGE_CONTEXT,
    LAUNCH_SET,
    OUTPUT_MARKER,
    atomic_dir,
    atomic_stream,
    atomic_write_bytes,
    claim_output,
    parse_manifest,
    replace_file,
    update_output,
    write_output,
)


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_bytes(fifo, b"lock text\n")
    reader.join(timeout=10)
    assert got == [b"lock text\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file left beside it


def test_output_to_dev_null_keeps_dev_null_a_device(run_cli):
    r = run_cli("resolve", "-o", "/dev/null")
    assert r.code == 0, r.err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_failed_stream_leaves_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "bundle.tar"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_stream(out) as fh:
            fh.write(b"half")
            raise RuntimeError("killed")
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar"]
    with atomic_stream(out, 0o640) as fh:
        fh.write(b"new")
    assert out.read_bytes() == b"new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar"]


def test_a_folder_is_swapped_in_whole_or_not_at_all(tmp_path):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "new.txt").write_text("half")
            raise RuntimeError("killed")
    assert [p.name for p in out.iterdir()] == ["old.txt"] and [p.name for p in tmp_path.iterdir()] == ["bundle"]
    with atomic_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new.txt"] and [p.name for p in tmp_path.iterdir()] == ["bundle"]


# --- outputs owned by a manifest --------------------------------------------------------------------
KIND = LAUNCH_SET
DEAD = 4_000_000_000  # no process has this id


def _entry(path: str, data: bytes) -> dict:
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _manifest(*entries: dict, kind: str = KIND, **extra) -> bytes:
    return json.dumps({"envkit_output": 1, "kind": kind, "files": list(entries), **extra}).encode()


def _listed(folder) -> dict:
    return {f["path"]: f for f in json.loads((folder / OUTPUT_MARKER).read_text())["files"]}


def _tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


GOOD = {"path": "a.txt", "sha256": "0" * 64, "size": 1}


@pytest.mark.parametrize(
    "doc",
    [
        _manifest({**GOOD, "path": "../x"}),
        _manifest({**GOOD, "path": "/etc/passwd"}),
        _manifest({**GOOD, "path": "a/./b"}),
        _manifest({**GOOD, "path": "a//b"}),
        _manifest({**GOOD, "path": "a/"}),
        _manifest({**GOOD, "path": ""}),
        _manifest({**GOOD, "path": OUTPUT_MARKER}),
        _manifest({**GOOD, "path": "a\nb"}),
        _manifest({**GOOD, "sha256": "A" * 64}),
        _manifest({**GOOD, "size": True}),
        _manifest({**GOOD, "size": -1}),
        _manifest({**GOOD, "size": 1.0}),
        _manifest({**GOOD, "extra": 1}),
        _manifest({"path": "a.txt", "sha256": "0" * 64}),
        _manifest({**GOOD, "path": "b"}, {**GOOD, "path": "a"}),  # unsorted
        _manifest(GOOD, GOOD),  # twice
        _manifest({**GOOD, "path": "a"}, {**GOOD, "path": "a/b"}),  # a file and a folder
        _manifest(GOOD, kind="Launch Set"),
        _manifest(GOOD, other=1),
        json.dumps({"envkit_output": True, "kind": KIND, "files": []}).encode(),
        json.dumps({"envkit_output": 2, "kind": KIND, "files": []}).encode(),
        json.dumps({"envkit_output": 1, "kind": KIND}).encode(),
        b'{"envkit_output": 1, "kind": "launch-set", "kind": "bundle", "files": []}',
        b"\xff\xfe",
        b"launch-set",  # an old marker always ends in a newline
        b"[" * 100_000,
    ],
    # plain ids: one of brackets, quotes or bytes that are not UTF-8 cannot be named back on a command line (mutmut)
    ids=lambda d: re.sub(r"[^A-Za-z0-9_.-]+", "_", d[:60].decode("utf-8", "replace")),
)
def test_a_manifest_is_parsed_strictly_and_a_bad_one_owns_nothing(tmp_path, doc):
    with pytest.raises((ValueError, RecursionError)):
        parse_manifest(doc)
    out = tmp_path / "out"
    out.mkdir()
    (out / OUTPUT_MARKER).write_bytes(doc)
    (out / "a.txt").write_text("x")
    with pytest.raises(BadInput, match="is a folder envkit did not write .*not a valid manifest.*refusing"):
        claim_output(out, KIND)
    assert (out / "a.txt").read_text() == "x"


def test_a_manifest_over_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    from envkit.io import outputs as fsutil

    out = tmp_path / "out"
    write_output(out, KIND, {"a.txt": "a"})
    monkeypatch.setattr(fsutil, "MAX_MANIFEST", 10)
    with pytest.raises(BadInput, match="larger than 10 bytes"):
        claim_output(out, KIND)


def test_an_output_is_written_listed_and_rewritten_to_the_same_bytes(tmp_path):
    out = tmp_path / "out"
    write_output(out, KIND, {"b/c.txt": "c", "a.sh": "#!/bin/sh\n"})
    first = _tree(out)
    assert _listed(out) == {"a.sh": _entry("a.sh", b"#!/bin/sh\n"), "b/c.txt": _entry("b/c.txt", b"c")}
    assert os.stat(out / "a.sh").st_mode & 0o777 == 0o755
    write_output(out, KIND, {"b/c.txt": "c", "a.sh": "#!/bin/sh\n"})
    assert _tree(out) == first  # idempotent, the manifest included
    # a file no longer written goes, with the folder it leaves empty
    write_output(out, KIND, {"a.sh": "#!/bin/sh\n"})
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "a.sh"]


def test_a_file_the_user_added_or_changed_is_never_deleted(tmp_path):
    out = tmp_path / "out"
    write_output(out, KIND, {"a.txt": "a", "b.txt": "b"})
    (out / "mine.txt").write_text("mine")
    (out / "b.txt").write_text("edited")
    with pytest.raises(BadInput) as exc:
        write_output(out, KIND, {"a.txt": "A"})
    assert "b.txt (changed since envkit wrote it)" in str(exc.value) and "mine.txt (not written by envkit)" in str(exc.value)
    assert "refusing to replace it" in str(exc.value)
    assert _tree(out)["a.txt"] == b"a"  # nothing written
    # --force writes beside them: never replacing one, never deleting one
    with pytest.raises(BadInput, match="b.txt .*--force never replaces a file envkit did not write"):
        write_output(out, KIND, {"a.txt": "A", "b.txt": "B"}, force=True)
    assert _tree(out)["b.txt"] == b"edited" and _tree(out)["a.txt"] == b"a"
    write_output(out, KIND, {"a.txt": "A"}, force=True)  # b.txt is stale but the user's now: kept, unlisted
    assert _tree(out) | {OUTPUT_MARKER: b""} == {"a.txt": b"A", "b.txt": b"edited", "mine.txt": b"mine", OUTPUT_MARKER: b""}
    assert set(_listed(out)) == {"a.txt"}


def test_inputs_inside_the_output_are_kept_by_path_and_by_inode(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "hosts.ini").write_text("[a]\n")
    (out / "conf").mkdir()
    (out / "conf" / "node0.conf").write_text("address_0=1.2.3.4\n")
    elsewhere = tmp_path / "lock"
    elsewhere.write_text("lock")
    os.link(elsewhere, out / "lock.hardlink")
    inputs = [out / "hosts.ini", out / "conf", elsewhere]
    for _ in range(2):
        write_output(out, KIND, {"rank_table.json": "{}"}, inputs=inputs)
    assert _tree(out)["hosts.ini"] == b"[a]\n" and (out / "conf" / "node0.conf").is_file()
    assert os.path.samefile(out / "lock.hardlink", elsewhere)
    assert set(_listed(out)) == {"rank_table.json"}
    # without them named, they are the user's files: refused
    with pytest.raises(BadInput, match="hosts.ini"):
        write_output(out, KIND, {"rank_table.json": "{}"})
    # an input where envkit writes another file: refused, untouched
    with pytest.raises(BadInput, match="hosts.ini is an input of this command"):
        write_output(out, KIND, {"hosts.ini": "other"}, inputs=inputs)
    assert _tree(out)["hosts.ini"] == b"[a]\n"


def test_a_planted_manifest_deletes_nothing_outside_nor_anything_changed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "x.txt").write_text("user's")
    for planted in (
        _manifest(_entry("../victim.txt", b"precious")),
        _manifest(_entry(str(victim), b"precious")),
        _manifest(_entry("x.txt", b"what envkit would have written")),
    ):
        (out / OUTPUT_MARKER).write_bytes(planted)
        with pytest.raises(BadInput, match="refusing to replace it"):
            write_output(out, KIND, {"x.txt": "envkit"})
        with pytest.raises(BadInput):
            write_output(out, KIND, {"x.txt": "envkit"}, force=True)
    assert victim.read_text() == "precious" and (out / "x.txt").read_text() == "user's"


def test_a_link_in_place_of_a_listed_file_is_never_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    out = tmp_path / "out"
    write_output(out, KIND, {"a.txt": "a", "d/b.txt": "b"})
    (out / "a.txt").unlink()
    (out / "a.txt").symlink_to(outside)
    with pytest.raises(BadInput, match=r"a.txt \(changed since envkit wrote it\)"):
        write_output(out, KIND, {"a.txt": "A"})
    with pytest.raises(BadInput, match="--force never replaces"):
        write_output(out, KIND, {"a.txt": "A"}, force=True)
    # a link on the way (a listed file's folder) is refused too, and nothing is written through it
    (out / "a.txt").unlink()
    shutil.rmtree(out / "d")
    (out / "d").symlink_to(tmp_path)
    with pytest.raises(BadInput, match="d is a symbolic link on the way .*leads outside"):
        write_output(out, KIND, {"d/b.txt": "B", "d/outside.txt": "x"}, force=True)
    assert outside.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["out", "outside.txt"]


def test_another_kind_or_a_file_in_the_place_is_refused_even_forced(tmp_path):
    out = tmp_path / "out"
    write_output(out, IMAGE_CONTEXT, {"Dockerfile": "FROM x\n"})
    for force in (False, True):
        with pytest.raises(BadInput, match="is an envkit image build context, not a launch set"):
            write_output(out, KIND, {"a": "a"}, force=force)
    f = tmp_path / "file"
    f.write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(out)
    for where, what in ((f, "a file"), (link, "a symbolic link")):
        with pytest.raises(BadInput, match=f"is {what}, where the launch set folder goes"):
            write_output(where, KIND, {"a": "a"}, force=True)
    assert f.read_text() == "mine" and link.is_symlink()


def test_an_earlier_envkit_marker_is_taken_over_only_alone_with_its_kinds_files(tmp_path):
    out = tmp_path / "out"
    (out / "hosts" / "n0").mkdir(parents=True)
    (out / OUTPUT_MARKER).write_text("launch-set\n")
    (out / "rank_table.json").write_text("old")
    (out / "hosts" / "n0" / "torchrun.sh").write_text("old")
    write_output(out, KIND, {"rank_table.json": "new"})  # taken over: the old files replaced or removed
    assert _tree(out) | {OUTPUT_MARKER: b""} == {"rank_table.json": b"new", OUTPUT_MARKER: b""}
    # beside a file the kind never held: nothing is taken for envkit's
    (out / OUTPUT_MARKER).write_text("launch-set\n")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BadInput) as exc:
        write_output(out, KIND, {"rank_table.json": "newer"})
    assert "earlier envkit" in str(exc.value) and "notes.txt" in str(exc.value) and "rank_table.json" in str(exc.value)
    with pytest.raises(BadInput, match="--force never replaces"):
        write_output(out, KIND, {"rank_table.json": "newer"}, force=True)
    assert (out / "rank_table.json").read_text() == "new"
    # the marker of another kind
    (out / "notes.txt").unlink()
    (out / OUTPUT_MARKER).write_text("image-context\n")
    with pytest.raises(BadInput, match="is an envkit image build context"):
        write_output(out, KIND, {"rank_table.json": "newer"})


def test_a_run_killed_half_way_leaves_a_folder_still_ours(tmp_path, monkeypatch):
    from envkit.io import outputs as fsutil

    out = tmp_path / "out"
    write_output(out, KIND, {"a.txt": "a", "b.txt": "b"})
    real = fsutil.atomic_write_bytes
    calls = []

    def dies_on_the_second_file(path, data, mode=0o644, *, fsync=True):
        calls.append(path.name)
        if path.name == "b.txt":
            (path.parent / f".b.txt.{DEAD}-x.tmp").write_bytes(b"half")  # what a kill leaves
            raise KeyboardInterrupt
        real(path, data, mode, fsync=fsync)

    monkeypatch.setattr(fsutil, "atomic_write_bytes", dies_on_the_second_file)
    with pytest.raises(KeyboardInterrupt):
        write_output(out, KIND, {"a.txt": "A", "b.txt": "B"})
    monkeypatch.setattr(fsutil, "atomic_write_bytes", real)
    assert (out / "a.txt").read_text() == "A" and (out / "b.txt").read_text() == "b"
    claim = claim_output(out, KIND)  # the new a.txt is listed as pending, the old b.txt as written; debris goes
    assert set(claim.ours) == {"a.txt", "b.txt"} and not claim.theirs
    assert not (out / f".b.txt.{DEAD}-x.tmp").exists()
    write_output(out, KIND, {"a.txt": "A", "b.txt": "B"})
    assert "pending" not in json.loads((out / OUTPUT_MARKER).read_text())
    # debris of a file envkit never listed is not envkit's to remove
    (out / f".mine.{DEAD}-x.tmp").write_text("mine")
    with pytest.raises(BadInput, match=f".mine.{DEAD}-x.tmp"):
        claim_output(out, KIND)


def test_too_many_files_are_refused_before_any_is_read(tmp_path, monkeypatch):
    from envkit.io import outputs as fsutil

    monkeypatch.setattr(fsutil, "MAX_FILES", 3)
    out = tmp_path / "out"
    out.mkdir()
    for i in range(3):
        (out / f"{i}.txt").write_text("x")
    with pytest.raises(BadInput, match="holds files envkit did not write|is a folder envkit did not write"):
        claim_output(out, KIND)
    (out / "3.txt").write_text("x")
    with pytest.raises(BadInput, match="more than 3 files"):
        claim_output(out, KIND)


def test_update_output_adds_to_an_owned_folder_and_records_what_the_run_wrote(tmp_path):
    out = tmp_path / "out"
    write_output(out, KIND, {"report.json": "{}"})
    (out / "server.log").write_text("log")  # a child process of this run wrote it in place
    (out / "view").mkdir()
    (out / "view" / "weights").symlink_to(tmp_path)
    update_output(out, KIND, {"report.json": '{"ok": true}'}, adopt=("server.log", "view"))
    assert _listed(out) == {
        "report.json": _entry("report.json", b'{"ok": true}'),
        "server.log": _entry("server.log", b"log"),
        "view/weights": {"path": "view/weights", "link": str(tmp_path)},
    }
    write_output(out, KIND, {"report.json": "{}"})  # a new run: the link goes (never what it points at)
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "report.json"] and tmp_path.is_dir()


def test_a_file_output_that_is_an_input_is_refused(tmp_path):
    f = tmp_path / "b.tar"
    f.write_text("x")
    with pytest.raises(BadInput, match="is an input of this command"):
        claim_output(f, "bundle", folder=False, is_ours=lambda _p: True, inputs=[f])
    with pytest.raises(BadInput, match="a file envkit did not write"):
        claim_output(f, "bundle", folder=False, is_ours=lambda _p: False, force=True)
    assert f.read_text() == "x"


def test_replace_file_writes_only_the_regular_file_it_read(tmp_path):
    real = tmp_path / "python_packages.yaml"
    real.write_text("old")
    real.chmod(0o640)
    replace_file(real, b"new", was=b"old")
    assert real.read_text() == "new" and stat.S_IMODE(real.stat().st_mode) == 0o640
    with pytest.raises(BadInput, match="changed meanwhile"):
        replace_file(real, b"newer", was=b"old")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    with pytest.raises(BadInput, match="a link"):
        replace_file(link, b"x", was=b"new")
    assert real.read_text() == "new" and link.is_symlink()


def test_a_staged_file_moves_into_an_output_on_another_file_system(tmp_path, monkeypatch):
    """The output is a mount point: the staging folder beside it is on another file system (EXDEV)."""
    import errno

    from envkit.io import outputs as fsutil

    real = os.replace

    def across(src, dst):
        if str(src).endswith("big.log"):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    claim = claim_output(tmp_path / "out", KIND)
    with claim.staging() as stage:
        (stage / "big.log").write_bytes(b"log" * 1000)
        w = claim.writer()
        w.staged("logs/big.log", stage / "big.log")
        monkeypatch.setattr(fsutil.os, "replace", across)
        w.commit()
        monkeypatch.setattr(fsutil.os, "replace", real)
    assert (tmp_path / "out" / "logs" / "big.log").read_bytes() == b"log" * 1000
    assert _listed(tmp_path / "out") == {"logs/big.log": _entry("logs/big.log", b"log" * 1000)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

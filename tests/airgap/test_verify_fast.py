"""envkit.jobs.bundle.verify on small bundles made here: is_bundle, check_members, a folder's missing, extra and modified
files named exactly, what a folder must not hold, and the SHA256SUMS cross-check once every file is the manifest's."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tarfile
from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed
from tests.hostile.test_archives import FILES, ROOT, _good, _manifest, _node, _reg, _write

V = importlib.import_module("envkit.jobs.bundle.verify")  # the module (envkit.jobs.bundle.verify is the function)
ALPHA = "wheels/alpha-1.0-py3-none-any.whl"
BETA = "wheels/beta-1.0-py3-none-any.whl"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _with_sums(files: dict[str, bytes], sums: bytes | None = None) -> dict[str, bytes]:
    """The files plus SHA256SUMS (right unless given) and a manifest recording both."""
    right = "".join(f"{_sha(d)}  {p}\n" for p, d in sorted(files.items())).encode()
    sums = right if sums is None else sums
    all_files = {**files, "SHA256SUMS": sums}
    doc = json.loads(_manifest(all_files))
    doc["sha256sums"] = _sha(sums)
    return {**all_files, "manifest.json": json.dumps(doc, sort_keys=True).encode()}


def _folder(path: Path, files: dict[str, bytes] | None = None) -> Path:
    """A bundle folder: FILES and a manifest listing them (or exactly `files`, the manifest among them)."""
    files = files if files is not None else {**FILES, "manifest.json": _manifest(FILES)}
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)
    return path


def _tar(path: Path, files: dict[str, bytes]) -> Path:
    return _write(path, [_reg(f"{ROOT}/{rel}", data) for rel, data in sorted(files.items())])


# --- is_bundle ---------------------------------------------------------------------------------


def test_is_bundle_folders(tmp_path):
    assert V.is_bundle(_folder(tmp_path / "b")) is True
    assert V.is_bundle(_folder(tmp_path / "b.tar")) is True  # a folder, whatever its name
    empty = tmp_path / "empty"
    empty.mkdir()
    assert V.is_bundle(empty) is False
    assert V.is_bundle(_folder(tmp_path / "bad", {"manifest.json": b'{"files": []}'})) is False
    assert V.is_bundle(_folder(tmp_path / "junk", {"manifest.json": b"not json"})) is False
    as_dir = tmp_path / "dir"
    (as_dir / "manifest.json").mkdir(parents=True)
    assert V.is_bundle(as_dir) is False
    link = tmp_path / "link"
    link.mkdir()
    (link / "manifest.json").symlink_to(tmp_path / "b" / "manifest.json")  # a valid manifest, through a link
    assert V.is_bundle(link) is False
    assert V.is_bundle(tmp_path / "nothing") is False


def test_is_bundle_refuses_a_manifest_over_the_cap(tmp_path, monkeypatch):
    folder = _folder(tmp_path / "b")
    archive = _tar(tmp_path / "b.tar", {**FILES, "manifest.json": _manifest(FILES)})
    size = len(_manifest(FILES))
    monkeypatch.setattr(V, "MAX_MANIFEST", size)
    assert V.is_bundle(folder) is True and V.is_bundle(archive) is True  # at the cap
    monkeypatch.setattr(V, "MAX_MANIFEST", size - 1)
    assert V.is_bundle(folder) is False and V.is_bundle(archive) is False


@pytest.mark.parametrize("name", ["b.tar", "b.tar.gz"])
def test_is_bundle_archives(tmp_path, name):
    good = {**FILES, "manifest.json": _manifest(FILES)}
    assert V.is_bundle(_tar(tmp_path / name, good)) is True
    bad = tmp_path / "bad" / name
    bad.parent.mkdir()
    assert V.is_bundle(_tar(bad, {**FILES, "manifest.json": b"{}"})) is False


def test_is_bundle_wants_the_manifest_right_under_the_top_folder(tmp_path):
    data = _manifest(FILES)
    deep = _write(tmp_path / "deep.tar", [_reg(f"{ROOT}/sub/manifest.json", data)])
    top = _write(tmp_path / "top.tar", [_reg("manifest.json", data)])
    other = _write(tmp_path / "other.tar", [_reg(f"{ROOT}/notmanifest.json", data)])
    link = _write(tmp_path / "link.tar", [_node(f"{ROOT}/manifest.json", tarfile.SYMTYPE, "x")])
    assert [V.is_bundle(p) for p in (deep, top, other, link)] == [False] * 4
    later = _write(tmp_path / "later.tar", [_reg(f"{ROOT}/a", b"x"), _reg(f"{ROOT}/manifest.json", data)])
    assert V.is_bundle(later) is True


def test_is_bundle_stops_after_max_members(tmp_path, monkeypatch):
    monkeypatch.setattr(V, "MAX_MEMBERS", 2)
    data = _manifest(FILES)
    fillers = [_reg(f"{ROOT}/f{i}", b"") for i in range(2)]
    assert V.is_bundle(_write(tmp_path / "a.tar", [*fillers, _reg(f"{ROOT}/manifest.json", data)])) is True  # index 2
    assert (
        V.is_bundle(_write(tmp_path / "b.tar", [*fillers, _reg(f"{ROOT}/g", b""), _reg(f"{ROOT}/manifest.json", data)])) is False
    )


def test_is_bundle_other_files(tmp_path):
    plain = tmp_path / "notes.txt"
    plain.write_text("hello")
    damaged = tmp_path / "bad.tar.gz"
    damaged.write_bytes(b"\x1f\x8b not really gzip")
    not_tar = tmp_path / "bad.tar"
    not_tar.write_bytes(b"x" * 700)
    folder_named = tmp_path / "x.tar.gz"
    folder_named.mkdir()
    assert [V.is_bundle(p) for p in (plain, damaged, not_tar, folder_named)] == [False] * 4
    renamed = tmp_path / "bundle.zip"
    renamed.write_bytes(_tar(tmp_path / "real.tar", {**FILES, "manifest.json": _manifest(FILES)}).read_bytes())
    assert V.is_bundle(renamed) is False  # not an archive name


# --- check_members -----------------------------------------------------------------------------


def test_check_members_returns_the_top_folder_and_the_regular_files(tmp_path):
    members = [_node(ROOT, tarfile.DIRTYPE, mode=0o755), _node(f"{ROOT}/wheels", tarfile.DIRTYPE, mode=0o755), *_good()]
    path = _write(tmp_path / "b.tar", members)
    with tarfile.open(path) as tf:
        root, files = V.check_members(tf, str(path))
    assert root == ROOT
    assert [m.name for m in files] == [f"{ROOT}/{rel}" for rel in sorted([*FILES, "manifest.json"])]


@pytest.mark.parametrize(
    ("members", "why"),
    [
        (
            [_reg(f"{ROOT}/a", b"1"), _reg(f"{ROOT}/a", b"2")],
            "a duplicate of an earlier member: tar -xf would keep the later one",
        ),
        (
            [_reg(f"{ROOT}/a", b"1"), _node(f"{ROOT}/a", tarfile.DIRTYPE, mode=0o755)],
            "a folder replacing the file an earlier member made",
        ),
        ([_reg(f"{ROOT}/a/b", b"1"), _reg(f"{ROOT}/a", b"2")], "a file where an earlier member made a folder"),
        ([_reg(f"{ROOT}/a", b"1"), _reg(f"{ROOT}/a/b", b"2")], f"it lies under '{ROOT}/a', which an earlier member made a file"),
        ([_node(f"{ROOT}/p", tarfile.FIFOTYPE)], "a FIFO"),
        ([_reg(f"{ROOT}/x", b"", 0o2644)], "setuid, setgid or sticky bits (mode 2644)"),
        ([_reg(f"{ROOT}/x", b"", 0o646)], "writable by group or others (mode 646)"),
        (
            [_reg(f"{ROOT}/x", b"", uname="bob", gname="root")],
            "owned by bob:root, not root: tar -xf as root would give it to that owner",
        ),
        ([_reg(f"{ROOT}//x", b"")], "a path that is not plain (empty, './', '//' or a trailing '/')"),
    ],
)
def test_check_members_refuses_what_tar_would_not_make_as_listed(tmp_path, members, why):
    path = _write(tmp_path / "b.tar", members)
    name = members[-1][0].name
    with tarfile.open(path) as tf, pytest.raises(CheckFailed) as e:
        V.check_members(tf, str(path))
    assert e.value.message.startswith(f"{path}: refused: member {name!r} is unsafe ({why}")
    assert e.value.message.endswith("); nothing was extracted")
    assert e.value.where.file == str(path) and e.value.where.key == name


def test_check_members_caps_the_member_count(tmp_path, monkeypatch):
    monkeypatch.setattr(V, "MAX_MEMBERS", 3)
    ok = _write(tmp_path / "ok.tar", [_reg(f"{ROOT}/{i}", b"") for i in range(3)])
    with tarfile.open(ok) as tf:
        assert len(V.check_members(tf, str(ok))[1]) == 3
    bomb = _write(tmp_path / "bomb.tar", [_reg(f"{ROOT}/{i}", b"") for i in range(4)])
    with tarfile.open(bomb) as tf, pytest.raises(CheckFailed, match="more than 3 members: an envkit bundle has a few hundred"):
        V.check_members(tf, str(bomb))


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([], "not an envkit bundle (an empty archive)"),
        ([_reg(f"{ROOT}/a", b""), _reg("other/b", b"")], f"not an envkit bundle (more than one top folder: '{ROOT}', 'other')"),
        ([_reg("loose", b"")], "not an envkit bundle (the file 'loose' lies outside a top folder)"),
    ],
)
def test_check_members_wants_one_top_folder(tmp_path, members, message):
    path = _write(tmp_path / "b.tar", members)
    with tarfile.open(path) as tf, pytest.raises(BadInput) as e:
        V.check_members(tf, str(path))
    assert e.value.message == f"{path}: {message}"


# --- a folder ----------------------------------------------------------------------------------


def test_a_good_folder(tmp_path):
    folder = _folder(tmp_path / "b")
    (folder / "empty-but-needed").mkdir()  # a folder nothing needs is extra
    rep = V.verify(folder)
    assert rep.ok is False and rep.extra == ["empty-but-needed/"]
    (folder / "empty-but-needed").rmdir()
    rep = V.verify(folder, expect_digest="sha256:" + _sha(_manifest(FILES)), jobs=1)
    assert rep.ok is True
    assert rep.to_dict() == {
        "bundle": str(folder),
        "ok": True,
        "files": 3,
        "bytes": sum(len(d) for d in FILES.values()),
        "manifest_sha256": _sha(_manifest(FILES)),
        "missing": [],
        "extra": [],
        "modified": [],
    }


def test_a_folder_with_missing_extra_and_modified_files(tmp_path):
    folder = _folder(tmp_path / "b")
    (folder / BETA).unlink()
    (folder / "notes.txt").write_text("x")
    (folder / "wheels" / "zeta.whl").write_bytes(b"z")
    (folder / "stray" / "deep").mkdir(parents=True)
    (folder / ALPHA).write_bytes(b"a" * 300)  # same size, other bytes
    (folder / "install.sh").write_bytes(b"#!/bin/sh\n")  # another size: not even hashed
    rep = V.verify(folder)
    assert rep.ok is False
    assert rep.missing == [BETA]
    assert rep.extra == ["notes.txt", "wheels/zeta.whl", "stray/", "stray/deep/"]
    assert rep.modified == [
        {
            "path": "install.sh",
            "expected_sha256": _sha(FILES["install.sh"]),
            "actual_sha256": V.NOT_HASHED,
            "expected_size": len(FILES["install.sh"]),
            "actual_size": 10,
        },
        {
            "path": ALPHA,
            "expected_sha256": _sha(FILES[ALPHA]),
            "actual_sha256": _sha(b"a" * 300),
            "expected_size": 300,
            "actual_size": 300,
        },
    ]
    assert rep.files == 2 and rep.bytes == 310


def test_a_folder_without_a_manifest_or_with_a_bad_one(tmp_path):
    folder = _folder(tmp_path / "b", dict(FILES))
    with pytest.raises(BadInput) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: not an envkit bundle (no manifest.json)"
    (folder / "manifest.json").write_text('{"schema_version": 1}')
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message.startswith(f"{folder}: manifest.json is not a valid bundle manifest (")
    assert e.value.hint == "The manifest was altered or truncated; get the bundle again from its source."


def test_a_folder_manifest_over_the_cap(tmp_path, monkeypatch):
    folder = _folder(tmp_path / "b")
    size = (folder / "manifest.json").stat().st_size
    monkeypatch.setattr(V, "MAX_MANIFEST", size - 1)
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: manifest.json is {size} bytes, more than any bundle's"


def test_a_folder_whose_manifest_is_not_the_expected_one(tmp_path):
    folder = _folder(tmp_path / "b")
    with pytest.raises(CheckFailed) as e:
        V.verify(folder, expect_digest="sha256:" + "0" * 64)
    assert e.value.message == f"{folder}: manifest.json has sha256 {_sha(_manifest(FILES))}, not the expected {'0' * 64}"


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("install.sh", "a symbolic link to 'install.sh': a bundle holds none"),
        ("/etc/passwd", "a symbolic link to '/etc/passwd', out of the bundle: a bundle holds none"),
        ("../../outside", "a symbolic link to '../../outside', out of the bundle: a bundle holds none"),
    ],
)
def test_a_symlink_in_a_folder_is_refused(tmp_path, target, why):
    folder = _folder(tmp_path / "b")
    (folder / "wheels" / "link").symlink_to(target)
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: refused: wheels/link is unsafe ({why})"
    assert e.value.where.key == "wheels/link"
    assert e.value.hint == "Do not install from this folder; get the bundle again from a trusted source."


def test_a_fifo_in_a_folder_is_refused_without_blocking(tmp_path):
    folder = _folder(tmp_path / "b")
    os.mkfifo(folder / "pipe")
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: refused: pipe is unsafe (a FIFO, device or socket: a bundle holds regular files only)"


def test_a_setuid_file_in_a_folder_is_refused(tmp_path):
    folder = _folder(tmp_path / "b")
    os.chmod(folder / "install.sh", 0o4755)
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: refused: install.sh is unsafe (setuid, setgid or sticky bits (mode 4755))"


def test_a_bundle_path_that_is_neither(tmp_path):
    with pytest.raises(BadInput, match="no such bundle"):
        V.verify(tmp_path / "nothing")
    (tmp_path / "b.zip").write_bytes(b"x")
    with pytest.raises(BadInput) as e:
        V.verify(tmp_path / "b.zip")
    assert e.value.message == f"{tmp_path / 'b.zip'}: not a bundle folder or a .tar/.tar.gz archive"


# --- a plain archive ---------------------------------------------------------------------------


def test_a_plain_archive_with_missing_extra_and_modified_files(tmp_path):
    files = {**FILES, "manifest.json": _manifest(FILES)}
    files[ALPHA] = b"a" * 300
    files["install.sh"] = b"#!/bin/sh\n"
    files["notes.txt"] = b"x"
    del files[BETA]
    rep = V.verify(_tar(tmp_path / "b.tar", files), jobs=2)
    assert rep.missing == [BETA] and rep.extra == ["notes.txt"]
    assert [(m["path"], m["actual_sha256"], m["actual_size"]) for m in rep.modified] == [
        ("install.sh", V.NOT_HASHED, 10),
        (ALPHA, _sha(b"a" * 300), 300),
    ]
    good = V.verify(_tar(tmp_path / "good.tar", {**FILES, "manifest.json": _manifest(FILES)}))
    assert good.ok is True and good.files == 3 and good.bytes == 393 and good.digest == _sha(_manifest(FILES))


def test_an_archive_without_a_manifest(tmp_path):
    path = _tar(tmp_path / "b.tar", FILES)
    with pytest.raises(BadInput) as e:
        V.verify(path)
    assert e.value.message == f"{path}: not an envkit bundle (no {ROOT}/manifest.json)"


def test_a_plain_archive_with_extra_folders(tmp_path):
    files = {**FILES, "manifest.json": _manifest(FILES)}
    members = [
        _node(ROOT, tarfile.DIRTYPE, mode=0o755),
        _node(f"{ROOT}/wheels", tarfile.DIRTYPE, mode=0o755),
        _node(f"{ROOT}/stray", tarfile.DIRTYPE, mode=0o755),
    ] + [_reg(f"{ROOT}/{rel}", data) for rel, data in sorted(files.items())]
    rep = V.verify(_write(tmp_path / "b.tar", members))
    assert rep.extra == ["stray/"] and rep.missing == [] and rep.modified == []


# --- SHA256SUMS, checked once every file is the manifest's ------------------------------------


def _layouts(tmp_path, files):
    yield _folder(tmp_path / "dir", files)
    yield _tar(tmp_path / "b.tar", files)
    yield _tar(tmp_path / "b.tar.gz", files)


def test_right_sums_pass(tmp_path):
    for path in _layouts(tmp_path, _with_sums(FILES)):
        rep = V.verify(path)
        assert rep.ok is True and rep.files == 4, path


def test_sums_edited_alone_are_refused(tmp_path):
    """A forger re-hashed alpha in the manifest alone: every file matches the manifest, SHA256SUMS does not."""
    forged = dict(FILES, **{ALPHA: b"evil" * 75})
    sums = "".join(f"{_sha(d)}  {p}\n" for p, d in sorted(FILES.items())).encode()
    for path in _layouts(tmp_path, _with_sums(forged, sums=sums)):
        with pytest.raises(CheckFailed) as e:
            V.verify(path)
        assert e.value.message.startswith(f"{path}: SHA256SUMS does not list the manifest's files with the manifest's sha256")
        assert e.value.where.key == "SHA256SUMS"
        assert e.value.hint == "Get the bundle again from its source and check its manifest digest (--expect-digest)."


def test_sums_whose_digest_is_not_the_manifests_are_refused(tmp_path):
    files = _with_sums(FILES)
    doc = json.loads(files["manifest.json"])
    doc["sha256sums"] = "0" * 64
    files["manifest.json"] = json.dumps(doc).encode()
    for path in _layouts(tmp_path, files):
        with pytest.raises(CheckFailed, match="SHA256SUMS does not list"):
            V.verify(path)


def test_sums_are_not_checked_when_a_file_is_already_reported(tmp_path):
    files = _with_sums(FILES)
    files[ALPHA] = b"b" * 300
    for path in _layouts(tmp_path, files):
        rep = V.verify(path)
        assert [m["path"] for m in rep.modified] == [ALPHA], path


def test_without_a_sums_digest_sums_are_not_cross_checked(tmp_path):
    files = _with_sums(FILES, sums=b"anything\n")
    doc = json.loads(files["manifest.json"])
    doc["sha256sums"] = None
    files["manifest.json"] = json.dumps(doc).encode()
    for path in _layouts(tmp_path, files):
        assert V.verify(path).ok is True, path


def test_a_sums_file_over_the_cap_is_not_read(tmp_path, monkeypatch):
    files = _with_sums(FILES, sums=b"x" * 2000)  # listed with its digest, but not what install.sh needs
    paths = list(_layouts(tmp_path, files))
    for path in paths:
        with pytest.raises(CheckFailed, match="SHA256SUMS does not list"):
            V.verify(path)
    assert len(files["manifest.json"]) < 2000
    monkeypatch.setattr(V, "MAX_MANIFEST", 1999)
    assert [V.verify(p).ok for p in paths] == [True] * 3  # unread: nothing to cross-check
    monkeypatch.setattr(V, "MAX_MANIFEST", 2000)  # at the cap: read
    for path in paths:
        with pytest.raises(CheckFailed, match="SHA256SUMS does not list"):
            V.verify(path)


def test_a_manifest_listing_a_path_sums_cannot_hold(tmp_path):
    files = _with_sums(FILES)
    doc = json.loads(files["manifest.json"])
    doc["files"].append({"path": "we ird\nname", "sha256": _sha(b""), "size": 0})
    doc["files"].sort(key=lambda f: f["path"])
    files["manifest.json"] = json.dumps(doc).encode()
    files["we ird\nname"] = b""
    folder = _folder(tmp_path / "dir", files)
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message.startswith(f"{folder}: the manifest lists a path install.sh cannot check (")

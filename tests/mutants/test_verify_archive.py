"""envkit.jobs.bundle.verify on archives made here, pinned exactly: each refusal's message, member, `where` and hint,
each unreadable archive's message (the last good member, or "at its start"), what a compressed stream's end must
hold (its gzip CRC, read on at most 1 MiB), the folders extraction makes, sparse and root-owned members accepted."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import io
import random
import tarfile

import pytest

from envkit.errors import BadInput, CheckFailed, Where
from tests.hostile.test_archives import ALPHA, FILES, ROOT, _damaged, _good, _manifest, _node, _reg, _truncated, _write

V = importlib.import_module("envkit.jobs.bundle.verify")  # the module (envkit.jobs.bundle.verify is the function)
REFUSED_HINT = "Do not extract this archive; get the bundle again from a trusted source."
UNREADABLE_HINT = "The archive is truncated or damaged; get the bundle again."
BETA = f"{ROOT}/wheels/beta-1.0-py3-none-any.whl"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bundle(files: dict[str, bytes]) -> list:
    """Members for `files` and a manifest listing them, in name order (install.sh, manifest.json, wheels/...)."""
    files = {**files, "manifest.json": _manifest(files)}
    return [_reg(f"{ROOT}/{rel}", data) for rel, data in sorted(files.items())]


def _pax(name: str, records: dict[str, str], data: bytes = b""):
    m, data = _reg(name, data)
    m.pax_headers = records
    return m, data


def _assert_unreadable(e, path, at: str, name: str | None, why: str) -> None:
    assert e.type is BadInput and e.value.exit_code == 2
    assert e.value.message == f"{path}: unreadable archive {at} ({why}); nothing was extracted"
    assert e.value.where == Where(str(path), key=name)
    assert e.value.hint == UNREADABLE_HINT


def _check_members_error(path, kind=CheckFailed):
    """The error check_members raises for the archive at `path`."""
    with tarfile.open(path) as tf, pytest.raises(kind) as e:
        V.check_members(tf, str(path))
    return e.value


# --- refusals: what tar -xf would make that the manifest cannot say ---------------------------


@pytest.mark.parametrize(
    ("members", "name", "why"),
    [
        ([_reg("/etc/x", b"")], "/etc/x", "an absolute path"),
        ([_pax(f"{ROOT}/ok", {"path": f"{ROOT}/a\x00b"})], f"{ROOT}/a\x00b", "an absolute path"),
        ([_reg(f"{ROOT}/../x", b"")], f"{ROOT}/../x", "a '..' in its path"),
        (
            [_reg(f"{ROOT}/x", b"", uid=1000)],
            f"{ROOT}/x",
            "owned by 1000:0, not root: tar -xf as root would give it to that owner",
        ),
        (
            [_pax(f"{ROOT}/x", {f"SCHILY.xattr.user.{k}": "1" for k in "dcba"})],
            f"{ROOT}/x",
            "extended header records SCHILY.xattr.user.a, SCHILY.xattr.user.b, SCHILY.xattr.user.c "
            "(attributes, ACLs or flags tar can apply)",
        ),
        ([_reg(f"{ROOT}/a", b""), _reg(ROOT, b"")], ROOT, "a file where an earlier member made a folder"),
    ],
)
def test_a_refusal_names_the_member_and_why(tmp_path, members, name, why):
    path = _write(tmp_path / "b.tar", members)
    err = _check_members_error(path)
    assert err.message == f"{path}: refused: member {name!r} is unsafe ({why}); nothing was extracted"
    assert err.where == Where(str(path), key=name)
    assert err.hint == REFUSED_HINT and err.exit_code == 1


def test_the_member_cap_names_the_first_member_over_it(tmp_path, monkeypatch):
    monkeypatch.setattr(V, "MAX_MEMBERS", 2)
    path = _write(tmp_path / "b.tar", [_reg(f"{ROOT}/{i}", b"") for i in range(3)])
    err = _check_members_error(path)
    why = "more than 2 members: an envkit bundle has a few hundred"
    assert err.message == f"{path}: refused: member '{ROOT}/2' is unsafe ({why}); nothing was extracted"
    assert err.where == Where(str(path), key=f"{ROOT}/2")


def _renaming(m, dest):
    return m.replace(name=m.name + ".renamed", deep=False)


def _outside(m, dest):
    raise tarfile.OutsideDestinationError(m, "/elsewhere")


@pytest.mark.parametrize(
    ("fake", "why"),
    [
        (_renaming, "a path tar's data filter would rewrite"),
        (_outside, f"'{ROOT}/install.sh' would be extracted to '/elsewhere', which is outside the destination"),
    ],
)
def test_tars_data_filter_is_a_second_opinion(tmp_path, monkeypatch, fake, why):
    """Whatever the data filter of this Python would change or refuse is refused, even past envkit's own checks."""
    path = _write(tmp_path / "b.tar", _good())
    seen = []

    def data_filter(m, dest):
        seen.append(dest)
        return fake(m, dest)

    monkeypatch.setattr(tarfile, "data_filter", data_filter)
    assert (
        _check_members_error(path).message
        == f"{path}: refused: member '{ROOT}/install.sh' is unsafe ({why}); nothing was extracted"
    )
    assert seen == [V.os.path.realpath("/nonexistent-envkit-verify-root")]


def test_a_python_without_tars_data_filter_relies_on_envkits_checks(tmp_path, monkeypatch):
    """Python 3.10 before 3.10.12 has no tarfile.data_filter: verify still runs, with its own checks alone."""
    monkeypatch.delattr(tarfile, "data_filter")
    assert V.verify(_write(tmp_path / "b.tar", _good())).ok is True
    path = _write(tmp_path / "bad.tar", [_reg(f"{ROOT}/../x", b"")])
    assert "(a '..' in its path)" in _check_members_error(path).message


@pytest.mark.parametrize(
    ("members", "name", "message"),
    [
        ([], None, "not an envkit bundle (an empty archive)"),
        (
            [_reg(f"{ROOT}/a", b""), _reg("other/b", b"")],
            "other/b",
            f"not an envkit bundle (more than one top folder: '{ROOT}', 'other')",
        ),
        ([_reg("loose", b"")], "loose", "not an envkit bundle (the file 'loose' lies outside a top folder)"),
    ],
)
def test_not_one_top_folder_says_where(tmp_path, members, name, message):
    path = _write(tmp_path / "b.tar", members)
    err = _check_members_error(path, BadInput)
    assert err.message == f"{path}: {message}"
    assert err.where == Where(str(path), key=name)


# --- what is accepted ----------------------------------------------------------------------------


def test_members_owned_by_root_by_name_are_accepted(tmp_path):
    members = [_reg(m.name, data, m.mode, uname="root", gname="root") for m, data in _good()]
    rep = V.verify(_write(tmp_path / "b.tar", members))
    assert rep.ok is True and rep.files == 3


def test_a_sparse_member_is_hashed_as_tar_extracts_it(tmp_path):
    """GNU sparse records are how the member is stored, not attributes: accepted, hashed with its holes."""
    whole = b"\0" * 290 + b"A" * 10
    records = {"GNU.sparse.map": "290,10", "GNU.sparse.size": "300", "GNU.sparse.numblocks": "1", "GNU.sparse.name": ALPHA}
    files = {**FILES, "wheels/alpha-1.0-py3-none-any.whl": whole}
    members = [_pax(ALPHA, records, b"A" * 10) if m.name == ALPHA else (m, d) for m, d in _bundle(files)]
    rep = V.verify(_write(tmp_path / "b.tar", members))
    assert rep.ok is True and rep.bytes == len(FILES["install.sh"]) + 300 + 70


@pytest.mark.parametrize("name", ["b.tar", "b.tar.gz"])
def test_folders_extraction_makes_are_needed_or_extra(tmp_path, name):
    files = {"install.sh": b"#!/bin/sh\n", "deep/er/c.whl": b"c" * 5}
    dirs = [ROOT, f"{ROOT}/deep", f"{ROOT}/deep/er", f"{ROOT}/stray", f"{ROOT}/stray/a", f"{ROOT}/stray/a/b"]
    members = [_node(d, tarfile.DIRTYPE, mode=0o755) for d in dirs] + _bundle(files)
    rep = V.verify(_write(tmp_path / name, members))
    assert (rep.missing, rep.modified, rep.files) == ([], [], 2)
    assert rep.extra == ["stray/", "stray/a/", "stray/a/b/"]  # deep/ holds no file itself, but deep/er/c.whl
    assert V._ancestors("a/b/c") == ["a", "a/b"] and V._ancestors("a") == []


def test_bytes_after_the_end_of_archive_marker_are_not_members(tmp_path):
    path = _write(tmp_path / "b.tar", _good())
    path.write_bytes(path.read_bytes() + b"trailing bytes tar -xf never reads")
    assert V.verify(path).ok is True


def test_hash_stream_reads_a_mebibyte_at_a_time():
    data = random.Random(1).randbytes((5 << 19) + 3)
    sizes = []

    class Reader(io.BytesIO):
        def read(self, size=-1):
            sizes.append(size)
            return super().read(size)

    assert V._hash_stream(Reader(data)) == (_sha(data), len(data))
    assert sizes == [1 << 20] * 4  # 1, 1, 0.5 MiB and 3 bytes, then the end: never the whole file at once


# --- unreadable archives: the last good member named, exit 2 -----------------------------------


def test_a_damaged_header_after_a_member_names_it(tmp_path):
    path = _damaged(tmp_path / "b.tar")
    with tarfile.open(path) as tf:
        at = tf.getmember(BETA).offset_data + 512
    with pytest.raises(BadInput) as e:
        V.verify(path)
    why = f"a damaged header at byte {at}, which tar -xf would skip to extract what follows"
    _assert_unreadable(e, path, f"after member {BETA!r}", BETA, why)


def test_a_damaged_header_before_any_member_is_at_the_start(tmp_path):
    path = tmp_path / "b.tar"
    path.write_bytes(b"\0" * 512 + b"\xff" * 512 + b"\0" * 1024)  # tarfile ends at the zero block, tar skips on
    with pytest.raises(BadInput) as e:
        V.verify(path)
    why = "a damaged header at byte 0, which tar -xf would skip to extract what follows"
    _assert_unreadable(e, path, "at its start", None, why)


def test_a_truncated_archive_names_the_last_good_member(tmp_path):
    path = _truncated(tmp_path / "b.tar")
    with pytest.raises(BadInput) as e:
        V.verify(path)
    _assert_unreadable(e, path, f"at member {ALPHA!r}", ALPHA, "unexpected end of data")


@pytest.mark.parametrize("first", ["big", "manifest.json"])
def test_a_gzip_cut_inside_a_member_names_it(tmp_path, first):
    """Cut inside a file hashed before the manifest is read, or inside the manifest itself."""
    data = random.Random(0).randbytes(200_000)  # does not compress: half the archive is half of it
    members = [_reg(f"{ROOT}/{first}", data)] + ([] if first == "manifest.json" else [_reg(f"{ROOT}/manifest.json", b"{}")])
    path = _write(tmp_path / "b.tar.gz", members)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(BadInput) as e:
        V.verify(path)
    why = "Compressed file ended before the end-of-stream marker was reached"
    _assert_unreadable(e, path, f"at member '{ROOT}/{first}'", f"{ROOT}/{first}", why)


def test_a_gzip_with_a_bad_crc_is_unreadable_when_verified(tmp_path):
    """verify reads the stream to its end, so the gzip CRC is checked; check_members judges the headers only."""
    path = _write(tmp_path / "b.tar.gz", _good())
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF  # the CRC32 in the gzip trailer
    path.write_bytes(bytes(data))
    with tarfile.open(path) as tf:
        assert [m.name for m in V.check_members(tf, str(path))[1]] == [m.name for m, _ in _good()]
    with pytest.raises(BadInput) as e:
        V.verify(path)
    assert e.value.where == Where(str(path), key=BETA) and e.value.hint == UNREADABLE_HINT
    prefix = f"{path}: unreadable archive at member {BETA!r} (CRC check failed 0x"
    assert e.value.message.startswith(prefix) and e.value.message.endswith("); nothing was extracted")


def test_a_stream_is_drained_a_mebibyte_past_its_end(tmp_path):
    """Enough to reach the gzip trailer of any archive tar writes, never a bomb of trailing bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for m, d in _good():
            tf.addfile(m, io.BytesIO(d))
    path = tmp_path / "b.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue() + b"\0" * (3 << 20), mtime=0))
    with tarfile.open(path) as tf:
        ex = V._Extraction(str(path))
        for m in ex.members(tf):
            ex.add(m)
        ex.check_end(tf, drain=True)
        assert tf.fileobj.tell() == tf.offset + 2 * tarfile.BLOCKSIZE + (1 << 20)


# --- a compressed archive, read once -----------------------------------------------------------


def test_a_stream_reports_a_listed_file_of_another_size_after_the_manifest(tmp_path):
    files = {**FILES, "wheels/alpha-1.0-py3-none-any.whl": b"a" * 301}
    members = [(m, d) if m.name != ALPHA else _reg(ALPHA, files[ALPHA.removeprefix(f"{ROOT}/")]) for m, d in _good()]
    rep = V.verify(_write(tmp_path / "b.tar.gz", members))
    assert rep.modified == [
        {
            "path": "wheels/alpha-1.0-py3-none-any.whl",
            "expected_sha256": _sha(FILES["wheels/alpha-1.0-py3-none-any.whl"]),
            "actual_sha256": V.NOT_HASHED,
            "expected_size": 300,
            "actual_size": 301,
        }
    ]


def test_a_stream_names_itself_in_manifest_errors(tmp_path):
    path = _write(tmp_path / "b.tar.gz", _good())
    with pytest.raises(CheckFailed) as e:
        V.verify(path, expect_digest="0" * 64)
    assert e.value.message == f"{path}: manifest.json has sha256 {_sha(_manifest(FILES))}, not the expected {'0' * 64}"
    bad = _write(tmp_path / "bad.tar.gz", [_reg(f"{ROOT}/manifest.json", b"[]")])
    with pytest.raises(CheckFailed) as e:
        V.verify(bad)
    assert e.value.message.startswith(f"{bad}: manifest.json is not a valid bundle manifest (")
    assert e.value.where == Where(str(bad))
    none = _write(tmp_path / "none.tar.gz", [_reg(f"{ROOT}/install.sh", b"")])
    with pytest.raises(BadInput) as e:
        V.verify(none)
    assert e.value.message == f"{none}: not an envkit bundle (no {ROOT}/manifest.json)"
    assert e.value.where == Where(str(none))


def test_an_archive_manifest_over_the_cap(tmp_path, monkeypatch):
    path = _write(tmp_path / "b.tar", _good())
    size = len(_manifest(FILES))
    monkeypatch.setattr(V, "MAX_MANIFEST", size - 1)
    with pytest.raises(CheckFailed) as e:
        V.verify(path)
    assert e.value.message == f"{path}: {ROOT}/manifest.json is {size} bytes, more than any bundle's"
    assert e.value.where == Where(str(path), key=f"{ROOT}/manifest.json")

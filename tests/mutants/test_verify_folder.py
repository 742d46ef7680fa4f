"""envkit.jobs.bundle.verify's folder and plain-archive paths pinned down: where each error points and what its hint says,
what a member type is called, the worker count, biggest-first hashing, a file swapped or an archive cut after the
walk, sparse members, and the manifest cap at its edge (tests/airgap/test_verify_fast.py has the main cases)."""

from __future__ import annotations

import importlib
import json
import os
import tarfile
import warnings

import pytest

from envkit.errors import BadInput, CheckFailed
from tests.airgap.test_verify_fast import ALPHA, BETA, _folder, _sha, _tar, _with_sums
from tests.hostile.test_archives import FILES, ROOT, _good, _manifest, _node, _reg, _write

V = importlib.import_module("envkit.jobs.bundle.verify")  # the module (envkit.jobs.bundle.verify is the function)
GOOD = {**FILES, "manifest.json": _manifest(FILES)}
BIGGEST_FIRST = [ALPHA, BETA, "install.sh"]  # 300, 70 and 23 bytes


class _Pool:
    """A ThreadPoolExecutor stand-in that runs in order here and records its worker count and what it returned."""

    made: list[_Pool] = []

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers, self.results = max_workers, []
        _Pool.made.append(self)

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def map(self, fn, items):  # noqa: ANN201
        self.results = [fn(i) for i in items]
        return iter(self.results)


@pytest.fixture
def pool(monkeypatch):
    _Pool.made = []
    monkeypatch.setattr(V, "ThreadPoolExecutor", _Pool)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the default would be 8 workers
    return _Pool.made


# --- _jobs, and the worker count and order each path hands the pool ----------------------------


def test_jobs_defaults_to_the_cpus_up_to_eight(monkeypatch):
    assert V._jobs(5) == 5
    for cpus, want in [(64, 8), (8, 8), (3, 3), (None, 2)]:
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        assert V._jobs(None) == want, cpus


@pytest.mark.parametrize("name", ["b", "b.tar"])
def test_the_pool_gets_the_jobs_asked_and_the_biggest_file_first(tmp_path, pool, name):
    path = _folder(tmp_path / name) if name == "b" else _tar(tmp_path / name, GOOD)
    rep = V.verify(path, jobs=5)
    assert rep.ok is True and rep.files == 3
    assert [p.max_workers for p in pool] == [5]
    assert pool[0].results == [(rel, (_sha(FILES[rel]), len(FILES[rel]))) for rel in BIGGEST_FIRST]
    V.verify(path)
    assert pool[1].max_workers == 8


# --- a folder -----------------------------------------------------------------------------------


def test_folder_errors_point_at_the_folder(tmp_path, monkeypatch):
    folder = _folder(tmp_path / "b", dict(FILES))
    with pytest.raises(BadInput) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: not an envkit bundle (no manifest.json)"
    assert e.value.where.file == str(folder) and e.value.where.key is None

    (folder / "manifest.json").write_bytes(b"not json")
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert (
        e.value.message == f"{folder}: manifest.json is not a valid bundle manifest (Expecting value: line 1 column 1 (char 0))"
    )
    assert e.value.where.file == str(folder)

    (folder / "manifest.json").write_bytes(GOOD["manifest.json"])
    (folder / "wheels" / "link").symlink_to("x")
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.where.file == str(folder) and e.value.where.key == "wheels/link"

    (folder / "wheels" / "link").unlink()
    size = len(GOOD["manifest.json"])
    monkeypatch.setattr(V, "MAX_MANIFEST", size)
    assert V.verify(folder).ok is True  # at the cap
    monkeypatch.setattr(V, "MAX_MANIFEST", size - 1)
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: manifest.json is {size} bytes, more than any bundle's"
    assert e.value.where.file == str(folder)


def test_a_wrong_digest_says_not_to_install(tmp_path):
    for path in (_folder(tmp_path / "b"), _tar(tmp_path / "b.tar", GOOD), _tar(tmp_path / "b.tar.gz", GOOD)):
        with pytest.raises(CheckFailed) as e:
            V.verify(path, expect_digest="sha256:" + "0" * 64)
        assert e.value.message == f"{path}: manifest.json has sha256 {_sha(GOOD['manifest.json'])}, not the expected {'0' * 64}"
        assert e.value.hint == "The bundle is not the one that was published; do not install it."


@pytest.mark.parametrize(("where", "fails"), [("", "."), ("wheels", "wheels")])
@pytest.mark.parametrize(
    ("error", "shown"), [(PermissionError(13, "Permission denied"), "Permission denied"), (OSError("no strerror"), "no strerror")]
)
def test_a_folder_that_cannot_be_listed(tmp_path, monkeypatch, where, fails, error, shown):
    folder = _folder(tmp_path / "b")
    scandir = os.scandir

    def failing(p):  # noqa: ANN202
        if str(p) == str(folder / where):
            raise error
        return scandir(p)

    monkeypatch.setattr(os, "scandir", failing)
    with pytest.raises(BadInput) as e:
        V.verify(folder)
    assert e.value.message == f"{folder}: cannot read {fails}: {shown}"
    assert e.value.where.file == str(folder)


def test_an_executable_file_is_no_setuid_one(tmp_path):
    folder = _folder(tmp_path / "b")
    os.chmod(folder / "install.sh", 0o755)
    os.chmod(folder / ALPHA, 0o777)
    assert V.verify(folder).ok is True


def test_hashing_warns_about_nothing(tmp_path):
    folder = _folder(tmp_path / "b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert V.verify(folder, jobs=1).ok is True


def _swap_after_the_walk(monkeypatch, swap) -> None:
    parse = V._parse_manifest

    def swapping(data, where):  # noqa: ANN202
        swap()
        return parse(data, where)

    monkeypatch.setattr(V, "_parse_manifest", swapping)


def test_a_file_swapped_for_a_link_after_the_walk_is_not_followed(tmp_path, monkeypatch):
    folder = _folder(tmp_path / "b")
    twin = tmp_path / "twin"
    twin.write_bytes(FILES[BETA])  # the right bytes, through a link

    def swap() -> None:
        (folder / BETA).unlink()
        (folder / BETA).symlink_to(twin)

    _swap_after_the_walk(monkeypatch, swap)
    rep = V.verify(folder)
    assert rep.modified == [
        {
            "path": BETA,
            "expected_sha256": _sha(FILES[BETA]),
            "actual_sha256": "not a regular file",
            "expected_size": 70,
            "actual_size": -1,
        }
    ]
    assert rep.files == 3 and rep.bytes == 323


def test_a_file_swapped_for_a_folder_after_the_walk_is_not_a_regular_file(tmp_path, monkeypatch):
    folder = _folder(tmp_path / "b")

    def swap() -> None:
        (folder / BETA).unlink()
        (folder / BETA).mkdir()

    _swap_after_the_walk(monkeypatch, swap)
    rep = V.verify(folder)
    assert [(m["path"], m["actual_sha256"], m["actual_size"]) for m in rep.modified] == [(BETA, "not a regular file", -1)]
    assert rep.bytes == 323


# --- SHA256SUMS errors ---------------------------------------------------------------------------


def test_sums_errors_point_at_the_bundle(tmp_path):
    forged = dict(FILES, **{ALPHA: b"evil" * 75})
    sums = "".join(f"{_sha(d)}  {p}\n" for p, d in sorted(FILES.items())).encode()
    folder = _folder(tmp_path / "b", _with_sums(forged, sums=sums))
    with pytest.raises(CheckFailed) as e:
        V.verify(folder)
    assert e.value.message == (
        f"{folder}: SHA256SUMS does not list the manifest's files with the manifest's sha256 (one of them was edited "
        "alone); do not install this bundle"
    )
    assert e.value.where.file == str(folder) and e.value.where.key == "SHA256SUMS"

    files = _with_sums(FILES)
    doc = json.loads(files["manifest.json"])
    doc["files"].append({"path": "new\nline", "sha256": _sha(b""), "size": 0})
    files["manifest.json"], files["new\nline"] = json.dumps(doc).encode(), b""
    odd = _folder(tmp_path / "odd", files)
    with pytest.raises(CheckFailed) as e:
        V.verify(odd)
    assert e.value.message.startswith(f"{odd}: the manifest lists a path install.sh cannot check (")
    assert e.value.where.file == str(odd)


# --- verify's own errors, and archives ---------------------------------------------------------


def test_paths_that_are_no_bundle_point_at_themselves(tmp_path):
    for path, message in [
        (tmp_path / "nothing", "no such bundle"),
        (tmp_path / "b.zip", "not a bundle folder or a .tar/.tar.gz archive"),
    ]:
        if path.suffix:
            path.write_bytes(b"x")
        with pytest.raises(BadInput) as e:
            V.verify(path)
        assert e.value.message == f"{path}: {message}"
        assert e.value.where.file == str(path)


@pytest.mark.parametrize("name", ["bad.tar", "bad.tar.gz"])
def test_an_archive_tarfile_cannot_open(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"x" * 700)
    with pytest.raises(tarfile.TarError) as why:
        tarfile.open(path)
    with pytest.raises(BadInput) as e:
        V.verify(path)
    assert e.value.message == f"{path}: unreadable archive at its start ({why.value}); nothing was extracted"
    assert e.value.where.file == str(path) and e.value.where.key is None


@pytest.mark.parametrize("name", ["b.tar", "b.tar.gz"])
def test_an_archive_without_a_manifest_points_at_it(tmp_path, name):
    path = _tar(tmp_path / name, FILES)
    with pytest.raises(BadInput) as e:
        V.verify(path)
    assert e.value.message == f"{path}: not an envkit bundle (no {ROOT}/manifest.json)"
    assert e.value.where.file == str(path)


@pytest.mark.parametrize(
    ("node", "kind"),
    [
        (_node(f"{ROOT}/wheels/l", tarfile.SYMTYPE, "x"), "a symbolic link"),
        (_node(f"{ROOT}/wheels/l", tarfile.LNKTYPE, f"{ROOT}/install.sh"), "a hard link"),
        (_node(f"{ROOT}/wheels/l", tarfile.CHRTYPE), "a device"),
        (_node(f"{ROOT}/wheels/l", tarfile.BLKTYPE), "a device"),
        (_node(f"{ROOT}/wheels/l", tarfile.FIFOTYPE), "a FIFO"),
    ],
)
def test_a_member_tar_would_not_make_a_file_is_named_by_kind(tmp_path, node, kind):
    path = _write(tmp_path / "b.tar", [*_good(), node])
    with pytest.raises(CheckFailed) as e:
        V.verify(path)
    assert e.value.message == f"{path}: refused: member '{ROOT}/wheels/l' is unsafe ({kind}); nothing was extracted"
    assert e.value.where.file == str(path)


def test_a_plain_archive_cut_after_its_listing(tmp_path, monkeypatch):
    """The archive shrinks between reading the headers and hashing: the member it ends in is named."""
    path = _tar(tmp_path / "b.tar", GOOD)
    with tarfile.open(path) as tf:
        cut = tf.getmember(f"{ROOT}/{BETA}").offset_data + 10
    check_end = V._Extraction.check_end

    def then_cut(self, tf, drain):  # noqa: ANN202
        check_end(self, tf, drain)
        os.truncate(path, cut)

    monkeypatch.setattr(V._Extraction, "check_end", then_cut)
    with pytest.raises(BadInput) as e:
        V.verify(path, jobs=1)
    assert e.value.message == (
        f"{path}: unreadable archive at member '{ROOT}/{BETA}' (the archive ends inside this member); nothing was extracted"
    )
    assert e.value.where.file == str(path) and e.value.where.key == f"{ROOT}/{BETA}"


def _sparse(rel: str, chunks: list[tuple[int, bytes]], realsize: int, claim: int | None = None):
    """A GNU sparse 1.0 member (pax): the map block, then the chunks' bytes; `claim` overstates the last chunk."""
    spans = [(off, len(data)) for off, data in chunks]
    if claim is not None:
        spans[-1] = (spans[-1][0], claim)
    text = f"{len(spans)}\n" + "".join(f"{off}\n{n}\n" for off, n in spans)
    data = text.encode().ljust(tarfile.BLOCKSIZE, b"\0") + b"".join(d for _, d in chunks)
    m = tarfile.TarInfo(f"{ROOT}/{rel}")
    m.size, m.mode = len(data), 0o644
    m.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": f"{ROOT}/{rel}",
        "GNU.sparse.realsize": str(realsize),
    }
    return m, data


def test_a_sparse_member_is_hashed_as_tar_would_fill_it(tmp_path):
    content = b"s" * 100 + b"\0" * 100 + b"t" * 100
    files = {**FILES, "wheels/sparse.bin": content}
    members = [*_good_with(files), _sparse("wheels/sparse.bin", [(0, b"s" * 100), (200, b"t" * 100)], 300)]
    rep = V.verify(_write(tmp_path / "b.tar", members))
    assert rep.ok is True and rep.files == 4 and rep.bytes == 693

    members[-1] = _sparse("wheels/sparse.bin", [(0, b"s" * 100), (200, b"u" * 100)], 300)
    rep = V.verify(_write(tmp_path / "c.tar", members))
    assert [(m["path"], m["actual_sha256"], m["actual_size"]) for m in rep.modified] == [
        ("wheels/sparse.bin", _sha(b"s" * 100 + b"\0" * 100 + b"u" * 100), 300)
    ]


def test_a_sparse_member_whose_map_runs_past_the_archive(tmp_path):
    files = {**FILES, "wheels/sparse.bin": b"s" * 2000}
    members = [*_good_with(files), _sparse("wheels/sparse.bin", [(0, b"s" * 100)], 2000, claim=2000)]
    path = _write(tmp_path / "b.tar", members)
    with tarfile.open(path) as tf:
        end = tf.getmember(f"{ROOT}/wheels/sparse.bin").offset_data + 512  # the data, padded: no end-of-archive marker
    os.truncate(path, end)
    with pytest.raises(BadInput) as e:
        V.verify(path)
    assert e.value.message == (
        f"{path}: unreadable archive at member '{ROOT}/wheels/sparse.bin' (unexpected end of data); nothing was extracted"
    )
    assert e.value.where.file == str(path)


def _good_with(files: dict[str, bytes]):
    """FILES and a manifest listing `files` (the sparse one comes after)."""
    return [_reg(f"{ROOT}/{rel}", data) for rel, data in sorted({**FILES, "manifest.json": _manifest(files)}.items())]


def test_a_plain_archives_manifest_and_sums_errors_point_at_it(tmp_path, monkeypatch):
    """A plain .tar (read in place, not streamed): a manifest that is no JSON, and a SHA256SUMS that cannot be read."""
    bad = _tar(tmp_path / "bad.tar", {**FILES, "manifest.json": b"{not json"})
    with pytest.raises(CheckFailed) as e:
        V.verify(bad)
    assert e.value.message.startswith(f"{bad}: manifest.json is not a valid bundle manifest (")
    assert e.value.where.file == str(bad)
    sums = _tar(tmp_path / "sums.tar", _with_sums(FILES))
    plain = tarfile.TarFile.extractfile

    def failing(self, member):  # noqa: ANN001, ANN202
        name = member if isinstance(member, str) else member.name
        if name.endswith("/SHA256SUMS"):
            raise OSError("disk read error")
        return plain(self, member)

    monkeypatch.setattr(tarfile.TarFile, "extractfile", failing)
    with pytest.raises(BadInput) as e:
        V.verify(sums)
    assert e.value.message == (
        f"{sums}: unreadable archive at member '{ROOT}/SHA256SUMS' (disk read error); nothing was extracted"
    )
    assert e.value.where.file == str(sums) and e.value.where.key == f"{ROOT}/SHA256SUMS"

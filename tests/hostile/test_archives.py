"""Hostile bundles through `envkit bundle verify`, read as `tar -xf` extracts them.

Each case is a small bundle archive made here with tarfile, good but for one member: a symlink before or after a
listed file, a hard link, a FIFO, a device, a setuid, group-writable or foreign-owned member, extended
attributes, a duplicate, a file shadowing a folder or the reverse, `..` and absolute names, a damaged header
that tar skips to extract what follows, a truncated archive, a bomb of members. Verify must exit 1 (refused) or
2 (unreadable) naming the member, never with a traceback; and `tar -xpf` of the same archive in a temporary
folder shows what the refusal prevented: tar fails, or what it makes is not what the manifest says.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = "bundle"
FILES = {
    "install.sh": b"#!/bin/sh\necho install\n",
    "wheels/alpha-1.0-py3-none-any.whl": b"A" * 300,
    "wheels/beta-1.0-py3-none-any.whl": b"B" * 70,
}
ALPHA = f"{ROOT}/wheels/alpha-1.0-py3-none-any.whl"


def _manifest(files: dict[str, bytes]) -> bytes:
    from envkit.models.bundle import BundleFile, BundleManifest

    m = BundleManifest(
        envkit_version="0",
        lock_sha256="0" * 64,
        target={},
        controller={},
        lacks=[],
        lock={},
        files=[BundleFile(path=p, sha256=hashlib.sha256(d).hexdigest(), size=len(d)) for p, d in sorted(files.items())],
    )
    return json.dumps(m.model_dump(mode="json"), sort_keys=True).encode()


def _reg(name: str, data: bytes, mode: int = 0o644, **attrs) -> tuple[tarfile.TarInfo, bytes]:
    m = tarfile.TarInfo(name)
    m.size, m.mode = len(data), mode
    for k, v in attrs.items():
        setattr(m, k, v)
    return m, data


def _node(name: str, kind: bytes, linkname: str = "", mode: int = 0o644) -> tuple[tarfile.TarInfo, None]:
    m = tarfile.TarInfo(name)
    m.type, m.linkname, m.mode = kind, linkname, mode
    if kind == tarfile.CHRTYPE:
        m.devmajor, m.devminor = 1, 5  # what /dev/zero is
    return m, None


def _good() -> list[tuple[tarfile.TarInfo, bytes | None]]:
    files = dict(FILES, **{"manifest.json": _manifest(FILES)})
    return [_reg(f"{ROOT}/{rel}", data, 0o755 if rel.endswith(".sh") else 0o644) for rel, data in sorted(files.items())]


def _write(path: Path, members, fmt: int = tarfile.PAX_FORMAT) -> Path:
    with tarfile.open(path, "w:gz" if path.name.endswith(".gz") else "w", format=fmt) as tf:
        for m, data in members:
            tf.addfile(m, io.BytesIO(data) if data is not None else None)
    return path


def _insert(members, before: str | None, *new):
    """The good members with `new` placed before the member named `before` (None: at the end)."""
    at = next((i for i, (m, _) in enumerate(members) if m.name == before), len(members))
    return members[:at] + list(new) + members[at:]


def _replace(members, name: str, new):
    return [new if m.name == name else (m, d) for m, d in members]


def _damaged(path: Path) -> Path:
    """A block tar cannot read as a header, then a symlink: tarfile's listing stops there, tar skips on to it."""
    _write(path, [*_good(), _node(f"{ROOT}/wheels/late", tarfile.SYMTYPE, "../../../outside")])
    with tarfile.open(path) as tf:
        at = tf.getmember(f"{ROOT}/wheels/late").offset
    data = path.read_bytes()
    path.write_bytes(data[:at] + b"\xff" * 512 + data[at:])
    return path


def _truncated(path: Path) -> Path:
    _write(path, _good())
    with tarfile.open(path) as tf:
        cut = tf.getmember(ALPHA).offset_data + 100
    path.write_bytes(path.read_bytes()[:cut])
    return path


def _truncated_gz(path: Path) -> Path:
    _write(path, _good())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _bomb(path: Path) -> Path:
    """More members than any bundle has (the cap is lowered for the test), in a gzip: a few hundred bytes."""
    V = importlib.import_module("envkit.jobs.bundle.verify")  # the module (envkit.jobs.bundle.verify is the function)
    many = [_reg(f"{ROOT}/many/{i}", b"") for i in range(V.MAX_MEMBERS + 1)]
    return _write(path, _insert(_good(), None, *many))


CASES = {
    # name: (make the archive at path, exit code, what stderr says, tar options)
    "symlink-before-a-listed-file": (
        lambda p: _write(p, _insert(_good(), f"{ROOT}/install.sh", _node(f"{ROOT}/wheels", tarfile.SYMTYPE, "../../outside"))),
        1,
        "symbolic link",
        (),
    ),
    "symlink-after-a-listed-file": (
        lambda p: _write(p, _insert(_good(), None, _node(ALPHA, tarfile.SYMTYPE, "../../../outside/passwd"))),
        1,
        "symbolic link",
        (),
    ),
    "hard-link": (
        lambda p: _write(p, _insert(_good(), None, _node(f"{ROOT}/wheels/gamma.whl", tarfile.LNKTYPE, ALPHA))),
        1,
        "hard link",
        (),
    ),
    "fifo": (lambda p: _write(p, _insert(_good(), None, _node(f"{ROOT}/pipe", tarfile.FIFOTYPE))), 1, "FIFO", ()),
    "char-device": (lambda p: _write(p, _insert(_good(), None, _node(f"{ROOT}/zero", tarfile.CHRTYPE))), 1, "device", ()),
    "setuid": (
        lambda p: _write(p, _replace(_good(), f"{ROOT}/install.sh", _reg(f"{ROOT}/install.sh", FILES["install.sh"], 0o4755))),
        1,
        "setuid",
        (),
    ),
    "group-writable": (
        lambda p: _write(p, _replace(_good(), ALPHA, _reg(ALPHA, FILES[ALPHA[7:]], 0o666))),
        1,
        "writable by group or others",
        (),
    ),
    "foreign-owner": (
        lambda p: _write(p, _replace(_good(), ALPHA, _reg(ALPHA, FILES[ALPHA[7:]], uid=4242, gid=4242))),
        1,
        "not root",
        (),
    ),
    "xattr": (
        lambda p: _write(p, _replace(_good(), ALPHA, _reg(ALPHA, FILES[ALPHA[7:]], pax_headers={"SCHILY.xattr.user.evil": "1"}))),
        1,
        "SCHILY.xattr.user.evil",
        ("--xattrs", "--xattrs-include=*"),
    ),
    "duplicate": (lambda p: _write(p, _insert(_good(), None, _reg(ALPHA, b"evil"))), 1, "duplicate", ()),
    "file-shadows-a-folder": (
        lambda p: _write(p, _insert(_good(), f"{ROOT}/install.sh", _reg(f"{ROOT}/wheels", b"x"))),
        1,
        "made a file",
        (),
    ),
    "folder-replaces-a-file": (
        lambda p: _write(p, _insert(_good(), None, _node(f"{ROOT}/install.sh", tarfile.DIRTYPE, mode=0o755))),
        1,
        "folder replacing",
        (),
    ),
    "dot-dot": (lambda p: _write(p, _insert(_good(), None, _reg(f"{ROOT}/../evil", b"x"))), 1, "'..'", ()),
    "absolute": (lambda p: _write(p, _insert(_good(), None, _reg(f"/{ROOT}/evil", b"x"))), 1, "absolute path", ()),
    "damaged-header": (_damaged, 2, "damaged header", ()),
    "truncated": (_truncated, 2, f"unreadable archive at member {ALPHA!r}", ()),
    "truncated-gzip": (_truncated_gz, 2, "unreadable archive", ()),
    "bomb-of-members": (_bomb, 1, "members: an envkit bundle has a few hundred", ()),
}
GZ = {"truncated-gzip", "bomb-of-members"}


def _extract(archive: Path, tmp: Path, options=()) -> tuple[int, dict]:
    """`tar -xpf` into an empty folder (inside a folder that must stay otherwise empty): what it made, as
    {path: (kind, sha256 or link target, mode bits beyond 0755, owner, xattrs)}; folders only when odd."""
    box = tmp / "box"
    dest = box / "x"
    dest.mkdir(parents=True)
    r = subprocess.run(["tar", *options, "-xpf", str(archive)], cwd=dest, capture_output=True, text=True, timeout=120)
    made: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = Path(dirpath, n)
            st = os.lstat(p)
            rel = p.relative_to(dest).as_posix()
            odd = stat.S_IMODE(st.st_mode) & 0o7022
            if stat.S_ISDIR(st.st_mode):
                if odd or st.st_uid != os.geteuid():
                    made[rel + "/"] = ("dir", "", odd, st.st_uid, ())
                continue
            kind = "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "special"
            what = hashlib.sha256(p.read_bytes()).hexdigest() if kind == "file" else os.readlink(p) if kind == "link" else ""
            attrs = tuple(sorted(a for a in os.listxattr(p, follow_symlinks=False) if a.startswith("user.")))
            made[rel] = (kind, what, odd, st.st_uid, attrs)
    escaped = sorted(set(os.listdir(box)) - {"x"})
    if escaped:
        made["<outside>"] = ("escaped", ",".join(escaped), 0, 0, ())
    return r.returncode, made


def _expected() -> dict:
    files = dict(FILES, **{"manifest.json": _manifest(FILES)})
    return {f"{ROOT}/{rel}": ("file", hashlib.sha256(d).hexdigest(), 0, os.geteuid(), ()) for rel, d in files.items()}


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(importlib.import_module("envkit.jobs.bundle.verify"), "MAX_MEMBERS", 300)


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
def test_a_good_archive_verifies_and_extracts_to_its_manifest(tmp_path, run_cli, gz):
    arc = _write(tmp_path / ("good.tar.gz" if gz else "good.tar"), _good())
    r = run_cli("bundle", "verify", str(arc), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["files"] == len(FILES)
    code, made = _extract(arc, tmp_path)
    assert code == 0 and made == _expected()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_archive_is_refused_and_tar_would_have_made_something_else(case, tmp_path, run_cli, small_cap):
    make, code, says, tar_options = CASES[case]
    arc = make(tmp_path / ("evil.tar.gz" if case in GZ else "evil.tar"))
    before = sorted(os.listdir(tmp_path))
    r = run_cli("bundle", "verify", str(arc))
    assert r.code == code, (r.out, r.err)
    assert says in r.err and "Traceback" not in r.err + r.out, r.err
    assert ("refused: member" in r.err) if code == 1 else ("unreadable archive" in r.err)
    assert "nothing was extracted" in r.err and sorted(os.listdir(tmp_path)) == before
    # what the refusal prevented: tar fails, or what it makes is not the manifest's files
    tar_code, made = _extract(arc, tmp_path, tar_options)
    assert tar_code != 0 or made != _expected(), made


def test_a_flipped_byte_in_a_listed_file_is_a_failed_check(tmp_path, run_cli):
    arc = _write(tmp_path / "b.tar", _good())
    data = bytearray(arc.read_bytes())
    with tarfile.open(arc) as tf:
        at = tf.getmember(ALPHA).offset_data + 7
    data[at] ^= 0x01
    arc.write_bytes(bytes(data))
    r = run_cli("bundle", "verify", str(arc), "--json")
    assert r.code == 1
    rep = json.loads(r.out)
    assert [m["path"] for m in rep["modified"]] == [ALPHA[len(ROOT) + 1 :]] and not rep["missing"] and not rep["extra"]


def test_an_empty_folder_member_is_extra(tmp_path, run_cli):
    arc = _write(tmp_path / "b.tar", _insert(_good(), None, _node(f"{ROOT}/empty", tarfile.DIRTYPE, mode=0o755)))
    r = run_cli("bundle", "verify", str(arc), "--json")
    assert r.code == 1 and json.loads(r.out)["extra"] == ["empty/"]


# --- folders ----------------------------------------------------------------------------------------------
def _folder(tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    for rel, data in dict(FILES, **{"manifest.json": _manifest(FILES)}).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    return out


def _symlink_out(b: Path) -> str:
    (b.parent / "secret").write_text("outside")
    (b / "wheels" / "gamma.whl").symlink_to(b.parent / "secret")
    return "out of the bundle"


def _symlink_in(b: Path) -> str:
    (b / "wheels" / "gamma.whl").symlink_to("alpha-1.0-py3-none-any.whl")
    return "symbolic link"


def _symlink_dir_out(b: Path) -> str:
    (b.parent / "elsewhere").mkdir()
    (b / "more").symlink_to(b.parent / "elsewhere")
    return "out of the bundle"


def _fifo(b: Path) -> str:
    os.mkfifo(b / "wheels" / "pipe.whl")  # opening it would hang: it must be refused unopened
    return "FIFO"


def _setuid(b: Path) -> str:
    os.chmod(b / "install.sh", 0o4755)
    return "setuid"


@pytest.mark.parametrize(
    "spoil",
    [_symlink_out, _symlink_in, _symlink_dir_out, _fifo, _setuid],
    ids=["symlink-out", "symlink-in", "symlink-folder-out", "fifo", "setuid"],
)
def test_a_folder_with_links_or_special_files_is_refused(tmp_path, run_cli, spoil):
    b = _folder(tmp_path)
    assert run_cli("bundle", "verify", str(b)).code == 0
    says = spoil(b)
    r = run_cli("bundle", "verify", str(b))
    assert r.code == 1 and "refused" in r.err and says in r.err and "Traceback" not in r.err, r.err

"""Outputs are envkit's alone: `-o` never deletes or replaces what envkit did not make, sources are never
unlinked, every write stays under `-o`, debris of a killed run is cleaned by the next, and a download never
reads or writes past the size the lock records.

For each of `bundle build`, `image render` and `launch render`: an existing folder with a user's file at `-o` is
refused (exit 2, the file untouched and named); `--force` writes beside it (never replacing or deleting it; a
bundle, replaced whole, stays refused); an earlier output of the same command is replaced without it. The
corpus of attacks on the output manifest, through every writing command: `test_output_manifest.py`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airgap.conftest import offline_lock  # noqa: F401 - a fixture: a lock with a small closure served locally
from tests.launch.conftest import HCCN, locks  # noqa: F401 - a fixture: resolved locks per chip

USER_FILE = "my-notes.txt"
DEAD = 4_000_000_000  # no process has this id: what it left is debris


def _user_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / USER_FILE).write_text("the user's own work\n")
    return path


def _refused(r, path: Path, *named: str) -> None:
    assert r.code == 2, (r.out, r.err)
    assert "refusing to replace it" in r.err and str(path) in r.err, r.err
    assert all(n in r.err for n in named), r.err
    assert "Traceback" not in r.err


# --- bundle build ---------------------------------------------------------------------------------------
def test_bundle_build_refuses_a_folder_it_did_not_make_even_forced(offline_lock, tmp_path, run_cli):  # noqa: F811
    """A bundle folder is swapped in whole: a user's file in the way is refused, --force or not."""
    lock, _ = offline_lock
    out = _user_folder(tmp_path / "out")
    for extra in ((), ("--force",)):
        r = run_cli("bundle", "build", "--lock", str(lock), "-o", str(out), *extra)
        _refused(r, out, USER_FILE)
        assert sorted(p.name for p in out.iterdir()) == [USER_FILE]
    assert not (tmp_path / "cache" / "wheels").exists()  # refused before anything was fetched
    (out / USER_FILE).unlink()  # the user moves it away: an empty folder is envkit's to fill
    assert run_cli("bundle", "build", "--lock", str(lock), "-o", str(out)).code == 0
    assert run_cli("bundle", "verify", str(out)).code == 0
    # now it is an envkit bundle: the next build replaces it without --force
    (out / "install.sh").unlink()
    assert run_cli("bundle", "build", "--lock", str(lock), "-o", str(out)).code == 0
    assert (out / "install.sh").is_file()


def test_bundle_build_replaces_an_archive_only_when_it_is_a_bundle(offline_lock, tmp_path, run_cli):  # noqa: F811
    lock, _ = offline_lock
    theirs = tmp_path / "theirs.tar"
    subprocess.run(["tar", "-cf", str(theirs), "-C", str(_user_folder(tmp_path / "src")), USER_FILE], check=True)
    data = theirs.read_bytes()
    _refused(run_cli("bundle", "build", "--lock", str(lock), "-o", str(theirs)), theirs)
    assert theirs.read_bytes() == data
    other = tmp_path / "notes.tar.gz"
    other.write_text("not even an archive\n")
    _refused(run_cli("bundle", "build", "--lock", str(lock), "-o", str(other)), other)
    assert other.read_text() == "not even an archive\n"
    _refused(run_cli("bundle", "build", "--lock", str(lock), "-o", str(theirs), "--force"), theirs)  # never theirs
    assert theirs.read_bytes() == data
    theirs.unlink()
    r = run_cli("bundle", "build", "--lock", str(lock), "-o", str(theirs), "--json")
    assert r.code == 0, r.err
    first = theirs.read_bytes()
    assert first != data and run_cli("bundle", "verify", str(theirs)).code == 0
    # an earlier bundle, changed since (so not kept as up to date): rewritten without --force
    with open(theirs, "r+b") as fh:
        fh.seek(len(first) - 1)
        fh.write(b"\0")
    os.utime(theirs, (1, 1))
    r = run_cli("bundle", "build", "--lock", str(lock), "-o", str(theirs), "--json")
    assert r.code == 0, r.err
    assert "up_to_date" not in json.loads(r.out) and theirs.read_bytes() == first
    # a folder where the archive goes is never replaced
    (tmp_path / "dir.tar").mkdir()
    r = run_cli("bundle", "build", "--lock", str(lock), "-o", str(tmp_path / "dir.tar"), "--force")
    assert r.code == 2 and "is a folder" in r.err


def test_debris_of_a_killed_build_is_removed_by_the_next(offline_lock, tmp_path, run_cli):  # noqa: F811
    lock, _ = offline_lock
    out, arc = tmp_path / "out", tmp_path / "b.tar"
    partial = tmp_path / f".out.partial-{DEAD}"
    (partial / "wheels").mkdir(parents=True)
    (partial / "wheels" / "half.whl").write_bytes(b"half")
    old = tmp_path / f".out.old-{DEAD}"
    old.mkdir()
    tmp_file = tmp_path / f".b.tar.{DEAD}-x1y2.tmp"
    tmp_file.write_bytes(b"half an archive")
    running = subprocess.Popen(["sleep", "60"])  # a run still going (a process of the test's own, not its parent)
    alive = tmp_path / f".out.partial-{running.pid}"
    alive.mkdir()
    mine = tmp_path / ".out.notes"  # a user's file that merely looks alike
    mine.write_text("keep")
    try:
        assert run_cli("bundle", "build", "--lock", str(lock), "-o", str(out)).code == 0
        assert run_cli("bundle", "build", "--lock", str(lock), "-o", str(arc)).code == 0
    finally:
        running.kill()
        running.wait()
    assert not partial.exists() and not old.exists() and not tmp_file.exists()
    assert alive.is_dir() and mine.read_text() == "keep"


# --- image render ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def image_inputs(tmp_path_factory):
    from tests.image.conftest import GOLDEN_CASES, fake_requirements, fixture_installers, resolve_lock

    base = tmp_path_factory.mktemp("image-inputs")
    lock = resolve_lock(GOLDEN_CASES["910b-aarch64-cann8.0.0"], base / "envkit.lock")
    return lock, fixture_installers(lock, base / "artifacts"), fake_requirements(lock, base / "requirements.txt")


def _render(run_cli, inputs, out: Path, *extra: str, artifacts: Path | None = None):
    lock, arts, reqs = inputs
    return run_cli(
        "image",
        "render",
        "--lock",
        str(lock),
        "--artifacts",
        str(artifacts or arts),
        "--requirements",
        str(reqs),
        "-o",
        str(out),
        *extra,
    )


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_image_render_refuses_a_folder_it_did_not_make_unless_forced(image_inputs, tmp_path, run_cli):
    out = _user_folder(tmp_path / "ctx")
    _refused(_render(run_cli, image_inputs, out), out, USER_FILE)
    assert sorted(p.name for p in out.iterdir()) == [USER_FILE]
    r = _render(run_cli, image_inputs, out, "--force")
    assert r.code == 0, r.err
    manifest = json.loads((out / ".envkit-output").read_text())
    assert manifest["kind"] == "image-context" and "Dockerfile" in {f["path"] for f in manifest["files"]}
    assert USER_FILE not in {f["path"] for f in manifest["files"]}
    assert (out / USER_FILE).read_text() == "the user's own work\n"  # written in place: nothing of theirs deleted
    # the user's file is still theirs: refused without --force, kept with it
    _refused(_render(run_cli, image_inputs, out), out, USER_FILE)
    (out / USER_FILE).unlink()
    assert _render(run_cli, image_inputs, out).code == 0  # an earlier build context: rendered again


@pytest.mark.parametrize("inside", ["artifacts", "vendor"])
def test_image_render_never_removes_the_vendor_packages_handed_in_from_inside_the_output(image_inputs, tmp_path, run_cli, inside):
    """The user's only copy of the vendor packages lies inside -o (where the context puts them, or elsewhere)."""
    out = tmp_path / "ctx"
    assert _render(run_cli, image_inputs, out).code == 0
    vendor = out / inside
    shutil.rmtree(vendor, ignore_errors=True)
    shutil.copytree(image_inputs[1], vendor)  # now the only copy the render is given
    before = _digests(vendor)
    assert before
    for _ in range(2):
        r = _render(run_cli, image_inputs, out, artifacts=vendor)
        assert r.code == 0, r.err
        assert _digests(vendor) == before
    assert {p.name for p in (out / "artifacts").iterdir()} <= set(before)


def test_image_render_writes_nothing_through_a_link_out_of_the_output(image_inputs, tmp_path, run_cli):
    out = tmp_path / "ctx"
    assert _render(run_cli, image_inputs, out).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(out / "artifacts")
    (out / "artifacts").symlink_to(elsewhere)
    r = _render(run_cli, image_inputs, out)
    assert r.code == 2 and "artifacts" in r.err and "refusing" in r.err, r.err
    r = _render(run_cli, image_inputs, out, "--force")  # the link is kept, and nothing is written through it
    assert r.code == 2 and "leads outside" in r.err, r.err
    assert list(elsewhere.iterdir()) == []


# --- launch render --------------------------------------------------------------------------------------
INVENTORY = """
[ascend]
node-a ansible_host=192.0.2.11 envkit_hccn_conf=a2_node0.hccn.conf
node-b ansible_host=192.0.2.12 envkit_hccn_conf=a2_node1.hccn.conf
"""


def _launch(run_cli, tmp_path: Path, lock: Path, out: Path, *extra: str, hosts: str = INVENTORY):
    for name in ("a2_node0.hccn.conf", "a2_node1.hccn.conf"):
        shutil.copy(HCCN / name, tmp_path / name)
    (tmp_path / "hosts.ini").write_text(hosts)
    return run_cli("launch", "render", "-i", str(tmp_path / "hosts.ini"), "--lock", str(lock), "-o", str(out), *extra)


def test_launch_render_refuses_a_folder_it_did_not_make_unless_forced(locks, tmp_path, run_cli):  # noqa: F811
    out = _user_folder(tmp_path / "launch")
    _refused(_launch(run_cli, tmp_path, locks["910b"], out), out, USER_FILE)
    assert sorted(p.name for p in out.iterdir()) == [USER_FILE]
    r = _launch(run_cli, tmp_path, locks["910b"], out, "--force")
    assert r.code == 0, r.err
    assert (out / USER_FILE).read_text() == "the user's own work\n" and (out / "rank_table.json").is_file()
    (out / USER_FILE).unlink()
    # an earlier launch set is replaced whole: a host gone from the inventory leaves no folder behind
    assert (out / "hosts" / "node-b").is_dir()
    one = "\n".join(line for line in INVENTORY.splitlines() if not line.startswith("node-b"))
    assert _launch(run_cli, tmp_path, locks["910b"], out, hosts=one).code == 0
    assert sorted(p.name for p in (out / "hosts").iterdir()) == ["node-a"]


# --- downloads ------------------------------------------------------------------------------------------
def test_a_file_url_is_read_no_further_than_the_recorded_size(tmp_path):
    """`file:///dev/zero` with size 10 stops and fails; run in a child limited to 1 MiB of output and 60 s, so
    that a regression fails the test rather than filling the disk."""
    code = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
from pathlib import Path
from envkit.artifacts.download import Downloader, Fetch, WheelCache
from envkit.errors import CheckFailed
cache = WheelCache(Path({str(tmp_path / "cache")!r}))
try:
    Downloader(cache, retries=1, backoff=0).fetch_all([Fetch("file:///dev/zero", "0" * 64, 10, "zero.whl")])
except CheckFailed as exc:
    print("refused:", exc)
    print("left:", sorted(p.name for p in cache.root.iterdir()))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert r.returncode == 0, r.stderr
    assert "refused: zero.whl: file:///dev/zero holds more than the 10 bytes the lock records" in r.stdout
    assert "0000000000000000000000000000000000000000000000000000000000000000.part" not in r.stdout


def test_a_file_url_reads_at_most_one_byte_past_the_size(tmp_path, monkeypatch):
    from envkit.artifacts import download
    from envkit.errors import CheckFailed

    big = tmp_path / "big.whl"
    big.write_bytes(os.urandom(3 << 20))
    reads: list[int] = []
    opened = download._open_local

    def spy(it):
        fh = opened(it)
        real = fh.read

        class Counting:
            def read(self, n=-1):
                b = real(n)
                reads.append(len(b))
                return b

            def seek(self, n):
                return fh.seek(n)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

        return Counting()

    monkeypatch.setattr(download, "_open_local", spy)
    cache = download.WheelCache(tmp_path / "cache")
    item = download.Fetch(big.as_uri(), hashlib.sha256(big.read_bytes()[:10]).hexdigest(), 10, "big.whl")
    with pytest.raises(CheckFailed, match="holds more than the 10 bytes"):
        download.Downloader(cache, retries=1).fetch_all([item])
    assert sum(reads) == 11
    assert not any(cache.root.iterdir()) or all(p.suffix in (".lock",) for p in cache.root.iterdir())


def test_a_server_sending_more_than_the_recorded_size_is_refused_at_once(tmp_path):
    from envkit.artifacts import download
    from envkit.errors import CheckFailed
    from tests.airgap.httpserve import Server

    srv = tmp_path / "srv"
    srv.mkdir()
    (srv / "big.whl").write_bytes(b"x" * 5000)
    with Server(srv) as server:
        cache = download.WheelCache(tmp_path / "cache")
        item = download.Fetch(f"{server.url}/big.whl", "1" * 64, 10, "big.whl")
        with pytest.raises(CheckFailed, match="sends 5000 bytes, more than the 10"):
            download.Downloader(cache, retries=3, backoff=5).fetch_all([item])  # no retry: at once
    assert not (cache.root / ("1" * 64 + ".part")).exists()

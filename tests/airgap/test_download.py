"""The content-addressed cache: resume after SIGKILL, atomic entries, corruption detected, hash mismatch refused."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.artifacts.download import Downloader, Fetch, WheelCache
from envkit.errors import CannotRun
from tests.airgap.httpserve import Server

ROOT = Path(__file__).resolve().parents[2]
SIZE = 3 * 1024 * 1024


@pytest.fixture
def served(tmp_path):
    src = tmp_path / "srv"
    src.mkdir()
    data = os.urandom(SIZE)
    (src / "pkg-1.0-py3-none-any.whl").write_bytes(data)
    return src, hashlib.sha256(data).hexdigest()


def _child(url: str, sha: str, cache: Path) -> subprocess.Popen:
    code = (
        "import sys; from pathlib import Path; from envkit.artifacts.download import Downloader, Fetch, WheelCache;"
        f"Downloader(WheelCache(Path({str(cache)!r})), jobs=1).fetch_all([Fetch({url!r}, {sha!r}, {SIZE}, 'pkg')])"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)


def test_sigkill_at_several_points_resumes_and_never_leaves_a_corrupt_entry(served, tmp_path):
    src, sha = served
    cache = tmp_path / "cache"
    wc = WheelCache(cache)
    part = wc.path(sha).with_name(sha + ".part")
    sizes = []
    with Server(src, rate=6 * 1024 * 1024) as srv:  # ~0.5 s for the whole file
        url = f"{srv.url}/pkg-1.0-py3-none-any.whl"
        for delay in (0.25, 0.2, 0.15):
            p = _child(url, sha, cache)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (part.exists() and part.stat().st_size > 0):
                time.sleep(0.01)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            assert not wc.path(sha).exists() or hashlib.sha256(wc.path(sha).read_bytes()).hexdigest() == sha
            if part.exists():
                sizes.append(part.stat().st_size)
        assert sizes and all(0 < s < SIZE for s in sizes), sizes
        assert sizes == sorted(sizes), "each run resumed where the last stopped"
        status = Downloader(wc, jobs=1).fetch_all([Fetch(url, sha, SIZE, "pkg")])
    assert status == {sha: "fetched"}
    assert hashlib.sha256(wc.path(sha).read_bytes()).hexdigest() == sha
    assert not part.exists()


def test_corrupted_cache_entry_is_detected_and_fetched_again(served, tmp_path):
    src, sha = served
    wc = WheelCache(tmp_path / "cache")
    with Server(src) as srv:
        item = Fetch(f"{srv.url}/pkg-1.0-py3-none-any.whl", sha, SIZE, "pkg")
        assert Downloader(wc).fetch_all([item]) == {sha: "fetched"}
        assert Downloader(wc).fetch_all([item]) == {sha: "cached"}
        entry = wc.path(sha)
        os.chmod(entry, 0o644)
        with open(entry, "r+b") as fh:  # flip one byte in place: same size, new mtime
            fh.seek(1000)
            b = fh.read(1)
            fh.seek(1000)
            fh.write(bytes([b[0] ^ 0xFF]))
        assert Downloader(wc).fetch_all([item]) == {sha: "fetched"}
    assert hashlib.sha256(entry.read_bytes()).hexdigest() == sha


def test_a_file_that_does_not_match_the_lock_is_refused(served, tmp_path):
    src, sha = served
    wc = WheelCache(tmp_path / "cache")
    wrong = "0" * 64
    with Server(src) as srv:
        with pytest.raises(CannotRun, match="does not match the lock"):
            Downloader(wc, retries=2, backoff=0.01).fetch_all([Fetch(f"{srv.url}/pkg-1.0-py3-none-any.whl", wrong, SIZE, "pkg")])
    assert not wc.path(wrong).exists()
    assert not list(wc.root.glob("*.part"))


def test_missing_file_is_a_clear_error(served, tmp_path):
    src, sha = served
    with Server(src) as srv:
        with pytest.raises(CannotRun, match="404"):
            Downloader(WheelCache(tmp_path / "c"), retries=1).fetch_all([Fetch(f"{srv.url}/nope.whl", sha, SIZE, "nope")])

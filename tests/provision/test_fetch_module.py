"""The envkit_fetch module's functions called directly (playbooks/plugins/modules/envkit_fetch.py; it
imports Ansible only in main()), against real HTTP mirrors on 127.0.0.1: resume with a range, a mirror that ignores
ranges, a part file of garbage, each limit (deadline, silence, size, redirects, parallel downloads) on both sides of
its boundary, and hostile mirror answers (tests/hostile/servers.py). Through Ansible: test_fetch_local.py."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from tests.hostile.servers import OK_JSON, HostileServer
from tests.provision.mirrors import RangeMirror
from tests.provision.modules import ansible_module

ef = ansible_module("envkit_fetch")

DATA = bytes(range(256)) * 400  # 102,400 bytes


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "root"
    (r / "vendor").mkdir(parents=True)
    (r / "vendor" / "driver.run").write_bytes(DATA)
    (r / "wheels").mkdir()
    (r / "wheels" / "a-1.0+local-py3-none-any.whl").write_bytes(b"wheel a")
    return r


@pytest.fixture
def dest(tmp_path) -> Path:
    d = tmp_path / "dest"
    d.mkdir()
    return d


def driver(size: int | None = len(DATA), data: bytes = DATA) -> dict:
    return {"path": "vendor/driver.run", "sha256": _sha(data), **({"size": size} if size is not None else {})}


def fetch(dest: Path, files: list[dict], mirrors: list[str], **kw):
    return ef.fetch_all(files, str(dest), mirrors, **{"attempts": 1, "deadline": 30, "timeout": 10, **kw})


def test_urls_are_the_urlencode_filters(root):
    from jinja2.filters import do_urlencode

    for path in ("wheels/a-1.0+local-py3-none-any.whl", "vendor/x y~!*'();:@&=$,?#[]%é.run", "vendor/plain.run"):
        assert ef.url_of("http://m:1/b//", path) == "http://m:1/b/" + do_urlencode(path)


def test_a_good_mirror_then_nothing_to_do(root, dest):
    files = [driver(), {"path": "wheels/a-1.0+local-py3-none-any.whl", "sha256": _sha(b"wheel a"), "name": "a.whl"}]
    with RangeMirror(root) as m:
        results, failure = fetch(dest, files, [m.url], mode=0o640)
        assert failure is None
        assert [(r["changed"], r["mirror"], r["fetched"], r["resumed"]) for r in results] == [
            (True, m.url, len(DATA), 0),
            (True, m.url, 7, 0),
        ]
        assert (dest / "driver.run").read_bytes() == DATA and (dest / "a.whl").read_bytes() == b"wheel a"
        assert (dest / "driver.run").stat().st_mode & 0o777 == 0o640
        assert m.log[-1]["path"] in ("wheels/a-1.0+local-py3-none-any.whl", "vendor/driver.run")
        assert sorted(os.listdir(dest)) == ["a.whl", "driver.run"]  # no part left
        n = len(m.log)
        results, failure = fetch(dest, files, [m.url])
        assert failure is None and [r["changed"] for r in results] == [False, False] and len(m.log) == n


def test_a_cut_download_is_resumed_with_a_range_on_the_next_try(root, dest):
    cut = 40_000
    with RangeMirror(root, cut_after=cut) as m:
        results, failure = fetch(dest, [driver()], [m.url], attempts=2)
    assert failure is None, failure
    assert [(e["range"], e["status"], e["sent"]) for e in m.log] == [
        (None, 200, cut),
        (f"bytes={cut}-", 206, len(DATA) - cut),
    ]
    assert m.sent() == len(DATA)  # one file in all, not two
    (r,) = results
    assert (r["fetched"], r["resumed"], r["received"]) == (len(DATA) - cut, cut, {m.url: len(DATA)})
    assert "the connection ended after 40000 of 102400 bytes" in r["errors"][0]
    assert (dest / "driver.run").read_bytes() == DATA and not (dest / ".driver.run.envkit-part").exists()


def test_a_part_from_one_mirror_is_resumed_from_the_next(root, dest):
    with RangeMirror(root, cut_after=1000) as first, RangeMirror(root) as second:
        results, failure = fetch(dest, [driver()], [first.url, second.url])
    assert failure is None
    assert [(e["range"], e["status"]) for e in second.log] == [("bytes=1000-", 206)]
    assert results[0]["mirror"] == second.url and results[0]["resumed"] == 1000


def test_a_mirror_that_ignores_ranges_starts_over(root, dest):
    cut = 40_000
    with RangeMirror(root, cut_after=cut, ignore_range=True) as m:
        results, failure = fetch(dest, [driver()], [m.url], attempts=2)
    assert failure is None
    assert [(e["range"], e["status"], e["sent"]) for e in m.log] == [(None, 200, cut), (f"bytes={cut}-", 200, len(DATA))]
    assert (results[0]["fetched"], results[0]["resumed"]) == (len(DATA), 0)
    assert (dest / "driver.run").read_bytes() == DATA


@pytest.mark.parametrize("held", [1000, len(DATA)], ids=["shorter", "as-long"])
def test_a_part_of_garbage_is_refused_by_its_hash_and_the_file_fetched_whole(root, dest, held):
    (dest / ".driver.run.envkit-part").write_bytes(b"g" * held)
    with RangeMirror(root) as m:
        results, failure = fetch(dest, [driver()], [m.url])
    assert failure is None, failure
    # shorter: resumed, wrong hash, then the whole file at once; as long as the file: hashed, no request, then whole
    want = [(f"bytes={held}-", 206), (None, 200)] if held < len(DATA) else [(None, 200)]
    assert [(e["range"], e["status"]) for e in m.log] == want
    assert any("checksum mismatch" in e and f"{held} of them resumed" in e for e in results[0]["errors"])
    assert (dest / "driver.run").read_bytes() == DATA and not (dest / ".driver.run.envkit-part").exists()


def test_a_part_longer_than_the_file_is_dropped(root, dest):
    (dest / ".driver.run.envkit-part").write_bytes(b"g" * (len(DATA) + 1))
    with RangeMirror(root) as m:
        _, failure = fetch(dest, [driver()], [m.url])
    assert failure is None and [e["range"] for e in m.log] == [None]


def test_a_tampered_file_is_refused_and_nothing_is_left(root, dest):
    data = bytearray(DATA)
    data[-1] ^= 0x80
    (root / "vendor" / "driver.run").write_bytes(bytes(data))
    with RangeMirror(root) as m:
        results, failure = fetch(dest, [driver()], [m.url], attempts=2)
    assert failure is not None
    assert failure.startswith(f"Could not fetch vendor/driver.run with the bundle's sha256 from {m.url}: {m.url}: ")
    assert "checksum mismatch" in failure and len(m.log) == 2 and m.sent() == 2 * len(DATA)
    assert os.listdir(dest) == [] and results[0]["mirror"] is None


def test_the_mirrors_are_tried_in_order_and_a_404_moves_on(root, dest, tmp_path):
    (tmp_path / "empty").mkdir()
    with RangeMirror(tmp_path / "empty") as empty, RangeMirror(root) as good:
        results, failure = fetch(dest, [driver()], [empty.url + "/", good.url])
    assert failure is None and results[0]["mirror"] == good.url
    assert results[0]["errors"] == [f"{empty.url}/: vendor/driver.run: HTTP 404 Not Found"]


# 2 s: some bytes have come (kept to resume); 15 s: all 20 have, with room for a starved test process (CI's
# year-ahead pass runs niced beside the whole suite)
@pytest.mark.parametrize(("deadline", "ok"), [(2, False), (15, True)])
def test_the_deadline_bounds_one_download(root, dest, deadline, ok):
    (root / "vendor" / "small.run").write_bytes(b"0123456789" * 2)
    spec = {"path": "vendor/small.run", "sha256": _sha(b"0123456789" * 2), "size": 20}
    with RangeMirror(root, drip=5) as m:  # 20 bytes at 5 a second: 4 s
        t0 = time.monotonic()
        results, failure = fetch(dest, [spec], [m.url], deadline=deadline, timeout=5)
        took = time.monotonic() - t0
    assert (failure is None) == ok, failure
    if not ok:
        assert "stopped at the deadline (2 s for one download)" in failure and took < 2 + 6
        held = (dest / ".small.run.envkit-part").stat().st_size
        assert 0 < held < 20  # kept for the next try to resume
    else:
        assert (dest / "small.run").read_bytes() == b"0123456789" * 2


def test_the_deadline_stops_a_mirror_that_drips_its_headers(dest):
    with HostileServer() as srv:
        t0 = time.monotonic()
        _, failure = fetch(dest, [{"path": "drip-head", "sha256": "0" * 64}], [srv.url], deadline=2)
        assert time.monotonic() - t0 < 2 + 8
    assert failure is not None and "stopped at the deadline (2 s" in failure


@pytest.mark.parametrize(("timeout", "ok"), [(1, False), (5, True)])
def test_the_silence_timeout_bounds_a_stall(root, dest, timeout, ok):
    (root / "vendor" / "two.run").write_bytes(b"ab")
    spec = {"path": "vendor/two.run", "sha256": _sha(b"ab"), "size": 2}
    with RangeMirror(root, drip=0.5) as m:  # a byte every 2 s
        _, failure = fetch(dest, [spec], [m.url], deadline=30, timeout=timeout)
    assert (failure is None) == ok, failure
    if not ok:
        assert "no data for the silence timeout (stalled)" in failure


@pytest.mark.parametrize(("size", "ok"), [(len(DATA), True), (len(DATA) - 1, False), (len(DATA) + 1, False)])
def test_a_content_length_other_than_the_size_is_refused(root, dest, size, ok):
    with RangeMirror(root) as m:
        _, failure = fetch(dest, [driver(size=size)], [m.url])
    assert (failure is None) == ok, failure
    if not ok:
        assert f"announces {len(DATA)} bytes; the file has {size}: refused" in failure
        assert m.sent() == 0 or m.log[0]["sent"] <= len(DATA)  # the body was not read


@pytest.mark.parametrize("case", ["sized-close", "sized-chunked"])
@pytest.mark.parametrize(("size", "ok"), [(100, True), (99, False)])
def test_a_body_without_length_stops_one_byte_past_the_size(dest, case, size, ok):
    spec = {"path": f"{case}/100", "sha256": _sha(b"x" * 100), "size": size, "name": "x"}
    with HostileServer() as srv:
        _, failure = fetch(dest, [spec], [srv.url])
    assert (failure is None) == ok, failure
    if not ok:
        assert "sends more than the file's 99 bytes: refused" in failure


@pytest.mark.parametrize(("max_size", "ok"), [(100, True), (99, False)])
def test_a_file_of_unknown_size_stops_at_max_size(dest, max_size, ok):
    spec = {"path": "sized-close/100", "sha256": _sha(b"x" * 100), "name": "x"}
    with HostileServer() as srv:
        _, failure = fetch(dest, [spec], [srv.url], max_size=max_size)
    assert (failure is None) == ok, failure


@pytest.mark.parametrize(
    ("case", "size", "why"),
    [
        ("huge-length", 100, "announces 1000000000000 bytes; the file has 100: refused"),
        ("huge-length", None, "announces 1000000000000 bytes; the file has at most 68719476736: refused"),
        ("negative-length", 100, "a malformed Content-Length '-1': refused"),
        ("bad-length", 100, "Content-Length sent twice with different values"),
        ("gzip", 100, "a gzip-encoded body, which was not asked for: refused"),
        ("bad-range", 100, "HTTP 206 to a request for the whole file: refused"),
        ("to-file", 100, "redirects to file:///etc/passwd, not an http(s) URL: refused"),
        ("redirect-loop", 100, "more than 5 redirects"),
        ("endless-chunked", None, "sends more than the file's 1000 bytes: refused"),
    ],
)
def test_hostile_mirror_answers_are_refused(dest, case, size, why):
    spec = {"path": case, "sha256": "0" * 64, "name": "x", **({"size": size} if size else {})}
    with HostileServer() as srv:
        _, failure = fetch(dest, [spec], [srv.url], max_size=1000 if case.startswith("endless") else 64 << 30)
    assert failure is not None and why in failure, failure
    assert os.listdir(dest) in ([], [".x.envkit-part"])
    assert not (dest / "x").exists()


def test_a_range_answered_with_another_range_starts_over(dest):
    """A part is held: the mirror answers its range with bytes 0-1 of another file: none of it is used, the file is
    asked for whole (here the same bad answer again, refused; the part is left as it was)."""
    (dest / ".x.envkit-part").write_bytes(b"held")
    with HostileServer() as srv:
        _, failure = fetch(dest, [{"path": "bad-range", "sha256": "0" * 64, "name": "x", "size": 100}], [srv.url])
        assert [m for m, _ in srv.requests] == ["GET", "GET"]
    assert failure is not None and "HTTP 206 to a request for the whole file: refused" in failure
    assert (dest / ".x.envkit-part").read_bytes() == b"held"  # nothing of either answer was written


@pytest.mark.parametrize(("hops", "ok"), [(5, True), (6, False)])
def test_redirects_are_followed_to_http_five_hops_at_most(dest, hops, ok):
    spec = {"path": f"chain/{hops}", "sha256": _sha(OK_JSON), "name": "x", "size": len(OK_JSON)}
    with HostileServer() as srv:
        _, failure = fetch(dest, [spec], [srv.url])
    assert (failure is None) == ok, failure


def test_downloads_run_side_by_side_bounded(root, dest):
    files = []
    for i in range(5):
        (root / "vendor" / f"f{i}.run").write_bytes(b"abc")
        files.append({"path": f"vendor/f{i}.run", "sha256": _sha(b"abc"), "size": 3})
    with RangeMirror(root, drip=4) as m:  # about 1 s a file
        t0 = time.monotonic()
        _, failure = fetch(dest, files, [m.url], parallel=2)
        took = time.monotonic() - t0
    assert failure is None and m.peak == 2 and took >= 2


def test_check_mode_asks_and_writes_nothing(root, dest, tmp_path):
    (tmp_path / "empty").mkdir()
    (dest / "driver.run").write_bytes(b"old")
    with RangeMirror(tmp_path / "empty") as empty, RangeMirror(root) as good:
        results, failure = fetch(dest, [driver()], [empty.url, good.url], check_mode=True)
        assert failure is None and (results[0]["changed"], results[0]["mirror"]) == (True, good.url)
        assert [e.get("method") for e in empty.log + good.log] == ["HEAD", "HEAD"]
        results, failure = fetch(dest, [driver()], [empty.url], check_mode=True)
    assert failure is not None and "HTTP 404" in failure
    assert os.listdir(dest) == ["driver.run"] and (dest / "driver.run").read_bytes() == b"old"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"path": "vendor/x", "sha256": "0" * 64, "name": "../x"}, "not a plain file name"),
        ({"path": "vendor/x", "sha256": "0" * 64, "name": "a/b"}, "not a plain file name"),
        ({"path": "/etc/passwd", "sha256": "0" * 64}, "not a path in the bundle"),
        ({"path": "vendor/x", "sha256": "abc"}, "not a sha256"),
        ({"path": "vendor/x", "sha256": "0" * 64, "size": -1}, "out of range"),
    ],
)
def test_bad_file_specs_are_refused_before_any_request(dest, spec, why):
    with pytest.raises(ValueError, match=why):
        fetch(dest, [spec], ["http://127.0.0.1:1"])


def test_a_missing_folder_is_named_after_each_try(root, tmp_path):
    with RangeMirror(root) as m:
        _, failure = fetch(tmp_path / "nope", [driver()], [m.url])
    assert failure is not None and f"the folder {tmp_path / 'nope'} does not exist" in failure


def test_a_whole_part_of_unknown_size_is_checked_and_a_416_starts_over(root, dest):
    """A part as long as its file: with the size known it is hashed and placed with no request; without it, the
    range asked for starts at the end (416, as `envkit bundle serve` answers it): the file is asked for whole."""
    (dest / ".driver.run.envkit-part").write_bytes(DATA)
    with RangeMirror(root) as m:
        results, failure = fetch(dest, [driver()], [m.url])
        assert failure is None and m.log == [] and results[0]["resumed"] == len(DATA)
        (dest / "driver.run").unlink()
        (dest / ".driver.run.envkit-part").write_bytes(DATA)
        results, failure = fetch(dest, [driver(size=None)], [m.url])
    assert failure is None and [(e["range"], e["status"]) for e in m.log] == [(f"bytes={len(DATA)}-", 416), (None, 200)]
    assert (dest / "driver.run").read_bytes() == DATA

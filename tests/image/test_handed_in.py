"""The files handed in are read into data once (`envkit.artifacts.handed`), and the image plan reads that listing,
never the folder: the plan made from a listing is the same after the folder is gone; a signed zip found, its bare
.run is not read; a lock without Python pins is refused before any vendor package is hashed (gigabytes)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from envkit.artifacts.handed import HandedIn, pick, scan, with_vendor
from envkit.errors import BadInput
from envkit.export.image import plan_build, plan_python, vendor_wanted
from envkit.lock.file import read_lock

from .conftest import GOLDEN_CASES, fake_requirements, fixture_installers, resolve_lock


def test_pick_takes_the_exact_name_else_the_first_match_of_the_pattern() -> None:
    names = ["b-8.5.0.run", "a-8.5.0.run", "a.zip"]
    assert pick(names, "a.zip", "a.zip") == "a.zip"
    assert pick(names, "c.zip", "c.zip") is None  # a named file is that file or none (no pattern fallback)
    assert pick(names, None, "*-8.5.0.run") == "a-8.5.0.run"  # sorted: the first of the matches
    assert pick(names, None, "*.RUN") is None  # case counts, as the vendor's names and a Linux glob have it
    assert pick([], None, "*") is None


def test_a_signed_zip_found_its_bare_run_is_not_hashed(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "pkg.zip", "w") as zf:
        zf.writestr("sub/pkg-1.run", b"run")
        zf.writestr("pkg-1.run.sig", b"sig")
    (tmp_path / "pkg-1.run").write_bytes(b"bare")
    hashed: list[str] = []

    def hasher(p: Path) -> str:
        hashed.append(p.name)
        return "h-" + p.name

    got = with_vendor(scan(tmp_path, hasher=hasher), [(("pkg.zip", "pkg.zip"), (None, "pkg-*.run"))], hasher)
    assert hashed == ["pkg.zip"]
    assert got.vendor["pkg.zip"].members == ("pkg-1.run.sig", "sub/pkg-1.run")
    assert got.member("pkg.zip", "pkg-*.run") == "sub/pkg-1.run"
    (tmp_path / "pkg.zip").unlink()  # no zip: the .run, the next file tried, is the one hashed
    hashed.clear()
    assert set(with_vendor(scan(tmp_path, hasher=hasher), [(("pkg.zip", "pkg.zip"), (None, "pkg-*.run"))], hasher).vendor) == {
        "pkg-1.run"
    }
    assert hashed == ["pkg-1.run"]


def test_scan_refuses_a_folder_that_is_not_one_and_lists_only_files(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="is not a directory"):
        scan(tmp_path / "f")
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a-1-py3-none-any.whl").write_bytes(b"w")
    (tmp_path / "top-1-py3-none-any.whl").write_bytes(b"t")  # a wheels/ folder is the wheelhouse: this is not in it
    listing = scan(tmp_path)
    assert listing.names == ("f", "top-1-py3-none-any.whl")
    assert [w.name for w in listing.wheels] == ["a-1-py3-none-any.whl"]
    assert scan(tmp_path, wheelhouse=False).wheels == ()
    assert scan(None) == HandedIn()


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    d = tmp_path_factory.mktemp("handed")
    lock = resolve_lock(GOLDEN_CASES["910b-aarch64-cann8.0.0"], d / "envkit.lock")
    return lock, fixture_installers(lock, d / "arts"), fake_requirements(lock, d / "r.txt")


def test_the_plan_reads_the_listing_not_the_folder(locked, tmp_path: Path) -> None:
    lock_path, arts, reqs = locked
    lock = read_lock(lock_path)
    handed = with_vendor(scan(arts, reqs), vendor_wanted(lock))
    before = plan_build(lock, generated_by="t", handed=handed)
    assert before.steps and all(s.source is not None for s in before.steps)
    gone = tmp_path / "gone"
    arts.rename(gone)  # the folder is no longer there: a plan that looked at it would fail or change
    try:
        after = plan_build(lock, generated_by="t", handed=handed)
    finally:
        gone.rename(arts)
    assert after.steps == before.steps and after.requirements == before.requirements


def test_a_lock_without_python_pins_is_refused_before_a_vendor_package_is_hashed(locked, monkeypatch) -> None:
    import envkit.artifacts.handed as handed_mod
    from envkit.jobs.image import plan_lock

    lock_path, arts, _reqs = locked
    lock = read_lock(lock_path)
    assert lock.python.closure is None  # `envkit resolve` writes no closure: no pins without --requirements

    def hashed(*_a, **_k):
        raise AssertionError("a vendor package was hashed before the Python pins were checked")

    monkeypatch.setattr(handed_mod, "with_vendor", hashed)
    with pytest.raises(BadInput, match="no hashed Python pins"):
        plan_lock(lock, generated_by="t", artifacts=arts)
    with pytest.raises(BadInput, match="no hashed Python pins"):
        plan_python(lock, scan(arts))

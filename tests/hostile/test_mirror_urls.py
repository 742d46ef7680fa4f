"""http:/file: URLs in a lock lie under a mirror the closure records, judged on what they mean: percent-decoded until
stable (at most three rounds), no `.`/`..` segment, backslash, NUL or control character in any form on the way
(corpus: tests/hostile/mirror_urls/). Through `is_mirrored`, the lock schema, `envkit validate` and `envkit bundle
build` (exit 2, the key named, nothing fetched), `mirror_prefix` (what `envkit lock` records) and the download of a
`file:` URL (it opens the path the check decoded)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput, CheckFailed

CORPUS = Path(__file__).parent / "mirror_urls"
MIRRORS = ["file:///srv/wheels/", "http://127.0.0.1:8080/", "http://10.0.0.1:81/pypi/"]


def _urls(name: str) -> list[str]:
    lines = (CORPUS / name).read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


REFUSED = _urls("refused.txt")
ACCEPTED = _urls("accepted.txt")


def test_the_corpus_is_what_it_says():
    assert len(REFUSED) >= 45 and len(ACCEPTED) >= 20 and not set(REFUSED) & set(ACCEPTED)


@pytest.mark.parametrize("url", REFUSED)
def test_is_mirrored_refuses(url):
    from envkit.models.lock import is_mirrored, mirror_refusal

    assert not is_mirrored(url, MIRRORS)
    assert mirror_refusal(url, MIRRORS) in ("is neither https nor under a mirror the closure records",) or mirror_refusal(
        url, MIRRORS
    ).startswith("is refused: its path")


@pytest.mark.parametrize("url", ACCEPTED)
def test_is_mirrored_accepts(url):
    from envkit.models.lock import is_mirrored

    assert is_mirrored(url, MIRRORS)


def test_decoding_rounds_are_bounded_on_both_sides_of_three():
    from envkit.io.urlpath import MAX_DECODE_ROUNDS, decoded_path

    assert MAX_DECODE_ROUNDS == 3

    def plus(times: int) -> str:  # `+` percent-encoded `times` times
        return "file:///srv/wheels/a" + ("%" + "25" * (times - 1) + "2B" if times else "+")

    for times in range(MAX_DECODE_ROUNDS + 1):
        expected = "/srv/wheels/a" + ("%" + "25" * (times - 2) + "2B" if times >= 2 else "+")
        assert decoded_path(plus(times)) == expected  # decoded once: what the URL names
    with pytest.raises(ValueError, match="still percent-encoded after 3 decodings"):
        decoded_path(plus(MAX_DECODE_ROUNDS + 1))
    # a climb hidden under exactly three encodings is found; under four it is refused as still changing
    with pytest.raises(ValueError, match="'..' segment"):
        decoded_path("file:///srv/wheels/%25252e%25252e/x")
    with pytest.raises(ValueError, match="still percent-encoded"):
        decoded_path("file:///srv/wheels/%2525252e%2525252e/x")


@pytest.mark.parametrize(
    "mirror",
    ["file:///srv/%2e%2e/", "file:///srv/..%2fetc/", "file:///srv/%252e%252e/", "http://127.0.0.1:8080/%5c/", "file:///srv/%00/"],
)
def test_a_recorded_mirror_that_climbs_is_refused(mirror):
    from pydantic import ValidationError

    from envkit.models.lock import PythonClosure

    with pytest.raises(ValidationError, match="is refused: its path"):
        PythonClosure.model_validate(_closure("https://files.example/alpha-1.0-py3-none-any.whl", [mirror]))
    PythonClosure.model_validate(_closure("https://files.example/alpha-1.0-py3-none-any.whl", ["file:///srv/ok%20folder/"]))


# --- through a command that reads a lock --------------------------------------------------------------------
def _closure(url: str, mirrors: list[str] = MIRRORS, key: str = "packages") -> dict:
    doc = {
        "target": {"python": "3.10", "arch": "aarch64", "glibc": "2.28", "platform": "manylinux_2_28_aarch64"},
        "roots": ["alpha"],
        "index_url": "https://pypi.org/simple",
        "resolver": "test",
        "mirrors": mirrors,
        "packages": [
            {
                "name": "alpha",
                "version": "1.0",
                "filename": "alpha-1.0-py3-none-any.whl",
                "url": "https://files.example/alpha-1.0-py3-none-any.whl",
                "sha256": "0" * 64,
                "size": 1,
            }
        ],
    }
    if key == "packages":
        doc["packages"][0]["url"] = url
    elif key == "index_url":
        doc["index_url"] = url
    else:
        doc[key] = [url]
    return doc


def _lock(lock_doc: dict, tmp_path: Path, closure: dict, name: str = "mirrored.lock") -> Path:
    doc = copy.deepcopy(lock_doc)
    doc["python"]["closure"] = closure
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


KEYS = {
    "packages": "packages.alpha.url",
    "index_url": "index_url",
    "extra_index_urls": "extra_index_urls",
    "find_links": "find_links",
}


@pytest.mark.parametrize("url", REFUSED)
def test_validate_refuses_a_lock_with_the_url_exit_2_naming_the_key(url, lock_doc, tmp_path, run_cli):
    r = run_cli("validate", str(_lock(lock_doc, tmp_path, _closure(url))))
    assert r.code == 2, (r.out, r.err)
    assert "packages.alpha.url" in r.err and repr(url[:120]) in r.err and "key 'python.closure'" in r.err, r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("key", sorted(KEYS))
def test_every_url_of_a_closure_is_checked(key, lock_doc, tmp_path, run_cli):
    bad = "http://127.0.0.1:8080/simple/..%2f..%2fadmin"
    r = run_cli("validate", str(_lock(lock_doc, tmp_path, _closure(bad, key=key))))
    assert r.code == 2 and f"{KEYS[key]}: {bad!r} is refused" in r.err, r.err
    good = "http://127.0.0.1:8080/simple"
    assert run_cli("validate", str(_lock(lock_doc, tmp_path, _closure(good, key=key)))).code == 0


@pytest.mark.parametrize(
    "url", [u for u in ACCEPTED if not u.startswith("https") and not u.rstrip("/").endswith(("wheels", "8080", "pypi", "simple"))]
)
def test_validate_accepts_a_lock_with_the_url(url, lock_doc, tmp_path, run_cli):
    r = run_cli("validate", str(_lock(lock_doc, tmp_path, _closure(url))))
    assert r.code == 0 and "valid" in r.out, (r.out, r.err)


def test_bundle_build_refuses_the_lock_before_anything_is_copied(lock_doc, tmp_path, run_cli, monkeypatch):
    """The reported case: a `file:` URL that climbed out of its mirror with `..%2f` was copied into the bundle."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "alpha-1.0-py3-none-any.whl").write_bytes(b"not yours")
    mirror = tmp_path / "wheels"
    mirror.mkdir()
    url = mirror.as_uri() + "/..%2fsecret/alpha-1.0-py3-none-any.whl"
    closure = _closure(url, [mirror.as_uri() + "/"])
    closure["packages"][0].update(sha256=hashlib.sha256(b"not yours").hexdigest(), size=9)
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "bundle"
    r = run_cli("bundle", "build", "--lock", str(_lock(lock_doc, tmp_path, closure)), "-o", str(out))
    assert r.code == 2 and "packages.alpha.url" in r.err and "'..' segment" in r.err, r.err
    assert not out.exists() and not (tmp_path / "cache").exists()


# --- what `envkit lock` records, and what a download opens -----------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "file:///srv/wheels/..%2f..%2fetc",
        "file:///srv/%2e%2e/etc",
        "file:///srv/%252e%252e/etc",
        "file:///srv/wheels%5c..",
        "http://127.0.0.1:8080/..%2f..%2f/simple",
        "http://127.0.0.1:8080/simple%00",
        "file://evil.example/srv/wheels",
    ],
)
def test_mirror_prefix_refuses_a_source_that_climbs(source):
    from envkit.artifacts.closure import mirror_prefix

    with pytest.raises(BadInput, match="is refused|names a host") as exc:
        mirror_prefix(source)
    assert exc.value.exit_code == 2


def test_mirror_prefix_stands_for_the_decoded_folder(tmp_path):
    from envkit.artifacts.closure import mirror_prefix

    folder = tmp_path / "my wheels+1"
    folder.mkdir()
    encoded = folder.as_uri()
    assert "%20" in encoded and "%2B" in encoded
    assert mirror_prefix(encoded) == encoded + "/"
    assert mirror_prefix(encoded.replace("%2B", "+")) == encoded + "/"
    assert mirror_prefix(encoded + "/simple") == encoded + "/"  # a PEP 503 file index: its files beside it
    assert mirror_prefix("http://127.0.0.1:8080/simple/%2Btorch") == "http://127.0.0.1:8080/"
    assert mirror_prefix("https://pypi.org/simple") is None


def _climbs(url: str) -> bool:
    from envkit.io.urlpath import decoded_path

    try:
        decoded_path(url)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("url", [u for u in REFUSED if u.startswith("file:") and _climbs(u)])
def test_a_download_never_opens_a_file_url_whose_path_is_refused(url):
    from envkit.artifacts import download

    with pytest.raises(CheckFailed, match="alpha.whl: the URL .* is refused: its path"):
        download._open_local(download.Fetch(url, "0" * 64, 1, "alpha.whl"))


def test_a_download_opens_the_path_the_check_decoded(tmp_path):
    """`%2B` names a `+`; `%252B` names a literal `%2B` (one decoding: what the URL says), never a `+`."""
    from envkit.artifacts import download

    folder = tmp_path / "wheels"
    folder.mkdir()
    plus, literal = b"the plus wheel", b"the literal wheel"
    (folder / "alpha-1.0+local-py3-none-any.whl").write_bytes(plus)
    (folder / "alpha-1.0%2Blocal-py3-none-any.whl").write_bytes(literal)
    cache = download.WheelCache(tmp_path / "cache")
    items = [
        download.Fetch(folder.as_uri() + "/alpha-1.0%2Blocal-py3-none-any.whl", hashlib.sha256(plus).hexdigest(), 14, "a.whl"),
        download.Fetch(
            folder.as_uri() + "/alpha-1.0%252Blocal-py3-none-any.whl", hashlib.sha256(literal).hexdigest(), 17, "b.whl"
        ),
    ]
    download.Downloader(cache, retries=1, backoff=0).fetch_all(items)
    assert cache.path(hashlib.sha256(plus).hexdigest()).read_bytes() == plus
    assert cache.path(hashlib.sha256(literal).hexdigest()).read_bytes() == literal
    bad = download.Fetch(folder.as_uri() + "/..%2fwheels/alpha-1.0+local-py3-none-any.whl", "1" * 64, 14, "c.whl")
    with pytest.raises(CheckFailed, match="c.whl: the URL .* is refused: its path has a '..' segment"):
        download.Downloader(cache, retries=1, backoff=0).fetch_all([bad])

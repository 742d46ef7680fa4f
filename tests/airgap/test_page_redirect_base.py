"""An index project page that redirects (issue #35): its relative links resolve against the URL that answered, after
the redirect (pip's `response.url`), never against the one asked for, for a PEP 503 HTML page and a PEP 691 JSON
page alike; otherwise no link matches the file the resolver picked and every published hash is lost.

A real HTTP server on 127.0.0.1 (`tests/airgap/indexshapes.py`'s `Index`) answers `/simple/pkg/` with a 302 to
`/other/deeper/pkg/`, a page one folder deeper, so that each relative link names another file depending on the base:
`../../files/...` is `/other/files/...` from the page and `/files/...` from the URL asked for. Held through
`read_page` (`envkit.artifacts.index`), `httpclient.open_url`'s `Response.url`, and the closure's `published` lookup
(`complete_from_download`: the published sha256 is kept, not computed)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.airgap.indexshapes import Index, Routes

SDIST = b"pkg 1.0 sdist bytes"
WHEEL = b"pkg 1.1 wheel bytes"
SHA_SDIST = hashlib.sha256(SDIST).hexdigest()
SHA_WHEEL = hashlib.sha256(WHEEL).hexdigest()
ASKED, ANSWERED = "/simple/pkg/", "/other/deeper/pkg/"


def _routes(kind: str, location: str) -> Routes:
    html = (
        "<html><body>\n"
        f'<a href="../../files/pkg-1.0.tar.gz#sha256={SHA_SDIST}">pkg-1.0.tar.gz</a>\n'
        f'<a href="pkg-1.1-py3-none-any.whl#sha256={SHA_WHEEL}" data-size="{len(WHEEL)}">pkg-1.1-py3-none-any.whl</a>\n'
        "</body></html>\n"
    )
    doc = json.dumps(
        {
            "meta": {"api-version": "1.0"},
            "name": "pkg",
            "files": [
                {"filename": "pkg-1.0.tar.gz", "url": "../../files/pkg-1.0.tar.gz", "hashes": {"sha256": SHA_SDIST}},
                {
                    "filename": "pkg-1.1-py3-none-any.whl",
                    "url": "pkg-1.1-py3-none-any.whl",
                    "hashes": {"sha256": SHA_WHEEL},
                    "size": len(WHEEL),
                },
            ],
        }
    )
    return Routes(pages={ANSWERED: (html, doc if kind == "json" else None)}, redirects={ASKED: location}, page_prefix="/none/")


# the Location as a server writes it: an absolute URL, an absolute path, a path relative to the URL asked for
LOCATIONS = ["absolute", "path", "relative"]


def _location(style: str, origin: str) -> str:
    return {"absolute": origin + ANSWERED, "path": ANSWERED, "relative": "../../other/deeper/pkg/"}[style]


@pytest.mark.parametrize("style", LOCATIONS)
@pytest.mark.parametrize("kind", ["html", "json"])
def test_relative_links_resolve_against_the_url_answered(kind, style):
    from envkit.artifacts.index import PAGE, link_key, read_page
    from envkit.io import httpclient

    with Index(_routes(kind, "")) as idx:
        idx.routes.redirects[ASKED] = _location(style, idx.url)
        with httpclient.open_url(idx.url + ASKED, PAGE) as resp:
            assert resp.status == 200 and resp.url == idx.url + ANSWERED  # the URL after the redirect
        got = read_page(idx.url + ASKED)
        served = [path for _, path, _ in idx.requests[-2:]]
    assert served == [ASKED, ANSWERED]
    sdist = link_key(f"{idx.url}/other/files/pkg-1.0.tar.gz")
    wheel = link_key(f"{idx.url}/other/deeper/pkg/pkg-1.1-py3-none-any.whl")
    assert sorted(got) == sorted([sdist, wheel]), f"keys resolved against another base: {sorted(got)}"
    assert got[sdist].hashes == {"sha256": SHA_SDIST}
    assert (got[wheel].hashes, got[wheel].size) == ({"sha256": SHA_WHEEL}, len(WHEEL))
    # against the URL asked for the same links would name these: none of them may appear
    assert not {link_key(f"{idx.url}/files/pkg-1.0.tar.gz"), link_key(f"{idx.url}/simple/pkg/pkg-1.1-py3-none-any.whl")} & set(
        got
    )


@pytest.mark.parametrize("kind", ["html", "json"])
def test_without_a_redirect_the_links_resolve_against_the_page(kind):
    """The control: the page asked for directly gives the same keys (the base is the page's own URL)."""
    from envkit.artifacts.index import link_key, read_page

    with Index(_routes(kind, "")) as idx:
        got = read_page(idx.url + ANSWERED)
    assert sorted(got) == sorted(
        [link_key(f"{idx.url}/other/files/pkg-1.0.tar.gz"), link_key(f"{idx.url}/other/deeper/pkg/pkg-1.1-py3-none-any.whl")]
    )


@pytest.mark.parametrize("kind", ["html", "json"])
def test_the_closure_keeps_the_published_sha256_of_a_redirected_page(kind, tmp_path):
    """What the base is for: the file the resolver picked (its URL as the index's page names it, without a hash, as
    uv gives a link it hashed itself) finds its published sha256 on the redirected page: recorded as published
    (`computed=False`), nothing downloaded."""
    from envkit.artifacts.closure import ClosurePlan, Picked, complete_from_download, make_target
    from envkit.artifacts.download import WheelCache

    with Index(_routes(kind, ANSWERED)) as idx:
        plan = ClosurePlan(roots=("pkg",), target=make_target("3.10", "aarch64"), index_url=idx.url + "/simple/")
        url = f"{idx.url}/other/deeper/pkg/pkg-1.1-py3-none-any.whl"
        done = complete_from_download(plan, WheelCache(tmp_path / "cache"))(
            Picked("pkg", "1.1", "pkg-1.1-py3-none-any.whl", url, {}, None)
        )
        fetched = [path for _, path, _ in idx.requests if path.endswith((".whl", ".tar.gz"))]
    assert (done.sha256, done.size, done.computed) == (SHA_WHEEL, len(WHEEL), False)
    assert fetched == []  # the page gave the sha256 and the size: no file was asked for

"""The index page reader (`envkit.artifacts.index`) at the edges `make mutation MODULES=index` left unchecked: the
markup corners where a `<` does or does not start something (a comment holding `>` or ending in `<!`, a `<?>`, a
`<<a`, an end tag or declaration holding an anchor, a `</script` inside the script tag's own attribute, a page
beginning with `/>` or one character before its first tag, a one-letter self-closing tag, an attribute cut at the
page's end, a bare value starting with `X`), each held against what html.parser (pip's reader) finds; a link's
fragment from its first `#`; a relative `<base href>`; a PEP 691 page's bad rows, missing keys and size 0; the URL of a
project page; and `read_page` against a real server on 127.0.0.1: the Accept header it sends, the redirect check it
passes on, the Content-Type with parameters, and a body that is not UTF-8."""

from __future__ import annotations

import http.server
import json

import pytest

from envkit.artifacts.index import (
    ACCEPT,
    JSON_TYPE,
    Published,
    _anchors,
    link_key,
    parse_html,
    parse_json,
    project_page,
    read_page,
)
from envkit.errors import BadInput
from envkit.io.httpclient import HTTPFailure
from tests.airgap.httpserve import Threaded
from tests.hostile.test_index_pages import _reference

URL = "http://h/simple/p/"

# page -> the hrefs a reader finds in it, in order (html.parser finds the same: checked below)
PAGES = {
    # a `<` followed by `<`: the first is text, the second starts the anchor
    '<<a href="x.whl">x</a>': ["x.whl"],
    # a processing instruction that closes at once: the anchor after it counts
    '<?><a href="x.whl">x</a>': ["x.whl"],
    # ... and one that holds an anchor hides it (it ends at the first `>`)
    '<?x <a href="no.whl"> ?><a href="yes.whl">y</a>': ["yes.whl"],
    # an end tag or a declaration ends at its first `>`: an anchor inside is not one
    '</x <a href="no.whl"><a href="yes.whl">y</a>': ["yes.whl"],
    '<p>t<!x <a href="no.whl"><a href="yes.whl">y</a>': ["yes.whl"],
    # a comment ends at `-->`, not at a `>` inside it
    '<!-- a > b <a href="hidden.whl"> --><a href="shown.whl">s</a>': ["shown.whl"],
    # a comment whose text ends in `<!`: the `-->` still closes it, and nothing of it opens another comment
    '<!--x<!--><a href="shown.whl">s</a>': ["shown.whl"],
    # `</script` inside the script tag's own attribute does not end the script: its content is still text
    '<script x="</script>"><a href="in.whl"></script><a href="out.whl">o</a>': ["out.whl"],
    # the character right after a tag's `>` is read
    '<b><a href="x.whl">x</a>': ["x.whl"],
    # a page that begins with `/>`: a later tag is read from its own position
    '/><a href="x.whl">x</a>': ["x.whl"],
    # an attribute with `=` and nothing after it at the page's end: the rest is text, the links before it stay
    '<a href="x.whl">x</a><a href=': ["x.whl"],
    # only `"` and `'` quote a value: a bare one may start with any other character
    "<a href=Xfoo.whlX>f</a>": ["Xfoo.whlX"],
    # a valueless attribute right before `/>` is kept, whatever its name (html.parser keeps it too)
    '<a href="y.whl" XX/>XX<a href="z.whl">z</a>': ["y.whl", "z.whl"],
}


@pytest.mark.parametrize("page", list(PAGES))
def test_where_a_less_than_starts_something_and_where_it_is_text(page):
    got = parse_html(page, URL)
    assert list(got) == [link_key(URL + href) for href in PAGES[page]]
    assert _anchors(page) == _reference(page)


@pytest.mark.parametrize(
    "page",
    [
        '<b/><a href="x.whl">x</a><a href="y.whl">y</a>',  # a one-letter self-closing tag first
        '\n<a href="x.whl">x</a><a href="y.whl">y</a>',  # the first `<` one character into the page
    ],
)
def test_the_reader_moves_past_each_tag_of_a_page(page):
    """Read once, each anchor once, in order (a reader that steps back onto a tag it has read never ends)."""
    assert list(parse_html(page, URL)) == [link_key(URL + "x.whl"), link_key(URL + "y.whl")]
    assert _anchors(page) == _reference(page)


def test_a_link_s_fragment_starts_at_its_first_hash():
    """The hashes are read as pip's pattern reads them, from the first `#` on: a value runs to the next `&`, so
    `#sha256=` after a hash's value is part of that value, while after a piece that is no hash it is a hash of its
    own; the link's key drops everything from the first `#`."""
    page = '<a href="a.whl#md5=00#sha256=FF">a</a><a href="b.whl#x#sha256=' + "C" * 64 + '">b</a>'
    got = parse_html(page, URL)
    assert got == {
        URL + "a.whl": Published({"md5": "00#sha256=ff"}),
        URL + "b.whl": Published({"sha256": "c" * 64}),
    }
    assert link_key("http://h/a%2Bb.whl#md5=0#x") == "http://h/a+b.whl"


def test_a_relative_base_href_resolves_against_the_page_url():
    got = parse_html('<base href="/files/"><a href="p.whl">p</a>', "http://h/simple/p/")
    assert list(got) == ["http://h/files/p.whl"]


def test_a_json_page_skips_its_bad_rows_and_keeps_the_good_ones_after_them():
    doc = {
        "files": [
            "x.whl",  # not a mapping
            {"url": 5},  # a url that is not a string
            {"filename": "n.whl"},  # no url
            {"url": "a.whl"},  # no hashes, no size
            {"url": "b.whl", "hashes": ["sha256"], "size": 0},  # hashes not a mapping; size 0 is a size
            {"url": "c.whl", "hashes": {"SHA256": " AB ", "md5": 1}, "size": -1},
        ]
    }
    got = parse_json(json.dumps(doc).encode(), URL)
    assert got == {
        URL + "a.whl": Published({}, None),
        URL + "b.whl": Published({}, 0),
        URL + "c.whl": Published({"sha256": "ab"}, None),
    }


@pytest.mark.parametrize("doc", [b"{}", b'{"files": null}', b'{"files": {"url": "a.whl"}}', b"[]", b'"files"'])
def test_a_json_page_without_a_list_of_files_publishes_nothing(doc):
    assert parse_json(doc, URL) == {}


def test_a_json_page_that_is_not_json_names_its_url():
    with pytest.raises(BadInput) as err:
        parse_json(b"{not json", URL)
    assert err.value.message.startswith(URL + ": not JSON")


@pytest.mark.parametrize(
    ("index", "want"),
    [
        ("https://h/simple", "https://h/simple/torch-npu/"),
        ("http://h/simple/", "http://h/simple/torch-npu/"),
        ("https://h/INDEX/?token=1#top", "https://h/INDEX/torch-npu/"),  # the query and fragment are dropped
        ("https://h:8443/a/X//", "https://h:8443/a/X/torch-npu/"),
        ("file:///srv/simple", None),
        ("/srv/simple", None),
    ],
)
def test_a_project_page_url(index, want):
    assert project_page(index, "Torch_NPU") == want


# --- read_page against a server on 127.0.0.1 -------------------------------------------------------------------------


class _Server(Threaded):
    """Answers path -> (status, Content-Type, body, extra headers); `seen` keeps each request's (path, Accept)."""

    def __init__(self, answers: dict[str, tuple[int, str, bytes, dict[str, str]]]) -> None:
        self.answers, self.seen = answers, []
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                server.seen.append((self.path, self.headers.get_all("Accept")))
                status, ctype, body, extra = server.answers.get(self.path, (404, "text/plain", b"", {}))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        super().__init__(H)


def _json_page(url: str) -> bytes:
    return json.dumps({"files": [{"url": url, "hashes": {"sha256": "ab"}}]}).encode()


def test_read_page_asks_as_pip_does():
    with _Server({"/simple/p/": (200, "text/html", b'<a href="p.whl">p</a>', {})}) as s:
        assert list(read_page(s.url + "/simple/p/")) == [s.url + "/simple/p/p.whl"]
    assert s.seen == [("/simple/p/", [ACCEPT])]


@pytest.mark.parametrize(
    "ctype", [JSON_TYPE, JSON_TYPE + "; charset=utf-8", JSON_TYPE.upper() + " ;charset=utf-8; x=1", " " + JSON_TYPE]
)
def test_read_page_takes_the_json_type_with_or_without_parameters(ctype):
    with _Server({"/p/": (200, ctype, _json_page("p.whl"), {})}) as s:
        assert read_page(s.url + "/p/") == {s.url + "/p/p.whl": Published({"sha256": "ab"})}


@pytest.mark.parametrize("ctype", ["application/json", "text/plain; x=text/html", "", "application/octet-stream"])
def test_read_page_reads_nothing_of_another_type(ctype):
    with _Server({"/p/": (200, ctype, _json_page("p.whl"), {})}) as s:
        assert read_page(s.url + "/p/") == {}


def test_read_page_reads_an_html_page_that_is_not_utf8_with_replacements():
    body = b'<a href="caf\xe9.whl">\xff</a><a href="b.whl">b</a>'
    with _Server({"/p/": (200, "text/html; charset=latin-1", body, {})}) as s:
        assert list(read_page(s.url + "/p/")) == [s.url + "/p/caf\ufffd.whl", s.url + "/p/b.whl"]


def test_read_page_passes_the_redirect_check_on():
    answers = {
        "/a/": (302, "text/plain", b"", {"Location": "/b/"}),
        "/b/": (200, "text/html", b'<a href="p.whl">p</a>', {}),
    }
    with _Server(answers) as s:
        checked: list[str] = []
        assert list(read_page(s.url + "/a/", redirect_check=lambda u: checked.append(u))) == [s.url + "/b/p.whl"]
        assert checked == [s.url + "/b/"]
        with pytest.raises(HTTPFailure) as err:
            read_page(s.url + "/a/", redirect_check=lambda u: "is not under the mirror")
    assert err.value.message == f"{s.url}/a/ redirects to {s.url}/b/, which is not under the mirror; refused"

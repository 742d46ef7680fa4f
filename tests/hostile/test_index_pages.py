"""An index page is read in one pass (`envkit.artifacts.index`), as Python's html.parser reads it for pip, and without its
quadratic rescans: the two are held to agree on one corpus of pages (the index shapes' own markup, and the corners
of HTML a page may use), and the hostile pages that made html.parser take minutes or raise are read at once, with
no traceback. Their times against a benign page of the same size: benchmarks/hostile_parsers.py."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from envkit.artifacts.index import MAX_LINKS, _anchors, parse_html

HASH = "ab" * 32

CORPUS = {
    "pep503": '<!DOCTYPE html>\n<html><body>\n<a href="../../f/pkg-1.0.tar.gz#sha256=' + HASH + '">pkg-1.0.tar.gz</a><br/>\n'
    '<a href="/f/pkg-1.0-py3-none-any.whl#sha256=' + HASH + '" data-requires-python="&gt;=3.8">w</a>\n</body></html>\n',
    "nexus": '<a href="../../packages/p/1.0/p-1.0.tar.gz#md5=00" rel="internal" data-requires-python="&gt;=3.4" >p</a><br/>',
    "artifactory": '<head><meta name="api-version" value="2" /></head><a href="x.whl" rel="internal">x</a><br />',
    "devpi": 'root/pypi <a href="+f/abc/p-1.0.tar.gz#sha256=' + HASH + '">p-1.0.tar.gz</a><br>',
    "base": '<base href="https://files.example/sub/"><base href="/ignored/"><a href="p.whl">p</a>',
    "uppercase": '<A HREF="p.whl" DATA-SIZE="12">p</A><BASE HREF="/b/">',
    "quoted >": '<a href="p.whl#sha256=' + HASH + '" title="a > b">p</a><a href=\'q.whl\' data-x="it\'s">q</a>',
    "unquoted": "<a href=p.whl data-size=7>p</a><a href = q.whl>q</a><a href==r.whl>r</a>",
    "entities": '<a href="p.whl?a=1&amp;b=2&#35;sha256=' + HASH + '">p</a><a href="q&lt;.whl">q</a>',
    "repeated attribute": '<a href="first.whl" href="second.whl">p</a>',
    "empty and bare": '<a href="">e</a><a href>b</a><a>c</a><a data-size="1" href="z.whl" disabled>z</a>',
    "comments": '<!-- <a href="hidden.whl"> --><a href="shown.whl">s</a><!----><a href="after.whl">a</a>',
    "script and style": '<script>var s = "<a href=\'no.whl\'>";</script><STYLE>a{}</style><a href="yes.whl">y</a>',
    "declarations": '<!DOCTYPE html><?xml version="1.0"?></p ><a href="ok.whl">o</a>',
    "self-closing and slashes": '<a/href="s.whl"/><a href="t.whl"/><br/><a / href="u.whl">',
    "stray less-than": '1 < 2 <3 <-- <a href="k.whl">k</a> < a href="not.whl">',
    "newlines in tags": '<a\n  href="n.whl"\n  data-dist-info-metadata="sha256=' + HASH + '"\n>n</a>',
    "unclosed tag at the end": '<a href="first.whl">f</a><a href="cut.whl"',
    "unclosed quote at the end": '<a href="first.whl">f</a><a href="cut.whl>x</a>',
    "unclosed comment": '<a href="first.whl">f</a><!-- <a href="in.whl">',
    "unclosed script": '<a href="first.whl">f</a><script> <a href="in.whl">',
    "junk attributes": '<a "x"=y href="j.whl" =z \'q\'>j</a>',
}


class _Reference(HTMLParser):
    """What pip's parser (html.parser) sees: the first <base href>, the <a href> attributes in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "a" and values.get("href"):
            self.links.append(values)


def _reference(text: str) -> tuple[str | None, list[dict[str, str]]]:
    ref = _Reference()
    ref.feed(text)
    ref.close()
    return ref.base, ref.links


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_one_pass_reader_reads_as_html_parser_does(name):
    page = CORPUS[name]
    assert _anchors(page) == _reference(page), name


def test_the_corpus_reads_what_its_names_say():
    """The corpus is not vacuous: its pages have the links a reader must find, and hide those it must not."""
    found = {name: [a["href"] for a in _anchors(page)[1]] for name, page in CORPUS.items()}
    assert found["comments"] == ["shown.whl", "after.whl"]
    assert found["script and style"] == ["yes.whl"]
    assert found["quoted >"] == [f"p.whl#sha256={HASH}", "q.whl"]
    assert found["repeated attribute"] == ["second.whl"]
    assert found["unclosed tag at the end"] == ["first.whl"]
    assert _anchors(CORPUS["base"])[0] == "https://files.example/sub/"
    got = parse_html(CORPUS["pep503"], "https://index.example/simple/pkg/")
    assert got["https://index.example/f/pkg-1.0.tar.gz"].hashes == {"sha256": HASH}


HOSTILE = {
    "<![": "<![ x" + '<a href="p.whl">p</a>',
    "<![CDATA[": '<![CDATA[ <a href="p.whl"> ]]><a href="q.whl">q</a>',
    "unclosed quotes": '<a href="' * 20_000,
    "unclosed tags": "<a " * 20_000,
    "unclosed comments": '<a href="ok.whl">o</a>' + "<!--" * 20_000,
    "unclosed declarations": "<!x" * 20_000,
    "unclosed end tags": "</a" * 20_000,
    "script openers": "<script>" * 20_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_page_is_read_without_a_traceback(name):
    """Each is read at once (html.parser takes minutes on the 600 kB versions of the unclosed ones, and `<![`
    raises in Pythons before the 2025 fixes); what a link-bearing one holds is still found."""
    base, links = _anchors(HOSTILE[name])
    assert base is None
    if name == "<![CDATA[":
        assert [a["href"] for a in links] == ["q.whl"]
    if name == "unclosed comments":
        assert [a["href"] for a in links] == ["ok.whl"]


def test_the_link_cap_holds_at_both_ends():
    page = '<a href="x.whl">x</a>' * MAX_LINKS
    assert len(_anchors(page)[1]) == MAX_LINKS
    assert len(_anchors(page + '<a href="y.whl">y</a>')[1]) == MAX_LINKS

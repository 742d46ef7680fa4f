"""What a package index publishes about its files: one project page (PEP 503 HTML or PEP 691 JSON) or one
find-links page, read the way pip and uv read it, as untrusted input.

`envkit lock` resolves with uv, whose pylock does not say where a hash came from: for a link without a hash
fragment (the PyTorch nightly index, a find-links page, a devpi `+e/` link) uv downloads the file and writes the
sha256 it computed. So the closure asks the page itself which hashes and size the index published for the file it
picked (`published`), and records a sha256 nobody published as computed.

Reading a page: `Accept` as pip sends it (JSON first, then HTML); a Content-Type other than HTML or the PEP 691
types is not a page (pip skips it too); the body is capped (`PAGE`); relative hrefs resolve against the first
`<base href>`, else the URL after redirects; entities in attributes are decoded; a link's hashes are its
`#algo=hex` fragment (pip's pattern), its size a JSON `size` or the `data-size` uv reads. A page that is not there
(404, 403: download.pytorch.org's answer for an unknown project) publishes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from envkit.artifacts.wheels import normalize
from envkit.io import httpclient

PAGE = httpclient.Limits("an index page", 64 << 20, deadline=120.0)  # download.pytorch.org's torch page: a few MB
MAX_LINKS = 200_000
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPES = ("text/html", "application/vnd.pypi.simple.v1+html")
_HASH = re.compile(r"[#&](sha512|sha384|sha256|sha224|sha1|md5)=([^&]*)")


@dataclass(frozen=True)
class Published:
    """What an index page says of one file: its hashes ({algorithm: hex}, lowercase) and size (None: not given)."""

    hashes: dict[str, str] = field(default_factory=dict)
    size: int | None = None


def link_key(url: str) -> str:
    """A file URL as a page's link and a resolver's URL are compared: without its fragment, percent-decoded."""
    return unquote(url.split("#", 1)[0])


# The page reader: the anchors and the first <base> of an HTML page, read as Python's html.parser reads them for
# pip (tag and attribute names lowercased, an attribute's value unquoted and its character references decoded, the
# last of a repeated attribute kept; comments, declarations, end tags and script/style content skipped; an
# incomplete tag at the end is text), in one pass: html.parser rescans an unclosed tag or quote on every later
# `<`, so a 600 kB page of `<a href="` takes minutes there (and `<![` is a traceback in some Pythons). Each
# position is looked at a bounded number of times: a quote or `>` that is not found is not found after it either.
_TAG_NAME = re.compile(r"[a-zA-Z][^\t\n\r\f />\x00]*")
_GAP = re.compile(r"(?:\s|/(?!>))*")
_ATTR_NAME = re.compile(r"[^\s/>][^\s/=>]*")
_EQUALS = re.compile(r"\s*=+\s*")
_BARE_VALUE = re.compile(r"[^>\s]*")
_RAW_END = {"script": re.compile(r"</script", re.I), "style": re.compile(r"</style", re.I)}


class _Next:
    """The next index of a character at or after a position, for positions that only grow: each character's
    search resumes where it found the last one, so all searches of one page read it at most once per character."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, int] = {}

    def __call__(self, char: str, pos: int) -> int:
        at = self.found.get(char)
        if at is None or (at != -1 and at < pos):
            at = self.text.find(char, pos)
            self.found[char] = at
        return at


def _start_tag(text: str, pos: int, find: _Next) -> tuple[str, dict[str, str | None], int] | None:
    """The start tag at `pos` (just after its `<`): (name, attributes, the position after it); None when the page
    ends inside it (the rest of the page is then text)."""
    m = _TAG_NAME.match(text, pos)
    assert m is not None
    name, pos = m.group().lower(), m.end()
    attrs: dict[str, str | None] = {}
    n = len(text)
    while True:
        pos = _GAP.match(text, pos).end()  # type: ignore[union-attr]  # matches the empty string
        if pos >= n:
            return None
        if text[pos] == ">":
            return name, attrs, pos + 1
        if text.startswith("/>", pos):
            return name, attrs, pos + 2
        m = _ATTR_NAME.match(text, pos)
        if m is None:  # a lone `/` before the end: html.parser's junk, skipped
            pos += 1
            continue
        key, pos = m.group().lower(), m.end()
        eq = _EQUALS.match(text, pos)
        value: str | None = None
        if eq is not None:
            pos = eq.end()
            if pos < n and text[pos] in "\"'":
                close = find(text[pos], pos + 1)
                if close < 0:
                    return None
                value, pos = text[pos + 1 : close], close + 1
            else:
                bare = _BARE_VALUE.match(text, pos)
                assert bare is not None
                value, pos = bare.group(), bare.end()
            value = unescape(value)
        attrs[key] = value


def _anchors(text: str) -> tuple[str | None, list[dict[str, str]]]:
    """(the first <base href>, the <a href> attributes in order) of an HTML page, at most MAX_LINKS anchors."""
    find = _Next(text)
    base: str | None = None
    links: list[dict[str, str]] = []
    pos = 0
    while len(links) < MAX_LINKS:
        lt = find("<", pos)
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            if end < 0:
                break
            pos = end + 3
        elif _TAG_NAME.match(text, lt + 1):
            tag = _start_tag(text, lt + 1, find)
            if tag is None:
                break
            name, attrs, pos = tag
            values = {k: v or "" for k, v in attrs.items()}
            if name == "base" and base is None and values.get("href"):
                base = values["href"]
            elif name == "a" and values.get("href"):
                links.append(values)
            if name in _RAW_END:  # script and style content is text: no tag inside counts
                raw = _RAW_END[name].search(text, pos)
                if raw is None:
                    break
                pos = raw.start()
        elif text.startswith(("</", "<!", "<?"), lt):  # an end tag, a declaration (`<![`), a processing instruction
            gt = find(">", lt + 2)
            if gt < 0:
                break
            pos = gt + 1
        else:  # a `<` that starts nothing: text
            pos = lt + 1
    return base, links


def _fragment_hashes(href: str) -> dict[str, str]:
    _, sep, fragment = href.partition("#")
    if not sep:
        return {}
    return {m[1]: m[2].strip().lower() for m in _HASH.finditer("#" + fragment)}


def parse_html(text: str, url: str) -> dict[str, Published]:
    """{link_key: Published} of an HTML page fetched from `url` (after redirects)."""
    found_base, links = _anchors(text)
    base = urljoin(url, found_base) if found_base else url
    out: dict[str, Published] = {}
    for a in links:
        href = a["href"].strip()
        size = a.get("data-size", "")
        out[link_key(urljoin(base, href))] = Published(
            _fragment_hashes(href), int(size) if re.fullmatch(r"[0-9]{1,15}", size) else None
        )
    return out


def parse_json(raw: bytes, url: str) -> dict[str, Published]:
    """{link_key: Published} of a PEP 691 JSON page (BadInput for JSON envkit will not read: `jsonread`)."""
    from envkit.io.jsonread import parse_json as read

    doc: Any = read(raw, url)
    files = doc.get("files") if isinstance(doc, dict) else None
    out: dict[str, Published] = {}
    for row in files if isinstance(files, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("url"), str):
            continue
        hashes = row.get("hashes")
        hashes = hashes if isinstance(hashes, dict) else {}
        size = row.get("size")
        out[link_key(urljoin(url, row["url"]))] = Published(
            {str(k).lower(): str(v).strip().lower() for k, v in hashes.items() if isinstance(v, str)},
            size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        )
    return out


def read_page(url: str, redirect_check: Any = None) -> dict[str, Published]:
    """The files a page at `url` publishes ({} when it is not there or is not a page)."""
    with httpclient.open_url(url, PAGE, headers={"Accept": ACCEPT}, redirect_check=redirect_check) as resp:
        if resp.status != 200:
            return {}
        ctype = (resp.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if ctype == JSON_TYPE:
            return parse_json(resp.body(), resp.url)
        if ctype.startswith(HTML_TYPES):
            return parse_html(resp.body().decode("utf-8", errors="replace"), resp.url)
        return {}


def project_page(index_url: str, project: str) -> str | None:
    """The URL of `project`'s page on an http(s) index (None for a file: index: a folder publishes no hash)."""
    if not index_url.startswith(("http://", "https://")):
        return None
    parts = urlsplit(index_url)
    return parts._replace(path=parts.path.rstrip("/") + f"/{normalize(project)}/", query="", fragment="").geturl()

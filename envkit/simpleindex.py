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
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from envkit import httpclient
from envkit.wheels import normalize

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


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "a" and values.get("href") and len(self.links) < MAX_LINKS:
            self.links.append(values)


def _fragment_hashes(href: str) -> dict[str, str]:
    _, sep, fragment = href.partition("#")
    if not sep:
        return {}
    return {m[1]: m[2].strip().lower() for m in _HASH.finditer("#" + fragment)}


def parse_html(text: str, url: str) -> dict[str, Published]:
    """{link_key: Published} of an HTML page fetched from `url` (after redirects)."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    base = urljoin(url, parser.base) if parser.base else url
    out: dict[str, Published] = {}
    for a in parser.links:
        href = a["href"].strip()
        size = a.get("data-size", "")
        out[link_key(urljoin(base, href))] = Published(
            _fragment_hashes(href), int(size) if re.fullmatch(r"[0-9]{1,15}", size) else None
        )
    return out


def parse_json(raw: bytes, url: str) -> dict[str, Published]:
    """{link_key: Published} of a PEP 691 JSON page (BadInput for JSON envkit will not read: `jsonread`)."""
    from envkit.jsonread import parse_json as read

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

"""Local stand-ins for the package-index shapes envkit's closure must read (tests; nothing leaves 127.0.0.1).

Each shape follows /work/shared/reference/index-shapes.md section 10 (its recipe) and the page markup its
section quotes; each serves the wheels of one flat folder (`tests/airgap/torchindex.py` makes them, each with a
`<wheel>.metadata` beside it):

- `pytorch`: download.pytorch.org/whl/<variant> (manage.py): static HTML only (the same page whatever the Accept
  header asks for), no `<head>`, hrefs absolute paths with `+` percent-encoded (`/whl/cpu/torch-2.12.0%2Bcpu-...`),
  `#sha256=` (none with `nightly`), the PEP 658/714 attributes where a `.metadata` exists, no size; files shared
  by every variant (everything but the torch family) linked at the prefix root (`/whl/<file>`); 403 for a
  project it does not have (S3);
- `nexus`: `/repository/<repo>/simple/<p>/`, `<meta name="api-version" value="2"/>`, hrefs
  `../../packages/<p>/<version>/<file>#md5=` (an old hosted repository) with `rel="internal"` and a space before
  `>`, HTML only, no metadata attributes: uv reads each wheel's METADATA from the file itself;
- `artifactory`: `/artifactory/api/pypi/<repo>/simple/<p>/`, hrefs `../../packages/packages/<2>/<2>/<hash>/<file>#sha256=`,
  `rel="internal"`, `<br />`, HTML only; a file answers with a 302 to its blob on the same host;
- `devpi`: `/<user>/<index>/+simple/<p>/`, the stage's name as text before each link, hrefs
  `../../+f/<3>/<13>/<file>#sha256=`, and every other file a hashless `+e/` link (mirrored without a hash); PEP 691
  JSON on request (api-version 1.0: no size, no upload-time, no versions), `Vary: Accept, User-Agent`;
- `bandersnatch`: a static tree (`web/simple/<p>/index.html`, `web/packages/<2>/<2>/<60>/<file>`) served by a
  plain static file server (HTML whatever is asked, a 301 from a path without its `/`), hrefs `../../packages/...`
  with `#sha256=` or `#md5=` (its `digest_name`), both metadata attributes, `<!--SERIAL n-->`;
- `flat`: a `--find-links` page (`links.html`) whose relative hrefs point into a subfolder, with no fragment.

`Index` serves one of them; `redirect_files_to` sends every file request to another server (a hostile mirror),
`extra_links` adds raw anchors to a project's page (hostile links), `head=False` answers HEAD with 501.
"""

from __future__ import annotations

import hashlib
import html
import http.server
import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from envkit.artifacts.wheels import normalize
from tests.airgap.httpserve import Threaded

TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def _hex(path: Path, algo: str = "sha256") -> str:
    return hashlib.new(algo, path.read_bytes()).hexdigest()


def _project(f: Path) -> str:
    return normalize(f.name.split("-")[0])


def _version(f: Path) -> str:
    return f.name.split("-")[1]


def _wheels(folder: Path) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for f in sorted(folder.glob("*.whl")):
        out.setdefault(_project(f), []).append(f)
    return out


def _meta_attrs(f: Path) -> str:
    meta = f.with_name(f.name + ".metadata")
    if not meta.is_file():
        return ""
    h = _hex(meta)
    return f' data-dist-info-metadata="sha256={h}" data-core-metadata="sha256={h}"'


def _accept_json(accept: str) -> bool:
    """Whether the Accept header prefers PEP 691 JSON over HTML (q-values; no Accept: HTML)."""
    best: dict[str, float] = {}
    for part in accept.split(","):
        kind, *params = (x.strip() for x in part.split(";"))
        q = 1.0
        for p in params:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        best[kind] = max(q, best.get(kind, 0.0))
    html_q = max(best.get("text/html", 0.0), best.get("application/vnd.pypi.simple.v1+html", 0.0))
    return best.get(JSON_TYPE, 0.0) > html_q


@dataclass
class Routes:
    """What a server answers: pages (path -> (html, json or None)), files (decoded path -> file), redirects
    (path -> location), the status for an unknown project page, and extra headers for pages."""

    pages: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    missing_page: int = 404
    page_prefix: str = "/"
    page_headers: dict[str, str] = field(default_factory=dict)


# --- the shapes -----------------------------------------------------------------------------------------------
def pytorch_routes(
    folder: Path, variant: str = "cpu", nightly: bool = False, upload_time: bool = False, r2: str | None = None
) -> Routes:
    """`r2`: an origin the torch family's hrefs point to, absolute (manage_v2.py: `https://download-r2.pytorch.org/...`)."""
    r = Routes(missing_page=403, page_prefix=f"/whl/{variant}/")
    names = []
    for project, files in _wheels(folder).items():
        lines = []
        for f in files:
            shared = project not in TORCH_FAMILY
            key = f"whl/{f.name}" if shared else f"whl/{variant}/{f.name}"
            r.files["/" + key] = f
            r.files["/" + key + ".metadata"] = f.with_name(f.name + ".metadata")
            origin = r2 if r2 and not shared else ""
            href = f"{origin}/" + key.replace("+", "%2B") + ("" if nightly else f"#sha256={_hex(f)}")
            up = ' data-upload-time="2026-04-23T10:00:00Z"' if upload_time else ""
            lines.append(f'    <a href="{href}"{_meta_attrs(f)}{up}>{f.name}</a><br/>')
        body = ["<!DOCTYPE html>", "<html>", "  <body>", f"    <h1>Links for {project}</h1>", *lines, "  </body>", "</html>"]
        r.pages[f"/whl/{variant}/{project}/"] = ("\n".join(body) + "\n<!--TIMESTAMP 1735900000-->", None)
        names.append(project)
    root = "".join(f'    <a href="{n}/">{n}</a><br/>\n' for n in names)
    r.pages[f"/whl/{variant}/"] = (f"<!DOCTYPE html>\n<html>\n  <body>\n{root}  </body>\n</html>\n", None)
    return r


def nexus_routes(folder: Path, repo: str = "pypi-hosted", digest: str = "md5") -> Routes:
    base = f"/repository/{repo}"
    r = Routes(page_prefix=f"{base}/simple/")
    for project, files in _wheels(folder).items():
        lines = []
        for f in files:
            path = f"{base}/packages/{project}/{_version(f)}/{f.name}"
            r.files[path] = f
            href = f"../../packages/{project}/{quote(_version(f))}/{quote(f.name)}#{digest}={_hex(f, digest)}"
            lines.append(f'  <a href="{href}" rel="internal" data-requires-python="&gt;=3.4" >{html.escape(f.name)}</a><br/>')
        page = (
            f'<!DOCTYPE html>\n<html lang="en">\n<head><title>Links for {project}</title>\n'
            f'  <meta name="api-version" value="2"/>\n</head>\n<body><h1>Links for {project}</h1>\n'
            + "\n".join(lines)
            + "\n</body>\n</html>\n"
        )
        r.pages[f"{base}/simple/{project}/"] = (page, None)
    return r


def artifactory_routes(folder: Path, repo: str = "pypi-remote") -> Routes:
    base = f"/artifactory/api/pypi/{repo}"
    r = Routes(page_prefix=f"{base}/simple/")
    for project, files in _wheels(folder).items():
        lines = []
        for f in files:
            h = _hex(f)
            path = f"{base}/packages/packages/{h[:2]}/{h[2:4]}/{h[4:]}/{f.name}"
            blob = f"/artifactory/filestore/{h[:2]}/{h}"
            r.redirects[path] = blob  # the file is served by its blob store, on the same host
            r.files[blob] = f
            href = f"../../packages/packages/{h[:2]}/{h[2:4]}/{h[4:]}/{quote(f.name)}#sha256={h}"
            lines.append(f'<a href="{href}" rel="internal">{html.escape(f.name)}</a><br />')
        page = (
            '<!DOCTYPE html>\n<html><head><title>Simple Index</title><meta name="api-version" value="2" /></head><body>\n'
            + "\n".join(lines)
            + "\n</body></html>\n"
        )
        r.pages[f"{base}/simple/{project}/"] = (page, None)
    return r


def devpi_routes(folder: Path, user: str = "root", index: str = "pypi") -> Routes:
    base = f"/{user}/{index}"
    r = Routes(page_prefix=f"{base}/+simple/", page_headers={"Vary": "Accept, User-Agent", "X-PYPI-LAST-SERIAL": "4242"})
    n = 0
    for project, files in _wheels(folder).items():
        lines, rows = [], []
        for f in files:
            h = _hex(f)
            if n % 2:  # mirrored without a hash: a `+e/` link, no fragment
                path = f"{base}/+e/https_pypi.org/{f.name}"
                href, hashes = f"../../../../{user}/{index}/+e/https_pypi.org/{quote(f.name)}", {}
            else:
                path = f"{base}/+f/{h[:3]}/{h[3:16]}/{f.name}"
                href, hashes = f"../../+f/{h[:3]}/{h[3:16]}/{quote(f.name)}#sha256={h}", {"sha256": h}
            n += 1
            r.files[path] = f
            lines.append(f'{user}/{index} <a href="{href}">{html.escape(f.name)}</a><br>')
            rows.append({"filename": f.name, "url": href.split("#")[0], "hashes": hashes})
        page = (
            f'<!DOCTYPE html><html lang="en"><head><title>{user}/{index}: links for {project}</title></head><body>'
            f"<h1>{user}/{index}: links for {project}</h1>\n" + "\n".join(lines) + "\n</body></html>\n"
        )
        doc = json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": rows})
        r.pages[f"{base}/+simple/{project}/"] = (page, doc)
    return r


def bandersnatch_tree(folder: Path, web: Path, digest: str = "sha256") -> Path:
    """A bandersnatch mirror's static tree under `web` (simple/<p>/index.html, packages/<2>/<2>/<60>/<file>)."""
    serial = 1000
    for project, files in _wheels(folder).items():
        lines = []
        for f in files:
            h = _hex(f)
            rel = f"packages/{h[:2]}/{h[2:4]}/{h[4:]}/{f.name}"
            (web / rel).parent.mkdir(parents=True, exist_ok=True)
            (web / rel).write_bytes(f.read_bytes())
            meta = f.with_name(f.name + ".metadata")
            (web / (rel + ".metadata")).write_bytes(meta.read_bytes())
            m = _hex(meta)
            lines.append(
                f'    <a href="../../{quote(rel)}#{digest}={_hex(f, digest)}" data-requires-python="&gt;=3.8" '
                f'data-core-metadata="sha256={m}" data-dist-info-metadata="sha256={m}">{html.escape(f.name)}</a><br/>'
            )
        serial += 1
        page = web / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
            f"    <title>Links for {project}</title>\n  </head>\n  <body>\n    <h1>Links for {project}</h1>\n"
            + "\n".join(lines)
            + f"\n  </body>\n</html>\n<!--SERIAL {serial}-->"
        )
    return web


def flat_routes(folder: Path) -> Routes:
    """One `--find-links` page: relative hrefs into a subfolder, `+` encoded, no fragment."""
    r = Routes()
    lines = []
    for files in _wheels(folder).values():
        for f in files:
            r.files[f"/wheels/sub/{f.name}"] = f
            lines.append(f'<a href="wheels/sub/{quote(f.name)}">{html.escape(f.name)}</a><br>')
    r.pages["/links.html"] = ("<html><body>\n" + "\n".join(lines) + "\n</body></html>\n", None)
    return r


# --- the server -----------------------------------------------------------------------------------------------
class Index(Threaded):
    """Serves `routes` on 127.0.0.1 (GET and HEAD); `url` is its origin. HTML-only shapes answer HTML whatever the
    Accept header asks for. `redirect_files_to`: every file answers 302 to that origin (same path): a mirror that
    sends its files to a host nobody named. `extra_links`: {project: [raw anchor]} added to a page. `head`: False
    answers HEAD with 501 (http.server's own answer when a handler has no do_HEAD)."""

    def __init__(
        self,
        routes: Routes,
        redirect_files_to: str | None = None,
        extra_links: dict[str, list[str]] | None = None,
        head: bool = True,
    ) -> None:
        self.routes, self.redirect_files_to, self.head = routes, redirect_files_to, head
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Accept)
        for project, anchors in (extra_links or {}).items():
            key = next(k for k in routes.pages if k.rstrip("/").endswith("/" + project))
            page, doc = routes.pages[key]
            routes.pages[key] = (page.replace("</body>", "\n".join(anchors) + "\n</body>", 1), doc)
        super().__init__(self._handler())

    def _handler(self):  # noqa: ANN202
        index = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_HEAD(self):  # noqa: N802
                if not index.head:  # a server without HEAD (http.server's default answer)
                    index.requests.append(("HEAD", self.path, ""))
                    return self._send(501, b"", "text/plain", True)
                self._answer(head=True)

            def do_GET(self):  # noqa: N802
                self._answer(head=False)

            def _answer(self, head: bool):
                raw = urlsplit(self.path).path
                path = unquote(raw)
                index.requests.append((self.command, raw, self.headers.get("Accept") or ""))
                r = index.routes
                if path in r.pages:
                    page, doc = r.pages[path]
                    if doc is not None and _accept_json(self.headers.get("Accept") or ""):
                        return self._send(200, doc.encode(), JSON_TYPE, head, r.page_headers)
                    return self._send(200, page.encode(), "text/html", head, r.page_headers)
                if path in r.files:
                    if index.redirect_files_to:
                        return self._send(302, b"", "text/plain", head, {"Location": index.redirect_files_to + raw})
                    return self._send(200, r.files[path].read_bytes(), "application/octet-stream", head)
                if path in r.redirects:
                    return self._send(302, b"", "text/plain", head, {"Location": r.redirects[path]})
                if path.startswith(r.page_prefix) and not path.endswith((".whl", ".metadata")):
                    return self._send(r.missing_page, b"<Error><Code>AccessDenied</Code></Error>", "application/xml", head)
                return self._send(404, b"not found", "text/plain", head)

            def _send(self, status: int, data: bytes, ctype: str, head: bool, headers: dict[str, str] | None = None):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(data)

        return H


class Static(Threaded):
    """A plain static file server of a folder (`http.server`'s own: index.html for a folder, a 301 to a folder's
    path with its `/`, HTML whatever the Accept header asks, GET and HEAD): a bandersnatch mirror behind nginx."""

    def __init__(self, root: Path, port: int = 0) -> None:
        root_s = str(root)

        class H(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=root_s, **kw)

            def log_message(self, *a):  # quiet
                pass

        super().__init__(H, port)

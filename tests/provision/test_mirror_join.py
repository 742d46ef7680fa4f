"""A pull-mode mirror under a sub-path (issue #35): `--bundle-url http://10.0.0.5:8080/bundles/stack-3`, without a
trailing slash, serves the bundle at `/bundles/stack-3/`; no side may drop `stack-3` (a URL join that treats the
last segment as a file, `urljoin`'s) or add or lose a slash.

One corpus (`CORPUS`: a base URL as given, the URL of one bundle file on it) holds both sides to the same answer:
- the controller (`envkit.jobs.provision.parse_mirror`, the URL `pull_vars` hands the hosts): the root it keeps is the
  base with its trailing slashes removed and nothing else changed (percent-encoded segments stay as written), and
  the roles' own check accepts it;
- the `envkit_fetch` module (`url_of`): the file's URL from the controller's root and from the base itself (a URL
  given with -e or in the inventory reaches the module as written) is the corpus's, so the two sides agree;
- a real fetch on 127.0.0.1: the module run against a server that serves the bundle only under the base's path asks
  for exactly that path and gets the file (each base's path carried over to the local server; 10.0.0.5 and the
  other hosts are strings only, never reached).
"""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from urllib.parse import urlsplit

import pytest

from envkit.jobs.provision import Mirror, parse_mirror, pull_vars
from tests.provision.modules import ansible_module

ef = ansible_module("envkit_fetch")

PATH = "wheels/torch-2.6.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl"  # a bundle path: `+` is sent as %2B
FILE = "/wheels/torch-2.6.0%2Bcpu-cp310-cp310-manylinux_2_28_aarch64.whl"

# (base URL as given, the URL of PATH on it)
CORPUS = [
    ("http://10.0.0.5:8080", "http://10.0.0.5:8080" + FILE),
    ("http://10.0.0.5:8080/", "http://10.0.0.5:8080" + FILE),
    ("http://10.0.0.5:8080/bundles/stack-3", "http://10.0.0.5:8080/bundles/stack-3" + FILE),  # the reported case
    ("http://10.0.0.5:8080/bundles/stack-3/", "http://10.0.0.5:8080/bundles/stack-3" + FILE),
    ("http://10.0.0.5:8080/bundles/stack-3//", "http://10.0.0.5:8080/bundles/stack-3" + FILE),
    ("http://10.0.0.5:8080/stack-3", "http://10.0.0.5:8080/stack-3" + FILE),  # one segment
    ("https://mirror.example/a/b/c/d", "https://mirror.example/a/b/c/d" + FILE),  # deep
    ("http://10.0.0.5:8080/bundles/v1.0", "http://10.0.0.5:8080/bundles/v1.0" + FILE),  # looks like a file name
    ("http://10.0.0.5:8080/bundles/index.html", "http://10.0.0.5:8080/bundles/index.html" + FILE),
    ("http://10.0.0.5:8080/bundles/stack%203", "http://10.0.0.5:8080/bundles/stack%203" + FILE),  # percent-encoded
    ("http://10.0.0.5:8080/bundles/stack%203/", "http://10.0.0.5:8080/bundles/stack%203" + FILE),
    ("http://10.0.0.5:8080/a%2Fb/stack-3", "http://10.0.0.5:8080/a%2Fb/stack-3" + FILE),  # an encoded slash stays
    ("http://10.0.0.5:8080/b/%C3%A9t%C3%A9", "http://10.0.0.5:8080/b/%C3%A9t%C3%A9" + FILE),  # encoded UTF-8
    ("http://10.0.0.5:8080/b/stack+3", "http://10.0.0.5:8080/b/stack+3" + FILE),  # a `+` of the base is kept
    ("http://10.0.0.5:8080/b/a;v=1", "http://10.0.0.5:8080/b/a;v=1" + FILE),  # `;` is no parameter here
    ("http://[fd00::5]:8080/b/stack-3", "http://[fd00::5]:8080/b/stack-3" + FILE),
    ("http://mirror.example", "http://mirror.example" + FILE),
]
IDS = [base.split("://", 1)[1][:40] for base, _ in CORPUS]


def test_the_corpus_is_what_it_says():
    assert all(url.endswith(FILE) and url.startswith(base.rstrip("/")) for base, url in CORPUS)
    assert len({base for base, _ in CORPUS}) == len(CORPUS) and any(not b.endswith("/") and b.count("/") > 3 for b, _ in CORPUS)


@pytest.mark.parametrize(("base", "url"), CORPUS, ids=IDS)
def test_the_controller_keeps_every_segment_of_the_base(base, url):
    from tests.provision.conftest import load_probe

    root = parse_mirror(base).url
    assert root == base.rstrip("/"), f"{base} -> {root}"
    assert url == root + FILE  # the corpus's file is under the root the controller keeps
    assert re.match(load_probe().MIRROR_URL, root), root  # the roles' own check takes it
    assert parse_mirror(f"rack1={base}") == Mirror(root, "rack1")


@pytest.mark.parametrize(("base", "url"), CORPUS, ids=IDS)
def test_the_module_joins_as_the_controller_means(base, url):
    """The module's URL of the file from the controller's root, and from the base as written: the corpus's."""
    for given in (parse_mirror(base).url, base):
        got = ef.url_of(given, PATH)
        assert got == url, f"url_of({given!r}) is {got}, not {url}"


def test_the_vars_hand_the_hosts_the_roots_the_module_joins():
    """`pull_vars`: the URLs written into vars.yml, each the controller's root, joined by the module to the corpus's."""
    from envkit.jobs.provision import PullPlan

    mirrors = tuple(parse_mirror(b) for b, _ in CORPUS if not b.endswith("/"))
    grouped = parse_mirror("rack1=http://10.0.0.5:8080/bundles/stack-3")
    v = pull_vars(PullPlan(mirrors=(*mirrors, grouped), vendor="vendor", wheels=((PATH, "0" * 64),), requirements=""))
    want = {b: u for b, u in CORPUS}
    assert [ef.url_of(m, PATH) for m in v["envkit_preflight_bundle_urls"]] == [want[m.url] for m in mirrors]
    assert [ef.url_of(g["url"], PATH) for g in v["envkit_preflight_bundle_group_urls"]] == [
        "http://10.0.0.5:8080/bundles/stack-3" + FILE
    ]
    assert v["envkit_python_bundle_wheels"][0]["path"] == PATH


class SubPathMirror:
    """A mirror on 127.0.0.1 that serves `data` at exactly one request path (as sent, percent-encoding included) and
    404 elsewhere; `asked` lists every request path."""

    def __init__(self, path: str, data: bytes) -> None:
        self.asked: list[str] = []
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                mirror.asked.append(self.path)
                body = data if self.path == path else b"not here"
                self.send_response(200 if self.path == path else 404)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> SubPathMirror:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _local(url: str, origin: str) -> str:
    """`url` with its scheme and host replaced by the local mirror's origin (the path as written)."""
    parts = urlsplit(url)
    return origin + url[len(f"{parts.scheme}://{parts.netloc}") :]


@pytest.mark.parametrize(("base", "url"), CORPUS, ids=IDS)
def test_a_real_fetch_asks_for_the_file_under_the_sub_path(base, url, tmp_path):
    data = b"a wheel under " + base.encode()
    file_path = urlsplit(url).path
    with SubPathMirror(file_path, data) as m:
        local_base = _local(base, m.origin)
        spec = {"path": PATH, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "name": "w.whl"}
        for mirror in (parse_mirror(local_base).url, local_base):  # as the controller hands it, and as written
            (tmp_path / "w.whl").unlink(missing_ok=True)
            results, failure = ef.fetch_all([spec], str(tmp_path), [mirror], attempts=1, deadline=20, timeout=10)
            assert failure is None, failure
            assert (tmp_path / "w.whl").read_bytes() == data and results[0]["mirror"] == mirror
    assert m.asked == [file_path, file_path], f"{base}: asked for {m.asked}, the bundle is at {file_path}"

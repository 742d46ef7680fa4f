"""`envkit lock` -> `bundle build` -> `bundle verify` against every package-index shape (tests/airgap/indexshapes.py).

The default target's lock (Atlas A2, aarch64, Python 3.10, torch 2.12.0+cpu) is completed from local stand-ins:
torch from an index shaped like download.pytorch.org/whl/cpu (static HTML, `%2B` in hrefs, PEP 658/714 attributes, no
size), everything else from one shape at a time (a Nexus with md5 fragments, an Artifactory, a devpi with hashless
links and JSON without sizes, a bandersnatch static copy, a find-links page or folder). Where an index publishes no
sha256 the lock records the one computed from the download (`sha256_from: download`) and says so; a missing size
comes from a HEAD request or the download. Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed
from tests.airgap.indexshapes import (
    Index,
    Routes,
    Static,
    artifactory_routes,
    bandersnatch_tree,
    devpi_routes,
    flat_routes,
    nexus_routes,
    pytorch_routes,
)

TORCH_FILE = "torch-2.12.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl"


@pytest.fixture
def stack(tmp_path, monkeypatch):
    """The default target's lock and two folders of stand-in wheels: `cpu` (torch X+cpu) and `pypi` (the rest)."""
    from tests.airgap.torchindex import default_stack

    return default_stack(tmp_path, monkeypatch)


def _lock_bundle_verify(cli, path: Path, tmp_path: Path, *args: str):
    """`envkit lock ARGS --json`, then `bundle build` and `bundle verify`; (lock's closure, lock summary, tar names)."""
    from envkit.lock.file import read_lock

    r = cli("lock", "--lock", str(path), *args, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    closure = read_lock(path).python.closure
    out = tmp_path / "bundle.tar"
    r = cli("bundle", "build", "--lock", str(path), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("bundle", "verify", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
    with tarfile.open(out) as tf:
        names = {m.name.rsplit("/", 1)[-1] for m in tf.getmembers()}
    return closure, summary, names


def _holds_the_files(closure, folders: list[Path], names: set[str]) -> None:
    """Every package's sha256 and size are those of the very file served (wherever they came from), in the bundle."""
    by_name = {f.name: f for d in folders for f in d.glob("*.whl")}
    for p in closure.packages:
        if p.name == "envkit":
            continue
        f = by_name[p.filename]
        assert (p.sha256, p.size) == (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_size), p.filename
        assert p.filename in names


def _torch_from_pytorch(cpu: Path, **kw) -> Index:
    return Index(pytorch_routes(cpu, **kw))


# --- the PyTorch CPU index, exactly as download.pytorch.org/whl/cpu serves it ------------------------------------
def test_the_default_lock_takes_torch_cpu_from_an_index_shaped_like_the_real_cpu_index(stack, tmp_path, cli):
    from tests.airgap.httpserve import Server

    path, lock, pypi, cpu = stack
    assert lock.python.indexes["pytorch-cpu"] == "https://download.pytorch.org/whl/cpu"  # the product default
    pin = next(p for p in lock.python.requirements if p.name == "torch")
    with Server(pypi, simple_index=True) as pi, _torch_from_pytorch(cpu) as pt:
        closure, summary, names = _lock_bundle_verify(
            cli, path, tmp_path, "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu"
        )
        wheel_requests = [(m, p) for m, p, _ in pt.requests if p.endswith(".whl")]
    torch = next(p for p in closure.packages if p.name == "torch")
    assert torch.version == pin.version == "2.12.0+cpu"
    assert torch.filename == TORCH_FILE  # the decoded name, not `torch-2.12.0%2Bcpu-...`
    assert torch.url == f"{pt.url}/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"
    assert torch.sha256_from is None  # published in the href's fragment
    _holds_the_files(closure, [pypi, cpu], names)
    # the size no HTML index gives came from a HEAD request at lock time; the wheel itself was fetched once, by the bundle
    assert wheel_requests == [
        ("HEAD", f"/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"),
        ("GET", f"/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"),
    ]
    assert summary["target"]["sha256_computed"] == [] and summary["target"]["torch"]["version"] == "2.12.0+cpu"
    assert TORCH_FILE in names


def test_a_nightly_shaped_index_without_hashes_gets_a_computed_sha256_recorded_and_said(stack, tmp_path, cli):
    from tests.airgap.httpserve import Server

    path, _, pypi, cpu = stack
    with Server(pypi, simple_index=True) as pi, _torch_from_pytorch(cpu, nightly=True, upload_time=True) as pt:
        r = cli("lock", "--lock", str(path), "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu")
        assert r.returncode == 0, r.stdout + r.stderr
        closure, summary, names = _lock_bundle_verify(
            cli, path, tmp_path, "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu"
        )
    assert "sha256 computed from the download, not published by the index (1;" in r.stdout
    assert f"  {TORCH_FILE}\n" in r.stdout
    torch = next(p for p in closure.packages if p.name == "torch")
    assert torch.sha256_from == "download"
    assert [x["file"] for x in summary["target"]["sha256_computed"]] == [TORCH_FILE]
    assert [p.name for p in closure.packages if p.sha256_from] == ["torch"]  # JSON "PyPI" published the others
    assert "sha256_from: download" in path.read_text()
    _holds_the_files(closure, [pypi, cpu], names)


def test_the_pytorch_shape_answers_html_whatever_is_asked_and_403_for_an_unknown_project(stack):
    from envkit.io import httpclient

    _, _, _, cpu = stack
    with _torch_from_pytorch(cpu) as pt:
        with httpclient.open_url(
            f"{pt.url}/whl/cpu/torch/", httpclient.SERVER_ANSWER, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        ) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == "text/html"
            page = resp.body().decode()
        with httpclient.open_url(f"{pt.url}/whl/cpu/no-such-project/", httpclient.SERVER_ANSWER) as resp:
            assert resp.status == 403
    assert f'<a href="/whl/cpu/{TORCH_FILE.replace("+", "%2B")}#sha256=' in page and 'data-core-metadata="sha256=' in page
    assert f">{TORCH_FILE}</a><br/>" in page and "size" not in page


# --- the rest of the closure from each mirror shape ----------------------------------------------------------------
def test_a_nexus_with_md5_fragments_locks_with_computed_sha256_and_the_md5_checked(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    with Index(nexus_routes(pypi, digest="md5")) as nx, _torch_from_pytorch(cpu) as pt:
        closure, summary, names = _lock_bundle_verify(
            cli,
            path,
            tmp_path,
            "--index-url",
            f"{nx.url}/repository/pypi-hosted/simple",
            "--torch-index-url",
            f"{pt.url}/whl/cpu",
        )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert others and all(p.sha256_from == "download" for p in others)
    assert all(p.url.startswith(f"{nx.url}/repository/pypi-hosted/packages/") for p in others)  # ../../ resolved
    computed = {x["file"]: x["checked"] for x in summary["target"]["sha256_computed"]}
    assert computed and set(computed) == {p.filename for p in others} and all(c == ["md5"] for c in computed.values())
    assert next(p for p in closure.packages if p.name == "torch").sha256_from is None
    _holds_the_files(closure, [pypi, cpu], names)


def test_an_artifactory_remote_with_relative_links_and_a_same_host_redirect_locks(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    with Index(artifactory_routes(pypi)) as af, _torch_from_pytorch(cpu) as pt:
        closure, summary, names = _lock_bundle_verify(
            cli,
            path,
            tmp_path,
            "--index-url",
            f"{af.url}/artifactory/api/pypi/pypi-remote/simple",
            "--torch-index-url",
            f"{pt.url}/whl/cpu",
        )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert all(p.url.startswith(f"{af.url}/artifactory/api/pypi/pypi-remote/packages/packages/") for p in others)
    assert not [p for p in closure.packages if p.sha256_from] and summary["target"]["sha256_computed"] == []
    _holds_the_files(closure, [pypi, cpu], names)


def test_a_devpi_with_hashless_mirror_links_and_json_without_sizes_locks(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    with Index(devpi_routes(pypi)) as dp, _torch_from_pytorch(cpu) as pt:
        closure, _, names = _lock_bundle_verify(
            cli, path, tmp_path, "--index-url", f"{dp.url}/root/pypi/+simple", "--torch-index-url", f"{pt.url}/whl/cpu"
        )
        asked_json = any("application/vnd.pypi.simple.v1+json" in a for _, _, a in dp.requests)
    assert asked_json
    hashless = [p for p in closure.packages if "/+e/" in p.url]
    hashed = [p for p in closure.packages if "/+f/" in p.url]
    assert hashless and hashed
    assert all(p.sha256_from == "download" for p in hashless) and not any(p.sha256_from for p in hashed)
    _holds_the_files(closure, [pypi, cpu], names)


@pytest.mark.parametrize("digest", ["sha256", "md5"])
def test_a_bandersnatch_static_copy_locks(stack, tmp_path, cli, digest):
    path, _, pypi, cpu = stack
    web = bandersnatch_tree(pypi, tmp_path / "web", digest)
    with Static(web) as bs, _torch_from_pytorch(cpu) as pt:
        closure, _, names = _lock_bundle_verify(
            cli, path, tmp_path, "--index-url", f"{bs.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu"
        )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert all(p.url.startswith(f"{bs.url}/packages/") for p in others)
    assert all(p.sha256_from == ("download" if digest == "md5" else None) for p in others)
    _holds_the_files(closure, [pypi, cpu], names)


def test_an_index_url_now_served_by_another_mirror_is_read_afresh(stack, tmp_path, cli):
    """The lock records what the index serves now. A static mirror's pages (Last-Modified a week ago, as nginx
    serves a bandersnatch tree) are fresh for hours in an HTTP cache by heuristic; the same URL then served by another
    index (the mirror host re-pointed) must not be read from that cache, or the lock names files nobody serves."""
    import os
    import time

    from tests.airgap.httpserve import Server

    path, _, pypi, cpu = stack
    web = bandersnatch_tree(pypi, tmp_path / "web")
    week_ago = time.time() - 7 * 86400
    for f in web.rglob("*"):
        os.utime(f, (week_ago, week_ago))
    with _torch_from_pytorch(cpu) as pt:
        with Static(web) as bs:
            port = bs.httpd.server_address[1]
            r = cli("lock", "--lock", str(path), "--index-url", f"{bs.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu")
            assert r.returncode == 0, r.stdout + r.stderr
        with Server(pypi, simple_index=True, port=port) as pi:
            closure, _, names = _lock_bundle_verify(
                cli, path, tmp_path, "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu"
            )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert others and all(p.url == f"{pi.url}/{p.filename}" for p in others)  # the new server's flat paths
    _holds_the_files(closure, [pypi, cpu], names)


def test_a_find_links_page_with_relative_hashless_links_locks(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    with Index(Routes(page_prefix="/simple/")) as empty, Index(flat_routes(pypi)) as fl, _torch_from_pytorch(cpu) as pt:
        closure, _, names = _lock_bundle_verify(
            cli,
            path,
            tmp_path,
            "--index-url",
            f"{empty.url}/simple",
            "--find-links",
            f"{fl.url}/links.html",
            "--torch-index-url",
            f"{pt.url}/whl/cpu",
        )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert all(p.url.startswith(f"{fl.url}/wheels/sub/") and p.sha256_from == "download" for p in others)
    _holds_the_files(closure, [pypi, cpu], names)


def test_a_find_links_folder_locks(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    with Index(Routes(page_prefix="/simple/")) as empty, _torch_from_pytorch(cpu) as pt:
        closure, _, names = _lock_bundle_verify(
            cli,
            path,
            tmp_path,
            "--index-url",
            f"{empty.url}/simple",
            "--find-links",
            str(pypi),
            "--torch-index-url",
            f"{pt.url}/whl/cpu",
        )
    others = [p for p in closure.packages if p.name not in ("torch", "envkit")]
    assert all(p.url.startswith(pypi.resolve().as_uri() + "/") and p.sha256_from == "download" for p in others)
    _holds_the_files(closure, [pypi, cpu], names)


# --- hostile indexes ---------------------------------------------------------------------------------------------
def test_a_mirror_that_redirects_its_files_to_another_host_is_refused(stack, cli):
    path, _, pypi, cpu = stack
    before = path.read_text()
    with Index(nexus_routes(pypi)) as elsewhere, Index(nexus_routes(pypi), redirect_files_to=elsewhere.url) as nx:
        with _torch_from_pytorch(cpu) as pt:
            r = cli(
                "lock",
                "--lock",
                str(path),
                "--index-url",
                f"{nx.url}/repository/pypi-hosted/simple",
                "--torch-index-url",
                f"{pt.url}/whl/cpu",
            )
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"redirects to {elsewhere.url}/" in r.stderr and "neither https nor under a mirror" in r.stderr
    assert "Traceback" not in r.stderr and path.read_text() == before


def test_torch_links_absolute_to_a_second_host_not_given_are_refused_before_any_download(stack, cli):
    """manage_v2.py's R2 links (`https://download-r2.pytorch.org/...`) are https and pass; a stand-in's second host is
    http, and an http host nobody gave is outside the closure's URL policy: refused, naming it, nothing downloaded."""
    from tests.airgap.httpserve import Server

    path, _, pypi, cpu = stack
    before = path.read_text()
    with Server(pypi, simple_index=True) as pi, Index(pytorch_routes(cpu)) as r2:
        with Index(pytorch_routes(cpu, r2=r2.url, upload_time=True)) as pt:
            r = cli("lock", "--lock", str(path), "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"torch's file '{r2.url}/whl/cpu/{TORCH_FILE.replace('+', '%2B')}' is neither https nor under a mirror" in r.stderr
    assert not [p for _, p, _ in r2.requests if p.endswith(".whl")] and path.read_text() == before


@pytest.mark.parametrize(
    "href",
    [
        "/whl/cpu/..%2F..%2F" + TORCH_FILE.replace("+", "%2B"),  # a decoded `../..`
        "/whl/cpu/sub%2F" + TORCH_FILE.replace("+", "%2B"),  # a decoded `/`
        "/whl/cpu/evil-2.12.0%2Bcpu-cp310-cp310-manylinux_2_28_aarch64.whl",  # a file of another project
    ],
)
def test_a_torch_page_whose_only_link_is_hostile_gives_no_torch(stack, tmp_path, cli, href):
    path, _, pypi, cpu = stack
    routes = pytorch_routes(cpu)
    routes.pages["/whl/cpu/torch/"] = (f'<html><body><a href="{href}">{TORCH_FILE}</a><br/></body></html>', None)
    before = path.read_text()
    from tests.airgap.httpserve import Server

    with Server(pypi, simple_index=True) as pi, Index(routes) as pt:
        r = cli("lock", "--lock", str(path), "--index-url", f"{pi.url}/simple", "--torch-index-url", f"{pt.url}/whl/cpu")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and path.read_text() == before
    assert "no version of torch==2.12.0+cpu" in r.stderr and "--torch-index-url" in r.stderr  # the link was not taken


def _pylock(url: str, hashes: dict | None = None, size: int | None = None, name: str = "torch", version: str = "2.12.0+cpu"):
    wheel: dict = {"url": url, "hashes": hashes if hashes is not None else {"sha256": "a" * 64}}
    if size is not None:
        wheel["size"] = size
    return {"packages": [{"name": name, "version": version, "wheels": [wheel]}]}


def _plan(mirror: str = "http://127.0.0.1:1/", index: str = "simple"):
    from envkit.artifacts.closure import ClosurePlan, make_target

    return ClosurePlan(roots=("torch==2.12.0+cpu",), target=make_target("3.10", "aarch64"), index_url=mirror + index)


@pytest.mark.parametrize(
    "tail",
    [
        "..%2F" + TORCH_FILE.replace("+", "%2B"),
        "evil%2F" + TORCH_FILE.replace("+", "%2B"),
        "%2E%2E%2F%2E%2E%2F" + TORCH_FILE,
        "x%5C" + TORCH_FILE,
        "%2E%2E",
    ],
)
def test_a_link_whose_decoded_name_leaves_its_folder_is_bad_input(tail):
    from envkit.artifacts.closure import closure_from_pylock

    with pytest.raises(BadInput) as exc:
        closure_from_pylock(_pylock(f"http://127.0.0.1:1/whl/cpu/{tail}", size=1), _plan(), "uv", complete=None)
    assert "is refused" in exc.value.message or "not a plain file name" in exc.value.message


@pytest.mark.parametrize(
    "fname",
    ["evil-2.12.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl", "torch-2.11.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl"],
)
def test_a_file_of_another_project_or_version_under_the_project_is_bad_input(fname):
    from envkit.artifacts.closure import closure_from_pylock

    with pytest.raises(BadInput) as exc:
        closure_from_pylock(_pylock(f"http://127.0.0.1:1/whl/cpu/{fname.replace('+', '%2B')}", size=1), _plan(), "uv")
    assert f"the index lists {fname!r}" in exc.value.message and "torch 2.12.0+cpu" in exc.value.message


def test_the_percent_decoded_name_is_recorded_and_published_hashes_are_kept(tmp_path):
    from envkit.artifacts.closure import closure_from_pylock

    url = f"http://127.0.0.1:1/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"
    closure = closure_from_pylock(_pylock(url, size=7), _plan(), "uv")
    (p,) = closure.packages
    assert (p.filename, p.url, p.sha256, p.size, p.sha256_from) == (TORCH_FILE, url, "a" * 64, 7, None)


def test_an_md5_only_file_gets_a_computed_sha256_and_a_wrong_md5_fails(tmp_path):
    from envkit.artifacts.closure import closure_from_pylock, complete_from_download
    from envkit.artifacts.download import WheelCache

    folder = tmp_path / "w"
    folder.mkdir()
    data = b"not really a wheel, but bytes with a hash"
    (folder / TORCH_FILE).write_bytes(data)
    routes = Routes(files={f"/whl/cpu/{TORCH_FILE}": folder / TORCH_FILE})
    cache = WheelCache(tmp_path / "cache")
    with Index(routes) as srv:
        url = f"{srv.url}/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"
        plan = _plan(f"{srv.url}/")
        md5 = hashlib.md5(data).hexdigest()
        closure = closure_from_pylock(_pylock(url, {"md5": md5}), plan, "uv", complete_from_download(plan, cache))
        (p,) = closure.packages
        assert (p.sha256, p.size, p.sha256_from) == (hashlib.sha256(data).hexdigest(), len(data), "download")
        assert cache.valid(p.sha256, p.size)  # where `bundle build` finds it
        with pytest.raises(CheckFailed) as exc:
            closure_from_pylock(_pylock(url, {"md5": "0" * 32}), plan, "uv", complete_from_download(plan, cache))
    assert f"the index publishes md5 {'0' * 32}" in exc.value.message and md5 in exc.value.message
    assert not list((tmp_path / "cache").glob("**/.measure.*"))


def test_a_published_sha256_without_a_size_takes_the_size_from_head_or_else_the_download(tmp_path):
    """The PyTorch shape: sha256 in the fragment, no size. A HEAD request gives it; a server without HEAD (501) has
    the file downloaded once into the bundle cache instead (its sha256 checked against the published one)."""
    from envkit.artifacts.closure import closure_from_pylock, complete_from_download
    from envkit.artifacts.download import WheelCache

    cpu = tmp_path / "cpu"
    cpu.mkdir()
    from tests.airgap.torchindex import standin_wheel

    wheel = standin_wheel(cpu, "torch", "2.12.0+cpu", "cp310-cp310-manylinux_2_28_aarch64")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    for head in (True, False):
        cache = WheelCache(tmp_path / f"cache-{head}")
        with Index(pytorch_routes(cpu), head=head) as pt:
            plan = _plan(f"{pt.url}/", "whl/cpu")
            url = f"{pt.url}/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"
            closure = closure_from_pylock(_pylock(url, {"sha256": sha}), plan, "uv", complete_from_download(plan, cache))
            wheel_requests = [m for m, p, _ in pt.requests if p.endswith(".whl")]
        (p,) = closure.packages
        assert (p.sha256, p.size, p.sha256_from) == (sha, wheel.stat().st_size, None)
        assert wheel_requests == (["HEAD"] if head else ["HEAD", "GET"])
        assert cache.valid(sha, p.size) is (not head)  # downloaded only where HEAD could not tell


def test_uvs_own_sha256_of_a_hashless_link_is_recorded_as_computed(tmp_path):
    """uv writes a sha256 it computed for a link without a fragment: the page says nothing was published."""
    from envkit.artifacts.closure import closure_from_pylock, complete_from_download
    from envkit.artifacts.download import WheelCache

    cpu = tmp_path / "cpu"
    cpu.mkdir()
    from tests.airgap.torchindex import standin_wheel

    wheel = standin_wheel(cpu, "torch", "2.12.0+cpu", "cp310-cp310-manylinux_2_28_aarch64")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with Index(pytorch_routes(cpu, nightly=True)) as pt:
        plan = _plan(f"{pt.url}/", "whl/cpu")
        url = f"{pt.url}/whl/cpu/{TORCH_FILE.replace('+', '%2B')}"
        cache = WheelCache(tmp_path / "cache")
        (p,) = closure_from_pylock(_pylock(url, {"sha256": sha}), plan, "uv", complete_from_download(plan, cache)).packages
        assert (p.sha256, p.sha256_from) == (sha, "download")
        with pytest.raises(CheckFailed):  # uv's sha256 and the file envkit downloads must agree
            closure_from_pylock(
                _pylock(url, {"sha256": "b" * 64}), plan, "uv", complete_from_download(plan, WheelCache(tmp_path / "c2"))
            )


def test_the_page_reader_follows_base_href_entities_fragments_and_json():
    from envkit.artifacts.index import link_key, parse_html, parse_json

    page = (
        '<html><head><base href="https://files.example/root/"></head><body>'
        'root/pypi <a href="../pkgs/a-1.0%2Blocal-py3-none-any.whl#md5=ABC&amp;sha256=DEF" data-size="12">a</a>'
        '<a href="/abs/b-1.0.tar.gz#sha1=00">b</a><a href="https://other.example/c-1.0-py3-none-any.whl">c</a>'
        '<base href="https://ignored.example/"></body></html>'
    )
    got = parse_html(page, "https://index.example/simple/a/")
    a = got[link_key("https://files.example/pkgs/a-1.0+local-py3-none-any.whl")]
    assert (a.hashes, a.size) == ({"md5": "abc", "sha256": "def"}, 12)
    assert got[link_key("https://files.example/abs/b-1.0.tar.gz")].hashes == {"sha1": "00"}
    assert got[link_key("https://other.example/c-1.0-py3-none-any.whl")].hashes == {}
    doc = b'{"meta": {"api-version": "1.0"}, "files": [{"filename": "a", "url": "../../+f/a-1.0-py3-none-any.whl", "hashes": {"sha256": "AA"}}, {"url": "x.whl", "hashes": {}, "size": true}]}'
    js = parse_json(doc, "http://h/root/pypi/+simple/a/")
    assert js[link_key("http://h/root/pypi/+f/a-1.0-py3-none-any.whl")].hashes == {"sha256": "aa"}
    assert js[link_key("http://h/root/pypi/+simple/a/x.whl")].size is None  # a bool is no size
    with pytest.raises(BadInput):
        parse_json(b'{"files": [' * 200 + b"]}" * 200, "http://h/deep/")


def test_the_page_reader_resolves_relative_links_against_the_url_after_a_redirect(stack, tmp_path):
    """A static bandersnatch copy answers `/simple/<p>` with a 301 to `/simple/<p>/` and HTML whatever is asked; the
    `../../packages/...` links resolve against the redirected URL (pip's `response.url`), with their fragments."""
    from envkit.artifacts.index import link_key, read_page

    _, _, pypi, _ = stack
    web = bandersnatch_tree(pypi, tmp_path / "web", "md5")
    wheel = next(pypi.glob("torch_npu-*.whl"))
    h = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with Static(web) as bs:
        got = read_page(f"{bs.url}/simple/torch-npu")
    assert list(got) == [link_key(f"{bs.url}/packages/{h[:2]}/{h[2:4]}/{h[4:]}/{wheel.name}")]
    assert got[link_key(f"{bs.url}/packages/{h[:2]}/{h[2:4]}/{h[4:]}/{wheel.name}")].hashes == {
        "md5": hashlib.md5(wheel.read_bytes()).hexdigest()
    }


def test_sha256_from_is_optional_strict_and_absent_from_the_dump_unless_set():
    from pydantic import ValidationError

    from envkit.lock.file import _plain
    from envkit.models.lock import ClosurePackage

    row = {
        "name": "torch",
        "version": "2.12.0+cpu",
        "filename": TORCH_FILE,
        "url": "https://h/x.whl",
        "sha256": "a" * 64,
        "size": 1,
    }
    published = ClosurePackage(**row)
    assert "sha256_from" not in _plain(published) and "sha256_from" not in published.model_dump(mode="json")
    computed = ClosurePackage(**row, sha256_from="download")
    assert _plain(computed)["sha256_from"] == computed.model_dump(mode="json")["sha256_from"] == "download"
    for bad in ("index", "", "Download"):
        with pytest.raises(ValidationError):
            ClosurePackage(**row, sha256_from=bad)


def test_a_find_links_file_that_is_a_device_is_refused_not_read(tmp_path):
    from envkit.artifacts.download import WheelCache, measure

    link = tmp_path / "links" / "zero-1.0-py3-none-any.whl"
    link.parent.mkdir()
    link.symlink_to("/dev/zero")
    with pytest.raises(CheckFailed) as exc:
        measure(link.as_uri(), link.name, {}, WheelCache(tmp_path / "cache"))
    assert "is not a regular file" in exc.value.message
    assert not list((tmp_path / "cache").glob("**/.measure.*"))


def test_the_page_reader_keeps_links_up_to_its_cap_and_drops_the_rest(monkeypatch):
    import envkit.artifacts.index as S

    monkeypatch.setattr(S, "MAX_LINKS", 3)
    page = "".join(f'<a href="f{i}-1.0-py3-none-any.whl#sha256={i:064x}">f{i}</a>' for i in range(4))
    got = S.parse_html(page, "http://h/simple/f/")
    assert sorted(got) == [S.link_key(f"http://h/simple/f/f{i}-1.0-py3-none-any.whl") for i in range(3)]


def test_an_index_page_at_its_size_cap_is_read_and_one_byte_more_refused(monkeypatch):
    import envkit.artifacts.index as S
    from envkit.io import httpclient

    page = '<a href="a-1.0-py3-none-any.whl#sha256=' + "a" * 64 + '">a</a>'
    with Index(Routes(pages={"/simple/a/": (page, None)}, page_prefix="/simple/")) as idx:
        monkeypatch.setattr(S, "PAGE", S.PAGE.but(max_bytes=len(page)))
        assert list(S.read_page(f"{idx.url}/simple/a/")) == [S.link_key(f"{idx.url}/simple/a/a-1.0-py3-none-any.whl")]
        monkeypatch.setattr(S, "PAGE", S.PAGE.but(max_bytes=len(page) - 1))
        with pytest.raises(httpclient.TooLarge):
            S.read_page(f"{idx.url}/simple/a/")

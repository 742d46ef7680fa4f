"""Bundle plan, build, verify: vendor checks, reproducibility, missing/extra/modified, hostile archives."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed
from envkit.jobs import bundle as airgap

HERE = Path(__file__).resolve().parent


def _installers(lock, out: Path, as_zip: bool = True) -> list[Path]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("mk", HERE.parent / "fixtures" / "installers" / "make_installers.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    return mk.write_installers(lock.model_dump(mode="json"), out, as_zip=as_zip)


def test_build_is_reproducible_and_verifies(offline_lock, tmp_path, cli):
    path, _ = offline_lock
    a, b = tmp_path / "a" / "bundle.tar", tmp_path / "b" / "bundle.tar"
    for out in (a, b):
        r = cli("bundle", "build", "--lock", str(path), "-o", str(out), "--json")
        assert r.returncode == 0, r.stderr
    assert a.read_bytes() == b.read_bytes()
    info = json.loads(r.stdout)
    assert info["wheels_cached"] == 3 and any("vendor package" in x for x in info["lacks"])
    r = cli("bundle", "verify", str(a), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["files"] > 5
    names = tarfile.open(a).getnames()
    assert "bundle/wheels/target/alpha-1.0-py3-none-any.whl" in names
    assert "bundle/wheels/controller/gamma-1.0-py3-none-any.whl" in names
    for kind in ("controller", "target"):  # envkit runs on both: provision there, smoke and doctor here
        assert any(n.startswith(f"bundle/wheels/{kind}/envkit-") for n in names)
        req = tarfile.open(a).extractfile(f"bundle/requirements/{kind}.txt").read().decode()
        assert any(line.startswith("envkit==") and "--hash=sha256:" in line for line in req.splitlines())
    assert "bundle/install.sh" in names and "bundle/manifest.json" in names


def test_folder_bundle_reports_missing_extra_and_modified(offline_lock, tmp_path, cli):
    path, _ = offline_lock
    out = tmp_path / "bundle"
    assert cli("bundle", "build", "--lock", str(path), "-o", str(out)).returncode == 0
    (out / "wheels" / "target" / "alpha-1.0-py3-none-any.whl").unlink()
    (out / "stray.txt").write_text("x")
    beta = out / "wheels" / "target" / "beta-1.0-py3-none-any.whl"
    data = beta.read_bytes()
    beta.unlink()  # hard-linked from the cache: replace, never write through
    beta.write_bytes(data[:10] + bytes([data[10] ^ 0xFF]) + data[11:])
    r = cli("bundle", "verify", str(out), "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["missing"] == ["wheels/target/alpha-1.0-py3-none-any.whl"]
    assert rep["extra"] == ["stray.txt"]
    assert [m["path"] for m in rep["modified"]] == ["wheels/target/beta-1.0-py3-none-any.whl"]
    r = cli("bundle", "verify", str(out))
    assert "missing:  wheels/target/alpha" in r.stdout and "expected sha256" in r.stdout


def test_vendor_packages_checked_against_the_lock(offline_lock, tmp_path, cli):
    path, lock = offline_lock
    arts = tmp_path / "arts"
    _installers(lock, arts, as_zip=True)
    # the fixture zips are not the vendor's: their hashes differ from the lock's -> refused, naming both hashes
    r = cli("bundle", "build", "--lock", str(path), "--artifacts", str(arts), "-o", str(tmp_path / "o.tar"))
    assert r.returncode == 1
    assert "does not match the lock: expected sha256" in r.stderr and ".zip" in r.stderr
    # bare .run files: the lock has no hash for them -> stop unless --trust-artifacts
    arts2 = tmp_path / "arts2"
    _installers(lock, arts2, as_zip=False)
    r = cli("bundle", "build", "--lock", str(path), "--artifacts", str(arts2), "-o", str(tmp_path / "o.tar"))
    assert r.returncode == 1 and "has no sha256" in r.stderr and "--trust-artifacts" in r.stderr
    r = _trusted_build(cli, path, arts2, tmp_path / "o.tar")
    assert r.returncode == 0, r.stderr
    trusted = json.loads(r.stdout)["trusted_on_first_use"]
    assert {t["file"] for t in trusted} >= {"Ascend-cann-toolkit_9.1.0_linux-aarch64.run"}
    m = json.loads(tarfile.open(tmp_path / "o.tar").extractfile("o/manifest.json").read())
    assert m["trusted_on_first_use"] == sorted(trusted, key=lambda t: t["file"])
    # a missing vendor file is named
    next(arts2.glob("Ascend-cann-toolkit_*")).unlink()
    r = cli("bundle", "build", "--lock", str(path), "--artifacts", str(arts2), "--trust-artifacts", "-o", str(tmp_path / "p.tar"))
    assert r.returncode == 1 and "missing" in r.stderr and "Ascend-cann-toolkit_9.1.0_linux-aarch64.run" in r.stderr


def test_lock_without_closure_is_bad_input(tmp_path, cli):
    lock = tmp_path / "envkit.lock"
    assert cli("resolve", "-o", str(lock)).returncode == 0
    r = cli("validate", str(lock))
    assert r.returncode == 0
    r = cli("bundle", "build", "--lock", str(lock), "-o", str(tmp_path / "x.tar"))
    assert r.returncode == 2 and "envkit lock" in r.stderr


def test_variant_serving_of_a_lock_without_the_serving_stack_is_exit_2_before_any_download(offline_lock, tmp_path, cli):
    path, _ = offline_lock
    cache = tmp_path / "cache" / "wheels"  # the fixture's ENVKIT_CACHE_DIR
    for out in (tmp_path / "s.tar", tmp_path / "s"):
        r = cli("bundle", "build", "--lock", str(path), "--variant", "serving", "-o", str(out))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--variant serving needs a lock with the serving stack; this lock pins no vllm or vllm-ascend" in r.stderr
        assert "envkit resolve --workload serving" in r.stderr and "Traceback" not in r.stderr
        assert not out.exists() and r.stdout == ""
    assert not cache.exists() or not [p for p in cache.rglob("*") if p.is_file()]  # nothing fetched
    r = cli("bundle", "build", "--lock", str(path), "--variant", "nope", "-o", str(tmp_path / "n.tar"))
    assert r.returncode == 2 and "use one of base, serving" in r.stderr and not (tmp_path / "n.tar").exists()
    r = cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "b.tar"))  # the base variant: built
    assert r.returncode == 0 and [p for p in cache.rglob("*") if p.is_file()], r.stderr


# --- hostile archives --------------------------------------------------------------------------
def _trusted_build(cli, lock_path: Path, arts: Path, out: Path, *extra: str):
    """`envkit bundle build --trust-artifacts --json` of the lock with `arts` into `out`."""
    return cli(
        "bundle",
        "build",
        "--lock",
        str(lock_path),
        "--artifacts",
        str(arts),
        "--trust-artifacts",
        "-o",
        str(out),
        "--json",
        *extra,
    )


def _tar(path: Path, members: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w") as tf:
        good = tarfile.TarInfo("bundle/manifest.json")
        good.size = 2
        tf.addfile(good, io.BytesIO(b"{}"))
        for m in members:
            tf.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type = kind
    m.linkname = linkname
    m.size = 1 if kind == tarfile.REGTYPE else 0
    return m


@pytest.mark.parametrize(
    "member",
    [
        _member("bundle/../../evil"),
        _member("/etc/evil"),
        _member("bundle/link", tarfile.SYMTYPE, "../../../etc/passwd"),
        _member("bundle/abslink", tarfile.SYMTYPE, "/etc/passwd"),
        _member("bundle/hard", tarfile.LNKTYPE, "bundle/manifest.json"),
        _member("bundle/dev", tarfile.CHRTYPE),
        _member("bundle/fifo", tarfile.FIFOTYPE),
    ],
    ids=["tar-slip", "absolute", "symlink-escape", "symlink-absolute", "hard-link", "device", "fifo"],
)
def test_hostile_archives_are_refused_before_anything_is_written(tmp_path, member, cli, monkeypatch):
    arc = _tar(tmp_path / "evil.tar", [member])
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(CheckFailed, match="refused: member .* is unsafe"):
        airgap.verify(arc)
    r = cli("bundle", "verify", str(arc))
    assert r.returncode == 1 and "unsafe" in r.stderr and "nothing was extracted" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_not_a_bundle(tmp_path):
    with pytest.raises(BadInput):
        airgap.verify(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(CheckFailed, match="not a valid bundle manifest"):
        airgap.verify(tmp_path)


def test_warm_rebuild_keeps_an_unchanged_identical_archive_and_rewrites_a_changed_one(offline_lock, tmp_path):
    from envkit.artifacts.download import Downloader, HashStamps, WheelCache
    from envkit.lock.file import read_lock

    path, _ = offline_lock
    cache = WheelCache()

    def plan():
        p = airgap.plan_bundle(read_lock(path), path.read_bytes(), root="bundle", cache=cache, stamps=HashStamps(cache.base))
        Downloader(cache).fetch_all(p.fetch)
        return p

    out, fresh = tmp_path / "out" / "bundle.tar", tmp_path / "fresh" / "bundle.tar"
    out.parent.mkdir()
    fresh.parent.mkdir()
    digest = airgap.write_tar(plan(), out)
    st = out.stat()
    assert airgap.write_tar(plan(), out) == digest
    st2 = out.stat()
    assert (st2.st_ino, st2.st_mtime_ns, st2.st_ctime_ns) == (st.st_ino, st.st_mtime_ns, st.st_ctime_ns), "kept as it was"
    # an identical plan writes identical bytes anyway: the kept archive is the one a fresh build gives
    assert airgap.write_tar(plan(), fresh) == digest and fresh.read_bytes() == out.read_bytes()
    # changed in place with its size and mtime put back: ctime tells, and it is written again
    good = out.read_bytes()
    with open(out, "r+b") as fh:
        fh.seek(700)
        fh.write(bytes([good[700] ^ 0xFF]))
    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert airgap.write_tar(plan(), out) == digest and out.read_bytes() == good
    # a different plan (another root folder) is not the same archive
    other = plan()
    other.root = "other"
    assert airgap.write_tar(other, out) != digest
    assert tarfile.open(out).getnames()[0].startswith("other/")
    # verify reads a plain archive in parallel and reports as before
    tampered = bytearray(good)
    m = next(x for x in tarfile.open(fresh).getmembers() if x.name.endswith("alpha-1.0-py3-none-any.whl"))
    tampered[m.offset_data + 5] ^= 0xFF
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(tampered))
    rep = airgap.verify(bad)
    assert [x["path"] for x in rep.modified] == ["wheels/target/alpha-1.0-py3-none-any.whl"] and not rep.missing
    assert airgap.verify(fresh).ok
    gz = tmp_path / "bundle.tar.gz"
    airgap.write_tar(plan(), gz)
    assert airgap.verify(gz).ok


def test_bundle_carries_the_rendered_image_context_and_assembles_it_offline(full_offline_lock, tmp_path, cli):
    """The Dockerfile and hashed requirements are rendered into the bundle; the large inputs are the bundle's
    own vendor packages and wheels (never stored twice), linked into place by image/assemble.sh, sha256-checked."""
    import subprocess

    path, lock = full_offline_lock
    arts = tmp_path / "arts"
    _installers(lock, arts, as_zip=False)
    out = tmp_path / "bundle"
    r = cli("bundle", "build", "--lock", str(path), "--artifacts", str(arts), "--trust-artifacts", "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert not any("image build context" in x for x in info["lacks"]), info["lacks"]
    ctx = out / "image" / "context"
    dockerfile = (ctx / "Dockerfile").read_text()
    assert (
        "GENERATED by `envkit bundle build`" in dockerfile
        and "--no-index --find-links /tmp/envkit-python/torch/wheels" in dockerfile
    )
    assert 'COPY ["artifacts/Ascend-cann-toolkit_9.1.0_linux-aarch64.run", "./"]' in dockerfile
    torch_reqs = (ctx / "python" / "torch" / "requirements.txt").read_text()
    assert "torch==2.12.0+cpu --hash=sha256:" in torch_reqs and "torch-npu==2.12.0 --hash=sha256:" in torch_reqs
    rest = (ctx / "python" / "rest" / "requirements.txt").read_text()
    assert "envkit==" not in rest and "transformers==" in rest and "pydantic==" in rest and "torch==" not in rest
    # envkit itself: the bundle's own wheel (wheels/target), the image's last layer, offline and pinned by its sha256
    ek = (ctx / "python" / "envkit" / "requirements.txt").read_text()
    wheel = next((out / "wheels" / "target").glob("envkit-*.whl"))
    ek_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert f"envkit=={wheel.name.split('-')[1]} --hash=sha256:{ek_sha}" in ek
    assert "--no-index --find-links /tmp/envkit-python/envkit/wheels" in dockerfile
    links = [line.split() for line in (out / "image" / "context.sha256").read_text().splitlines() if not line.startswith("#")]
    assert [ek_sha, f"python/envkit/wheels/{wheel.name}", f"wheels/target/{wheel.name}"] in links
    assert {src.split("/")[0] for _, _, src in links} == {"vendor", "wheels"}
    assert not any((out / "image" / "context" / rel).exists() for _, rel, _ in links)  # not stored twice
    rep = json.loads(cli("bundle", "verify", str(out), "--json").stdout)
    assert rep["ok"], rep
    # assembled offline, outside the bundle: every input in place and matching its sha256
    dest = tmp_path / "ctx"
    p = subprocess.run(["sh", str(out / "image" / "assemble.sh"), str(dest)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for sha, rel, _src in links:
        assert hashlib.sha256((dest / rel).read_bytes()).hexdigest() == sha
    assert (dest / "Dockerfile").read_text() == dockerfile and (dest / ".dockerignore").is_file()
    # a wheel altered in the bundle: assembly refuses and leaves nothing behind
    wheel = out / next(src for _, _, src in links if src.startswith("wheels/target/torch-"))
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    bad = tmp_path / "ctx2"
    p = subprocess.run(["sh", str(out / "image" / "assemble.sh"), str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and "does not match its sha256" in p.stderr and not bad.exists()


def test_image_flag_refuses_a_partial_closure(offline_lock, tmp_path, cli):
    path, _ = offline_lock
    r = cli("bundle", "build", "--lock", str(path), "--image", "-o", str(tmp_path / "b.tar"))
    assert r.returncode == 2 and "--image: the lock cannot make the image" in r.stderr and "lacks" in r.stderr
    assert not (tmp_path / "b.tar").exists()
    r = cli("bundle", "build", "--lock", str(path), "--json", "-o", str(tmp_path / "c.tar"))
    assert any(x.startswith("the image build context") for x in json.loads(r.stdout)["lacks"])


def test_targets_older_than_envkits_python_get_the_stack_without_envkit(tmp_path, monkeypatch, cli):
    from tests.airgap.conftest import _lock_with_closure

    path, _lock, server = _lock_with_closure(tmp_path, monkeypatch, [("alpha", "1.0")], python="3.9")
    try:
        r = cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "b"), "--json")
    finally:
        server.__exit__(None, None, None)
    assert r.returncode == 0, r.stderr
    b = tmp_path / "b"
    assert not list((b / "wheels" / "target").glob("envkit-*")) and list((b / "wheels" / "controller").glob("envkit-*"))
    assert "envkit==" not in (b / "requirements" / "target.txt").read_text()
    assert "envkit==" in (b / "requirements" / "controller.txt").read_text()
    assert any(
        x.startswith("envkit on the targets: it needs Python >=3.10, the targets have 3.9") for x in json.loads(r.stdout)["lacks"]
    )


def test_rebuild_with_every_input_unchanged_is_up_to_date_and_any_change_rebuilds(offline_lock, tmp_path, cli):
    path, lock = offline_lock
    arts = tmp_path / "arts"
    _installers(lock, arts, as_zip=False)
    out = tmp_path / "b.tar"

    def build(*extra):
        r = _trusted_build(cli, path, arts, out, *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    first = build()
    assert not first.get("up_to_date")
    again = build()
    assert again["up_to_date"] and again["archive_sha256"] == first["archive_sha256"]
    assert again["manifest_sha256"] == first["manifest_sha256"] and again["lacks"] == first["lacks"]
    # the archive altered in place: rebuilt to the same bytes
    with open(out, "ab") as fh:
        fh.write(b"x")
    fixed = build()
    assert not fixed.get("up_to_date") and hashlib.sha256(out.read_bytes()).hexdigest() == first["archive_sha256"]
    assert build()["up_to_date"]
    # a vendor file changed (content and mtime): rebuilt, with the new hash trusted on first use
    run = next(arts.glob("Ascend-cann-toolkit_*.run"))
    run.write_bytes(run.read_bytes() + b"\n# changed\n")
    changed = build()
    assert not changed.get("up_to_date") and changed["archive_sha256"] != first["archive_sha256"]
    # another option (the base of the image context) is another input
    assert not build("--base", "example.org/base@sha256:" + "0" * 64).get("up_to_date")


def test_a_lock_without_its_closure_is_refused_naming_the_lock_step_for_that_lock(tmp_path, run_cli):
    """A lock straight from `envkit resolve` names versions, not wheels: the next step is `envkit lock` on that very
    lock (its path as given), before anything is downloaded."""
    lock = tmp_path / "my stack.lock"
    assert run_cli("-q", "resolve", "-o", str(lock)).code == 0
    r = run_cli("bundle", "build", "--lock", str(lock), "-o", str(tmp_path / "out" / "bundle.tar"))
    assert r.code == 2, r.out + r.err
    assert "the lock has no Python closure" in r.err
    assert f"  next: Run `envkit lock --lock '{lock}'` first" in r.err
    assert not (tmp_path / "out").exists()

"""A serving lock (`envkit resolve --workload serving`) locks, bundles, verifies and installs offline, on stand-ins.

Three indexes on 127.0.0.1 (tests/airgap/torchindex.py, httpserve.py), given to `envkit lock` as mirrors of the indexes
the lock records (`--index-for pytorch-cpu=...`, `--index-for ascend-pypi=...`):
- "PyPI": every other root, vllm's sdist (`envkit lock` builds it as the vendor does, VLLM_TARGET_DEVICE=empty: no
  torch, no triton in its Requires-Dist) beside PyPI's own vllm wheel, a CUDA build (never taken), vllm-ascend (manylinux_2_34, Requires-Dist torch-npu, the
  `vllm.platform_plugins` entry point), torch_npu (stand-in; a real one is never installed), and the traps: PyPI's
  CUDA torch, upstream triton, and triton-ascend 3.2.0 (PyPI holds no 3.2.2);
- the PyTorch CPU index: torch X+cpu; the Ascend index: triton-ascend 3.2.2.
Nothing here leaves the machine.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tarfile

import pytest

from envkit.artifacts.closure import host_arch, host_python

SERVING = ["vllm", "vllm-ascend", "triton-ascend"]  # the vendor's install order
ARCH = "x86_64"  # torch's CPU build then comes from the PyTorch CPU index: both --index-for mirrors are used


# Ray as PyPI publishes ray 2.48.0 (its wheels' Requires-Dist; cp39-cp313 wheels tagged manylinux2014_{aarch64,x86_64})
RAY_REQUIRES = [
    "click>=7.0",
    "filelock",
    "jsonschema",
    "msgpack<2.0.0,>=1.0.0",
    "packaging",
    "protobuf!=3.19.5,>=3.15.3",
    "pyyaml",
    "requests",
]
RAY_DEPS = {"click": "8.1.8", "filelock": "3.16.1", "jsonschema": "4.23.0", "msgpack": "1.1.0", "packaging": "24.2"}
RAY_DEPS |= {"protobuf": "5.29.3", "pyyaml": "6.0.2", "requests": "2.32.3"}


@contextlib.contextmanager
def serving_indexes(tmp_path, monkeypatch, cli, workload: str = "serving"):
    """`envkit resolve --workload <workload>` for this host's Python on ARCH, and the three stand-in indexes it locks
    against: (lock path, lock, pypi, cpu, ascend). A multi-node lock (`serving-multi-node`) pins ray: its stand-in is
    named, tagged and depends as PyPI's wheel."""
    from envkit.artifacts.closure import envkit_roots, find_uv, req_name, target_roots
    from envkit.errors import CannotRun
    from envkit.lock.file import read_lock
    from tests.airgap.httpserve import Server
    from tests.airgap.torchindex import stack_indexes, standin_sdist, standin_wheel

    try:
        find_uv()
    except CannotRun:
        pytest.skip("uv is not installed")
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "envkit.lock"
    r = cli("resolve", "--workload", workload, "--arch", ARCH, "--python", host_python(), "-o", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    lock = read_lock(path)
    s = lock.stack
    assert (s.vllm, s.vllm_ascend, s.triton_ascend) == ("0.23.0", "0.23.0", "3.2.2")
    roots = [x for x in target_roots(lock) + envkit_roots() if req_name(x) not in [*SERVING, "ray"]]
    pypi, cpu, ascend = tmp_path / "pypi", tmp_path / "cpu", tmp_path / "ascend"
    made = stack_indexes(pypi, cpu, roots, s.torch, s.python, s.arch)
    ascend.mkdir()
    cp = "cp" + s.python.replace(".", "")
    # vLLM as the vendor builds it: from its sdist (`envkit lock` builds it, VLLM_TARGET_DEVICE=empty); PyPI's own
    # wheel is the CUDA build (a trap: never taken)
    standin_sdist(pypi, "vllm", s.vllm, ["transformers", "numpy", "requests"])
    standin_wheel(pypi, "vllm", s.vllm, f"cp38-abi3-manylinux_2_28_{s.arch}", [f"torch=={s.torch}", "triton==3.7.0"])
    standin_wheel(
        pypi,
        "vllm_ascend",
        s.vllm_ascend,
        f"{cp}-{cp}-manylinux_2_34_{s.arch}",
        [f"torch-npu=={s.torch_npu}"],
        entry_points={"vllm.platform_plugins": {"ascend": "vllm_ascend:register"}},
    )
    standin_wheel(pypi, "triton_ascend", "3.2.0", f"{cp}-{cp}-manylinux_2_28_{s.arch}")  # PyPI's: never taken
    standin_wheel(ascend, "triton_ascend", s.triton_ascend, f"{cp}-{cp}-manylinux_2_28_{s.arch}")
    if s.ray is not None:
        standin_wheel(pypi, "ray", s.ray, f"{cp}-{cp}-manylinux2014_{s.arch}", RAY_REQUIRES)
        for name, version in RAY_DEPS.items():
            if name not in made:
                standin_wheel(pypi, name, version)
    with Server(pypi, simple_index=True) as p, Server(cpu, simple_index=True) as c, Server(ascend, simple_index=True) as a:
        yield path, lock, f"{p.url}/simple", f"{c.url}/simple", f"{a.url}/simple"


@pytest.fixture
def serving_stack(tmp_path, monkeypatch, cli):
    with serving_indexes(tmp_path, monkeypatch, cli) as stack:
        yield stack


def _lock(cli, path, pypi, cpu, ascend, *extra):
    return cli(
        "lock",
        "--lock",
        str(path),
        "--index-url",
        pypi,
        "--index-for",
        f"pytorch-cpu={cpu}",
        "--index-for",
        f"ascend-pypi={ascend}",
        *extra,
    )


@pytest.fixture
def serving_bundle(serving_stack, tmp_path, cli):
    """The serving lock, locked against the stand-ins and bundled into bundle.tar: (lock path, pypi, cpu, ascend)."""
    path, _, pypi, cpu, ascend = serving_stack
    r = _lock(cli, path, pypi, cpu, ascend, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "bundle.tar"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return path, pypi, cpu, ascend


@pytest.mark.slow
def test_the_serving_closure_holds_the_vendors_order_and_no_triton_or_cuda(serving_bundle, tmp_path, cli):
    from envkit.artifacts.closure import req_name
    from envkit.lock.file import read_lock

    path, pypi, cpu, ascend = serving_bundle
    lock = read_lock(path)
    closure = lock.python.closure
    roots = [req_name(x) for x in closure.roots]
    assert [n for n in roots if n in SERVING] == SERVING  # vllm, then vllm-ascend, then triton-ascend
    got = {p.name: p for p in closure.packages}
    assert (got["vllm"].version, got["vllm-ascend"].version, got["triton-ascend"].version) == ("0.23.0+empty", "0.23.0", "3.2.2")
    # vllm built from its sdist as the vendor builds it, against the lock's CPU torch; PyPI's CUDA wheel never taken
    vllm = got["vllm"]
    assert vllm.built is not None and vllm.filename == "vllm-0.23.0+empty-py3-none-any.whl"
    assert vllm.url.endswith("/vllm-0.23.0.tar.gz") and vllm.built.sdist == "vllm-0.23.0.tar.gz"
    assert vllm.built.env == {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"}
    assert vllm.built.torch == got["torch"].version and vllm.built.torch_sha256 == got["torch"].sha256
    assert "triton" in closure.excluded  # xgrammar's upstream triton: the vendor uninstalls it
    assert got["triton-ascend"].url.startswith(ascend.rsplit("/simple", 1)[0])  # from the Ascend index's mirror alone
    assert got["torch"].version == lock.stack.torch and got["torch"].url.startswith(cpu.rsplit("/simple", 1)[0])
    assert got["torch-npu"].version == lock.stack.torch_npu
    assert got["vllm-ascend"].filename.endswith(f"manylinux_2_34_{ARCH}.whl")
    assert "triton" not in got and not [n for n in got if n.startswith(("nvidia-", "cuda-")) or "nccl" in n]
    assert {cpu, ascend} <= set(closure.extra_index_urls) and closure.index_url == pypi
    with tarfile.open(tmp_path / "bundle.tar") as tf:
        names = [m.name.rsplit("/", 1)[-1] for m in tf.getmembers()]
    assert any(n.startswith("vllm_ascend-0.23.0-") for n in names) and any(n.startswith("triton_ascend-3.2.2-") for n in names)
    assert not [n for n in names if n.endswith(".whl") and n.lower().startswith(("nvidia", "triton-", "triton_3", "cuda"))]
    r = cli("bundle", "verify", str(tmp_path / "bundle.tar"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr


BASE = "example.org/base@sha256:" + "0" * 64  # the stand-in lock's Python is this host's, not the default base's


def _image_build(cli, path, tmp_path, out, *extra):
    """`bundle build` with what an image context needs: stand-in vendor packages (trusted) and a base image."""
    from envkit.lock.file import read_lock
    from tests.airgap.test_bundle import _installers

    arts = tmp_path / "arts"
    if not arts.is_dir():
        _installers(read_lock(path), arts, as_zip=False)
    args = ["--artifacts", str(arts), "--trust-artifacts", "--base", BASE, "-o", str(out), "--json", *extra]
    r = cli("bundle", "build", "--lock", str(path), *args)
    assert r.returncode == 0, r.stdout + r.stderr
    info = json.loads(r.stdout)
    assert not any("image build context" in x for x in info["lacks"]), info["lacks"]
    return info


def _plan(path, arts, variant):
    """The bundle plan of `_image_build`, in this process (the fixture's ENVKIT_CACHE_DIR)."""
    from envkit.artifacts.download import HashStamps, WheelCache
    from envkit.jobs.bundle.plan import plan_bundle
    from envkit.lock.file import read_lock

    cache = WheelCache()
    opts = {"artifacts": arts, "trust_artifacts": True, "base": BASE, "variant": variant}
    return plan_bundle(read_lock(path), path.read_bytes(), root="b", cache=cache, stamps=HashStamps(cache.base), **opts)


def _context(bundle):
    """The bundle's image build context as written: {path under image/: bytes} (the rendered files and the links)."""
    image = bundle / "image"
    return {p.relative_to(image).as_posix(): p.read_bytes() for p in sorted(image.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_bundle_build_variant_serving_renders_the_serving_context_from_the_bundles_wheels(serving_bundle, tmp_path, cli):
    from envkit.jobs.bundle.plan import image_tag
    from envkit.lock.file import read_lock

    path = serving_bundle[0]
    lock = read_lock(path)
    built = {}
    for out, variant in (("serving", ["--variant", "serving"]), ("again", ["--variant", "serving"]), ("base", [])):
        _image_build(cli, path, tmp_path, tmp_path / out, *variant)
        built[out] = _context(tmp_path / out)
    ctx = built["serving"]
    assert ctx == built["again"]  # deterministic: the same bytes, file for file
    dockerfile = ctx["context/Dockerfile"].decode()
    assert "\nFROM torch AS serving\n" in dockerfile and 'io.envkit.variant="serving"' in dockerfile
    assert dockerfile.rstrip().endswith('\nENTRYPOINT ["vllm", "serve"]'), dockerfile[-300:]
    assert "--no-index --find-links /tmp/envkit-python/serving/wheels" in dockerfile and "PYTORCH_NPU_ALLOC_CONF=" in dockerfile
    pins = [x.split("==")[0] for x in ctx["context/python/serving/requirements.txt"].decode().splitlines() if "==" in x]
    assert pins == SERVING  # the vendor's order
    rest = ctx["context/python/rest/requirements.txt"].decode()
    assert not [n for n in SERVING if f"\n{n}==" in rest]  # in their own layer only
    links = {
        rel: (sha, src) for sha, rel, src in (x.split() for x in ctx["context.sha256"].decode().splitlines() if x[:1] != "#")
    }
    closure = {p.name: p for p in lock.python.closure.packages}
    for name in SERVING:
        wheel = closure[name]
        rel = f"python/serving/wheels/{wheel.filename}"
        assert links[rel] == (wheel.sha256, f"wheels/target/{wheel.filename}"), sorted(links)
    serving_files = {closure[n].filename for n in SERVING}
    assert not [rel for rel in links if not rel.startswith("python/serving/") and rel.rsplit("/", 1)[-1] in serving_files]
    r = cli("bundle", "verify", str(tmp_path / "serving"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
    # the same lock without --variant: the base context, no serving stage
    base = built["base"]["context/Dockerfile"].decode()
    assert "\nFROM torch AS runtime\n" in base  # the rest's layer right after torch's
    assert "AS serving" not in base and "ENTRYPOINT" not in base and "io.envkit.variant" not in base
    assert "PYTORCH_NPU_ALLOC_CONF" not in base
    assert not [rel for rel in built["base"] if "python/serving/" in rel]
    assert "context/python/torch/requirements.txt" in built["base"]
    # the serving image never takes the base image's tag (an --image build or save would replace it), nor its key
    images = {variant: _plan(path, tmp_path / "arts", variant).image for variant in ("base", "serving")}
    assert images["base"].tag == image_tag(lock) and images["serving"].tag == image_tag(lock) + "-serving"
    assert images["base"].key != images["serving"].key


@pytest.mark.slow
def test_an_archive_of_the_other_variant_is_not_up_to_date(serving_bundle, tmp_path, cli):
    path, out = serving_bundle[0], tmp_path / "bundle.tar"

    def build(*extra):
        return _image_build(cli, path, tmp_path, out, *extra)

    base = build()
    assert build()["up_to_date"]
    serving = build("--variant", "serving")
    assert not serving.get("up_to_date") and serving["archive_sha256"] != base["archive_sha256"]
    assert build("--variant", "serving")["up_to_date"]
    assert not build().get("up_to_date")


def test_an_unreachable_index_is_exit_2_naming_its_id_and_the_option(serving_stack, cli):
    path, _, pypi, cpu, _ = serving_stack
    before = path.read_text()
    r = _lock(cli, path, pypi, cpu, "http://127.0.0.1:9/simple")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "ascend-pypi" in r.stderr and "--index-for ascend-pypi=URL" in r.stderr and "http://127.0.0.1:9/simple" in r.stderr
    assert path.read_text() == before  # nothing written; no fall-back to "PyPI"'s triton-ascend 3.2.0
    r = cli("lock", "--lock", str(path), "--index-url", pypi, "--index-for", "nope=http://127.0.0.1:9/simple")
    assert r.returncode == 2 and "'nope'" in r.stderr and "ascend-pypi" in r.stderr, r.stdout + r.stderr
    r = cli("lock", "--lock", str(path), "--index-for", f"pytorch-cpu={cpu}", "--torch-index-url", "http://127.0.0.1:9/x")
    assert r.returncode == 2 and "--torch-index-url" in r.stderr, r.stdout + r.stderr


def test_index_for_replaces_the_url_of_the_index_the_pins_name(serving_stack):
    from envkit.artifacts.closure import index_overrides, pinned_sources, target_roots
    from envkit.errors import BadInput

    _, lock, _, _, _ = serving_stack
    roots = target_roots(lock)
    assert pinned_sources(lock, roots) == (
        ("torch", "pytorch-cpu", "https://download.pytorch.org/whl/cpu"),
        ("triton-ascend", "ascend-pypi", "https://mirrors.huaweicloud.com/ascend/repos/pypi"),
    )
    mirrors = index_overrides(lock, ("ascend-pypi=http://m/ascend",), "http://m/cpu")  # --torch-index-url: pytorch-cpu's
    assert mirrors == {"ascend-pypi": "http://m/ascend", "pytorch-cpu": "http://m/cpu"}
    assert pinned_sources(lock, roots, None, mirrors) == (
        ("torch", "pytorch-cpu", "http://m/cpu"),
        ("triton-ascend", "ascend-pypi", "http://m/ascend"),
    )
    for bad in ("ascend-pypi", "ascend-pypi=ftp://m", "pypi=http://m/simple"):
        with pytest.raises(BadInput):
            index_overrides(lock, (bad,))


@pytest.mark.root
@pytest.mark.slow
def test_the_bundle_installs_offline_with_the_locked_versions(serving_bundle, tmp_path):
    """install.sh into a venv, then the target wheels into a new venv with the bundle's pip rules: all in `unshare -n`."""
    from envkit.lock.file import read_lock
    from tests.airgap.test_offline import _extract, _install, _need_root_unshare, _offline, _pip_install

    _need_root_unshare()
    if host_arch() != ARCH:
        pytest.skip(f"the stand-in wheels are for {ARCH}")
    path = serving_bundle[0]
    bundle = _extract(tmp_path, tmp_path / "x")
    r = _install(bundle, tmp_path / "controller")
    assert r.returncode == 0 and "verified:" in r.stdout, r.stdout + r.stderr
    venv = tmp_path / "serving-venv"
    r = _offline(["python3", "-I", "-m", "venv", str(venv)])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _pip_install([str(venv / "bin/python"), "-I"], bundle, "target")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _offline([str(venv / "bin/python"), "-I", "-m", "pip", "list", "--format", "json"])
    assert r.returncode == 0, r.stdout + r.stderr
    listed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(r.stdout)}
    locked = {p.name: p.version for p in read_lock(path).python.closure.packages}
    for name in [*SERVING, "torch", "torch-npu"]:
        assert listed.get(name) == locked[name], (name, listed.get(name), locked[name])
    assert "triton" not in listed
    code = "from importlib.metadata import entry_points; print([e.value for e in entry_points(group='vllm.platform_plugins')])"
    r = subprocess.run([str(venv / "bin/python"), "-I", "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "['vllm_ascend:register']", r.stdout + r.stderr


@pytest.mark.slow
def test_a_second_lock_builds_nothing_and_a_bundle_elsewhere_builds_the_same_bytes(serving_bundle, tmp_path, cli):
    """The built wheel is cached by its sdist's sha256: `envkit lock` again builds nothing and writes the same lock.
    On a machine whose cache lacks it, `bundle build` builds it again from the sdist the lock records only when the
    user names that sdist's sha256 (--build-sdist; refused otherwise), reproducibly (SOURCE_DATE_EPOCH), and checks
    it against the lock's sha256; other bytes are refused (exit 1)."""
    import os
    import shutil

    from envkit.artifacts.download import WheelCache
    from envkit.lock.file import dump_lock, read_lock

    path, pypi, cpu, ascend = serving_bundle
    before = path.read_text()
    r = _lock(cli, path, pypi, cpu, ascend)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "taken from the build cache" in r.stderr and "building vllm" not in r.stderr, r.stderr
    assert path.read_text() == before
    vllm = next(p for p in read_lock(path).python.closure.packages if p.name == "vllm")
    cache = WheelCache()  # the fixture's ENVKIT_CACHE_DIR
    os.unlink(cache.path(vllm.sha256))
    shutil.rmtree(cache.base / "built")
    # the user did not allow the build: refused before anything is built (building runs the sdist's code)
    r = cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "again"), "--json")
    assert r.returncode == 2 and f"--build-sdist {vllm.built.sdist_sha256}" in r.stderr, r.stdout + r.stderr
    assert not (cache.base / "built").exists() and not (tmp_path / "again").exists()
    allow = ("--build-sdist", vllm.built.sdist_sha256)
    r = cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "again"), "--json", *allow)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "built again from vllm-0.23.0.tar.gz, the same bytes" in r.stderr, r.stderr
    assert (tmp_path / "again" / "wheels" / "target" / vllm.filename).read_bytes() == cache.path(vllm.sha256).read_bytes()
    # a lock that pins other bytes than the build gives: refused, nothing bundled
    lock = read_lock(path)
    packages = [p.model_copy(update={"sha256": "f" * 64}) if p.name == "vllm" else p for p in lock.python.closure.packages]
    closure = lock.python.closure.model_copy(update={"packages": packages})
    path.write_text(dump_lock(lock.model_copy(update={"python": lock.python.model_copy(update={"closure": closure})})))
    r = cli("--accept-edited-lock", "bundle", "build", "--lock", str(path), "-o", str(tmp_path / "other"), "--json", *allow)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "built again from vllm-0.23.0.tar.gz hashes to" in r.stderr and "f" * 64 in r.stderr, r.stderr
    assert not (tmp_path / "other").exists()


def test_a_built_package_round_trips_and_a_plain_one_dumps_as_before():
    from envkit.models.lock import BuiltFrom, ClosurePackage

    plain = ClosurePackage(
        name="vllm",
        version="0.23.0",
        filename="vllm-0.23.0-py3-none-any.whl",
        url="https://x.example/v.whl",
        sha256="0" * 64,
        size=1,
    )
    assert "built" not in plain.model_dump()  # absent: a lock without built wheels dumps exactly as before
    built = plain.model_copy(
        update={
            "version": "0.23.0+empty",
            "filename": "vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl",
            "url": "https://x.example/vllm-0.23.0.tar.gz",
            "built": BuiltFrom(
                sdist="vllm-0.23.0.tar.gz",
                sdist_sha256="1" * 64,
                env={"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"},
                command="pip wheel --no-build-isolation --no-deps",
                torch="2.13.0+cpu",
                torch_sha256="2" * 64,
            ),
        }
    )
    again = ClosurePackage.model_validate(built.model_dump(mode="json"))
    assert again == built and again.built is not None and again.built.env["VLLM_TARGET_DEVICE"] == "empty"
    with pytest.raises(ValueError):
        BuiltFrom.model_validate({**built.built.model_dump(), "unknown": 1})  # strict: extra="forbid"


@pytest.fixture
def multi_node_stack(tmp_path, monkeypatch, cli):
    with serving_indexes(tmp_path, monkeypatch, cli, "serving-multi-node") as stack:
        yield stack


@pytest.mark.slow
def test_a_multi_node_serving_lock_locks_the_matrixs_ray_and_renders_across_nodes(multi_node_stack, tmp_path, cli):
    """`envkit resolve --workload serving-multi-node` pins the Ray of matrices/serving.yaml; `envkit lock` resolves it
    (with its dependencies) into the closure; `envkit k8s render --node-count 2` takes that lock as it is (no edit)."""
    from envkit.core.matrix import load_matrix
    from envkit.export.k8s import ray_in_lock
    from envkit.lock.file import read_lock
    from tests.k8s.conftest import IMAGE

    path, lock, pypi, cpu, ascend = multi_node_stack
    want = load_matrix().ray_for(lock.stack.vllm_ascend)
    assert want is not None and lock.stack.ray == want.version == "2.48.0"
    assert [(p.name, p.version, p.index) for p in lock.python.requirements][-1] == ("ray", want.version, None)
    r = _lock(cli, path, pypi, cpu, ascend, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    locked = read_lock(path)
    got = {p.name: p for p in locked.python.closure.packages}
    cp = "cp" + lock.stack.python.replace(".", "")
    assert got["ray"].version == want.version
    assert got["ray"].filename == f"ray-{want.version}-{cp}-{cp}-manylinux2014_{ARCH}.whl"
    assert {"click", "msgpack", "protobuf", "jsonschema"} <= set(got)  # ray's own Requires-Dist came with it
    assert ray_in_lock(locked) == "python.closure"
    out = tmp_path / "k"
    r = cli("k8s", "render", "--lock", str(path), "--image", IMAGE, "--node-count", "2", "--json", "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["nodes"] == 2
    assert "ray start --head" in (out / "serving" / "leaderworkerset.yaml").read_text()

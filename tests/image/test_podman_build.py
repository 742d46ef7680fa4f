"""Build the rendered image for real through Podman's Docker API, run it, and rebuild after a Python-only change.

Needs root and the engine from tests/integration/setup/podman.sh (DOCKER_HOST, ENVKIT_TEST_BASE):
    eval "$(tests/integration/setup/podman.sh)"; pytest tests/image -m podman
The vendor CANN packages are the fixture installers; the Python closure is downloaded on the host
into a cached wheelhouse and installed offline (--no-index, --require-hashes) inside the build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import fixture_installers, resolve_lock, run_pip, wheelhouse

pytestmark = [pytest.mark.podman, pytest.mark.root, pytest.mark.slow]

WORK = Path(os.environ.get("ENVKIT_PODMAN_WORK", "/var/tmp/envkit-podman"))
TORCH = "2.13.0+cpu"  # the CPU wheel this CI has locally (pip find-links)
TORCH_NPU = "2.13.0"  # torch_npu 2.13.0 requires torch==2.13.0.*: installed so that smoke meets the missing CANN libs
EXTRA = ["transformers", "accelerate", "safetensors"]
PLATFORMS = ["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64"]
NO_AUTOLOAD = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}  # no CANN libs in the test image: cpu runs without torch_npu


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("podman"):
        return "podman is not installed (tests/integration/setup/podman.sh)"
    if not os.environ.get("DOCKER_HOST") or not os.environ.get("ENVKIT_TEST_BASE"):
        return 'DOCKER_HOST/ENVKIT_TEST_BASE not set: eval "$(tests/integration/setup/podman.sh)"'
    return None


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)


def _download(dest: Path, *reqs: str, deps: bool = True) -> None:
    run_pip(
        "download",
        "-q",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        *PLATFORMS,
        "-d",
        str(dest),
        *([] if deps else ["--no-deps"]),
        *reqs,
    )


def _link_wheels(src: list[Path], dest: Path) -> None:
    dest.mkdir(parents=True)
    for w in src:
        (dest / w.name).symlink_to(w)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An x86_64 Python 3.11 lock (the base's python3), torch +cpu with torch_npu, fixture CANN, a wheelhouse;
    and a second lock that differs only in the accelerate pin (the Python-only change)."""
    d = tmp_path_factory.mktemp("podman")
    lock_path = resolve_lock(["--chip", "910b", "--arch", "x86_64", "--python", "3.11", "--torch", "2.9.0"], d / "resolved.lock")
    lock = yaml.safe_load(lock_path.read_text())
    wheels = WORK / "wheelhouse-py311"
    cann = [r for r in lock["python"]["cann_runtime"]]
    want = [f"torch=={TORCH}", f"torch-npu=={TORCH_NPU}", f"numpy=={lock['stack']['numpy']}", *EXTRA, *cann]
    # the closure pip picks from the cached wheelhouse (downloaded into it the first time)
    all_wheels = wheelhouse(wheels, want, PLATFORMS)
    got = {}
    for w in all_wheels:
        name, ver = w.name.split("-")[:2]
        got[name.lower().replace("_", "-")] = ver
    # an older accelerate (a light, pure-Python wheel) for the Python-only change
    alt = WORK / "wheels-alt"
    alt.mkdir(exist_ok=True)
    if not list(alt.glob("accelerate-*.whl")):
        _download(alt, f"accelerate<{got['accelerate']}", deps=False)
    alt_whl = sorted(alt.glob("accelerate-*.whl"))[-1]
    # the test lock: this CI's torch wheel and the torch_npu that pairs with it
    lock["stack"]["torch"] = TORCH
    lock["stack"]["torch_npu"] = TORCH_NPU
    lock["validated"] = {"torch_npu_cann": False, "cann_hdk": lock["validated"]["cann_hdk"]}
    reqs = []
    for r in lock["python"]["requirements"]:
        if r["name"] == "torch":
            r = {**r, "version": TORCH}
        elif r["name"] == "torch_npu":
            r = {**r, "version": TORCH_NPU}
        elif r["name"] in ("transformers", "accelerate"):
            r = {**r, "version": got[r["name"]]}
            lock["stack"][r["name"]] = r["version"]
        reqs.append(r)
    # envkit is no pin of the lock: `envkit image build` puts its own wheel into the image (the wheelhouse's envkit,
    # there so that pip picks envkit's dependencies, gives way to it)
    lock["python"]["requirements"] = reqs
    lock_path = d / "envkit.lock"
    lock_path.write_text(yaml.safe_dump(lock, sort_keys=False))
    arts = fixture_installers(lock_path, d / "artifacts")
    _link_wheels(all_wheels, arts / "wheels")
    # the Python-only change: accelerate pinned to the older wheel, the same CANN files
    alt_ver = alt_whl.name.split("-")[1]
    lock2 = yaml.safe_load(lock_path.read_text())
    lock2["stack"]["accelerate"] = alt_ver
    lock2["python"]["requirements"] = [
        {**r, "version": alt_ver} if r["name"] == "accelerate" else r for r in lock2["python"]["requirements"]
    ]
    lock2_path = d / "envkit2.lock"
    lock2_path.write_text(yaml.safe_dump(lock2, sort_keys=False))
    arts2 = d / "artifacts2"
    arts2.mkdir()
    for f in arts.iterdir():
        if f.name != "wheels":
            (arts2 / f.name).symlink_to(f)
    _link_wheels([w for w in all_wheels if not w.name.startswith("accelerate-")] + [alt_whl], arts2 / "wheels")
    bench = WORK / "bench"  # inputs for benchmarks/image.py
    shutil.rmtree(bench, ignore_errors=True)
    bench.mkdir(parents=True)
    shutil.copytree(arts, bench / "artifacts", symlinks=False, ignore=shutil.ignore_patterns("wheels"))
    _link_wheels(all_wheels, bench / "artifacts" / "wheels")
    shutil.copytree(bench / "artifacts", bench / "artifacts2", symlinks=True, ignore=shutil.ignore_patterns("wheels"))
    _link_wheels([w for w in all_wheels if not w.name.startswith("accelerate-")] + [alt_whl], bench / "artifacts2" / "wheels")
    shutil.copy2(lock_path, bench / "envkit.lock")
    shutil.copy2(lock2_path, bench / "envkit2.lock")
    return {
        "dir": d,
        "lock": lock_path,
        "artifacts": arts,
        "lock2": lock2_path,
        "artifacts2": arts2,
        "wheels": wheels,
        "accelerate": (got["accelerate"], alt_ver),
    }


# a bound that catches a hang, not a speed target: `make test` runs these builds beside the rest of the suite, and a
# first build took 900 s there on a machine loaded by other work too
BUILD_TIMEOUT = 2400


def _envkit(*args: str, timeout: int = BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    """The CLI on this test's locks, which are edited on purpose (the CI's torch and wheel versions, zip hashes)."""
    return subprocess.run(
        [sys.executable, "-m", "envkit", "--accept-edited-lock", *args], capture_output=True, text=True, timeout=timeout
    )


def _image_build(lock: Path, artifacts: Path, tag: str, *extra: str) -> dict:
    """`envkit image build --json` of `lock` with `artifacts` on the test base, tagged `tag`; its JSON summary."""
    r = _envkit(
        "image", "build", "--lock", str(lock), "--artifacts", str(artifacts), "--base", os.environ["ENVKIT_TEST_BASE"],
        "--tag", tag, *extra, "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout)


def _layers(engine, ref: str) -> list[str]:
    return engine.inspect(ref)["RootFS"]["Layers"]


def test_build_run_and_rebuild(inputs) -> None:
    """One build (the engine's layer cache is used: torch and CANN layers of earlier sessions are reused),
    the checks inside it, then the rebuild after a Python-only change (the accelerate pin)."""
    from envkit.executor.docker import Engine
    from envkit.lock.file import read_lock

    tag = "localhost/envkit-test:first"
    first = _image_build(inputs["lock"], inputs["artifacts"], tag)
    eng = Engine()
    lock = read_lock(inputs["lock"])
    info = eng.inspect(tag)
    labels = info["Config"]["Labels"]
    assert labels["io.envkit.lock.digest"] == first["lock_digest"]
    assert labels["io.envkit.stack.cann"] == lock.stack.cann
    assert info["Config"]["User"] == "HwHiAiUser"

    # CANN version files and the baked environment
    home = lock.layout.home
    rc, out = eng.run(tag, ["bash", "-c", f"cat {home}/x86_64-linux/ascend_toolkit_install.info; env | sort; id"])
    assert rc == 0, out
    assert f"version={lock.stack.cann}" in out
    assert f"ASCEND_TOOLKIT_HOME={home}" in out and f"ASCEND_OPP_PATH={home}/opp" in out
    assert "/usr/local/Ascend/driver/lib64" in out and "groups=1000(HwHiAiUser)" in out
    rc, out = eng.run(tag, ["bash", "-c", "ls /usr/local/Ascend/nnal/atb/latest/atb && ls /tmp/envkit-cann 2>&1 | wc -l"])
    assert rc == 0 and "cxx_abi_1" in out, out
    # torch and numpy from the torch layer and the rest layer; torch_npu installed beside torch
    rc, out = eng.run(
        tag,
        [
            "python",
            "-c",
            "import importlib.metadata as m, torch, numpy, accelerate; "
            "print(torch.__version__, numpy.__version__, m.version('torch_npu'), accelerate.__version__)",
        ],
        env=NO_AUTOLOAD,
    )
    assert rc == 0, out
    assert out.split()[:4] == [TORCH, lock.stack.numpy, TORCH_NPU, inputs["accelerate"][0]], out

    # envkit smoke inside: cpu passes, npu is refused (exit 2) for the missing CANN libraries / driver.
    # The fixture CANN has no real libraries, so torch_npu cannot load here, and transformers/accelerate
    # import it whenever it is installed: the cpu run gets a throwaway container without torch_npu.
    rc, out = eng.run(
        tag,
        [
            "bash",
            "-c",
            "pip uninstall -q -y torch_npu && exec envkit smoke --device cpu --dtype fp32 --out /tmp/smoke --repeat 2",
        ],
        env=NO_AUTOLOAD,
        user="root",
    )
    assert rc == 0, out[-3000:]
    # torch_npu is there, so smoke gets to CANN: the fixture's libraries are zero-byte placeholders
    # ("file too short"), and without them (as without a CANN install or the driver mount) the mapped message
    # names the missing library
    rc, out = eng.run(tag, ["envkit", "smoke", "--device", "npu", "--out", "/tmp/smoke-npu", "--json"])
    assert rc == 2, out[-3000:]
    assert "torch_npu is not installed" not in out and "libhccl.so" in out, out[-3000:]
    rc, out = eng.run(
        tag,
        [
            "bash",
            "-c",
            "find /usr/local/Ascend -name 'lib*.so*' -size 0 -delete && exec envkit smoke --device npu --out /tmp/smoke-npu",
        ],
        user="root",
    )
    assert rc == 2, out[-3000:]
    assert "CANN library lib" in out and "not found" in out, out[-3000:]
    # envkit doctor inside reports the image's stack
    rc, out = eng.run(tag, ["envkit", "doctor", "--json"])
    assert rc in (0, 1), out[-3000:]
    assert lock.stack.cann in out and TORCH.split("+")[0] in out and TORCH_NPU in out

    # rebuild after a Python-only change (accelerate): the CANN and torch layers are reused
    tag2 = "localhost/envkit-test:second"
    second = _image_build(inputs["lock2"], inputs["artifacts2"], tag2)
    l1, l2 = _layers(eng, tag), _layers(eng, tag2)
    # base + os layers, the CANN copy (/usr/local/Ascend, /etc/Ascend) and the torch venv: identical;
    # only the rest-of-Python layer, envkit's layer on it and the lock copy after them differ
    n_same = next((i for i, (a, b) in enumerate(zip(l1, l2, strict=False)) if a != b), len(l1))
    assert len(l1) == len(l2) and 3 <= n_same < len(l1) and n_same >= len(l1) - 4, (l1, l2)
    rc, out = eng.run(tag2, ["python", "-c", "import accelerate; print(accelerate.__version__)"], env=NO_AUTOLOAD)
    assert rc == 0 and out.split()[0] == inputs["accelerate"][1], out
    (WORK / "last-build-times.json").write_text(json.dumps({"first": first["seconds"], "python_only": second["seconds"]}))


def _closure_from_wheelhouse(lock_path: Path, wheels: list[Path], out: Path) -> Path:
    """The test lock plus a Python closure naming the local wheelhouse (file:// URLs; this CI's torch +cpu wheel
    is not on PyPI). envkit itself is left out: the bundle brings its own wheel."""
    import hashlib

    from packaging.version import Version

    from envkit.artifacts.closure import make_target
    from envkit.artifacts.wheels import normalize
    from envkit.lock.file import dump_lock, read_lock
    from envkit.models.lock import ClosurePackage, PythonClosure

    lock = read_lock(lock_path)
    newest: dict[str, Path] = {}
    for w in wheels:
        w = w.resolve()
        name, ver = normalize(w.name.split("-")[0]), w.name.split("-")[1]
        if name != "envkit" and (name not in newest or Version(ver) > Version(newest[name].name.split("-")[1])):
            newest[name] = w
    pkgs = [
        ClosurePackage(
            name=n,
            version=w.name.split("-")[1],
            filename=w.name,
            url=w.as_uri(),
            sha256=hashlib.sha256(w.read_bytes()).hexdigest(),
            size=w.stat().st_size,
        )
        for n, w in sorted(newest.items())
    ]
    target = make_target(lock.stack.python, lock.stack.arch, lock.platform.glibc)
    closure = PythonClosure(
        target=target,
        roots=sorted(newest),
        index_url="file://" + str(WORK),
        resolver="test wheelhouse",
        packages=pkgs,
        mirrors=sorted({WORK.as_uri() + "/", WORK.resolve().as_uri() + "/"}),
    )
    python = lock.python.model_copy(update={"closure": closure, "controller": closure})
    out.write_text(dump_lock(lock.model_copy(update={"python": python})))
    return out


def _bundle_build_image(inputs: dict, lock: Path, out: Path, timeout: int = BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    """`envkit bundle build --image --json` of `lock` with the test's artifacts and base, into `out`."""
    return _envkit(
        "bundle",
        "build",
        "--lock",
        str(lock),
        "--artifacts",
        str(inputs["artifacts"]),
        "--trust-artifacts",
        "--base",
        os.environ["ENVKIT_TEST_BASE"],
        "--image",
        "-o",
        str(out),
        "--json",
        timeout=timeout,
    )


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own (the 1.75 GB image archive, the wheels), removed with everything it built."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(cache))
    yield cache
    for p in (cache, tmp_path / "bundle", tmp_path / "again"):
        shutil.rmtree(p, ignore_errors=True)


def test_bundle_build_image_builds_saves_and_loads(inputs, tmp_path, own_cache) -> None:
    """`envkit bundle build --image`: the bundle's own rendered context, built through the engine, saved into
    the bundle; the archive loads and the image runs envkit from the bundle's wheel."""
    from envkit.executor.docker import Engine

    lock = _closure_from_wheelhouse(
        inputs["lock"], sorted((inputs["artifacts"] / "wheels").glob("*.whl")), tmp_path / "closure.lock"
    )
    out = tmp_path / "bundle"
    r = _bundle_build_image(inputs, lock, out)
    assert r.returncode == 0, r.stderr[-4000:]
    info = json.loads(r.stdout)
    assert not any("image" in x for x in info["lacks"]), info["lacks"]
    archive = out / "image" / "image.tar"
    assert archive.is_file() and (out / "image" / "context" / "Dockerfile").is_file()
    r = _envkit("bundle", "verify", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stdout[-2000:]
    eng = Engine()
    tag = "envkit/910b:cann{}-torch{}-py3.11".format(yaml.safe_load(lock.read_text())["stack"]["cann"], TORCH.replace("+", "-"))
    eng.remove_image(tag)
    with open(archive, "rb") as fh:
        eng.client.images.load(fh)
    labels = eng.inspect(tag)["Config"]["Labels"]
    assert labels["io.envkit.stack.torch"] == TORCH and labels["io.envkit.lock.digest"].startswith("sha256:")
    rc, out_text = eng.run(tag, ["envkit", "--version"])
    assert rc == 0 and out_text.strip().startswith("envkit "), out_text
    # a second build of the same lock takes the image archive from the cache (keyed by the context)
    r = _bundle_build_image(inputs, lock, tmp_path / "again")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "from the cache" in " ".join(r.stderr.split()), r.stderr  # (a long line may be wrapped)
    again = tmp_path / "again" / "image" / "image.tar"
    assert os.stat(again).st_ino == os.stat(archive).st_ino  # both hard links of the one cached archive
    eng.remove_image(tag)


VLLM_CLI = "import sys\n\n\ndef main():\n    print('vllm-standin', *sys.argv[1:])\n"


def _serving_inputs(inputs: dict, d: Path) -> tuple[Path, Path]:
    """The test lock with the serving stack of its CANN (vLLM Ascend 0.23.0 and triton-ascend 3.2.2 pair with
    CANN 9.1.0, matrices/serving.yaml), and artifacts whose wheelhouse adds stand-ins of the serving wheels as the
    vendor ships them: vllm built with VLLM_TARGET_DEVICE=empty (its `vllm` console script), vllm-ascend
    (manylinux_2_34, its platform plugin entry point, Requires-Dist torch-npu) and triton-ascend. PyPI's vllm is
    a CUDA build and the real vllm-ascend needs CANN's libraries, so neither can run here."""
    from tests.airgap.torchindex import standin_wheel

    lock = yaml.safe_load(inputs["lock"].read_text())
    assert lock["stack"]["cann"] == "9.1.0", lock["stack"]  # the pairing below is the matrix's for CANN 9.1.0
    serving = {"vllm": "0.23.0", "vllm_ascend": "0.23.0", "triton_ascend": "3.2.2"}
    lock["stack"].update(serving)
    lock["python"]["indexes"]["ascend-pypi"] = "https://mirrors.huaweicloud.com/ascend/repos/pypi"
    lock["python"]["requirements"] += [
        {"name": "vllm", "version": serving["vllm"], "index": None},
        {"name": "vllm-ascend", "version": serving["vllm_ascend"], "index": None},
        {"name": "triton-ascend", "version": serving["triton_ascend"], "index": "ascend-pypi"},
    ]
    lock_path = d / "serving.lock"
    lock_path.write_text(yaml.safe_dump(lock, sort_keys=False))
    stand_ins = d / "serving-wheels"
    stand_ins.mkdir()
    cp = "cp311"
    made = [
        standin_wheel(
            stand_ins,
            "vllm",
            serving["vllm"],
            "py3-none-any",
            ["transformers", "numpy"],
            entry_points={"console_scripts": {"vllm": "vllm._standin_cli:main"}},
            modules={"vllm/_standin_cli.py": VLLM_CLI},
        ),
        standin_wheel(
            stand_ins,
            "vllm_ascend",
            serving["vllm_ascend"],
            f"{cp}-{cp}-manylinux_2_34_x86_64",
            [f"torch-npu=={TORCH_NPU}"],
            entry_points={"vllm.platform_plugins": {"ascend": "vllm_ascend:register"}},
        ),
        standin_wheel(stand_ins, "triton_ascend", serving["triton_ascend"], f"{cp}-{cp}-manylinux_2_28_x86_64"),
    ]
    arts = d / "serving-artifacts"
    arts.mkdir()
    for f in inputs["artifacts"].iterdir():
        if f.name != "wheels":
            (arts / f.name).symlink_to(f)
    _link_wheels(sorted((inputs["artifacts"] / "wheels").iterdir()) + made, arts / "wheels")
    return lock_path, arts


def test_the_serving_variant_builds_on_the_base_layers(inputs, tmp_path) -> None:
    """`envkit image build --variant serving` through the engine: the base image's layers (OS, CANN, torch) are
    reused as they are, the serving layer follows torch, and the image runs `vllm serve` as its entry point with
    the serving environment; vllm-ascend's install left torch_npu as locked and brought no upstream triton."""
    from envkit.executor.docker import Engine
    from envkit.export.container import NPU_SERVING_ENV

    eng = Engine()
    first = "localhost/envkit-test:first"
    try:
        eng.inspect(first)
    except Exception:  # noqa: BLE001 - this test alone: the base variant first (the engine's cache makes it quick)
        _image_build(inputs["lock"], inputs["artifacts"], first)
    lock, arts = _serving_inputs(inputs, tmp_path)
    tag = "localhost/envkit-test:serving"
    built = _image_build(lock, arts, tag, "--variant", "serving")
    info = eng.inspect(tag)
    cfg = info["Config"]
    assert cfg["Entrypoint"] == ["vllm", "serve"], cfg["Entrypoint"]
    assert cfg["Labels"]["io.envkit.variant"] == "serving" and cfg["Labels"]["io.envkit.lock.digest"] == built["lock_digest"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert {k: env.get(k) for k in NPU_SERVING_ENV} == NPU_SERVING_ENV, env

    # one build cache: every layer of the base image up to its torch venv is the serving image's own, unchanged;
    # the serving image has one layer more (the serving venv part, copied after torch)
    l1, l2 = _layers(eng, first), _layers(eng, tag)
    n_same = next((i for i, (a, b) in enumerate(zip(l1, l2, strict=False)) if a != b), len(l1))
    assert len(l2) == len(l1) + 1 and 3 <= n_same and n_same >= len(l1) - 3, (n_same, l1, l2)

    # the entry point is the installed `vllm` console script, with the arguments `docker run IMAGE ...` appends
    rc, out = eng.run(tag, ["/models/tiny", "--port", "8000"], env=NO_AUTOLOAD)
    assert rc == 0 and out.split() == ["vllm-standin", "serve", "/models/tiny", "--port", "8000"], out
    code = (
        "import importlib.metadata as m, importlib.util as u; "
        "print(*[m.version(p) for p in ('vllm', 'vllm-ascend', 'triton-ascend', 'torch-npu', 'torch')], "
        "[e.value for e in m.entry_points(group='vllm.platform_plugins')], u.find_spec('triton') is None)"
    )
    rc, out = eng.run(tag, ["-c", code], env=NO_AUTOLOAD, entrypoint=["python"])
    assert rc == 0, out
    assert out.split() == ["0.23.0", "0.23.0", "3.2.2", TORCH_NPU, TORCH, "['vllm_ascend:register']", "True"], out
    # envkit doctor inside reads the serving packages from their metadata and finds them paired with the image's CANN
    rc, out = eng.run(tag, ["doctor", "--json"], entrypoint=["envkit"])
    assert rc in (0, 1), out[-3000:]
    checks = {c["name"]: c for c in json.loads(out[out.index("{") :])["checks"]}
    want = {
        "vLLM and vllm-ascend": "vllm-ascend 0.23.0 with vLLM 0.23.0",
        "upstream triton beside triton-ascend": "triton-ascend 3.2.2 without upstream triton",
        "triton-ascend bound to CANN": "triton-ascend 3.2.2 with CANN 9.1.0",
    }
    assert {n: (checks[n]["status"], checks[n]["detail"]) for n in want} == {n: ("ok", d) for n, d in want.items()}, checks
    eng.remove_image(tag)

"""envkit.artifacts.sdist without a build: which wheels a target takes, where a build may run, what CANN's pins yield."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envkit.artifacts.closure import cann_runtime_yields, host_arch, host_python, make_target
from envkit.artifacts.sdist import Sdist, build_settings, build_wheel, target_takes
from envkit.errors import BadInput, CannotRun


def test_the_built_wheel_tag_is_taken_by_its_own_target_only():
    x86 = make_target("3.11", "x86_64")
    assert target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", x86)  # setuptools' tag for the empty build
    assert target_takes("vllm-0.23.0+empty-py3-none-any.whl", x86)
    assert not target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", make_target("3.11", "aarch64"))
    assert not target_takes("vllm-0.23.0+empty-cp311-cp311-linux_x86_64.whl", make_target("3.10", "x86_64"))


def test_the_build_settings_are_the_vendors_and_a_fixed_epoch():
    assert build_settings("vLLM") == {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": "315532800"}


def test_a_build_for_another_arch_or_python_is_refused_before_anything_is_fetched(tmp_path):
    other = "aarch64" if host_arch() == "x86_64" else "x86_64"
    sdist = Sdist("vllm", "0.23.0", "vllm-0.23.0.tar.gz", "http://127.0.0.1:9/vllm-0.23.0.tar.gz", "0" * 64, 1)
    for target in (make_target(host_python(), other), make_target("3.9" if host_python() != "3.9" else "3.10", host_arch())):
        with pytest.raises(CannotRun) as exc:  # nothing listens on 127.0.0.1:9: a fetch would fail otherwise
            build_wheel(
                sdist, target=target, torch="torch==2.10.0", torch_index="http://127.0.0.1:9/", index_url="http://127.0.0.1:9/"
            )
        assert f"target is Python {target.python} on {target.arch}" in exc.value.message
        assert "--exclude vllm" in (exc.value.hint or "")


def test_cann_runtime_pins_yield_to_the_built_wheel_and_the_locks_pins_never():
    lock = SimpleNamespace(
        python=SimpleNamespace(
            cann_runtime=["protobuf==3.20.0", "numpy", "scipy"],
            requirements=[SimpleNamespace(name="numpy", version="1.26.4")],
        )
    )
    roots = ["numpy==1.26.4", "protobuf==3.20.0", "scipy", "attrs"]
    said: list[str] = []
    got = cann_runtime_yields(lock, roots, ["protobuf>=5.29.6", "numpy", "attrs>=1"], said.append)  # type: ignore[arg-type]
    assert got == ["numpy==1.26.4", "protobuf", "scipy", "attrs"]  # numpy is the lock's pin: it stays
    assert len(said) == 1 and said[0].startswith("protobuf==3.20.0 (CANN's install guide) yields")


def test_locking_the_default_serving_lock_on_another_machine_names_the_real_cause(run_cli, tmp_path, monkeypatch):
    """The default serving lock (aarch64, Python 3.10) locked on a machine that is not its target: exit 2 saying the
    wheel would carry this machine's tags, before any index is asked (nothing listens on 127.0.0.1:9), and not the
    old "no --exclude torch" although nothing was excluded."""
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    lock = tmp_path / "envkit.lock"
    r = run_cli("resolve", "--workload", "serving", "-o", str(lock))
    assert r.code == 0, r.err
    if (host_python(), host_arch()) == ("3.10", "aarch64"):
        pytest.skip("this machine is the default serving lock's target")
    r = run_cli("lock", "--lock", str(lock), "--index-url", "http://127.0.0.1:9/simple")
    assert r.code == 2, r.out + r.err
    said = " ".join(r.err.split())
    assert f"on this machine (Python {host_python()}, {host_arch()}), and the lock's target is Python 3.10 on aarch64" in said
    assert "--exclude vllm" in said and "--exclude torch" not in said and "Traceback" not in r.err


def test_the_build_takes_torch_from_the_index_the_lock_names_or_else_the_closures_own(monkeypatch):
    """x86_64: the lock names PyTorch's CPU index for torch, and the build takes torch from there alone; aarch64 (no
    index named: PyPI's torch is its CPU build): from the closure's own index, never a KeyError."""
    from envkit.artifacts import closure, sdist

    seen: list[str] = []
    found = Sdist("vllm", "0.23.0", "vllm-0.23.0.tar.gz", "http://127.0.0.1:9/vllm-0.23.0.tar.gz", "0" * 64, 1)
    monkeypatch.setattr(sdist, "find_sdist", lambda *a, **k: found)
    monkeypatch.setattr(sdist, "refuse_foreign_target", lambda *a: None)

    def build(_sdist, **kw):
        seen.append(kw["torch_index"])
        return SimpleNamespace(package=SimpleNamespace(filename="vllm.whl"), cached=True)

    monkeypatch.setattr(sdist, "build_wheel", build)
    roots = ["torch==2.10.0", "vllm==0.23.0"]
    sources = {"index_url": "http://127.0.0.1:9/simple", "extra_index_urls": (), "find_links": ()}
    target = make_target(host_python(), host_arch())
    for pinned in ({"torch": "http://127.0.0.1:9/whl/cpu"}, {}):
        closure.build_from_sdists(None, roots, target, pinned, sources, lambda _m: None)  # type: ignore[arg-type]
    assert seen == ["http://127.0.0.1:9/whl/cpu", "http://127.0.0.1:9/simple"]
    with pytest.raises(BadInput, match="closure leaves torch out"):
        closure.build_from_sdists(None, ["vllm==0.23.0"], target, {}, sources, lambda _m: None)  # type: ignore[arg-type]


def test_torchs_cuda_pins_marked_for_x86_64_do_not_make_an_aarch64_torch_a_cuda_build():
    """PyPI's aarch64 torch is its CPU build, yet its Requires-Dist names nvidia-* and triton under
    `platform_machine == "x86_64"`: the build's CUDA check reads them in the target's marker environment."""
    from pathlib import Path

    from envkit.artifacts.sdist import CUDA_REQUIREMENT, _req_name
    from envkit.artifacts.wheels import applies, marker_environment

    text = (Path(__file__).parents[1] / "fixtures" / "torch-2.10.0-aarch64-requires.txt").read_text()
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    cuda = {r for r in lines if CUDA_REQUIREMENT.match(_req_name(r))}
    assert len(cuda) == 17
    for arch, python, want in (("aarch64", "3.11", set()), ("x86_64", "3.11", cuda), ("x86_64", "3.10", cuda)):
        assert {r for r in cuda if applies(r, marker_environment(python, arch))} == want, arch
    plain = [r for r in lines if r not in cuda]
    assert [r for r in lines if applies(r, marker_environment("3.12", "aarch64"))] == plain
    assert [r for r in lines if applies(r, marker_environment("3.11", "aarch64"))] == [r for r in plain if "3.12" not in r]
    assert not applies('numpy; extra == "opt"', marker_environment("3.11", "x86_64"))


def _plan(**kw):
    from envkit.artifacts.closure import ClosurePlan

    return ClosurePlan(roots=("vllm-ascend==0.23.0",), target=make_target("3.11", "aarch64", "2.35"), **kw)


def test_a_version_without_a_wheel_for_the_target_is_named_with_what_needs_it():
    """uv's own words (recorded: tests/fixtures/uv/no-usable-wheels.txt) for PyPI's arctic-inference 0.1.1, an sdist
    only, which vllm-ascend 0.23.0 pins: exit 2 naming both, the target and the indexes, and the ways on."""
    from pathlib import Path

    from envkit.artifacts.closure import no_wheel_failure

    err = (Path(__file__).parents[1] / "fixtures" / "uv" / "no-usable-wheels.txt").read_text()
    with pytest.raises(CannotRun) as info:
        no_wheel_failure(_plan(extra_index_urls=("https://mirror.example/simple",)), err)
    assert info.value.message == (
        "arctic-inference 0.1.1, which vllm-ascend 0.23.0 requires, has no wheel for Python 3.11 on "
        "manylinux_2_35_aarch64 on the indexes (https://pypi.org/simple, https://mirror.example/simple): envkit locks "
        "wheels only (an sdist's code never runs to resolve or install)"
    )
    hint = info.value.hint or ""
    assert "--find-links DIR" in hint and "--exclude vllm-ascend" in hint and "has no usable wheels" in hint
    # a root of its own ("you require"), and uv's line wrapped anywhere
    wrapped = "  cause: Because arctic-inference==0.1.1 has no usable\n     wheels and you require arctic-inference==0.1.1, we"
    with pytest.raises(CannotRun, match=r"^arctic-inference 0\.1\.1 has no wheel for Python 3\.11") as info:
        no_wheel_failure(_plan(), wrapped)
    assert "--exclude arctic-inference" in (info.value.hint or "")
    # any other failure is left to the next reader
    no_wheel_failure(_plan(), "error: No solution found\n  cause: Because there is no version of triton-ascend==3.2.2")


# --- what a build leaves is read back as someone else's files -------------------------------------------------------
def _sdist_bytes() -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b'[build-system]\nrequires = ["setuptools>=77"]\n'
        info = tarfile.TarInfo("vllm-0.23.0/pyproject.toml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _wheel_bytes(name: str = "vllm", version: str = "0.23.0+empty") -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return buf.getvalue()


REPORT = '{"install": [{"metadata": {"name": "torch", "version": "2.10.0"}, "download_info": {"archive_info": {}}}]}'


class _Staged:
    """A `BuildPlace` that runs nothing: each step leaves in the build folder what `leave` puts there, as a build in a
    container may leave anything (a link out of the folder, a file that is no wheel)."""

    python = "python3"

    def __init__(self, work, leave):
        self.work, self.leave = work, leave

    @property
    def root(self):
        from pathlib import PurePosixPath

        return PurePosixPath(self.work)

    def check_target(self, name, target):
        pass

    def run(self, cmd, env, what):
        self.leave(self.work, what)


def _build(tmp_path, leave):
    import hashlib

    from envkit.artifacts.download import WheelCache

    cache = WheelCache(tmp_path / "cache")
    raw = _sdist_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    cache.root.mkdir(parents=True)
    cache.path(sha).write_bytes(raw)
    sdist = Sdist("vllm", "0.23.0", "vllm-0.23.0.tar.gz", "https://files.example/vllm-0.23.0.tar.gz", sha, len(raw))
    return build_wheel(
        sdist,
        target=make_target(host_python(), host_arch()),
        torch="torch==2.10.0",
        torch_index="https://download.example/whl/cpu",
        index_url="https://pypi.example/simple",
        cache=cache,
        place_in=lambda work, _target: _Staged(work, leave),
    )


def _steps(outside, *, report="file", wheel="file", requires_size=None):
    """What each step leaves: the report, torch's requirements, the wheel; 'link' puts a link to `outside` instead."""
    tag = f"cp{host_python().replace('.', '')}"
    name = f"vllm-0.23.0+empty-{tag}-{tag}-linux_{host_arch()}.whl"

    def leave(work, what):
        if what.startswith("installing torch"):
            (outside / "report.json").write_text(REPORT)
            if report == "link":
                (work / "torch.json").symlink_to(outside / "report.json")
            else:
                (work / "torch.json").write_text(REPORT)
        elif what == "reading torch's requirements":
            text = 'filelock\nnvidia-nccl-cu12; platform_machine == "s390x"\n'
            if requires_size is not None:  # padded with blank space, which reads as no requirement
                text += " " * (requires_size - len(text))
            (work / "torch-requires.txt").write_text(text)
        elif what.startswith("building"):
            body = _wheel_bytes() if wheel != "junk" else b"not a zip"
            (outside / name).write_bytes(body)
            if wheel == "link":
                (work / "out" / name).symlink_to(outside / name)
            else:
                (work / "out" / name).write_bytes(body)

    return leave


def test_a_build_is_read_back_from_its_folder_as_the_steps_left_it(tmp_path):
    """The control: a report, torch's requirements and one wheel, all regular files of the folder, give the built wheel
    (torch's version from the report, its CUDA pin for another arch not read as one)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    built = _build(tmp_path, _steps(outside))
    assert built.package.name == "vllm" and built.package.version == "0.23.0+empty" and not built.cached
    assert built.package.built is not None and built.package.built.torch == "2.10.0"


@pytest.mark.parametrize(("how", "said"), [({"report": "link"}, "torch.json"), ({"wheel": "link"}, ".whl")])
def test_a_link_the_build_leaves_out_of_its_folder_is_never_followed(tmp_path, how, said):
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(BadInput) as info:
        _build(tmp_path, _steps(outside, **how))
    assert said in info.value.message, info.value.message
    assert not list((tmp_path / "cache").rglob("*.whl"))  # nothing taken into the cache


def test_a_built_file_that_is_no_wheel_is_check_failed_not_a_traceback(tmp_path):
    from envkit.errors import CheckFailed

    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(CheckFailed, match=r"^the wheel built from vllm-0\.23\.0\.tar\.gz, vllm-.*\.whl is not a readable wheel"):
        _build(tmp_path, _steps(outside, wheel="junk"))
    assert not list((tmp_path / "cache").rglob("*.whl"))


def test_torchs_requirements_are_read_up_to_the_build_notes_cap_and_refused_past_it(tmp_path):
    from envkit.artifacts.sdist import BUILD_NOTE

    for size, ok in ((BUILD_NOTE.max_bytes, True), (BUILD_NOTE.max_bytes + 1, False)):
        run = tmp_path / str(size)
        (run / "outside").mkdir(parents=True)
        if ok:
            assert _build(run, _steps(run / "outside", requires_size=size)).package.name == "vllm"
        else:
            with pytest.raises(BadInput, match="torch-requires.txt is too large"):
                _build(run, _steps(run / "outside", requires_size=size))

"""A lock cannot make envkit run an sdist's code: a `built:` package is envkit's one recipe (vLLM, the vendor's
settings, an sdist of that very project at the package's URL) or the lock is bad input, and `bundle build` builds
one again only when the user names the sdist's sha256 (`--build-sdist`). Each hostile lock goes through every
command that reads a lock; the sdist on offer would leave a marker file if anything ran its `setup.py`."""

from __future__ import annotations

import copy
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
import yaml

EPOCH = "315532800"


def _evil_sdist(folder: Path, marker: Path, name: str = "vllm", version: str = "0.23.0") -> Path:
    """An sdist whose setup.py (run by any build of it) writes `marker`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}.tar.gz"
    setup = f"open({str(marker)!r}, 'w').write('ran')\nfrom setuptools import setup\nsetup(name={name!r}, version={version!r})\n"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in (("setup.py", setup), ("PKG-INFO", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _closure(sdist: Path, name: str, env: dict[str, str], command: str = "pip wheel --no-build-isolation --no-deps") -> dict:
    version = sdist.name.split("-")[-1].removesuffix(".tar.gz")
    torch = "torch-2.5.1-cp310-cp310-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    return {
        "target": {"python": "3.10", "arch": "aarch64", "glibc": "2.28", "platform": "manylinux_2_28_aarch64"},
        "roots": [f"{name}=={version}", "torch==2.5.1"],
        "index_url": "https://pypi.org/simple",
        "resolver": "uv 0.13.9",
        "mirrors": [sdist.parent.as_uri() + "/"],
        "packages": [
            {
                "name": "torch",
                "version": "2.5.1",
                "filename": torch,
                "url": f"https://files.pythonhosted.org/packages/{torch}",
                "sha256": "a" * 64,
                "size": 100,
            },
            {
                "name": name,
                "version": f"{version}+empty",
                "filename": f"{name}-{version}+empty-cp310-cp310-linux_aarch64.whl",
                "url": sdist.as_uri(),
                "sha256": "c" * 64,
                "size": 100,
                "built": {
                    "sdist": sdist.name,
                    "sdist_sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
                    "env": env,
                    "command": command,
                    "torch": "2.5.1",
                    "torch_sha256": "a" * 64,
                },
            },
        ],
    }


@pytest.fixture
def scene(lock_doc, tmp_path, monkeypatch):
    """An empty wheel cache, an evil sdist beside it, and a function writing a lock whose closure builds it."""
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    marker = tmp_path / "setup-py-ran"

    def write(name: str = "vllm", env: dict[str, str] | None = None, **kw: str) -> tuple[Path, dict]:
        sdist = _evil_sdist(tmp_path / "sdists", marker, name)
        doc = copy.deepcopy(lock_doc)
        doc["python"]["closure"] = _closure(sdist, name, env or {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": EPOCH}, **kw)
        path = tmp_path / "envkit.lock"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path, doc

    return write, marker


# what a lock may not say about a built package: each refused by the schema's rule, by every command reading a lock
HOSTILE = {
    "another project": (dict(name="alpha"), "envkit builds only vllm"),
    "settings of its own": (
        dict(env={"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": EPOCH, "LD_PRELOAD": "/tmp/x.so"}),
        "is not envkit's build of vllm",
    ),
    "another target device": (dict(env={"VLLM_TARGET_DEVICE": "cuda", "SOURCE_DATE_EPOCH": EPOCH}), "built.env"),
    "a command of its own": (dict(command="pip wheel --no-deps"), "built.command"),
}

READERS = {
    "validate": ["validate", "{f}"],
    "bundle build": ["bundle", "build", "--lock", "{f}", "-o", "{out}"],
    "image render": ["image", "render", "--lock", "{f}", "-o", "{out}"],
    "image run-args": ["image", "run-args", "--lock", "{f}"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_built_package_other_than_envkits_recipe_is_bad_input(case, reader, scene, tmp_path, run_cli):
    write, marker = scene
    kw, said = HOSTILE[case]
    path, _ = write(**kw)
    out = tmp_path / "out"
    res = run_cli(*[a.format(f=path, out=out) for a in READERS[reader]])
    assert res.code == 2, (case, reader, res.out, res.err)
    assert said in res.out + res.err, (case, reader, res.out, res.err)
    assert "Traceback" not in res.err
    assert not marker.exists() and not out.exists()


def test_the_rule_accepts_envkits_own_recipe_and_names_the_sdist_it_needs(scene):
    """The other side of the rule: the recipe as `envkit lock` writes it validates; an sdist of another version or
    project, or a URL that is not that sdist, does not."""
    from envkit.models.lock import PythonClosure

    write, _ = scene
    _, doc = write()
    closure = doc["python"]["closure"]
    PythonClosure.model_validate(closure)  # as envkit lock writes it
    for field, value, said in (
        ("sdist", "vllm-0.24.0.tar.gz", "is not the sdist of vllm 0.23.0"),
        ("sdist", "other-0.23.0.tar.gz", "is not the sdist of vllm 0.23.0"),
        ("sdist", "vllm-0.23.0.whl", "is not an sdist file name"),
    ):
        bad = copy.deepcopy(closure)
        bad["packages"][1]["built"][field] = value
        with pytest.raises(ValueError, match=said):
            PythonClosure.model_validate(bad)
    bad = copy.deepcopy(closure)
    bad["packages"][1]["url"] = bad["packages"][1]["url"].replace("vllm-0.23.0.tar.gz", "vllm-0.23.0-evil.tar.gz")
    with pytest.raises(ValueError, match="is not the sdist's"):
        PythonClosure.model_validate(bad)


def test_bundle_build_never_builds_an_sdist_the_user_did_not_name(scene, tmp_path, run_cli):
    """envkit's own recipe, the wheel not in the cache: `bundle build` refuses before anything is fetched or built
    (exit 2, the sha256 and how to allow it named); a --build-sdist naming another sha256 allows nothing."""
    write, marker = scene
    path, doc = write()
    sha = doc["python"]["closure"]["packages"][1]["built"]["sdist_sha256"]
    out = tmp_path / "bundle"
    for extra in ([], ["--build-sdist", "0" * 64]):
        res = run_cli("bundle", "build", "--lock", str(path), "-o", str(out), *extra)
        assert res.code == 2, (extra, res.out, res.err)
        assert f"--build-sdist {sha}" in res.err and "runs that sdist's code" in res.err, res.err
        assert "python.closure.packages.vllm.built" in res.err, res.err
        assert "Traceback" not in res.err
        assert not marker.exists() and not out.exists()
        assert not (tmp_path / "cache" / "built").exists()


@pytest.mark.parametrize("value", ["", "0" * 63, "0" * 65, "G" * 64, "A" * 64, "0" * 63 + "\n"])
def test_build_sdist_takes_a_sha256_only(value, scene, tmp_path, run_cli):
    write, _ = scene
    path, _ = write()
    res = run_cli("bundle", "build", "--lock", str(path), "-o", str(tmp_path / "b"), "--build-sdist", value)
    assert res.code == 2 and "is not a sha256" in res.err, (value, res.err)
    assert not (tmp_path / "b").exists()


def _sdist_with(folder: Path, pyproject: bytes) -> Path:
    path = folder / "vllm-0.23.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("vllm-0.23.0/pyproject.toml")
        info.size = len(pyproject)
        tar.addfile(info, io.BytesIO(pyproject))
    return path


def test_an_sdists_pyproject_is_read_within_its_cap_and_as_toml_only(tmp_path):
    """The build requirements come from the sdist's pyproject.toml: not TOML, not UTF-8, larger than the cap, or no
    tar at all is bad input naming the sdist (was a traceback, and a huge one was read whole into memory); the cap
    holds at both ends."""
    from envkit.artifacts.sdist import MAX_PYPROJECT, _build_requires
    from envkit.errors import BadInput

    toml = b'[build-system]\nrequires = ["setuptools>=77", "torch==2.5.1", "cmake"]\n'
    at_cap = toml + b"#" * (MAX_PYPROJECT - len(toml) - 1) + b"\n"
    assert len(at_cap) == MAX_PYPROJECT
    assert _build_requires(_sdist_with(tmp_path, at_cap)) == ["setuptools>=77", "cmake"]
    for body, said in (
        (at_cap + b"#", "more than the"),
        (b"[build-system\nrequires = [", "is not TOML"),
        (b"\xff\xfe[build-system]", "is not TOML"),
    ):
        with pytest.raises(BadInput, match=said):
            _build_requires(_sdist_with(tmp_path, body))
    (tmp_path / "vllm-0.23.0.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(BadInput, match="not a readable sdist"):
        _build_requires(tmp_path / "vllm-0.23.0.tar.gz")
    assert _build_requires(_sdist_with(tmp_path, b'[build-system]\nrequires = "setuptools"\n')) == []


def test_a_named_sdist_is_built_in_the_build_image_when_one_is_given(scene, tmp_path, run_cli, monkeypatch):
    """`--build-sdist SHA256 --build-image IMAGE`: the build goes to a container of IMAGE, never this machine. With no
    engine at DOCKER_HOST it stops at the build's first step, asking the engine (exit 2 naming it), before the sdist
    is fetched; its code never ran here."""
    write, marker = scene
    path, doc = write()
    sha = doc["python"]["closure"]["packages"][1]["built"]["sdist_sha256"]
    doc["python"]["controller"] = {  # a bundle needs the controller's closure too: an empty one
        **{k: doc["python"]["closure"][k] for k in ("index_url", "resolver", "mirrors")},
        "target": {"python": "3.11", "arch": "x86_64", "glibc": "2.28", "platform": "manylinux_2_28_x86_64"},
        "roots": [],
        "packages": [],
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    out = tmp_path / "bundle"
    args = ["--build-sdist", sha, "--build-image", "localhost/builder:py3.10-arm64"]
    res = run_cli("bundle", "build", "--lock", str(path), "-o", str(out), *args)
    said = " ".join(res.err.split())
    assert res.code == 2, res.out + res.err
    assert f"no container engine answers at unix://{tmp_path}/no-engine.sock" in said, said  # asked for the build
    assert "Traceback" not in res.err and not marker.exists() and not out.exists()
    assert not any((tmp_path / "cache").rglob("*.tar.gz"))  # the sdist was not fetched

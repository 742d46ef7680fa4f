"""The dependency readers (requirements with includes, pyproject.toml, setup.cfg, setup.py, environment.yml), the
classification from matrices/migration.yaml, and the checks against a lock."""

from __future__ import annotations

import textwrap

import pytest

from tests.scan.conftest import PROJECTS, by_rule

CUDA_PACKAGE = {
    ("fastblocks/kernels.py:4", "import-ascend-route"): "info",  # import triton
    ("fastblocks/kernels.py:7", "import-no-ascend-build"): "block",  # from xformers.ops import ...
    ("fastblocks/kernels.py:10", "import-no-ascend-build"): "info",  # flash_attn, in try/except ImportError
    ("fastblocks/kernels.py:14", "cpp-extension-load"): "block",
    ("fastblocks/kernels.py:17", "triton-kernel"): "warn",
    ("fastblocks/kernels.py:26", "cuda-is-cuda"): "warn",
    ("pyproject.toml:12", "dep-no-ascend-build"): "block",  # mamba-ssm (x86_64 marker; no lock: kept)
    ("pyproject.toml:13", "dep-version-too-old"): "warn",  # transformers<4.30: NPU support from 4.32.0
    ("pyproject.toml:17", "dep-ascend-route"): "warn",  # vllm (extra serve)
    ("pyproject.toml:18", "dep-ascend-route"): "warn",  # apex (extra apex)
    ("pyproject.toml:23", "dep-no-ascend-build"): "warn",  # cupy-cuda12x in the PEP 735 group gpu: optional
    ("setup.py:8", "dep-no-ascend-build"): "block",  # flash-attn
    ("setup.py:9", "dep-ascend-route"): "warn",  # triton
    ("setup.py:17", "dep-ascend-route"): "warn",  # deepspeed
    ("setup.py:17", "dep-no-ascend-build"): "block",  # xformers
    ("setup.py:19", "dep-ascend-route"): "warn",  # bitsandbytes (extra quant)
    ("setup.py:20", "dep-no-ascend-build"): "warn",  # nvidia-cublas-cu12 (extra cu12)
    ("setup.py:23", "cuda-extension"): "block",
}


def test_the_cuda_package(scan_json):
    code, doc = scan_json(str(PROJECTS / "cuda-package"))
    assert code == 1
    assert by_rule(doc) == CUDA_PACKAGE
    deps = {(d["name"], d["from"]): d for d in doc["dependencies"]}
    assert {name for name, _ in deps} == {
        "torch", "einops", "mamba-ssm", "transformers", "vllm", "apex", "pytest", "ruff", "cupy-cuda12x",
        "flash-attn", "triton", "xformers", "deepspeed", "bitsandbytes", "nvidia-cublas-cu12",
    }  # fmt: skip
    assert deps[("pytest", "pyproject.toml:21")]["group"] == "group:dev"
    assert deps[("ruff", "pyproject.toml:22")]["group"] == "group:lint"
    assert deps[("xformers", "setup.py:17")]["spec"] == "xformers==0.0.23"
    assert deps[("bitsandbytes", "setup.py:19")]["group"] == "extras:quant"
    assert deps[("flash-attn", "setup.py:8")]["class"] == "no-ascend-build"
    assert deps[("deepspeed", "setup.py:17")]["class"] == "ascend-route"
    assert deps[("einops", "pyproject.toml:11")]["class"] == "unlisted"


def test_every_dependency_without_an_ascend_build_is_named_with_its_ascend_way(scan_json):
    _, doc = scan_json(str(PROJECTS / "cuda-package"))
    no_build = {
        f["message"].split(":")[0].split(">=")[0].split("==")[0]: f for f in doc["findings"] if f["rule"] == "dep-no-ascend-build"
    }
    assert set(no_build) == {"flash-attn", "xformers", "mamba-ssm", "cupy-cuda12x", "nvidia-cublas-cu12"}
    assert "npu_fusion_attention" in no_build["flash-attn"]["fix"]
    assert "npu_fusion_attention" in no_build["xformers"]["fix"]
    assert "torch-npu" in no_build["nvidia-cublas-cu12"]["fix"]
    route = {f["line"]: f["fix"] for f in doc["findings"] if f["rule"] == "dep-ascend-route" and f["path"] == "setup.py"}
    assert "triton-ascend" in route[9] and "DS_ACCELERATOR=npu" in route[17]


def test_the_requirements_tree_with_the_lock(scan_json, lock_aarch64):
    code, doc = scan_json(str(PROJECTS / "req-tree"), "--lock", str(lock_aarch64))
    assert code == 1
    assert by_rule(doc) == {
        ("constraints.txt:1", "lock-conflict"): "block",  # numpy==1.26.4 against the lock's numpy 2.2.6
        ("requirements.txt:4", "cuda-index"): "block",
        ("requirements.txt:5", "dep-no-ascend-build"): "block",  # flash-attn with --hash
        ("requirements/base.txt:2", "lock-conflict"): "block",  # numpy<2
        ("requirements/base.txt:3", "cuda-build-pin"): "block",  # torch==2.1.0+cu121
        ("requirements/base.txt:3", "lock-conflict"): "block",
        ("requirements/base.txt:4", "dep-ascend-route"): "warn",  # deepspeed==0.9.2
        ("requirements/base.txt:4", "dep-version-too-old"): "warn",  # the NPU accelerator came in 0.9.3
        ("requirements/base.txt:5", "dep-no-ascend-build"): "info",  # xformers only on x86_64: not on this target
        ("requirements/base.txt:5", "not-on-target"): "info",
        ("requirements/common.txt:1", "dep-include-cycle"): "info",  # -r ../requirements.txt
        ("requirements/common.txt:2", "dep-include-outside"): "info",  # -r ../../outside.txt
        ("requirements/common.txt:3", "lock-cann-runtime"): "warn",  # protobuf>=4.21 against CANN's protobuf==3.20.0
        ("requirements/common.txt:4", "dep-version-too-old"): "warn",  # transformers<4.30
        ("requirements/common.txt:4", "lock-conflict"): "block",
    }
    conflict = next(f for f in doc["findings"] if f["rule"] == "lock-conflict" and f["line"] == 2)
    assert "numpy<2 (requirements/base.txt:2)" in conflict["message"]  # the chain: the spec and where
    assert "pins numpy 2.2.6" in conflict["message"] and "stack.numpy" in conflict["message"]  # the pin and where
    assert "2.2.6 is not in <2" in conflict["message"]  # the contradiction
    assert "envkit resolve --numpy" in conflict["fix"]
    deps = {(d["name"], d["from"]): d for d in doc["dependencies"]}
    assert deps[("accelerate", "requirements/common.txt:5")]["spec"] == "accelerate >=0.20"  # a continued line
    assert deps[("accelerate", "requirements/common.txt:5")]["locked"] == "1.15.0"
    assert deps[("numpy", "constraints.txt:1")]["group"] == "constraint"
    assert deps[("torch", "requirements/base.txt:3")]["locked"] == "2.12.0+cpu"


def test_a_marker_is_judged_for_the_locks_arch(scan_json, lock_x86):
    """On an x86_64 lock the x86_64-only xformers is installed: it blocks."""
    _, doc = scan_json(str(PROJECTS / "req-tree"), "--lock", str(lock_x86))
    rules = by_rule(doc)
    assert rules[("requirements/base.txt:5", "dep-no-ascend-build")] == "block"
    assert ("requirements/base.txt:5", "not-on-target") not in rules


def test_the_project_python_range_against_the_lock(scan_json, lock_aarch64, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.11"\ndependencies = ["sglang"]\n')
    code, doc = scan_json(str(tmp_path), "--lock", str(lock_aarch64))
    assert code == 1
    assert by_rule(doc) == {
        ("pyproject.toml:3", "lock-python"): "block",
        ("pyproject.toml:4", "lock-route-python"): "warn",  # SGLang on Ascend: Python 3.11 only; the lock has 3.10
        ("pyproject.toml:4", "dep-ascend-route"): "warn",
    }


def test_setup_cfg_environment_yml_and_poetry(scan_json, tmp_path):
    (tmp_path / "setup.cfg").write_text(
        textwrap.dedent(
            """\
            [metadata]
            name = x

            [options]
            python_requires = >=3.9
            install_requires =
                torch>=2.1
                # a comment
                xformers

            [options.extras_require]
            speed = liger-kernel
            """
        )
    )
    (tmp_path / "environment.yml").write_text(
        "name: x\ndependencies:\n  - python=3.10\n  - pytorch-cuda=12.1\n  - pip:\n    - cupy-cuda12x\n    - --extra-index-url https://download.pytorch.org/whl/cu118\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = "^3.10"\nflash-attn = "^2.5"\n\n[tool.poetry.group.dev.dependencies]\ndeepspeed = {version = "^0.14"}\n'
    )
    code, doc = scan_json(str(tmp_path))
    assert code == 1
    assert by_rule(doc) == {
        ("environment.yml:6", "dep-no-ascend-build"): "block",
        ("environment.yml:7", "cuda-index"): "block",
        ("pyproject.toml:3", "dep-no-ascend-build"): "block",
        ("pyproject.toml:6", "dep-ascend-route"): "warn",
        ("setup.cfg:9", "dep-no-ascend-build"): "block",
        ("setup.cfg:12", "dep-ascend-route"): "warn",
    }
    specs = {d["name"]: d["spec"] for d in doc["dependencies"]}
    assert specs["flash-attn"] == "flash-attn>=2.5,<3.0.0" and "pytorch-cuda" not in specs  # conda's own: not read


def test_urls_and_wheels_are_named_from_their_files(scan_json, tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "https://example.invalid/flash_attn-2.5.8%2Bcu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl\n"
        "git+https://github.com/example/xformers.git@v0.0.23\n"
        "-e .\n"
        "./local-dir\n"
        "this is not a requirement !!\n"
    )
    _, doc = scan_json(str(tmp_path))
    assert by_rule(doc) == {
        ("requirements.txt:1", "cuda-build-pin"): "block",
        ("requirements.txt:1", "dep-no-ascend-build"): "block",
        ("requirements.txt:2", "dep-no-ascend-build"): "block",
        ("requirements.txt:5", "dep-unparsed"): "info",
    }


# Poetry's dependency-specification page (python-poetry.org/docs/dependency-specification/), its tables row by row:
# caret, tilde and wildcard requirements, then the plain forms.
POETRY_ROWS = [
    ("^1.2.3", ">=1.2.3,<2.0.0"),
    ("^1.2", ">=1.2,<2.0.0"),
    ("^1", ">=1,<2.0.0"),
    ("^0.2.3", ">=0.2.3,<0.3.0"),
    ("^0.0.3", ">=0.0.3,<0.0.4"),
    ("^0.0", ">=0.0,<0.1.0"),
    ("^0", ">=0,<1.0.0"),
    ("~1.2.3", ">=1.2.3,<1.3.0"),
    ("~1.2", ">=1.2,<1.3.0"),
    ("~1", ">=1,<2.0.0"),
    ("*", ""),
    ("1.*", "==1.*"),
    ("1.2.*", "==1.2.*"),
    ("1.2.3", "==1.2.3"),
    ("==1.2.3", "==1.2.3"),
    ("~=1.2", "~=1.2"),
    (">= 1.2, < 1.5", ">=1.2,<1.5"),
    (">= 1.2 < 1.5", ">=1.2,<1.5"),
    ("!=1.2.*", "!=1.2.*"),
    ("^0.1.1a3", ">=0.1.1a3,<0.2.0"),  # a pre-release floor: the release part decides the ceiling
]


@pytest.mark.parametrize(("poetry", "pep440"), POETRY_ROWS, ids=[r[0] for r in POETRY_ROWS])
def test_poetry_constraints_become_the_pep440_range_poetry_documents(poetry, pep440):
    from packaging.specifiers import SpecifierSet

    from envkit.artifacts.project.deps import poetry_specifier

    assert poetry_specifier(poetry) == pep440
    SpecifierSet(pep440)  # and packaging reads it


def test_caret_and_tilde_ceilings_hold_at_both_ends():
    from packaging.specifiers import SpecifierSet

    from envkit.artifacts.project.deps import poetry_specifier

    for poetry, inside, outside in (
        ("^1.2.3", ("1.2.3", "1.99.99"), ("1.2.2", "2.0.0")),
        ("^0.2.3", ("0.2.3", "0.2.99"), ("0.2.2", "0.3.0")),
        ("^0.0.3", ("0.0.3",), ("0.0.2", "0.0.4")),
        ("~1.2.3", ("1.2.3", "1.2.99"), ("1.2.2", "1.3.0")),
        ("~1", ("1.0.0", "1.99"), ("0.9", "2.0.0")),
    ):
        spec = SpecifierSet(poetry_specifier(poetry) or "")
        assert all(v in spec for v in inside), poetry
        assert not any(v in spec for v in outside), poetry


@pytest.mark.parametrize("text", ["^1.0 || ^2.0", "1.2 | 1.3", ">1.*", "^x", "latest", "=" * 300])
def test_what_pep440_cannot_state_is_none(text):
    from envkit.artifacts.project.deps import poetry_specifier

    assert poetry_specifier(text) is None


def test_a_poetry_project_keeps_its_constraints_python_and_optional_extras(scan_json, tmp_path, lock_aarch64):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [tool.poetry.dependencies]
            python = "^3.11"
            transformers = "^4.40"
            datasets = {version = "~2.19", extras = ["audio"]}
            deepspeed = {version = "^0.14", optional = true}
            einops = {version = "*", optional = true}
            requests = "^2.0 || ^3.0"

            [tool.poetry.extras]
            speed = ["deepspeed"]
            """
        )
    )
    code, doc = scan_json(str(tmp_path))
    deps = {(d["name"], d["from"].split(":")[0]): d["spec"] for d in doc["dependencies"]}
    specs = {d["name"]: d["spec"] for d in doc["dependencies"]}
    assert specs["transformers"] == "transformers>=4.40,<5.0.0"
    assert specs["datasets"] == "datasets[audio]>=2.19,<2.20.0"
    assert specs["deepspeed"] == "deepspeed>=0.14,<0.15.0" and specs["einops"] == "einops"
    assert specs["requests"] == "requests" and ("requests", "pyproject.toml") in deps
    assert ("pyproject.toml:7", "dep-unparsed") in by_rule(doc)  # `||`: the name alone, and said so
    code, doc = scan_json(str(tmp_path), "--lock", str(lock_aarch64))  # ^3.11 is >=3.11,<4.0.0; the lock has 3.10
    assert ("pyproject.toml:2", "lock-python") in by_rule(doc) and code == 1


def test_lock_project_installs_poetry_main_dependencies_with_their_range_and_extras_only_when_chosen(lock_aarch64, tmp_path):
    from envkit.artifacts.project.requirements import lock_requirements
    from envkit.errors import CheckFailed
    from envkit.lock.file import read_lock

    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = ">=3.9"\ntransformers = "^5.0"\n'
        'einops = {version = "~0.8", optional = true}\n\n[tool.poetry.extras]\nfast = ["einops"]\n'
    )
    lock = read_lock(lock_aarch64)
    got = {r.name: r.spec for r in lock_requirements(tmp_path, lock, "envkit.lock", ()).requirements}
    assert got == {"transformers": "transformers<6.0.0,>=5.0"}
    got = {r.name: r.spec for r in lock_requirements(tmp_path, lock, "envkit.lock", (), extras=("fast",)).requirements}
    assert got == {"transformers": "transformers<6.0.0,>=5.0", "einops": "einops<0.9.0,>=0.8"}
    # the caret's ceiling is held against the stack: ^4.40 stops below the lock's transformers 5
    (tmp_path / "pyproject.toml").write_text('[tool.poetry.dependencies]\ntransformers = "^4.40"\n')
    with pytest.raises(CheckFailed) as err:
        lock_requirements(tmp_path, lock, "envkit.lock", ())
    assert "pyproject.toml:2 [lock-conflict] transformers>=4.40,<5.0.0" in err.value.message

"""`envkit lock --project`'s pieces without a resolver: what the scan's reader gives the lock (installed groups only,
each with its file:line), what it refuses before anything is resolved, and uv's failure as a chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import BadInput, CheckFailed

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "tests" / "fixtures" / "projects"


def _read(lock_path: Path, project: Path, exclude: tuple[str, ...] = ()):
    from envkit.artifacts.project.requirements import lock_requirements
    from envkit.lock.file import read_lock

    return lock_requirements(project, read_lock(lock_path), "envkit.lock", exclude)


def test_the_trainers_requirements_are_read_with_their_lines(lock_aarch64):
    deps = _read(lock_aarch64, PROJECTS / "hf-trainer")
    got = {r.name: r for r in deps.requirements}
    assert set(got) == {"accelerate", "torch", "transformers", "datasets", "evaluate", "sentencepiece", "protobuf"}
    assert got["sentencepiece"].spec == "sentencepiece!=0.1.92" and got["sentencepiece"].source == "requirements.txt:7"
    assert all(r.version is None for r in deps.requirements)  # the resolver fills them
    assert deps.files == ["requirements.txt"]


def test_optional_groups_and_off_target_markers_are_not_refused_and_not_installed(lock_aarch64, tmp_path):
    """cuda-package: mamba-ssm only on x86_64 (the lock is aarch64), cupy in a dependency group, vllm and
    nvidia-cublas extras: none blocks. Its transformers<4.30 excludes the stack's transformers, and setup.py's
    install_requires hold flash-attn and xformers: those block."""
    with pytest.raises(CheckFailed) as err:
        _read(lock_aarch64, PROJECTS / "cuda-package")
    text = err.value.message
    assert "3 blocking findings" in text
    assert "pyproject.toml:13 [lock-conflict] transformers>=4.20,<4.30" in text
    assert "setup.py:8 [dep-no-ascend-build] flash-attn>=2.5.0" in text and "setup.py:17 [dep-no-ascend-build] xformers" in text
    assert "mamba" not in text and "cupy" not in text and "vllm" not in text and "nvidia" not in text
    deps = _read(lock_aarch64, PROJECTS / "cuda-package", ("transformers", "flash-attn", "xformers"))
    names = [r.name for r in deps.requirements]
    assert "cupy-cuda12x" not in names and "vllm" not in names and "pytest" not in names and "bitsandbytes" not in names
    assert {"torch", "einops", "mamba-ssm", "transformers"} <= set(names)  # mamba-ssm: its marker keeps it off aarch64


def test_a_dependency_with_no_ascend_build_is_refused_with_the_ascend_way(lock_aarch64, tmp_path):
    (tmp_path / "requirements.txt").write_text("xformers\n")
    with pytest.raises(CheckFailed) as err:
        _read(lock_aarch64, tmp_path)
    assert err.value.exit_code == 1
    assert "requirements.txt:1 [dep-no-ascend-build] xformers" in err.value.message
    assert "npu_fusion_attention" in err.value.message and "--exclude" in (err.value.hint or "")
    assert [r.name for r in _read(lock_aarch64, tmp_path, ("xformers",)).requirements] == ["xformers"]


def test_an_earlier_closure_does_not_block_a_project_that_needs_another_version(lock_aarch64, tmp_path):
    """The closure is resolved again with the project: only the stack's pins and CANN's are held against it."""
    from envkit.lock.file import read_lock, write_lock
    from envkit.models.lock import ClosurePackage, ClosureTarget, PythonClosure

    lock = read_lock(lock_aarch64)
    closure = PythonClosure(
        target=ClosureTarget(python="3.10", arch="aarch64", glibc="2.35", platform="manylinux_2_35_aarch64"),
        roots=["dill"],
        index_url="https://pypi.org/simple",
        resolver="uv 0",
        packages=[
            ClosurePackage(
                name="dill",
                version="0.3.8",
                filename="dill-0.3.8-py3-none-any.whl",
                url="https://files.example/dill-0.3.8-py3-none-any.whl",
                sha256="0" * 64,
                size=1,
            )
        ],
    )
    path = tmp_path / "envkit.lock"
    write_lock(lock.model_copy(update={"python": lock.python.model_copy(update={"closure": closure})}), path)
    project = tmp_path / "p"
    project.mkdir()
    (project / "requirements.txt").write_text("dill>=0.4\n")
    assert [r.spec for r in _read(path, project).requirements] == ["dill>=0.4"]


def test_no_dependency_file_and_a_url_are_bad_input(lock_aarch64, tmp_path):
    (tmp_path / "train.py").write_text("import torch\n")
    with pytest.raises(BadInput, match="no dependency file"):
        _read(lock_aarch64, tmp_path)
    (tmp_path / "requirements.txt").write_text("datasets\nmylib @ https://example.invalid/mylib-1.0.tar.gz\n")
    with pytest.raises(BadInput, match="requirements.txt:2"):
        _read(lock_aarch64, tmp_path)
    assert [r.name for r in _read(lock_aarch64, tmp_path, ("mylib",)).requirements] == ["datasets"]


UV_ERR = """  × No solution found when resolving dependencies:
  ╰─▶ Because all versions of fastlm-kernels depend on torch>=2.13 and
      envkit-closure depends on torch==2.12.0+cpu, we can conclude that
      envkit-closure and all versions of fastlm-kernels are incompatible.
      And because envkit-closure depends on fastlm-kernels==1.0, we can
      conclude that your requirements are unsatisfiable."""


def test_uvs_failure_is_the_chain_from_the_projects_line_to_the_lock_pin(lock_aarch64):
    from envkit.artifacts.closure import make_target, project_conflict, uv_reasons
    from envkit.lock.file import read_lock
    from envkit.models.lock import ProjectDependencies, ProjectRequirement

    steps = uv_reasons(UV_ERR)
    assert steps[0].startswith("Because all versions of fastlm-kernels depend on torch>=2.13 and the lock's closure requires")
    assert steps[1].startswith("And because the lock's closure requires fastlm-kernels==1.0") and len(steps) == 2
    project = ProjectDependencies(
        path="p",
        files=["requirements.txt"],
        requirements=[
            ProjectRequirement(name="fastlm-kernels", spec="fastlm-kernels==1.0", source="requirements.txt:2", version=None),
            ProjectRequirement(name="datasets", spec="datasets", source="requirements.txt:1", version=None),
        ],
    )
    err = project_conflict(project, read_lock(lock_aarch64), make_target("3.10", "aarch64"), UV_ERR, "envkit.lock")
    assert isinstance(err, CheckFailed) and err.exit_code == 1
    lines = err.message.splitlines()[1:]
    assert lines[0].endswith("[declared] fastlm-kernels==1.0 at p/requirements.txt:2")  # datasets is not named
    assert any("[locked]   envkit.lock pins torch 2.12.0+cpu" in x for x in lines)
    assert any("torch_npu 2.12.0 is built for torch 2.12.0+cpu alone" in x for x in lines)
    assert "--exclude fastlm-kernels" in (err.hint or "")


# --- optional groups, dependency groups and constraint files (`--project-extra`, `--project-group`, `-c`) ----------
def _pick(lock_path: Path, project: Path, extras: tuple[str, ...] = (), groups: tuple[str, ...] = (), exclude=()):
    from envkit.artifacts.project.requirements import lock_requirements
    from envkit.lock.file import read_lock

    return lock_requirements(project, read_lock(lock_path), "envkit.lock", tuple(exclude), extras, groups)


PYPROJECT = """[project]
name = "trainer"
version = "1"
dependencies = ["datasets"]

[project.optional-dependencies]
Train_Extra = [
  "accelerate>=0.20",
]
docs = []
cuda = ["xformers"]

[dependency-groups]
test = ["pytest>=8"]
lint = ["ruff"]
dev = [{include-group = "test"}, "mypy"]
"""


def test_a_chosen_extra_joins_with_its_lines_and_the_others_stay_out(lock_aarch64, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    plain = _pick(lock_aarch64, tmp_path)
    assert [r.name for r in plain.requirements] == ["datasets"] and plain.extras == [] and plain.groups == []
    deps = _pick(lock_aarch64, tmp_path, extras=("train-extra",))  # PEP 685: compared normalized
    assert [(r.name, r.spec, r.source) for r in deps.requirements] == [
        ("datasets", "datasets", "pyproject.toml:4"),
        ("accelerate", "accelerate>=0.20", "pyproject.toml:8"),
    ]
    assert deps.extras == ["train-extra"] and deps.groups == []


def test_an_empty_extra_is_recorded_and_adds_nothing(lock_aarch64, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    deps = _pick(lock_aarch64, tmp_path, extras=("docs",))
    assert [r.name for r in deps.requirements] == ["datasets"] and deps.extras == ["docs"]


def test_an_unknown_extra_or_group_is_bad_input_naming_those_declared(lock_aarch64, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    with pytest.raises(BadInput) as err:
        _pick(lock_aarch64, tmp_path, extras=("gpu",))
    assert err.value.exit_code == 2
    assert "--project-extra gpu" in err.value.message and "its extras: cuda, docs, train-extra" in err.value.message
    with pytest.raises(BadInput) as err:
        _pick(lock_aarch64, tmp_path, groups=("docs",))  # an extra is not a dependency group
    assert "its groups: dev, lint, test" in err.value.message
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "1"\ndependencies = ["datasets"]\n')
    with pytest.raises(BadInput, match="its extras: none"):
        _pick(lock_aarch64, tmp_path, extras=("docs",))


def test_a_dependency_group_joins_with_the_groups_it_includes(lock_aarch64, tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    deps = _pick(lock_aarch64, tmp_path, groups=("dev",))
    assert [r.name for r in deps.requirements] == ["datasets", "pytest", "mypy"]  # not lint's ruff
    assert deps.groups == ["dev"]


def test_a_chosen_extra_is_held_to_the_rules_of_an_installed_dependency(lock_aarch64, tmp_path):
    """xformers in an unchosen extra warns; chosen, it blocks with the Ascend way, unless --exclude names it."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert "xformers" not in [r.name for r in _pick(lock_aarch64, tmp_path).requirements]
    with pytest.raises(CheckFailed) as err:
        _pick(lock_aarch64, tmp_path, extras=("cuda",))
    assert "[dep-no-ascend-build] xformers" in err.value.message
    assert "xformers" in [r.name for r in _pick(lock_aarch64, tmp_path, ("cuda",), exclude=("xformers",)).requirements]


def test_setup_cfg_extras_require_are_extras_too(lock_aarch64, tmp_path):
    (tmp_path / "setup.cfg").write_text(
        "[options]\ninstall_requires =\n    datasets\n\n[options.extras_require]\neval =\n    evaluate>=0.4\n"
    )
    deps = _pick(lock_aarch64, tmp_path, extras=("eval",))
    assert [(r.name, r.source) for r in deps.requirements] == [("datasets", "setup.cfg:3"), ("evaluate", "setup.cfg:7")]
    with pytest.raises(BadInput, match="its extras: eval"):
        _pick(lock_aarch64, tmp_path, extras=("train",))


def test_a_constraint_file_constrains_and_is_recorded_never_installed(lock_aarch64, tmp_path):
    (tmp_path / "pins").mkdir()
    (tmp_path / "requirements.txt").write_text("-c pins/constraints.in\ndatasets\n")
    (tmp_path / "pins" / "constraints.in").write_text("# pins\ndatasets<4\npyarrow<20\n")
    deps = _pick(lock_aarch64, tmp_path)
    assert [r.name for r in deps.requirements] == ["datasets"]  # pyarrow is not required for being constrained
    assert deps.constraint_files == ["pins/constraints.in"]
    assert [(r.spec, r.source) for r in deps.constraints] == [
        ("datasets<4", "pins/constraints.in:2"),
        ("pyarrow<20", "pins/constraints.in:3"),
    ]
    assert [r.name for r in _pick(lock_aarch64, tmp_path, exclude=("pyarrow",)).constraints] == ["datasets"]


UNREADABLE = ["../outside.txt", "/etc/hostname", "link.txt", "https://example.invalid/c.txt", "big.in"]


@pytest.mark.parametrize(
    ("option", "why"),
    [("-c", "a constraint the lock would not apply"), ("-r", "requirements the lock would leave out")],
)
@pytest.mark.parametrize("target", UNREADABLE)
def test_a_constraint_or_included_file_outside_the_project_behind_a_link_or_too_large_is_bad_input(
    lock_aarch64, tmp_path, target, option, why
):
    """Neither a `-c` nor a `-r` the reader does not follow may leave the lock (and the bundle) short."""
    (tmp_path / "outside.txt").write_text("datasets<4\n")
    project = tmp_path / "p"
    project.mkdir()
    (project / "link.txt").symlink_to(tmp_path / "outside.txt")
    (project / "big.in").write_text("# padding\n" * 120_000)  # over the 1 MiB a dependency file may have
    (project / "requirements.txt").write_text(f"evaluate\n{option} {target}\n")
    with pytest.raises(BadInput) as err:
        _pick(lock_aarch64, project)
    assert err.value.exit_code == 2
    assert err.value.message.startswith(f"requirements.txt:2: -r/-c {target}") and why in err.value.message


def test_an_included_requirements_file_inside_the_project_is_locked(lock_aarch64, tmp_path):
    (tmp_path / "inside.txt").write_text("datasets<4\n")
    (tmp_path / "requirements.txt").write_text("evaluate\n-r inside.txt\n")
    assert [r.name for r in _pick(lock_aarch64, tmp_path).requirements] == ["evaluate", "datasets"]


def test_a_constraint_that_excludes_the_stacks_pin_is_a_conflict(lock_aarch64, tmp_path):
    (tmp_path / "requirements.txt").write_text("datasets\n-c constraints.txt\n")
    (tmp_path / "constraints.txt").write_text("torch<2.10\n")
    with pytest.raises(CheckFailed) as err:
        _pick(lock_aarch64, tmp_path)
    assert err.value.exit_code == 1
    assert "constraints.txt:1 [lock-conflict] torch<2.10" in err.value.message
    assert "pins torch 2.12.0+cpu" in err.value.message


UV_CONSTRAINT_ERR = """  × No solution found when resolving dependencies:
  ╰─▶ Because you require datasets and datasets>=4 depends on pyarrow>=21,
      we can conclude that datasets>=4 depends on pyarrow>=21.
      And because you require pyarrow<20, we can conclude that your requirements are unsatisfiable."""


def test_a_constraint_uv_cannot_satisfy_is_named_in_the_chain(lock_aarch64):
    from envkit.artifacts.closure import make_target, project_conflict
    from envkit.lock.file import read_lock
    from envkit.models.lock import ProjectDependencies, ProjectRequirement

    project = ProjectDependencies(
        path="p",
        files=["requirements.txt"],
        requirements=[ProjectRequirement(name="datasets", spec="datasets", source="requirements.txt:1", version=None)],
        constraint_files=["constraints.txt"],
        constraints=[ProjectRequirement(name="pyarrow", spec="pyarrow<20", source="constraints.txt:1", version=None)],
    )
    err = project_conflict(project, read_lock(lock_aarch64), make_target("3.10", "aarch64"), UV_CONSTRAINT_ERR, "envkit.lock")
    assert "[constraint] pyarrow<20 at p/constraints.txt:1" in err.message
    assert "--exclude datasets,pyarrow" in (err.hint or "")


def test_constraints_go_to_uv_as_constraints_not_requirements(tmp_path, monkeypatch):
    from envkit.artifacts.closure import ClosurePlan, _uv_compile, make_target

    monkeypatch.setenv("ENVKIT_UV", "/bin/uv-stand-in")
    plan = ClosurePlan(roots=("datasets",), target=make_target("3.10", "aarch64"), constraints=("pyarrow<20",))
    cmd = _uv_compile(plan, tmp_path, tmp_path / "out", [])
    assert cmd[cmd.index("--constraints") + 1] == str(tmp_path / "constraints.txt")
    assert (tmp_path / "constraints.txt").read_text() == "pyarrow<20\n"
    assert "pyarrow" not in (tmp_path / "requirements.in").read_text()
    plain = _uv_compile(ClosurePlan(roots=("datasets",), target=plan.target), tmp_path / "b", tmp_path / "out", [])
    assert "--constraints" not in plain


def test_a_lock_written_before_extras_and_constraints_still_reads():
    from envkit.models.lock import ProjectDependencies

    old = {"path": "p", "files": ["requirements.txt"], "requirements": []}
    deps = ProjectDependencies.model_validate(old)
    assert deps.extras == [] and deps.groups == [] and deps.constraint_files == [] and deps.constraints == []


def test_project_extra_without_project_is_bad_input(run_cli, lock_aarch64):
    r = run_cli("lock", "--lock", str(lock_aarch64), "--project-extra", "train")
    assert r.code == 2 and "--project PATH" in r.err

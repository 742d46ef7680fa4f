"""`envkit lock --project PATH`: the project's dependencies join the lock's closure, on the local stand-in indexes
(tests/airgap/torchindex.py: "PyPI" and the PyTorch CPU index served on 127.0.0.1; nothing leaves the machine).

The project is tests/fixtures/projects/hf-trainer, a causal-LM Trainer script written the way Transformers'
examples/pytorch/language-modeling/run_clm.py is, needing datasets, evaluate, sentencepiece and protobuf beside the
stack. A dependency with no Ascend build (flash-attn), one whose spec or whose own requirements need another torch
than torch_npu pins, and one with no wheel for the target are refused with their chain.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT / "tests" / "fixtures" / "projects" / "hf-trainer"


@pytest.fixture
def stack(tmp_path, monkeypatch):
    """The default target's lock (aarch64, Python 3.10, torch 2.12.0+cpu), its two stand-in indexes, and stand-ins
    for the project's own dependencies: datasets, evaluate, sentencepiece (a platform wheel), dill; a library that
    needs a newer torch than the stack's, and one with an x86_64 wheel alone."""
    from tests.airgap.httpserve import Server
    from tests.airgap.torchindex import default_stack, standin_wheel

    path, lock, pypi, cpu = default_stack(tmp_path, monkeypatch)
    tag = "cp310-cp310-manylinux_2_28_aarch64"
    standin_wheel(pypi, "datasets", "2.21.0", requires=["numpy>=1.17", "dill>=0.3.0"])
    standin_wheel(pypi, "dill", "0.3.8")
    standin_wheel(pypi, "evaluate", "0.4.3", requires=["datasets>=2.0.0"])
    standin_wheel(pypi, "sentencepiece", "0.2.0", tag)
    standin_wheel(pypi, "fastlm-kernels", "1.0", tag, requires=["torch>=2.13"])
    standin_wheel(pypi, "cudaonly-ext", "1.0", "cp310-cp310-manylinux_2_28_x86_64")
    with Server(pypi, simple_index=True) as p, Server(cpu, simple_index=True) as c:
        yield path, lock, f"{p.url}/simple", f"{c.url}/simple"


def _project(tmp_path: Path, requirements: str) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "requirements.txt").write_text(requirements)
    (folder / "train.py").write_text("import datasets\n")
    return folder


def _lock(cli, path, pypi, cpu, *more):
    return cli("lock", "--lock", str(path), "--index-url", pypi, "--torch-index-url", cpu, *more)


def test_the_trainer_projects_dependencies_are_locked_and_bundled(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    r = _lock(cli, path, pypi, cpu, "--project", str(TRAINER), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    from envkit.lock.file import read_lock

    lock = read_lock(path)
    project = lock.python.project
    assert project is not None and project.path == str(TRAINER) and project.files == ["requirements.txt"]
    got = {r.name: r for r in project.requirements}
    assert summary["project"]["requirements"] == [r.model_dump(mode="json") for r in project.requirements]
    text = (TRAINER / "requirements.txt").read_text().splitlines()
    for name in ("datasets", "evaluate", "sentencepiece", "protobuf", "torch", "transformers", "accelerate"):
        line = int(got[name].source.rsplit(":", 1)[1])
        assert got[name].source.startswith("requirements.txt:") and name in text[line - 1], got[name]
    closure = {p.name: p for p in lock.python.closure.packages}
    assert {"datasets", "evaluate", "sentencepiece", "protobuf", "dill"} <= set(closure)  # and what they need
    assert all(closure[n].version == r.version for n, r in got.items())
    assert got["protobuf"].version == "3.20.0"  # CANN's pin holds the project's unpinned protobuf
    assert closure["torch"].version == "2.12.0+cpu"  # the project's torch>=2.1 is the stack's, from the CPU index
    assert "sentencepiece!=0.1.92" in lock.python.closure.roots
    assert "datasets>=2.14.0" in lock.python.closure.roots

    r = cli("validate", str(path))  # the project is not derived from the matrix: not an edit
    assert r.returncode == 0, r.stdout + r.stderr

    # the image installs the closure: the project's wheels with their hashes
    from envkit.jobs.image import plan_lock
    from tests.image.conftest import fixture_installers

    plan = plan_lock(lock, generated_by="t", artifacts=fixture_installers(path, tmp_path / "arts"))
    image = {r.name: r for r in plan.requirements}
    assert plan.python_source == "closure"
    assert image["datasets"].version == "2.21.0" and image["datasets"].hashes == (closure["datasets"].sha256,)

    out = tmp_path / "bundle.tar"
    r = cli("bundle", "build", "--lock", str(path), "-o", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    with tarfile.open(out) as tf:
        names = {m.name.rsplit("/", 1)[-1] for m in tf.getmembers()}
        reqs = next(tf.extractfile(m).read().decode() for m in tf.getmembers() if m.name.endswith("requirements/target.txt"))
    for wheel in (closure[n].filename for n in ("datasets", "evaluate", "sentencepiece", "protobuf")):
        assert wheel in names
    assert "datasets==2.21.0" in reqs and "sentencepiece==0.2.0" in reqs
    r = cli("bundle", "verify", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr

    # and the bundle installs them offline for the target: pip, --no-index, every hash checked
    from tests.airgap.torchindex import installs_offline_for_target

    folder = tmp_path / "unpacked"
    with tarfile.open(out) as tf:
        tf.extractall(folder, filter="data")
    (root,) = folder.iterdir()  # the archive's one top folder
    installed = installs_offline_for_target(root, tmp_path)
    assert {n: installed[n] for n in got} == {n: r.version for n, r in got.items()}


def test_a_lock_without_a_project_dumps_as_before(stack):
    path, lock, _, _ = stack
    from envkit.lock.file import dump_lock, read_lock

    assert lock.python.project is None
    assert "\n  project:" not in path.read_text() and dump_lock(read_lock(path)) == path.read_text()


def test_flash_attn_is_refused_naming_its_ascend_way_unless_excluded(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    before = path.read_text()
    folder = _project(tmp_path, "datasets>=2.14\nflash-attn>=2.5  # the CUDA kernels\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr  # a check failed
    assert "requirements.txt:2 [dep-no-ascend-build] flash-attn>=2.5" in r.stderr
    assert "npu_fusion_attention" in r.stderr and "--exclude" in r.stderr
    assert path.read_text() == before  # nothing resolved, nothing written

    r = _lock(cli, path, pypi, cpu, "--project", str(folder), "--exclude", "flash-attn")
    assert r.returncode == 0, r.stdout + r.stderr
    from envkit.lock.file import read_lock

    lock = read_lock(path)
    got = {r.name: r for r in lock.python.project.requirements}
    assert got["flash-attn"].version is None and got["datasets"].version == "2.21.0"
    assert "flash-attn" in lock.python.closure.excluded
    assert not [p for p in lock.python.closure.packages if p.name.startswith("flash")]


def test_a_spec_that_excludes_the_stacks_torch_is_refused_with_its_chain(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    folder = _project(tmp_path, "datasets\ntorch>=2.13\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "requirements.txt:2 [lock-conflict] torch>=2.13" in r.stderr
    assert "pins torch 2.12.0+cpu" in r.stderr and "contradiction" in r.stderr


def test_a_dependency_that_needs_a_newer_torch_than_torch_npu_pins_is_refused_with_the_chain(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    before = path.read_text()
    folder = _project(tmp_path, "datasets\nfastlm-kernels==1.0\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr
    assert "[declared] fastlm-kernels==1.0 at " in err and "requirements.txt:2" in err
    assert "fastlm-kernels depend on torch>=2.13 and the lock's closure requires torch==2.12.0+cpu" in err
    assert "torch_npu 2.12.0 is built for torch 2.12.0+cpu alone" in err
    assert "--exclude fastlm-kernels" in err
    assert path.read_text() == before


def test_a_dependency_with_no_wheel_for_the_target_is_refused_with_the_chain(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    folder = _project(tmp_path, "cudaonly-ext\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[declared] cudaonly-ext at " in r.stderr and "requirements.txt:1" in r.stderr
    assert "[resolver] Because cudaonly-ext==1.0 has no wheels with a matching platform tag" in r.stderr
    assert "[target]   Python 3.10 on manylinux_2_" in r.stderr and "_aarch64: wheels only" in r.stderr


def test_a_url_dependency_is_bad_input(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    folder = _project(tmp_path, "mylib @ https://example.invalid/mylib-1.0-py3-none-any.whl\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "requirements.txt:1" in r.stderr and "--exclude mylib" in r.stderr


def test_a_folder_without_dependency_files_is_bad_input(stack, tmp_path, cli):
    path, _, pypi, cpu = stack
    folder = tmp_path / "empty"
    folder.mkdir()
    shutil.copy(TRAINER / "run_lm.py", folder / "run_lm.py")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 2 and "no dependency file" in r.stderr, r.stdout + r.stderr


def test_a_chosen_extra_joins_and_the_constraint_files_constrain(stack, tmp_path, cli):
    """`--project-extra eval` brings evaluate; constraints.txt (named by `-c`) holds datasets to 2.21.0 and names
    sentencepiece, which is constrained, never installed for it. A constraint uv cannot satisfy is the chain's step."""
    path, _, pypi, cpu = stack
    folder = _project(tmp_path, "-c constraints.txt\ndatasets\n")
    (folder / "constraints.txt").write_text("datasets==2.21.0\nsentencepiece<0.3\n")
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "t"\nversion = "1"\n\n[project.optional-dependencies]\neval = ["evaluate>=0.4"]\n'
    )
    r = _lock(cli, path, pypi, cpu, "--project", str(folder), "--project-extra", "nope")
    assert r.returncode == 2 and "its extras: eval" in r.stderr, r.stdout + r.stderr
    r = _lock(cli, path, pypi, cpu, "--project", str(folder), "--project-extra", "eval")
    assert r.returncode == 0, r.stdout + r.stderr
    from envkit.lock.file import read_lock

    lock = read_lock(path)
    project = lock.python.project
    assert project.extras == ["eval"] and project.constraint_files == ["constraints.txt"]
    assert {r.name: r.version for r in project.requirements} == {"datasets": "2.21.0", "evaluate": "0.4.3"}
    assert [(c.spec, c.source, c.version) for c in project.constraints] == [
        ("datasets==2.21.0", "constraints.txt:1", "2.21.0"),
        ("sentencepiece<0.3", "constraints.txt:2", None),
    ]
    assert "sentencepiece" not in {p.name for p in lock.python.closure.packages}

    (folder / "constraints.txt").write_text("dill<0.3\n")
    r = _lock(cli, path, pypi, cpu, "--project", str(folder))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[constraint] dill<0.3 at " in r.stderr and "constraints.txt:1" in r.stderr

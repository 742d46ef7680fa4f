"""torch's CPU build from its own index: `envkit lock` -> `bundle build` -> `bundle verify` on local stand-ins.

These machines reach PyPI but not download.pytorch.org, so both are served on 127.0.0.1 (tests/airgap/torchindex.py):
a CPU index with a stand-in `torch-2.12.0+cpu` (the real CPU wheel's Requires-Dist, no nvidia-*), and a "PyPI" with
every other root of the default target's closure, torch_npu (Requires-Dist torch==2.12.0, never installed) and
PyPI's CUDA torch 2.12.0 (Requires-Dist nvidia-cublas-cu13, triton). Nothing here leaves the machine.
"""

from __future__ import annotations

import json
import tarfile

import pytest

from envkit.errors import CheckFailed

CUDA = ("nvidia-", "cuda-", "triton", "nccl")


@pytest.fixture
def cpu_stack(tmp_path, monkeypatch):
    """The default target's lock (Atlas A2, aarch64, Python 3.10, torch 2.12.0) and the two local indexes."""
    from tests.airgap.httpserve import Server
    from tests.airgap.torchindex import default_stack

    path, lock, _, _ = default_stack(tmp_path, monkeypatch)
    with Server(tmp_path / "pypi", simple_index=True) as pypi, Server(tmp_path / "cpu", simple_index=True) as cpu:
        yield path, lock, f"{pypi.url}/simple", f"{cpu.url}/simple"


def test_the_default_target_locks_torch_from_the_cpu_index(cpu_stack):
    _, lock, _, _ = cpu_stack
    torch = next(p for p in lock.python.requirements if p.name == "torch")
    assert (lock.stack.arch, lock.stack.torch, torch.version, torch.index) == (
        "aarch64",
        "2.12.0+cpu",
        "2.12.0+cpu",
        "pytorch-cpu",
    )
    assert lock.python.indexes["pytorch-cpu"] == "https://download.pytorch.org/whl/cpu"


def test_lock_bundle_verify_holds_torch_cpu_and_torch_npu_and_no_cuda_wheel(cpu_stack, tmp_path, cli):
    path, _, pypi, cpu = cpu_stack
    r = cli("lock", "--lock", str(path), "--index-url", pypi, "--torch-index-url", cpu, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["target"]["torch"]["url"].startswith(cpu.rsplit("/simple", 1)[0])
    from envkit.lock.file import read_lock

    closure = read_lock(path).python.closure
    got = {p.name: p for p in closure.packages}
    assert got["torch"].version == "2.12.0+cpu"
    assert got["torch"].filename == "torch-2.12.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl"
    assert got["torch"].url.startswith(cpu.rsplit("/simple", 1)[0])  # from the CPU index, not "PyPI"'s CUDA torch
    assert got["torch-npu"].version == "2.12.0"
    assert not [n for n in got if n.startswith(CUDA) or n == "triton"]
    assert {"filelock", "sympy", "networkx", "jinja2", "fsspec", "typing-extensions"} <= set(got)
    assert closure.index_url == pypi and cpu in closure.extra_index_urls

    # the image installs the closure's exact torch file: the +cpu version with its hash
    from envkit.export.templates import dockerfile
    from envkit.jobs.image import plan_lock
    from tests.image.conftest import fixture_installers

    plan = plan_lock(read_lock(path), generated_by="t", artifacts=fixture_installers(path, tmp_path / "arts"))
    torch = next(r for r in plan.heavy_requirements if r.name == "torch")
    assert plan.python_source == "closure" and (torch.version, torch.hashes) == ("2.12.0+cpu", (got["torch"].sha256,))
    assert cpu in dockerfile(plan)

    out = tmp_path / "bundle.tar"
    r = cli("bundle", "build", "--lock", str(path), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    with tarfile.open(out) as tf:
        names = [m.name.rsplit("/", 1)[-1] for m in tf.getmembers()]
    assert "torch-2.12.0+cpu-cp310-cp310-manylinux_2_28_aarch64.whl" in names
    assert "torch_npu-2.12.0-cp310-cp310-manylinux_2_28_aarch64.whl" in names
    assert not [n for n in names if n.endswith(".whl") and n.lower().startswith(("nvidia", "triton", "cuda"))]
    r = cli("bundle", "verify", str(out), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr


def test_an_unreachable_torch_index_is_exit_2_naming_it_and_the_option(cpu_stack, cli):
    path, _, pypi, _ = cpu_stack
    before = path.read_text()
    r = cli("lock", "--lock", str(path), "--index-url", pypi, "--torch-index-url", "http://127.0.0.1:9/simple")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "http://127.0.0.1:9/simple" in r.stderr and "--torch-index-url" in r.stderr and "cannot be reached" in r.stderr
    assert path.read_text() == before  # nothing written; no fall-back to "PyPI"'s CUDA torch


def test_a_closure_with_a_cuda_wheel_is_refused_naming_it_and_what_pulled_it(cpu_stack, cli):
    """A lock whose torch pin names no index (as envkit wrote before torch_builds): torch comes from "PyPI", whose
    build pulls nvidia-cublas-cu13 and triton; `envkit lock` refuses it."""
    from envkit.lock.file import dump_lock

    path, lock, pypi, _ = cpu_stack
    pins = [
        p.model_copy(update={"version": "2.12.0", "index": None}) if p.name == "torch" else p for p in lock.python.requirements
    ]
    old = lock.model_copy(update={"python": lock.python.model_copy(update={"requirements": pins, "indexes": {"pypi": pypi}})})
    path.write_text(dump_lock(old))
    r = cli("--accept-edited-lock", "lock", "--lock", str(path), "--index-url", pypi)  # an old lock, edited on purpose
    assert r.returncode == 1, r.stdout + r.stderr  # a check failed: the closure holds CUDA wheels
    assert "CUDA wheel" in r.stderr and "nvidia-cublas-cu13" in r.stderr and "triton" in r.stderr
    assert "pulled in by torch 2.12.0" in r.stderr and "--torch-index-url" in r.stderr


# --- the pieces, without a resolver ---------------------------------------------------------------------
def test_the_plan_pins_torch_to_an_explicit_index_only_uv_may_use_for_it():
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from envkit.artifacts.closure import ClosurePlan, make_target

    plan = ClosurePlan(
        roots=("torch==2.12.0+cpu", "torch_npu==2.12.0"),
        target=make_target("3.10", "aarch64"),
        pinned=(("torch", "https://mirror.example/cpu"),),
    )
    doc = tomllib.loads(plan.project_toml())
    assert doc["project"]["dependencies"] == ["torch==2.12.0+cpu", "torch_npu==2.12.0"]
    index = doc["tool"]["uv"]["index"][0]
    assert doc["tool"]["uv"]["sources"]["torch"] == {"index": index["name"]}
    assert index["url"] == "https://mirror.example/cpu" and index["explicit"] is True
    assert plan.recorded_extra_index_urls == ["https://mirror.example/cpu"]


def test_pinned_indexes_follow_the_lock_and_the_option(cpu_stack):
    from envkit.artifacts.closure import pinned_indexes, target_roots

    _, lock, _, _ = cpu_stack
    roots = target_roots(lock)
    assert pinned_indexes(lock, roots) == (("torch", "https://download.pytorch.org/whl/cpu"),)
    assert pinned_indexes(lock, roots, "http://mirror/cpu") == (("torch", "http://mirror/cpu"),)
    assert pinned_indexes(lock, target_roots(lock, exclude=["torch"])) == ()  # excluded: nothing to pin


def test_refuse_cuda_names_the_wheels_and_the_package_that_pulled_them():
    from envkit.artifacts.closure import make_target, parse_via, refuse_cuda
    from envkit.models.lock import ClosurePackage, PythonClosure

    def pkg(name, version, fn):
        return ClosurePackage(name=name, version=version, filename=fn, url=f"https://files.example/{fn}", sha256="0" * 64, size=1)

    closure = PythonClosure(
        target=make_target("3.10", "aarch64"),
        roots=["torch_npu==2.12.0"],
        index_url="https://pypi.org/simple",
        resolver="test",
        packages=[
            pkg("nvidia-cublas", "13.1.1.3", "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_aarch64.whl"),
            pkg("nvidia-cudnn-cu13", "9.20.0.48", "nvidia_cudnn_cu13-9.20.0.48-py3-none-manylinux_2_27_aarch64.whl"),
            pkg("torch", "2.12.0", "torch-2.12.0-cp310-cp310-manylinux_2_28_aarch64.whl"),
            pkg("torch-npu", "2.12.0", "torch_npu-2.12.0-cp310-cp310-manylinux_2_28_aarch64.whl"),
        ],
    )
    via = parse_via(
        "nvidia-cublas==13.1.1.3    # via nvidia-cudnn-cu13, torch\n"
        "nvidia-cudnn-cu13==9.20.0.48  # via torch\n"
        "torch==2.12.0             # via torch-npu, envkit-closure (pyproject.toml)\n"
    )
    assert via["nvidia-cublas"] == ["nvidia-cudnn-cu13", "torch"]
    with pytest.raises(CheckFailed) as exc:
        refuse_cuda(closure, via)
    msg = exc.value.message
    assert "2 CUDA wheel(s)" in msg and "nvidia-cublas 13.1.1.3 (via nvidia-cudnn-cu13, torch)" in msg
    assert msg.endswith("pulled in by torch 2.12.0 (from files.example)")
    refuse_cuda(closure.model_copy(update={"packages": closure.packages[2:]}), via)  # none left: no error


@pytest.mark.parametrize(
    ("arch", "name", "version", "cuda"),
    [
        ("x86_64", "torch", "2.13.0+cpu", False),  # the PyTorch CPU index's build
        ("x86_64", "torchvision", "0.28.0+cpu", False),
        ("aarch64", "torch", "2.13.0", False),  # PyPI's aarch64 torch is the CPU build
        ("x86_64", "torch", "2.13.0", True),  # PyPI's x86_64 torch: the CUDA build
        ("x86_64", "torchvision", "0.25.0", True),  # vllm-ascend's torchvision==0.25.0 from PyPI: a CUDA build
        ("x86_64", "torchaudio", "2.10.0", True),
        ("aarch64", "torch", "2.13.0+cu130", True),
        ("x86_64", "torch", "2.13.0+rocm6.4", True),
        ("x86_64", "torch-npu", "2.10.0.post4", False),  # not a torch build
    ],
)
def test_a_cuda_torch_is_a_cuda_wheel_and_a_cpu_one_is_not(arch, name, version, cuda):
    from envkit.artifacts.closure import cuda_packages, make_target, refuse_cuda
    from envkit.models.lock import ClosurePackage, PythonClosure

    fn = f"{name.replace('-', '_')}-{version}-cp311-cp311-manylinux_2_28_{arch}.whl"
    closure = PythonClosure(
        target=make_target("3.11", arch),
        roots=["vllm-ascend==0.23.0"],
        index_url="https://pypi.org/simple",
        resolver="test",
        packages=[
            ClosurePackage(name=name, version=version, filename=fn, url=f"https://files.example/{fn}", sha256="0" * 64, size=1)
        ],
    )
    assert bool(cuda_packages(closure)) is cuda
    if not cuda:
        refuse_cuda(closure, {})
        return
    with pytest.raises(CheckFailed) as exc:  # exit 1, naming the wheel and what pulled it
        refuse_cuda(closure, {name: ["vllm-ascend"]})
    assert exc.value.exit_code == 1
    assert f"{name} {version} (via vllm-ascend)" in exc.value.message and "pulled in by vllm-ascend" in exc.value.message


def test_online_without_a_closure_the_torch_layer_installs_from_the_cpu_index(cpu_stack, tmp_path):
    from envkit.export.templates import dockerfile
    from envkit.jobs.image import plan_lock
    from tests.image.conftest import fake_requirements, fixture_installers

    path, _, _, _ = cpu_stack
    from envkit.lock.file import read_lock

    plan = plan_lock(
        read_lock(path),
        generated_by="t",
        artifacts=fixture_installers(path, tmp_path / "arts"),
        requirements=fake_requirements(path, tmp_path / "r.txt"),
    )
    assert not plan.offline and plan.torch_indexes[0] == "https://download.pytorch.org/whl/cpu"
    text = dockerfile(plan)
    torch_layer = text.split("FROM ascend AS torch", 1)[1].split("FROM torch AS runtime", 1)[0]
    rest_layer = text.split("FROM torch AS runtime", 1)[1].split("\nENV ", 1)[0]
    assert "--index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple" in torch_layer
    assert "--index-url https://pypi.org/simple --extra-index-url https://download.pytorch.org/whl/cpu" in rest_layer
    assert any(r.name == "torch" and r.version == "2.12.0+cpu" for r in plan.heavy_requirements)


def test_the_default_targets_bundle_installs_offline_for_its_platform(cpu_stack, tmp_path, cli):
    """The default target is aarch64 and this machine x86_64, so the bundle's wheels cannot be installed here; pip
    proves instead that they install for the target: offline (`--no-index`, only the bundle's wheels), for
    manylinux_2_28_aarch64 / CPython 3.10, with every hash checked, resolving to exactly the lock's closure."""
    path, _, pypi, cpu = cpu_stack
    assert cli("lock", "--lock", str(path), "--index-url", pypi, "--torch-index-url", cpu).returncode == 0
    out = tmp_path / "bundle"
    r = cli("bundle", "build", "--lock", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    from tests.airgap.torchindex import installs_offline_for_target

    installed = installs_offline_for_target(out, tmp_path)
    from envkit.lock.file import read_lock

    locked = {pk.name: pk.version for pk in read_lock(path).python.closure.packages}
    assert installed["torch"] == "2.12.0+cpu" and installed["torch-npu"] == "2.12.0"
    assert {k: v for k, v in installed.items() if k != "envkit"} == {k: v for k, v in locked.items() if k != "envkit"}
    assert not [n for n in installed if n.startswith(CUDA) or n == "triton"]

"""`envkit image render --variant serving`: the base image's CANN layers, then torch, then the serving layer (vllm,
vllm-ascend, triton-ascend in the vendor's order), the serving environment and `vllm serve` as entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.export.templates import dockerfile, write_context
from envkit.jobs.image import plan_lock
from envkit.lock.file import read_lock

from .conftest import render_args

CASE = "910b-aarch64-serving"


def _plan(inputs, variant: str, generated_by: str = "envkit image render --lock envkit.lock -o image"):
    lock, arts, reqs = inputs
    return plan_lock(read_lock(lock), generated_by=generated_by, artifacts=arts, requirements=reqs, variant=variant)


def _python_stages_start(text: str) -> int:
    return text.index("FROM ascend AS torch")


def test_the_cann_part_is_the_base_variants_byte_for_byte(golden_inputs) -> None:
    base = dockerfile(_plan(golden_inputs[CASE], "base"))
    serving = dockerfile(_plan(golden_inputs[CASE], "serving"))
    cut = _python_stages_start(base)
    assert base[:cut] == serving[:cut] and "FROM os AS cann" in base[:cut]  # one build cache up to the Python layers
    assert "COPY --from=cann /usr/local/Ascend" in base[:cut]
    # the torch layer too: the serving layer comes after it
    torch_stage = base[cut:].split("\nFROM ", 1)[0]
    assert serving[cut:].split("\nFROM ", 1)[0] == torch_stage and "torch/requirements.txt" in torch_stage
    assert base != serving


def test_the_serving_layer_comes_after_torch_in_the_vendors_order(golden_inputs, tmp_path: Path) -> None:
    plan = _plan(golden_inputs[CASE], "serving")
    text = dockerfile(plan)
    stages = [line.split()[1:] for line in text.splitlines() if line.startswith("FROM ")]
    assert [s[-1] for s in stages] == ["os", "cann", "ascend", "torch", "serving", "runtime"]
    assert stages[4][0] == "torch" and stages[5][0] == "serving"  # serving builds on torch; the rest on serving
    assert [r.name for r in plan.serving_requirements] == ["vllm", "vllm-ascend", "triton-ascend"]
    assert not {"vllm", "vllm-ascend", "triton-ascend"} & {r.name for r in plan.rest_requirements}
    write_context(plan, tmp_path / "ctx")
    lines = [x for x in (tmp_path / "ctx/python/serving/requirements.txt").read_text().splitlines() if not x.startswith("#")]
    assert [x.split("==")[0] for x in lines] == ["vllm", "vllm-ascend", "triton-ascend"]
    assert all("--hash=sha256:" in x for x in lines)
    serving_run = text.split("FROM torch AS serving", 1)[1].split("\nFROM ", 1)[0]
    assert "--no-deps --require-hashes" in serving_run and "-r /tmp/envkit-python/serving/requirements.txt" in serving_run
    assert "--mount=type=bind,source=python/serving," in serving_run
    # no stage copies the venv from another: torch, serving, then the rest, one layer after the other
    assert "--from=torch" not in text and "--from=serving" not in text
    runtime = text.split("FROM serving AS runtime", 1)[1]
    assert "--mount=type=bind,source=python/rest," in runtime


def test_serving_env_entrypoint_and_label(golden_inputs) -> None:
    from envkit.export.container import NPU_SERVING_ENV

    plan = _plan(golden_inputs[CASE], "serving")
    text = dockerfile(plan)
    assert dict(plan.serving_env) == NPU_SERVING_ENV  # one source: the serving smoke's block
    for key, value in NPU_SERVING_ENV.items():
        assert f'{key}="{value}"' in text
    last = [line for line in text.splitlines() if line.startswith(("ENTRYPOINT", "CMD"))]
    assert last == ['ENTRYPOINT ["vllm", "serve"]']
    assert json.loads(last[0].split(" ", 1)[1]) == ["vllm", "serve"]  # exec form
    assert 'io.envkit.variant="serving"' in text
    base = dockerfile(_plan(golden_inputs[CASE], "base"))
    assert "ENTRYPOINT" not in base and "PYTORCH_NPU_ALLOC_CONF" not in base and 'CMD ["/bin/bash"]' in base


def test_deterministic(golden_inputs, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_context(_plan(golden_inputs[CASE], "serving"), a)
    write_context(_plan(golden_inputs[CASE], "serving"), b)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert Path("python/serving/requirements.txt") in files
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_rendering_base_after_serving_clears_the_serving_layer(golden_inputs, tmp_path: Path) -> None:
    write_context(_plan(golden_inputs[CASE], "serving"), tmp_path / "ctx")
    write_context(_plan(golden_inputs[CASE], "base"), tmp_path / "ctx")
    assert not (tmp_path / "ctx/python/serving/requirements.txt").exists()


def test_a_lock_without_serving_keys_is_exit_2_with_the_hint(golden_inputs, run_cli, tmp_path: Path) -> None:
    with pytest.raises(BadInput) as exc:
        _plan(golden_inputs["910b-aarch64-cann8.0.0"], "serving")
    assert "envkit resolve --workload serving" in exc.value.hint
    lock, arts, reqs = golden_inputs["910b-aarch64-cann8.0.0"]
    r = run_cli(*render_args(lock, arts, reqs, tmp_path / "ctx", "--variant", "serving"))
    assert r.code == 2, r.out + r.err
    assert "envkit resolve --workload serving" in r.err and "vllm" in r.err
    assert not (tmp_path / "ctx").exists()
    r = run_cli("image", "render", "--lock", str(lock), "--variant", "gpu", "-o", str(tmp_path / "ctx"))
    assert r.code == 2 and "base, serving" in r.err, r.out + r.err


def test_the_cli_renders_the_serving_variant(golden_inputs, run_cli, tmp_path: Path) -> None:
    lock, arts, reqs = golden_inputs[CASE]
    r = run_cli(*render_args(lock, arts, reqs, tmp_path / "ctx", "--variant", "serving"), "--json")
    assert r.code == 0, r.out + r.err
    doc = json.loads(r.out)
    assert doc["variant"] == "serving" and doc["python"]["serving_layer"] == ["vllm", "vllm-ascend", "triton-ascend"]
    assert "--variant serving" in (tmp_path / "ctx/Dockerfile").read_text().splitlines()[0]

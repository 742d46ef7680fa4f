"""The serving hazards, read from metadata on fixture roots (nothing is imported)."""

from __future__ import annotations

from pathlib import Path

from envkit.jobs.doctor.diagnose import diagnose
from envkit.jobs.doctor.observe import probe


def _checks(root: Path, **kw) -> dict:
    return {c.name: c for c in diagnose(probe(str(root), timeout=10), **kw).checks}


def test_the_doctor_names_upstream_triton_beside_triton_ascend_with_its_fix(root_copy):
    c = _checks(root_copy("hazard-triton-clash"))["upstream triton beside triton-ascend"]
    assert c.status == "fail" and "triton 3.6.0" in c.detail and "triton-ascend 3.2.0" in c.detail
    assert "AttrsDescriptor" in c.detail and "0 active drivers" in c.detail and "triton.language.target_info" in c.detail
    assert c.fix.startswith("pip uninstall -y triton && pip install --force-reinstall --no-deps triton-ascend==3.2.0")


def test_a_healthy_root_has_no_serving_checks(root_copy):
    assert not {n for n in _checks(root_copy("healthy-a2")) if "triton" in n or "vllm" in n.lower()}


def _site(root: Path) -> Path:
    return next(root.glob("usr/local/python3.11.13/lib/python3.11/site-packages"))


def _dist(root: Path, name: str, version: str, entry_points: str | None = None) -> None:
    folder = _site(root) / f"{name}-{version}.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    if entry_points is not None:
        (folder / "entry_points.txt").write_text(entry_points)


def test_triton_ascend_bound_to_another_cann_a_missing_plugin_and_a_replaced_torch_npu(root_copy):
    root = root_copy("healthy-a2")  # CANN 8.5.0, torch_npu 2.6.0.post5
    _dist(root, "triton_ascend", "3.2.2")
    _dist(root, "vllm", "0.23.0")
    _dist(root, "vllm_ascend", "0.23.0", "[vllm.general_plugins]\nascend_kv = vllm_ascend:x\n")
    checks = _checks(root, lock_stack={"torch_npu": "2.10.0.post4"})
    bound = checks["triton-ascend bound to CANN"]
    assert bound.status == "fail" and "bound to CANN 9.1.0, 9.2.0" in bound.detail and "CANN 8.5.0" in bound.detail
    assert bound.fix == "pip install --force-reinstall --no-deps triton-ascend==3.2.0"
    plugin = checks["vLLM and vllm-ascend"]
    assert plugin.status == "fail" and "vllm.platform_plugins" in plugin.detail
    replaced = checks["torch_npu replaced by vllm-ascend"]
    assert replaced.status == "fail" and "2.10.0.post4" in replaced.detail and "2.6.0.post5" in replaced.detail


def test_vllm_that_does_not_pair_with_vllm_ascend(root_copy):
    root = root_copy("healthy-a2")
    _dist(root, "vllm", "0.9.1")
    _dist(root, "vllm_ascend", "0.23.0", "[vllm.platform_plugins]\nascend = vllm_ascend:register\n")
    c = _checks(root)["vLLM and vllm-ascend"]
    assert c.status == "fail" and "pins vLLM 0.23.0" in c.detail and c.fix.startswith("pip install vllm==0.23.0, then")

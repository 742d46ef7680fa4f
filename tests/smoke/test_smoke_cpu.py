"""The full smoke on cpu: every check passes in fp32 and bf16, the outputs are bitwise reproducible."""

from __future__ import annotations

import hashlib
import json

import pytest

from .conftest import envkit_subprocess

pytestmark = pytest.mark.torch

EXPECTED_CHECKS = [
    "environment",
    "placement",
    "forward:fa",
    "forward:en",
    "forward:digits",
    "forward:long",
    "forward:batch",
    "prefill",
    "padding",
    "decode:en",
    "decode:batch",
    "generate",
    "train",
]


def _tensors(path):
    from safetensors.torch import load_file

    return load_file(str(path))


def _meta(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        return fh.metadata()


@pytest.mark.parametrize("fixture", ["run_fp32", "run_bf16"])
def test_every_check_passes_on_cpu(fixture, request):
    result = request.getfixturevalue(fixture)
    report = result.report
    assert [c.name for c in report.checks] == EXPECTED_CHECKS
    failed = [(c.name, c.figure) for c in report.checks if not c.ok]
    assert failed == []
    assert report.ok and result.exit_code == 0
    assert report.device == "cpu" and report.param_device == "cpu"
    by_name = {c.name: c for c in report.checks}
    # buffers are checked too: the rotary inv_freq is one of them
    assert any(n.endswith("inv_freq") for n in by_name["placement"].data["buffer_names"])
    assert by_name["placement"].data["parameters"] == 4 * 12 + 3
    assert by_name["generate"].data["cache_equals_no_cache"] is True
    assert by_name["generate"].data["equals_manual_decode"] is True
    # the long prompt is near the model's context
    long = next(p for p in report.prompts if p.name == "long")
    assert report.model.max_positions - 16 <= long.tokens < report.model.max_positions
    t = report.timings
    assert t.import_s > 0 and t.model_load_s > 0 and t.first_forward_s > 0 and t.forward_median_s > 0
    assert t.decode_tokens == 16 and t.decode_tokens_per_s > 0


def test_same_device_checks_are_exact_on_cpu(run_bf16, run_fp32):
    """On cpu the cache changes nothing at all in bf16 (measured), and at most rounding in fp32."""
    bf = {c.name: c.data for c in run_bf16.report.checks}
    assert max(bf["prefill"]["max_abs_diff"].values()) == 0.0
    assert bf["decode:en"]["max_abs_diff"] == 0.0
    fp = {c.name: c.data for c in run_fp32.report.checks}
    assert max(fp["prefill"]["max_abs_diff"].values()) == 0.0
    assert fp["decode:batch"]["max_abs_diff"] < 1e-5
    assert fp["padding"]["max_abs_diff"] < 1e-5


def test_report_json_matches_the_schema(run_fp32):
    from envkit.models.smoke import SmokeReport

    raw = (run_fp32.out_dir / "report.json").read_text()
    again = SmokeReport.model_validate_json(raw)
    assert again == run_fp32.report
    doc = json.loads(raw)
    assert doc["schema_version"] == 1
    doc["unexpected"] = 1
    with pytest.raises(Exception, match="unexpected"):
        SmokeReport.model_validate(doc)


def test_logits_file_metadata_and_contents(run_fp32):
    path = run_fp32.out_dir / "logits.safetensors"
    meta = _meta(path)
    assert meta["device"] == "cpu" and meta["param_device"] == "cpu" and meta["dtype"] == "fp32"
    assert meta["model_digest"] == run_fp32.report.model.digest
    assert meta["prompt_digest"] == run_fp32.report.prompt_digest
    assert meta["torch"] and meta["transformers"]
    token_ids = json.loads(meta["token_ids"])
    tensors = _tensors(path)
    assert set(token_ids) == {"fa", "en", "digits", "long", "batch"}
    # the token ids in the metadata are the unpadded rows of the saved inputs
    ids, mask = tensors["input_ids.batch"], tensors["attention_mask.batch"]
    assert token_ids["batch"] == [
        [t for t, m in zip(r, mr, strict=True) if m] for r, mr in zip(ids.tolist(), mask.tolist(), strict=True)
    ]
    assert mask[0, 0] == 0 and mask[:, -1].all()  # left padding
    vocab = run_fp32.report.model.vocab_size
    assert tensors["logits.en"].shape == (len(token_ids["en"][0]), vocab)
    assert tensors["hidden.en"].shape == (run_fp32.report.model.layers + 1, len(token_ids["en"][0]), 64)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == run_fp32.report.outputs.logits_sha256


def test_bf16_is_bitwise_reproducible_in_process(run_bf16, run_bf16_again):
    a = (run_bf16.out_dir / "logits.safetensors").read_bytes()
    b = (run_bf16_again.out_dir / "logits.safetensors").read_bytes()
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    assert run_bf16.report.checks[-1].data["loss"] == run_bf16_again.report.checks[-1].data["loss"]


def test_fp32_cli_run_in_a_fresh_process_is_bitwise_identical(run_fp32, smoke_cache, tmp_path):
    import torch

    out = tmp_path / "fresh"
    res = envkit_subprocess(
        "-q",
        "smoke",
        "--device",
        "cpu",
        "--dtype",
        "fp32",
        "--layers",
        "--repeat",
        "2",
        "--out",
        str(out),
        "--json",
        env={"ENVKIT_CACHE_DIR": str(smoke_cache)},
    )
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["ok"] is True and doc["schema_version"] == 1
    assert res.err == ""  # --quiet silences progress
    a, b = _tensors(run_fp32.out_dir / "logits.safetensors"), _tensors(out / "logits.safetensors")
    assert sorted(a) == sorted(b)
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert _meta(run_fp32.out_dir / "logits.safetensors") == _meta(out / "logits.safetensors")
    assert (run_fp32.out_dir / "logits.safetensors").read_bytes() == (out / "logits.safetensors").read_bytes()


@pytest.mark.parametrize(
    "device,needle",
    [
        ("cuda", "torch.cuda.is_available() is False"),
        ("cuda:1", "torch.cuda.is_available() is False"),
        ("npu", "torch_npu is not installed"),
    ],
)
def test_absent_devices_exit_2_and_never_pass(device, needle, smoke_cache, run_cli, tmp_path):
    pytest.importorskip("torch")
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    res = run_cli("smoke", "--device", device, "--dtype", "fp32", "--out", str(tmp_path / "o"))
    assert res.code == 2
    assert needle in res.err
    assert f"device '{device}' requested" in res.err
    assert "passed" not in res.out and not (tmp_path / "o").exists()


def test_absent_device_json_error(smoke_cache, run_cli, tmp_path):
    pytest.importorskip("torch")
    res = run_cli("smoke", "--device", "npu", "--json", "--out", str(tmp_path / "o"))
    assert res.code == 2
    doc = json.loads(res.out)
    assert doc["error"]["type"] == "CannotRun" and doc["error"]["details"]["kind"] == "not_installed"


@pytest.mark.parametrize(
    "args", [["--device", "tpu"], ["--device", "cpu", "--dtype", "int8"], ["--device", "cpu", "--nproc", "0"]]
)
def test_bad_input_exits_2(args, run_cli, tmp_path):
    """Refused before torch is imported."""
    res = run_cli("smoke", *args, "--out", str(tmp_path / "o"))
    assert res.code == 2


def test_model_option_missing_or_not_a_checkpoint(run_cli, tmp_path):
    res = run_cli("smoke", "--device", "cpu", "--model", str(tmp_path / "absent"), "--out", str(tmp_path / "o"))
    assert res.code == 2 and "model directory not found" in res.err
    (tmp_path / "empty").mkdir()
    res = run_cli("smoke", "--device", "cpu", "--model", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert res.code == 2 and "no config.json" in res.err


def test_a_broken_checkpoint_fails_checks_with_exit_1(tiny_model, smoke_cache, run_cli, tmp_path):
    """--model with a NaN in one weight: the forward checks fail, the exit code is 1, the report is written."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    tensors = load_file(str(broken / "model.safetensors"))
    w = tensors["model.layers.1.mlp.down_proj.weight"].copy()
    w[0, 0] = np.nan
    tensors["model.layers.1.mlp.down_proj.weight"] = w
    save_file(tensors, str(broken / "model.safetensors"), metadata={"format": "pt"})
    out = tmp_path / "o"
    res = run_cli("-q", "smoke", "--device", "cpu", "--dtype", "fp32", "--model", str(broken), "--out", str(out), "--repeat", "1")
    assert res.code == 1
    assert "FAIL  forward:en" in res.out and "non-finite logits" in res.out
    assert "FAIL  train" in res.out
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] is False and report["model"]["builtin"] is False
    from envkit.jobs.smoke.model import model_digest

    assert report["model"]["digest"] == model_digest(broken) != model_digest(tiny_model)


def test_placement_check_catches_a_buffer_left_behind(run_fp32, tiny_model):
    """A module moved to the device but one buffer (rotary inv_freq) left elsewhere fails the placement check."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from envkit.jobs.smoke import checks as C
    from envkit.jobs.smoke.device import Device, DeviceSpec

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32, attn_implementation="eager")
    name, _ = next((n, b) for n, b in model.named_buffers() if n.endswith("inv_freq"))
    owner = model.get_submodule(name.rsplit(".", 1)[0])
    original = owner.inv_freq
    owner.inv_freq = original.to("meta")
    dev = Device(DeviceSpec("cpu"), torch.device("cpu"), "cpu", 1, 0.0, {})
    ctx = C.SmokeContext(torch, model, AutoTokenizer.from_pretrained(tiny_model), dev, "fp32", {}, False)
    check = C.check_placement(ctx)
    assert not check.ok and check.data["off_device"] == [f"{name}@meta"]
    owner.inv_freq = original
    assert C.check_placement(ctx).ok
    model.to(torch.bfloat16)
    check = C.check_placement(ctx)
    assert not check.ok and check.data["off_device"] == [] and check.data["wrong_dtype"]


def test_collectives_across_two_cpu_processes():
    pytest.importorskip("torch")
    from envkit.executor.dist import expected, run_collectives

    res = run_collectives("cpu", 2, timeout_s=60)
    assert res["ok"], res
    assert res["backend"] == "gloo"
    assert [r["all_gather_values"] for r in res["ranks"]] == [[0.0, 1.0], [0.0, 1.0]]
    assert expected(2)["all_reduce_factor"] == 3 and expected(4)["all_reduce_factor"] == 10

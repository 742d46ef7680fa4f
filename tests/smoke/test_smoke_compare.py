"""`envkit compare`: identical runs pass, a perturbed file fails, mismatched inputs are refused, bf16 vs fp32 passes."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from envkit.errors import BadInput
from envkit.jobs.smoke.compare import load_thresholds, logits_metrics, pair_key

np = pytest.importorskip("numpy")
pytest.importorskip("safetensors")


def _read(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as fh:
        return dict(fh.metadata()), {k: fh.get_tensor(k) for k in fh.keys()}


def _rewrite(src_dir, dst, tensors=None, meta=None):
    """A copy of a run's logits file (no report.json), with tensors and metadata changed."""
    from envkit.models.smokerun import write_safetensors

    m, t = _read(src_dir / "logits.safetensors")
    m.update(meta or {})
    t.update(tensors or {})
    write_safetensors(dst, t, m)
    return dst


# --- pure ----------------------------------------------------------------------------------------


def test_metrics_of_known_arrays():
    a = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    same = logits_metrics(a, a.copy())
    assert same["max_abs"] == 0 and same["top1"] == 1.0 and same["kl_max"] == 0 and same["cosine_min"] == pytest.approx(1.0)
    b = a.copy()
    b[1] = [0.0, 2.0, 1.0]  # second row: the top token changes
    m = logits_metrics(a, b)
    assert m["max_abs"] == 2.0 and m["mean_abs"] == pytest.approx(2.0 / 6) and m["top1"] == 0.5
    p = np.exp([0.0, 0.0, 1.0]) / np.exp([0.0, 0.0, 1.0]).sum()
    q = np.exp([0.0, 2.0, 1.0]) / np.exp([0.0, 2.0, 1.0]).sum()
    assert m["kl_max"] == pytest.approx(float((p * np.log(p / q)).sum()))
    assert m["cosine_min"] == pytest.approx(1 / math.sqrt(5))
    # a shift of every logit by the same amount changes no probability
    assert logits_metrics(a, a + 3.0)["kl_max"] == pytest.approx(0.0, abs=1e-12)
    nan = a.copy()
    nan[0, 0] = np.nan
    assert logits_metrics(a, nan)["max_abs"] == math.inf


def test_pair_keys_and_default_thresholds():
    assert pair_key("bf16", "fp32") == pair_key("fp32", "bf16") == "fp32/bf16"
    th, path, sha = load_thresholds(None)
    assert path.name == "thresholds.yaml" and len(sha) == 64
    assert set(th.pairs) == {"fp32/fp32", "fp32/fp16", "fp32/bf16", "fp16/fp16", "fp16/bf16", "bf16/bf16"}
    assert th.pairs["fp32/fp32"].max_abs < th.pairs["fp32/bf16"].max_abs


@pytest.mark.parametrize(
    "text,needle",
    [
        ("pairs: {fp32/fp32: {max_abs: 1}}\n", "invalid thresholds"),
        (
            "schema_version: 1\npairs:\n  fp32/fp32: {max_abs: 1, mean_abs: 1, cosine_min: 0, top1_min: 0, kl_max: 1, extra: 2}\n",
            "invalid thresholds",
        ),
        (
            "schema_version: 1\npairs:\n  bf16/fp32: {max_abs: 1, mean_abs: 1, cosine_min: 0, top1_min: 0, kl_max: 1}\n",
            "invalid dtype pair",
        ),
        ("[unclosed", "invalid thresholds"),
    ],
)
def test_bad_thresholds_files(tmp_path, text, needle):
    f = tmp_path / "t.yaml"
    f.write_text(text)
    with pytest.raises(BadInput, match=needle):
        load_thresholds(f)


# --- on real runs ---------------------------------------------------------------------------------


@pytest.mark.torch
def test_identical_runs_pass_with_zero_difference(run_fp32, run_cli):
    res = run_cli("compare", str(run_fp32.out_dir), str(run_fp32.out_dir), "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["ok"] is True and doc["dtype_pair"] == "fp32/fp32"
    assert {p["name"] for p in doc["prompts"]} == {"fa", "en", "digits", "long", "batch"}
    assert all(p["max_abs"] == 0 and p["top1"] == 1.0 and p["kl_max"] == 0 for p in doc["prompts"])
    assert doc["layers"]["first_divergent"] is None and all(w == 0 for w in doc["layers"]["worst_rel"])


@pytest.mark.torch
def test_perturbed_logits_are_caught(run_fp32, run_cli, tmp_path):
    _, t = _read(run_fp32.out_dir / "logits.safetensors")
    logits = t["logits.digits"].copy()
    logits[7, 3] += 0.05  # one logit of one position
    bad = _rewrite(run_fp32.out_dir, tmp_path / "perturbed.safetensors", {"logits.digits": logits})
    res = run_cli("compare", str(run_fp32.out_dir), str(bad))
    assert res.code == 1
    assert "compare: OUTSIDE thresholds" in res.out
    line = next(ln for ln in res.out.splitlines() if ln.startswith("digits"))
    assert "FAIL" in line and "max_abs" in line
    assert all("ok" in ln for ln in res.out.splitlines() if ln.split()[:1] in (["fa"], ["en"], ["long"], ["batch"]))


@pytest.mark.torch
def test_an_edited_logits_file_next_to_its_report_is_refused(run_fp32, run_cli, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_fp32.out_dir, run)
    _rewrite(
        run_fp32.out_dir, run / "logits.safetensors", {"logits.en": _read(run / "logits.safetensors")[1]["logits.en"] * 1.01}
    )
    res = run_cli("compare", str(run_fp32.out_dir), str(run))
    assert res.code == 2 and "report.json does not describe" in res.err and "logits sha256" in res.err


@pytest.mark.torch
def test_mismatched_prompt_set_is_refused(run_fp32, run_cli, tmp_path):
    meta, t = _read(run_fp32.out_dir / "logits.safetensors")
    other = _rewrite(
        run_fp32.out_dir,
        tmp_path / "other.safetensors",
        meta={"prompt_digest": "sha256:" + "0" * 64, "prompts": json.dumps(["fa", "en", "digits", "long"])},
    )
    res = run_cli("compare", str(run_fp32.out_dir), str(other))
    assert res.code == 2 and "the prompt sets differ" in res.err


@pytest.mark.torch
def test_mismatched_token_ids_and_model_are_refused(run_fp32, run_cli, tmp_path):
    meta, t = _read(run_fp32.out_dir / "logits.safetensors")
    ids = json.loads(meta["token_ids"])
    ids["en"][0][0] += 1
    other = _rewrite(run_fp32.out_dir, tmp_path / "ids.safetensors", meta={"token_ids": json.dumps(ids)})
    res = run_cli("compare", str(run_fp32.out_dir), str(other))
    assert res.code == 2 and "token ids differ" in res.err
    shifted = t["input_ids.en"].copy()
    shifted[0, 0] += 1
    other = _rewrite(run_fp32.out_dir, tmp_path / "ids2.safetensors", {"input_ids.en": shifted})
    res = run_cli("compare", str(run_fp32.out_dir), str(other))
    assert res.code == 2 and "input_ids of prompt 'en' differ" in res.err
    other = _rewrite(run_fp32.out_dir, tmp_path / "model.safetensors", meta={"model_digest": "sha256:" + "1" * 64})
    res = run_cli("compare", str(run_fp32.out_dir), str(other))
    assert res.code == 2 and "model digests differ" in res.err


@pytest.mark.torch
def test_a_file_claiming_another_device_is_refused(run_fp32, run_cli, tmp_path):
    fake = _rewrite(run_fp32.out_dir, tmp_path / "npu.safetensors", meta={"device": "npu:0", "device_type": "npu"})
    res = run_cli("compare", str(run_fp32.out_dir), str(fake))
    assert res.code == 2
    assert "records device 'npu:0' but its parameters were on 'cpu'" in res.err


@pytest.mark.torch
def test_not_a_smoke_file_and_missing_paths(run_cli, tmp_path, run_fp32):
    res = run_cli("compare", str(tmp_path / "nothing"), str(run_fp32.out_dir))
    assert res.code == 2 and "no smoke logits file" in res.err
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    res = run_cli("compare", str(run_fp32.out_dir), str(junk))
    assert res.code == 2 and "cannot read" in res.err


@pytest.mark.torch
def test_bf16_against_fp32_is_within_the_default_bf16_thresholds(run_fp32, run_bf16, run_cli, tmp_path):
    html = tmp_path / "cmp.html"
    res = run_cli("compare", str(run_fp32.out_dir), str(run_bf16.out_dir), "--json", "--html", str(html))
    assert res.code == 0, res.out
    doc = json.loads(res.out)
    assert doc["dtype_pair"] == "fp32/bf16" and doc["ok"] is True
    worst = max(p["max_abs"] for p in doc["prompts"])
    assert 0 < worst < doc["thresholds"]["max_abs"]  # really different, and within the limit
    assert min(p["top1"] for p in doc["prompts"]) >= doc["thresholds"]["top1_min"]
    assert doc["layers"]["first_divergent"] is None
    assert 0 < doc["layers"]["worst_rel"][-1] < doc["thresholds"]["layer_rel_max"]
    # the fp32 thresholds are much tighter: the same pair judged as fp32/fp32 fails
    strict = tmp_path / "strict.yaml"
    strict.write_text(
        "schema_version: 1\npairs:\n  fp32/bf16: {max_abs: 1.0e-3, mean_abs: 1.0e-4, cosine_min: 0.99999, top1_min: 0.99, kl_max: 1.0e-5}\n"
    )
    res = run_cli("compare", str(run_fp32.out_dir), str(run_bf16.out_dir), "--thresholds", str(strict))
    assert res.code == 1
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<polyline" in page
    for needle in ("<script", "src=", "href=", "@import", "url("):
        assert needle not in page
    assert "Within thresholds" in page


@pytest.mark.torch
def test_first_divergent_layer_is_named(run_fp32, run_cli, tmp_path):
    _, t = _read(run_fp32.out_dir / "logits.safetensors")
    hidden = t["hidden.long"].copy()
    hidden[2:] *= 1.5  # from hidden_states[2] (the output of decoder layer 1) on
    cand = _rewrite(run_fp32.out_dir, tmp_path / "layers.safetensors", {"hidden.long": hidden})
    html = tmp_path / "layers.html"
    res = run_cli("compare", str(run_fp32.out_dir), str(cand), "--json", "--html", str(html))
    assert res.code == 1
    doc = json.loads(res.out)
    first = doc["layers"]["first_divergent"]
    assert first["index"] == 2 and first["name"] == "layer 1" and first["prompt"] == "long"
    assert all(p["ok"] for p in doc["prompts"])  # the logits themselves were left alone
    assert "First layer over its threshold: layer 1" in html.read_text()
    res = run_cli("compare", str(run_fp32.out_dir), str(cand))
    assert "first layer over its threshold: layer 1" in res.out

"""`envkit compare` judges every metric: for each one, logits where ONLY that metric is outside its limit.

No torch: the two runs are smoke logits files written here (numpy and safetensors only), one prompt of
20 positions over a 256-token vocabulary. The limits are fixed by this file; each candidate is built so
that the other four metrics stay inside them (asserted), so the exit 1 can only come from the one check.
"""

from __future__ import annotations

import json

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("safetensors")

LIMITS = {"max_abs": 1.0, "mean_abs": 0.1, "cosine_min": 0.99, "top1_min": 0.9, "kl_max": 0.01}
N, V = 20, 256


def _base():
    rng = np.random.default_rng(0)
    base = rng.uniform(-1, 1, (N, V)).astype(np.float32)
    base[:, 0] = 3.0  # a clear top token at every position
    return base + np.float32(10.0)  # a common offset: no probability changes, the cosine is robust


def _max_abs():
    """One low logit lowered by 1.5: the top token, the direction and the distribution barely move."""
    ref = _base()
    cand = ref.copy()
    cand[3, 5] -= 1.5
    return ref, cand


def _mean_abs():
    """Every logit shifted by 0.2: no probability changes, the vectors keep their direction."""
    ref = _base()
    return ref, ref + np.float32(0.2)


def _cosine():
    """One position with small logits (a clear top token) whose small ones change direction."""
    rng = np.random.default_rng(1)
    ref = _base()
    ref[4] = rng.uniform(-0.05, 0.05, V)
    ref[4, 0] = 0.5
    cand = ref.copy()
    cand[4, 1:] = rng.uniform(-0.05, 0.05, V - 1)
    return ref, cand


def _top1():
    """Near ties (13.0 against 12.99) swapped at 4 of the 20 positions."""
    ref = _base()
    ref[:, 1] = 12.99
    cand = ref.copy()
    cand[:4, 0], cand[:4, 1] = 12.99, 13.0
    return ref, cand


def _kl():
    """A peaked position (large common offset) whose other 255 logits are raised by 0.9."""
    ref = _base()
    ref[6] = 40.0
    ref[6, 0] = 46.0
    cand = ref.copy()
    cand[6, 1:] += 0.9
    return ref, cand


CASES = {"max_abs": _max_abs, "mean_abs": _mean_abs, "cosine_min": _cosine, "top1": _top1, "kl_max": _kl}


def _write_run(path, logits):
    from envkit.models.smokerun import METADATA_FORMAT, write_safetensors

    meta = {
        "envkit_format": METADATA_FORMAT,
        "device": "cpu",
        "device_type": "cpu",
        "param_device": "cpu",
        "dtype": "fp32",
        "model_digest": "sha256:" + "a" * 64,
        "prompt_digest": "sha256:" + "b" * 64,
        "prompts": json.dumps(["p"]),
        "token_ids": json.dumps({"p": [list(range(N))]}),
    }
    tensors = {
        "logits.p": logits.astype(np.float32),
        "input_ids.p": np.arange(N, dtype=np.int64)[None, :],
        "attention_mask.p": np.ones((1, N), dtype=np.int64),
        "positions.p": np.arange(N, dtype=np.int64),
    }
    write_safetensors(path, tensors, meta)
    return path


@pytest.fixture
def thresholds(tmp_path):
    f = tmp_path / "limits.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/fp32: " + json.dumps(LIMITS) + "\n")
    return f


def test_identical_files_pass_the_limits(tmp_path, thresholds, run_cli):
    ref = _write_run(tmp_path / "ref.safetensors", _base())
    res = run_cli("compare", str(ref), str(ref), "--thresholds", str(thresholds), "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["ok"] is True and doc["schema_version"] == 1 and doc["thresholds"] == {**LIMITS, "layer_rel_max": None}


@pytest.mark.parametrize("metric", sorted(CASES))
def test_each_metric_alone_outside_its_limit_fails(tmp_path, thresholds, run_cli, metric):
    from envkit.jobs.smoke.compare import logits_metrics

    ref_logits, cand_logits = CASES[metric]()
    # the construction (judged here, not by the code under test): this metric, and only this one, is outside
    m = logits_metrics(ref_logits, cand_logits)
    outside = {
        "max_abs": m["max_abs"] > LIMITS["max_abs"],
        "mean_abs": m["mean_abs"] > LIMITS["mean_abs"],
        "cosine_min": m["cosine_min"] < LIMITS["cosine_min"],
        "top1": m["top1"] < LIMITS["top1_min"],
        "kl_max": m["kl_max"] > LIMITS["kl_max"],
    }
    assert [k for k, bad in outside.items() if bad] == [metric], m
    ref = _write_run(tmp_path / "ref.safetensors", ref_logits)
    cand = _write_run(tmp_path / "cand.safetensors", cand_logits)

    res = run_cli("compare", str(ref), str(cand), "--thresholds", str(thresholds), "--json")
    assert res.code == 1, res.out + res.err
    doc = json.loads(res.out)
    assert doc["ok"] is False
    assert [(p["name"], p["ok"], p["failed"]) for p in doc["prompts"]] == [("p", False, [metric])]

    res = run_cli("compare", str(ref), str(cand), "--thresholds", str(thresholds))
    assert res.code == 1
    line = next(ln for ln in res.out.splitlines() if ln.startswith("p "))
    assert line.endswith(f"FAIL ({metric})")
    assert res.out.rstrip().endswith("compare: OUTSIDE thresholds")

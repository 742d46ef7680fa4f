"""envkit.jobs.smoke.compare, the pure parts that `make mutation` showed no test held: a metric exactly at its limit,
log-softmax per row, dtype-pair keys, layer names and metrics, and what a bad thresholds file says."""

from __future__ import annotations

import math

import pytest

from envkit.errors import BadInput
from envkit.jobs.smoke.compare import (
    Limits,
    _g,
    layer_metrics,
    layer_names,
    load_thresholds,
    logits_metrics,
    pair_key,
    violations,
)

np = pytest.importorskip("numpy")

LIM = Limits(max_abs=1.0, mean_abs=0.1, cosine_min=0.99, top1_min=0.9, kl_max=0.01)
AT = {"max_abs": 1.0, "mean_abs": 0.1, "cosine_min": 0.99, "top1": 0.9, "kl_max": 0.01}


def test_a_metric_exactly_at_its_limit_passes():
    assert violations(AT, LIM) == []


@pytest.mark.parametrize(
    ("metric", "value"),
    [("max_abs", 1.01), ("mean_abs", 0.11), ("cosine_min", 0.98), ("top1", 0.85), ("kl_max", 0.02)],
)
def test_each_metric_past_its_limit_is_named_alone(metric, value):
    assert violations({**AT, metric: value}, LIM) == [metric]


def test_kl_is_per_row_and_shift_invariant():
    """Rows of very different scales: the log-softmax is taken per row (its max and sum along the vocabulary)."""
    ref = np.array([[100.0, 0.0, 0.0], [0.0, 1.0, 2.0]])
    same_probs = ref + np.array([[5.0], [-3.0]])  # a per-row offset changes no probability
    m = logits_metrics(ref, same_probs)
    assert m["kl_max"] == pytest.approx(0.0, abs=1e-12)
    assert m["top1"] == 1.0
    cand = ref.copy()
    cand[1] = [2.0, 1.0, 0.0]
    p = np.exp(ref[1]) / np.exp(ref[1]).sum()
    q = np.exp(cand[1]) / np.exp(cand[1]).sum()
    assert logits_metrics(ref, cand)["kl_max"] == pytest.approx(float((p * np.log(p / q)).sum()), rel=1e-9)


def test_kl_is_stable_for_large_logits():
    """Each row's own max is subtracted before exp: logits of 1000 (an fp32 model can give them) beside a row of
    small ones still give a finite KL."""
    ref = np.array([[1000.0, 0.0, 0.0], [0.0, 1.0, 2.0]])
    cand = ref.copy()
    cand[0, 1] = 1.0
    m = logits_metrics(ref, cand)
    assert math.isfinite(m["kl_max"]) and m["kl_max"] == pytest.approx(0.0, abs=1e-12)
    assert logits_metrics(ref, ref)["kl_max"] == 0.0


def test_pair_key_orders_known_dtypes_first_then_by_name():
    assert pair_key("bf16", "fp32") == "fp32/bf16"
    assert pair_key("int8", "fp16") == "fp16/int8"
    assert pair_key("zz", "aa") == "aa/zz"


def test_layer_names():
    assert layer_names(1) == ["embeddings"]
    assert layer_names(2) == ["embeddings", "layer 0 + norm"]
    assert layer_names(3) == ["embeddings", "layer 0", "layer 1 + norm"]


def test_layer_metrics_per_layer():
    ref = np.ones((2, 2, 2))
    cand = ref.copy()
    cand[1, 0, 0] = 3.0
    out = layer_metrics(ref, cand)
    assert out[0] == {"rel": 0.0, "max_abs": 0.0}
    assert out[1]["rel"] == pytest.approx(1.0) and out[1]["max_abs"] == 2.0
    small = np.full((1, 2, 2), 0.1)  # relative to the layer's own norm (0.2), however small it is
    bumped = small.copy()
    bumped[0, 0, 0] = 0.2
    assert layer_metrics(small, bumped)[0]["rel"] == pytest.approx(0.5)
    assert layer_metrics(small, np.full((1, 2, 2), np.nan))[0]["rel"] == math.inf  # a NaN difference reads as inf
    assert layer_metrics(np.zeros((1, 0, 4)), np.zeros((1, 0, 4))) == [{"rel": 0.0, "max_abs": 0.0}]  # an empty layer


def test_number_format():
    assert _g(0.123456) == "0.123"
    assert _g(math.inf) == "inf"


def test_an_unreadable_thresholds_file_names_itself(tmp_path):
    path = tmp_path / "missing.yaml"
    with pytest.raises(BadInput, match="cannot read the thresholds file") as e:
        load_thresholds(path)
    assert e.value.where.file == str(path)


def test_an_invalid_thresholds_file_names_itself_and_the_error(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("schema_version: 1\npairs:\n  fp32/fp32: {max_abs: -1}\n")
    with pytest.raises(BadInput) as e:
        load_thresholds(path)
    err = e.value
    assert err.message.startswith("invalid thresholds file: ") and "validation error" in err.message
    assert err.where.file == str(path)
    assert "max_abs" in err.details["error"]


@pytest.mark.parametrize("key", ["bf16/fp32", "fp32/int8", "fp32/fp16/bf16"])
def test_a_bad_dtype_pair_is_named_with_its_key_and_a_hint(tmp_path, key):
    path = tmp_path / "t.yaml"
    limits = "{max_abs: 1, mean_abs: 1, cosine_min: 0.9, top1_min: 0.9, kl_max: 1}"
    path.write_text(f"schema_version: 1\npairs:\n  {key}: {limits}\n")
    with pytest.raises(BadInput, match=f"invalid dtype pair '{key}'") as e:
        load_thresholds(path)
    assert e.value.where.file == str(path) and e.value.where.key == f"pairs.{key}"
    assert e.value.hint.startswith("write pairs as fp32/fp32")


def test_non_finite_logits_give_the_worst_metrics_and_the_finite_reference_peak():
    ref = np.array([[1.0, -3.0], [np.nan, 2.0]])
    m = logits_metrics(ref, np.array([[1.0, 0.0], [0.0, np.inf]]))
    assert math.isnan(m.pop("cosine_min"))
    assert m == {
        "max_abs": math.inf,
        "mean_abs": math.inf,
        "top1": 0.0,
        "kl_max": math.inf,
        "kl_mean": math.inf,
        "ref_absmax": 3.0,
    }


def test_cosine_of_small_logits_is_not_floored():
    a = np.array([[0.1, 0.2]])  # norms below 1: only a zero vector is guarded against
    assert logits_metrics(a, a)["cosine_min"] == pytest.approx(1.0)
    assert logits_metrics(a, np.array([[0.2, -0.1]]))["cosine_min"] == pytest.approx(0.0, abs=1e-12)

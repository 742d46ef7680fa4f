"""`envkit compare` without torch: load_run, check_comparable, compare_runs and format_table on run folders
written here (numpy and safetensors only), with logits small enough to compute every metric by hand."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from envkit.errors import BadInput

np = pytest.importorskip("numpy")
pytest.importorskip("safetensors")

from envkit.jobs.smoke.compare import (  # noqa: E402 - after the importorskip of numpy and safetensors
    check_comparable,
    compare_runs,
    format_table,
    load_run,
)
from envkit.models.smokerun import METADATA_FORMAT, write_safetensors  # noqa: E402

MODEL = "sha256:" + "a" * 64
PROMPTS = "sha256:" + "b" * 64
# prompt a: one position whose two logits swap; prompt b: two positions, the second one changed
REF = {"a": [[1.0, 0.0]], "b": [[3.0, 4.0], [1.0, 1.0]]}
CAND = {"a": [[0.0, 1.0]], "b": [[3.0, 4.0], [1.0, 2.0]]}
E = math.e
KL_A = (E - 1) / (E + 1)  # p - q of softmax(1, 0): sum p (log p - log q) = p1 * 1 + p2 * (-1)
KL_B1 = math.log(1 + E) - math.log(2) - 0.5  # KL((1/2, 1/2) || softmax(1, 2))
LIMITS = {"max_abs": 1.0, "mean_abs": 0.5, "cosine_min": 0.9, "top1_min": 0.5, "kl_max": 0.5}


def _meta(**over) -> dict[str, str]:
    """The metadata of a CPU fp32 run of prompts a (one token) and b (two), with `over` changed (None: dropped)."""
    meta = dict.fromkeys(("device", "device_type", "param_device"), "cpu")
    meta.update(envkit_format=METADATA_FORMAT, dtype="fp32", model_digest=MODEL, prompt_digest=PROMPTS)
    meta.update(prompts=json.dumps(["a", "b"]), token_ids=json.dumps({"a": [[7]], "b": [[8, 9]]}))
    meta.update(torch="2.1.0", transformers="4.40.0")
    meta.update(over)
    return {k: v for k, v in meta.items() if v is not None}


def _tensors(logits: dict, hidden: dict | None = None) -> dict:
    out = {}
    for name, rows in logits.items():
        n = len(rows)
        out[f"logits.{name}"] = np.array(rows, dtype=np.float32)
        out[f"input_ids.{name}"] = np.arange(n, dtype=np.int64)[None, :]
        out[f"attention_mask.{name}"] = np.ones((1, n), dtype=np.int64)
        out[f"positions.{name}"] = np.arange(n, dtype=np.int64)
    for name, arr in (hidden or {}).items():
        out[f"hidden.{name}"] = np.asarray(arr, dtype=np.float32)
    return out


def _run(folder, logits=REF, meta=None, tensors=None, report=False, hidden=None, drop=()):
    """A run folder: logits.safetensors, and report.json describing it when `report` (a dict: fields to change)."""
    folder.mkdir(parents=True, exist_ok=True)
    t = _tensors(logits, hidden)
    t.update(tensors or {})
    for k in drop:
        del t[k]
    m = _meta(**(meta or {}))
    write_safetensors(folder / "logits.safetensors", t, m)
    if report is not False:
        doc = {
            "device": m["device"],
            "param_device": m["param_device"],
            "dtype": m["dtype"],
            "model": {"digest": m["model_digest"]},
            "prompt_digest": m["prompt_digest"],
            "outputs": {"logits_sha256": hashlib.sha256((folder / "logits.safetensors").read_bytes()).hexdigest()},
        }
        doc.update(report or {})
        (folder / "report.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture
def limits(tmp_path):
    f = tmp_path / "limits.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/fp32: " + json.dumps({**LIMITS, "layer_rel_max": 0.1}) + "\n")
    return f


# --- load_run ----------------------------------------------------------------------------------


def test_a_run_folder_is_read_with_its_report(tmp_path):
    folder = _run(tmp_path / "r", report={})
    run = load_run(folder, "REF")
    assert run.path == folder / "logits.safetensors" and run.label == "REF"
    assert run.prompts == ["a", "b"] and run.dtype == "fp32"
    assert run.describe() == "cpu fp32 (torch 2.1.0, transformers 4.40.0)"
    assert run.report is not None and run.report["model"] == {"digest": MODEL}
    assert sorted(run.tensors) == sorted(_tensors(REF))
    assert run.tensors["logits.b"].tolist() == REF["b"]
    # the file itself, without its folder: no report
    alone = load_run(folder / "logits.safetensors", "CAND")
    assert alone.report is None and alone.path == folder / "logits.safetensors" and alone.label == "CAND"


def test_a_folder_without_report_json_has_none(tmp_path):
    assert load_run(_run(tmp_path / "r"), "REF").report is None
    folder = _run(tmp_path / "d")
    (folder / "report.json").mkdir()  # not a file: not read
    assert load_run(folder, "REF").report is None


def test_a_missing_file_is_bad_input_naming_the_side_and_path(tmp_path):
    with pytest.raises(BadInput) as e:
        load_run(tmp_path / "nothing", "REF")
    assert e.value.message == f"REF: no smoke logits file at {tmp_path / 'nothing'}"
    assert e.value.exit_code == 2 and e.value.hint.startswith("pass a run directory written by `envkit smoke --out DIR`")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput) as e:
        load_run(empty, "CAND")
    assert e.value.message == f"CAND: no smoke logits file at {empty / 'logits.safetensors'}"


def test_an_unreadable_file_is_bad_input(tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    with pytest.raises(BadInput) as e:
        load_run(junk, "CAND")
    assert e.value.message.startswith(f"CAND: cannot read {junk}: ") and e.value.where.file == str(junk)


@pytest.mark.parametrize(
    ("over", "named"),
    [
        ({"dtype": None}, "dtype"),
        ({"token_ids": None, "device": None}, "device, token_ids"),
        ({"envkit_format": "other/1"}, "envkit_format"),
        ({"envkit_format": None}, "envkit_format"),
    ],
)
def test_missing_or_wrong_metadata_is_named(tmp_path, over, named):
    folder = _run(tmp_path / "r", meta=over)
    path = folder / "logits.safetensors"
    with pytest.raises(BadInput) as e:
        load_run(folder, "REF")
    assert e.value.message == f"REF: {path} is not an envkit smoke logits file (metadata {named} missing or wrong)"
    assert e.value.where.file == str(path)


def test_a_file_without_metadata_is_refused(tmp_path):
    path = tmp_path / "bare.safetensors"
    write_safetensors(path, _tensors(REF))
    with pytest.raises(BadInput, match=r"metadata envkit_format, device, device_type, .*token_ids missing or wrong"):
        load_run(path, "REF")


@pytest.mark.parametrize(
    "over",
    [
        {"param_device": "npu:0"},  # recorded cpu, parameters on an NPU
        {"device": "npu:0", "device_type": "npu"},  # parameters on the CPU
        {"device": "npu:0"},  # the device and its type disagree
    ],
)
def test_a_file_claiming_another_device_is_refused(tmp_path, over):
    folder = _run(tmp_path / "r", meta=over)
    m = _meta(**over)
    with pytest.raises(BadInput) as e:
        load_run(folder, "CAND")
    path = folder / "logits.safetensors"
    assert e.value.message == f"CAND: {path} records device '{m['device']}' but its parameters were on '{m['param_device']}'"
    assert e.value.where.file == str(path)
    assert e.value.hint == "the file was not produced on the device it claims; rerun the smoke on that device"


def test_a_device_index_is_not_a_mismatch(tmp_path):
    over = {"device": "npu:0", "device_type": "npu", "param_device": "npu:1"}
    assert load_run(_run(tmp_path / "r", meta=over), "REF").meta["param_device"] == "npu:1"


@pytest.mark.parametrize(
    ("report", "named"),
    [
        ({"device": "npu:0"}, "device"),
        ({"param_device": "npu:0"}, "param_device"),
        ({"dtype": "bf16"}, "dtype"),
        ({"model": {"digest": "sha256:" + "c" * 64}}, "model digest"),
        ({"model": None}, "model digest"),
        ({"prompt_digest": "x"}, "prompt digest"),
        ({"outputs": {"logits_sha256": "0" * 64}}, "logits sha256"),
        ({"outputs": None}, "logits sha256"),
        ({"dtype": "fp16", "prompt_digest": None}, "dtype, prompt digest"),
    ],
)
def test_a_report_that_does_not_describe_the_file_names_what_differs(tmp_path, report, named):
    folder = _run(tmp_path / "r", report=report)
    with pytest.raises(BadInput) as e:
        load_run(folder, "REF")
    assert e.value.message == f"REF: report.json does not describe logits.safetensors ({named} differ)"
    assert e.value.where.file == str(folder / "report.json")
    assert e.value.hint == "the logits file was replaced or edited after the run; rerun the smoke"


def test_an_unreadable_report_is_bad_input(tmp_path):
    folder = _run(tmp_path / "r")
    (folder / "report.json").write_text("{not json")
    with pytest.raises(BadInput) as e:
        load_run(folder, "CAND")
    assert e.value.message.startswith(f"CAND: cannot read {folder / 'report.json'}: ")
    assert e.value.where.file == str(folder / "report.json")


@pytest.mark.parametrize("tensor", ["logits.a", "input_ids.b", "attention_mask.a", "positions.b"])
def test_a_missing_tensor_is_named(tmp_path, tensor):
    folder = _run(tmp_path / "r", drop=[tensor])
    with pytest.raises(BadInput) as e:
        load_run(folder, "REF")
    assert e.value.message == f"REF: {folder / 'logits.safetensors'} lacks the tensor {tensor}"
    assert e.value.where.file == str(folder / "logits.safetensors")


# --- check_comparable --------------------------------------------------------------------------


def _pair(tmp_path, ref=None, cand=None):
    return load_run(_run(tmp_path / "ref", **(ref or {})), "REF"), load_run(_run(tmp_path / "cand", **(cand or {})), "CAND")


def test_same_computation_is_comparable(tmp_path):
    ref, cand = _pair(tmp_path, cand={"logits": CAND})
    assert check_comparable(ref, cand) is None


def test_model_digests_that_differ_are_refused(tmp_path):
    ref, cand = _pair(tmp_path, cand={"meta": {"model_digest": "sha256:" + "c" * 64}})
    with pytest.raises(BadInput) as e:
        check_comparable(ref, cand)
    assert e.value.message == "the model digests differ: sha256:aaaaaaaaaaaa... vs sha256:cccccccccccc..."
    assert e.value.hint == "compare runs of the same model"


@pytest.mark.parametrize("cand", [{"meta": {"prompt_digest": "sha256:" + "d" * 64}}, {"logits": {"b": REF["b"], "a": REF["a"]}}])
def test_prompt_sets_that_differ_are_refused(tmp_path, cand):
    if "logits" in cand:  # the same digest, the prompts in another order
        cand = {**cand, "meta": {"prompts": json.dumps(["b", "a"])}}
    ref, other = _pair(tmp_path, cand=cand)
    with pytest.raises(BadInput) as e:
        check_comparable(ref, other)
    assert e.value.message == "the prompt sets differ"
    assert e.value.hint == "compare runs made with the same envkit prompt set"
    assert e.value.details == {"ref": ["a", "b"], "cand": other.prompts}


def test_token_ids_that_differ_are_refused(tmp_path):
    ref, cand = _pair(tmp_path, cand={"meta": {"token_ids": json.dumps({"a": [[7]], "b": [[8, 10]]})}})
    with pytest.raises(BadInput) as e:
        check_comparable(ref, cand)
    assert e.value.message == "the token ids differ (another tokenizer?)"
    assert e.value.hint == "compare runs that tokenised the prompts identically"
    # the same ids written with other spacing are the same ids
    ref, cand = _pair(tmp_path / "2", cand={"meta": {"token_ids": '{"b": [[8,9]], "a": [[7]]}'}})
    check_comparable(ref, cand)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("input_ids", np.array([[0, 5]], dtype=np.int64)),  # other values
        ("attention_mask", np.array([[1, 0]], dtype=np.int64)),
        ("positions", np.array([1], dtype=np.int64)),  # another shape
        ("positions", np.array([0, 1, 2], dtype=np.int64)),
    ],
)
def test_inputs_that_differ_are_named(tmp_path, kind, value):
    ref, cand = _pair(tmp_path, cand={"tensors": {f"{kind}.b": value}})
    with pytest.raises(BadInput) as e:
        check_comparable(ref, cand)
    assert e.value.message == f"the {kind} of prompt 'b' differ between the two files"


def test_logits_of_another_shape_are_refused(tmp_path):
    ref, cand = _pair(tmp_path, cand={"logits": {"a": [[1.0, 0.0, 0.0]], "b": REF["b"]}})
    with pytest.raises(BadInput) as e:
        check_comparable(ref, cand)
    assert e.value.message == "the logits of prompt 'a' have different shapes: (1, 2) vs (1, 3)"


# --- compare_runs: the numbers -----------------------------------------------------------------


def test_metrics_per_prompt_are_the_hand_computed_values(tmp_path, limits):
    cmp = compare_runs(_run(tmp_path / "ref"), _run(tmp_path / "cand", logits=CAND), limits)
    assert [p["name"] for p in cmp.prompts] == ["a", "b"]
    a, b = cmp.prompts
    assert a["positions"] == 1 and b["positions"] == 2
    assert a["max_abs"] == 1.0 and a["mean_abs"] == 1.0 and a["cosine_min"] == 0.0 and a["top1"] == 0.0
    assert a["kl_max"] == pytest.approx(KL_A, rel=1e-9) and a["kl_mean"] == pytest.approx(KL_A, rel=1e-9)
    assert a["ref_absmax"] == 1.0
    assert a["ok"] is False and a["failed"] == ["mean_abs", "cosine_min", "top1"]  # kl 0.462 <= 0.5
    assert b["max_abs"] == 1.0 and b["mean_abs"] == 0.25
    assert b["cosine_min"] == pytest.approx(3 / math.sqrt(10), rel=1e-12)
    assert b["top1"] == 0.5  # a tie reads as the first token: position 1 goes from token 0 to token 1
    assert b["kl_max"] == pytest.approx(KL_B1, rel=1e-9) and b["kl_mean"] == pytest.approx(KL_B1 / 2, rel=1e-9)
    assert b["ref_absmax"] == 4.0
    assert b["ok"] is True and b["failed"] == []
    assert cmp.ok is False and cmp.pair == "fp32/fp32" and cmp.limits.mean_abs == 0.5
    assert cmp.layers is None and cmp.notes == []
    assert cmp.thresholds_path == limits and cmp.thresholds_sha256 == hashlib.sha256(limits.read_bytes()).hexdigest()


def test_mean_abs_failing_alone_is_named(tmp_path, limits):
    cand = {"a": [[1.0, 0.0]], "b": [[3.6, 4.6], [1.6, 1.6]]}  # every logit of b raised by 0.6
    cmp = compare_runs(_run(tmp_path / "ref"), _run(tmp_path / "cand", logits=cand), limits)
    assert [(p["ok"], p["failed"]) for p in cmp.prompts] == [(True, []), (False, ["mean_abs"])]
    assert cmp.prompts[1]["mean_abs"] == pytest.approx(0.6, rel=1e-6)


def test_identical_runs_are_within_thresholds(tmp_path, limits):
    folder = _run(tmp_path / "ref", report={})
    cmp = compare_runs(folder, folder, limits)
    assert cmp.ok is True and all(p["ok"] and p["failed"] == [] for p in cmp.prompts)
    assert [(p["max_abs"], p["mean_abs"], p["top1"], p["kl_max"]) for p in cmp.prompts] == [(0.0, 0.0, 1.0, 0.0)] * 2
    doc = cmp.to_dict()
    assert doc["ok"] is True and doc["model_digest"] == MODEL and doc["prompt_digest"] == PROMPTS
    assert doc["ref"] == {
        "path": str(folder / "logits.safetensors"),
        "device": "cpu",
        "dtype": "fp32",
        "torch": "2.1.0",
        "transformers": "4.40.0",
    }
    assert doc["thresholds"] == {**LIMITS, "layer_rel_max": 0.1} and doc["thresholds_file"] == str(limits)


def test_a_dtype_pair_without_thresholds_is_refused(tmp_path, limits):
    with pytest.raises(BadInput) as e:
        compare_runs(_run(tmp_path / "ref"), _run(tmp_path / "cand", meta={"dtype": "bf16"}), limits)
    assert e.value.message == "the thresholds file has no entry for the dtype pair fp32/bf16"
    assert e.value.where.file == str(limits) and e.value.where.key == "pairs.fp32/bf16"


def test_the_pair_is_looked_up_whichever_side_is_which(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/bf16: " + json.dumps(LIMITS) + "\n")
    cmp = compare_runs(_run(tmp_path / "ref", meta={"dtype": "bf16"}), _run(tmp_path / "cand"), f)
    assert cmp.pair == "fp32/bf16"


# --- compare_runs: layers ----------------------------------------------------------------------

H_REF = np.ones((3, 1, 2))  # embeddings, layer 0, layer 1 + norm over one kept row of two values


def _hidden(layer_1: float, layer_2: float):
    h = H_REF.copy()
    h[1, 0, 0] += layer_1  # the norm of each layer is sqrt(2): rel = |change| / sqrt(2)
    h[2, 0, 0] += layer_2
    return h


def test_the_first_layer_over_its_threshold_is_named_with_its_prompt(tmp_path, limits):
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cand = _run(tmp_path / "cand", hidden={"a": _hidden(0.1, 0.5), "b": _hidden(0.2, 0.0)})
    cmp = compare_runs(ref, cand, limits)
    lay = cmp.layers
    assert lay["names"] == ["embeddings", "layer 0", "layer 1 + norm"] and lay["threshold"] == 0.1
    r = math.sqrt(2)
    assert lay["worst_rel"] == pytest.approx([0.0, 0.2 / r, 0.5 / r], rel=1e-6)
    assert lay["per_prompt"]["a"][1]["rel"] == pytest.approx(0.1 / r, rel=1e-6)
    assert lay["per_prompt"]["b"][1]["max_abs"] == pytest.approx(0.2, rel=1e-6)
    first = lay["first_divergent"]
    assert (first["index"], first["name"], first["prompt"]) == (1, "layer 0", "b")
    assert first["rel"] == pytest.approx(0.2 / r, rel=1e-6)
    assert cmp.ok is False and cmp.prompts[1]["ok"] is True and cmp.notes == []


def test_layers_within_the_threshold(tmp_path, limits):
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cand = _run(tmp_path / "cand", hidden={"a": _hidden(0.1, 0.0), "b": _hidden(0.0, 0.1414)})
    cmp = compare_runs(ref, cand, limits)
    assert cmp.layers["first_divergent"] is None
    assert cmp.ok is True and cmp.layers["worst_rel"][2] == pytest.approx(0.1414 / math.sqrt(2), rel=1e-5)
    same = compare_runs(ref, ref, limits)
    assert same.ok is True and same.layers["worst_rel"] == [0.0, 0.0, 0.0]


def test_without_a_layer_threshold_layers_are_reported_not_judged(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/fp32: " + json.dumps(LIMITS) + "\n")
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cand = _run(tmp_path / "cand", hidden={"a": _hidden(9.0, 9.0), "b": H_REF})
    cmp = compare_runs(ref, cand, f)
    assert cmp.layers["first_divergent"] is None and cmp.layers["threshold"] is None
    assert cmp.notes == ["no layer_rel_max for fp32/fp32: layers are reported, not judged"]
    assert cmp.ok is True  # identical logits, layers not judged


@pytest.mark.parametrize("side", ["ref", "cand"])
def test_hidden_states_on_one_side_only_are_noted(tmp_path, limits, side):
    with_h = {"hidden": {"a": H_REF, "b": H_REF}}
    ref = _run(tmp_path / "ref", **(with_h if side == "ref" else {}))
    cand = _run(tmp_path / "cand", **(with_h if side == "cand" else {}))
    cmp = compare_runs(ref, cand, limits)
    assert cmp.layers is None
    assert cmp.notes == ["only one side has hidden states per layer (--layers): layers not compared"]


def test_hidden_states_for_some_prompts_only_are_noted(tmp_path, limits):
    cmp = compare_runs(_run(tmp_path / "ref", hidden={"b": H_REF}), _run(tmp_path / "cand", hidden={"b": H_REF}), limits)
    assert cmp.layers is None and cmp.notes == ["only one side has hidden states per layer (--layers): layers not compared"]


@pytest.mark.parametrize(
    ("ref_rows", "cand_rows", "cand_hidden"),
    [
        (None, [0], H_REF),  # kept rows on one side only
        ([0], None, H_REF),
        ([0], [1], H_REF),  # other rows
        (None, None, np.ones((3, 2, 2))),  # another shape
    ],
)
def test_hidden_states_kept_differently_are_refused(tmp_path, limits, ref_rows, cand_rows, cand_hidden):
    def rows(r):
        return {} if r is None else {"hidden_rows.b": np.array(r, dtype=np.int64)}

    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF}, tensors=rows(ref_rows))
    cand = _run(tmp_path / "cand", hidden={"a": H_REF, "b": cand_hidden}, tensors=rows(cand_rows))
    with pytest.raises(BadInput) as e:
        compare_runs(ref, cand, limits)
    assert e.value.message == "the hidden states of prompt 'b' were kept at different positions or shapes"


def test_the_same_kept_rows_compare(tmp_path, limits):
    rows = {"hidden_rows.a": np.array([0], dtype=np.int64), "hidden_rows.b": np.array([1], dtype=np.int64)}
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF}, tensors=rows)
    assert compare_runs(ref, ref, limits).layers["first_divergent"] is None


# --- format_table ------------------------------------------------------------------------------


def test_the_table_line_by_line(tmp_path, limits):
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cand = _run(tmp_path / "cand", logits=CAND, hidden={"a": _hidden(0.1, 0.5), "b": _hidden(0.2, 0.0)}, meta={"torch": None})
    lines = format_table(compare_runs(ref, cand, limits))
    assert lines == [
        "ref  cpu fp32 (torch 2.1.0, transformers 4.40.0)",
        "cand cpu fp32 (torch None, transformers 4.40.0)",
        f"thresholds fp32/fp32 ({limits}): max_abs <= 1, mean_abs <= 0.5, cosine >= 0.9, top1 >= 0.5, kl <= 0.5,"
        " layer rel <= 0.1",
        "prompt     pos   max_abs  mean_abs   cos_min   top1    kl_max  verdict",
        "a            1         1         1  0.000000  0.000     0.462  FAIL (mean_abs, cosine_min, top1)",
        "b            2         1      0.25  0.948683  0.500      0.12  ok",
        "layers (worst relative difference): embeddings 0, layer 0 0.141, layer 1 + norm 0.354",
        "first layer over its threshold: layer 0 (rel 0.141 on prompt 'b')",
        "compare: OUTSIDE thresholds",
    ]


def test_the_table_of_a_passing_comparison(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/fp32: " + json.dumps({**LIMITS, "max_abs": 1e-7}) + "\n")
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    lines = format_table(compare_runs(ref, ref, f))
    assert lines[2] == f"thresholds fp32/fp32 ({f}): max_abs <= 1e-07, mean_abs <= 0.5, cosine >= 0.9, top1 >= 0.5, kl <= 0.5"
    assert lines[4:] == [
        "a            1         0         0  1.000000  1.000         0  ok",
        "b            2         0         0  1.000000  1.000         0  ok",
        "layers (worst relative difference): embeddings 0, layer 0 0, layer 1 + norm 0",
        "note: no layer_rel_max for fp32/fp32: layers are reported, not judged",
        "compare: within thresholds",
    ]


def test_the_table_with_layers_under_their_threshold(tmp_path, limits):
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    lines = format_table(compare_runs(ref, ref, limits))
    assert lines[-2:] == ["no layer over its threshold", "compare: within thresholds"]
    assert lines[-3] == "layers (worst relative difference): embeddings 0, layer 0 0, layer 1 + norm 0"


def test_the_table_of_non_finite_logits(tmp_path, limits):
    cand = {"a": [[float("nan"), 0.0]], "b": REF["b"]}
    lines = format_table(compare_runs(_run(tmp_path / "ref"), _run(tmp_path / "cand", logits=cand), limits))
    assert (
        lines[4]
        == "a            1       inf       inf       nan  0.000       inf  FAIL (max_abs, mean_abs, cosine_min, top1, kl_max)"
    )
    assert lines[-1] == "compare: OUTSIDE thresholds"


# --- through the CLI: exit 2, the message on stderr ----------------------------------------------


def test_the_cli_refuses_mismatched_digests_with_exit_2(tmp_path, limits, run_cli):
    ref = _run(tmp_path / "ref")
    cand = _run(tmp_path / "cand", meta={"model_digest": "sha256:" + "c" * 64})
    res = run_cli("compare", str(ref), str(cand), "--thresholds", str(limits))
    assert res.code == 2 and "the model digests differ" in res.err and "Traceback" not in res.err
    res = run_cli("compare", str(ref), str(_run(tmp_path / "c2", logits=CAND)), "--thresholds", str(limits))
    assert res.code == 1 and res.out.splitlines()[-1] == "compare: OUTSIDE thresholds"


def test_the_first_divergent_layer_names_the_prompt_that_diverged_most(tmp_path, limits):
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cand = _run(tmp_path / "cand", hidden={"a": _hidden(0.3, 0.0), "b": _hidden(0.2, 0.0)})
    first = compare_runs(ref, cand, limits).layers["first_divergent"]
    assert (first["index"], first["prompt"]) == (1, "a")


def test_a_layer_exactly_at_its_threshold_passes(tmp_path, limits):
    at = np.array([[[3.0, 4.0]]])  # norm 5; a change of 0.5: rel 0.1, the threshold of `limits`
    ref = _run(tmp_path / "ref", hidden={"a": at, "b": at})
    cand = _run(tmp_path / "cand", hidden={"a": at + np.array([[[0.0, 0.5]]]), "b": at})
    cmp = compare_runs(ref, cand, limits)
    assert cmp.layers["worst_rel"] == [0.1] and cmp.layers["first_divergent"] is None


def test_compare_names_the_side_of_a_missing_run(tmp_path, limits):
    run = _run(tmp_path / "run")
    with pytest.raises(BadInput) as e:
        compare_runs(tmp_path / "nothing", run, limits)
    assert e.value.message == f"REF: no smoke logits file at {tmp_path / 'nothing'}"
    with pytest.raises(BadInput) as e:
        compare_runs(run, tmp_path / "nothing", limits)
    assert e.value.message == f"CAND: no smoke logits file at {tmp_path / 'nothing'}"
    cmp = compare_runs(run, run, limits)
    assert (cmp.ref.label, cmp.cand.label) == ("REF", "CAND")


def test_the_report_carries_the_layers_and_notes(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("schema_version: 1\npairs:\n  fp32/fp32: " + json.dumps(LIMITS) + "\n")
    ref = _run(tmp_path / "ref", hidden={"a": H_REF, "b": H_REF})
    cmp = compare_runs(ref, ref, f)
    doc = cmp.to_dict()
    assert doc["layers"] == cmp.layers and doc["layers"]["names"] == ["embeddings", "layer 0", "layer 1 + norm"]
    assert doc["notes"] == ["no layer_rel_max for fp32/fp32: layers are reported, not judged"]

"""`envkit compare REF CAND`: compare two smoke runs numerically, against thresholds fixed in advance.

Each side is a run directory (with `logits.safetensors`, and `report.json` if present) or a
`logits.safetensors` file. Before any number is computed, the two files must describe the same
computation: same model digest, same prompts, same token ids, inputs and kept positions; and each
file must be consistent with how it was produced (its recorded device type is the type of the device
its parameters were on; its report, when there is one, describes this very file). Otherwise: BadInput.

Per prompt: max and mean absolute difference of the logits, the smallest cosine similarity over
positions, top-1 agreement, and the largest KL(ref || cand) over positions. With hidden states per
layer on both sides: the relative difference per layer, and the first layer that crosses its threshold.

Needs numpy and safetensors only (no torch).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envkit.errors import BadInput, Where
from envkit.io.jsonread import parse_json
from envkit.models.base import ReportModel, StrictModel
from envkit.models.smokerun import LOGITS_FILE, REPORT_FILE, read_logits, read_report

METRICS = ("max_abs", "mean_abs", "cosine_min", "top1", "kl_max")
DTYPE_ORDER = {"fp32": 0, "fp16": 1, "bf16": 2}


class Limits(BaseModel):
    """The thresholds of one dtype pair. `*_min` are lower bounds, the others upper bounds."""

    model_config = ConfigDict(extra="forbid")

    max_abs: float = Field(ge=0)
    mean_abs: float = Field(ge=0)
    cosine_min: float = Field(ge=-1, le=1)
    top1_min: float = Field(ge=0, le=1)
    kl_max: float = Field(ge=0)
    layer_rel_max: float | None = Field(default=None, ge=0)


class ThresholdsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(1, ge=1, le=1)
    pairs: dict[str, Limits]


def pair_key(a: str, b: str) -> str:
    """The key of a dtype pair, the same whichever side is which: fp32 before fp16 before bf16."""
    x, y = sorted((a, b), key=lambda d: (DTYPE_ORDER.get(d, 99), d))
    return f"{x}/{y}"


def default_thresholds_path() -> Path:
    return Path(str(resources.files("envkit").joinpath("data/thresholds.yaml")))


def load_thresholds(path: Path | None) -> tuple[ThresholdsFile, Path, str]:
    path = Path(path) if path else default_thresholds_path()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read the thresholds file: {exc}", where=Where(file=str(path))) from exc
    try:
        data = yaml.safe_load(raw)
        th = ThresholdsFile.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise BadInput(
            f"invalid thresholds file: {str(exc).splitlines()[0]}", where=Where(file=str(path)), details={"error": str(exc)}
        ) from exc
    for key in th.pairs:
        parts = key.split("/")
        if len(parts) != 2 or any(p not in DTYPE_ORDER for p in parts) or pair_key(*parts) != key:
            raise BadInput(
                f"invalid dtype pair '{key}' in the thresholds file",
                where=Where(file=str(path), key=f"pairs.{key}"),
                hint="write pairs as fp32/fp32, fp32/bf16, fp16/bf16, ... (fp32, fp16, bf16 in this order)",
            )
    return th, path, hashlib.sha256(raw).hexdigest()


# --- reading one side --------------------------------------------------------------------------


@dataclass
class Run:
    path: Path  # the logits file
    meta: dict[str, str]
    tensors: dict[str, Any]
    report: dict[str, Any] | None = None
    label: str = ""

    @property
    def prompts(self) -> list[str]:
        return json.loads(self.meta["prompts"])

    @property
    def dtype(self) -> str:
        return self.meta["dtype"]

    def describe(self) -> str:
        return f"{self.meta.get('device')} {self.dtype} (torch {self.meta.get('torch')}, transformers {self.meta.get('transformers')})"


def load_run(arg: str | Path, label: str) -> Run:
    p = Path(arg)
    report_path = None
    if p.is_dir():
        report_path = p / REPORT_FILE if (p / REPORT_FILE).is_file() else None
        p = p / LOGITS_FILE
    if not p.is_file():
        raise BadInput(
            f"{label}: no smoke logits file at {p}",
            hint="pass a run directory written by `envkit smoke --out DIR` or its logits.safetensors",
        )
    meta, tensors = read_logits(p, label)
    run = Run(p, meta, tensors, label=label)
    # the recorded device must be the device the parameters were really on
    recorded, actual = meta["device_type"], meta["param_device"].split(":")[0]
    if recorded != actual or meta["device"].split(":")[0] != recorded:
        raise BadInput(
            f"{label}: {p} records device '{meta['device']}' but its parameters were on '{meta['param_device']}'",
            where=Where(file=str(p)),
            hint="the file was not produced on the device it claims; rerun the smoke on that device",
        )
    for key in ("prompts", "token_ids"):  # envkit's own JSON in the file's metadata, read strictly
        try:
            value = parse_json(meta[key], f"{p} (metadata '{key}')", what="smoke logits file")
        except BadInput as exc:
            raise BadInput(f"{label}: {exc.message}", where=Where(file=str(p), key=key)) from None
        if key == "prompts" and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            raise BadInput(f"{label}: {p}: its metadata 'prompts' is not a list of names", where=Where(file=str(p), key=key))
    if report_path is not None:
        report = _read_report(report_path, label)
        run.report = report
        sha = hashlib.sha256(p.read_bytes()).hexdigest()
        expect = {
            "device": (report.get("device"), meta["device"]),
            "param_device": (report.get("param_device"), meta["param_device"]),
            "dtype": (report.get("dtype"), meta["dtype"]),
            "model digest": ((report.get("model") or {}).get("digest"), meta["model_digest"]),
            "prompt digest": (report.get("prompt_digest"), meta["prompt_digest"]),
            "logits sha256": ((report.get("outputs") or {}).get("logits_sha256"), sha),
        }
        bad = [k for k, (a, b) in expect.items() if a != b]
        if bad:
            raise BadInput(
                f"{label}: report.json does not describe {p.name} ({', '.join(bad)} differ)",
                where=Where(file=str(report_path)),
                hint="the logits file was replaced or edited after the run; rerun the smoke",
            )
    for name in run.prompts:
        for kind in ("logits", "input_ids", "attention_mask", "positions"):
            if f"{kind}.{name}" not in tensors:
                raise BadInput(f"{label}: {p} lacks the tensor {kind}.{name}", where=Where(file=str(p)))
    return run


class _Digest(BaseModel):
    """report.json's `model` (envkit.models.smoke.ModelInfo): its keys only, of their types."""

    model_config = ConfigDict(extra="forbid", strict=True)

    digest: str | None = None
    path: str | None = None
    builtin: bool | None = None
    architecture: str | None = None
    parameters: int | None = None
    layers: int | None = None
    vocab_size: int | None = None
    max_positions: int | None = None


class _Outputs(BaseModel):
    """report.json's `outputs` (envkit.models.smoke.Outputs): its keys only, of their types."""

    model_config = ConfigDict(extra="forbid", strict=True)

    logits_sha256: str | None = None
    report: str | None = None
    logits: str | None = None
    layers: bool | None = None


class _ReportFields(BaseModel):
    """The fields of report.json that `load_run` compares with the logits file: strings (null: none recorded); and
    its verdict, process count and timings (seconds, not negative) of their exact types."""

    model_config = ConfigDict(extra="ignore", strict=True)

    ok: bool | None = None
    nproc: int | None = Field(default=None, ge=1)
    timings: dict[str, Annotated[float, Field(ge=0)]] | None = None
    device: str | None = None
    param_device: str | None = None
    dtype: str | None = None
    model: _Digest | None = None
    prompt_digest: str | None = None
    outputs: _Outputs | None = None


def _read_report(path: Path, label: str) -> dict[str, Any]:
    """A run's report.json read strictly (`envkit.io.jsonread`): an object with a smoke report's keys only, the ones
    compared of their exact types. BadInput naming the side, the file and the key otherwise."""
    from envkit.io.jsonread import checked

    try:
        report = read_report(path)
        checked(report, _ReportFields, path, what="smoke report")
    except BadInput as exc:
        reason = exc.message.removeprefix(f"{path}: ")
        raise BadInput(
            f"{label}: cannot read {path}: {reason}", where=exc.where or Where(file=str(path)), hint=exc.hint
        ) from None
    return report


def check_comparable(ref: Run, cand: Run) -> None:
    """Refuse to compare two files that do not describe the same computation."""
    import numpy as np

    if ref.meta["model_digest"] != cand.meta["model_digest"]:
        raise BadInput(
            f"the model digests differ: {ref.meta['model_digest'][:19]}... vs {cand.meta['model_digest'][:19]}...",
            hint="compare runs of the same model",
        )
    if ref.meta["prompt_digest"] != cand.meta["prompt_digest"] or ref.prompts != cand.prompts:
        raise BadInput(
            "the prompt sets differ",
            hint="compare runs made with the same envkit prompt set",
            details={"ref": ref.prompts, "cand": cand.prompts},
        )
    if json.loads(ref.meta["token_ids"]) != json.loads(cand.meta["token_ids"]):
        raise BadInput("the token ids differ (another tokenizer?)", hint="compare runs that tokenised the prompts identically")
    for name in ref.prompts:
        for kind in ("input_ids", "attention_mask", "positions"):
            a, b = ref.tensors[f"{kind}.{name}"], cand.tensors[f"{kind}.{name}"]
            if a.shape != b.shape or not np.array_equal(a, b):
                raise BadInput(f"the {kind} of prompt '{name}' differ between the two files")
        la, lb = ref.tensors[f"logits.{name}"], cand.tensors[f"logits.{name}"]
        if la.shape != lb.shape:
            raise BadInput(f"the logits of prompt '{name}' have different shapes: {la.shape} vs {lb.shape}")


# --- metrics -----------------------------------------------------------------------------------


def _log_softmax(x):
    import numpy as np

    m = x.max(axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def logits_metrics(ref, cand) -> dict[str, float]:
    """Metrics over positions (rows) of two [N, V] logits arrays."""
    import numpy as np

    a = ref.astype(np.float64)
    b = cand.astype(np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        nan = float("nan")
        return {
            "max_abs": math.inf,
            "mean_abs": math.inf,
            "cosine_min": nan,
            "top1": 0.0,
            "kl_max": math.inf,
            "kl_mean": math.inf,
            "ref_absmax": float(np.nanmax(np.abs(a))),  # not empty: an empty array has nothing non-finite
        }
    d = np.abs(a - b)
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    cos = (a * b).sum(-1) / np.maximum(na * nb, 1e-300)
    lp, lq = _log_softmax(a), _log_softmax(b)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    return {
        "max_abs": float(d.max()),
        "mean_abs": float(d.mean()),
        "cosine_min": float(cos.min()),
        "top1": float((a.argmax(-1) == b.argmax(-1)).mean()),
        "kl_max": float(max(kl.max(), 0.0)),
        "kl_mean": float(max(kl.mean(), 0.0)),
        "ref_absmax": float(np.abs(a).max()),
    }


def violations(m: dict[str, float], lim: Limits) -> list[str]:
    out = []
    if not m["max_abs"] <= lim.max_abs:
        out.append("max_abs")
    if not m["mean_abs"] <= lim.mean_abs:
        out.append("mean_abs")
    if not m["cosine_min"] >= lim.cosine_min:
        out.append("cosine_min")
    if not m["top1"] >= lim.top1_min:
        out.append("top1")
    if not m["kl_max"] <= lim.kl_max:
        out.append("kl_max")
    return out


def layer_names(n: int) -> list[str]:
    """hidden_states[0] is the embedding output; [i] the output of decoder layer i-1 (the last after the final norm)."""
    names = ["embeddings"] + [f"layer {i}" for i in range(n - 1)]
    if n > 1:
        names[-1] += " + norm"
    return names


def layer_metrics(ref, cand) -> list[dict[str, float]]:
    """Per layer of two [L, N, H] arrays: relative Frobenius difference and max abs difference."""
    import numpy as np

    out = []
    for i in range(ref.shape[0]):
        a = ref[i].astype(np.float64)
        b = cand[i].astype(np.float64)
        diff = np.linalg.norm(a - b)
        rel = float(diff / max(np.linalg.norm(a), 1e-300))
        out.append({"rel": rel if np.isfinite(rel) else math.inf, "max_abs": float(np.abs(a - b).max()) if a.size else 0.0})
    return out


@dataclass
class Comparison:
    ref: Run
    cand: Run
    pair: str
    limits: Limits
    thresholds_path: Path
    thresholds_sha256: str
    prompts: list[dict[str, Any]] = field(default_factory=list)
    layers: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        layers_ok = self.layers is None or self.layers.get("first_divergent") is None
        return all(p["ok"] for p in self.prompts) and layers_ok

    def report(self) -> CompareReport:
        return CompareReport(
            ok=self.ok,
            ref=RunInfo.of(self.ref),
            cand=RunInfo.of(self.cand),
            model_digest=self.ref.meta["model_digest"],
            prompt_digest=self.ref.meta["prompt_digest"],
            dtype_pair=self.pair,
            thresholds=self.limits.model_dump(),
            thresholds_file=str(self.thresholds_path),
            thresholds_sha256=self.thresholds_sha256,
            prompts=self.prompts,
            layers=self.layers,
            notes=self.notes,
        )

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document (floats as computed: inf and nan stay what they are)."""
        return self.report().model_dump()


class RunInfo(StrictModel):
    path: str
    device: str
    dtype: str
    torch: str | None = None
    transformers: str | None = None

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        return cls(
            path=str(run.path),
            device=run.meta["device"],
            dtype=run.dtype,
            torch=run.meta.get("torch"),
            transformers=run.meta.get("transformers"),
        )


class CompareReport(ReportModel):
    """What `envkit compare --json` prints: the two runs, the thresholds used, the metrics per prompt and layer."""

    kind = "compare"
    ok: bool
    ref: RunInfo
    cand: RunInfo
    model_digest: str
    prompt_digest: str
    dtype_pair: str
    thresholds: dict[str, float | None]
    thresholds_file: str
    thresholds_sha256: str
    prompts: list[dict[str, Any]]
    layers: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)


def compare_runs(ref_arg: str | Path, cand_arg: str | Path, thresholds: Path | None = None) -> Comparison:
    th, th_path, th_sha = load_thresholds(thresholds)
    ref = load_run(ref_arg, "REF")
    cand = load_run(cand_arg, "CAND")
    check_comparable(ref, cand)
    pair = pair_key(ref.dtype, cand.dtype)
    if pair not in th.pairs:
        raise BadInput(
            f"the thresholds file has no entry for the dtype pair {pair}", where=Where(file=str(th_path), key=f"pairs.{pair}")
        )
    lim = th.pairs[pair]
    cmp = Comparison(ref, cand, pair, lim, th_path, th_sha)
    for name in ref.prompts:
        m = logits_metrics(ref.tensors[f"logits.{name}"], cand.tensors[f"logits.{name}"])
        bad = violations(m, lim)
        cmp.prompts.append(
            {"name": name, "positions": int(ref.tensors[f"logits.{name}"].shape[0]), **m, "ok": not bad, "failed": bad}
        )
    have = [f"hidden.{n}" in ref.tensors and f"hidden.{n}" in cand.tensors for n in ref.prompts]
    if all(have):
        import numpy as np

        for n in ref.prompts:
            ra, rb = ref.tensors.get(f"hidden_rows.{n}"), cand.tensors.get(f"hidden_rows.{n}")
            if (
                (ra is None) != (rb is None)
                or (ra is not None and rb is not None and not np.array_equal(ra, rb))
                or ref.tensors[f"hidden.{n}"].shape != cand.tensors[f"hidden.{n}"].shape
            ):
                raise BadInput(f"the hidden states of prompt '{n}' were kept at different positions or shapes")
        per_prompt = {n: layer_metrics(ref.tensors[f"hidden.{n}"], cand.tensors[f"hidden.{n}"]) for n in ref.prompts}
        n_layers = len(next(iter(per_prompt.values())))
        names = layer_names(n_layers)
        worst = [max(per_prompt[n][i]["rel"] for n in per_prompt) for i in range(n_layers)]
        first = None
        if lim.layer_rel_max is not None:
            for i, w in enumerate(worst):
                if not w <= lim.layer_rel_max:
                    prompt = max(per_prompt, key=lambda n: per_prompt[n][i]["rel"])
                    first = {"index": i, "name": names[i], "rel": w, "prompt": prompt}
                    break
        else:
            cmp.notes.append(f"no layer_rel_max for {pair}: layers are reported, not judged")
        cmp.layers = {
            "names": names,
            "worst_rel": worst,
            "per_prompt": per_prompt,
            "threshold": lim.layer_rel_max,
            "first_divergent": first,
        }
    elif any(f"hidden.{n}" in ref.tensors or f"hidden.{n}" in cand.tensors for n in ref.prompts):
        cmp.notes.append("only one side has hidden states per layer (--layers): layers not compared")
    return cmp


# --- output ------------------------------------------------------------------------------------


def _g(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else str(x)


def format_table(cmp: Comparison) -> list[str]:
    lim = cmp.limits
    lines = [
        f"ref  {cmp.ref.describe()}",
        f"cand {cmp.cand.describe()}",
        f"thresholds {cmp.pair} ({cmp.thresholds_path}): max_abs <= {_g(lim.max_abs)}, mean_abs <= {_g(lim.mean_abs)}, "
        f"cosine >= {lim.cosine_min}, top1 >= {lim.top1_min}, kl <= {_g(lim.kl_max)}"
        + (f", layer rel <= {_g(lim.layer_rel_max)}" if lim.layer_rel_max is not None else ""),
        f"{'prompt':<8} {'pos':>5} {'max_abs':>9} {'mean_abs':>9} {'cos_min':>9} {'top1':>6} {'kl_max':>9}  verdict",
    ]
    for p in cmp.prompts:
        verdict = "ok" if p["ok"] else "FAIL (" + ", ".join(p["failed"]) + ")"
        lines.append(
            f"{p['name']:<8} {p['positions']:>5} {_g(p['max_abs']):>9} {_g(p['mean_abs']):>9} {p['cosine_min']:>9.6f} "
            f"{p['top1']:>6.3f} {_g(p['kl_max']):>9}  {verdict}"
        )
    if cmp.layers:
        worst = ", ".join(f"{n} {_g(w)}" for n, w in zip(cmp.layers["names"], cmp.layers["worst_rel"], strict=True))
        lines.append(f"layers (worst relative difference): {worst}")
        first = cmp.layers["first_divergent"]
        if first:
            lines.append(
                f"first layer over its threshold: {first['name']} (rel {_g(first['rel'])} on prompt '{first['prompt']}')"
            )
        elif cmp.layers["threshold"] is not None:
            lines.append("no layer over its threshold")
    for note in cmp.notes:
        lines.append(f"note: {note}")
    lines.append("compare: within thresholds" if cmp.ok else "compare: OUTSIDE thresholds")
    return lines

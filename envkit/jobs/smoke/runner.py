"""`envkit smoke`: load a model on the requested device (strictly), run the checks, write the outputs.

Outputs in the run directory:
- `report.json`: the SmokeReport (checks, timings, environment, digests);
- `logits.safetensors`: per prompt, fp32 logits at the kept positions, the input ids, attention mask
  and kept positions (and hidden states per layer with `--layers`), plus decoded / generated tokens
  and the training loss. Its metadata records device, dtype, versions, model digest, prompt digest
  and token ids, so `envkit compare` can refuse files that do not describe the same computation.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from envkit import __version__
from envkit.errors import BadInput, CannotRun
from envkit.jobs.smoke import checks as C
from envkit.jobs.smoke.device import (
    DeviceSpec,
    cannot_run,
    exception_text,
    is_npu_failure,
    map_npu_error,
    parse_device,
    require_device,
)
from envkit.jobs.smoke.model import corpus_text, ensure_tiny_model, model_digest
from envkit.jobs.smoke.prompts import prompt_digest, prompt_set
from envkit.models.smoke import Check, Environment, ModelInfo, Outputs, PromptInfo, SmokeReport, Timings
from envkit.models.smokerun import LOGITS_FILE, METADATA_FORMAT, REPORT_FILE, report_text, write_logits

DTYPES = ("bf16", "fp16", "fp32")


@dataclass
class SmokeOptions:
    device: str = "cpu"
    model: Path | None = None
    dtype: str = "fp32"
    out: Path | None = None
    nproc: int = 1
    layers: bool = False
    repeat: int = 10


@dataclass
class SmokeResult:
    report: SmokeReport
    out_dir: Path

    @property
    def exit_code(self) -> int:
        return 0 if self.report.ok else 1


def default_out_dir(spec: DeviceSpec, dtype: str) -> Path:
    return Path(f"envkit-smoke-{str(spec).replace(':', '')}-{dtype}")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def validate(opts: SmokeOptions) -> DeviceSpec:
    spec = parse_device(opts.device)
    if opts.dtype not in DTYPES:
        raise BadInput(f"unknown dtype '{opts.dtype}'", hint="use one of bf16, fp16, fp32")
    if opts.nproc < 1:
        raise BadInput(f"--nproc must be at least 1, not {opts.nproc}")
    if opts.repeat < 1:
        raise BadInput(f"--repeat must be at least 1, not {opts.repeat}")
    if opts.model is not None:
        path = Path(opts.model)
        if not path.is_dir():
            raise BadInput(f"model directory not found: {path}", hint="--model takes a local Transformers checkpoint directory")
        if not (path / "config.json").is_file():
            raise BadInput(f"not a Transformers checkpoint (no config.json): {path}")
    return spec


def _import_transformers(env, requested: str):
    try:
        import transformers
        import transformers.generation  # noqa: F401 - the heavy imports count as import time, not load time
        import transformers.modeling_utils  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - mapped and re-raised as CannotRun
        text = exception_text(exc)
        if is_npu_failure(text):  # transformers 5 imports torch_npu whenever it is installed
            raise cannot_run(map_npu_error(text, env, stage="import transformers"), requested) from exc
        raise CannotRun(f"import transformers failed: {exc}", hint="pip install 'envkit[smoke]'") from exc
    return transformers


def _load_kwargs(transformers, torch_dtype) -> dict[str, Any]:
    from packaging.version import Version

    key = "dtype" if Version(transformers.__version__.split("+")[0]) >= Version("4.56") else "torch_dtype"
    return {key: torch_dtype, "attn_implementation": "eager", "local_files_only": True}


@dataclass
class _Loaded:
    """The model on the device: where it came from, its tokenizer, and how long loading took."""

    model_dir: Path
    builtin: bool
    digest: str
    tokenizer: Any
    model: Any
    load_s: float


def _load_model(opts: SmokeOptions, spec: DeviceSpec, device: Any, transformers: Any, progress: Callable[[str], None]) -> _Loaded:
    """The model (the embedded tiny Qwen2, or --model), in --dtype, on the device, in eval mode; its tokenizer pads on
    the left. A model that cannot be read is BadInput; an NPU failure while loading is CannotRun, mapped."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch = sys.modules["torch"]
    if opts.model is None:  # builtin
        progress("smoke: preparing the embedded tiny Qwen2 model")
        model_dir = ensure_tiny_model()
    else:
        model_dir = Path(opts.model).resolve()
    digest = model_digest(model_dir)
    torch_dtype = getattr(torch, C.TORCH_DTYPES[opts.dtype])

    progress(f"smoke: loading {model_dir.name} ({opts.dtype}) onto {spec}")
    device.synchronize()
    t0 = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(model_dir, **_load_kwargs(transformers, torch_dtype))
    except Exception as exc:  # noqa: BLE001 - sorted into "cannot run here" and "bad model" below
        text = exception_text(exc)
        if is_npu_failure(text):
            # transformers 5 imports torch_npu while loading whenever it is installed
            raise cannot_run(map_npu_error(text, os.environ, stage="load the model"), str(spec)) from exc
        if isinstance(exc, (OSError, ValueError, KeyError, TypeError)):
            raise BadInput(f"cannot load the model at {model_dir}: {exc}") from exc
        raise
    model.to(device.torch_device)
    model.eval()
    device.synchronize()
    load_s = time.perf_counter() - t0
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return _Loaded(model_dir, opts.model is None, digest, tokenizer, model, load_s)


def _environment(spec: DeviceSpec, device: Any, transformers: Any) -> dict[str, Any]:
    """What the report says of the software and the device the run had."""
    torch = sys.modules["torch"]
    return {
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "torch": str(torch.__version__),
        "torch_npu": device.versions.get("torch_npu"),
        "transformers": str(transformers.__version__),
        "accelerate": _version("accelerate"),
        "safetensors": _version("safetensors"),
        "cuda": device.versions.get("cuda"),
        "cann": device.cann,
        "ascend_home_path": os.environ.get("ASCEND_HOME_PATH") if spec.type == "npu" else None,
        "device_name": device.name,
        "device_count": device.count,
        "threads": int(torch.get_num_threads()),
        "notes": list(device.notes),
    }


def _checks(
    ctx: Any, environment: dict[str, Any], opts: SmokeOptions, spec: DeviceSpec, progress: Callable[[str], None]
) -> list[Check]:
    """Every check of the run, in the report's order; a check that raises is a failed check (`C.guarded`)."""
    encoded = ctx.encoded
    progress("smoke: running the checks")
    results: list[Check] = [C.check_environment(environment, ctx.device)]
    results.append(C.guarded("placement", lambda: C.check_placement(ctx)))
    prefill_diffs: dict[str, float] = {}
    for enc in encoded.values():
        results.append(C.guarded(f"forward:{enc.name}", partial(C.check_forward, ctx, enc, prefill_diffs)))
    scale = max([r.data.get("absmax", 0.0) for r in results if r.name.startswith("forward:")] + [1.0])
    results.append(C.guarded("prefill", lambda: C.check_prefill(ctx, prefill_diffs, scale)))
    results.append(C.guarded("padding", lambda: C.check_padding(ctx, encoded["batch"], scale)))
    results.append(C.guarded("decode:en", lambda: C.check_decode(ctx, encoded["en"], scale, timed=True)))
    results.append(C.guarded("decode:batch", lambda: C.check_decode(ctx, encoded["batch"], scale)))
    results.append(C.guarded("generate", lambda: C.check_generate(ctx, encoded["batch"])))
    results.append(C.guarded("train", lambda: C.check_train(ctx, encoded["batch"])))
    if opts.nproc > 1:
        progress(f"smoke: collectives across {opts.nproc} processes")
        results.append(C.guarded("collectives", lambda: check_collectives(spec.type, opts.nproc)))
    return results


def _logits_meta(
    ctx: Any, opts: SmokeOptions, spec: DeviceSpec, loaded: _Loaded, transformers: Any, prompts: list[Any], p_digest: str
) -> dict[str, str]:
    """The logits file's metadata: what `envkit compare` holds two runs to (device, dtype, versions, model, prompts)."""
    torch = sys.modules["torch"]
    device = ctx.device
    return {
        "format": "pt",
        "envkit_format": METADATA_FORMAT,
        "envkit": __version__,
        "device": str(spec),
        "device_type": spec.type,
        "param_device": str(next(loaded.model.parameters()).device),
        "dtype": opts.dtype,
        "torch": str(torch.__version__),
        "torch_npu": str(device.versions.get("torch_npu") or ""),
        "transformers": str(transformers.__version__),
        "cann": str(device.cann or ""),
        "model_digest": loaded.digest,
        "prompt_digest": p_digest,
        "prompts": json.dumps([p.name for p in prompts]),
        "token_ids": json.dumps({name: enc.token_ids() for name, enc in ctx.encoded.items()}, separators=(",", ":")),
        "layers": "1" if opts.layers else "0",
        "num_layers": str(getattr(loaded.model.config, "num_hidden_layers", "")),
    }


def _model_info(loaded: _Loaded, vocab: int, max_pos: int | None) -> ModelInfo:
    config, model = loaded.model.config, loaded.model
    return ModelInfo(
        path=str(loaded.model_dir),
        builtin=loaded.builtin,
        digest=loaded.digest,
        architecture=(getattr(config, "architectures", None) or [type(model).__name__])[0],
        parameters=sum(p.numel() for p in model.parameters()),
        layers=int(getattr(config, "num_hidden_layers", 0) or 0),
        vocab_size=vocab,
        max_positions=max_pos,
    )


def run_smoke(opts: SmokeOptions, progress: Callable[[str], None] = lambda _m: None) -> SmokeResult:
    """One smoke run: the output folder claimed first, the device required, the model loaded, the forward pass
    timed, every check run, then the logits and the report written into the folder together."""
    from envkit.io.outputs import SMOKE, claim_output

    spec = validate(opts)
    out_dir = Path(opts.out) if opts.out else default_out_dir(spec, opts.dtype)
    claim = claim_output(out_dir, SMOKE, inputs=[opts.model])  # before anything runs: an earlier run's, or new
    progress(f"smoke: importing torch for {spec}")
    device = require_device(spec, os.environ)
    torch = sys.modules["torch"]
    if opts.nproc > device.count and spec.type != "cpu":
        raise CannotRun(f"--nproc {opts.nproc} needs {opts.nproc} {spec.type} devices; {device.count} visible")
    t0 = time.perf_counter()
    transformers = _import_transformers(os.environ, str(spec))
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401 - loaded now: part of the import time

    import_s = device.import_s + (time.perf_counter() - t0)
    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:
        pass
    loaded = _load_model(opts, spec, device, transformers, progress)
    model, tokenizer, config = loaded.model, loaded.tokenizer, loaded.model.config

    vocab = (
        int(model.get_output_embeddings().weight.shape[0])
        if model.get_output_embeddings() is not None
        else int(config.vocab_size)
    )
    max_pos = getattr(config, "max_position_embeddings", None)
    prompts = prompt_set(max_pos, corpus_text())
    p_digest = prompt_digest(prompts)
    encoded = {p.name: C.encode(torch, tokenizer, p, vocab) for p in prompts}
    ctx = C.SmokeContext(torch, model, tokenizer, device, opts.dtype, encoded, opts.layers)
    environment = _environment(spec, device, transformers)

    # timings: the first forward (warm-up, compilation), then the steady state
    progress("smoke: timing the forward pass")
    en = encoded["en"]
    fwd_kwargs = dict(ctx.inputs(en), use_cache=False)
    first_forward_s = C.time_forward(model, fwd_kwargs, device, 1)[0]
    steady = C.time_forward(model, fwd_kwargs, device, opts.repeat)
    results = _checks(ctx, environment, opts, spec, progress)

    meta = _logits_meta(ctx, opts, spec, loaded, transformers, prompts, p_digest)
    logits_path = out_dir / LOGITS_FILE
    staged = claim.stage() / LOGITS_FILE  # moved into out_dir with report.json
    write_logits(staged, {k: v.detach().contiguous().numpy() for k, v in ctx.tensors.items()}, meta)
    logits_sha = hashlib.sha256(staged.read_bytes()).hexdigest()

    timings = Timings(
        import_s=import_s,
        model_load_s=loaded.load_s,
        first_forward_s=first_forward_s,
        forward_median_s=C.median(steady),
        forward_runs=len(steady),
        forward_tokens=int(en.attention_mask.sum()),
        decode_tokens_per_s=float(ctx.timings.get("decode_tokens_per_s", 0.0)),
        decode_tokens=int(ctx.timings.get("decode_tokens", 0)),
    )
    report = SmokeReport(
        envkit=__version__,
        device=str(spec),
        device_type=spec.type,
        param_device=meta["param_device"],
        dtype=opts.dtype,
        ok=all(r.ok for r in results),
        environment=Environment(**environment),
        model=_model_info(loaded, vocab, max_pos),
        prompt_digest=p_digest,
        prompts=[
            PromptInfo(
                name=e.name,
                batch=int(e.input_ids.shape[0]),
                tokens=int(e.attention_mask.sum()),
                positions_kept=int(e.positions.shape[0]),
            )
            for e in encoded.values()
        ],
        checks=results,
        timings=timings,
        outputs=Outputs(report=str(out_dir / REPORT_FILE), logits=str(logits_path), logits_sha256=logits_sha, layers=opts.layers),
        nproc=opts.nproc,
    )
    writer = claim.writer()  # this run's files replace an earlier run's (its server.log, serve-model/ too)
    writer.staged(LOGITS_FILE, staged)
    writer.text(REPORT_FILE, report_text(report))
    writer.commit()
    claim.unstage()
    return SmokeResult(report, out_dir)


def check_collectives(device_type: str, nproc: int) -> Check:
    from envkit.executor.dist import run_collectives

    res = run_collectives(device_type, nproc)
    secs = max((r.get("seconds", 0.0) for r in res["ranks"]), default=0.0)
    if res["ok"]:
        figure = f"{res['backend']} all_reduce + all_gather across {nproc} processes verified ({secs * 1e3:.1f} ms)"
    else:
        errs = [r.get("error") for r in res["ranks"] if r.get("error")] + ([res["error"]] if res["error"] else [])
        figure = f"{res['backend']} collectives across {nproc} processes failed: " + "; ".join(errs[:2] or ["wrong results"])
    return Check(name="collectives", ok=bool(res["ok"]), figure=figure, data=res)


def format_check(check: Check) -> str:
    return f"{'ok  ' if check.ok else 'FAIL'}  {check.name:<16} {check.figure}"


def format_report(report: SmokeReport) -> list[str]:
    t = report.timings
    lines = [format_check(c) for c in report.checks]
    lines.append(
        f"time  import {t.import_s:.2f}s, model load {t.model_load_s:.2f}s, first forward {t.first_forward_s * 1e3:.1f} ms, "
        f"forward median {t.forward_median_s * 1e3:.2f} ms over {t.forward_runs} runs, decode {t.decode_tokens_per_s:.1f} tokens/s"
    )
    failed = [c.name for c in report.checks if not c.ok]
    lines.append(
        f"smoke on {report.device} ({report.dtype}): "
        + ("all checks passed" if not failed else f"{len(failed)} check(s) failed: {', '.join(failed)}")
    )
    lines.append(f"wrote {report.outputs.report} and {report.outputs.logits}")
    return lines


# --- the smoke run with the profile -----------------------------------------------------------------


def run_smoke_with_collectives(opts: Any, max_size: int | None = None, progress: Callable[[str], None] = lambda _m: None):
    """`envkit smoke --collectives`: the usual smoke run, then the profile, added to report.json as `collectives`."""
    from envkit.executor.collectives import DEFAULT_MAX_SIZE, human, run_profile, vendor_tools
    from envkit.io.outputs import SMOKE, update_output

    max_size = DEFAULT_MAX_SIZE if max_size is None else max_size
    result = run_smoke(opts, progress=progress)
    progress(f"smoke: collective profile across {opts.nproc} processes, up to {human(max_size)}")
    profile = run_profile(result.report.device_type, opts.nproc, max_size)
    profile["vendor_tools"] = vendor_tools(result.report.device_type, opts.nproc)
    report = result.report.model_copy(update={"collectives": profile, "ok": result.report.ok and profile["ok"]})
    update_output(result.out_dir, SMOKE, {REPORT_FILE: report_text(report)})
    return SmokeResult(report, result.out_dir)

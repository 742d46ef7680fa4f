"""The checks of `envkit smoke`. Each returns a `Check` (name, ok, one figure, the numbers behind it).

Conventions:
- every timed region starts and ends with a device synchronisation; copies to the CPU happen outside;
- the consistency checks run on the same device, so they use a tight per-dtype tolerance scaled by
  the magnitude of the logits (`consistency_tolerance`);
- a check that raises (an operator missing on the device, say) is a failed check, not a crash.
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envkit.jobs.smoke.device import Device
from envkit.jobs.smoke.prompts import Prompt
from envkit.models.smoke import Check

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Same-device consistency (prefill vs no-cache, cached decode vs recomputation, padded vs alone),
# relative to max(1, |logits| max).
CONSISTENCY_TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}
KEEP_ELEMENTS = 16 * 1024 * 1024  # logits kept per prompt (positions x vocab); beyond it, a subset of positions
DECODE_STEPS = 16


def consistency_tolerance(dtype: str, scale: float) -> float:
    return CONSISTENCY_TOL[dtype] * max(1.0, scale)


@dataclass
class Encoded:
    """One prompt's inputs, on the CPU (what is saved) and on the device (what is run)."""

    prompt: Prompt
    input_ids: Any
    attention_mask: Any
    position_ids: Any
    positions: Any  # [N, 2] (row, position) of the kept positions
    on_device: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.prompt.name

    def token_ids(self) -> list[list[int]]:
        ids, mask = self.input_ids.tolist(), self.attention_mask.tolist()
        return [[t for t, m in zip(row, mrow, strict=True) if m] for row, mrow in zip(ids, mask, strict=True)]


def position_ids_for(torch, mask):
    """Positions that skip left padding (what `generate` does), so a padded row equals the row alone."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def kept_positions(torch, mask, vocab: int):
    """Every valid (row, position), or an evenly spaced subset (always with the last) when too many."""
    valid = mask.nonzero(as_tuple=False)
    budget = max(1, KEEP_ELEMENTS // max(1, vocab))
    if valid.shape[0] <= budget:
        return valid
    idx = torch.linspace(0, valid.shape[0] - 1, steps=budget).round().long().unique()
    return valid[idx]


def encode(torch, tokenizer, prompt: Prompt, vocab: int) -> Encoded:
    if prompt.cut_tokens is not None:
        ids = tokenizer(prompt.texts[0], add_special_tokens=False)["input_ids"][: prompt.cut_tokens]
        if len(ids) < prompt.cut_tokens:
            ids = (ids * (prompt.cut_tokens // max(1, len(ids)) + 1))[: prompt.cut_tokens]
        input_ids = torch.tensor([ids], dtype=torch.long)
        mask = torch.ones_like(input_ids)
    else:
        enc = tokenizer(list(prompt.texts), padding=True, return_tensors="pt")
        input_ids = enc["input_ids"].long()
        mask = enc["attention_mask"].long()
    return Encoded(prompt, input_ids, mask, position_ids_for(torch, mask), kept_positions(torch, mask, vocab))


def cache_kwarg(model) -> str:
    """Transformers 5.24+ renamed `past_key_values` to `cache` (the old name warns, then goes in 5.40)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def output_cache(out) -> Any:
    """The cache an output carries: `cache` (Transformers 5.24+) or `past_key_values`."""
    if hasattr(out, "cache"):
        return out.cache
    return getattr(out, "past_key_values", None)


def time_forward(model, kwargs: dict[str, Any], device: Device, runs: int) -> list[float]:
    """Seconds per forward, each between two device synchronisations (no copy to the CPU)."""
    import torch

    times = []
    with torch.no_grad():
        for _ in range(runs):
            device.synchronize()
            t0 = time.perf_counter()
            model(**kwargs)
            device.synchronize()
            times.append(time.perf_counter() - t0)
    return times


def guarded(name: str, fn: Callable[[], Check]) -> Check:
    """Run one check; an exception is a failed check with its message."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a failing operator on the device is a failed check
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Check(name=name, ok=False, figure=f"error: {last[:300]}", data={"error": last})


def _fmt(x: float) -> str:
    return f"{x:.3g}"


@dataclass
class SmokeContext:
    torch: Any
    model: Any
    tokenizer: Any
    device: Device
    dtype: str
    encoded: dict[str, Encoded]
    layers: bool
    tensors: dict[str, Any] = field(default_factory=dict)  # what goes into logits.safetensors
    timings: dict[str, Any] = field(default_factory=dict)
    generated: dict[str, Any] = field(default_factory=dict)

    @property
    def dev(self):
        return self.device.torch_device

    def inputs(self, enc: Encoded) -> dict[str, Any]:
        if not enc.on_device:
            enc.on_device = {
                "input_ids": enc.input_ids.to(self.dev),
                "attention_mask": enc.attention_mask.to(self.dev),
                "position_ids": enc.position_ids.to(self.dev),
            }
        return enc.on_device

    def forward(self, enc: Encoded, **kw):
        with self.torch.no_grad():
            return self.model(**self.inputs(enc), **kw)


# --- the checks --------------------------------------------------------------------------------


def check_environment(env: dict[str, Any], device: Device) -> Check:
    missing = [k for k in ("torch", "transformers") if not env.get(k)]
    problems = [f"{k} not found" for k in missing]
    if device.spec.type == "npu":
        if not env.get("torch_npu"):
            problems.append("torch_npu version unknown")
        if not env.get("cann"):
            problems.append("CANN version unknown (ASCEND_HOME_PATH unset or unreadable)")
    problems += device.notes
    parts = [f"torch {env.get('torch')}"]
    if env.get("torch_npu"):
        parts.append(f"torch_npu {env['torch_npu']}")
    if env.get("cann"):
        parts.append(f"CANN {env['cann']}")
    parts.append(f"transformers {env.get('transformers')}")
    parts.append(f"accelerate {env.get('accelerate')}")
    figure = ", ".join(parts) + f"; {device.spec.type}: {device.name} x{device.count}"
    if problems:
        figure += " -- " + "; ".join(problems)
    return Check(name="environment", ok=not problems, figure=figure, data={"problems": problems})


def check_placement(ctx: SmokeContext) -> Check:
    want = ctx.dev.type
    want_dtype = getattr(ctx.torch, TORCH_DTYPES[ctx.dtype])
    off, wrong_dtype = [], []
    params = buffers = 0
    for name, p in ctx.model.named_parameters():
        params += 1
        if p.device.type != want:
            off.append(f"{name}@{p.device}")
        if p.is_floating_point() and p.dtype != want_dtype:
            wrong_dtype.append(f"{name}:{p.dtype}")
    buffer_names = []
    for name, b in ctx.model.named_buffers():
        buffers += 1
        buffer_names.append(name)
        if b.device.type != want:
            off.append(f"{name}@{b.device}")
    attn = getattr(ctx.model.config, "_attn_implementation", None)
    ok = not off and not wrong_dtype and params > 0 and attn == "eager"
    figure = f"{params} parameters, {buffers} buffers on {ctx.dev}, dtype {ctx.dtype}, attention {attn}"
    if off:
        figure += f" -- {len(off)} off the device: {', '.join(off[:3])}"
    if wrong_dtype:
        figure += f" -- {len(wrong_dtype)} of another dtype: {', '.join(wrong_dtype[:3])}"
    return Check(
        name="placement",
        ok=ok,
        figure=figure,
        data={
            "parameters": params,
            "buffers": buffers,
            "buffer_names": buffer_names[:20],
            "off_device": off[:20],
            "wrong_dtype": wrong_dtype[:20],
            "attn_implementation": attn,
        },
    )


def check_forward(ctx: SmokeContext, enc: Encoded, prefill_diffs: dict[str, float]) -> Check:
    """Forward without cache; record logits (and hidden states); then the prefill with cache must agree."""
    torch = ctx.torch
    out = ctx.forward(enc, use_cache=False, output_hidden_states=ctx.layers)
    logits = out.logits
    b, s = enc.input_ids.shape
    vocab = int(logits.shape[-1])
    valid = ctx.inputs(enc)["attention_mask"].bool()
    problems = []
    if logits.device.type != ctx.dev.type:
        problems.append(f"logits on {logits.device}")
    if tuple(logits.shape[:2]) != (b, s):
        problems.append(f"logits shape {tuple(logits.shape)}")
    if output_cache(out) is not None:
        problems.append("a cache was returned with use_cache=False")
    finite = bool(torch.isfinite(logits[valid]).all())
    if not finite:
        problems.append("non-finite logits")
    absmax = float(logits[valid].abs().max().float())
    pos = enc.positions.to(ctx.dev)
    kept = logits[pos[:, 0], pos[:, 1]]
    hidden = None
    if ctx.layers:
        hs = out.hidden_states
        if hs is None:
            problems.append("no hidden states returned")
        else:
            # at most KEEP_ELEMENTS values: a real model keeps an evenly spaced subset of the rows
            per_row = len(hs) * int(hs[0].shape[-1])
            rows = pos.shape[0]
            budget = max(1, KEEP_ELEMENTS // max(1, per_row))
            hidden_rows = torch.arange(rows) if rows <= budget else torch.linspace(0, rows - 1, budget).round().long().unique()
            hpos = pos[hidden_rows.to(ctx.dev)]
            hidden = torch.stack([h[hpos[:, 0], hpos[:, 1]] for h in hs])
    # prefill with the cache on: the same logits as the no-cache forward
    pre = ctx.forward(enc, use_cache=True)
    pre_diff = float((pre.logits[valid].float() - logits[valid].float()).abs().max())
    if output_cache(pre) is None:
        problems.append("no cache returned by the prefill")
    prefill_diffs[enc.name] = pre_diff
    # outside any timed region: copy to the CPU
    ctx.tensors[f"logits.{enc.name}"] = kept.float().cpu()
    ctx.tensors[f"input_ids.{enc.name}"] = enc.input_ids.clone()
    ctx.tensors[f"attention_mask.{enc.name}"] = enc.attention_mask.clone()
    ctx.tensors[f"positions.{enc.name}"] = enc.positions.clone()
    if hidden is not None:
        ctx.tensors[f"hidden.{enc.name}"] = hidden.float().cpu()
        ctx.tensors[f"hidden_rows.{enc.name}"] = hidden_rows.long().cpu()
    tokens = int(enc.attention_mask.sum())
    return Check(
        name=f"forward:{enc.name}",
        ok=not problems,
        figure=f"{b}x{s} ({tokens} tokens), vocab {vocab}, |logits| max {_fmt(absmax)}"
        + (" -- " + "; ".join(problems) if problems else ""),
        data={"batch": b, "length": s, "tokens": tokens, "absmax": absmax, "finite": finite, "problems": problems},
    )


def check_prefill(ctx: SmokeContext, diffs: dict[str, float], scale: float) -> Check:
    tol = consistency_tolerance(ctx.dtype, scale)
    worst = max(diffs.values()) if diffs else math.inf
    ok = bool(diffs) and worst <= tol
    return Check(
        name="prefill",
        ok=ok,
        figure=f"prefill (use_cache=True) vs no-cache forward: max |diff| {_fmt(worst)} (tol {_fmt(tol)}) over {len(diffs)} prompts",
        data={"max_abs_diff": diffs, "tolerance": tol},
    )


def check_padding(ctx: SmokeContext, enc: Encoded, scale: float) -> Check:
    """Each row of the padded batch equals the same prompt run alone, at its valid positions."""
    torch = ctx.torch
    batch_logits = ctx.forward(enc, use_cache=False).logits
    worst = 0.0
    for row in range(enc.input_ids.shape[0]):
        m = enc.attention_mask[row].bool()
        ids = enc.input_ids[row][m].unsqueeze(0).to(ctx.dev)
        with torch.no_grad():
            alone = ctx.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0]
        worst = max(worst, float((batch_logits[row][m.to(ctx.dev)].float() - alone.float()).abs().max()))
    tol = consistency_tolerance(ctx.dtype, scale)
    return Check(
        name="padding",
        ok=worst <= tol,
        figure=f"left-padded batch rows vs each prompt alone: max |diff| {_fmt(worst)} (tol {_fmt(tol)})",
        data={"max_abs_diff": worst, "tolerance": tol},
    )


def _decode(ctx: SmokeContext, enc: Encoded, steps: int, timed: bool):
    """Greedy decode with the cache; returns (tokens [B, steps] on device, per-step logits, seconds)."""
    torch = ctx.torch
    kw = cache_kwarg(ctx.model)
    inp = ctx.inputs(enc)
    mask = inp["attention_mask"]
    step_logits, tokens = [], []
    with torch.no_grad():
        if timed:
            ctx.device.synchronize()
        t0 = time.perf_counter()
        out = ctx.model(**inp, use_cache=True)
        cache = output_cache(out)
        last = out.logits[:, -1, :]
        pos = inp["position_ids"][:, -1:]
        if timed:
            ctx.device.synchronize()
        t_prefill = time.perf_counter()
        for _ in range(steps):
            nxt = last.argmax(-1, keepdim=True)
            tokens.append(nxt)
            mask = torch.cat([mask, torch.ones_like(nxt)], dim=-1)
            pos = pos + 1
            out = ctx.model(input_ids=nxt, attention_mask=mask, position_ids=pos, use_cache=True, **{kw: cache})
            cache = output_cache(out)
            last = out.logits[:, -1, :]
            step_logits.append(last)
        if timed:
            ctx.device.synchronize()
        t_end = time.perf_counter()
    return torch.cat(tokens, dim=-1), step_logits, t_end - t_prefill, t_prefill - t0


def check_decode(ctx: SmokeContext, enc: Encoded, scale: float, timed: bool = False) -> Check:
    """Cached greedy decode; each step's logits equal a full recomputation without the cache."""
    torch = ctx.torch
    tokens, step_logits, decode_s, _ = _decode(ctx, enc, DECODE_STEPS, timed)
    if timed:
        ctx.timings["decode_tokens"] = DECODE_STEPS * tokens.shape[0]
        ctx.timings["decode_tokens_per_s"] = DECODE_STEPS * tokens.shape[0] / max(decode_s, 1e-12)
    inp = ctx.inputs(enc)
    worst = 0.0
    with torch.no_grad():
        for i in range(DECODE_STEPS):
            ids = torch.cat([inp["input_ids"], tokens[:, : i + 1]], dim=-1)
            mask = torch.cat([inp["attention_mask"], torch.ones_like(tokens[:, : i + 1])], dim=-1)
            full = ctx.model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(torch, mask), use_cache=False)
            worst = max(worst, float((full.logits[:, -1, :].float() - step_logits[i].float()).abs().max()))
    ctx.generated[enc.name] = tokens
    tol = consistency_tolerance(ctx.dtype, scale)
    ctx.tensors[f"decoded.{enc.name}"] = tokens.cpu()
    return Check(
        name=f"decode:{enc.name}",
        ok=worst <= tol,
        figure=f"{DECODE_STEPS} cached steps vs full recomputation: max |diff| {_fmt(worst)} (tol {_fmt(tol)})",
        data={"max_abs_diff": worst, "tolerance": tol, "steps": DECODE_STEPS},
    )


def _until_eos(row: list[int], eos: set[int]) -> list[int]:
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1]
    return row


def check_generate(ctx: SmokeContext, enc: Encoded) -> Check:
    """Greedy `generate` with and without the cache gives the same tokens, and the manual decode's."""
    torch = ctx.torch
    from transformers import GenerationConfig

    pad = ctx.tokenizer.pad_token_id
    if pad is None:
        pad = ctx.tokenizer.eos_token_id
    inp = ctx.inputs(enc)
    outs = {}
    for use_cache in (True, False):
        cfg = GenerationConfig(do_sample=False, max_new_tokens=DECODE_STEPS, pad_token_id=pad, use_cache=use_cache)
        with torch.no_grad():
            seq = ctx.model.generate(input_ids=inp["input_ids"], attention_mask=inp["attention_mask"], generation_config=cfg)
        outs[use_cache] = seq[:, inp["input_ids"].shape[1] :]
    cached, uncached = outs[True].cpu(), outs[False].cpu()
    same = cached.shape == uncached.shape and bool(torch.equal(cached, uncached))
    eos = ctx.model.generation_config.eos_token_id
    eos_set = set(eos if isinstance(eos, list) else ([eos] if eos is not None else []))
    manual = ctx.generated.get(enc.name)
    manual_same = None
    if manual is not None:
        manual = manual.cpu()
        manual_same = all(
            _until_eos(g, eos_set) == m[: len(_until_eos(g, eos_set))]
            for g, m in zip(cached.tolist(), manual.tolist(), strict=True)
        )
    ctx.tensors[f"generated.{enc.name}"] = cached
    ok = same and manual_same is not False
    figure = f"greedy generate {DECODE_STEPS} tokens x{cached.shape[0]}: cache == no cache: {same}"
    if manual_same is not None:
        figure += f"; == manual decode: {manual_same}"
    return Check(
        name="generate",
        ok=ok,
        figure=figure,
        data={"cache_equals_no_cache": same, "equals_manual_decode": manual_same, "tokens": cached.tolist()},
    )


def _dropout_off(model) -> int:
    import torch

    n = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p != 0.0:
            module.p = 0.0
            n += 1
        for attr in ("attention_dropout", "dropout", "hidden_dropout"):
            value = getattr(module, attr, None)
            if isinstance(value, float) and value != 0.0:
                setattr(module, attr, 0.0)
                n += 1
    return n


def check_train(ctx: SmokeContext, enc: Encoded) -> Check:
    """Training mode, dropout off, fixed batch with labels: a finite loss and finite gradients on the device."""
    torch = ctx.torch
    model = ctx.model
    inp = ctx.inputs(enc)
    labels = inp["input_ids"].masked_fill(inp["attention_mask"] == 0, -100)
    changed = _dropout_off(model)
    model.train()
    try:
        model.zero_grad(set_to_none=True)
        out = model(**inp, labels=labels, use_cache=False)
        loss = out.loss
        loss.backward()
        problems = []
        if loss.device.type != ctx.dev.type:
            problems.append(f"loss on {loss.device}")
        if not bool(torch.isfinite(loss)):
            problems.append("non-finite loss")
        missing, off, nonfinite = [], [], []
        sq = torch.zeros((), dtype=torch.float32, device=ctx.dev)
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if p.grad is None:
                missing.append(name)
                continue
            if p.grad.device.type != ctx.dev.type:
                off.append(name)
            if not bool(torch.isfinite(p.grad).all()):
                nonfinite.append(name)
            sq = sq + p.grad.float().pow(2).sum()
        grad_norm = float(sq.sqrt())
        if missing:
            problems.append(f"{len(missing)} parameters without a gradient ({missing[0]})")
        if off:
            problems.append(f"{len(off)} gradients off the device ({off[0]})")
        if nonfinite:
            problems.append(f"{len(nonfinite)} non-finite gradients ({nonfinite[0]})")
        loss_value = float(loss.detach().float())
        ctx.tensors["train.loss"] = loss.detach().float().reshape(1).cpu()
        ctx.tensors["train.grad_norm"] = sq.sqrt().reshape(1).cpu()
    finally:
        model.zero_grad(set_to_none=True)
        model.eval()
    return Check(
        name="train",
        ok=not problems,
        figure=f"loss {loss_value:.6g}, grad norm {grad_norm:.6g}, every gradient finite on {ctx.dev}"
        if not problems
        else f"loss {loss_value:.6g} -- " + "; ".join(problems),
        data={"loss": loss_value, "grad_norm": grad_norm, "dropout_modules_changed": changed, "problems": problems},
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan

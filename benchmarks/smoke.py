#!/usr/bin/env python3
"""Benchmark of `envkit smoke` on cpu: what the harness costs.

1. Harness overhead: the steady-state forward timed by envkit (`checks.time_forward`: device
   synchronisation around each call) against a bare `perf_counter` loop, on the same model and input,
   in the same process, interleaved call by call so that machine noise hits both alike.
   Target: envkit / bare <= 1.05.
2. The whole process: wall time of `python -m envkit -q smoke --device cpu` (the default model) as a
   ratio to `python -c "import torch, transformers"`, medians over --runs.

Usage: python benchmarks/smoke.py [--dtype bf16] [--pairs 400] [--runs 3] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def harness_overhead(dtype: str, pairs: int, warmup: int = 20) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from envkit.jobs.smoke import checks as C
    from envkit.jobs.smoke.device import parse_device, require_device
    from envkit.jobs.smoke.model import corpus_text, ensure_tiny_model
    from envkit.jobs.smoke.prompts import prompt_set

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    device = require_device(parse_device("cpu"))
    path = ensure_tiny_model()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, attn_implementation="eager", dtype=getattr(torch, C.TORCH_DTYPES[dtype])
    ).eval()
    prompt = next(p for p in prompt_set(model.config.max_position_embeddings, corpus_text()) if p.name == "en")
    enc = C.encode(torch, tok, prompt, model.config.vocab_size)
    kwargs = {
        "input_ids": enc.input_ids,
        "attention_mask": enc.attention_mask,
        "position_ids": enc.position_ids,
        "use_cache": False,
    }

    def bare() -> float:
        with torch.no_grad():
            t0 = time.perf_counter()
            model(**kwargs)
            return time.perf_counter() - t0

    for _ in range(warmup):
        bare()
        C.time_forward(model, kwargs, device, 1)
    env_t, bare_t = [], []
    for i in range(pairs):  # alternate the order too
        if i % 2:
            env_t.append(C.time_forward(model, kwargs, device, 1)[0])
            bare_t.append(bare())
        else:
            bare_t.append(bare())
            env_t.append(C.time_forward(model, kwargs, device, 1)[0])
    block = C.time_forward(model, kwargs, device, pairs)  # the runner's own call: k runs in one go
    e, b = statistics.median(env_t), statistics.median(bare_t)
    return {
        "dtype": dtype,
        "pairs": pairs,
        "tokens": int(enc.attention_mask.sum()),
        "envkit_median_ms": e * 1e3,
        "bare_median_ms": b * 1e3,
        "envkit_block_median_ms": statistics.median(block) * 1e3,
        "ratio": e / b,
        "block_ratio": statistics.median(block) / b,
        "threads": torch.get_num_threads(),
    }


def _wall(cmd: list[str], env: dict, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(REPO))
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return out


def whole_process(dtype: str, runs: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as tmp:
        # build the model once so that the runs measure the smoke, not the first build
        _wall(
            [sys.executable, "-m", "envkit", "-q", "smoke", "--device", "cpu", "--dtype", dtype, "--out", f"{tmp}/warm"], env, 1
        )
        base, heavy, smoke = [], [], []
        for i in range(runs):  # interleaved
            base += _wall([sys.executable, "-c", "import torch, transformers"], env, 1)
            # transformers imports lazily: this is what loading any model costs in imports alone
            heavy += _wall([sys.executable, "-c", "import torch, transformers.modeling_utils, transformers.generation"], env, 1)
            smoke += _wall(
                [sys.executable, "-m", "envkit", "-q", "smoke", "--device", "cpu", "--dtype", dtype, "--out", f"{tmp}/run{i}"],
                env,
                1,
            )
        report = json.loads(Path(tmp, "run0", "report.json").read_text())
    b, s = statistics.median(base), statistics.median(smoke)
    h = statistics.median(heavy)
    return {
        "runs": runs,
        "import_torch_transformers_s": b,
        "import_modeling_s": h,
        "smoke_s": s,
        "ratio": s / b,
        "ratio_to_modeling_imports": s / h,
        "smoke_timings": report["timings"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for this process and the children")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    overhead = harness_overhead(args.dtype, args.pairs)
    process = whole_process(args.dtype, args.runs)
    result = {
        "harness_overhead": overhead,
        "whole_process": process,
        "target_overhead_ratio": 1.05,
        "within_target": overhead["ratio"] <= 1.05,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    o, p = overhead, process
    print(f"forward ({o['dtype']}, {o['tokens']} tokens, {o['threads']} threads, {o['pairs']} interleaved pairs):")
    print(f"  envkit time_forward median {o['envkit_median_ms']:.3f} ms, bare loop median {o['bare_median_ms']:.3f} ms")
    print(
        f"  harness overhead ratio {o['ratio']:.3f} (target <= 1.05: {'met' if result['within_target'] else 'NOT met'}); "
        f"envkit's k-run block {o['block_ratio']:.3f}"
    )
    print(
        f"whole process (median of {p['runs']}): envkit smoke --device cpu {p['smoke_s']:.2f} s, "
        f"python -c 'import torch, transformers' {p['import_torch_transformers_s']:.2f} s, ratio {p['ratio']:.2f}"
    )
    print(
        f"  (against 'import torch, transformers.modeling_utils, transformers.generation', {p['import_modeling_s']:.2f} s: "
        f"ratio {p['ratio_to_modeling_imports']:.2f})"
    )
    t = p["smoke_timings"]
    print(
        f"  inside the smoke: import {t['import_s']:.2f} s, model load {t['model_load_s']:.2f} s, "
        f"first forward {t['first_forward_s'] * 1e3:.1f} ms, forward median {t['forward_median_s'] * 1e3:.2f} ms, "
        f"decode {t['decode_tokens_per_s']:.0f} tokens/s"
    )


if __name__ == "__main__":
    main()

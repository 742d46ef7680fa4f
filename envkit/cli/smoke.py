"""`envkit smoke` and `envkit compare`. torch and transformers are imported inside the commands only."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt


def smoke(
    device: Annotated[
        str,
        typer.Option("--device", help="npu, cuda or cpu, optionally :N. Strict: an absent device is exit 2, never a fallback."),
    ],
    model: Annotated[
        Optional[Path],
        typer.Option("--model", help="A local Transformers checkpoint directory (default: the embedded tiny Qwen2)."),
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32.")] = "bf16",
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Where to write report.json and logits.safetensors (default: ./envkit-smoke-DEVICE-DTYPE)."),
    ] = None,
    json_out: JsonOpt = False,
    nproc: Annotated[
        int, typer.Option("--nproc", help="With N > 1, also run all_reduce and all_gather across N local processes.")
    ] = 1,
    layers: Annotated[bool, typer.Option("--layers", help="Also save the hidden states of every layer.")] = False,
    repeat: Annotated[int, typer.Option("--repeat", help="Forward runs for the steady-state median.")] = 10,
    collectives: Annotated[
        bool,
        typer.Option(
            "--collectives",
            help="Also profile all_reduce, all_gather, reduce_scatter, all_to_all(v) across --nproc processes.",
        ),
    ] = False,
    max_size: Annotated[
        str,
        typer.Option("--max-size", help="With --collectives: the largest size (8K to this, x2 steps), e.g. 1MiB, 64M, 1G."),
    ] = "64MiB",
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Also start an OpenAI-compatible server on the device (vllm serve on npu, transformers serve on cpu) and check its answers.",
        ),
    ] = False,
    server: Annotated[str, typer.Option("--server", help="With --serve: auto, vllm or transformers.")] = "auto",
    serve_timeout: Annotated[
        float, typer.Option("--serve-timeout", help="With --serve: seconds to wait for the server to be ready.")
    ] = 300.0,
    serve_tokens: Annotated[int, typer.Option("--serve-tokens", help="With --serve: max_tokens of each request.")] = 32,
) -> None:
    """Run the model on one device and check it: placement, forward, cache, generate, training, collectives.

    Exit 0 when every check passed, 1 when one failed, 2 when it cannot run (device absent, bad input).
    """
    from envkit.jobs.smoke import SmokeRequest, format_smoke
    from envkit.jobs.smoke import smoke as run_job
    from envkit.jobs.smoke.runner import SmokeOptions

    opts = SmokeOptions(device=device, model=model, dtype=dtype, out=out, nproc=nproc, layers=layers, repeat=repeat)
    request = SmokeRequest(
        options=opts,
        collectives=collectives,
        max_size=max_size,
        serve=serve,
        server=server,
        serve_timeout=serve_timeout,
        serve_tokens=serve_tokens,
    )
    result = run_job(request, progress=console.progress)
    if json_out:
        console.emit_json(result.report.model_dump(mode="json"))
    else:
        for line in format_smoke(result.report):
            console.out.print(line, markup=False)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def compare(
    ref: Annotated[
        str,
        typer.Argument(
            help="The reference run: a smoke output directory or its logits.safetensors; or a collective profile (a `smoke --collectives` run, its report.json or a profile JSON)."
        ),
    ],
    cand: Annotated[str, typer.Argument(help="The candidate run, likewise.")],
    thresholds: Annotated[
        Optional[Path],
        typer.Option("--thresholds", help="A thresholds YAML file, fixed before the runs (default: envkit's, per dtype pair)."),
    ] = None,
    json_out: JsonOpt = False,
    html: Annotated[
        Optional[Path], typer.Option("--html", help="Also write a self-contained HTML page with a per-layer chart.")
    ] = None,
) -> None:
    """Compare two smoke runs: per prompt max/mean |diff|, cosine, top-1 agreement, KL; per layer with --layers.

    Exit 0 within the thresholds, 1 outside, 2 bad input (different model, prompts or token ids, or a
    file whose recorded device does not match how it was produced). Two collective profiles compare per
    (op, size): the time ratio against envkit/data/collective_thresholds.yaml (or --thresholds); each slower size is named.
    """
    from envkit.jobs.smoke import CompareRequest, compare_pair

    result = compare_pair(CompareRequest(ref=ref, cand=cand, thresholds=thresholds, html=html))
    if result.html is not None:
        console.progress(f"wrote {result.html}")
    if json_out:
        console.emit_json(result.to_dict())
    else:
        for line in result.format_text():
            console.out.print(line, markup=False)
    if not result.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(
        "smoke",
        epilog=example(
            "envkit smoke --device npu:0 --dtype bf16 --out runs/npu-bf16 --layers",
            "envkit smoke --collectives --device cpu --nproc 4",
        ),
    )(smoke)
    app.command(
        "compare",
        epilog=example(
            "envkit compare runs/cpu-fp32 runs/npu-bf16 --html runs/compare.html", "envkit compare base/ prof/profile.json"
        ),
    )(compare)

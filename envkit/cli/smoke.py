"""`envkit smoke` and `envkit compare`. torch and transformers are imported inside the commands only."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import JsonOpt


def register(app: typer.Typer) -> None:
    @app.command(
        "smoke",
        epilog=example(
            "envkit smoke --device npu:0 --dtype bf16 --out runs/npu-bf16 --layers",
            "envkit smoke --collectives --device cpu --nproc 4",
        ),
    )
    def smoke(
        device: Annotated[
            str,
            typer.Option(
                "--device", help="npu, cuda or cpu, optionally :N. Strict: an absent device is exit 2, never a fallback."
            ),
        ],
        model: Annotated[
            Optional[Path],
            typer.Option("--model", help="A local Transformers checkpoint directory (default: the embedded tiny Qwen2)."),
        ] = None,
        dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32.")] = "bf16",
        out: Annotated[
            Optional[Path],
            typer.Option(
                "--out", help="Where to write report.json and logits.safetensors (default: ./envkit-smoke-DEVICE-DTYPE)."
            ),
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
        from envkit.jobs.smoke.runner import SmokeOptions, format_report, run_smoke

        opts = SmokeOptions(device=device, model=model, dtype=dtype, out=out, nproc=nproc, layers=layers, repeat=repeat)
        if serve:  # the serving options are checked before the smoke run, not after it
            from envkit.jobs.smoke.serving import ServeOptions

            sopts = ServeOptions(engine=server, ready_timeout=serve_timeout, max_tokens=serve_tokens).check()
        if collectives:
            from envkit.executor.collectives import format_table, parse_size
            from envkit.jobs.smoke.runner import run_smoke_with_collectives

            result = run_smoke_with_collectives(opts, parse_size(max_size), progress=console.progress)
        else:
            result = run_smoke(opts, progress=console.progress)
        if serve:
            from envkit.jobs.smoke.serving import add_serve

            result = add_serve(result, sopts, progress=console.progress)
        if json_out:
            console.emit_json(result.report.model_dump(mode="json"))
        else:
            lines = format_report(result.report)
            if result.report.collectives:
                lines = format_table(result.report.collectives) + lines
            for line in lines:
                console.out.print(line, markup=False)
        if result.exit_code:
            raise typer.Exit(result.exit_code)

    @app.command(
        "compare",
        epilog=example(
            "envkit compare runs/cpu-fp32 runs/npu-bf16 --html runs/compare.html", "envkit compare base/ prof/profile.json"
        ),
    )
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
            typer.Option(
                "--thresholds", help="A thresholds YAML file, fixed before the runs (default: envkit's, per dtype pair)."
            ),
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
        from envkit.executor.collectives import is_profile

        if is_profile(ref) or is_profile(cand):  # collective profiles: per-size time ratios, no logits
            from envkit.executor.collectives import compare_profile_files, format_comparison

            prof = compare_profile_files(ref, cand, thresholds)
            if json_out:
                console.emit_json(prof)
            else:
                for line in format_comparison(prof):
                    console.out.print(line, markup=False)
            if not prof["ok"]:
                raise typer.Exit(1)
            return
        from envkit.jobs.smoke.compare import compare_runs, format_table

        cmp = compare_runs(ref, cand, thresholds)
        if html is not None:
            from envkit.io.outputs import atomic_write_text
            from envkit.jobs.smoke.compare_html import render_html

            atomic_write_text(html, render_html(cmp))
            console.progress(f"wrote {html}")
        if json_out:
            console.emit_json(cmp.to_dict())
        else:
            for line in format_table(cmp):
                console.out.print(line, markup=False)
        if not cmp.ok:
            raise typer.Exit(1)

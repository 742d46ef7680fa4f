"""`envkit smoke`: the embedded tiny model, strict device selection, the checks, the report.

    smoke(SmokeRequest(options=SmokeOptions(device="npu:0"), collectives=True)) -> SmokeResult
    compare_pair(CompareRequest(ref="runs/cpu-fp32", cand="runs/npu-bf16")) -> Compared

The run is in `runner`, the server check in `serving`, two runs compared in `compare` (two collective profiles in
`envkit.executor.collectives`). Importing this package loads none of them: each function imports what it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.jobs.smoke.compare import Comparison
    from envkit.jobs.smoke.runner import SmokeOptions, SmokeResult
    from envkit.jobs.smoke.serving import ServeOptions
    from envkit.models.smoke import SmokeReport

__all__ = ["CompareRequest", "Compared", "SmokeRequest", "compare_pair", "format_smoke", "smoke"]


@dataclass(frozen=True)
class SmokeRequest:
    """`envkit smoke`'s options as given: the run's, the collective profile's and the server check's."""

    options: SmokeOptions
    collectives: bool = False
    max_size: str = "64MiB"  # with collectives: the largest size, e.g. 1MiB, 64M, 1G
    serve: bool = False
    server: str = "auto"  # with serve: auto, vllm or transformers
    serve_timeout: float = 300.0
    serve_tokens: int = 32


def smoke(request: SmokeRequest, progress: Callable[[str], None] = lambda _m: None) -> SmokeResult:
    """The serving options checked (before the run, not after it), --max-size read, the smoke run (and the collective
    profile), then the server check. BadInput or CannotRun (exit 2) when it cannot run."""
    from envkit.jobs.smoke.runner import run_smoke, run_smoke_with_collectives

    serve = _serve_options(request) if request.serve else None
    if request.collectives:
        from envkit.executor.collectives import parse_size

        result = run_smoke_with_collectives(request.options, parse_size(request.max_size), progress=progress)
    else:
        result = run_smoke(request.options, progress=progress)
    if serve is not None:
        from envkit.jobs.smoke.serving import add_serve

        result = add_serve(result, serve, progress=progress)
    return result


def _serve_options(request: SmokeRequest) -> ServeOptions:
    """The server check's options, checked (BadInput for a value the serving stage would refuse)."""
    from envkit.jobs.smoke.serving import ServeOptions

    return ServeOptions(engine=request.server, ready_timeout=request.serve_timeout, max_tokens=request.serve_tokens).check()


def format_smoke(report: SmokeReport) -> list[str]:
    """The text report: the collective profile's table first (when there is one), then the checks."""
    from envkit.jobs.smoke.runner import format_report

    lines = format_report(report)
    if report.collectives:
        from envkit.executor.collectives import format_table

        lines = format_table(report.collectives) + lines
    return lines


@dataclass(frozen=True)
class CompareRequest:
    """`envkit compare`'s arguments as given: each side a smoke run (its folder or logits.safetensors) or a collective
    profile (a `smoke --collectives` run, its report.json or a profile JSON)."""

    ref: str
    cand: str
    thresholds: Path | None = None  # default: envkit's, per dtype pair (profiles: collective_thresholds.yaml)
    html: Path | None = None  # two smoke runs: also write the HTML page here


@dataclass(frozen=True)
class Compared:
    """Two smoke runs compared (`runs`) or two collective profiles (`profiles`, the document of
    `compare_profile_files`); `html` is the page written (None: none)."""

    runs: Comparison | None = None
    profiles: dict[str, Any] | None = None
    html: Path | None = None

    @property
    def ok(self) -> bool:
        """Within the thresholds."""
        if self.profiles is not None:
            return bool(self.profiles["ok"])
        assert self.runs is not None
        return self.runs.ok

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        if self.profiles is not None:
            return self.profiles
        assert self.runs is not None
        return self.runs.to_dict()

    def format_text(self) -> list[str]:
        """The text report: a table per prompt (runs) or per (op, size) (profiles)."""
        if self.profiles is not None:
            from envkit.executor.collectives import format_comparison

            return format_comparison(self.profiles)
        from envkit.jobs.smoke.compare import format_table

        assert self.runs is not None
        return format_table(self.runs)


def compare_pair(request: CompareRequest) -> Compared:
    """Compare two collective profiles when either side is one (per-size time ratios, no logits; no HTML page), else
    two smoke runs (and write the HTML page when asked). BadInput (exit 2) for sides that cannot be compared.
    Not named `compare`: importing the module `compare` would set the package's `compare` to it."""
    from envkit.executor.collectives import is_profile

    if is_profile(request.ref) or is_profile(request.cand):
        from envkit.executor.collectives import compare_profile_files

        return Compared(profiles=compare_profile_files(request.ref, request.cand, request.thresholds))
    from envkit.jobs.smoke.compare import compare_runs

    runs = compare_runs(request.ref, request.cand, request.thresholds)
    if request.html is not None:
        from envkit.io.outputs import atomic_write_text
        from envkit.jobs.smoke.compare_html import render_html

        atomic_write_text(request.html, render_html(runs))
    return Compared(runs=runs, html=request.html)

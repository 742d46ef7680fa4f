"""One self-contained HTML page for `envkit compare --html`: the table and a per-layer chart (inline SVG).

No script, no font, no stylesheet or image from the network: the page opens offline.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from envkit.jobs.smoke.compare import Comparison

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em;color:#222;max-width:1000px}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right} th{background:#f4f4f4}
td.name,th.name{text-align:left} tr.fail td{background:#fde8e8} .bad{color:#b00020;font-weight:600}
.ok{color:#0a7c2f;font-weight:600} .meta td{text-align:left;border:none;padding:.1em .8em .1em 0}
svg text{font-size:11px;fill:#333}
"""


def _g(x: float) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) and math.isfinite(x) else escape(str(x))


def layer_chart(layers: dict[str, Any], width: int = 760, height: int = 320) -> str:
    """Relative difference per layer, one line per prompt, log scale, the threshold dashed."""
    names: list[str] = layers["names"]
    per_prompt: dict[str, list[dict[str, float]]] = layers["per_prompt"]
    threshold = layers.get("threshold")
    values = [m["rel"] for series in per_prompt.values() for m in series if math.isfinite(m["rel"]) and m["rel"] > 0]
    if threshold:
        values.append(threshold)
    hi = max(values) if values else 1.0
    lo = min(values) if values else 1e-6
    lo_exp = math.floor(math.log10(lo)) if lo > 0 else -6
    hi_exp = math.ceil(math.log10(hi)) if hi > 0 else 0
    if hi_exp <= lo_exp:
        hi_exp = lo_exp + 1
    floor = 10.0**lo_exp
    left, right, top, bottom = 70, 150, 20, 60
    pw, ph = width - left - right, height - top - bottom
    n = max(1, len(names) - 1)

    def x(i: int) -> float:
        return left + pw * i / n

    def y(v: float) -> float:
        v = max(v, floor) if math.isfinite(v) else 10.0**hi_exp
        return top + ph * (1 - (math.log10(v) - lo_exp) / (hi_exp - lo_exp))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="relative difference per layer">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>',
    ]
    for e in range(lo_exp, hi_exp + 1):
        yy = y(10.0**e)
        parts.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#e2e2e2"/>')
        parts.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">1e{e}</text>')
    for i, name in enumerate(names):
        parts.append(f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="middle">{escape(name)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 12}" text-anchor="middle">hidden state</text>')
    parts.append(
        f'<text x="14" y="{top + ph / 2:.1f}" transform="rotate(-90 14 {top + ph / 2:.1f})" '
        f'text-anchor="middle">||ref - cand|| / ||ref||</text>'
    )
    if threshold:
        ty = y(threshold)
        parts.append(f'<line x1="{left}" y1="{ty:.1f}" x2="{left + pw}" y2="{ty:.1f}" stroke="#b00020" stroke-dasharray="6 4"/>')
        parts.append(
            f'<text x="{left + pw - 4}" y="{ty - 5:.1f}" text-anchor="end" fill="#b00020">threshold {_g(threshold)}</text>'
        )
    for k, (prompt, series) in enumerate(per_prompt.items()):
        color = _COLORS[k % len(_COLORS)]
        pts = " ".join(f"{x(i):.1f},{y(m['rel']):.1f}" for i, m in enumerate(series))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        for i, m in enumerate(series):
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(m["rel"]):.1f}" r="3" fill="{color}">'
                f"<title>{escape(prompt)} {escape(names[i])}: {_g(m['rel'])}</title></circle>"
            )
        ly = top + 14 + 16 * k
        parts.append(
            f'<line x1="{left + pw + 8}" y1="{ly - 4}" x2="{left + pw + 28}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>'
        )
        parts.append(f'<text x="{left + pw + 32}" y="{ly}">{escape(prompt)}</text>')
    first = layers.get("first_divergent")
    if first:
        fx = x(first["index"])
        parts.append(f'<line x1="{fx:.1f}" y1="{top}" x2="{fx:.1f}" y2="{top + ph}" stroke="#b00020" stroke-width="1.5"/>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(cmp: Comparison) -> str:
    d = cmp.to_dict()
    lim = cmp.limits
    rows = []
    for p in cmp.prompts:
        verdict = '<span class="ok">ok</span>' if p["ok"] else f'<span class="bad">FAIL: {escape(", ".join(p["failed"]))}</span>'
        cls = "" if p["ok"] else ' class="fail"'
        cells = "".join(
            f"<td{' class=bad' if key in p['failed'] else ''}>{_g(p[key]) if key not in ('cosine_min', 'top1') else f'{p[key]:.6f}'}</td>"
            for key in ("max_abs", "mean_abs", "cosine_min", "top1", "kl_max")
        )
        rows.append(
            f'<tr{cls}><td class="name">{escape(p["name"])}</td><td>{p["positions"]}</td>{cells}<td class="name">{verdict}</td></tr>'
        )
    limits_row = (
        f'<tr><td class="name"><i>threshold</i></td><td></td><td>&le; {_g(lim.max_abs)}</td><td>&le; {_g(lim.mean_abs)}</td>'
        f"<td>&ge; {lim.cosine_min}</td><td>&ge; {lim.top1_min}</td><td>&le; {_g(lim.kl_max)}</td><td></td></tr>"
    )
    verdict = '<p class="ok">Within thresholds.</p>' if cmp.ok else '<p class="bad">Outside thresholds.</p>'
    layers_html = "<p>No hidden states per layer on both sides (run the smoke with <code>--layers</code>).</p>"
    if cmp.layers:
        first = cmp.layers["first_divergent"]
        msg = (
            f'<p class="bad">First layer over its threshold: {escape(first["name"])} '
            f"(relative difference {_g(first['rel'])} on prompt {escape(first['prompt'])}).</p>"
            if first
            else "<p>No layer over its threshold.</p>"
            if cmp.layers["threshold"] is not None
            else "<p>No layer threshold for this pair.</p>"
        )
        layers_html = msg + layer_chart(cmp.layers)
    notes = "".join(f"<li>{escape(n)}</li>" for n in cmp.notes)
    meta = "".join(
        f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>"
        for k, v in (
            (
                "reference",
                f"{d['ref']['device']} {d['ref']['dtype']}, torch {d['ref']['torch']}, transformers {d['ref']['transformers']} — {d['ref']['path']}",
            ),
            (
                "candidate",
                f"{d['cand']['device']} {d['cand']['dtype']}, torch {d['cand']['torch']}, transformers {d['cand']['transformers']} — {d['cand']['path']}",
            ),
            ("model digest", d["model_digest"]),
            ("prompt digest", d["prompt_digest"]),
            ("thresholds", f"{d['dtype_pair']} from {d['thresholds_file']} (sha256 {d['thresholds_sha256'][:16]}…)"),
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>envkit compare: {escape(d["ref"]["device"])} vs {escape(d["cand"]["device"])}</title>
<style>{_CSS}</style></head>
<body>
<h1>envkit compare</h1>
<table class="meta">{meta}</table>
{verdict}
<h2>Logits per prompt</h2>
<table><tr><th class="name">prompt</th><th>positions</th><th>max |diff|</th><th>mean |diff|</th><th>min cosine</th><th>top-1 agreement</th><th>max KL</th><th class="name">verdict</th></tr>
{limits_row}
{"".join(rows)}
</table>
<h2>Divergence per layer</h2>
{layers_html}
{f"<ul>{notes}</ul>" if notes else ""}
</body></html>
"""

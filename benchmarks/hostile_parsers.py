#!/usr/bin/env python3
"""The untrusted parsers on their worst inputs, against a benign input of the same size read in the same run (#35).

  JSON, a key given twice last of 200,000     (envkit.io.jsonread: every index answer and PyPI document)
  an index page of unclosed `<a href="`, `<a `, `<!--`, `<![`   (envkit.artifacts.index, 600 kB each)

Each hostile input's time is printed beside the benign one's and their ratio: a linear reader keeps the ratio near 1
(a few times at most: the hostile inputs are denser in what the reader looks at), a quadratic one grows it with the
size (html.parser took minutes on the unclosed-quote page; the old duplicate-key search, hours on 16 MiB). With
--reference the same pages also go through Python's html.parser, bounded by --reference-size (it is quadratic). A
benchmark reports: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envkit.artifacts.index import _anchors  # noqa: E402
from envkit.errors import BadInput  # noqa: E402
from envkit.io.jsonread import parse_json  # noqa: E402


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def json_inputs(keys: int) -> tuple[str, str]:
    body = ",".join(f'"k{i:07d}":0' for i in range(keys - 1))
    benign = "{" + body + f',"k{keys:07d}":0' + "}"
    hostile = "{" + body + ',"k0000000":0' + "}"  # the first key again, last: the old search was quadratic in it
    return benign, hostile


def page_inputs(size: int) -> dict[str, str]:
    row = '<a href="../../f/pkg-1.0-py3-none-any.whl#sha256=' + "ab" * 32 + '">pkg-1.0-py3-none-any.whl</a><br/>\n'
    benign = (row * (size // len(row) + 1))[:size]
    return {
        "benign": benign,
        'unclosed <a href="': ('<a href="' * (size // 9 + 1))[:size],
        "unclosed <a ": ("<a " * (size // 3 + 1))[:size],
        "unclosed <!--": ("<!--" * (size // 4 + 1))[:size],
        "<![ repeated": ("<![ x" * (size // 5 + 1))[:size],
    }


def json_read(text: str) -> None:
    try:
        parse_json(text, "bench.json")
    except BadInput:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--page-size", type=int, default=600_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time Python's html.parser (quadratic: small sizes)")
    ap.add_argument("--reference-size", type=int, default=20_000)
    args = ap.parse_args()

    benign, hostile = json_inputs(args.keys)
    tb, th = best_of(args.runs, lambda: json_read(benign)), best_of(args.runs, lambda: json_read(hostile))
    print(f"JSON, {args.keys} keys ({len(benign) / 1e6:.1f} MB)")
    print(f"  distinct keys           {tb:8.3f} s")
    print(f"  the first key again     {th:8.3f} s   ratio {th / tb:5.2f}x")
    print(json.dumps({"json": {"benign_s": round(tb, 4), "hostile_s": round(th, 4), "ratio": round(th / tb, 2)}}))

    pages = page_inputs(args.page_size)
    base = best_of(args.runs, lambda: _anchors(pages["benign"]))
    print(f"index page, {args.page_size / 1e3:.0f} kB (envkit.artifacts.index)")
    print(f"  benign (anchors)        {base:8.3f} s")
    figures = {}
    for name, page in pages.items():
        if name == "benign":
            continue
        t = best_of(args.runs, lambda page=page: _anchors(page))
        figures[name] = round(t / base, 2)
        print(f"  {name:<24}{t:8.3f} s   ratio {t / base:5.2f}x")
    print(json.dumps({"page": figures}))

    if args.reference:
        from html.parser import HTMLParser

        small = page_inputs(args.reference_size)
        print(f"Python's html.parser, {args.reference_size / 1e3:.0f} kB (for comparison; quadratic on unclosed tags)")

        def feed(text: str) -> None:
            p = HTMLParser(convert_charrefs=True)
            try:
                p.feed(text)
                p.close()
            except Exception:  # noqa: BLE001 - `<![` raises in some Pythons
                pass

        ref = best_of(1, lambda: feed(small["benign"]))
        for name, page in small.items():
            t = best_of(1, lambda page=page: feed(page))
            print(f"  {name:<24}{t:8.3f} s   ratio {t / ref:7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

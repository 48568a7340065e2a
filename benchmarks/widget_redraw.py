"""Slider redraw of the threshold and λ views (``CompositeView``, ``MMRView``) on N questions: the
Python side of one change — the view's text and its picture — with the inline SVG the views draw
now vs the PNG of the matplotlib figure they drew before, taking turns on the same runs.

Usage: .venv/bin/python benchmarks/widget_redraw.py [N_QUESTIONS] [CHANGES]

N HotpotQA questions (default 100) are asked once on their documents; on each run's two views,
CHANGES slider values (default 5) are set one after the other, timed with the SVG picture and with
the previous PNG (``figure_png`` of ``plot_composite_scores`` / ``plot_mmr`` at 80 dpi). Prints p50 /
p95 / max per view and picture, and the headline

``widget redraw: threshold p50 X ms, λ p50 Y ms (SVG); PNG A / B ms (goal ≤ 200 ms)``

The browser's share (sending the picture and drawing it) is measured by
``tests/lab/test_lab_jupyterlab_browser.py`` (``reports/browser/widget-latency.json``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _png_update(view: Any, kind: str, value: float) -> None:
    """The previous redraw: the same text, and the matplotlib figure rasterised to PNG."""
    from rag_lab.lab.plots import figure_png, plot_composite_scores, plot_mmr

    view.update(value)  # the text (its SVG picture too, ~1 ms: the PNG is drawn on top of it)
    fig = plot_composite_scores(view.capture, value) if kind == "threshold" else plot_mmr(view.capture, lam=value)
    figure_png(fig, dpi=80)


def main() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    changes = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.lab import Lab
    from rag_lab.lab.widgets import CompositeView, MMRView

    ds = load_dataset("hotpotqa_hipporag100").subset(n, max_docs=max(200, 3 * n))
    lab = Lab.from_config(workspace=Path(tempfile.mkdtemp(prefix="widget_redraw_")))
    lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb="w", progress=False)
    runs = [lab.ask(q.question, kb="w", snapshots=True) for q in ds.queries]
    times: dict[tuple[str, str], list[float]] = {(v, p): [] for v in ("threshold", "λ") for p in ("svg", "png")}
    thresholds = [0.1 + 0.8 * i / max(1, changes - 1) for i in range(changes)]
    lambdas = [i / max(1, changes - 1) for i in range(changes)]
    views = 0
    for run in runs:
        pairs: list[tuple[str, Any, list[float]]] = [("threshold", CompositeView(run), thresholds)]
        try:
            pairs.append(("λ", MMRView(run), lambdas))
        except ValueError:  # no candidate passed the threshold: the run has no MMR view
            pass
        for kind, view, values in pairs:
            views += 1
            for value in values:
                t0 = time.perf_counter()
                view.update(value)
                svg_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                _png_update(view, "threshold" if kind == "threshold" else "λ", value)
                png_s = time.perf_counter() - t0
                times[(kind, "svg")].append(svg_s * 1000)
                times[(kind, "png")].append(png_s * 1000)
    print(f"{len(runs)} HotpotQA questions, {views} views, {changes} changes each")
    for (kind, pic), xs in times.items():
        print(
            f"  {kind:<9} {pic}: p50 {statistics.median(xs):7.1f} ms  p95 {_pct(xs, 0.95):7.1f}  max {max(xs):7.1f}"
            f"  ({len(xs)} changes)"
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"widget redraw: threshold p50 {med[('threshold', 'svg')]:.1f} ms, λ p50 {med[('λ', 'svg')]:.1f} ms (SVG); "
        f"PNG {med[('threshold', 'png')]:.0f} / {med[('λ', 'png')]:.0f} ms (goal ≤ 200 ms)"
    )


if __name__ == "__main__":
    main()

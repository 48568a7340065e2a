"""The report's figures as PNG bytes, drawn on matplotlib's Agg canvas (no pyplot): retrieval
metrics vs k with the per-query nDCG histogram, and the ragas means with their NaN counts."""

from __future__ import annotations

import io
import math
from typing import Any

from rag_lab.eval.report.model import SuiteResult


def _figure(width: float = 7.0, height: float = 3.6) -> Any:
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def plot_png(suite: SuiteResult) -> bytes:
    """Retrieval metrics vs k, and the per-query nDCG distribution, as one PNG."""
    fig = _figure(9.0, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    s = suite.summary()
    ks = list(suite.retrieval.ks)
    for prefix in ("recall", "precision", "hit", "ndcg"):
        ax1.plot(ks, [s[f"{prefix}@{k}"] for k in ks], marker="o", label=prefix)
    ax1.set_xlabel("k")
    ax1.set_ylim(0, 1.02)
    ax1.set_title(f"{suite.name}: metrics@k")
    ax1.legend(fontsize=8)
    kmax = max(ks)
    vals = [float(r[f"ndcg@{kmax}"]) for r in suite.retrieval.rows]
    ax2.hist(vals, bins=[i / 10 for i in range(11)], color="#4477aa")
    ax2.set_xlabel(f"nDCG@{kmax} per query")
    ax2.set_ylabel("queries")
    ax2.set_title(f"{len(vals)} queries")
    return _png(fig)


def plot_ragas_png(suite: SuiteResult) -> bytes | None:
    """ragas means as bars, annotated with NaN / failed counts."""
    if suite.ragas is None or not suite.ragas.metrics:
        return None
    fig = _figure(8.0, 3.2)
    ax = fig.subplots()
    summ, counts = suite.ragas.summary(), suite.ragas.counts()
    names = suite.ragas.metrics
    means = [summ[m] if math.isfinite(summ[m]) else 0.0 for m in names]
    ax.bar(range(len(names)), means, color="#66aa55")
    for i, m in enumerate(names):
        c = counts[m]
        bad = c["n_nan"] + c["n_failed"]
        label = f"{summ[m]:.3f}" if math.isfinite(summ[m]) else "NaN"
        if bad:
            label += f"\n{bad}/{c['n']} NaN"
        ax.text(i, means[i] + 0.02, label, ha="center", fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.2)
    ax.set_title(f"{suite.name}: ragas metrics (mean over valid samples)")
    return _png(fig)


#: line colours of the calibration plot's suggested thresholds
_SUGGESTION_COLOURS = ("#000000", "#cc3311", "#228833", "#aa3377", "#ee7733")


def calibration_png(cal: Any) -> bytes:
    """A threshold calibration (:class:`rag_lab.eval.calibration.Calibration`): the raw model
    scores of gold and other candidates (histograms, left) and precision / recall / F1 against
    the threshold (right), each suggested threshold as a vertical line on both."""
    fig = _figure(10.0, 3.6)
    ax1, ax2 = fig.subplots(1, 2)
    gold, other = list(cal.gold_scores), list(cal.other_scores)
    both = gold + other
    if both:
        lo, hi = min(both), max(both)
        bins = [lo + (hi - lo) * i / 30 for i in range(31)] if hi > lo else 10
        for vals, colour, label in ((other, "#999999", "other"), (gold, "#4477aa", "gold")):
            if vals:
                ax1.hist(vals, bins=bins, color=colour, alpha=0.7, label=f"{label} ({len(vals)})", density=True)
    c = cal.curve
    if c.get("threshold"):
        ax2.plot(c["threshold"], c["precision"], color="#4477aa", label="precision")
        ax2.plot(c["threshold"], c["recall"], color="#66ccee", label="recall")
        ax2.plot(c["threshold"], c["f1"], color="#ccbb44", label="F1")
    for i, s in enumerate(x for x in cal.suggestions if x.get("threshold") is not None):
        colour = _SUGGESTION_COLOURS[i % len(_SUGGESTION_COLOURS)]
        for ax in (ax1, ax2):
            ax.axvline(
                s["threshold"], color=colour, linestyle="--", linewidth=1.2, label=f"{s['name']} {s['threshold']:.3f}"
            )
    ax1.set_xlabel(f"raw model score ({cal.model_id})")
    ax1.set_ylabel("density")
    ax1.set_title(f"{cal.suite}: gold vs other candidates")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("rerank_threshold (kept: score >= threshold)")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("candidates kept: precision / recall / F1")
    ax2.legend(fontsize=7)
    return _png(fig)

"""The evaluation's figures, drawn on matplotlib's Agg canvas (no pyplot): the report's retrieval
metrics vs k with the per-query nDCG histogram and its ragas means with their NaN counts (PNG
bytes), a threshold calibration (PNG bytes), and a sweep's metric-vs-parameter and Pareto plots
(PNG files)."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rag_lab.eval.calibration import Calibration
    from rag_lab.eval.report.model import SuiteResult
    from rag_lab.eval.sweep.outputs import SweepResult

__all__ = ["calibration_png", "plot_metric_vs_param", "plot_pareto", "plot_png", "plot_ragas_png"]


def _figure(width: float = 7.0, height: float = 3.6) -> Figure:
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
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


def calibration_png(cal: Calibration) -> bytes:
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


def plot_metric_vs_param(result: SweepResult, path: str | Path, metric: str | None = None) -> Path:
    """One panel per parameter: the metric of every config (dots) and its mean per value (line)."""
    m = metric or result.objective
    names = result.param_names or ["config_index"]
    fig = _figure(4.2 * len(names), 3.4)
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        xs = [r[name] for r in result.rows if math.isfinite(r.get(m, math.nan))]
        ys = [r[m] for r in result.rows if math.isfinite(r.get(m, math.nan))]
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
        labels = sorted(set(xs), key=lambda v: (str(type(v)), v)) if not numeric else None
        order = labels or []

        def pos(v: object) -> Any:
            return v if numeric else order.index(v)  # noqa: B023 (called within this iteration)

        ax.scatter([pos(x) for x in xs], ys, s=14, alpha=0.5, color="#4477aa")
        means: dict[object, list[float]] = {}
        for x, y in zip(xs, ys):
            means.setdefault(x, []).append(y)
        keys = sorted(means, key=lambda v: pos(v))
        ax.plot(
            [pos(k) for k in keys],
            [sum(means[k]) / len(means[k]) for k in keys],
            color="#cc3311",
            marker="o",
            label="mean over other params",
        )
        if not numeric and labels is not None:
            ax.set_xticks(range(len(labels)), [str(v) for v in labels])
        ax.set_xlabel(name)
        ax.set_ylabel(m)
        ax.legend(fontsize=7)
    fig.suptitle(f"{m} vs parameter ({len(result.rows)} configs)")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format="png", bbox_inches="tight")
    return p


def plot_pareto(result: SweepResult, path: str | Path, quality: str | None = None, cost: str = "latency_ms") -> Path:
    """Quality vs latency for every config, the Pareto front joined, the best config marked."""
    q = quality or result.objective
    fig = _figure(6.0, 4.2)
    ax = fig.subplots()
    pts = [r for r in result.rows if math.isfinite(r.get(q, math.nan)) and math.isfinite(r.get(cost, math.nan))]
    ax.scatter([r[cost] for r in pts], [r[q] for r in pts], s=16, color="#999999", label="configs")
    front = result.pareto_front(q, cost)
    ax.plot([r[cost] for r in front], [r[q] for r in front], color="#cc3311", marker="o", label="Pareto front")
    if q == result.objective and pts:
        b = result.best()
        ax.scatter([b[cost]], [b[q]], s=90, facecolors="none", edgecolors="black", label="best")
    ax.set_xlabel(f"{cost} (mean per question, as run)")
    ax.set_ylabel(q)
    ax.set_title(f"{q} vs {cost}")
    ax.legend(fontsize=8)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format="png", bbox_inches="tight")
    return p

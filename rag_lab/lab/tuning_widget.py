"""Live tuning: sliders for the main post-retrieval knobs over a captured dataset slice.

:class:`TuningPanel` captures the questions once (:mod:`rag_lab.tuning.capture`), then every
slider change is evaluated by :class:`rag_lab.tuning.FastEvaluator` — no event pipeline, no model —
and the metric table and the metric-vs-parameter plot redraw while the hand is still on the slider
(``continuous_update``). The plot shows the metric along the parameter being moved, the other
sliders held; that curve is computed once per position of the others and cached, so moving one
slider redraws a marker on a known curve. :meth:`TuningPanel.best_yaml` gives the best config seen
so far (by the first metric) as a ``params:`` YAML that ``PipelineParams.from_yaml`` loads.

Scoring is passed in (``score``: final contexts per question → metrics); :func:`tuning_panel`
builds a panel on a dataset with the evaluation's retrieval metrics (:mod:`rag_lab.eval` sits
below the drawing layer and supplies the captures and the metrics).
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from rag_lab.tuning import FastEvaluator, QuestionInputs, doc_ids
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.lab.lab import Lab

__all__ = ["DEFAULT_KNOBS", "Knob", "TuningPanel", "svg_line_plot", "tuning_panel"]

#: score(final doc ids per question id) -> {metric: value}
ScoreFn = Callable[[Mapping[str, list[str]]], Mapping[str, float]]


class Knob:
    """One slider: a PipelineParams field, its range and step."""

    def __init__(self, name: str, low: float, high: float, step: float, integer: bool = False) -> None:
        self.name, self.low, self.high, self.step, self.integer = name, low, high, step, integer

    def values(self, points: int = 9) -> list[float]:
        """The plot's grid along this knob: ``points`` values from low to high on the step."""
        raw = np.linspace(self.low, self.high, points)
        snapped = sorted({round(round((v - self.low) / self.step) * self.step + self.low, 10) for v in raw})
        return [int(v) for v in snapped] if self.integer else snapped


DEFAULT_KNOBS: tuple[Knob, ...] = (
    Knob("rerank_threshold", 0.0, 1.0, 0.05),
    Knob("mmr_lambda", 0.0, 1.0, 0.05),
    Knob("rerank_top_k", 1, 30, 1, integer=True),
    Knob("composite_model_weight", 0.0, 1.0, 0.05),
    Knob("composite_base_weight", 0.0, 1.0, 0.05),
    Knob("overlap_threshold", 0.5, 1.0, 0.05),
)


def _widgets() -> ModuleType:
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the tuning panel needs ipywidgets: pip install 'ipywidgets>=8.1'") from exc
    module: ModuleType = ipywidgets  # ipywidgets has no type information
    return module


class TuningPanel:
    """Sliders, a metric table and a metric-vs-parameter plot over captured questions.

    ``inputs``: captured questions (:func:`rag_lab.tuning.capture.acapture_questions`) under
    ``base`` params; ``score``: metrics of the final documents per question; ``knobs``: the sliders
    (post-retrieval params only). Displaying the panel displays its ipywidgets box; :meth:`set`
    moves a slider from code exactly as the hand does."""

    def __init__(
        self,
        inputs: Sequence[QuestionInputs],
        base: PipelineParams,
        score: ScoreFn,
        knobs: Sequence[Knob] = DEFAULT_KNOBS,
        points: int = 9,
    ) -> None:
        W = _widgets()
        self.evaluator = FastEvaluator(inputs, base)
        self.base = base
        self.score = score
        self.knobs = {k.name: k for k in knobs}
        self.points = points
        self.config: dict[str, float] = {k.name: getattr(base, k.name) for k in knobs}
        self.focus = knobs[0].name
        self.history: list[tuple[dict[str, float], dict[str, float]]] = []
        self._scored: dict[tuple[tuple[str, float], ...], dict[str, float]] = {}
        self._curves: dict[tuple[str, tuple[tuple[str, float], ...]], list[tuple[float, dict[str, float]]]] = {}
        self.base_metrics = self.metrics_of(self.config)
        self.metric = next(iter(self.base_metrics))
        self.sliders: dict[str, Any] = {}
        for k in knobs:
            cls = W.IntSlider if k.integer else W.FloatSlider
            kw: dict[str, str] = {} if k.integer else {"readout_format": ".2f"}
            s = cls(
                value=self.config[k.name],
                min=k.low,
                max=k.high,
                step=k.step,
                description=k.name,
                continuous_update=True,
                style={"description_width": "170px"},
                layout=W.Layout(width="460px"),
                **kw,
            )
            s.observe(lambda ch, name=k.name: self._on_change(name, ch["new"]), names="value")
            self.sliders[k.name] = s
        self.metric_picker = W.Dropdown(options=list(self.base_metrics), value=self.metric, description="metric")
        self.metric_picker.observe(lambda ch: self._on_metric(ch["new"]), names="value")
        self.table = W.HTML()
        self.plot = W.HTML()
        self.status = W.HTML()
        self.widget = W.HBox(
            [
                W.VBox([*self.sliders.values(), self.metric_picker, self.status]),
                W.VBox([self.table, self.plot]),
            ]
        )
        self.last_redraw_ms = 0.0
        self.redraw()

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.widget._repr_mimebundle_(**kwargs)

    # -- evaluation -------------------------------------------------------------------------------
    def metrics_of(self, config: Mapping[str, float]) -> dict[str, float]:
        """Metrics of ``config`` over the captured questions (cached per config)."""
        key = tuple(sorted(config.items()))
        found = self._scored.get(key)
        if found is None:
            refs = self.evaluator.evaluate(config)
            found = dict(self.score({qid: doc_ids(r) for qid, r in refs.items()}))
            self._scored[key] = found
            self.history.append((dict(config), found))
        return found

    def curve(self, name: str) -> list[tuple[float, dict[str, float]]]:
        """The metrics along knob ``name`` with the other knobs at their current values."""
        others = tuple(sorted((k, v) for k, v in self.config.items() if k != name))
        key = (name, others)
        found = self._curves.get(key)
        if found is None:
            found = [(v, self.metrics_of({**self.config, name: v})) for v in self.knobs[name].values(self.points)]
            self._curves[key] = found
        return found

    def best(self) -> tuple[dict[str, float], dict[str, float]]:
        """The best config evaluated so far by the selected metric (first evaluated on ties)."""
        ok = [(c, m) for c, m in self.history if math.isfinite(m.get(self.metric, math.nan))]
        if not ok:
            raise ValueError(f"no config has a finite {self.metric}")
        return max(ok, key=lambda cm: cm[1][self.metric])

    def best_yaml(self) -> str:
        """The best config as ``params:`` YAML (validated), with its metric in a comment."""
        import yaml

        config, metrics = self.best()
        p = self.base.with_changes(**config)
        changed = {k: getattr(p, k) for k in sorted(config)}
        return str(
            f"# best of {len(self.history)} configs by {self.metric} = {metrics[self.metric]:.6f} "
            f"({len(self.evaluator.inputs)} questions)\n" + yaml.safe_dump({"params": changed}, sort_keys=True)
        )

    def export_best(self, path: str) -> str:
        """Write :meth:`best_yaml` to ``path``; returns the path."""
        from pathlib import Path

        Path(path).write_text(self.best_yaml(), encoding="utf-8")
        return path

    # -- interaction ----------------------------------------------------------------------------------
    def set(self, name: str, value: float) -> float:
        """Move slider ``name`` to ``value`` (as the hand does); returns the redraw time in ms."""
        if name not in self.sliders:
            raise KeyError(f"no slider {name!r}; sliders: {', '.join(self.sliders)}")
        self.sliders[name].value = value
        return self.last_redraw_ms

    def _on_change(self, name: str, value: float) -> None:
        self.config[name] = value
        self.focus = name
        self.redraw()

    def _on_metric(self, metric: str) -> None:
        self.metric = metric
        self.redraw()

    def redraw(self) -> None:
        t0 = time.perf_counter()
        now = self.metrics_of(self.config)
        rows = "".join(
            f"<tr><td>{html.escape(m)}</td><td>{now[m]:.4f}</td><td>{self.base_metrics[m]:.4f}</td>"
            f"<td style='color:{'#228833' if now[m] > self.base_metrics[m] else '#cc3311' if now[m] < self.base_metrics[m] else '#555'}'>"
            f"{now[m] - self.base_metrics[m]:+.4f}</td></tr>"
            for m in now
        )
        self.table.value = "<table><tr><th>metric</th><th>now</th><th>defaults</th><th>Δ</th></tr>" + rows + "</table>"
        self.plot.value = self._plot()
        self.last_redraw_ms = (time.perf_counter() - t0) * 1000.0
        best_config, best_metrics = self.best()
        self.status.value = (
            f"{len(self.evaluator.inputs)} questions · redraw {self.last_redraw_ms:.0f} ms · "
            f"best {html.escape(self.metric)} so far {best_metrics[self.metric]:.4f}"
        )

    def _plot(self) -> str:
        """The metric along the focused knob as an inline SVG (drawn directly: a matplotlib PNG
        render alone would take most of the redraw budget)."""
        name, metric = self.focus, self.metric
        pts = [(float(v), m[metric]) for v, m in self.curve(name) if math.isfinite(m[metric])]
        now_x, now_y = float(self.config[name]), self.metrics_of(self.config)[metric]
        base_y = self.base_metrics[metric]
        return svg_line_plot(pts, (now_x, now_y), base_y, name, metric)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def svg_line_plot(
    points: Sequence[tuple[float, float]],
    marker: tuple[float, float],
    baseline: float,
    xlabel: str,
    ylabel: str,
    width: int = 460,
    height: int = 260,
) -> str:
    """A small SVG: the curve (dots joined), the current point (red), a dashed baseline (defaults).
    The root's ``data-state`` (``<xlabel>=<current x>``) says which point it shows."""
    esc = html.escape
    xs = [x for x, _ in points] + [marker[0]]
    ys = [y for _, y in points] + [marker[1], baseline]
    ys = [y for y in ys if math.isfinite(y)] or [0.0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.08 or 0.02
    y0, y1 = y0 - pad, y1 + pad
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    left, right, top, bottom = 56, 14, 12, 40
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + (1.0 - (y - y0) / (y1 - y0)) * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="11" class="rag-lab-curve" data-state="{esc(xlabel)}={marker[0]:g}">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="white" stroke="#999"/>',
    ]
    for t in _ticks(x0, x1):
        parts.append(f'<text x="{px(t):.1f}" y="{top + ph + 14}" text-anchor="middle">{t:.2f}</text>')
    for t in _ticks(y0, y1):
        parts.append(f'<text x="{left - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{t:.3f}</text>')
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eee"/>')
    if math.isfinite(baseline):
        parts.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{py(baseline):.1f}" y2="{py(baseline):.1f}" '
            'stroke="#999" stroke-dasharray="4 3"><title>defaults</title></line>'
        )
    if points:
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#4477aa" stroke-width="1.5"/>')
        parts.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="#4477aa"/>' for x, y in points)
    if math.isfinite(marker[1]):
        parts.append(
            f'<circle cx="{px(marker[0]):.1f}" cy="{py(marker[1]):.1f}" r="5" fill="#cc3311">'
            f"<title>now: {marker[1]:.4f}</title></circle>"
        )
    parts.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">{esc(xlabel)}</text>')
    parts.append(
        f'<text x="12" y="{top + ph / 2}" text-anchor="middle" transform="rotate(-90 12 {top + ph / 2})">{esc(ylabel)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


class _PanelOptions(TypedDict, total=False):
    """The :class:`TuningPanel` options :func:`tuning_panel` passes on."""

    knobs: Sequence[Knob]
    points: int


def tuning_panel(
    lab: Lab,
    dataset: Dataset,
    kb: str,
    n_questions: int = 100,
    params: Mapping[str, object] | None = None,
    metrics: Sequence[str] = ("ndcg@10", "recall@5", "mrr", "map"),
    cache_dir: str | Path | None = None,
    **kw: Unpack[_PanelOptions],
) -> TuningPanel:
    """A :class:`TuningPanel` over the first ``n_questions`` of ``dataset`` (ingested as ``kb``;
    histories replayed), scored with the evaluation's retrieval metrics. ``params``: overrides of
    the lab's params the sliders start from. ``cache_dir``: a stage cache folder the questions'
    captures are read from and written to (the next panel over the same questions, KB content,
    params, models and code skips the capture runs); a lab with the stage cache already on uses
    its own."""
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.cache.captures import acapture_cached
    from rag_lab.eval.runner import faq_kb_name
    from rag_lab.eval.sweep.fast import RetrievalMemo, capture_requests

    queries = dataset.queries[:n_questions]
    base = lab.params.with_changes(**dict(params or {}))
    kbs = [kb] + ([faq_kb_name(kb)] if dataset.faq else [])
    handle = None
    if cache_dir is not None and getattr(lab, "_stage_cache_handle", None) is None:
        from rag_lab.eval.cache import enable_stage_cache

        handle = enable_stage_cache(lab, cache_dir)  # for the captures only: switched off below
    try:
        inputs = run_sync(lambda: acapture_cached(lab, capture_requests(dataset, queries), kbs, base))
    finally:
        if handle is not None:
            handle.disable()
    memo = RetrievalMemo({q.id: set(q.gold_ids) for q in queries}, grades=dataset.graded_qrels())
    names = list(metrics)

    def score(runs: Mapping[str, list[str]]) -> dict[str, float]:
        summary = memo.report(runs).summary()
        return {m: summary[m] for m in names}

    return TuningPanel(inputs, base, score, **kw)

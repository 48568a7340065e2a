"""Replay widgets (ipywidgets) and the standalone HTML replay page.

Every view works offline from a :class:`~rag_lab.lab.capture.Capture` (or a live
:class:`~rag_lab.lab.Run`): no model, no knowledge base.

* :class:`StreamPlayer`: play / pause / scrub over the stored stream events; shows the progress
  windows, the references, the thinking text and the answer as they had streamed at that point.
* :class:`MMRView`: a λ slider re-running MMR on the stored scores and token sets.
* :class:`CompositeView`: a threshold slider replaying the rerank ladder; which chunks survive.
* :class:`FusionView`, :class:`MergeView`, :class:`TimingsView`: the remaining plots with tables.
* :class:`FunnelView`: where each gold document of the question went, stage by stage.
* :func:`workbench`: all of them in tabs.
* :func:`export_replay_html`: one self-contained HTML file with the final answer, the references
  and a JavaScript player over the same events.

Why the export is not an ipywidgets embed: ``ipywidgets.embed`` writes the widget *state* and
loads ``@jupyter-widgets/html-manager`` from a CDN when the page opens. Neither ipywidgets nor
widgetsnbextension ships that bundle, so the page renders nothing without network access (CI,
air-gapped machines), and an embedded widget has no kernel, so a Python-driven player could not
play or scrub anyway. The exported page therefore carries its own small player (the same fold as
:func:`rag_lab.lab.replay.stream_state`, written in JavaScript) and a ``<noscript>`` copy of the
final answer and references; the browser test checks the JavaScript and Python folds agree.

Figures are shown as PNG ``Image`` widgets (rendered with Agg), so they work the same in Jupyter,
VS Code and a kernel-less test; the two slider views (threshold and λ) redraw an inline SVG
instead (:mod:`rag_lab.lab.plots.svg_views`, a few ms against 250–450 ms for a PNG of the
matplotlib figure), so a change redraws within the time a slider may take.

The standalone page lives in :mod:`rag_lab.lab.pages.replay` and is re-exported here.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rag_lab.lab.pages.replay import export_replay_html, replay_page_data
from rag_lab.lab.replay import state_html, stream_state

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rag_lab.lab.capture import Capture
    from rag_lab.lab.lab import Run
    from rag_lab.types.params import PipelineParams

__all__ = [
    "CompositeView",
    "FunnelView",
    "FusionView",
    "MMRView",
    "MergeView",
    "StreamPlayer",
    "TimingsView",
    "export_replay_html",
    "replay_page_data",
    "workbench",
]


def _widgets() -> ModuleType:
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the replay widgets need ipywidgets: pip install 'ipywidgets>=8.1'") from exc
    module: ModuleType = ipywidgets  # ipywidgets has no type information
    return module


class _View:
    """A view: ``.widget`` is the ipywidgets container; displaying the view displays it."""

    widget: Any

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.widget._repr_mimebundle_(**kwargs)


def _png(fig: Figure) -> bytes:
    from rag_lab.lab.plots import figure_png

    return figure_png(fig, dpi=80)


def _params_of(capture: object) -> PipelineParams:
    from rag_lab.types.params import PipelineParams

    return getattr(capture, "params", None) or PipelineParams()


def _warning_html(warnings: list[str]) -> str:
    """Knob warnings (rag_lab.pipeline.knobs) as an amber line per warning."""
    return "".join(f"<div class='rag-lab-warning' style='color:#9a6700'>⚠ {html.escape(w)}</div>" for w in warnings)


def _table(rows: Sequence[Mapping[str, object]], cols: list[str], max_text: int = 400) -> str:
    esc = html.escape

    def cell(v: object) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.4f}"
        if isinstance(v, list):
            v = ", ".join(str(x) for x in v)
        s = str(v)
        return esc(s[:max_text] + ("…" if len(s) > max_text else ""))

    head = "".join(
        f"<th style='text-align:left;padding:2px 6px;border-bottom:1px solid #999'>{esc(c)}</th>" for c in cols
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td style='padding:2px 6px;vertical-align:top;white-space:pre-wrap'>{cell(r.get(c))}</td>" for c in cols
        )
        + "</tr>"
        for r in rows
    )
    return f"<div style='max-height:320px;overflow:auto;font-size:12px'><table style='border-collapse:collapse'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


# -- stream player ----------------------------------------------------------------------------
class StreamPlayer(_View):
    """Play / pause / scrub over a capture's stream events. ``position`` is the number of events
    shown; ``state`` the :class:`~rag_lab.lab.replay.StreamState` on screen."""

    def __init__(self, capture: Run | Capture, interval_ms: int = 120) -> None:
        W = _widgets()
        self.capture = capture
        self.events = list(capture.events)
        n = len(self.events)
        self.play = W.Play(value=n, min=0, max=n, step=1, interval=interval_ms, description="play")
        self.slider = W.IntSlider(
            value=n, min=0, max=n, description="event", continuous_update=True, layout=W.Layout(width="60%")
        )
        W.link((self.play, "value"), (self.slider, "value"))
        self.status = W.HTML()
        self.progress = W.HTML()
        self.references = W.HTML()
        self.thinking = W.HTML()
        self.answer = W.HTML()

        def box(title: str, child: Any) -> Any:
            return W.VBox(
                [W.HTML(f"<b>{html.escape(title)}</b>"), child],
                layout=W.Layout(border="1px solid #ddd", padding="4px", margin="2px"),
            )

        question = html.escape(getattr(capture, "question", "") or "")
        self.widget = W.VBox(
            [
                W.HTML(f"<b>Q:</b> {question}"),
                W.HBox([self.play, self.slider, self.status]),
                W.HBox([box("Progress", self.progress), box("Thinking", self.thinking)]),
                box("Answer", self.answer),
                box("References", self.references),
            ]
        )
        self.slider.observe(lambda ch: self.show(ch["new"]), names="value")
        self.state = stream_state(self.events)
        self.show(n)

    @property
    def position(self) -> int:
        return self.state.position

    def show(self, position: int) -> None:
        """Show the stream after ``position`` events (also moves the slider)."""
        position = max(0, min(int(position), len(self.events)))
        if self.slider.value != position:
            self.slider.value = position  # the observer calls back here
            return
        self.state = stream_state(self.events, position)
        panes = state_html(self.state)
        self.status.value = panes["status"]
        self.progress.value = panes["progress"]
        self.references.value = panes["references"]
        self.thinking.value = panes["thinking"]
        self.answer.value = panes["answer"]


# -- score views --------------------------------------------------------------------------------
class _SliderView(_View):
    """A slider above a summary and an inline SVG picture; moving the slider calls ``update``."""

    def _slider_layout(
        self, W: ModuleType, description: str, value: float, span: tuple[float, float], step: float
    ) -> None:
        self.slider = W.FloatSlider(
            value=value,
            min=span[0],
            max=span[1],
            step=step,
            description=description,
            continuous_update=False,
            readout_format=".2f",
        )
        self.picture = W.HTML()  # inline SVG (rag_lab.lab.plots.svg_views): redrawn in milliseconds
        self.summary = W.HTML()
        self.widget = W.VBox([self.slider, self.summary, self.picture])
        self.slider.observe(lambda ch: self.update(ch["new"]), names="value")

    def update(self, value: float) -> None:
        raise NotImplementedError


class CompositeView(_SliderView):
    """The composite-score plot with a threshold slider: moving it replays the rerank ladder on the
    stored model scores and lists the chunks that survive."""

    def __init__(self, capture: Run | Capture, score_range: tuple[float, float] = (0.0, 1.0)) -> None:
        from rag_lab.lab.frames import rerank_rows, rerank_threshold_outcome

        W = _widgets()
        self.capture = capture
        self.rows = rerank_rows(capture)
        start = rerank_threshold_outcome(capture).threshold
        # the slider spans the reranker's score range (the offline re-scorer: [0, 1]), widened
        # only if the stored scores lie outside it
        scores = [float(r["model_score"]) for r in self.rows if r["model_score"] is not None]
        lo = min([float(score_range[0]), *scores, start])
        hi = max([float(score_range[1]), *scores, start])
        self.warnings: list[str] = []
        self._slider_layout(W, "threshold", start, (lo, hi), 0.01)
        self.outcome = rerank_threshold_outcome(capture)
        self.update(start)

    @property
    def survivors(self) -> list[str]:
        """Ids of the chunks that pass the current threshold (candidate order)."""
        return [self.rows[i]["id"] for i in self.outcome.kept]

    def update(self, threshold: float) -> None:
        from rag_lab.lab.frames import rerank_threshold_outcome
        from rag_lab.lab.plots.svg_views import composite_svg
        from rag_lab.pipeline.knobs import rerank_warnings

        self.outcome = rerank_threshold_outcome(self.capture, threshold)
        # the picture first: the frontend applies updates in order, so the text never shows a
        # threshold whose picture has not arrived
        self.picture.value = composite_svg(self.capture, threshold)
        o = self.outcome
        used = f" (retried at {o.threshold_used:.2f})" if o.threshold_used != o.threshold else ""
        params = _params_of(self.capture).model_copy(update={"rerank_threshold": float(threshold)})
        self.warnings = [
            w.message
            for w in rerank_warnings(
                params, {"outcome": o.outcome, "threshold_used": o.threshold_used}, {"rerank_threshold"}
            )
        ]
        self.summary.value = (
            f"<b>{len(o.kept)} of {len(self.rows)}</b> candidates survive threshold {o.threshold:.2f}{used}: "
            f"outcome <code>{html.escape(o.outcome)}</code><br>"
            + _warning_html(self.warnings)
            + "<br>".join(html.escape(s) for s in self.survivors)
        )


class MMRView(_SliderView):
    """MMR steps with a λ slider: re-selects from the stored scores and token sets and shows
    which picks change against the run's own λ."""

    def __init__(self, capture: Run | Capture) -> None:
        from rag_lab.lab.frames import mmr_inputs

        W = _widgets()
        self.capture = capture
        self.inputs = mmr_inputs(capture)
        if not self.inputs or not self.inputs.get("ids"):
            raise ValueError("this run has no MMR selection (no candidate passed the rerank threshold)")
        self.run_lambda = float(self.inputs["lambda"])
        self._slider_layout(W, "λ", self.run_lambda, (0.0, 1.0), 0.05)
        self.picks: list[str] = []
        self.update(self.run_lambda)

    def update(self, lam: float) -> None:
        from rag_lab.lab.frames import mmr_selection, short_id
        from rag_lab.lab.plots.svg_views import mmr_svg
        from rag_lab.pipeline.knobs import rerank_warnings

        inputs = self.inputs
        if inputs is None:  # MMR did not run: nothing to redraw
            return
        self.picture.value = mmr_svg(self.capture, lam=lam)  # before the text, as in CompositeView
        self.picks = [s["id"] for s in mmr_selection(inputs, lam)]
        base = [s["id"] for s in mmr_selection(inputs, self.run_lambda)]
        changed = [i for i, (a, b) in enumerate(zip(self.picks, base)) if a != b]
        verdict = (
            "same picks as the run"
            if not changed
            else f"{len(changed)} pick(s) differ from the run's λ={self.run_lambda:g}"
        )
        params = _params_of(self.capture).model_copy(update={"mmr_lambda": float(lam)})
        ranked = inputs["ids"] if inputs is not None else []
        self.warnings = [w.message for w in rerank_warnings(params, {"ranked_ids": ranked}, {"mmr_lambda"})]
        self.summary.value = (
            f"λ = {lam:.2f}: {html.escape(verdict)}<br>"
            + _warning_html(self.warnings)
            + " → ".join(
                (f"<b>{html.escape(short_id(p))}</b>" if i in changed else html.escape(short_id(p)))
                for i, p in enumerate(self.picks)
            )
        )


class FusionView(_View):
    """The fusion plot and its table (vector / keyword ranks and RRF terms)."""

    def __init__(self, capture: Run | Capture, fusion: object = None) -> None:
        from rag_lab.lab.frames import fusion_rows
        from rag_lab.lab.plots import plot_fusion

        W = _widgets()
        rows = fusion_rows(capture, fusion)
        cols = [
            "chunk_id",
            "vector_rank",
            "vector_score",
            "keyword_rank",
            "keyword_score",
            "rrf_normalized",
            "fused_rank",
            "returned",
        ]
        self.widget = W.VBox(
            [W.Image(value=_png(plot_fusion(capture, fusion)), format="png"), W.HTML(_table(rows, cols))]
        )


class MergeView(_View):
    """The merge plot and a table with each chunk's fate and its text before and after."""

    def __init__(self, capture: Run | Capture) -> None:
        from rag_lab.lab.frames import merge_rows
        from rag_lab.lab.plots import plot_merge

        W = _widgets()
        rows = merge_rows(capture)
        cols = ["id", "fate", "merged_into", "absorbed", "expanded_prev", "expanded_next", "text_in", "text_out"]
        self.widget = W.VBox([W.Image(value=_png(plot_merge(capture)), format="png"), W.HTML(_table(rows, cols))])


class FunnelView(_View):
    """Where each gold document of the question is at every stage (rank, score, what the stage did
    to it, the stage that lost it), from the run's own records (:mod:`rag_lab.lab.frames.funnel`)."""

    def __init__(self, capture: Run | Capture, gold_ids: Iterable[str]) -> None:
        from rag_lab.lab.frames.funnel import funnel_rows

        W = _widgets()
        rows = funnel_rows(capture, gold_ids)
        if not rows:
            raise ValueError("no gold document given (workbench(..., gold_ids=[...]))")
        lost = sorted({f"{r['gold_id']} at {r['stage']}: {r['why']}" for r in rows if r["lost_here"]})
        head = "lost: " + "; ".join(lost) if lost else "every gold document reached the final contexts"
        cols = ["gold_id", "stage", "rank", "of", "chunk", "score", "note", "lost_here"]
        self.widget = W.VBox([W.HTML(f"<b>{html.escape(head)}</b>"), W.HTML(_table(rows, cols))])


class TimingsView(_View):
    def __init__(self, capture: Run | Capture) -> None:
        from rag_lab.lab.plots import plot_stage_timings

        W = _widgets()
        self.widget = W.VBox([W.Image(value=_png(plot_stage_timings(capture)), format="png")])


def workbench(capture: Run | Capture, fusion: object = None, gold_ids: Iterable[str] | None = None) -> Any:
    """All views of a capture (or run) in tabs. A view whose data the capture lacks shows why.
    ``gold_ids``: the question's gold documents, for a "Gold funnel" tab."""
    W = _widgets()
    makers: list[tuple[str, Callable[[], _View]]] = [
        ("Stream", lambda: StreamPlayer(capture)),
        ("Composite score", lambda: CompositeView(capture)),
        ("MMR", lambda: MMRView(capture)),
        ("Fusion", lambda: FusionView(capture, fusion)),
        ("Merge", lambda: MergeView(capture)),
        ("Timings", lambda: TimingsView(capture)),
    ]
    if gold_ids is not None:
        makers.append(("Gold funnel", lambda: FunnelView(capture, gold_ids)))
    children, titles = [], []
    for title, make in makers:
        try:
            children.append(make().widget)
        except (ValueError, KeyError) as exc:
            children.append(
                W.HTML(f"<i>{html.escape(title)}: not available for this capture — {html.escape(str(exc))}</i>")
            )
        titles.append(title)
    tab = W.Tab(children=children)
    tab.titles = tuple(titles)
    return tab

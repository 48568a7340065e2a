"""Each plot function on the stored capture: the drawn geometry is the data, and it renders."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from matplotlib.figure import Figure

from rag_lab.lab.capture import Capture, load_capture
from rag_lab.lab.frames import fusion_rows, merge_rows, mmr_inputs, mmr_selection, rerank_rows
from rag_lab.lab.plots import (
    figure_png,
    plot_composite_scores,
    plot_fusion,
    plot_merge,
    plot_mmr,
    plot_stage_timings,
)
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult
from tests.lab.data.make_capture import CAPTURE

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cap() -> Capture:
    return load_capture(CAPTURE)


def _bars(ax):
    from matplotlib.patches import Rectangle

    return [p for p in ax.patches if isinstance(p, Rectangle)]


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_composite_scores(cap):
    rows = rerank_rows(cap)
    fig = plot_composite_scores(cap)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    ax_m, ax_c = fig.axes
    assert [b.get_width() for b in _bars(ax_m)] == pytest.approx([r["model_score"] for r in rows])
    assert ax_m.lines[0].get_xdata()[0] == pytest.approx(0.1)  # the run's threshold
    assert ax_m.get_title() == "threshold 0.10: 4 of 4 survive (ok)"
    # three stacked parts per candidate: w·model, w·base, w·source, left to right
    widths = [b.get_width() for b in _bars(ax_c)]
    expect = [x for r in rows for x in (r["model_part"], r["base_part"], r["source_part"])]
    assert widths == pytest.approx(expect)
    lefts = [b.get_x() for b in _bars(ax_c)][:3]
    assert lefts == pytest.approx([0.0, rows[0]["model_part"], rows[0]["model_part"] + rows[0]["base_part"]])
    assert any("MMR #1" in t for t in _texts(ax_c))
    assert figure_png(fig).startswith(PNG)


def test_composite_scores_with_a_slider_threshold(cap):
    fig = plot_composite_scores(cap, threshold=0.7)
    ax_m, ax_c = fig.axes
    assert ax_m.get_title() == "threshold 0.70: 1 of 4 survive (ok)"
    assert ax_m.lines[0].get_xdata()[0] == pytest.approx(0.7)
    filtered = [t for t in _texts(ax_c) if t.endswith("filtered")]
    assert len(filtered) == 3
    # greyed (alpha 0.3) stacks for the three filtered candidates
    alphas = [b.get_alpha() for b in _bars(ax_c)]
    assert alphas == [1.0] * 3 + [0.3] * 9


def test_composite_boosts_are_drawn():
    """FAQ and wiki boosts add a hatched segment from the composite score to the boosted score."""
    diag = {
        "threshold": 0.3,
        "fallback_min": 0.15,
        "outcome": "ok",
        "mmr_k": 2,
        "mmr_lambda": 0.7,
        "weights": {"model": 0.6, "base": 0.3, "source": 0.1, "web_source_weight": 0.95},
        "rows": [
            {
                "id": "kb:faq#1",
                "chunk_type": "faq",
                "knowledge_source": "",
                "base_score": 0.5,
                "model_score": 0.8,
                "composite_score": 0.73,
                "final_score": 0.876,
                "faq_boosted": True,
                "passed_threshold": True,
                "kept_by": "",
                "selected": True,
            },
            {
                "id": "kb:web#1",
                "chunk_type": "web_search",
                "knowledge_source": "web_search",
                "base_score": 0.6,
                "model_score": 0.5,
                "composite_score": 0.575,
                "final_score": 0.575,
                "faq_boosted": False,
                "passed_threshold": True,
                "kept_by": "",
                "selected": True,
            },
        ],
        "mmr": [],
    }
    chat = ChatManage()
    chat.state.diagnostics["rerank"] = diag
    wiki = SearchResult(id="kb:web#1", score=0.575 * 1.3, metadata={"wiki_boosted": "true"})
    chat.state.rerank_result = [SearchResult(id="kb:faq#1", score=0.876), wiki]
    fig = plot_composite_scores(Capture(snapshots={"chunk_rerank": chat}, params=PipelineParams()))
    ax_c = fig.axes[1]
    bars = _bars(ax_c)
    assert len(bars) == 8  # 3 parts + boost per row
    faq_boost, web_source, web_boost = bars[3], bars[6], bars[7]
    assert faq_boost.get_x() == pytest.approx(0.73) and faq_boost.get_width() == pytest.approx(0.876 - 0.73)
    assert web_source.get_width() == pytest.approx(0.1 * 0.95)  # web results weigh 0.95
    assert web_boost.get_width() == pytest.approx(0.575 * 0.3) and faq_boost.get_hatch() == "//"
    texts = _texts(ax_c)
    assert any("FAQ ×1.20" in t for t in texts) and any("wiki" in t for t in texts)


def test_mmr(cap):
    inputs = mmr_inputs(cap)
    fig = plot_mmr(cap)
    ax_s, ax_l = fig.axes[:2]
    bars = _bars(ax_s)
    trace = inputs["trace"]
    assert [b.get_height() for b in bars[: len(trace)]] == pytest.approx([s["relevance"] for s in trace])
    assert [b.get_height() for b in bars[len(trace) :]] == pytest.approx([s["redundancy"] for s in trace])
    assert list(ax_s.lines[0].get_ydata()) == pytest.approx([s["mmr"] for s in trace])
    assert ax_s.get_title() == "MMR steps at λ = 0.7 (k = 4, 4 candidates)"
    labels = [t.get_text() for t in ax_l.get_yticklabels()]
    assert labels == ["λ=0", "λ=0.3", "λ=0.5", "λ=0.7 (run)", "λ=0.9", "λ=1"]
    # the λ=0 row shows the re-selected picks in order, named by relevance rank (#1 = best score)
    cells = _texts(ax_l)
    k = inputs["k"]
    order = sorted(range(len(inputs["ids"])), key=lambda i: -inputs["scores"][i])
    rank = {i: n for n, i in enumerate(order, 1)}
    assert cells[:k] == [f"#{rank[s['index']]}" for s in mmr_selection(inputs, 0.0)]
    key = fig.axes[2].texts[0].get_text().splitlines()
    assert key[0].split()[:2] == ["#1", inputs["ids"][order[0]].split(":")[1]]
    other = plot_mmr(cap, lambdas=(0.2,), lam=0.2)
    assert other.axes[0].get_title().startswith("MMR steps at λ = 0.2")
    assert [t.get_text() for t in other.axes[1].get_yticklabels()] == ["λ=0.2", "λ=0.7 (run)"]


def test_fusion(cap):
    rows = fusion_rows(cap)
    fig = plot_fusion(cap)
    ax_b, ax_s = fig.axes[:2]
    top = 0.7 / 61 + 0.3 / 61
    widths = [b.get_width() for b in _bars(ax_b)]
    expect = [x for r in rows for x in ((r["vector_rrf"] or 0) / top, (r["keyword_rrf"] or 0) / top)]
    assert widths == pytest.approx(expect)
    assert widths[0] + widths[1] == pytest.approx(1.0)  # first in both lists: the best attainable score
    assert any("(v#1, k#1)" in t for t in _texts(ax_b))
    drawn = sum(len(c.get_offsets()) for c in ax_s.collections)
    assert drawn == len(rows)
    with pytest.raises(ValueError, match="no fusion trace"):
        plot_fusion(Capture(snapshots=cap.snapshots))


def test_merge(cap):
    rows = merge_rows(cap)
    fig = plot_merge(cap)
    ax = fig.axes[0]
    notes = _texts(ax)
    assert notes[0] == "  kept; fused ← lighthouse.md#c1, lighthouse.md#c2; +0 before / +2 after"
    assert "  merged into lighthouse.md#c0 (extend)" in notes
    out_bars = [b.get_width() for b in _bars(ax) if b.get_alpha() is None]
    assert out_bars == [r["length_out"] for r in rows if r["length_out"] is not None]
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["id"].split(":")[1] for r in rows]


def test_stage_timings(cap):
    fig = plot_stage_timings(cap)
    ax = fig.axes[0]
    bars = _bars(ax)
    assert len(bars) == len(cap.timings) == 9
    assert [b.get_width() for b in bars] == pytest.approx([max(t.duration_ms, 0.01) for t in cap.timings])
    t0 = cap.timings[0].started_at
    assert [b.get_x() for b in bars] == pytest.approx([(t.started_at - t0) * 1000 for t in cap.timings])
    assert [t.get_text() for t in ax.get_yticklabels()] == cap.stages
    with pytest.raises(ValueError, match="no stage timings"):
        plot_stage_timings(Capture())


def test_plots_never_touch_pyplot(tmp_path):
    """Agg-safe: no pyplot import, no GUI backend, no global figures, PNGs written."""
    code = (
        "import sys, matplotlib\n"
        "from rag_lab.lab.capture import load_capture\n"
        "from rag_lab.lab import plots\n"
        f"cap = load_capture({str(CAPTURE)!r})\n"
        "for name in ('plot_composite_scores', 'plot_mmr', 'plot_fusion', 'plot_merge', 'plot_stage_timings'):\n"
        f"    getattr(plots, name)(cap).savefig({str(tmp_path)!r} + '/' + name + '.png')\n"
        "print('matplotlib.pyplot' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"
    for name in ("plot_composite_scores", "plot_mmr", "plot_fusion", "plot_merge", "plot_stage_timings"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG)


# -- display and readability ------------------------------------------------------------------
PLOTS = ("plot_composite_scores", "plot_mmr", "plot_fusion", "plot_merge", "plot_stage_timings")


@pytest.mark.parametrize("name", PLOTS)
def test_every_plot_displays_as_png_in_ipython(cap, name):
    """IPython's display formatter (what Jupyter calls on a cell's last value) gets a PNG, not the
    text ``<Figure size … with 2 Axes>`` a bare Figure gives without pyplot."""
    from IPython.core.formatters import DisplayFormatter

    import rag_lab.lab.plots as plots

    fig = getattr(plots, name)(cap)
    data, _ = DisplayFormatter().format(fig)
    assert data["image/png"].startswith(PNG)


def _overlaps(texts, renderer) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text() and t.get_visible()]
    out = []
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            if boxes[i][1].overlaps(boxes[j][1]):
                out.append((boxes[i][0], boxes[j][0]))
    return out


def _renderer(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


@pytest.mark.parametrize("n,k", [(150, 10), (200, 20)])
def test_mmr_selection_grid_stays_legible(n, k):
    """With 150-200 candidates and k up to 20 no two cell labels of the λ grid overlap, nor the
    step labels, and the figure stays under 11 inches (1,100 px at 100 dpi)."""
    from tests.lab.data.large_capture import large_capture

    fig = plot_mmr(large_capture(n, k))
    ax_s, ax_l = fig.axes[:2]
    r = _renderer(fig)
    assert len(ax_l.texts) == k * 6
    assert _overlaps(ax_l.texts, r) == []
    assert _overlaps(ax_s.get_xticklabels(), r) == []
    assert fig.get_size_inches()[1] <= 11.0


@pytest.mark.parametrize("n", [150, 200])
def test_fusion_and_composite_stay_readable_at_many_candidates(n):
    """The fusion plot draws the top 30 as bars (tick labels do not overlap), every candidate as a
    point, and stays under 11 inches tall; the composite plot likewise."""
    from tests.lab.data.large_capture import large_capture

    big = large_capture(n)
    fig = plot_fusion(big)
    ax_b, ax_s, ax_r = fig.axes[:3]
    assert fig.get_size_inches()[1] <= 11.0
    assert len(ax_b.get_yticklabels()) == 30
    assert sum(len(c.get_offsets()) for c in ax_s.collections) == n
    assert "top 30 of " + str(n) in ax_b.get_title()
    r = _renderer(fig)
    assert _overlaps(ax_b.get_yticklabels(), r) == []
    # the tick labels keep each id's end (the chunk suffix) visible
    assert all(t.get_text().split("#")[-1].startswith("c") for t in ax_b.get_yticklabels())
    comp = plot_composite_scores(big)
    assert comp.get_size_inches()[1] <= 11.0
    assert _overlaps(comp.axes[0].get_yticklabels(), _renderer(comp)) == []
    assert f"of {n} survive" in comp.axes[0].get_title()


def test_labels_right_of_their_bars_end_inside_the_axes():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from rag_lab.lab.plots.stages import _fit_labels

    def right_edges(fig, ax, texts):
        r = FigureCanvasAgg(fig).get_renderer()
        return max(t.get_window_extent(r).x1 for t in texts), ax.get_window_extent(r).x1

    fig = Figure(figsize=(6, 2))
    ax = fig.subplots()
    ax.barh([0, 1], [100, 40])
    texts = [ax.text(100, 0, "  merged into c7 (extend); fused ← c8, c9, c10 … +3"), ax.text(40, 1, "  kept")]
    ax.set_xlim(0, 220)
    label_end, axes_end = right_edges(fig, ax, texts)
    assert label_end > axes_end  # without the fit, the long label runs off the axes
    _fit_labels(fig, ax, texts)
    label_end, axes_end = right_edges(fig, ax, texts)
    assert label_end <= axes_end and ax.get_xlim()[1] > 220
    before = ax.get_xlim()
    _fit_labels(fig, ax, texts)  # labels that fit leave the axis alone
    assert ax.get_xlim() == before

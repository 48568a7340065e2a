"""The workbench's views as plain functions returning matplotlib Figures.

Each takes a :class:`~rag_lab.lab.Run` or a :class:`~rag_lab.lab.capture.Capture` (no model is
needed: everything comes from snapshots, diagnostics and stored extras) and returns a
``matplotlib.figure.Figure`` built without pyplot, so it works under any backend (Agg in tests and
reports), never opens a window and leaves no global figure behind. The figure carries a PNG rich
display (``_repr_png_``), so Jupyter shows it as a picture with no ``%matplotlib`` magic; elsewhere
call ``fig.savefig(path)``. Figures stay under :data:`MAX_FIGURE_HEIGHT` inches whatever the
number of candidates (bar views draw the top rows and say how many there are).

* :func:`plot_composite_scores`: the threshold on model scores and the stacked composite score
  (model / base / source parts, FAQ / wiki / memory boosts) per candidate.
* :func:`plot_mmr`: MMR's greedy steps (relevance, max redundancy, MMR value) and the picks at
  other λ, re-selected from the stored scores and token sets.
* :func:`plot_fusion`: vector vs keyword ranks and scores and the weighted RRF result.
* :func:`plot_merge`: which chunks were fused, expanded with neighbours or dropped as overlaps.
* :func:`plot_stage_timings`: the stages on a time line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.lab.frames import (
    fusion_rows,
    merge_rows,
    mmr_inputs,
    mmr_selection,
    rerank_rows,
    rerank_threshold_outcome,
    short_id,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = [
    "figure_png",
    "plot_composite_scores",
    "plot_fusion",
    "plot_merge",
    "plot_mmr",
    "plot_stage_timings",
]

#: one palette for every view
C_MODEL, C_BASE, C_SOURCE, C_BOOST = "#4C72B0", "#DD8452", "#55A868", "#C44E52"
C_VECTOR, C_KEYWORD = "#4C72B0", "#DD8452"
C_KEPT, C_DROPPED, C_MUTED = "#55A868", "#C44E52", "#BBBBBB"
DEFAULT_LAMBDAS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)


def _figure(width: float, height: float) -> Figure:
    return _figure_class()(figsize=(width, height), layout="constrained")


_LAB_FIGURE: type | None = None


def _figure_class() -> type:
    """:class:`matplotlib.figure.Figure` with a PNG rich display (built once, on first use, so
    importing this module does not import matplotlib)."""
    global _LAB_FIGURE
    if _LAB_FIGURE is None:
        from matplotlib.figure import Figure

        class LabFigure(Figure):
            """A Figure that displays itself in Jupyter (IPython's ``_repr_png_`` protocol) without
            pyplot: a bare Figure shows as ``<Figure size … with 2 Axes>`` unless pyplot's inline
            backend was activated, which the workbench never does."""

            def _repr_png_(self) -> bytes:
                return figure_png(self)

        _LAB_FIGURE = LabFigure
    return _LAB_FIGURE


#: the tallest figure a view draws, in inches (at 100 dpi: pixels / 100); long candidate lists
#: are cut to their top rows rather than drawn as a poster
MAX_FIGURE_HEIGHT = 11.0


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """PNG bytes of a figure (Agg canvas, so no GUI backend is touched)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _row_height(n: int) -> float:
    """Inches per bar row: roomy for a handful, tighter for long lists (font 7-8 still fits)."""
    return 0.45 if n <= 12 else 0.27


def _clip_label(text: str, width: int = 30) -> str:
    """Shorten a label in the middle (the chunk suffix ``#c3`` stays visible)."""
    if len(text) <= width:
        return text
    tail = width // 2
    return text[: width - tail - 1] + "…" + text[-tail:]


def _run_params(run: Any):
    from rag_lab.types.params import PipelineParams

    return getattr(run, "params", None) or PipelineParams()


# -- composite score --------------------------------------------------------------------------
def plot_composite_scores(run: Any, threshold: float | None = None, max_rows: int = 30) -> Figure:
    """Left: each candidate's rerank-model score against the threshold (and the fallback floor);
    right: its composite score as stacked weighted parts, ``w_model·model`` + ``w_base·base`` +
    ``w_source·source_weight``, then the FAQ / wiki / memory boosts. Candidates that do not survive
    ``threshold`` (default: the run's) under the stage's ladder (threshold, top-1 fallback, one
    degraded retry) are greyed; their composite is what they would have scored. Only the first
    ``max_rows`` candidates are drawn (the title counts all of them)."""
    all_rows = rerank_rows(run)
    rows = all_rows[: max(1, int(max_rows))]
    outcome = rerank_threshold_outcome(run, threshold)
    kept = set(outcome.kept)
    t = outcome.threshold
    fig = _figure(11, min(MAX_FIGURE_HEIGHT, 1.2 + _row_height(len(rows)) * max(3, len(rows))))
    ax_m, ax_c = fig.subplots(1, 2, sharey=True, width_ratios=[1, 1.6])
    ys = list(range(len(rows)))
    labels = [_clip_label(short_id(r["id"])) for r in rows]
    fs = 8 if len(rows) <= 12 else 7

    for y, r in zip(ys, rows):
        alive = (y in kept) or r["kept_by"]
        m = r["model_score"]
        if m is not None:
            ax_m.barh(y, m, color=C_MODEL if alive else C_MUTED, height=0.6)
            ax_m.text(m, y, f" {m:.3f}", va="center", fontsize=fs)
    ax_m.axvline(t, color=C_DROPPED, linestyle="--", linewidth=1.5, label=f"threshold {t:.2f}")
    if outcome.threshold_used != t:
        ax_m.axvline(
            outcome.threshold_used,
            color=C_DROPPED,
            linestyle=":",
            linewidth=1.2,
            label=f"degraded retry {outcome.threshold_used:.2f}",
        )
    diag_min = outcome.fallback_min
    if diag_min > 0:
        ax_m.axvline(
            diag_min, color="#8172B3", linestyle=":", linewidth=1, label=f"top-1 fallback floor {diag_min:.2f}"
        )
    ax_m.set_xlim(0, 1.05)
    ax_m.set_xlabel("rerank model score")
    ax_m.set_yticks(ys, labels, fontsize=fs)
    ax_m.invert_yaxis()
    ax_m.legend(loc="lower right", fontsize=7)
    ax_m.set_title(f"threshold {t:.2f}: {len(kept)} of {len(all_rows)} survive ({outcome.outcome})", fontsize=10)

    first = {"model": True, "base": True, "source": True, "boost": True}

    def lab(key: str, text: str) -> str | None:
        if first[key]:
            first[key] = False
            return text
        return None

    for y, r in zip(ys, rows):
        alive = (y in kept) or bool(r["kept_by"])
        alpha = 1.0 if alive else 0.3
        parts = [
            (r["model_part"] or 0.0, C_MODEL, "model", f"model × {_w(run, 'model')}"),
            (r["base_part"], C_BASE, "base", f"base × {_w(run, 'base')}"),
            (r["source_part"], C_SOURCE, "source", f"source × {_w(run, 'source')}"),
        ]
        left = 0.0
        for width, color, key, text in parts:
            ax_c.barh(y, width, left=left, color=color, alpha=alpha, height=0.6, label=lab(key, text))
            left += width
        composite = min(1.0, left)
        boosted = r["boosted_score"] if r["boosted_score"] is not None else r["final_score"]
        tags = []
        if r["faq_boosted"]:
            tags.append(f"FAQ ×{r['faq_factor']:.2f}")
        if r["wiki_boosted"]:
            tags.append("wiki")
        if r["memory_affinity"] and r["memory_affinity"] > 1.0:
            tags.append(f"memory ×{r['memory_affinity']:.3f}")
        if boosted is not None and boosted > composite + 1e-9:
            ax_c.barh(
                y,
                boosted - composite,
                left=composite,
                color=C_BOOST,
                alpha=alpha,
                height=0.6,
                hatch="//",
                label=lab("boost", "boost (FAQ / wiki / memory)"),
            )
        end = max(composite, boosted or 0.0)
        note = f" {end:.3f}" + (f"  {' '.join(tags)}" if tags else "")
        if r["kept_by"]:
            note += f"  kept by {r['kept_by']}"
        elif not alive:
            note += "  filtered"
        elif r["mmr_order"] is not None:
            note += f"  MMR #{r['mmr_order']}"
        ax_c.text(end, y, note, va="center", fontsize=fs)
    ax_c.set_xlabel("composite score (stacked weighted parts) and boosts")
    ax_c.set_xlim(0, max(1.25, max(((r["boosted_score"] or 0.0) for r in rows), default=1.0) + 0.35))
    ax_c.legend(loc="lower right", fontsize=7)
    ax_c.set_title("composite = clamp(w·model + w·base + w·source) · boosts", fontsize=10)
    shown = "" if len(rows) == len(all_rows) else f" (first {len(rows)} of {len(all_rows)} candidates drawn)"
    fig.suptitle("Rerank: composite score per candidate" + shown, fontsize=12)
    return fig


def _w(run: Any, key: str) -> str:
    p = _run_params(run)
    return f"{getattr(p, f'composite_{key}_weight'):g}"


# -- MMR --------------------------------------------------------------------------------------
def plot_mmr(run: Any, lambdas: Sequence[float] = DEFAULT_LAMBDAS, lam: float | None = None) -> Figure:
    """Top: at each greedy step (at ``lam``, default the run's λ) the pick's relevance, its max
    redundancy with what was already picked, and its MMR value ``λ·rel − (1−λ)·red``. Bottom left:
    the selection order at each λ of ``lambdas`` (picks re-run from the stored scores and token
    sets; the run's own λ is marked). Candidates are named by their relevance rank ``#n`` (``#1`` is
    the most relevant) so that a cell stays legible whatever the id length and however many
    candidates there are; cells that differ from the run's own row are outlined. Bottom right: the
    key from ``#n`` to chunk id for every candidate picked at some λ."""
    inputs = mmr_inputs(run)
    if not inputs or not inputs.get("ids"):
        raise ValueError("this run has no MMR selection (no candidate passed the rerank threshold)")
    import numpy as np
    from matplotlib.patches import Rectangle

    run_lam = float(inputs["lambda"])
    lam = run_lam if lam is None else float(lam)
    steps = mmr_selection(inputs, lam)
    ids = inputs["ids"]
    scores = [float(x) for x in inputs["scores"]]
    # relevance rank of each candidate (1 = best score, ties by stored order)
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    rank = {idx: n for n, idx in enumerate(order, 1)}
    lams = sorted(set(float(x) for x in lambdas) | {run_lam, lam})
    k = int(inputs["k"])
    grid = []
    for row_lam in lams:
        picks = [st["index"] for st in mmr_selection(inputs, row_lam)]
        grid.append(picks + [-1] * (k - len(picks)))
    run_row = grid[lams.index(run_lam)]
    picked = sorted({i for row in grid for i in row if i >= 0}, key=lambda i: rank[i])
    max_key = 28
    key_lines = [f"#{rank[i]:<4} {_clip_label(short_id(ids[i]), 34)}  rel {scores[i]:.3f}" for i in picked[:max_key]]
    if len(picked) > max_key:
        key_lines.append(f"… {len(picked) - max_key} more")
    fs = 8 if k <= 12 else (7 if k <= 20 else 6)
    grid_h = 0.3 + 0.3 * len(lams)
    key_h = 0.16 * len(key_lines) + 0.3
    fig = _figure(12, min(MAX_FIGURE_HEIGHT, 3.6 + max(grid_h, key_h)))
    gs = fig.add_gridspec(2, 2, height_ratios=[3.0, max(grid_h, key_h)], width_ratios=[2.2, 1])
    ax_s = fig.add_subplot(gs[0, :])
    ax_l = fig.add_subplot(gs[1, 0])
    ax_k = fig.add_subplot(gs[1, 1])

    xs = list(range(len(steps)))
    wbar = 0.38
    ax_s.bar([x - wbar / 2 for x in xs], [st["relevance"] for st in steps], wbar, color=C_MODEL, label="relevance")
    ax_s.bar(
        [x + wbar / 2 for x in xs],
        [st["redundancy"] for st in steps],
        wbar,
        color=C_DROPPED,
        label="max redundancy (Jaccard)",
    )
    ax_s.plot(xs, [st["mmr"] for st in steps], "o-", color="black", label="MMR value")
    for x, st in zip(xs, steps):
        for ru in st["runner_ups"][:1]:
            ax_s.plot(
                [x],
                [ru["mmr"]],
                marker="x",
                color="#8172B3",
                linestyle="none",
                label="best runner-up's MMR" if x == 0 else None,
            )
    ax_s.set_xticks(xs, [f"{n + 1}\n#{rank[st['index']]}" for n, st in enumerate(steps)], fontsize=fs)
    ax_s.set_xlabel("step, and the pick's relevance rank #n (key below)", fontsize=8)
    ax_s.set_ylabel("score")
    ax_s.set_ylim(min(0.0, min((st["mmr"] for st in steps), default=0.0)) - 0.05, 1.3)
    ax_s.legend(fontsize=7, loc="upper center", ncol=4)
    ax_s.set_title(f"MMR steps at λ = {lam:g} (k = {k}, {len(ids)} candidates)", fontsize=10)

    # colour = relevance rank on one sequential scale (dark = most relevant)
    arr = np.ma.masked_less(np.array([[rank[i] if i >= 0 else -1 for i in row] for row in grid], dtype=float), 0)
    ax_l.imshow(
        arr, aspect="auto", cmap="viridis_r", vmin=1, vmax=max(2, max((rank[i] for i in picked), default=2)), alpha=0.6
    )
    for yi, picks in enumerate(grid):
        for xi, idx in enumerate(picks):
            if idx < 0:
                continue
            differs = idx != run_row[xi]
            ax_l.text(
                xi,
                yi,
                f"#{rank[idx]}",
                ha="center",
                va="center",
                fontsize=fs,
                fontweight="bold" if differs else "normal",
            )
            if differs:
                ax_l.add_patch(Rectangle((xi - 0.5, yi - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.2))
    ax_l.set_yticks(range(len(lams)), [f"λ={x:g}" + (" (run)" if x == run_lam else "") for x in lams], fontsize=8)
    ax_l.set_xticks(range(k), [str(i + 1) for i in range(k)], fontsize=fs)
    ax_l.set_xlabel("pick", fontsize=8)
    ax_l.set_title("selection order by λ (λ=1: relevance only; λ=0: diversity only; outlined: ≠ run)", fontsize=9)

    ax_k.axis("off")
    ax_k.set_title("key: relevance rank → chunk", fontsize=9, loc="left")
    ax_k.text(
        0.0, 1.0, "\n".join(key_lines), va="top", ha="left", fontsize=7, family="monospace", transform=ax_k.transAxes
    )
    fig.suptitle("MMR: relevance vs redundancy", fontsize=12)
    return fig


# -- fusion -----------------------------------------------------------------------------------
def plot_fusion(run: Any, fusion: Any = None, call: int = 0, max_rows: int = 30, labels: int = 12) -> Figure:
    """Left: the top ``max_rows`` of the fused list, each chunk's weighted RRF terms
    ``w_v/(k+rank_v)`` and ``w_k/(k+rank_k)`` stacked and normalised by the best attainable score
    (ranks annotated). Top right: vector score against keyword score for *every* candidate, the
    returned ones highlighted and the best ``labels`` named. Bottom right: the fused score along
    the whole fused list, split into its two terms, with the match-count cut. With one retriever
    only, the raw scores of that list are shown instead (no RRF). The figure's height is bounded
    whatever the number of candidates (150–500 after over-recall)."""
    rows = [r for r in fusion_rows(run, fusion) if r["call"] == call]
    if not rows:
        raise ValueError(f"no fusion rows for search call {call}")
    mode = rows[0]["fusion"]
    rows.sort(key=lambda r: (r["fused_rank"] is None, r["fused_rank"] or 0))
    drawn = rows[: max(1, int(max_rows))]
    fs = 8 if len(drawn) <= 12 else 7
    fig = _figure(13, min(MAX_FIGURE_HEIGHT, max(5.0, 1.6 + _row_height(len(drawn)) * max(3, len(drawn)))))
    gs = fig.add_gridspec(2, 2, width_ratios=[1.35, 1], height_ratios=[1.3, 1])
    ax_b = fig.add_subplot(gs[:, 0])
    ax_s = fig.add_subplot(gs[0, 1])
    ax_r = fig.add_subplot(gs[1, 1])
    ys = list(range(len(drawn)))
    top = 1.0
    if mode == "rrf":
        for r in rows:
            if r["rrf_raw"] and r["rrf_normalized"]:
                top = r["rrf_raw"] / r["rrf_normalized"]
                break
        for y, r in zip(ys, drawn):
            v = (r["vector_rrf"] or 0.0) / top
            k = (r["keyword_rrf"] or 0.0) / top
            alpha = 1.0 if r["returned"] else 0.35
            ax_b.barh(y, v, color=C_VECTOR, alpha=alpha, height=0.6, label="vector term" if y == 0 else None)
            ax_b.barh(y, k, left=v, color=C_KEYWORD, alpha=alpha, height=0.6, label="keyword term" if y == 0 else None)
            rv = f"v#{r['vector_rank']}" if r["vector_rank"] else "v –"
            rk = f"k#{r['keyword_rank']}" if r["keyword_rank"] else "k –"
            ax_b.text(v + k, y, f" {v + k:.3f}  ({rv}, {rk})", va="center", fontsize=fs)
        ax_b.set_xlim(0, 1.45)
        ax_b.set_xlabel("normalised weighted RRF score")
        title = "RRF: each list's term w/(k + rank), stacked"
    else:
        key = "vector_score" if mode == "dedup_vector" else "keyword_score"
        for y, r in zip(ys, drawn):
            sc = r[key] or 0.0
            ax_b.barh(y, sc, color=C_VECTOR if key == "vector_score" else C_KEYWORD, height=0.6)
            ax_b.text(sc, y, f" {sc:.3f}", va="center", fontsize=fs)
        ax_b.set_xlabel(key.replace("_", " "))
        title = f"one retriever only ({mode}): raw scores, no RRF"
    if len(drawn) < len(rows):
        title += f"\ntop {len(drawn)} of {len(rows)} candidates (all of them on the right)"
    ax_b.set_title(title, fontsize=10)
    ax_b.set_yticks(
        ys, [f"{r['fused_rank'] or '–'}. {_clip_label(short_id(r['chunk_id']))}" for r in drawn], fontsize=fs
    )
    ax_b.set_ylim(len(drawn) - 0.5, -0.5)
    if mode == "rrf":
        ax_b.legend(loc="lower right", fontsize=7)

    # every candidate: one collection per colour/marker, only the best few named
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for r in rows:
        x = r["vector_score"] if r["vector_score"] is not None else 0.0
        y = r["keyword_score"] if r["keyword_score"] is not None else 0.0
        color = C_KEPT if r["returned"] else C_MUTED
        marker = "o" if (r["vector_rank"] and r["keyword_rank"]) else ("s" if r["vector_rank"] else "^")
        gx, gy = groups.setdefault((color, marker), ([], []))
        gx.append(x)
        gy.append(y)
    for (color, marker), (gx, gy) in sorted(groups.items()):
        ax_s.scatter(gx, gy, color=color, marker=marker, s=18 if len(rows) > 40 else 36, alpha=0.8)
    for r in rows[: max(0, int(labels))]:
        x = r["vector_score"] if r["vector_score"] is not None else 0.0
        y = r["keyword_score"] if r["keyword_score"] is not None else 0.0
        ax_s.annotate(str(r["fused_rank"] or "–"), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax_s.set_xlabel("vector score (0 = not in the vector list)", fontsize=8)
    ax_s.set_ylabel("keyword score (0 = not in the list)", fontsize=8)
    ax_s.set_title(
        f"all {len(rows)} candidates: ● both lists, ■ vector only, ▲ keyword only\ngreen = returned; numbers = fused rank",
        fontsize=9,
    )

    ranked = [r for r in rows if r["fused_rank"] is not None]
    xr = [r["fused_rank"] for r in ranked]
    if mode == "rrf":
        vv = [(r["vector_rrf"] or 0.0) / top for r in ranked]
        kk = [(r["keyword_rrf"] or 0.0) / top for r in ranked]
        ax_r.stackplot(xr, vv, kk, colors=[C_VECTOR, C_KEYWORD], alpha=0.7, labels=["vector term", "keyword term"])
        ax_r.set_ylabel("normalised RRF", fontsize=8)
    else:
        ax_r.plot(xr, [r["fused_score"] or 0.0 for r in ranked], color=C_VECTOR)
        ax_r.set_ylabel("score", fontsize=8)
    returned = sum(1 for r in rows if r["returned"])
    if returned and ranked:
        ax_r.axvline(returned + 0.5, color=C_DROPPED, linestyle="--", linewidth=1, label=f"{returned} returned")
    ax_r.set_xlabel("fused rank", fontsize=8)
    ax_r.set_title("fused score along the whole list", fontsize=9)
    ax_r.legend(fontsize=7, loc="upper right")
    fig.suptitle("Hybrid search fusion", fontsize=12)
    return fig


# -- merge ------------------------------------------------------------------------------------
_FATE_COLOR = {"kept": C_KEPT, "merged": C_MODEL}


def plot_merge(run: Any) -> Figure:
    """One row per chunk that entered the merge: its length before (light) and after (dark), the
    fate (kept, merged into another chunk, dropped as a partial overlap or duplicate) and what
    happened to it (chunks fused into it, neighbours added, parent chunk)."""
    rows = merge_rows(run)
    fig = _figure(11, min(MAX_FIGURE_HEIGHT, 1.4 + (0.5 if len(rows) <= 12 else 0.3) * max(3, len(rows))))
    ax = fig.subplots()
    ys = list(range(len(rows)))
    longest = 1
    for y, r in zip(ys, rows):
        color = _FATE_COLOR.get(r["fate"], C_DROPPED)
        lin = r["length_in"] or 0
        lout = r["length_out"] or 0
        longest = max(longest, lin, lout)
        ax.barh(y - 0.17, lin, height=0.32, color=color, alpha=0.35, label="length in" if y == 0 else None)
        if r["length_out"] is not None:
            ax.barh(y + 0.17, lout, height=0.32, color=color, label="length out" if y == 0 else None)
        notes = [
            r["fate"] if r["fate"] != "merged" else f"merged into {short_id(r['merged_into'])} ({r['merge_action']})"
        ]
        if r["absorbed"]:
            notes.append("fused ← " + ", ".join(short_id(x) for x in r["absorbed"]))
        if r["expanded_prev"] or r["expanded_next"]:
            notes.append(f"+{len(r['expanded_prev'])} before / +{len(r['expanded_next'])} after")
        if r["parent"]:
            notes.append(f"parent {short_id(r['parent'])}")
        if r["origin"] == "history":
            notes.append("from history")
        ax.text(max(lin, lout), y, "  " + "; ".join(notes), va="center", fontsize=8)
    ax.set_yticks(ys, [short_id(r["id"]) for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, longest * 2.2)
    ax.set_xlabel("content length (characters): before the merge (light) / after (dark)")
    from matplotlib.patches import Patch

    handles = [
        Patch(color=C_KEPT, label="kept"),
        Patch(color=C_MODEL, label="merged into another"),
        Patch(color=C_DROPPED, label="dropped (overlap / duplicate)"),
    ]
    ax.legend(handles=handles, loc="lower right", fontsize=7)
    ax.set_title("Merge: fused, expanded and dropped chunks", fontsize=12)
    return fig


# -- timings ----------------------------------------------------------------------------------
def plot_stage_timings(run: Any) -> Figure:
    """The stages on a time line (ms from the first stage's start); failed stages in red."""
    timings = list(getattr(run, "timings", None) or [])
    if not timings:
        raise ValueError("this run has no stage timings")
    t0 = min(t.started_at for t in timings)
    fig = _figure(10, 1.2 + 0.38 * len(timings))
    ax = fig.subplots()
    ends = []
    for y, t in enumerate(timings):
        start = (t.started_at - t0) * 1000
        color = C_DROPPED if t.error else C_MODEL
        ax.barh(y, max(t.duration_ms, 0.01), left=start, color=color, height=0.6)
        ax.text(
            start + t.duration_ms,
            y,
            f" {t.duration_ms:.1f} ms" + (f"  {t.error_type or 'error'}" if t.error else ""),
            va="center",
            fontsize=8,
        )
        ends.append(start + t.duration_ms)
    ax.set_yticks(range(len(timings)), [t.event for t in timings], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(ends) * 1.25 + 1)
    ax.set_xlabel("ms since the first stage started")
    total = getattr(run, "total_ms", 0.0) or 0.0
    ax.set_title("Stage timings" + (f" (request total {total:.0f} ms)" if total else ""), fontsize=12)
    return fig

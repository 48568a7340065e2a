"""The rerank views: the threshold ladder and the stacked composite score per candidate, and MMR's
greedy steps with the picks at other λ."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.lab.frames import (
    mmr_inputs,
    mmr_selection,
    rerank_rows,
    rerank_threshold_outcome,
    short_id,
)
from rag_lab.lab.plots.common import (
    C_BOOST,
    C_DROPPED,
    C_MODEL,
    C_MUTED,
    DEFAULT_LAMBDAS,
    MAX_FIGURE_HEIGHT,
    _clip_label,
    _figure,
    _row_height,
    _run_params,
    candidate_fate,
    composite_parts,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rag_lab.lab.frames.common import Viewed


def plot_composite_scores(run: Viewed, threshold: float | None = None, max_rows: int = 30) -> Figure:
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
        left = 0.0
        for key, width, color in composite_parts(r):
            label = lab(key, f"{key} × {_w(run, key)}")
            ax_c.barh(y, width, left=left, color=color, alpha=alpha, height=0.6, label=label)
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
        note = f" {end:.3f}" + (f"  {' '.join(tags)}" if tags else "") + candidate_fate(r, alive)
        ax_c.text(end, y, note, va="center", fontsize=fs)
    ax_c.set_xlabel("composite score (stacked weighted parts) and boosts")
    ax_c.set_xlim(0, max(1.25, max(((r["boosted_score"] or 0.0) for r in rows), default=1.0) + 0.35))
    ax_c.legend(loc="lower right", fontsize=7)
    ax_c.set_title("composite = clamp(w·model + w·base + w·source) · boosts", fontsize=10)
    shown = "" if len(rows) == len(all_rows) else f" (first {len(rows)} of {len(all_rows)} candidates drawn)"
    fig.suptitle("Rerank: composite score per candidate" + shown, fontsize=12)
    return fig


def _w(run: Viewed, key: str) -> str:
    p = _run_params(run)
    return f"{getattr(p, f'composite_{key}_weight'):g}"


# -- MMR --------------------------------------------------------------------------------------
def plot_mmr(run: Viewed, lambdas: Sequence[float] = DEFAULT_LAMBDAS, lam: float | None = None) -> Figure:
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

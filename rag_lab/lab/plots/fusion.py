"""The hybrid-search fusion view: vector vs keyword ranks and scores and the weighted RRF result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_lab.lab.frames import (
    fusion_rows,
    short_id,
)
from rag_lab.lab.plots.common import (
    C_DROPPED,
    C_KEPT,
    C_KEYWORD,
    C_MUTED,
    C_VECTOR,
    MAX_FIGURE_HEIGHT,
    _clip_label,
    _figure,
    _row_height,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rag_lab.lab.frames.common import Viewed


def plot_fusion(run: Viewed, fusion: object = None, call: int = 0, max_rows: int = 30, labels: int = 12) -> Figure:
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

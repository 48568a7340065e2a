"""The pictures the slider views redraw on every change, as inline SVG written directly.

The notebooks' figures (:func:`~rag_lab.lab.plots.plot_composite_scores`,
:func:`~rag_lab.lab.plots.plot_mmr`) are matplotlib; rasterising one to PNG takes 250–450 ms on
the development machine (constrained layout and text rendering), longer than a slider may take.
These two draw the same facts — from the same rows, ladder and MMR re-selection — as a few hundred
SVG elements in a few milliseconds, sent to the browser with the view's text.

Each drawing's root carries ``data-state`` (what it shows: ``threshold=0.60 kept=3`` or
``lambda=0.30 picks=4,1,2``), which the browser test reads to know the picture was redrawn, and
each bar its value (``data-value``), which the unit tests check against the rows.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.lab.frames import mmr_inputs, mmr_selection, rerank_rows, rerank_threshold_outcome, short_id
from rag_lab.lab.plots.common import (
    C_BOOST,
    C_DROPPED,
    C_MODEL,
    C_MUTED,
    DEFAULT_LAMBDAS,
    candidate_fate,
    composite_parts,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.frames.common import Viewed

__all__ = ["composite_svg", "mmr_svg"]

ROW_H = 18  # px per candidate row
LABEL_W = 190  # px for the chunk labels
MODEL_W = 220  # px for the model-score axis [0, 1]
COMP_W = 300  # px for the composite axis [0, 1.25]
FONT = 'font-family="sans-serif" font-size="11"'


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _text(x: float, y: float, text: object, anchor: str = "start", **attrs: object) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{_esc(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{_esc(text)}</text>'


def _bar(x: float, y: float, w: float, h: float, color: str, value: float, opacity: float = 1.0, kind: str = "") -> str:
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(0.0, w):.1f}" height="{h:.1f}" fill="{color}" '
        f'fill-opacity="{opacity:g}" data-kind="{kind}" data-value="{value:.6g}"/>'
    )


def _legend(x: float, y: float, items: list[tuple[str, str]]) -> list[str]:
    """Colour squares with their labels on one line (about 6.5 px per character)."""
    out = []
    for color, label in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{color}"/>')
        out.append(_text(x + 14, y, label, fill="#555"))
        x += 14 + 6.5 * len(label) + 16
    return out


def _svg(width: float, height: float, state: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rag-lab-view" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" {FONT} data-state="{_esc(state)}">' + "".join(body) + "</svg>"
    )


def composite_svg(run: Viewed, threshold: float | None = None, max_rows: int = 30) -> str:
    """Each candidate's model score against the threshold (left) and its composite score as the
    stacked weighted parts plus boosts (right), as :func:`plot_composite_scores` draws them;
    candidates the ladder drops at ``threshold`` are greyed."""
    all_rows = rerank_rows(run)
    rows = all_rows[: max(1, int(max_rows))]
    o = rerank_threshold_outcome(run, threshold)
    kept = set(o.kept)
    top, x_model = 34, LABEL_W
    x_comp = x_model + MODEL_W + 60
    width, height = x_comp + COMP_W + 170, top + ROW_H * max(1, len(rows)) + 40
    sx_m, sx_c = MODEL_W / 1.0, COMP_W / 1.25
    body = [
        _text(
            6,
            14,
            f"threshold {o.threshold:.2f}: {len(kept)} of {len(all_rows)} survive ({o.outcome})",
            font_weight="bold",
        ),
        _text(x_model, 28, "rerank model score", fill="#555"),
        _text(x_comp, 28, "composite = clamp(w·model + w·base + w·source) · boosts", fill="#555"),
    ]
    for y_i, r in enumerate(rows):
        y = top + y_i * ROW_H
        alive = y_i in kept or bool(r["kept_by"])
        body.append(_text(LABEL_W - 6, y + 12, short_id(r["id"])[:30], anchor="end"))
        m = r["model_score"]
        if m is not None:
            body.append(
                _bar(x_model, y + 3, sx_m * float(m), ROW_H - 6, C_MODEL if alive else C_MUTED, float(m), kind="model")
            )
            body.append(_text(x_model + sx_m * float(m) + 3, y + 12, f"{float(m):.3f}", font_size=10))
        left, opacity = 0.0, 1.0 if alive else 0.3
        for key, part, color in composite_parts(r):
            body.append(_bar(x_comp + sx_c * left, y + 3, sx_c * part, ROW_H - 6, color, part, opacity, f"{key}_part"))
            left += part
        composite = min(1.0, left)
        boosted = r["boosted_score"] if r["boosted_score"] is not None else r["final_score"]
        end = composite
        if boosted is not None and boosted > composite + 1e-9:
            body.append(
                _bar(
                    x_comp + sx_c * composite,
                    y + 3,
                    sx_c * (boosted - composite),
                    ROW_H - 6,
                    C_BOOST,
                    boosted,
                    opacity,
                    "boost",
                )
            )
            end = float(boosted)
        note = f"{end:.3f}" + candidate_fate(r, alive)
        body.append(_text(x_comp + sx_c * end + 3, y + 12, note, font_size=10, fill="#333" if alive else "#999"))
    bottom = top + ROW_H * max(1, len(rows))
    lines = [(o.threshold, "5,3", f"threshold {o.threshold:.2f}")]
    if o.threshold_used != o.threshold:
        lines.append((o.threshold_used, "2,2", f"degraded retry {o.threshold_used:.2f}"))
    if o.fallback_min > 0:
        lines.append((o.fallback_min, "1,3", f"top-1 fallback floor {o.fallback_min:.2f}"))
    for i, (value, dash, label) in enumerate(lines):
        x = x_model + sx_m * min(1.05, max(0.0, float(value)))
        body.append(
            f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{bottom + 2}" stroke="{C_DROPPED}" '
            f'stroke-dasharray="{dash}" stroke-width="1.5" data-kind="line" data-value="{float(value):.6g}"/>'
        )
        body.append(_text(x_model, bottom + 14 + 12 * i, label, fill=C_DROPPED, font_size=10))
    if len(rows) < len(all_rows):
        body.append(_text(x_comp, bottom + 14, f"first {len(rows)} of {len(all_rows)} candidates drawn", fill="#555"))
    return _svg(width, height + 12 * (len(lines) - 1), f"threshold={o.threshold:.2f} kept={len(kept)}", body)


def mmr_svg(run: Viewed, lam: float | None = None, lambdas: Sequence[float] = DEFAULT_LAMBDAS) -> str:
    """MMR at ``lam`` (default the run's λ) step by step — each pick's relevance, its redundancy
    with what was picked before and its MMR value — and the selection order at each λ of
    ``lambdas``, as :func:`plot_mmr` draws them: candidates named by relevance rank ``#n``, cells
    that differ from the run's own λ outlined."""
    inputs = mmr_inputs(run)
    if not inputs or not inputs.get("ids"):
        raise ValueError("this run has no MMR selection (no candidate passed the rerank threshold)")
    run_lam = float(inputs["lambda"])
    lam = run_lam if lam is None else float(lam)
    ids, scores, k = inputs["ids"], [float(s) for s in inputs["scores"]], int(inputs["k"])
    rank = {idx: n for n, idx in enumerate(sorted(range(len(ids)), key=lambda i: (-scores[i], i)), 1)}
    steps = mmr_selection(inputs, lam, runner_ups=0)
    lams = sorted({float(x) for x in lambdas} | {run_lam, lam})
    grid = {row_lam: [s["index"] for s in mmr_selection(inputs, row_lam, runner_ups=0)] for row_lam in lams}
    run_row = grid[run_lam]
    cell, gap, left = 34, 14, 90
    steps_w = max(len(steps), 1) * (2 * 12 + gap)
    width = max(left + k * cell + 260, left + steps_w + 40)
    chart_top, chart_h = 34, 110
    grid_top = chart_top + chart_h + 44
    height = grid_top + 18 + cell * len(lams) + 10
    picks_text = ",".join(str(rank[s["index"]]) for s in steps)
    body = [_text(6, 14, f"MMR steps at λ = {lam:g} (k = {k}, {len(ids)} candidates)", font_weight="bold")]
    lo = min(0.0, min((s["mmr"] for s in steps), default=0.0))
    scale = chart_h / (1.0 - lo)

    def y_of(v: float) -> float:
        return chart_top + (1.0 - v) * scale

    zero = y_of(0.0)
    body.append(f'<line x1="{left - 4}" y1="{zero:.1f}" x2="{left + steps_w}" y2="{zero:.1f}" stroke="#999"/>')
    points = []
    for n, s in enumerate(steps):
        x = left + n * (2 * 12 + gap)
        for dx, value, color, kind in (
            (0, s["relevance"], C_MODEL, "relevance"),
            (12, s["redundancy"], C_DROPPED, "redundancy"),
        ):
            y = y_of(max(0.0, value))
            body.append(_bar(x + dx, y, 11, zero - y, color, value, kind=kind))
        points.append(f"{x + 12:.1f},{y_of(s['mmr']):.1f}")
        body.append(_text(x + 12, zero + 24, f"{n + 1}: #{rank[s['index']]}", anchor="middle", font_size=10))
    if points:
        body.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="black" stroke-width="1.5" data-kind="mmr"/>'
        )
        body += [f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="3" fill="black"/>' for p in points]
    body += _legend(
        left,
        chart_top + chart_h + 34,
        [(C_MODEL, "relevance"), (C_DROPPED, "max redundancy (Jaccard)"), ("black", "MMR value = λ·rel − (1−λ)·red")],
    )
    body.append(_text(6, grid_top + 12, "selection order by λ (outlined: ≠ the run's λ)", font_weight="bold"))
    for row_n, row_lam in enumerate(lams):
        y = grid_top + 18 + row_n * cell
        label = f"λ={row_lam:g}" + (" (run)" if row_lam == run_lam else "") + (" ◀" if row_lam == lam else "")
        body.append(_text(left - 6, y + cell / 2 + 4, label, anchor="end"))
        for col, idx in enumerate(grid[row_lam]):
            x = left + col * cell
            differs = col >= len(run_row) or idx != run_row[col]
            shade = 0.15 + 0.6 * (1 - (rank[idx] - 1) / max(1, len(ids) - 1))
            body.append(
                f'<rect x="{x + 1}" y="{y + 1}" width="{cell - 2}" height="{cell - 2}" fill="{C_MODEL}" '
                f'fill-opacity="{shade:.2f}" stroke="{"black" if differs else "none"}" stroke-width="1.5"/>'
            )
            body.append(
                _text(
                    x + cell / 2,
                    y + cell / 2 + 4,
                    f"#{rank[idx]}",
                    anchor="middle",
                    font_weight="bold" if differs else "normal",
                )
            )
    key_x = left + k * cell + 16
    picked = sorted({i for row in grid.values() for i in row}, key=lambda i: rank[i])
    for n, i in enumerate(picked[: len(lams) * 2]):
        body.append(
            _text(
                key_x, grid_top + 30 + n * 13, f"#{rank[i]} {short_id(ids[i])[:28]} rel {scores[i]:.3f}", font_size=10
            )
        )
    return _svg(
        width,
        max(height, grid_top + 40 + 13 * len(picked[: len(lams) * 2])),
        f"lambda={lam:.2f} picks={picks_text}",
        body,
    )

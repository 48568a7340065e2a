"""The funnel view: where each gold document of one question is at every stage (vector and keyword
lists, fused, search output, rerank, MMR, merge, final), read from the run's own records
(:func:`rag_lab.tuning.funnel.build_funnel`; nothing is run again)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rag_lab.lab.frames.common import Viewed
from rag_lab.tuning.funnel import QuestionFunnel, build_funnel

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["funnel_frame", "funnel_of", "funnel_rows"]


def funnel_of(obj: Any, gold_ids: Iterable[str]) -> QuestionFunnel:
    """The gold funnel of a :class:`~rag_lab.lab.Run` (or a capture / snapshot with a final
    state): its ``diagnostics`` and final contexts, else the final snapshot's."""
    diagnostics = getattr(obj, "diagnostics", None)
    references = getattr(obj, "references", None)
    snaps = getattr(obj, "snapshots", None) or {}
    final = snaps.get("final") if isinstance(snaps, dict) else None
    state = getattr(obj, "state", None)
    if final is None and state is not None and hasattr(state, "diagnostics"):
        final = obj  # a ChatManage
    if not diagnostics and final is not None:
        diagnostics = final.state.diagnostics
    if references is None and final is not None:
        references = final.state.merge_result
    return build_funnel(diagnostics or {}, list(references or []), gold_ids)


def _num(x: object) -> object:
    """A score as the notes show it: four places."""
    return f"{x:.4f}" if isinstance(x, float) else x


def _note(stage: str, detail: dict[str, Any]) -> str:
    if stage == "fused" and detail.get("fused", {}).get("cut"):
        return f"beyond the match count {detail['fused']['cut']}"
    if stage == "rerank" and "rerank" in detail:
        rr = detail["rerank"]
        if "model" not in rr:
            return f"rerank {rr.get('outcome')}: input passed on"
        kept = "passed" if rr.get("passed") else (f"kept by {rr['kept_by']}" if rr.get("kept_by") else "below")
        return f"model {_num(rr.get('model'))}, composite {_num(rr.get('composite'))}, {kept} threshold {rr.get('threshold')}"
    if stage == "mmr" and "mmr" in detail:
        return f"MMR pick {detail['mmr']['pick']}"
    if stage == "merge" and "merge" in detail:
        m = detail["merge"]
        parts = [
            f"merged into {m['merged_into']}" if m.get("merged_into") else "",
            "expanded" if m.get("expanded") else "",
        ]
        parts.append("dropped as overlap" if m.get("dropped") else "")
        return ", ".join(p for p in parts if p)
    if stage == "final" and "top_k" in detail:
        return f"cut by FILTER_TOP_K (k = {detail['top_k']['k']})"
    return ""


def funnel_rows(obj: Viewed, gold_ids: Iterable[str] = ()) -> list[dict[str, object]]:
    """One row per (gold document, known stage): its document rank there (``None``: absent), the
    best chunk and its score where the stage records one, what the stage did to it (``note``), and
    ``lost_here`` on the stage that lost it (with ``why``)."""
    f = funnel_of(obj, gold_ids)
    rows = []
    for g in f.gold:
        for stage in f.stages:
            d = g.detail.get(stage) if stage in ("vector", "keyword", "fused") else None
            rows.append(
                {
                    "gold_id": g.id,
                    "stage": stage,
                    "rank": g.ranks.get(stage),
                    "of": len(f.stages[stage]),
                    "chunk": d.get("chunk")
                    if d
                    else (g.detail.get("rerank", {}).get("chunk") if stage == "rerank" else None),
                    "score": d.get("score") if d else None,
                    "note": _note(stage, g.detail),
                    "lost_here": g.lost_at == stage,
                    "why": g.why if g.lost_at == stage else "",
                }
            )
    return rows


def funnel_frame(obj: Viewed, gold_ids: Iterable[str]) -> pd.DataFrame:
    """:func:`funnel_rows` as a DataFrame (``Run.frame("funnel", gold_ids=[...])``)."""
    import pandas as pd

    return pd.DataFrame(funnel_rows(obj, gold_ids))

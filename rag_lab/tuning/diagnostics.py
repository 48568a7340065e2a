"""The rerank stage's diagnostics as the fast evaluator replays them (:meth:`FastEvaluator.trace
<rag_lab.tuning.evaluator.FastEvaluator.trace>`): the fields the pipeline's stage writes and the
gold funnel (:mod:`rag_lab.tuning.funnel`) reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.reranking.composite import format_score
from rag_lab.reranking.image import IMAGE_VECTOR
from rag_lab.types.diagnostics import RerankDiagnostics
from rag_lab.types.params import PipelineParams

__all__ = ["rerank_diagnostics"]


def rerank_diagnostics(
    cr: Any, outcome: str, picks: Sequence[Any] | None, record: Mapping[str, Any], p: PipelineParams
) -> RerankDiagnostics:
    """The rerank stage's diagnostics as the pipeline writes them, from the captured candidates
    ``cr``, the replayed ``outcome`` and ``picks`` (:class:`~rag_lab.tuning.evaluator.Picked`) and
    what :meth:`~rag_lab.tuning.evaluator.FastEvaluator.rerank` put in ``record``."""
    if not cr.candidates:
        return RerankDiagnostics(outcome="no_candidates", candidates=0)
    if outcome == "model_error":
        return RerankDiagnostics(outcome=outcome, error=cr.error, candidates=len(cr.candidates))
    n = len(cr.candidates)
    model_scores = {int(i): float(s) for i, s in zip(cr.model_index, cr.model_score) if 0 <= i < n}
    scored: dict[int, tuple[float, float, bool]] = {}  # composite, final, image
    idx = record.get("idx")
    if idx is not None:
        for i, c, f in zip(idx.tolist(), record["comp"].tolist(), record["final"].tolist()):
            scored[int(i)] = (c, f, False)
    selected = set()
    for x in picks or []:
        selected.add(x.index)
        if x.image:
            boost = p.faq_score_boost if x.faq_boosted else 1.0
            scored[x.index] = (x.composite, x.composite * boost if x.faq_boosted else x.composite, True)
    rows = []
    for i, r in enumerate(cr.candidates):
        hit = scored.get(i)
        kept_by = IMAGE_VECTOR if hit is not None and hit[2] else (r.metadata or {}).get("kept_by", "")
        rows.append(
            {
                "id": r.id,
                "knowledge_id": r.knowledge_id,
                "base_score": r.score,
                "model_score": model_scores.get(i),
                "composite_score": float(format_score(hit[0])) if hit is not None else None,
                "final_score": hit[1] if hit is not None else None,
                "passed_threshold": hit is not None and not hit[2] and kept_by != IMAGE_VECTOR,
                "kept_by": kept_by,
                "selected": i in selected,
            }
        )
    ranked = [cr.candidates[i].id for i in idx.tolist()] if idx is not None else []
    return RerankDiagnostics(
        outcome=outcome,
        candidates=n,
        threshold=p.rerank_threshold,
        threshold_used=record.get("threshold_used"),
        mmr_k=record.get("k"),
        ranked_ids=ranked,
        rows=rows,
        mmr=[{"step": n, "index": int(j)} for n, j in enumerate(record.get("chosen") or [])],
    )

"""The rerank stage's diagnostics as the fast evaluator replays them (:meth:`FastEvaluator.trace
<rag_lab.tuning.evaluator.FastEvaluator.trace>`): the fields the pipeline's stage writes and the
gold funnel (:mod:`rag_lab.tuning.funnel`) reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from rag_lab.reranking.scored import KeptScores, RerankRowsInput
from rag_lab.types.diagnostics import RerankDiagnostics
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:
    from rag_lab.tuning.evaluator import Picked
    from rag_lab.tuning.inputs import CapturedRerank

__all__ = ["RerankRecord", "rerank_diagnostics"]


class RerankRecord(TypedDict, total=False):
    """What :meth:`~rag_lab.tuning.evaluator.FastEvaluator.rerank` records for the diagnostics:
    the ranked candidates, the MMR picks and ``k``, the threshold the ladder used and the image
    candidates kept."""

    ranked: KeptScores
    chosen: list[int]
    k: int
    threshold_used: float
    images: KeptScores


def rerank_diagnostics(
    cr: CapturedRerank, outcome: str, picks: Sequence[Picked] | None, record: RerankRecord, p: PipelineParams
) -> RerankDiagnostics:
    """The rerank stage's diagnostics as the pipeline writes them, from the captured candidates
    ``cr``, the replayed ``outcome`` and ``picks`` (:class:`~rag_lab.tuning.evaluator.Picked`) and
    what :meth:`~rag_lab.tuning.evaluator.FastEvaluator.rerank` put in ``record``; the rows are
    the stage's own (:class:`~rag_lab.reranking.scored.RerankRowsInput`)."""
    if not cr.candidates:
        return RerankDiagnostics(outcome="no_candidates", candidates=0)
    if outcome == "model_error":
        return RerankDiagnostics(outcome=outcome, error=cr.error, candidates=len(cr.candidates))
    n = len(cr.candidates)
    none = KeptScores.none()
    ranked: KeptScores = record.get("ranked", none)
    images: KeptScores = record.get("images", none)
    selected = {x.index for x in picks or []}
    rows = RerankRowsInput.capture(cr.candidates, cr.model_index, cr.model_score, ranked, images, selected)
    return RerankDiagnostics(
        outcome=outcome,
        candidates=n,
        threshold=p.rerank_threshold,
        threshold_used=record.get("threshold_used"),
        mmr_k=record.get("k"),
        ranked_ids=rows.ids_of(ranked.index)(),
        rows=rows.build(),
        mmr=[{"step": n, "index": int(j)} for n, j in enumerate(record.get("chosen") or [])],
    )

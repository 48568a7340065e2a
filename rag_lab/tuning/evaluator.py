"""The fast evaluator: a config's final contexts for every captured question, without the event
pipeline (spec §4.6–§4.9 replayed from :mod:`rag_lab.tuning.inputs`).

Per question and config:

1. rerank, with the stage's own functions on the captured arrays: the threshold ladder
   (:mod:`rag_lab.reranking.ladder`), the composite score, FAQ boost, stable sort and the image
   hits kept by vector score (:mod:`rag_lab.reranking.scored`), MMR over the captured Jaccard
   matrix (:func:`rag_lab.reranking.mmr.select_mmr_jaccard`), the wiki boost
   (:func:`rag_lab.reranking.composite.boosted_order`);
2. merge, the stage's own :func:`~rag_lab.pipeline.plugins.merge.merge_results` on copies of the
   picked results only (text is joined for them alone), its store reads served by the capture's
   :class:`~rag_lab.tuning.inputs.StoreMemo`;
3. FILTER_TOP_K's :func:`~rag_lab.pipeline.plugins.filter_top_k.filter_top_k`.

Merge results are memoised by what merge reads (the picked items with their scores, the merge
params and top-K), so configs that pick the same results for a question share one merge.
``rag-lab sweep --check N`` re-runs the N best configs through the full pipeline as an audit
(:func:`compare_references`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rag_lab.pipeline.plugins.filter_top_k import filter_top_k, top_k_diagnostics
from rag_lab.pipeline.plugins.merge import merge_input, merge_results
from rag_lab.pipeline.plugins.rerank import annotate_reranked
from rag_lab.reranking.composite import boosted_order
from rag_lab.reranking.image import IMAGE_VECTOR
from rag_lab.reranking.ladder import LadderOutcome, apply_threshold_ladder
from rag_lab.reranking.mmr import select_mmr_jaccard
from rag_lab.reranking.scored import KeptScores, faq_boost_of, image_kept, model_score_of, rank_kept
from rag_lab.tuning.diagnostics import RerankRecord, rerank_diagnostics
from rag_lab.tuning.inputs import QuestionInputs
from rag_lab.tuning.params import ANSWER_PARAMS, MERGE_PARAMS, POST_RETRIEVAL_PARAMS
from rag_lab.types.diagnostics import MergeDiagnostics
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

__all__ = ["FastEvaluator", "Picked", "compare_references", "doc_ids"]


def doc_ids(references: Sequence[SearchResult]) -> list[str]:
    """Document ids of the final contexts in rank order, each once (``Run.retrieved_doc_ids``)."""
    out: list[str] = []
    seen: set[str] = set()
    for r in references:
        if r.knowledge_id and r.knowledge_id not in seen:
            seen.add(r.knowledge_id)
            out.append(r.knowledge_id)
    return out


@dataclass(frozen=True, slots=True)
class Picked:
    """One result of the rerank stage: candidate position, model / base / composite / final score,
    FAQ-boosted, kept by vector score (image), wiki-boosted."""

    index: int
    model: float
    base: float
    composite: float
    score: float
    faq_boosted: bool = False
    image: bool = False
    wiki: bool = False


@dataclass(frozen=True, slots=True)
class _Ranked:
    """One question's rerank stage before MMR under one config (see ``FastEvaluator._ranked``):
    the ladder's result, the kept items scored in final-score order, the Jaccard matrix of them,
    their (model, base, composite, final, FAQ, position) as Python lists for the picks, and the
    MMR picks per λ."""

    ladder: LadderOutcome
    ranked: KeptScores
    jaccard: np.ndarray
    lists: tuple[list[float], list[float], list[float], list[float], list[bool], list[int]]
    #: λ → the longest MMR pick list computed so far (greedy MMR's first k picks do not depend on
    #: how many more follow, so a shorter top-K reads a prefix)
    picks_by_lambda: dict[float, list[int]] = field(default_factory=dict)

    def mmr_picks(self, k: int, lam: float) -> list[int]:
        """The first ``k`` MMR picks at ``lam`` (``k`` at most the number of candidates)."""
        known = self.picks_by_lambda.get(lam)
        if known is None or len(known) < k:
            known = select_mmr_jaccard(self.ranked.final, self.jaccard, k, lam)
            self.picks_by_lambda[lam] = known
        return known[:k]


#: the merge output, its decisions, the final contexts and how many competed for top-K
_MergeOut = tuple[list[SearchResult], list[dict[str, object]], list[SearchResult], int | None]


@dataclass
class EvaluatorStats:
    evaluations: int = 0
    merges: int = 0
    merge_hits: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)


class FastEvaluator:
    """Evaluates configs (overrides of post-retrieval params) on captured questions.

    ``inputs``: the questions captured under ``base`` params (one retrieval config). A config
    naming any other param raises ``ValueError``: the caller captures again for it (see
    :mod:`rag_lab.tuning.params`)."""

    def __init__(self, inputs: Sequence[QuestionInputs], base: PipelineParams, memo: bool = True) -> None:
        self.inputs = list(inputs)
        self.base = base
        self.memo = memo  # False: every evaluation runs its merge (benchmarks)
        self.stats = EvaluatorStats()
        self._params: dict[tuple[tuple[str, object], ...], PipelineParams] = {}
        self._merged: dict[tuple[object, ...], _MergeOut] = {}
        self._ranked_memo: dict[tuple[object, ...], _Ranked] = {}

    # -- params ---------------------------------------------------------------------------------
    def params_for(self, config: Mapping[str, object]) -> PipelineParams:
        """The base params with ``config`` applied (validated once per distinct config)."""
        key = tuple(sorted(config.items()))
        p = self._params.get(key)
        if p is None:
            bad = sorted(k for k in config if k not in POST_RETRIEVAL_PARAMS and k not in ANSWER_PARAMS)
            if bad:
                raise ValueError(
                    f"fast evaluator: {', '.join(bad)} change the captured stage inputs (retrieval side); "
                    "capture again with them"
                )
            p = self.base.with_changes(**config) if config else self.base
            self._params[key] = p
        return p

    def needs_recapture(self, q: QuestionInputs, p: PipelineParams) -> bool:
        """True when ``q``'s search ran query expansion, whose top-k reads ``rerank_top_k``."""
        return q.expanded and p.rerank_top_k != q.rerank_top_k

    # -- rerank -----------------------------------------------------------------------------------
    def rerank(
        self, q: QuestionInputs, p: PipelineParams, record: RerankRecord | None = None
    ) -> tuple[str, list[Picked] | None]:
        """``(outcome, picks)``: the rerank stage's result as candidate positions with scores, in
        the stage's order; ``None`` when the stage leaves no rerank result (not run, no candidate,
        model error: merge then reads the search results). ``record`` (a dict) receives what the
        stage's diagnostics hold (:meth:`trace`)."""
        cr = q.rerank
        if cr is None or not cr.candidates:
            return "not_run", None
        if cr.error:
            return "model_error", None
        fallback_min = 0.0 if cr.recall_override else p.rerank_fallback_min_score
        boost = faq_boost_of(p.faq_priority_enabled, p.faq_score_boost)
        memo = self._ranked(q, p, fallback_min, boost)
        ranked = memo.ranked
        picks: list[Picked] = []
        k = min(ranked.index.size, max(1, p.rerank_top_k))
        if ranked.index.size:
            chosen = memo.mmr_picks(k, p.mmr_lambda)
            rel, base, comp, final, faq, index = memo.lists
            picks = [Picked(index[j], rel[j], base[j], comp[j], final[j], faq[j]) for j in chosen]
            if record is not None:
                record.update({"ranked": ranked, "chosen": list(chosen), "k": k})
        if record is not None:
            record.update({"threshold_used": memo.ladder.threshold_used})
        if cr.pictorial:
            n = len(cr.candidates)
            passed = set(cr.model_index[memo.ladder.positions].tolist())
            scores = model_score_of(cr.model_index, cr.model_score, n)
            images = image_kept(cr.columns, cr.candidates, cr.pictorial, passed, q.vector_threshold, scores, p, boost)
            if record is not None:
                record["images"] = images
            for i, values in zip(images.index.tolist(), images.values()):
                picks.append(Picked(i, *values, image=True))
        if q.wiki_in_scope and any(cr.is_wiki[x.index] for x in picks):
            factor = p.wiki_boost_factor
            wiki = [bool(cr.is_wiki[x.index]) for x in picks]
            boosted, order = boosted_order([x.score for x in picks], [factor if w else 1.0 for w in wiki])
            picks = [
                replace(picks[i], score=boosted[i], wiki=True) if wiki[i] else replace(picks[i], score=boosted[i])
                for i in order
            ]
        return memo.ladder.outcome, picks

    def _ranked(self, q: QuestionInputs, p: PipelineParams, fallback_min: float, boost: float | None) -> _Ranked:
        """The rerank stage up to MMR — the ladder and the kept items scored and sorted
        (:func:`~rag_lab.reranking.scored.rank_kept`), and the Jaccard matrix of them — memoised
        per question by the values it reads (configs that differ only in ``mmr_lambda`` or
        ``rerank_top_k`` share it)."""
        cr = q.rerank
        assert cr is not None
        key = (
            q.qid,
            p.rerank_threshold,
            fallback_min,
            p.rerank_degrade_factor,
            p.rerank_degrade_floor,
            boost,
            p.web_source_weight,
            p.composite_model_weight,
            p.composite_base_weight,
            p.composite_source_weight,
        )
        hit = self._ranked_memo.get(key)
        if hit is not None:
            return hit
        n = len(cr.candidates)
        ladder = apply_threshold_ladder(cr.model_index, cr.model_score, n, p.rerank_threshold, fallback_min, p)
        ranked = rank_kept(cr.columns, cr.model_index, cr.model_score, ladder, p, boost)
        idx = ranked.index
        jaccard = cr.jaccard[np.ix_(idx, idx)] if idx.size > 1 else cr.jaccard
        lists = (
            ranked.model.tolist(),
            ranked.base.tolist(),
            ranked.composite.tolist(),
            ranked.final.tolist(),
            ranked.faq.tolist(),
            idx.tolist(),
        )
        got = _Ranked(ladder, ranked, jaccard, lists, {})
        self._ranked_memo[key] = got
        return got

    # -- merge and top-K ----------------------------------------------------------------------------
    def _merge_input(
        self,
        q: QuestionInputs,
        picks: list[Picked] | None,
        outcome: str,
        p: PipelineParams,
        mlog: list[dict[str, object]],
    ) -> list[SearchResult]:
        """What merge reads: the picks as the rerank stage leaves them, or (no rerank result) the
        search results, the candidates after a model error, through the stage's own
        :func:`~rag_lab.pipeline.plugins.merge.merge_input`."""
        if picks is None:
            source = q.rerank.candidates if outcome == "model_error" and q.rerank is not None else q.search_result
            return merge_input([], source, p.rerank_top_k, mlog)
        assert q.rerank is not None
        out: list[SearchResult] = []
        for x in picks:
            r = q.rerank.candidates[x.index].copy()
            annotate_reranked(r, x.model, x.base, x.composite, x.score, x.faq_boosted)  # the wiki boost included
            if x.image:
                r.metadata["kept_by"] = IMAGE_VECTOR
            if x.wiki:
                r.metadata["wiki_boosted"] = "true"
            out.append(r)
        return merge_input(out, [], p.rerank_top_k, mlog)

    def references(self, q: QuestionInputs, p: PipelineParams) -> tuple[str, list[SearchResult]]:
        """``(outcome, final contexts)`` of question ``q`` under ``p`` (outcome ``nothing``: the
        rerank kept nothing, the pipeline answers with its fallback)."""
        if q.error:
            return "error", []
        if not q.needs_retrieval:
            return "no_retrieval", []
        outcome, picks = self.rerank(q, p)
        if picks is not None and not picks:
            return "nothing", []
        return outcome, self._merged_and_cut(q, picks, outcome, p)[2]

    def _merged_and_cut(
        self, q: QuestionInputs, picks: list[Picked] | None, outcome: str, p: PipelineParams
    ) -> tuple[list[SearchResult], list[dict[str, object]], list[SearchResult], int | None]:
        """The merge output, the merge's decisions, the final contexts and (when FILTER_TOP_K cut)
        how many competed: memoised by what merge reads."""
        key = (
            q.qid,
            outcome if picks is None else None,
            tuple(picks) if picks is not None else None,
            p.rerank_top_k,
            tuple(getattr(p, name) for name in sorted(MERGE_PARAMS)),
        )
        hit = self._merged.get(key)
        if hit is not None:
            self.stats.merge_hits += 1
            return hit
        self.stats.merges += 1
        mlog: list[dict[str, object]] = []
        source = self._merge_input(q, picks, outcome, p, mlog)
        merged = merge_results(source, q.history, q.query, p, q.store, mlog)
        refs, before = filter_top_k(list[SearchResult | None](merged), p.rerank_top_k)
        got = (merged, mlog, [r for r in refs if r is not None], before)
        if self.memo:
            self._merged[key] = got
        return got

    def trace(self, q: QuestionInputs, p: PipelineParams) -> tuple[str, list[SearchResult], dict[str, object]]:
        """``(outcome, final contexts, diagnostics)``: :meth:`references` with the records the
        pipeline's stages leave in ``state.diagnostics`` (search paths as captured; rerank outcome,
        threshold, rows, ranked ids and MMR picks; merge decisions; FILTER_TOP_K's cut), which
        :func:`rag_lab.tuning.funnel.build_funnel` reads."""
        diags: dict[str, object] = {}
        if q.search_paths is not None:
            diags["search"] = q.search_paths
        if q.error:
            return "error", [], diags
        if not q.needs_retrieval:
            return "no_retrieval", [], diags
        record: RerankRecord = {}
        outcome, picks = self.rerank(q, p, record)
        cr = q.rerank
        if cr is not None:
            diags["rerank"] = rerank_diagnostics(cr, outcome, picks, record, p)
        if picks is not None and not picks:
            return "nothing", [], diags
        merged, mlog, out, before = self._merged_and_cut(q, picks, outcome, p)
        diags["merge"] = MergeDiagnostics(steps=list(mlog))
        if before is not None:
            diags["filter_top_k"] = top_k_diagnostics(
                "merge_result",
                list[SearchResult | None](merged),
                list[SearchResult | None](out),
                before,
                p.rerank_top_k,
            )
        return outcome, out, diags

    def evaluate(self, config: Mapping[str, object], until: str = "merge") -> dict[str, list[SearchResult]]:
        """Final contexts per question id under ``config``. ``until="rerank"`` stops after the
        rerank stage and returns its picks as results (no merge, no top-K)."""
        p = self.params_for(config)
        t0 = time.perf_counter()
        out: dict[str, list[SearchResult]] = {}
        outcomes = self.stats.outcomes
        for q in self.inputs:
            if until == "rerank":
                outcome, picks = self.rerank(q, p) if q.needs_retrieval and not q.error else ("no_retrieval", None)
                cands = q.rerank.candidates if q.rerank is not None else []
                out[q.qid] = [cands[x.index] for x in picks or []]
            else:
                outcome, out[q.qid] = self.references(q, p)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        self.stats.evaluations += len(self.inputs)
        self.stats.seconds += time.perf_counter() - t0
        return out


def compare_references(expected: Sequence[SearchResult], got: Sequence[SearchResult]) -> str:
    """``""`` when two context lists are the same (ids, documents, texts and scores in order),
    else a description of the first difference."""
    if len(expected) != len(got):
        return f"{len(expected)} contexts in the pipeline, {len(got)} in the fast evaluator"
    for i, (a, b) in enumerate(zip(expected, got)):
        for name in ("id", "knowledge_id", "content", "score"):
            va, vb = getattr(a, name), getattr(b, name)
            if va != vb:
                shown_a = va if name != "content" else f"{len(va)} chars"
                shown_b = vb if name != "content" else f"{len(vb)} chars"
                return f"context {i} ({a.id}): {name} {shown_a!r} in the pipeline, {shown_b!r} in the fast evaluator"
    return ""

"""The rerank and MMR views: every scored candidate with its composite components, the rerank
threshold ladder replayed at any threshold, and the MMR inputs with a re-selection at any λ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from rag_lab.lab.frames.common import Viewed, _rerank_diag, _snapshot, _typed
from rag_lab.types.diagnostics import RerankDiagnostics
from rag_lab.types.search_result import SearchResult

#: what MMR selected from (:func:`mmr_inputs`): candidate ids, their relevance, the sorted token
#: sets of the enriched passages, ``k``, ``lambda`` and the rerank stage's stored MMR trace
MmrInputs = TypedDict(
    "MmrInputs",
    {
        "ids": list[str],
        "scores": list[float],
        "tokens": list[list[str]],
        "k": int,
        "lambda": float,
        "trace": list[dict[str, Any]],
    },
)


class RerankRow(TypedDict):
    """One rerank candidate of :func:`rerank_rows`."""

    search_rank: int
    id: str
    knowledge_id: str
    chunk_type: str
    knowledge_source: str
    base_score: float
    model_score: float | None
    model_rank: int | None
    source_weight: float
    model_part: float | None
    base_part: float
    source_part: float
    composite_score: float | None
    faq_boosted: bool
    faq_factor: float
    final_score: float | None
    wiki_boosted: bool
    memory_affinity: float
    boosted_score: float | None
    passed_threshold: bool
    kept_by: str
    selected: bool
    mmr_order: int | None
    mmr_relevance: float | None
    mmr_redundancy: float | None
    mmr_value: float | None


def _ranked_rows(diag: RerankDiagnostics) -> list[int]:
    """Row indices of the results MMR chose from, in its input order (composite score
    descending, stable). Uses ``diag.ranked_ids`` when the stage recorded it."""
    rows = diag.rows or []
    if diag.ranked_ids:
        first: dict[str, int] = {}
        for i, r in enumerate(rows):
            first.setdefault(r["id"], i)
        return [first[cid] for cid in diag.ranked_ids if cid in first]
    passed = [i for i, r in enumerate(rows) if r.get("passed_threshold") and r.get("final_score") is not None]
    return sorted(passed, key=lambda i: -float(rows[i]["final_score"]))


def rerank_rows(obj: Viewed) -> list[RerankRow]:
    """One row per rerank candidate (search order): base and model scores, the weighted parts of
    the composite score (model / base / source), FAQ, wiki and memory boosts, threshold outcome
    and MMR step (relevance, max redundancy, MMR value)."""
    snap = _snapshot(obj, "rerank")
    diag = _rerank_diag(snap)
    w = diag.weights or {}
    wm, wb, ws = float(w.get("model", 0.0)), float(w.get("base", 0.0)), float(w.get("source", 0.0))
    web_w = float(w.get("web_source_weight", 1.0))
    rows = diag.rows or []
    ranked = _ranked_rows(diag)
    step_of: dict[int, dict[str, Any]] = {}
    for st in diag.mmr or []:
        idx = int(st["index"])
        if 0 <= idx < len(ranked):
            step_of[ranked[idx]] = st
    after_boosts: dict[str, SearchResult] = {}
    for boosted in snap.state.rerank_result:
        after_boosts.setdefault(boosted.id, boosted)
    model_order = sorted(
        (i for i, r in enumerate(rows) if r.get("model_score") is not None),
        key=lambda i: -float(rows[i]["model_score"]),
    )
    model_rank = {i: n for n, i in enumerate(model_order, 1)}
    out: list[RerankRow] = []
    for i, r in enumerate(rows):
        model = r.get("model_score")
        base = float(r.get("base_score") or 0.0)
        sw = web_w if str(r.get("knowledge_source", "")).lower() == "web_search" else 1.0
        model_part = wm * float(model) if model is not None else None
        composite = r.get("composite_score")
        final = r.get("final_score")
        res = after_boosts.get(r["id"])
        meta: dict[str, str] = res.metadata if res is not None else {}
        memory = float(meta.get("memory_affinity") or 1.0)
        mstep = step_of.get(i)
        out.append(
            {
                "search_rank": i + 1,
                "id": r["id"],
                "knowledge_id": r.get("knowledge_id", ""),
                "chunk_type": r.get("chunk_type", ""),
                "knowledge_source": r.get("knowledge_source", ""),
                "base_score": base,
                "model_score": model,
                "model_rank": model_rank.get(i),
                "source_weight": sw,
                "model_part": model_part,
                "base_part": wb * base,
                "source_part": ws * sw,
                "composite_score": composite,
                "faq_boosted": bool(r.get("faq_boosted")),
                "faq_factor": (float(final or 0.0) / float(composite)) if (r.get("faq_boosted") and composite) else 1.0,
                "final_score": final,
                "wiki_boosted": meta.get("wiki_boosted") == "true",
                "memory_affinity": memory,
                "boosted_score": res.score if res is not None else None,
                "passed_threshold": bool(r.get("passed_threshold")),
                "kept_by": r.get("kept_by", ""),
                "selected": bool(r.get("selected")),
                "mmr_order": int(mstep["step"]) + 1 if mstep else None,
                "mmr_relevance": mstep["relevance"] if mstep else None,
                "mmr_redundancy": mstep["redundancy"] if mstep else None,
                "mmr_value": mstep["mmr"] if mstep else None,
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class ThresholdOutcome:
    """What the rerank threshold ladder keeps at one threshold (spec §4.6.1)."""

    threshold: float
    threshold_used: float
    outcome: str  # ok | fallback_top1 | threshold_degraded | all_below_threshold
    kept: tuple[int, ...]  # row indices (candidate order)
    fallback_min: float = 0.0


def threshold_outcome(
    model_scores: Sequence[float | None],
    threshold: float,
    fallback_min: float,
    degrade_factor: float,
    degrade_floor: float,
) -> ThresholdOutcome:
    """Replay the rerank stage's ladder on stored model scores: keep scores >= threshold; none →
    best alone if >= ``fallback_min``; still none and threshold > floor → retry once at
    ``max(threshold × factor, floor)``. ``None`` scores (the model returned none) never pass."""
    from rag_lab.reranking.ladder import apply_threshold_ladder, model_arrays
    from rag_lab.types.params import PipelineParams

    n = len(model_scores)
    index, score = model_arrays((i, s) for i, s in enumerate(model_scores) if s is not None)
    params = PipelineParams().with_changes(rerank_degrade_factor=degrade_factor, rerank_degrade_floor=degrade_floor)
    lad = apply_threshold_ladder(index, score, n, threshold, fallback_min, params)
    kept = sorted(index[lad.positions].tolist())
    return ThresholdOutcome(threshold, lad.threshold_used, lad.outcome, tuple(kept), fallback_min)


def rerank_threshold_outcome(obj: Viewed, threshold: float | None = None) -> ThresholdOutcome:
    """:func:`threshold_outcome` for a run's rerank rows (default: the run's own threshold)."""
    from rag_lab.types.params import PipelineParams

    diag = _rerank_diag(_snapshot(obj, "rerank"))
    p = getattr(obj, "params", None) or getattr(getattr(obj, "request", None), "params", None) or PipelineParams()
    t = float((p.rerank_threshold if diag.threshold is None else diag.threshold) if threshold is None else threshold)
    fallback_min = float(p.rerank_fallback_min_score if diag.fallback_min is None else diag.fallback_min)
    return threshold_outcome(
        [r.get("model_score") for r in diag.rows or []],
        t,
        fallback_min,
        p.rerank_degrade_factor,
        p.rerank_degrade_floor,
    )


# -- MMR ------------------------------------------------------------------------------------
def mmr_inputs(obj: Viewed) -> MmrInputs | None:
    """What MMR selected from: ``ids``, ``scores`` (relevance), ``tokens`` (sorted token sets of
    the enriched passages), ``k``, ``lambda`` and the stored ``trace``. A capture keeps them as
    an extra; for a run they are rebuilt from the rerank snapshot. ``None`` when MMR did not run."""
    stored = (getattr(obj, "extras", None) or {}).get("mmr_inputs")
    if stored:
        return cast("MmrInputs", stored)
    from rag_lab.reranking.passage import enriched_passage
    from rag_lab.searchutil.text import tokenize_simple

    snap = _snapshot(obj, "rerank")
    diag = _typed(snap, RerankDiagnostics)
    if diag is None or diag.rows is None or diag.mmr_k is None:
        return None
    rows = diag.rows
    ranked = _ranked_rows(diag)
    by_id: dict[str, SearchResult] = {}
    for r in snap.state.search_result:
        by_id.setdefault(r.id, r)
    tokens = []
    for i in ranked:
        res = by_id.get(rows[i]["id"])
        if res is None:
            raise ValueError(f"MMR inputs: candidate {rows[i]['id']} is not in the rerank snapshot's search results")
        tokens.append(sorted(tokenize_simple(enriched_passage(res))))
    return {
        "ids": [rows[i]["id"] for i in ranked],
        "scores": [float(rows[i]["final_score"]) for i in ranked],
        "tokens": tokens,
        "k": int(diag.mmr_k),
        "lambda": float(diag.mmr_lambda if diag.mmr_lambda is not None else 0.0),
        "trace": list(diag.mmr or []),
    }


def mmr_selection(inputs: MmrInputs, lam: float, k: int | None = None, runner_ups: int = 3) -> list[dict[str, Any]]:
    """Re-run MMR on stored inputs at ``lam``: one dict per step (``step``, ``index`` into
    ``inputs["ids"]``, ``id``, ``relevance``, ``redundancy``, ``mmr``, ``runner_ups``)."""
    from rag_lab.reranking.mmr import mmr_trace

    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"mmr lambda {lam!r} is outside [0, 1]")
    kk = int(inputs["k"] if k is None else k)
    scores = [float(s) for s in inputs["scores"]]
    tokens = [set(t) for t in inputs["tokens"]]
    steps = mmr_trace(scores, kk, lam, tokens if kk > 1 else None, runner_ups=runner_ups)
    ids = inputs["ids"]
    return [{**s.to_dict(), "id": ids[s.index]} for s in steps]

"""Run state as tables: search, fusion, rerank, merge and final results with every score component.

:func:`frame` returns a pandas DataFrame; the ``*_rows`` functions return the same rows as plain
dicts (the plots and widgets use them, and they need no pandas). Each accepts a
:class:`~rag_lab.lab.Run`, a :class:`~rag_lab.lab.capture.Capture` or a single ChatManage snapshot.
Given a run, each view reads the snapshot taken right after its stage (search results are scored
in place by the rerank stage and rewritten by the merge, so a later snapshot would mislead);
given a snapshot, it reads that snapshot as it is.

Besides the tables this module holds the small pure helpers the views share: the rerank
threshold ladder replayed at any threshold (:func:`threshold_outcome`), the MMR inputs and a
re-selection at any λ (:func:`mmr_inputs`, :func:`mmr_selection`), and the hybrid-search fusion
records (:func:`fusion_record`, :func:`fusion_trace`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import MergeDiagnostics, QueryExpansionDiagnostics, RerankDiagnostics
from rag_lab.types.search_result import MatchType, SearchResult

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "FRAMES",
    "ThresholdOutcome",
    "final_rows",
    "frame",
    "fusion_data",
    "fusion_record",
    "fusion_rows",
    "fusion_trace",
    "merge_rows",
    "mmr_inputs",
    "mmr_selection",
    "rerank_rows",
    "search_rows",
    "short_id",
    "threshold_outcome",
]

#: stages whose snapshot each view reads, first match wins
_STAGE_FOR = {
    "search": ("chunk_search_parallel", "chunk_search"),
    "fusion": ("chunk_search_parallel", "chunk_search"),
    "rerank": ("chunk_rerank",),
    "merge": ("chunk_merge",),
    "final": ("final",),
}
FRAMES = tuple(_STAGE_FOR)


def short_id(chunk_id: str) -> str:
    """``kb_x:doc.md#c0`` → ``doc.md#c0`` (labels for plots)."""
    return chunk_id.split(":", 1)[1] if ":" in chunk_id else chunk_id


def _match_type_name(value: Any) -> str:
    try:
        return MatchType(int(value)).name.lower()
    except (ValueError, TypeError):
        return str(value)


def _snapshot(obj: Any, which: str) -> ChatManage:
    """The snapshot a view reads: ``obj`` itself when it is a ChatManage."""
    if isinstance(obj, ChatManage):
        return obj
    snaps = getattr(obj, "snapshots", None)
    if snaps is None:
        raise TypeError(f"expected a Run, a Capture or a ChatManage, got {type(obj).__name__}")
    for stage in _STAGE_FOR[which]:
        if stage in snaps:
            return snaps[stage]
    have = ", ".join(snaps) or "none (ask with snapshots=True)"
    raise KeyError(f"the '{which}' view needs a snapshot after {' or '.join(_STAGE_FOR[which])}; this run has: {have}")


def _typed(snap: ChatManage, cls: type[Any]) -> Any:
    """The stage's typed diagnostics (a capture or an old snapshot may still hold a plain dict)."""
    value = snap.state.diagnostics.get(cls.KEY)
    return None if value is None else cls.from_dict(value)


def _rerank_diag(snap: ChatManage) -> RerankDiagnostics:
    diag = _typed(snap, RerankDiagnostics)
    if diag is None or diag.rows is None:
        outcome = diag.outcome if diag is not None else None
        why = f" (rerank outcome: {outcome})" if outcome else " (the rerank stage did not score anything)"
        raise ValueError("no rerank score rows in this snapshot" + why)
    return diag


# -- search and fusion ----------------------------------------------------------------------
def fusion_record(trace: Any, params: Any, query: str = "", kb_ids: Sequence[str] = ()) -> dict[str, Any]:
    """JSON-ready record of one hybrid search (a ``HybridTrace``): both hit lists in order, the fused
    list, and the fusion constants. Captures store it; the search stage can store it in
    ``state.diagnostics["search"]`` (a list, one record per search call)."""
    from rag_lab.retrieval.fusion import resolve_rrf_k, resolve_rrf_weights

    def hits(xs: Sequence[Any]) -> list[dict[str, Any]]:
        return [{"chunk_id": h.chunk_id, "knowledge_id": h.knowledge_id, "score": float(h.score)} for h in xs]

    k = resolve_rrf_k(params.rrf_k)
    wv, wk = resolve_rrf_weights(params.rrf_vector_weight, params.rrf_keyword_weight)
    return {
        "query": query,
        "kb_ids": list(kb_ids or trace.kb_ids),
        "fusion": trace.fusion,
        "rrf_k": float(k),
        "vector_weight": float(wv),
        "keyword_weight": float(wk),
        "match_count": int(trace.match_count),
        "pool_size": int(trace.pool_size),
        "vector": hits(trace.vector_hits),
        "keyword": hits(trace.keyword_hits),
        "fused": [{"chunk_id": h.chunk_id, "score": float(h.score)} for h in trace.fused],
    }


def fusion_trace(lab: Any, run: Any) -> list[dict[str, Any]]:
    """Re-run the run's knowledge-base searches with a trace and return their fusion records.

    The search stage keeps only the fused results; this repeats its calls (same rewritten query,
    thresholds, match count, params and workspace, so the same hits) through
    ``HybridSearcher.search_with_trace``. Pass the result to :func:`save_capture` (``fusion=``) or
    to the fusion views.
    """
    from rag_lab.asyncutil import run_sync
    from rag_lab.retrieval.base import SearchParams

    snap = _snapshot(run, "search")
    req = snap.request
    query = snap.state.rewrite_query.strip() or req.query
    searcher = lab.services.searcher.with_params(req.params)
    targets = [t for t in req.search_targets if t is not None and t.knowledge_base_id]
    whole = [t for t in targets if t.type == "knowledge_base" and not t.tag_ids]
    calls: list[tuple[str, SearchParams]] = []
    if whole:
        calls.append(
            (
                whole[0].knowledge_base_id,
                SearchParams(
                    query_text=query,
                    vector_threshold=req.vector_threshold,
                    keyword_threshold=req.keyword_threshold,
                    match_count=req.embedding_top_k,
                    knowledge_base_ids=[t.knowledge_base_id for t in whole],
                ),
            )
        )
    for t in targets:
        if t in whole or (t.type == "knowledge" and not t.knowledge_ids):
            continue
        vt, kt = t.recall_thresholds(req.vector_threshold, req.keyword_threshold)
        calls.append(
            (
                t.knowledge_base_id,
                SearchParams(
                    query_text=query,
                    vector_threshold=vt,
                    keyword_threshold=kt,
                    match_count=req.embedding_top_k,
                    tag_ids=list(t.tag_ids),
                    scope_tag_ids=list(t.scope_tag_ids),
                    knowledge_ids=list(t.knowledge_ids) if t.type == "knowledge" else [],
                ),
            )
        )

    async def go() -> list[dict[str, Any]]:
        out = []
        for primary, sp in calls:
            _, trace = await searcher.search_with_trace(primary, sp)
            out.append(fusion_record(trace, req.params, query, sp.knowledge_base_ids or [primary]))
        return out

    return run_sync(go)


def fusion_data(obj: Any, fusion: Any = None) -> list[dict[str, Any]] | None:
    """Fusion records: ``fusion`` if given, else the search stage's ``diagnostics["search"]``,
    else a capture's stored ``fusion`` extra; ``None`` when there are none."""
    if fusion is not None:
        return [fusion] if isinstance(fusion, dict) else list(fusion)
    try:
        snap = _snapshot(obj, "search")
    except KeyError:
        snap = None
    if snap is not None:
        recs = snap.state.diagnostics.get("search")
        if isinstance(recs, list) and recs and isinstance(recs[0], dict) and "fused" in recs[0]:
            return recs
    stored = (getattr(obj, "extras", None) or {}).get("fusion")
    return list(stored) if stored else None


def _first_ranks(hits: Sequence[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for i, h in enumerate(hits, 1):
        out.setdefault(h["chunk_id"], (i, float(h["score"])))
    return out


def fusion_rows(obj: Any, fusion: Any = None) -> list[dict[str, Any]]:
    """One row per chunk of each search call: vector and keyword rank and score, each list's
    weighted RRF term ``w/(k+rank)``, the normalised fused score and whether it was returned."""
    recs = fusion_data(obj, fusion)
    if not recs:
        raise ValueError(
            "no fusion trace for this run: the search stage does not record one. Get it with "
            "rag_lab.lab.frames.fusion_trace(lab, run) and pass fusion=..., or save the capture with "
            "save_capture(run, path, fusion=fusion_trace(lab, run))"
        )
    in_results: set[str] = set()
    try:
        in_results = {r.id for r in _snapshot(obj, "search").state.search_result}
    except (KeyError, TypeError):
        pass
    rows: list[dict[str, Any]] = []
    for call, rec in enumerate(recs):
        k, wv, wk = float(rec["rrf_k"]), float(rec["vector_weight"]), float(rec["keyword_weight"])
        top = wv / (k + 1) + wk / (k + 1)
        rv, rk = _first_ranks(rec.get("vector") or []), _first_ranks(rec.get("keyword") or [])
        fused = rec.get("fused") or []
        fused_rank = {h["chunk_id"]: (i, float(h["score"])) for i, h in enumerate(fused, 1)}
        ids = [h["chunk_id"] for h in fused] + [c for c in list(rv) + list(rk) if c not in fused_rank]
        both = bool(rv) and bool(rk)
        for cid in dict.fromkeys(ids):
            v, kw = rv.get(cid), rk.get(cid)
            v_term = wv / (k + v[0]) if (v and both) else None
            k_term = wk / (k + kw[0]) if (kw and both) else None
            rrf_raw = (v_term or 0.0) + (k_term or 0.0) if both else None
            fr = fused_rank.get(cid)
            rows.append(
                {
                    "call": call,
                    "chunk_id": cid,
                    "fusion": rec.get("fusion", ""),
                    "vector_rank": v[0] if v else None,
                    "vector_score": v[1] if v else None,
                    "keyword_rank": kw[0] if kw else None,
                    "keyword_score": kw[1] if kw else None,
                    "vector_rrf": v_term,
                    "keyword_rrf": k_term,
                    "rrf_raw": rrf_raw,
                    "rrf_normalized": min(1.0, rrf_raw / top) if rrf_raw is not None and top > 0 else None,
                    "fused_rank": fr[0] if fr else None,
                    "fused_score": fr[1] if fr else None,
                    "returned": bool(fr and fr[0] <= int(rec.get("match_count") or len(fused))),
                    "in_search_result": cid in in_results,
                }
            )
    return rows


def search_rows(obj: Any, fusion: Any = None) -> list[dict[str, Any]]:
    """The search stage's results in order, with vector/keyword ranks when a fusion trace exists."""
    snap = _snapshot(obj, "search")
    ranks: dict[str, dict[str, Any]] = {}
    recs = fusion_data(obj, fusion)
    if recs:
        for row in fusion_rows(obj, recs):
            ranks.setdefault(row["chunk_id"], row)
    exp = _typed(snap, QueryExpansionDiagnostics)
    exp_ids = set((exp.ids if exp is not None else None) or [])
    rows = []
    for i, r in enumerate(snap.state.search_result, 1):
        fr = ranks.get(r.id, {})
        origin = None
        if exp_ids:
            origin = "expansion" if r.id in exp_ids else "search"
        elif recs:
            origin = "search" if fr.get("returned") else "expansion"
        rows.append(
            {
                "rank": i,
                "id": r.id,
                "knowledge_id": r.knowledge_id,
                "knowledge_title": r.knowledge_title,
                "chunk_index": r.chunk_index,
                "chunk_type": r.chunk_type,
                "match_type": _match_type_name(r.match_type),
                "score": r.score,
                "origin": origin,
                "vector_rank": fr.get("vector_rank"),
                "vector_score": fr.get("vector_score"),
                "keyword_rank": fr.get("keyword_rank"),
                "keyword_score": fr.get("keyword_score"),
                "fused_rank": fr.get("fused_rank"),
                "length": len(r.content),
                "content": r.content,
            }
        )
    return rows


# -- rerank ---------------------------------------------------------------------------------
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


def rerank_rows(obj: Any) -> list[dict[str, Any]]:
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
    out = []
    for i, r in enumerate(rows):
        model = r.get("model_score")
        base = float(r.get("base_score") or 0.0)
        sw = web_w if str(r.get("knowledge_source", "")).lower() == "web_search" else 1.0
        model_part = wm * float(model) if model is not None else None
        composite = r.get("composite_score")
        final = r.get("final_score")
        res = after_boosts.get(r["id"])
        meta: dict[str, Any] = res.metadata if res is not None else {}
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
    from rag_lab.models.base import RerankScore
    from rag_lab.pipeline.plugins.rerank import apply_threshold_ladder
    from rag_lab.types.params import PipelineParams

    n = len(model_scores)
    scores = [RerankScore(i, float(s)) for i, s in enumerate(model_scores) if s is not None]
    ladder = PipelineParams().with_changes(rerank_degrade_factor=degrade_factor, rerank_degrade_floor=degrade_floor)
    kept, outcome, used = apply_threshold_ladder(scores, n, threshold, fallback_min, ladder)
    return ThresholdOutcome(threshold, used, outcome, tuple(sorted(s.index for s in kept)), fallback_min)


def rerank_threshold_outcome(obj: Any, threshold: float | None = None) -> ThresholdOutcome:
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
def mmr_inputs(obj: Any) -> dict[str, Any] | None:
    """What MMR selected from: ``ids``, ``scores`` (relevance), ``tokens`` (sorted token sets of
    the enriched passages), ``k``, ``lambda`` and the stored ``trace``. A capture keeps them as
    an extra; for a run they are rebuilt from the rerank snapshot. ``None`` when MMR did not run."""
    stored = (getattr(obj, "extras", None) or {}).get("mmr_inputs")
    if stored:
        return stored
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


def mmr_selection(
    inputs: dict[str, Any], lam: float, k: int | None = None, runner_ups: int = 3
) -> list[dict[str, Any]]:
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


# -- merge ----------------------------------------------------------------------------------
def merge_rows(obj: Any) -> list[dict[str, Any]]:
    """One row per chunk that entered the merge (rerank input, then injected history): its fate
    (kept, merged into another, dropped as overlap / duplicate), what it absorbed, its parent,
    the neighbours it was expanded with, and its text before and after."""
    snap = _snapshot(obj, "merge")
    merge = _typed(snap, MergeDiagnostics)
    log = merge.steps if merge is not None else []
    if not log:
        raise ValueError("no merge decisions in this snapshot (the merge stage did not run or had nothing to merge)")
    before: dict[str, SearchResult] = {}
    if not isinstance(obj, ChatManage):
        try:
            src = _snapshot(obj, "rerank").state
            for prior in src.rerank_result or src.search_result:
                before.setdefault(prior.id, prior)
        except KeyError:
            pass
    rows: dict[str, dict[str, Any]] = {}

    def row(cid: str, origin: str) -> dict[str, Any]:
        if cid not in rows:
            b = before.get(cid)
            rows[cid] = {
                "id": cid,
                "origin": origin,
                "input_rank": None,
                "score_in": b.score if b is not None else None,
                "length_in": len(b.content) if b is not None else None,
                "fate": "kept",
                "merged_into": "",
                "merge_action": "",
                "absorbed": [],
                "parent": "",
                "expanded_prev": [],
                "expanded_next": [],
                "image_hit": "",
                "output_rank": None,
                "score_out": None,
                "length_out": None,
                "sub_chunk_ids": [],
                "text_in": b.content if b is not None else None,
                "text_out": None,
            }
        return rows[cid]

    for st in log:
        step = st.get("step")
        if step == "input":
            origin = "rerank" if st.get("source") == "rerank_result" else "search"
            for n, cid in enumerate(st.get("ids") or [], 1):
                row(cid, origin)["input_rank"] = n
        elif step == "history":
            r = row(st["id"], "history")
            if st.get("action") == "dropped":
                r["fate"] = "dropped (history overlap)"
        elif step == "merge":
            r = row(st["id"], "rerank")
            r["fate"], r["merged_into"], r["merge_action"] = "merged", st["into"], st.get("action", "")
            row(st["into"], "rerank")["absorbed"].append(st["id"])
        elif step == "parent":
            row(st["id"], "rerank")["parent"] = st.get("parent", "")
        elif step == "expand":
            r = row(st["id"], "rerank")
            r["expanded_prev"], r["expanded_next"] = list(st.get("prev") or []), list(st.get("next") or [])
        elif step == "overlap":
            row(st["id"], "rerank")["fate"] = "dropped (overlap)"
        elif step == "image_vector_match":
            row(st["id"], "rerank")["image_hit"] = st.get("image_hit", "")
    out_ids: dict[str, tuple[int, SearchResult]] = {}
    for n, merged in enumerate(snap.state.merge_result, 1):
        out_ids.setdefault(merged.id, (n, merged))
    for cid, r in rows.items():
        got = out_ids.get(cid)
        if got is not None:
            n, res = got
            r.update(
                output_rank=n,
                score_out=res.score,
                length_out=len(res.content),
                sub_chunk_ids=list(res.sub_chunk_id),
                text_out=res.content,
            )
        elif r["fate"] == "kept":
            r["fate"] = "dropped (duplicate)"
    return list(rows.values())


# -- final ----------------------------------------------------------------------------------
def final_rows(obj: Any) -> list[dict[str, Any]]:
    """The contexts the answer was built from (after FILTER_TOP_K), with whether the answer cites
    each one and the number of its first citation."""
    from rag_lab.modelcontext import cited_chunk_ids

    snap = _snapshot(obj, "final")
    answer = getattr(obj, "answer", None)
    cited = cited_chunk_ids(answer) if isinstance(answer, str) else []
    order = {cid: n for n, cid in enumerate(cited, 1)}
    rows = []
    for i, r in enumerate(snap.state.merge_result, 1):
        rows.append(
            {
                "rank": i,
                "id": r.id,
                "knowledge_title": r.knowledge_title,
                "knowledge_id": r.knowledge_id,
                "chunk_type": r.chunk_type,
                "match_type": _match_type_name(r.match_type),
                "score": r.score,
                "cited": r.id in order if answer is not None else None,
                "citation": order.get(r.id),
                "sub_chunks": len(r.sub_chunk_id),
                "length": len(r.content),
                "content": r.content,
            }
        )
    return rows


_ROWS = {"search": search_rows, "fusion": fusion_rows, "rerank": rerank_rows, "merge": merge_rows, "final": final_rows}


def frame(obj: Any, which: str = "search", **kwargs: Any) -> pd.DataFrame:
    """A DataFrame of one view: ``search``, ``fusion``, ``rerank``, ``merge`` or ``final``
    (see the ``*_rows`` functions for the columns). ``fusion=`` passes a fusion trace to the
    search and fusion views."""
    import pandas as pd

    fn = _ROWS.get(which)
    if fn is None:
        raise ValueError(f"unknown frame {which!r}; choose one of {', '.join(_ROWS)}")
    rows = fn(obj, **kwargs)
    return pd.DataFrame(rows)

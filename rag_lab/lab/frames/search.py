"""The search and fusion views: the search stage's results with their vector / keyword ranks, and
the hybrid-search fusion records (both hit lists, their weighted RRF terms, the fused scores),
stored by the stage or a capture, or re-run from a run (:func:`fusion_trace`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.lab.frames.common import Viewed, _match_type_name, _snapshot, _typed
from rag_lab.types.diagnostics import QueryExpansionDiagnostics, SearchDiagnostics

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.retrieval.base import IndexWithScore
    from rag_lab.retrieval.hybrid_trace import HybridTrace
    from rag_lab.types.params import PipelineParams


def fusion_record(
    trace: HybridTrace, params: PipelineParams, query: str = "", kb_ids: Sequence[str] = ()
) -> dict[str, object]:
    """JSON-ready record of one hybrid search (a ``HybridTrace``): both hit lists in order, the fused
    list, and the fusion constants. Captures store it; the search stage can store it in
    ``state.diagnostics["search"]`` (a list, one record per search call)."""
    from rag_lab.retrieval.fusion import resolve_rrf_k, resolve_rrf_weights

    def hits(xs: Sequence[IndexWithScore]) -> list[dict[str, object]]:
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


def fusion_trace(lab: Any, run: Viewed) -> list[dict[str, object]]:
    """Re-run the run's knowledge-base searches with a trace and return their fusion records.

    The search stage keeps only the fused results; this repeats its calls (same rewritten query,
    thresholds, match count, params and workspace, so the same hits) through
    ``HybridSearcher.search_with_trace``. Pass the result to :func:`save_capture` (``fusion=``) or
    to the fusion views.
    """
    from rag_lab.asyncutil import run_sync
    from rag_lab.pipeline.plugins.search import target_searches

    snap = _snapshot(run, "search")
    req = snap.request
    query = snap.state.rewrite_query.strip() or req.query
    searcher = lab.services.searcher.with_params(req.params)
    targets = [t for t in req.search_targets if t is not None and t.knowledge_base_id]
    calls = target_searches(req, targets, query)

    async def go() -> list[dict[str, object]]:
        out = []
        for primary, sp in calls:
            _, trace = await searcher.search_with_trace(primary, sp)
            out.append(fusion_record(trace, req.params, query, sp.knowledge_base_ids or [primary]))
        return out

    return run_sync(go)


def fusion_data(obj: Viewed, fusion: Any = None) -> list[dict[str, Any]] | None:
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
        if isinstance(recs, SearchDiagnostics):  # read back from a capture: the records are its calls
            recs = recs.calls
        if isinstance(recs, list) and recs and isinstance(recs[0], dict) and _is_fusion_record(recs[0]):
            return recs
    stored = (getattr(obj, "extras", None) or {}).get("fusion")
    return list(stored) if stored else None


def _is_fusion_record(rec: dict[str, object]) -> bool:
    """A :func:`fusion_record` (hits as dicts), not the search stage's compact per-path record."""
    fused = rec.get("fused")
    return isinstance(fused, list) and (not fused or isinstance(fused[0], dict))


def _first_ranks(hits: Sequence[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for i, h in enumerate(hits, 1):
        out.setdefault(h["chunk_id"], (i, float(h["score"])))
    return out


def fusion_rows(obj: Viewed, fusion: object = None) -> list[dict[str, Any]]:
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
    rows: list[dict[str, object]] = []
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


def search_rows(obj: Viewed, fusion: object = None) -> list[dict[str, object]]:
    """The search stage's results in order, with vector/keyword ranks when a fusion trace exists."""
    snap = _snapshot(obj, "search")
    ranks: dict[str, dict[str, object]] = {}
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

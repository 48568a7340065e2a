"""The gold funnel of one question: where each gold document is at every stage, derived from what
the stages recorded (``state.diagnostics``: :class:`~rag_lab.types.diagnostics.SearchDiagnostics`,
:class:`~rag_lab.types.diagnostics.RerankDiagnostics`, :class:`~rag_lab.types.diagnostics.MergeDiagnostics`,
:class:`~rag_lab.types.diagnostics.FilterTopKDiagnostics`) and the final contexts — never by
running anything again. The pipeline and the fast evaluator
(:meth:`~rag_lab.tuning.evaluator.FastEvaluator.trace`) write the same records, so both give the
same funnel.

Stages (:data:`STAGES`), each a ranked list of chunks:

* ``vector``, ``keyword``: each retrieval path's hits; ``fused``: the fused list before the
  match-count cut (several search calls: merged by rank within their call, call order on ties);
* ``search``: the search stage's output (the rerank's input);
* ``rerank``: the candidates that passed the threshold ladder, by final score (then the image hits
  kept by vector score); ``mmr``: the rerank stage's output, in MMR pick order;
* ``merge``: the merge output, in FILTER_TOP_K's order; ``final``: the contexts after FILTER_TOP_K.

A stage that did not run (no rerank model, a rerank model error, no candidate) passes its input
on: its list is the previous stage's. A stage whose record is missing (a searcher without
``search_with_paths``, an old capture) is unknown: it is absent from :attr:`QuestionFunnel.stages`.

**Gold ids are document ids, stages hold chunks.** The rank of a document at a stage is the rank
of its best-ranked chunk, counting each document once (:func:`doc_ranks`: a later chunk of an
already-listed document takes no place), so a stage's document list is what
``Run.retrieved_doc_ids`` is for the final contexts, and ``final`` recall@k is ``recall@k``.

A gold document is *lost at* the first stage of :data:`CHAIN` after which it appears in no later
stage (``fused`` when no stage ever had it); ``""`` when it reaches the final contexts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, TypeVar

from rag_lab.types.diagnostics import (
    FilterTopKDiagnostics,
    MergeDiagnostics,
    RerankDiagnostics,
    SearchDiagnostics,
    StageDiagnostics,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.types.search_result import SearchResult

__all__ = ["CHAIN", "STAGES", "GoldTrace", "QuestionFunnel", "build_funnel", "doc_ranks"]

STAGES = ("vector", "keyword", "fused", "search", "rerank", "mmr", "merge", "final")
#: the stages every passage goes through in turn (the paths feed ``fused``)
CHAIN = ("fused", "search", "rerank", "mmr", "merge", "final")
_PASS_THROUGH = ("model_error", "no_candidates")

Hit = tuple[str, str, float]  # chunk id, document id, score


def doc_ranks(hits: Iterable[Hit]) -> dict[str, int]:
    """``{document id: rank}`` (1-based) of a ranked chunk list (``(chunk id, document id, …)``):
    each document at the rank of its best chunk, counted once; chunks without a document skipped."""
    out: dict[str, int] = {}
    for h in hits:
        doc = h[1]
        if doc and doc not in out:
            out[doc] = len(out) + 1
    return out


@dataclass
class GoldTrace:
    """One gold document: its rank at each known stage (``None``: not there), where it was lost and
    why, and what each stage recorded about its best chunk (``detail``, JSON-ready)."""

    id: str  # noqa: A003 - the document id
    ranks: dict[str, int | None]
    lost_at: str = ""
    why: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "ranks": dict(self.ranks),
            "lost_at": self.lost_at,
            "why": self.why,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GoldTrace:
        return cls(
            str(d["id"]),
            dict(d.get("ranks") or {}),
            str(d.get("lost_at") or ""),
            str(d.get("why") or ""),
            dict(d.get("detail") or {}),
        )


@dataclass
class QuestionFunnel:
    """The funnel of one question: every known stage's document list and one trace per gold document."""

    stages: dict[str, list[str]]
    gold: list[GoldTrace]

    def to_dict(self) -> dict[str, object]:
        """The compact form a :class:`~rag_lab.eval.records.QueryRecord` keeps: the number of
        documents at each stage and the gold traces (not the stage lists)."""
        return {"sizes": {s: len(d) for s, d in self.stages.items()}, "gold": [g.to_dict() for g in self.gold]}


_D = TypeVar("_D", bound=StageDiagnostics)


class _StageInfo(TypedDict):
    """What the funnel builder needs besides the stage lists: the fused ranks cut by the match
    count (0: kept), the rerank rows by chunk id, the MMR pick order, the rerank outcome, the merge
    steps per chunk, the FILTER_TOP_K diagnostics and the rerank diagnostics (when it ranked)."""

    cut: dict[str, int]
    rows: dict[str, dict[str, Any]]
    picks: dict[str, int]
    outcome: str | None
    merge: dict[str | None, dict[str, object]]
    top_k: FilterTopKDiagnostics | None
    rerank: NotRequired[RerankDiagnostics]


def _typed(diagnostics: Mapping[str, object], cls: type[_D]) -> _D | None:
    value = diagnostics.get(cls.KEY)
    return None if value is None else cls.from_dict(value)


def _compact(call: Mapping[str, Any]) -> bool:
    """The search stage's per-path record (hits as lists), not a lab fusion record (hits as dicts)."""
    hits = [h for name in ("vector", "keyword", "fused") for h in (call.get(name) or [])[:1]]
    return "fused" in call and all(isinstance(h, (list, tuple)) for h in hits)


def _merged_paths(calls: Sequence[Mapping[str, Any]], name: str) -> list[tuple[int, Hit]]:
    """One path's hits over every call, ordered by rank within the call (call order on ties);
    each with its 1-based rank in its call."""
    ranked = [
        (r, c, (h[0], h[1], float(h[2]))) for c, call in enumerate(calls) for r, h in enumerate(call.get(name) or [], 1)
    ]
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [(r, h) for r, _, h in ranked]


def _stage_lists(
    diagnostics: Mapping[str, object], references: Sequence[SearchResult]
) -> tuple[dict[str, list[Hit]], _StageInfo]:
    """The chunk list of every known stage and what the builder needs besides (see the module doc)."""
    lists: dict[str, list[Hit]] = {}
    info: _StageInfo = {"cut": {}, "rows": {}, "picks": {}, "outcome": "", "merge": {}, "top_k": None}
    search = _typed(diagnostics, SearchDiagnostics)
    if search is not None and search.calls and all(_compact(c) for c in search.calls):
        calls = search.calls
        for name in ("vector", "keyword", "fused"):
            lists[name] = [h for _, h in _merged_paths(calls, name)]
        for call in calls:  # rank beyond the call's match count: cut
            for r, h in enumerate(call.get("fused") or [], 1):
                if r > int(call.get("match_count") or 0):
                    info["cut"].setdefault(h[0], int(call.get("match_count") or 0))
                else:
                    info["cut"][h[0]] = 0
    rerank = _typed(diagnostics, RerankDiagnostics)
    rows = (rerank.rows or []) if rerank is not None else []
    if search is not None and search.results is not None:
        lists["search"] = [(h[0], h[1], float(h[2])) for h in search.results]
    elif rows:
        lists["search"] = [(r["id"], r["knowledge_id"], float(r["base_score"])) for r in rows]
    final = [(r.id, r.knowledge_id, float(r.score)) for r in references]
    if "search" in lists:
        if rerank is None or rerank.outcome in _PASS_THROUGH or rerank.ranked_ids is None:
            info["outcome"] = rerank.outcome if rerank is not None else "not_run"
            lists["rerank"] = lists["mmr"] = list(lists["search"])
        else:
            info["outcome"] = rerank.outcome or ""
            info["rerank"] = rerank
            by_id = {r["id"]: r for r in rows}
            info["rows"] = by_id
            images = [r for r in rows if r.get("kept_by") == "image_vector" and r.get("final_score") is not None]

            def hit(cid: str) -> Hit:
                r = by_id.get(cid) or {}
                return (cid, str(r.get("knowledge_id") or ""), float(r.get("final_score") or 0.0))

            ranked = list(rerank.ranked_ids)
            lists["rerank"] = [hit(c) for c in ranked] + [hit(r["id"]) for r in images]
            picks = [ranked[int(st["index"])] for st in rerank.mmr or [] if 0 <= int(st["index"]) < len(ranked)]
            info["picks"] = {c: n for n, c in reversed(list(enumerate(picks, 1)))}
            lists["mmr"] = [hit(c) for c in picks] + [hit(r["id"]) for r in images]
    merge = _typed(diagnostics, MergeDiagnostics)
    for st in merge.steps if merge is not None else []:
        kind, cid = st.get("step"), st.get("id")
        if kind == "merge":
            info["merge"].setdefault(cid, {})["merged_into"] = st.get("into", "")
        elif kind == "expand":
            info["merge"].setdefault(cid, {})["expanded"] = True
        elif kind == "overlap":
            info["merge"].setdefault(cid, {})["dropped"] = "overlap"
    top_k = _typed(diagnostics, FilterTopKDiagnostics)
    if "search" in lists:
        main = [h for h, r in zip(final, references) if not (r.metadata or {}).get("kept_by")]
        extra = [h for h, r in zip(final, references) if (r.metadata or {}).get("kept_by")]
        cut: list[Hit] = []
        if top_k is not None and top_k.cut_ids:
            cut = [(c, d, 0.0) for c, d in zip(top_k.cut_ids, top_k.cut_doc_ids or [""] * len(top_k.cut_ids))]
            info["top_k"] = top_k
        lists["merge"] = main + cut + extra
    lists["final"] = final
    return lists, info


def _best(hits: Sequence[Hit], doc: str) -> tuple[int, Hit] | None:
    for n, h in enumerate(hits, 1):
        if h[1] == doc:
            return n, h
    return None


def _why(stage: str, doc: str, lists: Mapping[str, list[Hit]], info: _StageInfo, detail: Mapping[str, Any]) -> str:
    if stage == "fused":
        return "not retrieved by the vector or the keyword search"
    if stage == "search":
        fused = detail.get("fused")
        if fused and fused.get("cut"):
            return f"cut by the match count ({fused['cut']}) at fused rank {fused['rank']}"
        return "not in the search results"
    if stage == "rerank":
        rr = detail.get("rerank")
        if not rr:
            return "not among the rerank candidates (empty passage or beyond rerank_max_candidates)"
        thr = rr.get("threshold")
        model = rr.get("model")
        shown = f"{model:.4g}" if isinstance(model, float) else "none"
        outcome = info.get("outcome")
        return f"model score {shown} below the threshold {thr}" + (f" (outcome {outcome})" if outcome != "ok" else "")
    if stage == "mmr":
        rerank = info.get("rerank")
        k = rerank.mmr_k if rerank is not None else None
        return "passed the threshold, not among the MMR picks" + (f" (k = {k}, rerank_top_k)" if k else "")
    if stage == "merge":
        m = detail.get("merge") or {}
        return "dropped as overlap by the merge" if m.get("dropped") else "dropped by the merge"
    top = info.get("top_k")
    if top is not None:
        return f"cut by FILTER_TOP_K (top {top.after} of {top.before})"
    return "not in the final contexts"


def _detail(doc: str, lists: Mapping[str, list[Hit]], info: _StageInfo) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in ("vector", "keyword", "fused"):
        if name in lists:
            got = _best(lists[name], doc)
            if got is not None:
                rank = doc_ranks(lists[name])[doc]
                d: dict[str, object] = {"rank": rank, "chunk": got[1][0], "score": got[1][2]}
                if got[0] != rank:  # the chunk's own rank, when chunks of other documents repeat above it
                    d["chunk_rank"] = got[0]
                if name == "fused":
                    kept = [info["cut"].get(h[0], 0) == 0 for h in lists[name] if h[1] == doc]
                    d["cut"] = 0 if any(kept) else info["cut"].get(got[1][0], 0)
                out[name] = d
    rows = [r for r in info["rows"].values() if r.get("knowledge_id") == doc]
    if rows:
        ranked = {h[0]: n for n, h in enumerate(lists.get("rerank") or [], 1)}
        row = min(rows, key=lambda r: (ranked.get(r["id"], 1 << 30), -(r.get("model_score") or float("-inf"))))
        rerank = info["rerank"]
        out["rerank"] = {
            "chunk": row["id"],
            "model": row.get("model_score"),
            "composite": row.get("composite_score"),
            "final": row.get("final_score"),
            "passed": bool(row.get("passed_threshold")),
            "kept_by": row.get("kept_by") or "",
            "threshold": rerank.threshold_used,
            "outcome": rerank.outcome,
        }
        picks = [info["picks"][r["id"]] for r in rows if r["id"] in info["picks"]]
        if picks:
            out["mmr"] = {"pick": min(picks)}
    elif info.get("outcome"):
        out["rerank"] = {"outcome": info["outcome"]}
    merge = [
        dict(info["merge"][h[0]], chunk=h[0])
        for h in lists.get("mmr") or lists.get("search") or []
        if h[1] == doc and h[0] in info["merge"]
    ]
    if merge:
        out["merge"] = merge[0] if len(merge) == 1 else {"chunks": merge}
    top = info.get("top_k")
    if top is not None and doc in (top.cut_doc_ids or []):
        out["top_k"] = {"cut": True, "k": top.after}
    return out


def build_funnel(
    diagnostics: Mapping[str, object], references: Sequence[SearchResult], gold_ids: Iterable[str]
) -> QuestionFunnel:
    """The funnel of one question from its ``state.diagnostics`` and final contexts (see the module doc)."""
    lists, info = _stage_lists(diagnostics, references)
    stages = {s: list(doc_ranks(lists[s])) for s in STAGES if s in lists}
    ranks_at = {s: doc_ranks(lists[s]) for s in stages}
    chain = [s for s in CHAIN if s in stages]
    out: list[GoldTrace] = []
    for g in dict.fromkeys(gold_ids):
        ranks = {s: ranks_at[s].get(g) for s in stages}
        detail = _detail(g, lists, info)
        present = [s for s in chain if ranks[s] is not None]
        lost = ""
        if not present:
            lost = chain[0] if chain else ""
        elif present[-1] != chain[-1]:
            lost = chain[chain.index(present[-1]) + 1]
        why = _why(lost, g, lists, info, detail) if lost else ""
        out.append(GoldTrace(g, ranks, lost, why, detail))
    return QuestionFunnel(stages, out)

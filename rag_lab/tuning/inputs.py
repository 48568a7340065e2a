"""Stage inputs captured once per (question, retrieval config): everything the post-retrieval stages
read, so that a config is evaluated without running the event pipeline.

:func:`capture_question` takes the ChatManage as the last search stage left it (a lab snapshot)
and the pipeline's services, and keeps: the search results, the rerank candidates with their
enriched passages, the raw rerank-model scores (after the vision re-scoring of image hits; a
model error is kept as such), the candidates' token sets and their pairwise Jaccard matrix (params
independent), the history, and a memo of the store (:class:`StoreMemo`) through which merge loads
parents, FAQ entries and neighbours once. The rerank model is called once: the stage's ×factor
retry calls it again with the same passages, which a deterministic model (every model the stage
cache serves) answers identically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.pipeline.plugins.rerank import candidate_passages, rerank_call
from rag_lab.reranking.image import pictorial_indices, score_images_with_vision
from rag_lab.reranking.ladder import model_arrays
from rag_lab.reranking.scored import CandidateColumns
from rag_lab.searchutil.tokens import cached_token_ids, intersection_counts
from rag_lab.types.chat_manage import ChatManage, History, has_recall_threshold_override
from rag_lab.types.diagnostics import SearchDiagnostics
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk
    from rag_lab.pipeline.container import Services, WorkspaceService
    from rag_lab.pipeline.plugins.merge import ChunkStore

__all__ = ["CapturedRerank", "QuestionInputs", "StoreMemo", "TuningUnsupported", "capture_question", "jaccard_matrix"]


class TuningUnsupported(ValueError):
    """The fast evaluator cannot replay this pipeline (the message says why); use the full one."""


class StoreMemo:
    """``get_chunks(ids)`` and ``get_children(ids)`` of a chunk store, each chunk (and each
    parent's children) loaded once; missing ids are remembered too."""

    def __init__(self, store: ChunkStore) -> None:
        self.store = store
        self.chunks: dict[str, Chunk | None] = {}
        self.children: dict[str, list[Chunk]] = {}
        self.loads = 0

    def get_chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        want = list(dict.fromkeys(ids))
        missing = [i for i in want if i not in self.chunks]
        if missing:
            self.loads += 1
            found = self.store.get_chunks(missing)
            for i in missing:
                self.chunks[i] = found.get(i)
        return {i: c for i in want if (c := self.chunks.get(i)) is not None}

    def get_children(self, parent_ids: Iterable[str]) -> list[Chunk]:
        """``get_children(ids)`` of the store, each parent's children loaded once."""
        want = list(dict.fromkeys(parent_ids))
        missing = [i for i in want if i not in self.children]
        if missing:
            self.loads += 1
            found: dict[str, list[Chunk]] = {i: [] for i in missing}
            for c in self.store.get_children(missing):
                found.setdefault(c.parent_chunk_id, []).append(c)
            self.children.update(found)
        return [c for i in want for c in self.children[i]]


def jaccard_matrix(ids: list[np.ndarray]) -> np.ndarray:
    """``J[i, j] = |a∩b| / (|a|+|b|-|a∩b|)`` (0 for two empty sets), as MMR computes it."""
    counts = intersection_counts(ids).astype(np.float64)
    sizes = np.array([a.size for a in ids], dtype=np.float64)
    union = sizes[:, None] + (sizes[None, :] - counts)
    return np.divide(counts, union, out=np.zeros_like(counts), where=union > 0)


@dataclass
class CapturedRerank:
    """The rerank stage's inputs for one question (arrays in candidate order)."""

    candidates: list[SearchResult]
    model_index: np.ndarray  # the model's output, in its order
    model_score: np.ndarray
    error: str = ""  # the model call failed: raw search order goes on
    pictorial: list[int] = field(default_factory=list)
    images_scored: int = 0
    recall_override: bool = False  # a target disables recall thresholds: the top-1 fallback has no floor
    search_score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    is_graph: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # base = the model score
    is_web: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # source weight: web_source_weight
    is_faq: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    is_wiki: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    jaccard: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    @cached_property
    def columns(self) -> CandidateColumns:
        """The columns the rerank stage's scores read (:mod:`rag_lab.reranking.scored`)."""
        return CandidateColumns(self.search_score, self.is_graph, self.is_web, self.is_faq, self.is_wiki)


@dataclass
class QuestionInputs:
    """Everything the post-retrieval stages read for one question."""

    qid: str
    query: str  # the rewritten query (rerank and merge read it)
    needs_retrieval: bool
    search_result: list[SearchResult]
    history: list[History]
    rerank: CapturedRerank | None  # None: the stage does not run (no model, no results)
    expanded: bool  # the search ran query expansion (its top-k reads rerank_top_k)
    wiki_in_scope: bool
    vector_threshold: float
    rerank_top_k: int  # as captured (matters for expanded questions)
    store: StoreMemo | None
    references: list[SearchResult] = field(default_factory=list)  # the capture run's own final contexts
    error: str = ""  # the capture run failed before or in retrieval: no contexts under any config
    latency_ms: float = math.nan  # the capture run's (the whole pipeline at the retrieval config)
    #: the search stage's per-path record (the gold funnel's vector / keyword / fused lists)
    search_paths: SearchDiagnostics | None = None


def _wiki_in_scope(chat: ChatManage, workspace: WorkspaceService | None) -> bool:
    for t in chat.request.search_targets:
        try:
            kb = workspace.get_kb(t.knowledge_base_id) if workspace is not None else None
        except Exception:
            kb = None
        if kb is not None and getattr(kb, "wiki_enabled", False):
            return True
    return False


async def capture_question(
    qid: str,
    chat: ChatManage,
    services: Services,
    store_memo: StoreMemo | None = None,
    references: list[SearchResult] | None = None,
) -> QuestionInputs:
    """Capture one question from ``chat`` as the search stages left it (see the module doc).

    Raises :class:`TuningUnsupported` for pipelines the evaluator does not replay: long-term
    memory (its affinity boost reads per-user history), web search, data analysis."""
    req, state, p = chat.request, chat.state, chat.request.params
    if getattr(services, "memory", None) is not None:
        raise TuningUnsupported("long-term memory is on: its affinity boost depends on each user's history")
    if req.web_search_enabled or req.data_analysis_enabled:
        raise TuningUnsupported("web search and data analysis stages are not replayed by the fast evaluator")
    workspace = getattr(services, "workspace", None)
    store = getattr(workspace, "store", None) if workspace is not None else None
    memo = store_memo if store_memo is not None else (StoreMemo(store) if store is not None else None)
    search = [r.copy() for r in state.search_result]
    inputs = QuestionInputs(
        qid=qid,
        query=state.rewrite_query or req.query,
        needs_retrieval=needs_retrieval(chat),
        search_result=search,
        history=list(state.history),
        rerank=None,
        expanded=bool(state.diagnostics.get("query_expansion")),
        wiki_in_scope=_wiki_in_scope(chat, workspace),
        vector_threshold=req.vector_threshold,
        rerank_top_k=req.rerank_top_k,
        store=memo,
        references=[r.copy() for r in references or []],
    )
    paths = state.diagnostics.get(SearchDiagnostics.KEY)
    if paths is not None:
        paths = SearchDiagnostics.from_dict(paths)
        inputs.search_paths = SearchDiagnostics(calls=list(paths.calls or []), results=paths.results)
    if not inputs.needs_retrieval or not search or not req.rerank_model_id:
        return inputs
    model = services.get_rerank_model(req.rerank_model_id)  # a missing model fails the capture loudly
    candidates, enriched, passages = candidate_passages([r.copy() for r in search], p.rerank_max_candidates)
    if not candidates:
        inputs.rerank = CapturedRerank(candidates=[], model_index=np.zeros(0, dtype=np.intp), model_score=np.zeros(0))
        return inputs
    pictorial = pictorial_indices(candidates, p)
    error = ""
    images_scored = 0
    try:
        scores = await rerank_call(model, inputs.query, passages, p.rerank_timeout_s)
        scores, images_scored = await score_images_with_vision(model, inputs.query, candidates, pictorial, scores)
    except Exception as exc:  # the stage keeps the raw search order (§4.6.1 6.2)
        error = f"{type(exc).__name__}: {exc}"
        scores = []
    cols = CandidateColumns.of(candidates)
    m_index, m_score = model_arrays(scores)
    inputs.rerank = CapturedRerank(
        candidates=candidates,
        model_index=m_index,
        model_score=m_score,
        error=error,
        pictorial=pictorial,
        images_scored=images_scored,
        recall_override=has_recall_threshold_override(req.search_targets),
        search_score=cols.search_score,
        is_graph=cols.is_graph,
        is_web=cols.is_web,
        is_faq=cols.is_faq,
        is_wiki=cols.is_wiki,
        jaccard=jaccard_matrix([cached_token_ids(t) for t in enriched]),
    )
    return inputs

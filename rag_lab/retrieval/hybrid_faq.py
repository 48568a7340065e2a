"""FAQ post-processing of a hybrid search (spec §5.13): FAQ chunks whose negative questions match
the query are dropped, and when an FAQ KB's fused list is short the retrieval is repeated with a
growing top-k. :class:`FaqSteps` is one of the parts of
:class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.fusion import dedup_by_score
from rag_lab.retrieval.hybrid_base import HybridSearcherBase
from rag_lab.retrieval.hybrid_trace import HybridTrace
from rag_lab.retrieval.store_groups import SearchError, StoreGroup

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk

#: the records keep the logger name of :mod:`rag_lab.retrieval.hybrid_search`
log = logging.getLogger("rag_lab.retrieval.hybrid_search")


def _norm_question(q: object) -> str:
    return q.strip().lower() if isinstance(q, str) else ""


def negative_question_matches(chunk: Chunk, query: str) -> bool:
    """True when ``chunk`` is an FAQ chunk with a negative question equal (lower-cased, trimmed,
    non-empty) to the query (§5.13)."""
    nq = _norm_question(query)
    if not nq or chunk.chunk_type != "faq":
        return False
    meta = chunk.metadata
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return False
    if not isinstance(meta, dict):
        return False
    negatives = meta.get("negative_questions") or []
    if not isinstance(negatives, list):
        return False
    return any(_norm_question(n) == nq for n in negatives if _norm_question(n))


def filter_negative_questions(
    hits: Sequence[IndexWithScore], chunks: dict[str, Chunk], query: str
) -> list[IndexWithScore]:
    """Drop hits whose FAQ chunk rejects the query (§5.13); missing chunks are kept."""
    if not _norm_question(query):
        return list(hits)
    return [h for h in hits if not (h.chunk_id in chunks and negative_question_matches(chunks[h.chunk_id], query))]


class FaqSteps(HybridSearcherBase):
    """The negative-question filter and the iterative retrieval of FAQ KBs."""

    async def _negative_filter(
        self, hits: list[IndexWithScore], query: str, trace: HybridTrace
    ) -> list[IndexWithScore]:
        if not _norm_question(query) or not hits:
            return hits
        try:
            chunks = await asyncio.to_thread(self.workspace.store.get_chunks, [h.chunk_id for h in hits])
        except Exception as exc:  # §5.13: on a load error keep everything
            log.warning("FAQ negative-question filter skipped: %s", exc)
            return hits
        kept = filter_negative_questions(hits, chunks, query)
        kept_ids = {h.chunk_id for h in kept}
        trace.negative_filtered.extend(h.chunk_id for h in hits if h.chunk_id not in kept_ids)
        return kept

    async def _faq_iterate(
        self, groups: Sequence[StoreGroup], query: str, match_count: int, trace: HybridTrace
    ) -> list[IndexWithScore]:
        """§5.13 iterative retrieval: grow top_k (×3 start, ×2 per round, cap = pool max, 5 rounds),
        drop FAQ chunks whose negative questions match, keep the max raw score per chunk."""
        cap = self.params.retrieval_pool_max
        top_k = min(match_count * self.params.faq_iteration_start_factor, cap)
        cache: dict[str, Chunk | None] = {}
        filtered: set[str] = set()
        kept: dict[str, IndexWithScore] = {}
        store = self.workspace.store
        for _ in range(self.params.faq_iteration_max_rounds):
            trace.faq_iterations += 1
            try:
                results = await self._retrieve([g.with_top_k(top_k) for g in groups])
            except SearchError:
                raise
            except Exception as exc:  # untyped failure: stop, keep what was gathered
                log.warning("FAQ iterative retrieval stopped: %s", exc)
                break
            hits = [h for r in results for h in r.hits]
            if not hits:
                break
            todo = [h.chunk_id for h in hits if h.chunk_id not in cache and h.chunk_id not in filtered]
            if todo:
                loaded = await asyncio.to_thread(store.get_chunks, todo)
                for cid in todo:
                    cache[cid] = loaded.get(cid)
            for h in hits:
                if h.chunk_id in filtered:
                    continue
                c = cache.get(h.chunk_id)
                if c is not None and negative_question_matches(c, query):
                    filtered.add(h.chunk_id)
                    kept.pop(h.chunk_id, None)
                    trace.negative_filtered.append(h.chunk_id)
                    continue
                cur = kept.get(h.chunk_id)
                if cur is None or h.score > cur.score:
                    kept[h.chunk_id] = h
            if len(kept) >= match_count or len(hits) < top_k or top_k >= cap:
                break
            top_k = min(2 * top_k, cap)
        return dedup_by_score(kept.values())

"""Hydration of a hybrid search's hits (spec §5.15): each hit becomes a :class:`SearchResult`
from its stored chunk and document (rows memoised per store state,
:class:`~rag_lab.retrieval.hydration.HydrationMemo`), skipping what cannot be shown, with the
image info of image child chunks (§6.9). :class:`HydrateStep` is one of the parts of
:class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.engine import searchable_fields
from rag_lab.retrieval.hybrid_base import HybridSearcherBase
from rag_lab.retrieval.hybrid_trace import HybridTrace
from rag_lab.retrieval.hydration import chunk_values, doc_values, search_result
from rag_lab.retrieval.image_recall import IMAGE_SOURCE, IMAGE_VECTOR
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, Knowledge

#: the records keep the logger name of :mod:`rag_lab.retrieval.hybrid_search`
log = logging.getLogger("rag_lab.retrieval.hybrid_search")


def chunk_to_search_result(
    chunk: Chunk, doc: Knowledge, score: float, match_type: int, matched_content: str = ""
) -> SearchResult:
    """A stored chunk and its document as a SearchResult (§5.15 hydration; also graph hits):
    :func:`~rag_lab.retrieval.hydration.search_result` of their fields."""
    return search_result(chunk_values(chunk), doc_values(doc), score, match_type, matched_content)


class HydrateStep(HybridSearcherBase):
    """Hits to SearchResults."""

    def _hydrate(self, ranked: Sequence[tuple[IndexWithScore, float]], trace: HybridTrace) -> list[SearchResult]:
        """§5.15 ``process_search_results`` with context enrichment skipped, for ``(hit, fused
        score)`` pairs; results without image info get the image info of the image chunks under
        them (§6.9)."""
        memo = self._rows
        memo.fresh(self.workspace.store)
        memo.preload(h.knowledge_base_id for h, _ in ranked)
        chunks = memo.chunks([h.chunk_id for h, _ in ranked])  # CHUNK_FIELDS values
        docs = memo.documents((c[2], c[1]) for c in chunks.values())  # DOC_FIELDS values
        out: list[SearchResult] = []
        seen: set[str] = set()
        for h, score in ranked:
            c = chunks.get(h.chunk_id)
            reason = ""
            if c is None:
                reason = "chunk not found"
            else:
                cid, kid, kb_id, enabled, chunk_type, status = c[:6]
                if not searchable_fields(enabled, chunk_type, status):
                    reason = "chunk not searchable"
                elif cid in seen:
                    reason = "duplicate chunk"
                elif (kb_id, kid) not in docs:
                    reason = "document not found"
                    log.warning("hybrid search: document %r of chunk %r not found", kid, cid)
            if reason:
                trace.skipped_in_hydration.append((h.chunk_id, reason))
                continue
            assert c is not None
            seen.add(cid)
            r = search_result(c, docs[(kb_id, kid)], score, h.match_type, h.content)
            if h.source_type == IMAGE_SOURCE:
                r.metadata["retrieved_by"] = IMAGE_VECTOR
            out.append(r)
        memo.enrich_image_info(out)  # §6.9: images split off into child chunks
        return out

"""Hydration of a hybrid search's hits (spec §5.15): each hit becomes a :class:`SearchResult`
from its stored chunk and document (rows memoised per store state,
:class:`~rag_lab.retrieval.hydration.HydrationMemo`), skipping what cannot be shown, with the
image info of image child chunks (§6.9). :class:`HydrateStep` is one of the parts of
:class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.engine import is_searchable
from rag_lab.retrieval.hybrid_base import HybridSearcherBase
from rag_lab.retrieval.hybrid_trace import HybridTrace
from rag_lab.retrieval.image_recall import IMAGE_SOURCE, IMAGE_VECTOR
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Knowledge

#: the records keep the logger name of :mod:`rag_lab.retrieval.hybrid_search`
log = logging.getLogger("rag_lab.retrieval.hybrid_search")


def chunk_to_search_result(
    chunk: Any, doc: Any, score: float, match_type: int, matched_content: str = ""
) -> SearchResult:
    """A stored chunk and its document as a SearchResult (§5.15 hydration; also graph hits)."""
    return SearchResult(
        id=chunk.id,
        content=chunk.content,
        content_revision=chunk.content_revision,
        knowledge_id=chunk.knowledge_id,
        chunk_index=chunk.chunk_index,
        seq=chunk.chunk_index,
        knowledge_title=doc.title,
        start_at=chunk.start_at,
        end_at=chunk.end_at,
        score=score,
        match_type=match_type,
        metadata={
            str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in (doc.metadata or {}).items()
        },
        chunk_type=chunk.chunk_type,
        parent_chunk_id=chunk.parent_chunk_id,
        image_info=chunk.image_info,
        knowledge_filename=doc.file_name,
        knowledge_source=doc.source,
        knowledge_channel=doc.channel,
        knowledge_description=doc.description,
        knowledge_custom_metadata=(
            json.dumps(doc.custom_metadata, ensure_ascii=False, sort_keys=True) if doc.custom_metadata else ""
        ),
        chunk_metadata=dict(chunk.metadata) if chunk.metadata else None,
        matched_content=matched_content,
        knowledge_base_id=doc.knowledge_base_id,
    )


class HydrateStep(HybridSearcherBase):
    """Hits to SearchResults."""

    def _hydrate(self, ranked: Sequence[tuple[IndexWithScore, float]], trace: HybridTrace) -> list[SearchResult]:
        """§5.15 ``process_search_results`` with context enrichment skipped, for ``(hit, fused
        score)`` pairs; results without image info get the image info of the image chunks under
        them (§6.9)."""
        memo = self._rows
        memo.fresh(self.workspace.store)
        memo.preload(h.knowledge_base_id for h, _ in ranked)
        chunks = memo.chunks([h.chunk_id for h, _ in ranked])
        docs: dict[tuple[str, str], Knowledge] = memo.documents(
            (c.knowledge_base_id, c.knowledge_id) for c in chunks.values()
        )
        out: list[SearchResult] = []
        seen: set[str] = set()
        for h, score in ranked:
            c = chunks.get(h.chunk_id)
            reason = ""
            if c is None:
                reason = "chunk not found"
            elif not is_searchable(c):
                reason = "chunk not searchable"
            elif c.id in seen:
                reason = "duplicate chunk"
            elif (c.knowledge_base_id, c.knowledge_id) not in docs:
                reason = "document not found"
                log.warning("hybrid search: document %r of chunk %r not found", c.knowledge_id, c.id)
            if reason:
                trace.skipped_in_hydration.append((h.chunk_id, reason))
                continue
            assert c is not None
            seen.add(c.id)
            d = docs[(c.knowledge_base_id, c.knowledge_id)]
            r = chunk_to_search_result(c, d, score, h.match_type, matched_content=h.content)
            if h.source_type == IMAGE_SOURCE:
                r.metadata["retrieved_by"] = IMAGE_VECTOR
            out.append(r)
        memo.enrich_image_info(out)  # §6.9: images split off into child chunks
        return out

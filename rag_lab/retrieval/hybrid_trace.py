"""What one hybrid search did (:class:`HybridTrace`), for the lab, the search stage's diagnostics
and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.fusion import Ranked, ranked_hits


@dataclass(slots=True)
class HybridTrace:
    """What one search did, for the lab and for tests."""

    match_count: int = 0
    pool_size: int = 0
    kb_ids: list[str] = field(default_factory=list)
    embedded: bool = False
    requests: list[tuple[str, str, tuple[str, ...], int]] = field(default_factory=list)  # (group, type, kbs, top_k)
    #: each retriever's hits (an engine's HitRows make each hit when read)
    vector_hits: Sequence[IndexWithScore] = field(default_factory=list)
    keyword_hits: Sequence[IndexWithScore] = field(default_factory=list)
    #: the fused list (uncut), read as (hit, fused score) pairs (:func:`~rag_lab.retrieval.fusion.fuse_ranked`)
    ranked: Ranked = field(default_factory=lambda: Ranked.of([]))
    fusion: str = ""  # "" | "dedup_vector" | "dedup_keywords" | "rrf"
    faq_iterations: int = 0
    negative_filtered: list[str] = field(default_factory=list)
    skipped_in_hydration: list[tuple[str, str]] = field(default_factory=list)  # (chunk_id, reason)
    image_kb_ids: list[str] = field(default_factory=list)
    image_requests: list[int] = field(default_factory=list)  # top-k of each image request
    image_hits: list[IndexWithScore] = field(default_factory=list)
    image_dropped: int = 0
    image_errors: list[str] = field(default_factory=list)

    @property
    def fused(self) -> list[IndexWithScore]:
        """The fused list (uncut), each hit with its fused score."""
        return ranked_hits(self.ranked)

    def paths(self) -> dict[str, object]:
        """The compact per-path record the search stage keeps (``SearchDiagnostics.calls``): the
        match count and the vector, keyword and fused (uncut) lists as ``[chunk id, document id,
        score]`` in rank order."""

        def hits(xs: Sequence[IndexWithScore]) -> list[list[str | float]]:
            return [[h.chunk_id, h.knowledge_id, float(h.score)] for h in xs]

        return {
            "match_count": self.match_count,
            "vector": hits(self.vector_hits),
            "keyword": hits(self.keyword_hits),
            "fused": [[h.chunk_id, h.knowledge_id, float(score)] for h, score in self.ranked],
        }

"""What a :class:`~rag_lab.retrieval.vector_index.VectorIndex` holds and how it answers: its
entries (:class:`VectorEntry`), the policy choosing the flat scan, the 8-bit copy or the HNSW
graph by size (:class:`IndexPolicy`), and its error type.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

_CORES = os.cpu_count() or 1


class VectorIndexError(ValueError):
    """Bad vectors (wrong dimension, not 2-D, NaN), bad settings or an unreadable index file."""


@dataclass(frozen=True, slots=True)
class VectorEntry:
    entry_id: str
    chunk_id: str
    text: str | None = None


@dataclass(frozen=True, slots=True)
class IndexPolicy:
    """Which structure answers unrestricted queries, and its settings.

    * ``quantized_min_vectors`` — from this many vectors on (default 20,000; ``0`` = never), an
      8-bit scalar-quantised copy is scanned first (a quarter of the bytes of the flat scan) and
      its best candidates are re-scored exactly; the results are provably the flat scan's (see
      :meth:`VectorIndex._search_quantized`). Built in memory on first use (~0.1 s at 100k), never
      persisted, dropped on any change.
    * ``quantized_candidates`` — the 8-bit scan's candidates per result wanted (at least 64 more),
      at most: once 8 queries are known, the first scan fetches what recent queries needed (a
      threshold that few vectors pass needs few), and more only when the exactness check needs
      them.
    * ``quantized_shards`` — the 8-bit copy is split in this many parts scanned in parallel
      threads (faiss releases the GIL). ``0`` (default): one part per core, at most 4, and one
      part below ``2 * quantized_min_vectors`` vectors or 40,000 whichever is larger (a thread
      hand-off costs more than it saves on small scans). The results do not depend on it.
    * ``ann_min_vectors`` — HNSW answers unrestricted queries from this many vectors on (default
      ``0``: never). Faster per query at millions of vectors, but approximate and costly to build
      (61 s at 100k, 416 s at 300k on 2 cores); opt in for very large KBs.
    * ``hnsw_m`` — graph degree (memory ≈ ``2 * M * 4`` bytes per vector on top of the vectors).
    * ``hnsw_ef_construction`` — build-time beam width (quality vs build time).
    * ``hnsw_ef_search`` — query-time beam width; a query asking for ``k`` results uses
      ``max(hnsw_ef_search, k)``.
    * ``max_tombstone_fraction`` — rebuild the graph when removed vectors exceed this share of it.

    The HNSW defaults (M 32, efConstruction 200, efSearch 256) come from ``benchmarks/search.py``:
    on its 100k-chunk synthetic corpus M 16 / efConstruction 64 reached only ~0.7 vector
    recall@10 at efSearch 64, while M 32 / efConstruction 200 reaches ~0.96 at efSearch 128 and
    ~0.99 at 512, still several times faster than the flat scan.
    """

    ann_min_vectors: int = 0
    quantized_min_vectors: int = 20_000
    quantized_candidates: int = 4
    quantized_shards: int = 0
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 256
    max_tombstone_fraction: float = 0.1

    def __post_init__(self) -> None:
        checks = {
            "ann_min_vectors": self.ann_min_vectors >= 0,
            "quantized_min_vectors": self.quantized_min_vectors >= 0,
            "quantized_candidates": 1 <= self.quantized_candidates <= 1000,
            "quantized_shards": 0 <= self.quantized_shards <= 64,
            "hnsw_m": 2 <= self.hnsw_m <= 512,
            "hnsw_ef_construction": 1 <= self.hnsw_ef_construction <= 100_000,
            "hnsw_ef_search": 1 <= self.hnsw_ef_search <= 100_000,
            "max_tombstone_fraction": 0.0 < self.max_tombstone_fraction <= 1.0,
        }
        ranges = {
            "ann_min_vectors": ">= 0",
            "quantized_min_vectors": ">= 0",
            "quantized_candidates": "in [1, 1000]",
            "quantized_shards": "in [0, 64]",
            "hnsw_m": "in [2, 512]",
            "hnsw_ef_construction": "in [1, 100000]",
            "hnsw_ef_search": "in [1, 100000]",
            "max_tombstone_fraction": "in (0, 1]",
        }
        for name, ok in checks.items():
            if not ok:
                raise VectorIndexError(f"IndexPolicy.{name}={getattr(self, name)!r} must be {ranges[name]}")

    @classmethod
    def from_mapping(cls, data: dict[str, Any], source: str = "index policy") -> IndexPolicy:
        """From a config mapping; unknown keys are an error naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise VectorIndexError(
                f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}"
            )
        return cls(**data)

    def kind_for(self, n_vectors: int) -> str:
        """``"hnsw"``, ``"sq8"`` or ``"flat"``: what answers unrestricted queries over ``n_vectors``."""
        if self.ann_min_vectors > 0 and n_vectors >= self.ann_min_vectors:
            return "hnsw"
        if self.quantized_min_vectors > 0 and n_vectors >= self.quantized_min_vectors:
            return "sq8"
        return "flat"

    def shards_for(self, n_vectors: int) -> int:
        """Parts of the 8-bit copy scanned in parallel (see ``quantized_shards``)."""
        if self.quantized_shards > 0:
            return max(1, min(self.quantized_shards, n_vectors))
        if n_vectors < max(40_000, 2 * self.quantized_min_vectors):
            return 1
        return max(1, min(4, _CORES))

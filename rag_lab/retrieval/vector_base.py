"""The state of a :class:`~rag_lab.retrieval.vector_index.VectorIndex` (the flat faiss index,
its entries by faiss id, chunk and entry id, the derived graph and 8-bit copy, one lock), its
policy, and the exact flat scan every query path is measured against and falls back to.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.retrieval.faiss_threads import _faiss
from rag_lab.retrieval.vector_policy import IndexPolicy, VectorEntry, VectorIndexError

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.retrieval.vector_graph import _Graph
    from rag_lab.retrieval.vector_quantized import _Quantized


class VectorIndexBase:
    """One KB's vectors and the policy answering its queries (thread-safe)."""

    #: OpenMP threads for one query (see ``_single_query_threads``); 0 leaves faiss' default
    search_threads = 1
    #: the policy of indexes created without one (the workspace creates them without one)
    default_policy = IndexPolicy()

    def __init__(self, dimension: int, path: str | Path | None = None, policy: IndexPolicy | None = None) -> None:
        if dimension <= 0:
            raise VectorIndexError(f"dimension={dimension} must be positive")
        faiss = _faiss()
        self.dimension = int(dimension)
        self.path = Path(path) if path is not None else None
        self._policy = policy if policy is not None else type(self).default_policy
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))
        self._entries: dict[int, VectorEntry] = {}
        self._by_chunk: dict[str, list[int]] = {}
        self._by_entry: dict[str, int] = {}
        self._next_id = 0
        self._graph: _Graph | None = None
        self._quantized: _Quantized | None = None
        #: 8-bit path counters: queries, re-scans with 4x the candidates, flat fallbacks
        self.quantized_stats = {"queries": 0, "rescans": 0, "flat_fallbacks": 0}
        #: candidates per result the 8-bit check needed, the last 32 queries (see _first_candidates)
        self._needed: deque[float] = deque(maxlen=32)
        self._lock = threading.RLock()
        #: the on-disk version this index was loaded from or last saved as (None: none / legacy)
        self.version: str | None = None

    # -- policy -----------------------------------------------------------------------------
    @property
    def policy(self) -> IndexPolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: IndexPolicy) -> None:
        """Change the policy; a graph built with other HNSW settings is rebuilt on next use."""
        if not isinstance(policy, IndexPolicy):
            raise VectorIndexError(f"policy must be an IndexPolicy, got {type(policy).__name__}")
        with self._lock:
            self._policy = policy

    @property
    def kind(self) -> str:
        """``"flat"``, ``"sq8"`` or ``"hnsw"``: what answers unrestricted queries at the current size."""
        return self._policy.kind_for(len(self))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    # -- the flat scan ----------------------------------------------------------------------
    @staticmethod
    def _widen(search: Callable[[int], list[tuple[int, float]]], top_k: int, n: int) -> list[tuple[int, float]]:
        """Run ``search(k)`` with k growing while the score at the cut is tied with what lies
        beyond, so that ties are broken by id over the whole tied group, not by faiss' order."""
        k = min(n, top_k + max(8, top_k // 4))
        while True:
            got: list[tuple[int, float]] = search(k)
            if k >= n or len(got) < k or got[-1][1] < got[min(top_k, len(got)) - 1][1]:
                return got
            k = min(n, k * 2)

    def _search_flat(
        self, faiss: ModuleType, q: np.ndarray, top_k: int, n: int, allowed_ids: Collection[str] | None
    ) -> list[tuple[int, float]]:
        params = None
        if allowed_ids is not None:
            fids = [fid for cid in allowed_ids for fid in self._by_chunk.get(cid, [])]
            if not fids:
                return []
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(np.asarray(fids, dtype=np.int64)))
            n = len(fids)
        if n == 0:
            return []

        def run(k: int) -> list[tuple[int, float]]:
            scores, ids = self._index.search(q, k, params=params)
            return [(i, s) for i, s in zip(ids[0].tolist(), scores[0].tolist()) if i >= 0]

        return self._widen(run, top_k, n)

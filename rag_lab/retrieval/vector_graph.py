"""The optional HNSW graph of a vector index (:class:`_Graph`: graph position → faiss id,
tombstones for removed vectors), derived from the flat index: built when the policy asks for one,
rebuilt when its settings change or tombstones exceed ``max_tombstone_fraction``, and searched
with the tombstones excluded. :class:`GraphSearch` is one of the parts of
:class:`~rag_lab.retrieval.vector_index.VectorIndex`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.retrieval.faiss_threads import _all_threads, _faiss
from rag_lab.retrieval.vector_base import VectorIndexBase

if TYPE_CHECKING:
    import faiss


class _Graph:
    """The HNSW graph and its bookkeeping (graph position → faiss id, tombstones)."""

    __slots__ = ("index", "fids", "pos", "dead", "m", "ef_construction", "_sel", "_sel_keep")

    def __init__(
        self, index: faiss.Index, fids: list[int], m: int, ef_construction: int, dead: Collection[int] = ()
    ) -> None:
        self.index = index
        self.fids = fids  # graph position → faiss id
        self.dead: set[int] = set(dead)  # tombstoned graph positions
        self.pos = {fid: i for i, fid in enumerate(fids) if i not in self.dead}
        self.m, self.ef_construction = m, ef_construction
        self._sel: faiss.IDSelectorNot | None = None
        self._sel_keep: faiss.IDSelectorBatch | None = None

    @property
    def live(self) -> int:
        return len(self.fids) - len(self.dead)

    def tombstone(self, fid: int) -> None:
        i = self.pos.pop(fid, None)
        if i is not None:
            self.dead.add(i)
            self._sel = None

    def append(self, vectors: np.ndarray, fids: Sequence[int]) -> None:
        start = len(self.fids)
        self.index.add(vectors)
        self.fids.extend(int(f) for f in fids)
        for j, fid in enumerate(fids):
            self.pos[int(fid)] = start + j

    def selector(self, faiss: ModuleType) -> faiss.IDSelectorNot | None:
        """An id selector excluding the tombstones (None when there are none)."""
        if not self.dead:
            return None
        if self._sel is None:
            batch = faiss.IDSelectorBatch(np.fromiter(sorted(self.dead), dtype=np.int64))
            self._sel_keep = batch  # the NOT selector does not own the batch: keep it alive
            self._sel = faiss.IDSelectorNot(batch)
        return self._sel


class GraphSearch(VectorIndexBase):
    """Building, refreshing and searching the HNSW graph."""

    def _flat_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        faiss = _faiss()
        with self._lock:
            n = int(self._index.ntotal)
            if n == 0:
                return np.zeros(0, dtype=np.int64), np.zeros((0, self.dimension), dtype=np.float32)
            fids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
            vecs = faiss.downcast_index(self._index.index).reconstruct_n(0, n)
            return fids, np.ascontiguousarray(vecs, dtype=np.float32)

    def _build_graph(self) -> _Graph:
        faiss = _faiss()
        pol = self._policy
        fids, vecs = self._flat_arrays()
        index = faiss.IndexHNSWFlat(self.dimension, pol.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = pol.hnsw_ef_construction
        with _all_threads(faiss):
            index.add(vecs)
        return _Graph(index, fids.tolist(), pol.hnsw_m, pol.hnsw_ef_construction)

    def _ready_graph(self) -> _Graph | None:
        """The graph when the policy wants one now (built or rebuilt as needed), else None (and
        an unneeded graph is dropped). Call under the lock."""
        pol = self._policy
        if pol.kind_for(len(self)) != "hnsw":
            self._graph = None
            return None
        g = self._graph
        if (
            g is None
            or g.m != pol.hnsw_m
            or g.ef_construction != pol.hnsw_ef_construction
            or len(g.dead) > pol.max_tombstone_fraction * max(1, len(g.fids))
        ):
            g = self._graph = self._build_graph()
        return g

    def _search_graph(self, faiss: ModuleType, g: _Graph, q: np.ndarray, top_k: int, n: int) -> list[tuple[int, float]]:
        if n == 0:
            return []
        sel = g.selector(faiss)
        ef = self._policy.hnsw_ef_search

        def run(k: int) -> list[tuple[int, float]]:
            params = faiss.SearchParametersHNSW(efSearch=max(ef, k))
            if sel is not None:
                params.sel = sel
            scores, pos = g.index.search(q, k, params=params)
            return [(g.fids[int(i)], float(s)) for i, s in zip(pos[0], scores[0]) if i >= 0]

        return self._widen(run, top_k, n)

"""Cosine vector index per KB: an exact faiss ``IndexFlatIP`` (inside ``IndexIDMap2``), an
8-bit scalar-quantised copy that answers large KBs' queries at the same exact results, and an
optional HNSW graph for very large ones.

Vectors are L2-normalised, so the inner product is the cosine similarity. Each index *entry* has
an int64 faiss id, an entry id (the chunk id, or ``<chunk id>#q<i>`` for the i-th question of an
FAQ chunk), the chunk id it belongs to and, optionally, its own text (the FAQ question; ``None``
means "the chunk's content").

**Which structure answers a query** (:class:`IndexPolicy`): below ``quantized_min_vectors``
vectors (default 20,000) every query scans the flat index. From there on, queries without an
``allowed_ids`` restriction scan an 8-bit copy (``IndexScalarQuantizer``, a quarter of the bytes)
and re-score its best candidates with faiss' exact kernel, widening until a bound on the
quantisation error proves that nothing outside the candidates belongs in the results: the same
entries and scores as the flat scan, bit for bit, with no graph to build (from 40,000 vectors the
copy is split in one part per core, scanned in parallel threads). From
``ann_min_vectors`` (default 0: never) an HNSW graph (``IndexHNSWFlat``, ``M`` and ``efSearch``
configurable) answers instead: exact cosine scores for the vectors it finds, but it may miss a
few of the true best ones (``benchmarks/search.py`` measures recall against the flat scan).
Restricted queries (document / tag scope) always scan the flat index: a graph walk under a
selective filter loses recall, and the allowed set is small anyway. The score ``>= threshold``
filter and the tie order (score descending, then entry id) are the same on every path.

The flat index stays the source of truth (it supports removal and exact search); the quantised
copy and the graph are derived from it. The quantised copy lives in memory only (built on first
use, ~0.1 s at 100k vectors; dropped on any change). Removed vectors are tombstoned in the graph
(skipped by an id selector) and the graph is rebuilt once tombstones exceed
``max_tombstone_fraction`` of it, or when the HNSW settings change.

Persisted as ``vectors.faiss`` + ``ids.json`` (the flat index) and, when a graph exists,
``vectors.hnsw`` + ``ann.json`` (graph position → faiss id, tombstones, settings), all written
atomically. A missing, stale or unreadable graph is rebuilt from the flat index on first use.

:class:`VectorIndex` is assembled from one part per responsibility, sharing the flat index and
one lock: its state, policy and flat scan (:mod:`rag_lab.retrieval.vector_base`), the files
(:mod:`rag_lab.retrieval.vector_files`), the HNSW graph (:mod:`rag_lab.retrieval.vector_graph`)
and the 8-bit copy (:mod:`rag_lab.retrieval.vector_quantized`); :class:`IndexPolicy`,
:class:`VectorEntry` and :class:`VectorIndexError` are in :mod:`rag_lab.retrieval.vector_policy`.
Their names are importable from here.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Collection, Sequence
from typing import Concatenate, ParamSpec

import numpy as np

from rag_lab.retrieval.faiss_threads import _all_threads, _faiss, _single_query_threads
from rag_lab.retrieval.vector_files import VectorIndexFiles
from rag_lab.retrieval.vector_policy import IndexPolicy, VectorEntry, VectorIndexError
from rag_lab.retrieval.vector_quantized import QuantizedSearch
from rag_lab.retrieval.vector_quantized import _Quantized as _Quantized

__all__ = ["IndexPolicy", "VectorEntry", "VectorIndex", "VectorIndexError"]

P = ParamSpec("P")


def _chunk_scores(
    search_entries: Callable[Concatenate[VectorIndex, P], list[tuple[VectorEntry, float]]],
) -> Callable[Concatenate[VectorIndex, P], list[tuple[str, float]]]:
    """``search``: :meth:`VectorIndex.search_entries` as ``[(chunk_id, score)]``."""

    @functools.wraps(search_entries)
    def search(self: VectorIndex, /, *args: P.args, **kwargs: P.kwargs) -> list[tuple[str, float]]:
        return [(e.chunk_id, s) for e, s in search_entries(self, *args, **kwargs)]

    search.__name__ = search.__qualname__ = "search"
    search.__doc__ = "``[(chunk_id, score)]`` (see :meth:`search_entries`)."
    return search


class VectorIndex(VectorIndexFiles, QuantizedSearch):
    """``add`` / ``remove_chunks`` / ``search`` over one KB's vectors (thread-safe)."""

    def ann_info(self) -> dict[str, object]:
        """The graph's state, for the lab and tests: ``{kind, graph_vectors, tombstones, m, ef_*}``."""
        with self._lock:
            g = self._graph
            return {
                "kind": self.kind,
                "graph_vectors": len(g.fids) if g else 0,
                "tombstones": len(g.dead) if g else 0,
                "m": g.m if g else None,
                "ef_construction": g.ef_construction if g else None,
                "ef_search": self._policy.hnsw_ef_search,
            }

    # -- updates ----------------------------------------------------------------------------
    def _check(self, vectors: np.ndarray, n: int | None = None) -> np.ndarray:
        arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise VectorIndexError(f"vectors of shape {arr.shape}; expected (n, {self.dimension})")
        if n is not None and arr.shape[0] != n:
            raise VectorIndexError(f"{arr.shape[0]} vectors for {n} ids")
        if not np.isfinite(arr).all():
            raise VectorIndexError("vectors contain NaN or infinite values")
        return arr

    def add(
        self,
        chunk_ids: Sequence[str],
        vectors: np.ndarray,
        *,
        entry_ids: Sequence[str] | None = None,
        texts: Sequence[str | None] | None = None,
    ) -> None:
        """Add one vector per id. ``entry_ids`` default to the chunk ids; an entry id already
        present is replaced."""
        arr = self._check(vectors, len(chunk_ids))
        eids = list(entry_ids) if entry_ids is not None else list(chunk_ids)
        txts = list(texts) if texts is not None else [None] * len(eids)
        if len(eids) != len(chunk_ids) or len(txts) != len(chunk_ids):
            raise VectorIndexError("entry_ids and texts must have one item per chunk id")
        if len(set(eids)) != len(eids):
            raise VectorIndexError("duplicate entry ids in one add() call")
        with self._lock:
            stale = [self._by_entry[e] for e in eids if e in self._by_entry]
            if stale:
                self._remove_fids(stale)
            fids = np.arange(self._next_id, self._next_id + len(eids), dtype=np.int64)
            self._next_id += len(eids)
            if len(eids):
                self._quantized = None
                self._index.add_with_ids(arr, fids)
                if self._graph is not None:
                    with _all_threads(_faiss()):
                        self._graph.append(arr, fids.tolist())
            for fid, eid, cid, txt in zip(fids.tolist(), eids, chunk_ids, txts):
                self._entries[fid] = VectorEntry(eid, cid, txt)
                self._by_chunk.setdefault(cid, []).append(fid)
                self._by_entry[eid] = fid

    def _remove_fids(self, fids: list[int]) -> None:
        if not fids:
            return
        self._quantized = None
        self._index.remove_ids(np.asarray(fids, dtype=np.int64))
        for fid in fids:
            e = self._entries.pop(fid)
            self._by_entry.pop(e.entry_id, None)
            lst = self._by_chunk.get(e.chunk_id, [])
            if fid in lst:
                lst.remove(fid)
            if not lst:
                self._by_chunk.pop(e.chunk_id, None)
            if self._graph is not None:
                self._graph.tombstone(fid)

    def remove_chunks(self, chunk_ids: Collection[str]) -> int:
        """Remove every entry of these chunks; returns the number of vectors removed."""
        with self._lock:
            fids = [fid for cid in chunk_ids for fid in self._by_chunk.get(cid, [])]
            self._remove_fids(fids)
            return len(fids)

    # -- queries ----------------------------------------------------------------------------
    def export_vectors(self) -> tuple[list[VectorEntry], np.ndarray]:
        """Every entry and its vector (rows in the same order), e.g. to compare with another
        index or to rebuild elsewhere."""
        fids, vecs = self._flat_arrays()
        return [self._entries[int(f)] for f in fids], vecs

    def chunk_ids(self) -> set[str]:
        return set(self._by_chunk)

    def entries(self) -> list[VectorEntry]:
        """All entries, by entry id."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.entry_id)

    def search_entries(
        self,
        vector: np.ndarray,
        top_k: int,
        threshold: float = -1.0,
        allowed_ids: Collection[str] | None = None,
        *,
        exact: bool = False,
    ) -> list[tuple[VectorEntry, float]]:
        """Best ``top_k`` entries with cosine ``score >= threshold``, score descending, ties by
        entry id. ``allowed_ids`` (chunk ids) restricts the search when given (always exact).
        ``exact=True`` scans the flat index even when the policy would use the graph."""
        q = self._check(vector)
        if q.shape[0] != 1:
            raise VectorIndexError(f"search takes one query vector, got {q.shape[0]}")
        if top_k <= 0:
            return []
        faiss = _faiss()
        with self._lock:
            graph = None if exact or allowed_ids is not None else self._ready_graph()
            quantized = None if graph is not None or exact or allowed_ids is not None else self._ready_quantized()
            if self.search_threads > 0:
                _single_query_threads(faiss, self.search_threads)
            n = len(self)
            if graph is not None:
                got = self._search_graph(faiss, graph, q, top_k, n)
            elif quantized is not None:
                got = self._search_quantized(faiss, quantized, q, top_k, n, threshold)
            else:
                got = self._search_flat(faiss, q, top_k, n, allowed_ids)
            entries = self._entries
            hits = [(entries[fid], s) for fid, s in got if s >= threshold]
        scores = [s for _, s in hits]
        if not all(map(operator.gt, scores, scores[1:])):  # ties (or any other order): sort
            hits.sort(key=lambda h: (-h[1], h[0].entry_id))
        return hits[:top_k]

    search = _chunk_scores(search_entries)

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

Kept whole: one class whose methods share the flat index, the HNSW graph, its tombstones and one
lock.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections import deque
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


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


_tls = threading.local()


def _faiss() -> Any:
    import faiss  # lazy: heavy import

    return faiss


def _single_query_threads(faiss: Any, n: int) -> None:
    """Use ``n`` OpenMP threads for searches made from the calling thread. One query over a flat
    index is several times faster on one thread than with OpenMP's fork/join (measured: 6 ms vs
    47 ms at 100k x 384 on 2 cores). The OpenMP setting is per thread, so other faiss users in the
    process keep theirs."""
    if getattr(_tls, "omp_threads", None) != n:
        faiss.omp_set_num_threads(n)
        _tls.omp_threads = n


class _Graph:
    """The HNSW graph and its bookkeeping (graph position → faiss id, tombstones)."""

    __slots__ = ("index", "fids", "pos", "dead", "m", "ef_construction", "_sel", "_sel_keep")

    def __init__(self, index: Any, fids: list[int], m: int, ef_construction: int, dead: Collection[int] = ()) -> None:
        self.index = index
        self.fids = fids  # graph position → faiss id
        self.dead: set[int] = set(dead)  # tombstoned graph positions
        self.pos = {fid: i for i, fid in enumerate(fids) if i not in self.dead}
        self.m, self.ef_construction = m, ef_construction
        self._sel: Any = None
        self._sel_keep: Any = None

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

    def selector(self, faiss: Any) -> Any:
        """An id selector excluding the tombstones (None when there are none)."""
        if not self.dead:
            return None
        if self._sel is None:
            batch = faiss.IDSelectorBatch(np.fromiter(sorted(self.dead), dtype=np.int64))
            self._sel_keep = batch  # the NOT selector does not own the batch: keep it alive
            self._sel = faiss.IDSelectorNot(batch)
        return self._sel


class VectorIndex:
    """``add`` / ``remove_chunks`` / ``search`` over one KB's vectors (thread-safe)."""

    VECTORS_FILE = "vectors.faiss"
    IDS_FILE = "ids.json"
    ANN_FILE = "vectors.hnsw"
    ANN_META_FILE = "ann.json"
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

    def ann_info(self) -> dict[str, Any]:
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

    # -- persistence ------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, dimension: int, policy: IndexPolicy | None = None) -> VectorIndex:
        """Open the index in ``path`` (its live version, see :mod:`rag_lab.retrieval.versioned`);
        an absent index is a new empty one. A version replaced (and pruned) by a writer while it
        was being read is read again from the new pointer."""
        from rag_lab.retrieval.versioned import current_dir, read_pointer

        root = Path(path)
        for attempt in range(3):
            p, version = current_dir(root)
            try:
                return cls._load_version(root, p, version, dimension, policy)
            except VectorIndexError:
                if attempt == 2 or read_pointer(root) == version:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _load_version(
        cls, root: Path, p: Path, version: str | None, dimension: int, policy: IndexPolicy | None
    ) -> VectorIndex:
        idx = cls(dimension, root, policy)
        idx.version = version
        vec_file, ids_file = p / cls.VECTORS_FILE, p / cls.IDS_FILE
        if not vec_file.exists() and not ids_file.exists():
            if version is not None:
                raise VectorIndexError(f"{p}: version {version} has no index files (removed while being read)")
            return idx
        try:
            meta = json.loads(ids_file.read_text(encoding="utf-8"))
            raw = _faiss().read_index(str(vec_file))
        except Exception as exc:
            raise VectorIndexError(f"{p}: cannot read the vector index: {exc}") from None
        if int(meta.get("dimension", -1)) != dimension or raw.d != dimension:
            raise VectorIndexError(
                f"{p}: index dimension {raw.d} (ids.json: {meta.get('dimension')}) does not match the KB's "
                f"embedding dimension {dimension}"
            )
        idx._index = raw
        idx._next_id = int(meta["next_id"])
        for fid, entry_id, chunk_id, text in meta["entries"]:
            idx._entries[int(fid)] = VectorEntry(entry_id, chunk_id, text)
            idx._by_chunk.setdefault(chunk_id, []).append(int(fid))
            idx._by_entry[entry_id] = int(fid)
        if raw.ntotal != len(idx._entries):
            raise VectorIndexError(f"{p}: {raw.ntotal} vectors but {len(idx._entries)} ids in {cls.IDS_FILE}")
        idx._graph = idx._load_graph(p)
        return idx

    def _load_graph(self, p: Path) -> _Graph | None:
        """The persisted graph if it matches the flat index, else None (rebuilt on first use)."""
        ann_file, meta_file = p / self.ANN_FILE, p / self.ANN_META_FILE
        if not ann_file.exists() or not meta_file.exists():
            return None
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            raw = _faiss().read_index(str(ann_file))
            fids = [int(f) for f in meta["fids"]]
            g = _Graph(raw, fids, int(meta["m"]), int(meta["ef_construction"]), [int(d) for d in meta["dead"]])
        except Exception as exc:
            log.warning("%s: unreadable HNSW graph, it will be rebuilt: %s", p, exc)
            return None
        if raw.d != self.dimension or raw.ntotal != len(fids) or set(g.pos) != set(self._entries):
            log.warning("%s: the HNSW graph does not match the flat index, it will be rebuilt", p)
            return None
        return g

    def save(self, path: str | Path | None = None) -> None:
        """Write the flat index (and the graph, built first when the policy asks for one) as a
        new version of ``path`` and switch to it atomically (:mod:`rag_lab.retrieval.versioned`)."""
        from rag_lab.retrieval.versioned import write_version

        p = Path(path) if path is not None else self.path
        if p is None:
            raise VectorIndexError("VectorIndex.save: no path given and the index has none")
        faiss = _faiss()
        with self._lock:
            graph = self._ready_graph()
            meta = {
                "dimension": self.dimension,
                "next_id": self._next_id,
                "entries": [[fid, e.entry_id, e.chunk_id, e.text] for fid, e in sorted(self._entries.items())],
            }

            def write(d: Path) -> None:
                faiss.write_index(self._index, str(d / self.VECTORS_FILE))
                (d / self.IDS_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
                if graph is not None:
                    gmeta = {
                        "m": graph.m,
                        "ef_construction": graph.ef_construction,
                        "fids": graph.fids,
                        "dead": sorted(graph.dead),
                    }
                    faiss.write_index(graph.index, str(d / self.ANN_FILE))
                    (d / self.ANN_META_FILE).write_text(json.dumps(gmeta), encoding="utf-8")

            legacy = (self.VECTORS_FILE, self.IDS_FILE, self.ANN_FILE, self.ANN_META_FILE)
            self.version = write_version(p, write, legacy_files=legacy)
            self.path = p

    # -- updates ----------------------------------------------------------------------------
    def _check(self, vectors: np.ndarray, n: int | None = None) -> np.ndarray:
        arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise VectorIndexError(f"vectors of shape {arr.shape}; expected (n, {self.dimension})")
        if n is not None and arr.shape[0] != n:
            raise VectorIndexError(f"{arr.shape[0]} vectors for {n} ids")
        if not np.all(np.isfinite(arr)):
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

    # -- the graph --------------------------------------------------------------------------
    def export_vectors(self) -> tuple[list[VectorEntry], np.ndarray]:
        """Every entry and its vector (rows in the same order), e.g. to compare with another
        index or to rebuild elsewhere."""
        fids, vecs = self._flat_arrays()
        return [self._entries[int(f)] for f in fids], vecs

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

    # -- queries ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._index.ntotal)

    def chunk_ids(self) -> set[str]:
        return set(self._by_chunk)

    def entries(self) -> list[VectorEntry]:
        """All entries, by entry id."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.entry_id)

    def search(
        self,
        vector: np.ndarray,
        top_k: int,
        threshold: float = -1.0,
        allowed_ids: Collection[str] | None = None,
        *,
        exact: bool = False,
    ) -> list[tuple[str, float]]:
        """``[(chunk_id, score)]`` (see :meth:`search_entries`)."""
        return [(e.chunk_id, s) for e, s in self.search_entries(vector, top_k, threshold, allowed_ids, exact=exact)]

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
        hits.sort(key=lambda h: (-h[1], h[0].entry_id))
        return hits[:top_k]

    @staticmethod
    def _widen(search: Any, top_k: int, n: int) -> list[tuple[int, float]]:
        """Run ``search(k)`` with k growing while the score at the cut is tied with what lies
        beyond, so that ties are broken by id over the whole tied group, not by faiss' order."""
        k = min(n, top_k + max(8, top_k // 4))
        while True:
            got: list[tuple[int, float]] = search(k)
            if k >= n or len(got) < k or got[-1][1] < got[min(top_k, len(got)) - 1][1]:
                return got
            k = min(n, k * 2)

    def _search_flat(
        self, faiss: Any, q: np.ndarray, top_k: int, n: int, allowed_ids: Collection[str] | None
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
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]

        return self._widen(run, top_k, n)

    def scans_in_parallel(self) -> bool:
        """Whether unrestricted queries scan the 8-bit copy in two or more parts (threads) now."""
        n = len(self)
        return self._policy.kind_for(n) == "sq8" and self._policy.shards_for(n) > 1

    def _ready_quantized(self) -> _Quantized | None:
        """The 8-bit copy when the policy wants it now (built on first use), else None. Call
        under the lock."""
        if self._policy.kind_for(len(self)) != "sq8":
            return None  # kept until the data changes: switching policies back and forth is free
        n = len(self)
        if self._quantized is None or len(self._quantized.parts) != self._policy.shards_for(n):
            self._quantized = _Quantized.build(_faiss(), self._index, self.dimension, shards=self._policy.shards_for(n))
        return self._quantized

    def _search_quantized(
        self, faiss: Any, qz: _Quantized, q: np.ndarray, top_k: int, n: int, threshold: float = -np.inf
    ) -> list[tuple[int, float]]:
        """The flat scan's results (``top_k`` best, then ``score >= threshold``) from the 8-bit
        scan plus exact re-scoring.

        Every vector's exact score is within ``bound`` of ``K + alpha · A`` (see :class:`_Quantized`),
        so a candidate's exact score is at most its upper bound ``U = K + alpha · A + bound`` and at
        least ``U - 2 · bound``. The scan returns the ``c`` best candidates by ``A``; a vector
        outside them has ``A <=`` the last candidate's, so its score is at most ``U_last``. Nothing
        outside can enter (or tie into) the results when ``U_last`` is below the threshold, or
        below the ``top_k``-th best exact score among the candidates. Only candidates that may
        reach both the threshold and the ``top_k``-th candidate's lower bound are re-scored (the
        others are out either way). When the check fails, ``c`` grows (×4) until it holds, or the
        flat scan answers.

        The first ``c`` follows the index' recent queries (:meth:`_first_candidates`): the number
        of candidates the check needed, so a threshold that cuts most vectors, or well separated
        scores, scan for fewer. The results never depend on it."""
        if n == 0:
            return []
        c = min(n, self._first_candidates(top_k))
        stats = self.quantized_stats
        stats["queries"] += 1
        while True:
            approx, pos, const, alpha, bound = qz.scan(q, c)
            m = int(np.count_nonzero(pos >= 0))  # found, best first; -1 pads the end
            if m == 0:
                return []
            upper = const + alpha * approx[:m].astype(np.float64) + bound  # non-increasing
            floor = threshold
            if m >= top_k:  # the top_k-th candidate's exact score is at least its lower bound
                floor = max(floor, float(upper[top_k - 1]) - 2.0 * bound)
            r = int(np.searchsorted(-upper, -floor, side="right"))  # candidates with upper >= floor
            kth = -np.inf
            if r:
                found = pos[:r]
                exact = qz.exact_scores(faiss, q, found)
                order = np.lexsort((found, -exact))
                kth = float(exact[order[min(top_k, r) - 1]])
            outside = float(upper[m - 1])  # a vector outside the candidates scores at most this
            if m < c or c >= n or outside < threshold or (r >= top_k and kth > outside):
                self._note_candidates(top_k, int(np.searchsorted(-upper, -max(threshold, kth), side="right")) + 1)
                if not r:
                    return []
                keep = order[exact[order] >= kth]  # the top_k and whatever ties the k-th
                return list(zip(qz.fids[found[keep]].tolist(), exact[keep].tolist()))
            if c * 4 >= n:
                stats["flat_fallbacks"] += 1
                self._note_candidates(top_k, n)
                return self._search_flat(faiss, q, top_k, n, None)
            stats["rescans"] += 1
            c *= 4

    def _first_candidates(self, top_k: int) -> int:
        """Candidates of a query's first 8-bit scan: ``quantized_candidates`` per result (at least
        64 more) until 8 queries are known; then 1.25 × the 90th percentile of what the check
        needed per result in the recent queries, at most that, at least 64 more than ``top_k``
        (a smaller scan is cheaper: faiss keeps a heap of ``c``)."""
        cap = top_k * self._policy.quantized_candidates
        seen = self._needed
        if len(seen) >= 8:  # sorted in Python: np.quantile's call overhead exceeds the sort of 32 floats
            p90 = sorted(seen)[(len(seen) * 9) // 10]
            cap = min(cap, math.ceil(top_k * 1.25 * p90))
        return max(cap, top_k + 64)

    def _note_candidates(self, top_k: int, needed: int) -> None:
        """Remember that a query for ``top_k`` needed ``needed`` candidates (call under the lock)."""
        self._needed.append(needed / top_k)

    def _search_graph(self, faiss: Any, g: _Graph, q: np.ndarray, top_k: int, n: int) -> list[tuple[int, float]]:
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


class _Quantized:
    """An 8-bit scalar-quantised copy of the flat index, the exact vectors it re-scores against (a
    read-only view of the flat index' storage, valid until the next change, which drops this
    copy) and each position's faiss id.

    Each dimension d is mapped to 256 levels over its own range: ``x_d ≈ low_d + step_d · c_d``
    with ``c_d`` in 0..255 and ``step_d = (high_d - low_d) / 255`` (ranges from every vector, so
    none is clipped). The codes are stored centred (``c_d - 128``) in a faiss
    ``QT_8bit_direct_signed`` index, whose kernel takes an integer query and sums integer
    products, exactly. The query is scanned as integers too: ``q'_d = q_d · step_d`` rounded to
    ``qs_d = round(q'_d / alpha)`` with ``alpha = max|q'| / 127``. Then, for every vector,

        q · x = K + alpha · A + R,   K = q · low + 128 · Σ q'_d,   A = Σ qs_d (c_d - 128),

    with ``|R|`` bounded by :meth:`bound` from the codes' rounding (half a step per dimension, or
    by Cauchy-Schwarz ``|q| · max_i |x_i - x̂_i|``, whichever is less) and the query's (``alpha``
    times the smaller of half the codes' largest L1 norm and ``|ε| · max_i |c_i - 128|`` for the
    query's own rounding errors ``ε``). faiss' integer kernel is ~2.5× faster than its float 8-bit
    decoder (``QT_8bit``): one scan at 100k x 384 took 1.70 vs 4.19 ms p50 (flat: 5.29 ms) in a run
    of ``benchmarks/search.py``.

    The codes may be split in contiguous parts (``shards``), scanned in parallel threads and
    merged: the merged list is the ``c`` best by ``A`` over all parts, so the exactness argument
    of :meth:`VectorIndex._search_quantized` is unchanged (a vector outside has ``A`` at most the
    last candidate's)."""

    __slots__ = ("parts", "offsets", "vectors", "fids", "step", "low", "code_l1", "code_l2", "resid_l2")

    def __init__(
        self,
        parts: list[Any],
        vectors: np.ndarray,
        fids: np.ndarray,
        step: np.ndarray,
        low: np.ndarray,
        norms: tuple[float, float, float],
    ) -> None:
        self.parts, self.vectors, self.fids, self.step, self.low = parts, vectors, fids, step, low
        #: position of each part's first vector
        self.offsets = np.cumsum([0] + [int(p.ntotal) for p in parts[:-1]]).astype(np.int64)
        #: max over vectors of Σ_d |c_d - 128|, of |c - 128| and of |x - x̂| (Euclidean)
        self.code_l1, self.code_l2, self.resid_l2 = norms

    def scan(self, q: np.ndarray, c: int, parallel: bool = True) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """The ``c`` best positions by ``A``: (A, positions, K, alpha, bound); positions ``-1``
        pad the list when there are fewer than ``c`` vectors. ``parallel=False`` scans the parts
        one after the other in the calling thread (the same result; for benchmarks)."""
        q64 = q[0].astype(np.float64)
        scaled = q64 * self.step
        top = float(np.abs(scaled).max()) if scaled.size else 0.0
        alpha = top / 127.0 if top > 0 else 1.0
        qs = np.rint(scaled / alpha)  # integers in [-127, 127]: the kernel truncates, these are exact
        qs32 = np.ascontiguousarray(qs[None, :], dtype=np.float32)
        k = float(q64 @ self.low) + 128.0 * float(scaled.sum())
        bound = self.bound(q64, alpha, scaled / alpha - qs)
        if len(self.parts) == 1:
            approx, pos = self.parts[0].search(qs32, c)
            return approx[0], pos[0], k, alpha, bound
        if parallel:
            pool = _scan_pool()
            pending = [pool.submit(_scan_part, part, qs32, c) for part in self.parts[1:]]
            first, first_pos = self.parts[0].search(qs32, c)  # the caller's thread scans the first part
            got = [(first[0], first_pos[0])] + [f.result() for f in pending]
        else:
            got = [(a[0], p[0]) for a, p in (part.search(qs32, c) for part in self.parts)]
        approx = np.concatenate([a for a, _ in got])
        pos = np.concatenate([np.where(p >= 0, p + off, -1) for (_, p), off in zip(got, self.offsets)])
        valid = pos >= 0
        approx, pos = approx[valid], pos[valid]
        best = np.argsort(-approx, kind="stable")[:c]
        approx, pos = approx[best], pos[best]
        if pos.size < c:
            approx = np.concatenate([approx, np.full(c - pos.size, -np.inf, dtype=approx.dtype)])
            pos = np.concatenate([pos, np.full(c - pos.size, -1, dtype=pos.dtype)])
        return approx, pos, k, alpha, bound

    def bound(self, q64: np.ndarray, alpha: float, eps: np.ndarray) -> float:
        """``max |q · x - (K + alpha · A)|`` over the vectors, float rounding included. Codes: half
        a step per dimension (a thousandth more: levels are rounded in float32) or ``|q|`` times
        the largest residual. Query: ``alpha`` times half the codes' largest L1 norm or
        ``|ε| · max |c - 128|``. Plus 1e-4 for float sums (the flat kernel's float32 sum over a
        few thousand dimensions of unit vectors errs by ~1e-5)."""
        absq = np.abs(q64)
        qnorm = float(np.sqrt(q64 @ q64))
        codes = min(0.5 * (1.0 + 1e-3) * float(absq @ self.step), qnorm * self.resid_l2 * (1.0 + 1e-6))
        query = alpha * min(0.5 * self.code_l1, float(np.sqrt(eps @ eps)) * self.code_l2 * (1.0 + 1e-6))
        # should the kernel sum in float32, integers past 2^24 round: 127 · code_l1 bounds |A|
        kernel = alpha * 127.0 * self.code_l1 * absq.size * 2.0**-24
        return float(codes + query + kernel + 1e-4 * (1.0 + float(absq.sum())))

    def exact_scores(self, faiss: Any, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Inner products of ``q`` with the vectors at ``positions``, by faiss' own kernel: bit
        for bit the flat scan's scores (numpy's BLAS sums in another order, and a last-bit
        difference reorders ties)."""
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        out = np.empty(pos.size, dtype=np.float32)
        qv = np.ascontiguousarray(q[0], dtype=np.float32)
        faiss.fvec_inner_products_by_idx(
            faiss.swig_ptr(out),
            faiss.swig_ptr(qv),
            faiss.swig_ptr(self.vectors),
            faiss.swig_ptr(pos),
            self.vectors.shape[1],
            1,
            pos.size,
        )
        return out

    @classmethod
    def build(cls, faiss: Any, id_map: Any, dimension: int, block: int = 16_384, shards: int = 1) -> _Quantized:
        n = int(id_map.ntotal)
        flat = faiss.downcast_index(id_map.index)
        vectors = faiss.rev_swig_ptr(flat.get_xb(), n * dimension).reshape(n, dimension)
        vectors.flags.writeable = False
        fids = faiss.vector_to_array(id_map.id_map).astype(np.int64)
        low = vectors.min(axis=0).astype(np.float64)
        step = (vectors.max(axis=0).astype(np.float64) - low) / 255.0
        # codes in float32 (4x faster than float64 at 100k): a level is off the exact rounding only
        # within ~5e-5 of a half level, which :meth:`bound` allows for
        low32 = low.astype(np.float32)  # exact: a minimum of float32 values
        inv32 = np.divide(1.0, step, out=np.zeros_like(step), where=step > 0).astype(np.float32)
        step32 = step.astype(np.float32)
        shards = max(1, min(shards, n))
        bounds = [n * i // shards for i in range(shards + 1)]
        parts = [
            faiss.IndexScalarQuantizer(
                dimension, faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_INNER_PRODUCT
            )
            for _ in range(shards)
        ]
        l1 = l2 = resid = 0.0
        # a block at a time (the float copies are transient), no block across two parts
        cuts = sorted({*range(0, n, block), *bounds[1:-1]})
        for start, stop in zip(cuts, [*cuts[1:], n]):
            part = vectors[start:stop]
            codes = np.subtract(part, low32)
            codes *= inv32
            np.rint(codes, out=codes)
            np.clip(codes, 0.0, 255.0, out=codes)
            diff = np.subtract(part, step32 * codes + low32)  # x - x̂ in float32 (see slack below)
            resid = max(resid, float(np.sqrt(np.einsum("ij,ij->i", diff, diff)).max()))
            codes -= 128.0
            l1 = max(l1, float(np.abs(codes).sum(axis=1, dtype=np.float64).max()))
            l2 = max(l2, float(np.sqrt(np.einsum("ij,ij->i", codes, codes, dtype=np.float64)).max()))
            parts[np.searchsorted(bounds, start, side="right") - 1].add(codes)
        # float32 decoding and subtraction err by a few ulps of the largest coordinate per dimension
        resid += np.sqrt(dimension) * 2.0**-20 * float(np.abs(vectors).max(initial=0.0))
        return cls(parts, vectors, fids, step, low, (l1, l2, resid))


_pool_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def _scan_pool() -> ThreadPoolExecutor:
    """Worker threads for the 8-bit copy's parts (created on first use, shared by every index;
    a forked child, which has none of its parent's threads, gets its own)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=3, thread_name_prefix="rag-lab-sq8"))
        return _pool[1]


def _scan_part(part: Any, qs32: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """One part's ``c`` best by the integer kernel, on one OpenMP thread."""
    _single_query_threads(_faiss(), 1)
    approx, pos = part.search(qs32, c)
    return approx[0], pos[0]


class _all_threads:
    """Context manager: let faiss use every core in the calling thread (graph builds), then
    make the next query re-apply its single-query thread setting."""

    def __init__(self, faiss: Any) -> None:
        self.faiss = faiss

    def __enter__(self) -> None:
        self.faiss.omp_set_num_threads(os.cpu_count() or 1)
        _tls.omp_threads = None

    def __exit__(self, *exc: object) -> None:
        _tls.omp_threads = None

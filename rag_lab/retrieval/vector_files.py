"""A vector index on disk: ``vectors.faiss`` + ``ids.json`` (the flat index) and, when a graph
exists, ``vectors.hnsw`` + ``ann.json`` (graph position → faiss id, tombstones, settings), written
as a new version switched to atomically (:mod:`rag_lab.retrieval.versioned`). A missing, stale or
unreadable graph is rebuilt from the flat index on first use. :class:`VectorIndexFiles` is one of
the parts of :class:`~rag_lab.retrieval.vector_index.VectorIndex`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Self

from rag_lab.retrieval.faiss_threads import _faiss
from rag_lab.retrieval.vector_graph import GraphSearch, _Graph
from rag_lab.retrieval.vector_policy import IndexPolicy, VectorEntry, VectorIndexError

#: the records keep the logger name of :mod:`rag_lab.retrieval.vector_index`
log = logging.getLogger("rag_lab.retrieval.vector_index")


class VectorIndexFiles(GraphSearch):
    """:meth:`load` and :meth:`save`."""

    VECTORS_FILE = "vectors.faiss"
    IDS_FILE = "ids.json"
    ANN_FILE = "vectors.hnsw"
    ANN_META_FILE = "ann.json"

    @classmethod
    def load(cls, path: str | Path, dimension: int, policy: IndexPolicy | None = None) -> Self:
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
    ) -> Self:
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

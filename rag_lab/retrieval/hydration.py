"""Rows that hydration reads (chunks, their documents, image info gathered from child chunks),
memoised per state of the knowledge store.

Hydration (§5.15) turns index hits into SearchResults from SQLite rows. The same chunks come back
query after query, and at 1k chunks the row loading was most of a search's cost. The memo keeps
the rows read while the store's change token (its own writes, and SQLite's ``data_version``,
which moves when another connection commits) stays the same, and starts empty when it moves. The
memoised ``Chunk`` / ``Knowledge`` objects are only read: :func:`chunk_to_search_result` copies
what it takes from them.

A small KB (at most :attr:`HydrationMemo.preload_max_chunks` chunks) is read whole on its first
hydration under a store state: its chunks, its documents, and the children §6.9 gathers image
info from, answered from those chunks. A search of a 1k-chunk KB then reads no row from SQLite,
as a retriever over an in-memory document list would not.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from rag_lab.retrieval.image_info import enrich_search_results_image_info

__all__ = ["HydrationMemo"]


class HydrationMemo:
    """``chunks``, ``documents`` and ``image_info`` of a store, each row read once per store state."""

    #: rows kept before the memo starts over (a bound on memory for very large KBs)
    max_rows = 50_000
    #: KBs of at most this many chunks are read whole (0: never)
    preload_max_chunks = 5_000

    def __init__(self, store: Any = None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._token: Any = None
        self._chunks: dict[str, Any] = {}
        self._docs: dict[tuple[str, str], Any] = {}
        self._images: dict[str, str] = {}
        self._kbs: dict[str, _WholeKb | None] = {}

    def fresh(self, store: Any) -> None:
        """Read ``store`` from now on; start over when it is another store or changed since the
        last call (one cheap query)."""
        token = (id(store), store.change_token())
        with self._lock:
            size = len(self._chunks) + len(self._docs) + len(self._images)
            if token != self._token or size > self.max_rows or store is not self.store:
                self.store, self._token = store, token
                self._chunks, self._docs, self._images, self._kbs = {}, {}, {}, {}

    def preload(self, kb_ids: Iterable[str]) -> None:
        """Read each small KB of ``kb_ids`` whole, once per store state (call after :meth:`fresh`)."""
        for kb_id in dict.fromkeys(kb_ids):
            if kb_id in self._kbs:
                continue
            whole = None
            if 0 < self.store.count_chunks(kb_id) <= self.preload_max_chunks:
                chunks = self.store.list_chunks(kb_id)
                if len(self._chunks) + len(self._docs) + 2 * len(chunks) <= self.max_rows:
                    whole = _WholeKb(chunks)
                    self._chunks.update((c.id, c) for c in chunks)
                    self._docs.update(((kb_id, d.id), d) for d in self.store.list_knowledge(kb_id))
            self._kbs[kb_id] = whole

    def chunks(self, ids: Sequence[str]) -> dict[str, Any]:
        """``get_chunks(ids)`` (missing ids left out)."""
        known = self._chunks
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        if missing:
            loaded = self.store.get_chunks(missing)
            for i in missing:
                known[i] = loaded.get(i)
        return {i: known[i] for i in ids if known.get(i) is not None}

    def documents(self, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Any]:
        """``(kb id, knowledge id) -> Knowledge`` for the pairs that exist."""
        known = self._docs
        by_kb: dict[str, list[str]] = {}
        pairs = list(dict.fromkeys(wanted))
        for kb_id, kid in pairs:
            if (kb_id, kid) not in known:
                by_kb.setdefault(kb_id, []).append(kid)
        for kb_id, kids in by_kb.items():
            found = self.store.get_knowledge(kids, kb_ids=[kb_id])
            for kid in kids:
                known[(kb_id, kid)] = found.get(kid)
        return {p: known[p] for p in pairs if known.get(p) is not None}

    def enrich_image_info(self, results: Sequence[Any]) -> None:
        """:func:`~rag_lab.retrieval.image_info.enrich_search_results_image_info`, memoised; the
        children of a KB read whole come from its chunks (children are in their parent's KB)."""
        whole = {r.knowledge_base_id for r in results if not r.image_info}
        source = self._kbs.get(next(iter(whole))) if len(whole) == 1 else None
        enrich_search_results_image_info(results, source or self.store, self._images)


class _WholeKb:
    """The chunks of one KB, answering ``get_children`` as the store does (same order)."""

    def __init__(self, chunks: Sequence[Any]) -> None:
        self._children: dict[str, list[Any]] = {}
        for c in chunks:
            if c.parent_chunk_id:
                self._children.setdefault(c.parent_chunk_id, []).append(c)
        for group in self._children.values():
            group.sort(key=lambda c: (c.chunk_index, c.id))

    def get_children(self, parent_ids: Iterable[str]) -> list[Any]:
        return [c for p in sorted(set(parent_ids)) if p for c in self._children.get(p, ())]

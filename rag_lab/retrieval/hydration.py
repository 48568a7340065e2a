"""Rows that hydration reads (chunks, their documents, image info gathered from child chunks),
memoised per state of the knowledge store.

Hydration (§5.15) turns index hits into SearchResults from SQLite rows. The memo keeps the objects
decoded while the store's change token (its own writes, and SQLite's ``data_version``, which
moves when another connection commits) stays the same, and starts empty when it moves. The
memoised ``Chunk`` / ``Knowledge`` objects are only read: :func:`chunk_to_search_result` copies
what it takes from them.

The rows come from the store's whole-KB rows when it holds them
(:class:`~rag_lab.knowledge.kb_rows.KbRows`, shared with the retrieval engine: a KB's chunks and
documents each read in one scan per store state, within a budget): the results' chunks, their
documents and the children §6.9 gathers image info from are then decoded from memory, with no
SQLite read, as a retriever over an in-memory document list would. A KB the store does not hold
is read row by row.
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

    def __init__(self, store: Any = None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._token: Any = None
        self._chunks: dict[str, Any] = {}
        self._docs: dict[tuple[str, str], Any] = {}
        self._images: dict[str, str] = {}
        #: per KB: its (chunk rows, document rows) held whole by the store, or None
        self._kbs: dict[str, tuple[Any, Any] | None] = {}
        #: KB rows by id or name (searched KBs are looked up on every search)
        self._kb_refs: dict[str, Any] = {}

    def fresh(self, store: Any) -> None:
        """Read ``store`` from now on; start over when it is another store or changed since the
        last call (one cheap query)."""
        token = (id(store), store.change_token())
        with self._lock:
            size = len(self._chunks) + len(self._docs) + len(self._images)
            if token != self._token or size > self.max_rows or store is not self.store:
                self.store, self._token = store, token
                self._chunks, self._docs, self._images, self._kbs, self._kb_refs = {}, {}, {}, {}, {}

    def kb(self, ref: str) -> Any:
        """The KB whose id, else name, is ``ref`` (None when there is none; call after
        :meth:`fresh`). The object is shared by the searches of this store state: read it only."""
        if ref not in self._kb_refs:
            self._kb_refs[ref] = self.store.get_kb(ref) or self.store.get_kb_by_name(ref)
        return self._kb_refs[ref]

    def preload(self, kb_ids: Iterable[str]) -> None:
        """Look up the whole rows the store holds for each KB of ``kb_ids`` (reading them on their
        first use under this store state; call after :meth:`fresh`)."""
        whole = getattr(self.store, "kb_rows", None)
        token = self._token[1] if self._token is not None else None
        for kb_id in dict.fromkeys(kb_ids):
            if kb_id in self._kbs:
                continue
            tables = None
            if whole is not None and (chunks := whole.chunks(kb_id, token)) is not None:
                docs = whole.documents(kb_id, token)
                tables = (chunks, docs) if docs is not None else None
            self._kbs[kb_id] = tables

    def chunks(self, ids: Sequence[str]) -> dict[str, Any]:
        """``get_chunks(ids)`` (missing ids left out)."""
        known = self._chunks
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        for tables in self._kbs.values():  # chunk ids are unique store-wide: any KB held may have it
            if tables is None or not missing:
                continue
            rest = []
            for i in missing:
                chunk = tables[0].get(i)
                if chunk is None:
                    rest.append(i)
                else:
                    known[i] = chunk
            missing = rest
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
                tables = self._kbs.get(kb_id)
                if tables is not None:
                    known[(kb_id, kid)] = tables[1].get(kid)
                else:
                    by_kb.setdefault(kb_id, []).append(kid)
        for kb_id, kids in by_kb.items():
            found = self.store.get_knowledge(kids, kb_ids=[kb_id])
            for kid in kids:
                known[(kb_id, kid)] = found.get(kid)
        return {p: known[p] for p in pairs if known.get(p) is not None}

    def enrich_image_info(self, results: Sequence[Any]) -> None:
        """:func:`~rag_lab.retrieval.image_info.enrich_search_results_image_info`, memoised; the
        children of a KB held whole come from its rows (children are in their parent's KB)."""
        whole = {r.knowledge_base_id for r in results if not r.image_info}
        tables = self._kbs.get(next(iter(whole))) if len(whole) == 1 else None
        enrich_search_results_image_info(results, tables[0] if tables is not None else self.store, self._images)

"""Rows that hydration reads (chunks, their documents, image info gathered from child chunks),
memoised per state of the knowledge store.

Hydration (§5.15) turns index hits into SearchResults from SQLite rows. The same chunks come back
query after query, and at 1k chunks the row loading was most of a search's cost. The memo keeps
the rows read while the store's change token (its own writes, and SQLite's ``data_version``,
which moves when another connection commits) stays the same, and starts empty when it moves. The
memoised ``Chunk`` / ``Knowledge`` objects are only read: :func:`chunk_to_search_result` copies
what it takes from them.
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

    def fresh(self, store: Any) -> None:
        """Read ``store`` from now on; start over when it is another store or changed since the
        last call (one cheap query)."""
        token = (id(store), store.change_token())
        with self._lock:
            size = len(self._chunks) + len(self._docs) + len(self._images)
            if token != self._token or size > self.max_rows or store is not self.store:
                self.store, self._token = store, token
                self._chunks, self._docs, self._images = {}, {}, {}

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
        """:func:`~rag_lab.retrieval.image_info.enrich_search_results_image_info`, memoised."""
        enrich_search_results_image_info(results, self.store, self._images)

"""LocalEngine: the in-process RetrieveEngine over a Workspace (faiss vectors + bm25s keywords).

Semantics (the reference engine's, spec §5 "Reference engine semantics"):

* only chunks that are enabled, of a searchable type (§1.6) and not ``processing``/``failed``
  are returned; ``knowledge_ids`` and ``tag_ids`` filters are ANDed when given;
* vector: cosine similarity ``>= threshold``, best ``top_k``;
* keywords: BM25 score as bm25s computes it, best ``top_k`` with score > 0. **The keyword
  threshold is ignored**, as the reference Postgres/ParadeDB engine ignores it (App. B.19);
* several KBs: per-KB results merged by score descending, ties by hit id (the chunk id, or the
  FAQ question entry id), then cut to ``top_k``.

Hits carry ``match_type`` 0 (vector) or 1 (keywords) and ``content`` = the indexed text that
matched (the chunk content, or the FAQ question).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.types.errors import KnowledgeBaseNotFound
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, UNSEARCHABLE_STATUSES, MatchType

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace

ENGINE_TYPE = "faiss+bm25s"


def is_searchable(chunk: Chunk) -> bool:
    """Retrieval may return this chunk (spec §1.6)."""
    return searchable_fields(chunk.is_enabled, chunk.chunk_type, chunk.index_status)


def searchable_fields(is_enabled: Any, chunk_type: str, index_status: str) -> bool:
    """:func:`is_searchable` from the three fields it reads."""
    return bool(is_enabled) and chunk_type in SEARCHABLE_CHUNK_TYPES and index_status not in UNSEARCHABLE_STATUSES


#: a hit's chunk fields (knowledge id, chunk type, tag id, enabled, searchable, content)
_HitRow = tuple[str, str, str, bool, bool, str]
_HIT_COLUMNS = ("knowledge_id", "chunk_type", "tag_id", "is_enabled", "index_status", "content")


def _hit_row(r: tuple[Any, ...]) -> _HitRow:
    """A hit row from the store's :data:`_HIT_COLUMNS` values."""
    return (r[0], r[1], r[2], bool(r[3]), searchable_fields(r[3], r[1], r[4]), r[5])


class LocalEngine:
    """RetrieveEngine over a :class:`~rag_lab.knowledge.workspace.Workspace`.

    The chunk fields a hit carries are kept in memory (at most :attr:`max_cached_rows`), keyed on
    the store's change token: any write, in this process or another, empties the cache. A KB's
    first search under a store state loads them for all its chunks in one scan when they fit
    (:meth:`_preload`; 0.4–0.6 s and at most ~77 MB at 100k chunks of ~350 characters, as
    ``benchmarks/search.py`` measures them), so later queries read no hit row from SQLite; a KB too large for
    the budget loads the rows of its hits as they come. Small searches run their retrievers in the
    caller's thread (:meth:`runs_inline`): below :attr:`inline_max_vectors` vectors a
    worker-thread hand-off costs more than the search."""

    engine_type = ENGINE_TYPE
    max_cached_rows = 200_000
    inline_max_vectors = 20_000

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._rows: dict[str, _HitRow | None] = {}
        self._memo_token: tuple[int, int] | None = None
        self._memo: dict[str, Any] = {}
        self._inline: dict[tuple[str, ...], tuple[tuple[int, int], bool]] = {}
        self._preload_lock = threading.Lock()

    def runs_inline(self, kb_ids: Sequence[str]) -> bool:
        """True when the KBs are small enough to search without a worker thread (decided once per
        KB set and store state)."""
        key = tuple(kb_ids)
        token = self.workspace.store.change_token()
        found = self._inline.get(key)
        if found is not None and found[0] == token:
            return found[1]
        total = 0
        try:
            for kb in self._kbs(kb_ids):
                index = self.workspace.vector_index(kb) if kb.vector_enabled else None
                total += len(index) if index is not None else 0
        except Exception:
            return False  # let the threaded path raise it
        self._inline[key] = (token, total <= self.inline_max_vectors)
        return total <= self.inline_max_vectors

    def _hit_rows(self, chunk_ids: list[str]) -> dict[str, _HitRow | None]:
        """Call after :meth:`_state` (the search methods do, once per search)."""
        store = self.workspace.store
        rows = self._rows
        missing = [c for c in dict.fromkeys(chunk_ids) if c not in rows]
        if missing:  # the six columns a hit needs, not whole chunks (no JSON fields decoded)
            loaded = store.get_chunk_columns(missing, _HIT_COLUMNS)
            for cid in missing:
                r = loaded.get(cid)
                rows[cid] = None if r is None else _hit_row(r)
        return rows

    def _preload(self, kb: KnowledgeBase) -> None:
        """Load the hit rows of every chunk of ``kb`` in one scan, once per store state, when they
        fit in :attr:`max_cached_rows` with the rows already held (call after :meth:`_state`)."""
        memo, rows = self._memo, self._rows  # a write meanwhile replaces both: these are dropped
        done: set[str] = memo.setdefault("preloaded", set())
        if kb.id in done:
            return
        with self._preload_lock:  # the vector and keyword threads of one search: one scan
            if kb.id in done:
                return
            store = self.workspace.store
            if len(rows) + store.count_chunks(kb.id) <= self.max_cached_rows:
                loaded = store.get_chunk_columns(None, _HIT_COLUMNS, kb_id=kb.id)
                rows.update({cid: _hit_row(r) for cid, r in loaded.items()})
            done.add(kb.id)

    def supports_vector(self) -> bool:
        return True

    def supports_keywords(self) -> bool:
        return True

    # -- helpers ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Per-store-state memo (KB rows, whether a KB has unsearchable indexed chunks, hit rows):
        emptied whenever the store's change token moves."""
        token = self.workspace.store.change_token()
        if token != self._memo_token or len(self._rows) > self.max_cached_rows:
            self._memo_token = token
            self._memo = {"kbs": {}, "unsearchable": {}}
            self._rows = {}
        return self._memo

    def _kbs(self, kb_ids: Sequence[str]) -> list[KnowledgeBase]:
        """The KBs (one :meth:`_state` check: the rest of a search uses the memo it returns)."""
        ids = list(dict.fromkeys(kb_ids))
        known: dict[str, KnowledgeBase] = self._state()["kbs"]
        todo = [i for i in ids if i not in known]
        if todo:
            known.update(self.workspace.store.get_kbs(todo))
        missing = [i for i in ids if i not in known]
        if missing:
            raise KnowledgeBaseNotFound(self.workspace._not_found_message(missing))
        return [known[i] for i in ids]

    def _allowed(self, kb: KnowledgeBase, knowledge_ids: Sequence[str], tag_ids: Sequence[str]) -> set[str] | None:
        """Chunk ids the search is restricted to, or ``None`` when every indexed chunk may match."""
        store = self.workspace.store
        flags: dict[str, bool] = self._memo["unsearchable"]  # checked by _kbs in this search
        if kb.id not in flags:
            flags[kb.id] = store.has_unsearchable_indexed_chunks(kb.id)
        if knowledge_ids or tag_ids or flags[kb.id]:
            return store.searchable_chunk_ids(kb.id, knowledge_ids, tag_ids)
        return None

    def _finish(
        self,
        raw: list[tuple[str, str, str | None, str, float]],
        top_k: int,
        match_type: int,
    ) -> list[IndexWithScore]:
        """raw = (entry_id, chunk_id, own_text, kb_id, score) → merged, hydrated hits."""
        raw.sort(key=lambda r: (-r[4], r[0]))
        rows = self._hit_rows([r[1] for r in raw])
        out: list[IndexWithScore] = []
        for entry_id, chunk_id, own_text, kb_id, score in raw:
            row = rows.get(chunk_id)
            if row is None or not row[4]:
                continue  # index entry of a chunk deleted or disabled since
            knowledge_id, chunk_type, tag_id, enabled, _, content = row
            out.append(  # positional (2.5x faster than by keyword): the fields' order in base.py
                IndexWithScore(
                    entry_id,  # id
                    own_text if own_text is not None else content,  # content
                    chunk_id,
                    knowledge_id,
                    kb_id,  # knowledge_base_id
                    score,
                    match_type,
                    entry_id,  # source_id
                    "faq" if chunk_type == "faq" else "chunk",  # source_type
                    tag_id,
                    enabled,  # is_enabled
                )
            )
            if len(out) >= top_k:
                break
        return out

    # -- RetrieveEngine ---------------------------------------------------------------------
    def vector_search(
        self,
        kb_ids: Sequence[str],
        embedding: np.ndarray,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]:
        """Cosine search over the KBs' vector indexes (KBs without embeddings contribute nothing)."""
        if top_k <= 0:
            return []
        raw: list[tuple[str, str, str | None, str, float]] = []
        for kb in self._kbs(kb_ids):
            index = self.workspace.vector_index(kb)
            if index is None or not kb.vector_enabled or len(index) == 0:
                continue
            self._preload(kb)
            allowed = self._allowed(kb, knowledge_ids, tag_ids)
            if allowed is not None and not allowed:
                continue
            for entry, score in index.search_entries(embedding, top_k, threshold, allowed):
                raw.append((entry.entry_id, entry.chunk_id, entry.text, kb.id, score))
        return self._finish(raw, top_k, int(MatchType.EMBEDDING))

    def keyword_search(
        self,
        kb_ids: Sequence[str],
        query: str,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]:
        """BM25 search over the KBs' keyword indexes. ``threshold`` is accepted for the protocol
        and deliberately not applied (reference engine behaviour, App. B.19)."""
        del threshold  # not applied, see the docstring
        if top_k <= 0 or not query or not query.strip():
            return []
        raw: list[tuple[str, str, str | None, str, float]] = []
        for kb in self._kbs(kb_ids):
            if not kb.keyword_enabled:
                continue
            index = self.workspace.keyword_index(kb)
            self._preload(kb)
            allowed = self._allowed(kb, knowledge_ids, tag_ids)
            if allowed is not None and not allowed:
                continue
            for chunk_id, score in index.search(query, top_k, allowed):
                raw.append((chunk_id, chunk_id, None, kb.id, score))
        return self._finish(raw, top_k, int(MatchType.KEYWORDS))

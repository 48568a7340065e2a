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
matched (the chunk content, or the FAQ question). The hybrid search asks for them as
:class:`~rag_lab.retrieval.base.HitRows` (:meth:`LocalEngine.vector_rows`,
:meth:`LocalEngine.keyword_rows`): the hits that pass the checks kept as their rows, each made an
``IndexWithScore`` when read, so that a search builds the hits it returns and no others.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from rag_lab.retrieval.base import HitRows, IndexWithScore, SearchScope
from rag_lab.types.errors import KnowledgeBaseNotFound
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, UNSEARCHABLE_STATUSES, MatchType

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace

ENGINE_TYPE = "faiss+bm25s"
_EMBEDDING, _KEYWORDS = int(MatchType.EMBEDDING), int(MatchType.KEYWORDS)


def is_searchable(chunk: Chunk) -> bool:
    """Retrieval may return this chunk (spec §1.6)."""
    return searchable_fields(chunk.is_enabled, chunk.chunk_type, chunk.index_status)


def searchable_fields(is_enabled: object, chunk_type: str, index_status: str) -> bool:
    """:func:`is_searchable` from the three fields it reads."""
    return bool(is_enabled) and chunk_type in SEARCHABLE_CHUNK_TYPES and index_status not in UNSEARCHABLE_STATUSES


#: the chunk columns a hit reads
_HIT_COLUMNS = ("knowledge_id", "chunk_type", "tag_id", "is_enabled", "index_status", "content")


class _Rows:
    """Chunk rows as stored, by chunk id, with the positions of :data:`_HIT_COLUMNS` in them: a
    KB's whole rows (shared with hydration) or the rows read by id so far."""

    __slots__ = ("rows", "at")

    def __init__(self, columns: Sequence[str], rows: dict[str, Any]) -> None:
        self.rows = rows
        self.at = tuple(columns.index(c) for c in _HIT_COLUMNS)


class _Memo(TypedDict, total=False):
    """What :meth:`LocalEngine._state` keeps per store state."""

    kbs: dict[str, KnowledgeBase]
    unsearchable: dict[str, bool]
    tables: dict[str, _Rows | None]


def _hit(kept: tuple[Any, ...]) -> IndexWithScore:
    """The hit of a row :meth:`LocalEngine._finish` kept (positional: the fields' order in base.py)."""
    chunk_id, score, entry_id, own_text, kb_id, row, (ki, ti, gi, _, _, ci), match_type = kept
    return IndexWithScore(
        entry_id,  # id
        own_text if own_text is not None else row[ci],  # content
        chunk_id,
        row[ki],  # knowledge_id
        kb_id,  # knowledge_base_id
        score,
        match_type,
        entry_id,  # source_id
        "faq" if row[ti] == "faq" else "chunk",  # source_type
        row[gi],  # tag_id
        True,  # is_enabled: searchable
    )


class LocalEngine:
    """RetrieveEngine over a :class:`~rag_lab.knowledge.workspace.Workspace`.

    The chunk fields a hit carries come from the store's whole-KB rows
    (:class:`~rag_lab.knowledge.kb_rows.KbRows`: a KB's chunk rows read in one scan on first use
    under a store state, by the hybrid search's start or this engine's first hits, dropped on any
    write in this process or another; hydration reads the same rows). For a KB too large for their budget the rows of its hits are read as they come
    and kept while the store is unchanged (at most :attr:`max_cached_rows`).

    Searches that end in a few milliseconds run their retrievers one after the other in the
    caller's thread (:meth:`runs_inline`), where handing them to worker threads would cost more
    than it brings: KBs of at most :attr:`inline_max_vectors` vectors in all, and KBs whose
    vectors are scanned through the 8-bit copy in parallel parts (every core already works on
    the scan) up to :attr:`inline_max_parallel_vectors`."""

    engine_type = ENGINE_TYPE
    #: searches run in this process: no wall-clock limit applies to them (rag_lab.models.timeouts)
    in_process = True
    max_cached_rows = 200_000
    #: vectors in all below which a search runs in the caller's thread (a flat scan, ≤ ~1 ms)
    inline_max_vectors = 20_000
    #: the same for KBs scanned through the 8-bit copy in parallel parts (``benchmarks/search.py``
    #: at 100k, 2 parts: 3.37 ms in turn here vs 3.86 ms in worker threads at top 10, 5.10 vs 6.16
    #: ms at the pipeline's top 30 / pool 150)
    inline_max_parallel_vectors = 250_000

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._memo_token: tuple[int, int] | None = None
        self._memo: _Memo = {}
        self._by_id: _Rows | None = None
        self._inline: dict[tuple[str, ...], tuple[tuple[int, int], bool]] = {}
        self._lock = threading.Lock()

    def runs_inline(self, kb_ids: Sequence[str]) -> bool:
        """True when a search of these KBs runs in the caller's thread (see the class docstring;
        decided once per KB set and store state)."""
        key = tuple(kb_ids)
        token = self.workspace.store.change_token()
        found = self._inline.get(key)
        if found is not None and found[0] == token:
            return found[1]
        total, parallel = 0, True
        try:
            for kb in self._kbs(kb_ids):
                index = self.workspace.vector_index(kb) if kb.vector_enabled else None
                n = len(index) if index is not None else 0
                total += n
                parallel = parallel and (n == 0 or index is None or index.scans_in_parallel())
        except Exception:
            return False  # let the threaded path raise it
        inline = total <= self.inline_max_vectors or (parallel and total <= self.inline_max_parallel_vectors)
        self._inline[key] = (token, inline)
        return inline

    def _whole(self, kb_id: str) -> _Rows | None:
        """The KB's whole chunk rows, or None when the store does not hold them (call after
        :meth:`_state`; the first call under a store state reads them)."""
        tables: dict[str, _Rows | None] = self._memo["tables"]
        if kb_id not in tables:
            table = self.workspace.store.kb_rows.chunks(kb_id, self._memo_token)
            tables[kb_id] = None if table is None else _Rows(table.columns, table.rows)
        return tables[kb_id]

    def _read_by_id(self, chunk_ids: list[str]) -> _Rows:
        """The rows read by id, those of ``chunk_ids`` included (call after :meth:`_state`)."""
        with self._lock:
            known = self._by_id
            missing = [c for c in dict.fromkeys(chunk_ids) if known is None or c not in known.rows]
            if missing:
                columns, loaded = self.workspace.store.get_chunk_rows(missing)
                if known is None:
                    known = self._by_id = _Rows(columns, {})
                known.rows.update((cid, loaded.get(cid)) for cid in missing)
            assert known is not None
            return known

    def supports_vector(self) -> bool:
        return True

    def supports_keywords(self) -> bool:
        return True

    # -- helpers ----------------------------------------------------------------------------
    def _state(self) -> _Memo:
        """Per-store-state memo (KB rows, whether a KB has unsearchable indexed chunks, hit rows):
        emptied whenever the store's change token moves."""
        token = self.workspace.store.change_token()
        by_id = self._by_id
        if token != self._memo_token or (by_id is not None and len(by_id.rows) > self.max_cached_rows):
            self._memo_token = token
            self._memo = {"kbs": {}, "unsearchable": {}, "tables": {}}
            self._by_id = None
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

    def _allowed(self, kb: KnowledgeBase, scope: SearchScope) -> set[str] | None:
        """Chunk ids the search is restricted to, or ``None`` when every indexed chunk may match."""
        store = self.workspace.store
        flags: dict[str, bool] = self._memo["unsearchable"]  # checked by _kbs in this search
        if kb.id not in flags:
            flags[kb.id] = store.has_unsearchable_indexed_chunks(kb.id)
        if scope.knowledge_ids or scope.tag_ids or flags[kb.id]:
            return store.searchable_chunk_ids(kb.id, scope.knowledge_ids, scope.tag_ids)
        return None

    def _finish(
        self,
        raw: list[tuple[str, str, str | None, str, float]],
        top_k: int,
        match_type: int,
    ) -> HitRows:
        """raw = (entry_id, chunk_id, own_text, kb_id, score) → the best ``top_k`` hits of chunks
        retrieval may return, merged across KBs (:class:`HitRows`: each hit made when read)."""
        sources = {kb_id: self._whole(kb_id) for kb_id in {r[3] for r in raw}}
        if len(sources) > 1:  # one KB's hits come in this order from its index already
            raw.sort(key=lambda r: (-r[4], r[0]))
        if by_id := [r[1] for r in raw if sources[r[3]] is None]:
            rows = self._read_by_id(by_id)
            sources = {k: v or rows for k, v in sources.items()}
        kept: list[tuple[Any, ...]] = []
        append = kept.append
        at_kb: str | None = None
        for entry_id, chunk_id, own_text, kb_id, score in raw:
            if kb_id != at_kb:  # the KB's rows and their column positions (a run of hits per KB)
                src = sources[kb_id]
                assert src is not None
                row_of, at, at_kb = src.rows.get, src.at, kb_id
                ei, ti, si = at[3], at[1], at[4]
            row = row_of(chunk_id)
            if row is None:
                continue  # index entry of a chunk deleted since
            if not searchable_fields(row[ei], row[ti], row[si]):
                continue  # disabled or not indexed since
            append((chunk_id, score, entry_id, own_text, kb_id, row, at, match_type))
        # the best top_k of the hits kept (several KBs bring up to top_k each)
        return HitRows(kept if len(kept) <= top_k else kept[:top_k], _hit)

    # -- RetrieveEngine ---------------------------------------------------------------------
    def vector_search(self, embedding: np.ndarray, scope: SearchScope) -> list[IndexWithScore]:
        """Cosine search over the KBs' vector indexes (KBs without embeddings contribute nothing):
        :meth:`vector_rows` as a list."""
        return list(self.vector_rows(embedding, scope))

    def keyword_search(self, query: str, scope: SearchScope) -> list[IndexWithScore]:
        """BM25 search over the KBs' keyword indexes: :meth:`keyword_rows` as a list."""
        return list(self.keyword_rows(query, scope))

    def vector_rows(self, embedding: np.ndarray, scope: SearchScope) -> HitRows:
        """:meth:`vector_search`'s hits, each made when read (the hybrid search's call)."""
        raw: list[tuple[str, str, str | None, str, float]] = []
        top_k = scope.top_k
        if top_k <= 0:
            return self._finish(raw, top_k, _EMBEDDING)
        for kb in self._kbs(scope.kb_ids):
            index = self.workspace.vector_index(kb)
            if index is None or not kb.vector_enabled or len(index) == 0:
                continue
            allowed = self._allowed(kb, scope)
            if allowed is not None and not allowed:
                continue
            kb_id = kb.id
            raw += [
                (e.entry_id, e.chunk_id, e.text, kb_id, s)
                for e, s in index.search_entries(embedding, top_k, scope.threshold, allowed)
            ]
        return self._finish(raw, top_k, _EMBEDDING)

    def keyword_rows(self, query: str, scope: SearchScope) -> HitRows:
        """:meth:`keyword_search`'s hits, each made when read. ``scope.threshold`` is deliberately
        not applied (reference engine behaviour, App. B.19)."""
        raw: list[tuple[str, str, str | None, str, float]] = []
        top_k = scope.top_k
        if top_k <= 0 or not query or not query.strip():
            return self._finish(raw, top_k, _KEYWORDS)
        for kb in self._kbs(scope.kb_ids):
            if not kb.keyword_enabled:
                continue
            index = self.workspace.keyword_index(kb)
            allowed = self._allowed(kb, scope)
            if allowed is not None and not allowed:
                continue
            kb_id = kb.id
            raw += [(chunk_id, chunk_id, None, kb_id, score) for chunk_id, score in index.search(query, top_k, allowed)]
        return self._finish(raw, top_k, _KEYWORDS)

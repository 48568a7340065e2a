"""Rows that hydration reads (chunks, their documents, image info gathered from child chunks),
memoised per state of the knowledge store.

Hydration (§5.15) turns index hits into SearchResults from SQLite rows. It reads only the fields
a result takes (:data:`CHUNK_FIELDS`, :data:`DOC_FIELDS`); the memo keeps their values while the
store's change token (its own writes, and SQLite's ``data_version``, which moves when another
connection commits) stays the same, and starts empty when it moves. The memoised values are only
read: :func:`search_result` copies what it takes from them.

The rows come from the store's whole-KB rows when it holds them
(:class:`~rag_lab.knowledge.kb_rows.KbRows`, shared with the retrieval engine: a KB's chunks and
documents each read in one scan per store state, within a budget): the results' chunks, their
documents and the children §6.9 gathers image info from are then decoded from memory, with no
SQLite read, as a retriever over an in-memory document list would. A KB the store does not hold
is read row by row.

From a held row the fields are decoded without building the ``Chunk`` / ``Knowledge`` object
(:meth:`~rag_lab.knowledge.kb_rows.RowTable.reader`, 2–3× cheaper), as a retriever over an
in-memory document list reads its texts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from rag_lab.retrieval.image_info import enrich_search_results_image_info
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.kb_rows import RowTable
    from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase

    #: a KB held whole: its chunk and document rows, and their readers of the fields results take
    _KbTables = tuple[
        RowTable[Chunk],
        RowTable[Knowledge],
        Callable[[Sequence[object]], list[object]],
        Callable[[Sequence[object]], list[object]],
    ]

__all__ = ["CHUNK_FIELDS", "DOC_FIELDS", "HydrationMemo", "search_result"]

#: the chunk fields hydration reads, in this order: the checks (id, document, KB, whether it may
#: be shown) and what a result takes
CHUNK_FIELDS = (
    "id",
    "knowledge_id",
    "knowledge_base_id",
    "is_enabled",
    "chunk_type",
    "index_status",
    "content",
    "content_revision",
    "chunk_index",
    "start_at",
    "end_at",
    "parent_chunk_id",
    "image_info",
    "metadata",
)
#: the document fields a result takes, in this order
DOC_FIELDS = (
    "title",
    "metadata",
    "file_name",
    "source",
    "channel",
    "description",
    "custom_metadata",
    "knowledge_base_id",
)

#: a ``Chunk`` / ``Knowledge`` object → its :data:`CHUNK_FIELDS` / :data:`DOC_FIELDS` values
chunk_values = attrgetter(*CHUNK_FIELDS)
doc_values = attrgetter(*DOC_FIELDS)


def search_result(
    chunk: Sequence[Any], doc: Sequence[Any], score: float, match_type: int, matched_content: str = ""
) -> SearchResult:
    """A stored chunk and its document as a SearchResult (§5.15 hydration), from the values of
    :data:`CHUNK_FIELDS` of the chunk and :data:`DOC_FIELDS` of the document. The result holds
    copies of the chunk's and the document's metadata (it may be changed; the values may not)."""
    cid, kid, _, _, chunk_type, _, content, revision, index, start_at, end_at, parent, image_info, chunk_meta = chunk
    title, doc_meta, file_name, source, channel, description, custom, kb_id = doc
    return SearchResult(  # positional, in the fields' order (a test checks it against the names)
        cid,  # id
        content,
        kid,  # knowledge_id
        index,  # chunk_index
        title,  # knowledge_title
        start_at,
        end_at,
        index,  # seq
        score,
        match_type,
        [],  # sub_chunk_id
        {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in (doc_meta or {}).items()},
        chunk_type,
        parent,  # parent_chunk_id
        image_info,
        file_name,  # knowledge_filename
        source,  # knowledge_source
        channel,  # knowledge_channel
        dict(chunk_meta) if chunk_meta else None,  # chunk_metadata
        matched_content,
        description,  # knowledge_description
        json.dumps(custom, ensure_ascii=False, sort_keys=True) if custom else "",  # knowledge_custom_metadata
        kb_id,  # knowledge_base_id
        revision,  # content_revision
        False,  # content_rewritten
    )


class HydrationMemo:
    """``chunks``, ``documents`` (their fields hydration reads) and ``image_info`` of a store, each
    row read once per store state."""

    #: rows kept before the memo starts over (a bound on memory for very large KBs)
    max_rows = 50_000

    def __init__(self, store: Any = None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._token: tuple[int, tuple[int, int]] | None = None
        self._chunks: dict[str, Any] = {}
        self._docs: dict[tuple[str, str], Any] = {}
        self._images: dict[str, str] = {}
        #: per KB: its (chunk rows, document rows) held whole by the store and their readers of
        #: :data:`CHUNK_FIELDS` / :data:`DOC_FIELDS`, or None
        self._kbs: dict[str, _KbTables | None] = {}
        #: KB rows by id or name (searched KBs are looked up on every search)
        self._kb_refs: dict[str, KnowledgeBase | None] = {}

    def fresh(self, store: Any) -> None:
        """Read ``store`` from now on; start over when it is another store or changed since the
        last call (one cheap query)."""
        token = (id(store), store.change_token())
        with self._lock:
            size = len(self._chunks) + len(self._docs) + len(self._images)
            if token != self._token or size > self.max_rows or store is not self.store:
                self.store, self._token = store, token
                self._chunks, self._docs, self._images, self._kbs, self._kb_refs = {}, {}, {}, {}, {}

    def kb(self, ref: str) -> KnowledgeBase | None:
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
                if docs is not None:
                    tables = (chunks, docs, chunks.reader(CHUNK_FIELDS), docs.reader(DOC_FIELDS))
            self._kbs[kb_id] = tables

    def chunks(self, ids: Sequence[str]) -> dict[str, Sequence[Any]]:
        """The :data:`CHUNK_FIELDS` values of the chunks ``ids`` (missing ids left out)."""
        known = self._chunks
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        for tables in self._kbs.values():  # chunk ids are unique store-wide: any KB held may have it
            if tables is None or not missing:
                continue
            rows, read = tables[0].rows, tables[2]
            rest = []
            for i in missing:
                row = rows.get(i)
                if row is None:
                    rest.append(i)
                else:
                    known[i] = read(row)
            missing = rest
        if missing:
            loaded = self.store.get_chunks(missing)
            for i in missing:
                chunk = loaded.get(i)
                known[i] = None if chunk is None else chunk_values(chunk)
        return {i: known[i] for i in ids if known.get(i) is not None}

    def documents(self, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Sequence[Any]]:
        """``(kb id, knowledge id) ->`` the :data:`DOC_FIELDS` values of the documents that exist."""
        known = self._docs
        by_kb: dict[str, list[str]] = {}
        pairs = list(dict.fromkeys(wanted))
        for kb_id, kid in pairs:
            if (kb_id, kid) not in known:
                tables = self._kbs.get(kb_id)
                if tables is not None:
                    row = tables[1].rows.get(kid)
                    known[(kb_id, kid)] = None if row is None else tables[3](row)
                else:
                    by_kb.setdefault(kb_id, []).append(kid)
        for kb_id, kids in by_kb.items():
            found = self.store.get_knowledge(kids, kb_ids=[kb_id])
            for kid in kids:
                doc = found.get(kid)
                known[(kb_id, kid)] = None if doc is None else doc_values(doc)
        return {p: known[p] for p in pairs if known.get(p) is not None}

    def enrich_image_info(self, results: Sequence[SearchResult]) -> None:
        """:func:`~rag_lab.retrieval.image_info.enrich_search_results_image_info`, memoised; the
        children of a KB held whole come from its rows (children are in their parent's KB): none
        when no chunk of the KB has a parent, and nothing is gathered."""
        whole = {r.knowledge_base_id for r in results if not r.image_info}
        tables = self._kbs.get(next(iter(whole))) if len(whole) == 1 else None
        if tables is not None and not tables[0].has_children():
            return
        enrich_search_results_image_info(results, tables[0] if tables is not None else self.store, self._images)

"""The store of knowledge bases, documents (Knowledge) and chunks: a SQLite file (the embedded
default) or a PostgreSQL database (``postgresql://…``: the store several server replicas share).

One connection per thread (so worker threads such as ``asyncio.to_thread`` can read while another
thread writes; this process' writes are serialised by a lock). SQLite: one file, WAL journal.
PostgreSQL: the same statements through :mod:`rag_lab.knowledge.sqldb`, which bridges the two
dialects (placeholders, column types, errors, the change counter). Dataclass fields map to
columns one to one; dict/list fields are JSON text, booleans are 0/1.

Keys: a KB id and a KB name are unique; a document is keyed by ``(knowledge_base_id, id)`` so the
same dataset can be ingested into several KBs (e.g. two chunk sizes) with its own ids; chunk ids
are unique in the whole store (ingestion prefixes them with the KB id). Batch getters return
dicts; missing ids are simply absent.

:class:`KnowledgeStore` is assembled from one part per responsibility over the same connections,
write lock and change token: the database (:mod:`rag_lab.knowledge.store_db`), KBs and documents
(:mod:`rag_lab.knowledge.store_kbs`) and chunks (:mod:`rag_lab.knowledge.store_chunks`); the
row mapping is :mod:`rag_lab.knowledge.store_rows`. Their names are importable from here.
"""

from __future__ import annotations

from rag_lab.knowledge.store_chunks import ChunkRows
from rag_lab.knowledge.store_kbs import KbDocumentRows
from rag_lab.knowledge.store_rows import _SPECS as _SPECS
from rag_lab.knowledge.store_rows import StoreError as StoreError
from rag_lab.knowledge.store_rows import _decode_rows as _decode_rows
from rag_lab.knowledge.store_rows import _decoder as _decoder
from rag_lab.knowledge.store_rows import _from_row as _from_row
from rag_lab.types.search_result import UNSEARCHABLE_STATUSES as UNSEARCHABLE_STATUSES


class KnowledgeStore(KbDocumentRows, ChunkRows):
    """CRUD over KBs, documents and chunks in one SQLite file (a path) or one PostgreSQL
    database (a ``postgresql://`` URL)."""

"""Knowledge bases and documents (Knowledge) in the knowledge store: a KB id and name are unique;
a document is keyed by ``(knowledge_base_id, id)``, so the same dataset can be ingested into
several KBs with its own ids. Writes that change what an external engine copies are journalled
in the same transaction (:mod:`rag_lab.knowledge.sync_journal`). :class:`KbDocumentRows` is one of
the parts of :class:`~rag_lab.knowledge.store.KnowledgeStore`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from rag_lab.knowledge.models import Knowledge, KnowledgeBase
from rag_lab.knowledge.store_db import StoreDB
from rag_lab.knowledge.store_rows import (
    _SQLITE_MAX_VARS,
    _batches,
    _check_kb,
    _decode_rows,
    _from_row,
    _to_row,
    _tuples,
    _unique,
)
from rag_lab.knowledge.sync_journal import forget_kb, journal_documents, journal_owner_change


class KbDocumentRows(StoreDB):
    """KB and document CRUD."""

    # -- knowledge bases --------------------------------------------------------------------
    def create_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """Insert a KB; a duplicate id or name raises :class:`StoreError`, a malformed
        ``metadata["shared_with"]`` :class:`ValueError` (nothing is written)."""
        _check_kb(kb)
        if not kb.created_at:
            kb.created_at = time.time()
        self._write(self._insert_sql("knowledge_bases", KnowledgeBase, replace=False), _to_row(kb))
        return kb

    def update_kb(self, kb: KnowledgeBase) -> None:
        """Write a KB's row; a malformed ``metadata["shared_with"]`` raises :class:`ValueError`
        (see :mod:`rag_lab.retrieval.sharing`) and leaves the stored row as it was."""
        _check_kb(kb)
        with self._transaction() as conn:
            journal_owner_change(conn, kb.id, kb.tenant_id)
            conn.execute(self._insert_sql("knowledge_bases", KnowledgeBase), _to_row(kb))

    def get_kb(self, kb_id: str) -> KnowledgeBase | None:
        row = self._conn().execute("SELECT * FROM knowledge_bases WHERE id = ?", (kb_id,)).fetchone()
        return _from_row(KnowledgeBase, row) if row else None

    def get_kb_by_name(self, name: str) -> KnowledgeBase | None:
        row = self._conn().execute("SELECT * FROM knowledge_bases WHERE name = ?", (name,)).fetchone()
        return _from_row(KnowledgeBase, row) if row else None

    def get_kbs(self, ids: Iterable[str]) -> dict[str, KnowledgeBase]:
        out: dict[str, KnowledgeBase] = {}
        for batch in _batches(_unique(ids)):
            q = f"SELECT * FROM knowledge_bases WHERE id IN ({', '.join('?' * len(batch))})"
            for row in self._conn().execute(q, tuple(batch)):
                out[row["id"]] = _from_row(KnowledgeBase, row)
        return out

    def list_kbs(self) -> list[KnowledgeBase]:
        rows = self._conn().execute("SELECT * FROM knowledge_bases ORDER BY created_at, id").fetchall()
        return [_from_row(KnowledgeBase, r) for r in rows]

    def delete_kb(self, kb_id: str) -> None:
        """Delete a KB with its documents and chunks."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM chunks WHERE knowledge_base_id = ?", (kb_id,))
            conn.execute("DELETE FROM knowledge WHERE knowledge_base_id = ?", (kb_id,))
            conn.execute("DELETE FROM knowledge_bases WHERE id = ?", (kb_id,))
            forget_kb(conn, kb_id)

    # -- documents --------------------------------------------------------------------------
    def add_knowledge(self, docs: Knowledge | Iterable[Knowledge]) -> None:
        """Insert or replace documents (keyed by ``(knowledge_base_id, id)``)."""
        items = [docs] if isinstance(docs, Knowledge) else list(docs)
        now = time.time()
        for d in items:
            if not d.created_at:
                d.created_at = now
        with self._transaction() as conn:
            conn.executemany(self._insert_sql("knowledge", Knowledge), [_to_row(d) for d in items])
            for kb_id in {d.knowledge_base_id for d in items}:  # the documents' commit point
                journal_documents(conn, kb_id, [d.id for d in items if d.knowledge_base_id == kb_id])

    def get_document(self, kb_id: str, knowledge_id: str) -> Knowledge | None:
        row = (
            self._conn()
            .execute("SELECT * FROM knowledge WHERE knowledge_base_id = ? AND id = ?", (kb_id, knowledge_id))
            .fetchone()
        )
        return _from_row(Knowledge, row) if row else None

    def get_knowledge(self, ids: Iterable[str], kb_ids: Iterable[str] | None = None) -> dict[str, Knowledge]:
        """Documents by id, optionally restricted to some KBs. When an id exists in several of the
        KBs searched, the KB created first wins (pass ``kb_ids`` to choose)."""
        kb_list = _unique(kb_ids) if kb_ids is not None else None
        if kb_list is not None and not kb_list:
            return {}
        out: dict[str, Knowledge] = {}
        for batch in _batches(_unique(ids), _SQLITE_MAX_VARS - len(kb_list or ())):
            q = (
                "SELECT k.* FROM knowledge k JOIN knowledge_bases b ON b.id = k.knowledge_base_id "
                f"WHERE k.id IN ({', '.join('?' * len(batch))})"
            )
            args: tuple[object, ...] = tuple(batch)
            if kb_list is not None:
                q += f" AND k.knowledge_base_id IN ({', '.join('?' * len(kb_list))})"
                args += tuple(kb_list)
            q += " ORDER BY b.created_at DESC, b.id DESC"  # earliest KB written last, so it wins
            for d in _decode_rows(Knowledge, _tuples(self._conn(), q, args)):
                out[d.id] = d
        return out

    def list_knowledge(self, kb_id: str) -> list[Knowledge]:
        rows = _tuples(
            self._conn(), "SELECT * FROM knowledge WHERE knowledge_base_id = ? ORDER BY created_at, id", (kb_id,)
        )
        return list(_decode_rows(Knowledge, rows))

    def delete_knowledge(self, kb_id: str, knowledge_id: str) -> list[str]:
        """Delete a document and its chunks; returns the deleted chunk ids."""
        with self._transaction() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM chunks WHERE knowledge_base_id = ? AND knowledge_id = ? ORDER BY id",
                    (kb_id, knowledge_id),
                )
            ]
            conn.execute("DELETE FROM chunks WHERE knowledge_base_id = ? AND knowledge_id = ?", (kb_id, knowledge_id))
            conn.execute("DELETE FROM knowledge WHERE knowledge_base_id = ? AND id = ?", (kb_id, knowledge_id))
            journal_documents(conn, kb_id, [knowledge_id])
        return ids

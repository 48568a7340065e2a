"""The sync state of external engine copies (Milvus) in the knowledge store, and the journal of
the writes they have not acknowledged yet.

The store (SQLite, or PostgreSQL for a team server) is the source of truth; an external engine
holds a copy of a KB's searchable chunks. Two tables live in the store next to the chunks:

``engine_sync``
    one row per (KB, engine key) that holds a copy: when it was attached, when it last
    acknowledged everything, the rows it held then and the last write error. A KB without such a
    row has no copy, and nothing is journalled for it (the local engine's KBs pay nothing).
``engine_journal``
    pending operations per (KB, engine key, document): ``doc`` (write the document's current
    rows, delete the rows it no longer has: an added, changed or deleted document), ``flags``
    (the document's chunks were enabled / disabled: update ``is_enabled`` in place), and for the
    whole KB (document ``*``) ``owner`` (the KB's tenant changed) or ``copy`` (copy the KB: it
    was attached with content). An entry keeps the strongest operation asked for
    (``copy`` > ``doc`` > ``flags`` / ``owner``) and a version that grows with every write, so
    that an engine clears an entry only if nobody journalled it again while it was replayed.

The store writes journal entries **in the transaction that commits the change** (the document
row of an ingestion, a document deletion, an enable toggle, a KB row update): a change SQLite
has committed is either acknowledged by the engine or pending here, never lost. Replaying is the
engine's job (:mod:`rag_lab.retrieval.milvus_sync`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

    from rag_lab.knowledge.sqldb import PgConnection
    from rag_lab.knowledge.store_db import StoreDB

WHOLE_KB = "*"
#: operation → rank; an entry keeps the highest rank journalled for it
OP_RANK = {"flags": 1, "owner": 1, "doc": 2, "copy": 3}

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS engine_sync (kb_id TEXT NOT NULL, engine_key TEXT NOT NULL, "
    "attached_at REAL NOT NULL, synced_at REAL NOT NULL DEFAULT 0, engine_rows INTEGER NOT NULL DEFAULT -1, "
    "last_error TEXT NOT NULL DEFAULT '', PRIMARY KEY (kb_id, engine_key))",
    "CREATE TABLE IF NOT EXISTS engine_journal (kb_id TEXT NOT NULL, engine_key TEXT NOT NULL, "
    "knowledge_id TEXT NOT NULL, op TEXT NOT NULL, version INTEGER NOT NULL, created_at REAL NOT NULL, "
    "PRIMARY KEY (kb_id, engine_key, knowledge_id))",
)

_RANK_SQL = "CASE {o} WHEN 'copy' THEN 3 WHEN 'doc' THEN 2 ELSE 1 END"
# one statement per journalled change: a row per engine copy of the KB (none: nothing written)
_UPSERT = (
    "INSERT INTO engine_journal (kb_id, engine_key, knowledge_id, op, version, created_at) "
    "SELECT s.kb_id, s.engine_key, {kid}, ?, (SELECT COALESCE(MAX(version), 0) + 1 FROM engine_journal), ? "
    "FROM engine_sync s {join} WHERE {where} "
    "ON CONFLICT (kb_id, engine_key, knowledge_id) DO UPDATE SET version = excluded.version, "
    f"op = CASE WHEN {_RANK_SQL.format(o='excluded.op')} > {_RANK_SQL.format(o='engine_journal.op')} "
    "THEN excluded.op ELSE engine_journal.op END"
)


def create_tables(conn: sqlite3.Connection | PgConnection) -> None:
    for sql in SCHEMA:
        conn.execute(sql)


def journal_documents(
    conn: sqlite3.Connection | PgConnection, kb_id: str, knowledge_ids: Iterable[str], op: str = "doc"
) -> None:
    """Inside the caller's transaction: ``op`` pending for these documents of ``kb_id`` in every
    engine copy of the KB."""
    sql = _UPSERT.format(kid="?", join="", where="s.kb_id = ?")
    now = time.time()
    conn.executemany(sql, [(kid, op, now, kb_id) for kid in dict.fromkeys(knowledge_ids)])


def journal_chunk_flags(conn: sqlite3.Connection | PgConnection, chunk_ids: Sequence[str]) -> None:
    """Inside the caller's transaction: ``flags`` pending for the documents of these chunks."""
    marks = ", ".join("?" * len(chunk_ids))
    sql = _UPSERT.format(
        kid="c.knowledge_id",
        join="JOIN (SELECT DISTINCT knowledge_base_id, knowledge_id FROM chunks "
        f"WHERE id IN ({marks})) c ON c.knowledge_base_id = s.kb_id",
        where="1 = 1",
    )
    conn.execute(sql, ("flags", time.time(), *chunk_ids))


def journal_owner_change(conn: sqlite3.Connection | PgConnection, kb_id: str, tenant_id: int) -> None:
    """Inside the caller's transaction, before the KB row is written: ``owner`` pending for the
    whole KB when its stored tenant differs from ``tenant_id``."""
    sql = _UPSERT.format(
        kid="?",
        join="JOIN knowledge_bases k ON k.id = s.kb_id",
        where="s.kb_id = ? AND k.tenant_id != ?",
    )
    conn.execute(sql, (WHOLE_KB, "owner", time.time(), kb_id, int(tenant_id)))


def forget_kb(conn: sqlite3.Connection | PgConnection, kb_id: str) -> None:
    """Inside the caller's transaction: the KB is deleted, its copies' state goes with it."""
    conn.execute("DELETE FROM engine_journal WHERE kb_id = ?", (kb_id,))
    conn.execute("DELETE FROM engine_sync WHERE kb_id = ?", (kb_id,))


class SyncJournal:
    """What an engine reads and writes: attach a copy, read the pending entries, clear the
    acknowledged ones, record the outcome. ``store`` is the :class:`KnowledgeStore`."""

    def __init__(self, store: StoreDB) -> None:
        self.store = store

    def _tx(self) -> tuple[threading.RLock, sqlite3.Connection | PgConnection]:
        return self.store._write_lock, self.store._conn()

    def attach(self, kb_id: str, engine_key: str) -> bool:
        """Record that ``engine_key`` holds (or will hold) a copy of the KB. The first time, a
        KB that already has documents gets a ``copy`` entry (its copy may be missing or stale:
        the engine compares and repairs or refuses). Returns True when the row was new."""
        lock, conn = self._tx()
        with lock, conn:
            cur = conn.execute(
                "INSERT INTO engine_sync (kb_id, engine_key, attached_at) VALUES (?, ?, ?) "
                "ON CONFLICT (kb_id, engine_key) DO NOTHING",
                (kb_id, engine_key, time.time()),
            )
            if cur.rowcount == 0:
                return False
            if conn.execute("SELECT 1 FROM knowledge WHERE knowledge_base_id = ? LIMIT 1", (kb_id,)).fetchone():
                journal_documents(conn, kb_id, [WHOLE_KB], "copy")
            return True

    def is_attached(self, kb_id: str, engine_key: str) -> bool:
        q = "SELECT 1 FROM engine_sync WHERE kb_id = ? AND engine_key = ?"
        return self.store._conn().execute(q, (kb_id, engine_key)).fetchone() is not None

    def pending(self, kb_id: str, engine_key: str) -> list[tuple[str, str, int]]:
        """``(knowledge_id, op, version)`` of the KB's pending entries, whole-KB entry first."""
        q = (
            "SELECT knowledge_id, op, version FROM engine_journal WHERE kb_id = ? AND engine_key = ? "
            "ORDER BY knowledge_id != '*', knowledge_id"
        )
        return [(r[0], r[1], int(r[2])) for r in self.store._conn().execute(q, (kb_id, engine_key))]

    def clear(self, kb_id: str, engine_key: str, entries: Iterable[tuple[str, str, int]]) -> None:
        """Forget acknowledged entries, unless journalled again since (a higher version)."""
        lock, conn = self._tx()
        with lock, conn:
            conn.executemany(
                "DELETE FROM engine_journal WHERE kb_id = ? AND engine_key = ? AND knowledge_id = ? AND version <= ?",
                [(kb_id, engine_key, kid, version) for kid, _, version in entries],
            )

    def journal(self, kb_id: str, engine_key: str, knowledge_ids: Iterable[str], op: str) -> None:
        """Add pending entries for one engine copy (the engine re-journals what it could not write)."""
        lock, conn = self._tx()
        sql = _UPSERT.format(kid="?", join="", where="s.kb_id = ? AND s.engine_key = ?")
        now = time.time()
        with lock, conn:
            conn.executemany(sql, [(kid, op, now, kb_id, engine_key) for kid in dict.fromkeys(knowledge_ids)])

    def record(self, kb_id: str, engine_key: str, *, rows: int | None = None, error: str = "") -> None:
        """The outcome of a sync: the rows the engine holds (acknowledged) or the error met."""
        lock, conn = self._tx()
        with lock, conn:
            if rows is not None:
                conn.execute(
                    "UPDATE engine_sync SET synced_at = ?, engine_rows = ?, last_error = '' "
                    "WHERE kb_id = ? AND engine_key = ?",
                    (time.time(), int(rows), kb_id, engine_key),
                )
            else:
                conn.execute(
                    "UPDATE engine_sync SET last_error = ? WHERE kb_id = ? AND engine_key = ?",
                    (error[:2000], kb_id, engine_key),
                )

    def state(self, kb_id: str, engine_key: str) -> dict[str, object] | None:
        """The ``engine_sync`` row as a dict (``None`` when the engine holds no copy)."""
        row = (
            self.store._conn()
            .execute("SELECT * FROM engine_sync WHERE kb_id = ? AND engine_key = ?", (kb_id, engine_key))
            .fetchone()
        )
        return dict(row) if row else None


__all__ = [
    "OP_RANK",
    "WHOLE_KB",
    "SyncJournal",
    "create_tables",
    "forget_kb",
    "journal_chunk_flags",
    "journal_documents",
    "journal_owner_change",
]

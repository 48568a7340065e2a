"""The database under a :class:`~rag_lab.knowledge.store.KnowledgeStore`: one connection per
thread (SQLite file or PostgreSQL URL), the write lock and write transactions, the change token
that caches of its rows key on (read once for a whole read operation: :meth:`StoreDB.one_state`),
and the schema.
"""

from __future__ import annotations

import contextlib
import contextvars
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Self, cast

from rag_lab.knowledge.kb_rows import KbRows
from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.knowledge.sqldb import PgConnection, is_postgres
from rag_lab.knowledge.sqlite_conn import ThreadConnections
from rag_lab.knowledge.store_rows import (
    _KEYS,
    _SPECS,
    _UNSEARCHABLE_SQL,
    StoreError,
    _columns,
    _decoder,
    _values_decoder,
)
from rag_lab.knowledge.sync_journal import SyncJournal, create_tables

if TYPE_CHECKING:
    from rag_lab.knowledge.store import KnowledgeStore

#: the change token read at the start of the read operation running in this context (the store,
#: its write count then, the token): :meth:`StoreDB.one_state`
_PINNED: contextvars.ContextVar[tuple[StoreDB, int, tuple[int, int]] | None] = contextvars.ContextVar(
    "rag_lab_store_state", default=None
)


class StoreDB:
    """Connections, transactions, change token and schema of one knowledge store."""

    def __init__(self, path: str | Path, *, outage_s: float | None = None) -> None:
        """``outage_s``: how long a PostgreSQL store waits for a restarting server
        (:func:`~rag_lab.knowledge.sqldb.outage_window`; ``None``: the environment or 30 s)."""
        #: True for a PostgreSQL store: other processes (other machines) write to it too
        self.shared = is_postgres(path)
        #: the SQLite file (``None`` for PostgreSQL, see :attr:`where`)
        self.path: Path | None = None if self.shared else Path(path)
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create the store directory: {exc}") from None
        self._write_lock = threading.RLock()
        self._conns = ThreadConnections(path, StoreError, "store", foreign_keys=True, outage_s=outage_s)
        #: the file, or the URL without its password (what messages name)
        self.where = self._conns.where
        #: bumped by every write of this process (with the database's counter: any other writer)
        self.generation = 0
        self._create_schema()
        #: whole KBs' chunk and document rows, per store state (the search path's reads)
        self.kb_rows = KbRows(cast("KnowledgeStore", self))
        #: the sync state of external engine copies and their pending writes (written in the
        #: transactions below that commit a change: :mod:`rag_lab.knowledge.sync_journal`)
        self.sync = SyncJournal(self)

    #: ``row_decoder(cls, columns)``: row → ``cls`` for rows of these columns (the decoder every
    #: getter uses; :class:`~rag_lab.knowledge.kb_rows.KbRows` decodes its rows with it)
    row_decoder = staticmethod(_decoder)
    #: ``values_decoder(cls, columns, names)``: row → the values of some fields of ``cls``,
    #: decoded as the object holds them (hydration reads a few fields of its rows)
    values_decoder = staticmethod(_values_decoder)

    # -- connections ------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection | PgConnection:
        """This thread's connection (:class:`sqlite3.Connection` or
        :class:`~rag_lab.knowledge.sqldb.PgConnection`: the same calls)."""
        return self._conns.get()

    def change_token(self) -> tuple[int, int]:
        """Changes when the store may have changed: this process' write count and the database's
        change number (SQLite's ``data_version``, PostgreSQL's change counter: both move when
        another connection, of any process, commits). Caches of store rows key on it."""
        pin = _PINNED.get()
        if pin is not None and pin[0] is self and pin[1] == self.generation:
            return pin[2]
        return self.generation, self._conns.data_version()

    @contextlib.contextmanager
    def one_state(self) -> Iterator[tuple[int, int]]:
        """Read the change token once for a read operation (a search) whose steps each check it:
        inside the block, in this context and in the worker threads it starts with
        ``asyncio.to_thread`` (which copies the context), :meth:`change_token` returns the token
        read on entry without a query, as long as this process writes nothing (any write of this
        process moves :attr:`generation` and the token is read again). Another process' commit
        during the block is seen by the first :meth:`change_token` after it: the rows a cache
        fills inside the block are read after the token was, so they are never older than the
        state the token names."""
        token = self.change_token()
        reset = _PINNED.set((self, token[0], token))
        try:
            yield token
        finally:
            _PINNED.reset(reset)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection | PgConnection]:
        """One write transaction (committed on exit, rolled back on an error)."""
        with self._write_lock:
            self.generation += 1
            conn = self._conn()
            try:
                with conn:
                    yield conn
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"{self.where}: {exc}") from None

    def _write(self, sql: str, rows: Iterable[tuple[object, ...]] | tuple[object, ...] = ()) -> None:
        with self._transaction() as conn:
            if isinstance(rows, tuple):
                conn.execute(sql, rows)
            else:
                conn.executemany(sql, rows)

    def close(self) -> None:
        """Close every connection opened by any thread."""
        self._conns.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_schema(self) -> None:
        def cols(cls: type, table: str) -> str:
            parts = [f"{n} {t}" for n, t in _columns(cls)]
            return ", ".join(parts) + f", PRIMARY KEY ({_KEYS[table]})"

        with self._write_lock:
            try:
                with self._conns.schema() as conn:
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS knowledge_bases ({cols(KnowledgeBase, 'knowledge_bases')})"
                    )
                    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS kb_name ON knowledge_bases(name)")
                    conn.execute(f"CREATE TABLE IF NOT EXISTS knowledge ({cols(Knowledge, 'knowledge')})")
                    conn.execute("CREATE INDEX IF NOT EXISTS knowledge_id ON knowledge(id)")
                    conn.execute(f"CREATE TABLE IF NOT EXISTS chunks ({cols(Chunk, 'chunks')})")
                    conn.execute("CREATE INDEX IF NOT EXISTS chunk_doc ON chunks(knowledge_base_id, knowledge_id)")
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunk_parent ON chunks(parent_chunk_id) WHERE parent_chunk_id != ''"
                    )
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunk_unsearchable ON chunks(knowledge_base_id) "
                        f"WHERE {_UNSEARCHABLE_SQL}"
                    )
                    create_tables(conn)
            except sqlite3.DatabaseError as exc:
                kind = "PostgreSQL" if self.shared else "SQLite"
                raise StoreError(f"{self.where}: not a usable {kind} store: {exc}") from None

    def _insert_sql(self, table: str, cls: type, replace: bool = True) -> str:
        """``INSERT`` of a whole row; with ``replace`` an upsert on the table's key (the row
        written over in place; a clash on another unique column still fails)."""
        names = _SPECS[cls][0]
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        if replace:
            keys = _KEYS[table]
            sets = ", ".join(f"{n} = excluded.{n}" for n in names if n not in keys.split(", "))
            sql += f" ON CONFLICT ({keys}) DO UPDATE SET {sets}"
        return sql

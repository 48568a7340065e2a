"""One database connection per thread for the stores (knowledge, graph).

SQLite (a file path): WAL journal, 30 s busy timeout, rows by name, reads through a memory map of
up to :data:`MMAP_BYTES` of the file. PostgreSQL (a ``postgresql://`` URL, the knowledge store of a
team server): a :class:`~rag_lab.knowledge.sqldb.PgConnection` per thread, counting write
transactions in the shared change counter; a connection the server dropped (a restart) opens
itself again, waiting out an outage of up to ``outage_s`` seconds (:mod:`rag_lab.knowledge.sqldb`),
and so does the first connection of a thread once the store was reached. An open failure raises
the store's own error naming the file or the URL (password left out).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from rag_lab.blobstore import use_wal
from rag_lab.knowledge.sqldb import PgConnection, is_postgres, read_changes, redact

#: ``PRAGMA mmap_size``: pages read through a memory map instead of read() calls into SQLite's own
#: cache. Search hydrates rows at random places in the file; at 100k chunks (69 MB) 150 rows load
#: in 0.35 vs 0.67 ms p50 (``benchmarks/store_reads.py``). Address space only: nothing is read ahead.
MMAP_BYTES = 256 * 1024 * 1024


class ThreadConnections:
    def __init__(
        self,
        path: Path | str,
        error: type[Exception],
        what: str,
        foreign_keys: bool = False,
        outage_s: float | None = None,
    ) -> None:
        self.postgres = is_postgres(path)
        self.outage_s = outage_s
        #: a connection was opened once: later ones wait out an outage (a restart), the first fails fast
        self._reached = False
        self.path: Path | str = path if self.postgres else Path(path)
        #: how messages name the database
        self.where = redact(str(path)) if self.postgres else str(path)
        self.error, self.what, self.foreign_keys = error, what, foreign_keys
        self._local = threading.local()
        self._lock = threading.Lock()
        self.all: list[sqlite3.Connection | PgConnection] = []
        self.closed = False

    def get(self) -> sqlite3.Connection | PgConnection:
        """This thread's connection: a :class:`sqlite3.Connection` or a :class:`PgConnection`."""
        if self.closed:
            raise self.error(f"{self.where}: {self.what} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open_postgres() if self.postgres else self._open_sqlite()
            self._local.conn = conn
            with self._lock:
                self.all.append(conn)
        return conn

    def _open_sqlite(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            use_wal(conn, 30.0)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            if self.foreign_keys:
                conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            raise self.error(f"{self.path}: cannot open SQLite {self.what}: {exc}") from None
        return conn

    def _open_postgres(self) -> PgConnection:
        try:
            conn = PgConnection(str(self.path), change_counter=True, outage_s=self.outage_s, wait=self._reached)
            self._reached = True
            return conn
        except sqlite3.Error as exc:
            raise self.error(f"{self.where}: cannot connect to the PostgreSQL {self.what}: {exc}") from None
        except ImportError:
            raise self.error(
                f"{self.where}: a PostgreSQL {self.what} needs psycopg: pip install 'rag-lab[postgres]'"
            ) from None

    def data_version(self) -> int:
        """A number that moves whenever another connection (any process) commits a write: SQLite's
        ``PRAGMA data_version``, PostgreSQL's change counter (:mod:`rag_lab.knowledge.sqldb`)."""
        conn = self.get()
        if isinstance(conn, PgConnection):  # self.postgres
            return read_changes(conn)
        return int(conn.execute("PRAGMA data_version").fetchone()[0])

    @contextlib.contextmanager
    def schema(self) -> Iterator[sqlite3.Connection | PgConnection]:
        """A transaction to create tables in: on PostgreSQL it holds the schema lock, so that two
        processes starting at once do not create the same table twice."""
        conn = self.get()
        if isinstance(conn, PgConnection):  # self.postgres
            with conn.schema() as c:
                yield c
        else:
            with conn:
                yield conn

    def close(self) -> None:
        self.closed = True
        with self._lock:
            conns, self.all = self.all, []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass

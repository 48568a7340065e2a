"""The connection of a session store: one SQLite file (``":memory:"`` for a private in-memory
one) opened with its pragmas, schema version checked and tables created, or a PostgreSQL database
(a ``postgresql://`` URL, through :mod:`rag_lab.knowledge.sqldb`). :class:`SessionDB` holds it
with the lock every method of :class:`~rag_lab.session.sqlite_store.SQLiteSessionStore` takes.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Self

from rag_lab.blobstore import use_wal
from rag_lab.knowledge.sqldb import PgConnection, is_postgres, redact
from rag_lab.session.pg_schema import open_pg_sessions
from rag_lab.session.sqlite_schema import _SCHEMA, SCHEMA_VERSION


class SessionDB:
    """One connection behind a re-entrant lock (thread-safe), closed by :meth:`close` or ``with``."""

    def __init__(self, path: str | Path, *, outage_s: float | None = None) -> None:
        """``outage_s``: how long a PostgreSQL store waits out a restarting server
        (:func:`~rag_lab.knowledge.sqldb.outage_window`; ``None``: the environment or 30 s)."""
        self._lock = threading.RLock()
        if is_postgres(path):
            self.path = redact(str(path))
            self._db: sqlite3.Connection | PgConnection = open_pg_sessions(str(path), _SCHEMA, SCHEMA_VERSION, outage_s)
            return
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise FileNotFoundError(f"{self.path}: folder {parent} does not exist")
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                use_wal(self._db, 5.0)  # sqlite3.connect's default busy timeout
                # WAL + NORMAL (as the knowledge store): a commit survives a crash of the process; only a power
                # loss may undo the last ones. FULL synced every message (~8 ms, most of lab.ask's overhead).
                self._db.execute("PRAGMA synchronous = NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ValueError(f"{self.path}: session schema version {version}, this code reads {SCHEMA_VERSION}")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: not a usable session database: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

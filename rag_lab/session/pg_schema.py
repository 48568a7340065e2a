"""The session tables in PostgreSQL: the SQLite schema of :mod:`rag_lab.session.sqlite_schema`,
created through :class:`~rag_lab.knowledge.sqldb.PgConnection` (which maps the column types), plus
what SQLite has built in and PostgreSQL has not:

* ``rowid``: the sessions and messages are ordered by insertion at equal timestamps (SQLite's
  implicit ``rowid``); here it is a ``BIGSERIAL`` column of that name, so the stores' ``ORDER BY
  … rowid`` reads the same on both;
* the schema version (SQLite's ``PRAGMA user_version``): a row of ``rag_lab_schema`` keyed by
  store name.
"""

from __future__ import annotations

import sqlite3

from rag_lab.knowledge.sqldb import PgConnection, redact

__all__ = ["open_pg_sessions"]

_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS rag_lab_schema (store TEXT PRIMARY KEY, version INTEGER NOT NULL)"
_ROWIDS = (
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS rowid BIGSERIAL",
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS rowid BIGSERIAL",
)


def open_pg_sessions(dsn: str, schema: str, version: int, outage_s: float | None = None) -> PgConnection:
    """A connection to the session tables at ``dsn`` (created at ``version`` when missing); a
    database of another schema version, or one that cannot be reached, raises ValueError.
    ``outage_s``: how long a dropped connection waits for the server (:mod:`rag_lab.knowledge.sqldb`)."""
    where = redact(dsn)
    try:
        conn = PgConnection(dsn, outage_s=outage_s)
    except ImportError:
        raise ValueError(
            f"{where}: a PostgreSQL session store needs psycopg: pip install 'rag-lab[postgres]'"
        ) from None
    except sqlite3.Error as exc:
        raise ValueError(f"{where}: cannot connect to the PostgreSQL session store: {exc}") from None
    try:
        with conn.schema():
            conn.execute(_VERSION_TABLE)
            row = conn.execute("SELECT version FROM rag_lab_schema WHERE store = 'sessions'").fetchone()
            found = int(row[0]) if row else 0
            if found not in (0, version):
                raise ValueError(f"{where}: session schema version {found}, this code reads {version}")
            conn.executescript(schema)
            for sql in _ROWIDS:
                conn.execute(sql)
            conn.execute(
                "INSERT INTO rag_lab_schema (store, version) VALUES ('sessions', ?) "
                "ON CONFLICT (store) DO UPDATE SET version = excluded.version",
                (version,),
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ValueError(f"{where}: not a usable session database: {exc}") from None
    except ValueError:
        conn.close()
        raise
    return conn

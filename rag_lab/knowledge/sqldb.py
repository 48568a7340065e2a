"""PostgreSQL under the stores' SQL: a psycopg 3 connection that answers like the subset of
:class:`sqlite3.Connection` the knowledge and session stores use, so one store class runs its
statements on either database.

The stores write one SQL dialect, the part SQLite and PostgreSQL share: ``INSERT … ON CONFLICT
(key) DO UPDATE / DO NOTHING`` upserts, ``1 = 1`` for true, ``LIMIT`` / ``OFFSET``, ``COUNT(*)``,
partial indexes. What differs is bridged here, in one place:

* placeholders: ``?`` becomes ``%s`` (and a literal ``%`` becomes ``%%``); the statements hold
  no ``?`` inside a string literal;
* table definitions (``CREATE TABLE``): ``INTEGER`` is ``BIGINT`` (SQLite's integers are 64-bit),
  ``REAL`` is ``DOUBLE PRECISION`` (PostgreSQL's ``REAL`` is 32-bit: a timestamp would lose
  minutes), ``TEXT`` is ``TEXT COLLATE "C"`` (text sorts by code point, as SQLite's ``BINARY``
  collation does, so every ``ORDER BY`` gives the same order on both);
* transactions: the psycopg connection is in autocommit mode, ``with conn:`` is one transaction
  (committed on exit, rolled back on an error: :mod:`sqlite3`'s meaning), and explicit
  ``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` statements pass through as they are;
* rows: :class:`PgRow` reads by position and by column name (``row["id"]``, ``row.keys()``, as
  :class:`sqlite3.Row`); a cursor whose ``row_factory`` is ``None`` returns plain tuples;
* errors: psycopg's are raised as the :mod:`sqlite3` classes they correspond to
  (:class:`sqlite3.IntegrityError` for a unique or foreign-key violation, and so on), so a store
  handles one set of exceptions;
* outages are waited out (:mod:`rag_lab.knowledge.pg_outage`): before a statement outside a
  transaction, a connection that is dead, or readable while idle (the server's goodbye), is
  replaced, retrying the reconnect for up to ``outage_s``; a read or a ``BEGIN`` that fails on a
  connection that died under it runs again on a new one. A lone write that failed after it was
  sent is raised (it may have reached the server), and so is a connection lost inside a
  transaction (nothing is replayed). A store's first connection does not wait (a wrong URL fails
  fast);
* the change counter: a write transaction of a connection made with ``change_counter=True``
  increments the one row of ``rag_lab_changes`` before it commits; :func:`read_changes` reads it.
  It is what SQLite's ``PRAGMA data_version`` is for a file: a number that moves when any other
  connection (another process, another machine) commits, so caches keyed on it see other writers.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from rag_lab.knowledge.pg_outage import connect_waiting, idle_connection_dead, is_transient, outage_window

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "PG_SCHEMES",
    "PgConnection",
    "PgCursor",
    "PgRow",
    "is_postgres",
    "outage_window",
    "pg_table_sql",
    "read_changes",
    "redact",
    "to_pg",
]

PG_SCHEMES = ("postgresql://", "postgres://")

#: the change counter (one row) and the statement a counted write transaction runs before COMMIT
CHANGES_TABLE = "rag_lab_changes"
_CHANGES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)",
    f"INSERT INTO {CHANGES_TABLE} (id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
)
_BUMP = f"UPDATE {CHANGES_TABLE} SET n = n + 1 WHERE id = 1"
#: the advisory lock key schema creation holds (two processes creating tables at once collide)
SCHEMA_LOCK_KEY = 0x7261675F6C6162  # "rag_lab"


def is_postgres(location: object) -> bool:
    """True when ``location`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(location, str) and location.startswith(PG_SCHEMES)


def redact(dsn: str) -> str:
    """``dsn`` without its password (for messages and logs)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


_TRANSLATED: dict[str, str] = {}


def to_pg(sql: str) -> str:
    """``sql`` with ``?`` placeholders as ``%s`` (and ``%`` as ``%%``), cached per statement."""
    out = _TRANSLATED.get(sql)
    if out is None:
        out = sql.replace("%", "%%").replace("?", "%s")
        if sql.lstrip()[:12].upper() == "CREATE TABLE":
            out = pg_table_sql(out)
        if len(_TRANSLATED) < 4096:  # the stores have a few hundred statement shapes
            _TRANSLATED[sql] = out
    return out


_TYPES = re.compile(r"\b(INTEGER|REAL|TEXT)\b")
_PG_TYPES = {"INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION", "TEXT": 'TEXT COLLATE "C"'}


def pg_table_sql(sql: str) -> str:
    """A ``CREATE TABLE`` written for SQLite with PostgreSQL's column types (module docstring)."""
    return _TYPES.sub(lambda m: _PG_TYPES[m.group(1)], sql)


class PgRow(tuple):  # type: ignore[type-arg]
    """A row read by position or by column name (the part of :class:`sqlite3.Row` used)."""

    __slots__ = ()
    _index: dict[str, int] = {}
    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise IndexError(f"no column {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_class(names: tuple[str, ...]) -> type[PgRow]:
    return type("PgRow", (PgRow,), {"__slots__": (), "_names": names, "_index": {n: i for i, n in enumerate(names)}})


_ROW_CLASSES: dict[tuple[str, ...], type[PgRow]] = {}


def _named_rows(cursor: Any) -> type[PgRow]:
    """psycopg row factory: rows as :class:`PgRow` (one class per column list)."""
    names = tuple(c.name for c in cursor.description or ())
    cls = _ROW_CLASSES.get(names)
    if cls is None:
        cls = _ROW_CLASSES.setdefault(names, _row_class(names))
    return cls


def _as_sqlite_error(exc: Exception) -> sqlite3.Error:
    """The :mod:`sqlite3` exception matching psycopg's ``exc`` (same message)."""
    import psycopg

    kinds: list[tuple[type, type]] = [
        (psycopg.IntegrityError, sqlite3.IntegrityError),
        (psycopg.OperationalError, sqlite3.OperationalError),
        (psycopg.ProgrammingError, sqlite3.ProgrammingError),
        (psycopg.DataError, sqlite3.DataError),
        (psycopg.InterfaceError, sqlite3.InterfaceError),
    ]
    for theirs, ours in kinds:
        if isinstance(exc, theirs):
            return cast(sqlite3.Error, ours(str(exc).strip()))
    return sqlite3.DatabaseError(str(exc).strip())


class PgCursor:
    """A cursor over a :class:`PgConnection` (``row_factory``: ``None`` for tuples)."""

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn
        self._cur = conn.raw.cursor()
        self.row_factory: Callable[..., type[PgRow]] | None = _named_rows

    def _factory(self) -> None:
        from psycopg.rows import tuple_row

        self._cur.row_factory = self.row_factory if self.row_factory is not None else tuple_row

    def execute(self, sql: str, args: Sequence[object] = ()) -> PgCursor:
        self._factory()
        import psycopg

        word = sql.strip().upper()
        # what may run again on a new connection when the old one turns out dead: a read or a
        # BEGIN outside any transaction (nothing of theirs reached the server)
        retry = not self._conn.in_transaction() and (word == "BEGIN" or word.startswith("SELECT"))
        deadline = time.monotonic() + self._conn.outage_s
        try:
            while True:
                try:
                    self._cur.execute(to_pg(sql), tuple(args))  # always params: ``%%`` is read as ``%``
                    break
                except psycopg.OperationalError as exc:
                    if not (retry and self._conn.raw.broken and is_transient(exc)) or time.monotonic() > deadline:
                        raise
                    self._conn._live(deadline)
                    self._cur = self._conn.raw.cursor()
                    self._factory()
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        finally:
            if word in ("COMMIT", "ROLLBACK"):  # an explicit transaction ends, even on an error
                self._conn.explicit = False
        if word == "BEGIN":
            self._conn.explicit = True
        return self

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> PgCursor:
        self._factory()
        import psycopg

        batch = [tuple(r) for r in rows]
        if batch:
            try:
                self._cur.executemany(to_pg(sql), batch)
            except psycopg.Error as exc:
                raise _as_sqlite_error(exc) from exc
        return self

    @property
    def description(self) -> Any:
        return self._cur.description

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    def fetchone(self) -> Any:
        return self._cur.fetchone() if self._cur.description is not None else None

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall() if self._cur.description is not None else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur) if self._cur.description is not None else iter(())

    def close(self) -> None:
        self._cur.close()


class PgConnection:
    """One psycopg connection (autocommit) speaking the stores' SQL (module docstring)."""

    def __init__(
        self,
        dsn: str,
        *,
        change_counter: bool = False,
        connect_timeout: float = 10.0,
        outage_s: float | None = None,
        wait: bool = False,
    ) -> None:
        """``outage_s``: see :func:`outage_window`; ``wait``: wait out an outage for this first
        connection too (a store that was reached before opens another connection)."""
        self.dsn = dsn
        self.change_counter = change_counter
        self._timeout = max(1, int(connect_timeout))
        #: how long a reconnect waits for a server that is down (module docstring)
        self.outage_s = outage_window(outage_s)
        self._tx: list[Any] = []  # psycopg transactions
        #: inside an explicit ``BEGIN`` … ``COMMIT`` / ``ROLLBACK``
        self.explicit = False
        self._lock = threading.RLock()
        self.raw: Any = self._connect(time.monotonic() + self.outage_s if wait else 0.0)

    def in_transaction(self) -> bool:
        return bool(self._tx) or self.explicit

    def _connect(self, deadline: float) -> Any:
        """A new psycopg connection, waiting out an outage until ``deadline``
        (:func:`~rag_lab.knowledge.pg_outage.connect_waiting`); errors as :mod:`sqlite3` ones."""
        import psycopg

        try:
            return connect_waiting(
                lambda: psycopg.connect(self.dsn, autocommit=True, connect_timeout=self._timeout),
                deadline,
                redact(self.dsn),
            )
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc

    def _live(self, deadline: float | None = None) -> None:
        """Reconnect when the server dropped the connection (a restart) between transactions,
        waiting out the outage until ``deadline`` (default: ``outage_s`` from now); a connection
        lost inside a transaction is an error (what it wrote is gone: nothing is replayed)."""
        if self._tx or self.explicit:
            if self.raw.closed or self.raw.broken:
                self.explicit = False
                raise sqlite3.OperationalError(f"{redact(self.dsn)}: the connection was lost inside a transaction")
            return
        if not idle_connection_dead(self.raw):
            return
        self.close()
        self.raw = self._connect(time.monotonic() + self.outage_s if deadline is None else deadline)

    # -- statements ---------------------------------------------------------------------------
    def cursor(self) -> PgCursor:
        if not self._tx:
            self._live()
        return PgCursor(self)

    def execute(self, sql: str, args: Sequence[object] = ()) -> PgCursor:
        return self.cursor().execute(sql, args)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> PgCursor:
        return self.cursor().executemany(sql, rows)

    def executescript(self, script: str) -> None:
        """Every ``;``-separated statement of ``script`` (no placeholders), in order."""
        for stmt in script.split(";"):
            if stmt.strip():
                self.execute(stmt)

    # -- transactions -------------------------------------------------------------------------
    def __enter__(self) -> PgConnection:
        """One transaction (nested ``with`` blocks are savepoints), as ``with sqlite_conn:``."""
        import psycopg

        self._lock.acquire()
        try:
            deadline = time.monotonic() + self.outage_s
            while True:
                if not self._tx:
                    self._live(deadline)
                tx = self.raw.transaction()
                try:
                    tx.__enter__()
                    break
                except psycopg.OperationalError as exc:
                    # the server dropped it since the last statement: BEGIN did not run, try again
                    if self._tx or not self.raw.broken or not is_transient(exc) or time.monotonic() > deadline:
                        raise
        except (psycopg.Error, sqlite3.Error) as exc:
            self._lock.release()
            raise (_as_sqlite_error(exc) if isinstance(exc, psycopg.Error) else exc) from exc
        self._tx.append(tx)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        import psycopg

        tx = self._tx.pop()
        try:
            if kind is None and self.change_counter and not self._tx:
                try:
                    self.raw.execute(_BUMP)
                except psycopg.Error as err:
                    tx.__exit__(type(err), err, err.__traceback__)
                    raise _as_sqlite_error(err) from err
            try:
                tx.__exit__(kind, exc, tb)
            except psycopg.Error as err:
                raise _as_sqlite_error(err) from err
        finally:
            self._lock.release()

    def schema(self) -> PgConnection:
        """``with conn.schema():`` a transaction holding the schema lock (creators queue)."""
        self.__enter__()
        try:
            self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            for sql in _CHANGES_DDL:
                self.raw.execute(to_pg(sql))
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return _Entered(self)  # type: ignore[return-value]

    @property
    def broken(self) -> bool:
        return bool(self.raw.broken or self.raw.closed)

    def close(self) -> None:
        try:
            self.raw.close()
        except Exception:
            pass


class _Entered:
    """The context of :meth:`PgConnection.schema`: the transaction is already open."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def __enter__(self) -> PgConnection:
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.conn.__exit__(kind, exc, tb)


def read_changes(conn: PgConnection) -> int:
    """The change counter (see the module docstring)."""
    row = conn.execute(f"SELECT n FROM {CHANGES_TABLE} WHERE id = 1").fetchone()
    return int(row[0]) if row else 0

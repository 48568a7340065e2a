"""The storage layer under both caches: byte strings by 32-byte key in one SQLite file, bounded.

The vector cache (:mod:`rag_lab.models.vector_cache`: vectors by model and text) and the stage
cache (:mod:`rag_lab.eval.cache`: search results, rerank scores, query embeddings by stage input)
keep their rows here, each in its own *space*, with its own key hashes; values are opaque bytes.

Bounded on disk: the rows' bytes (value plus :data:`ROW_OVERHEAD`) are counted by triggers in the
transaction of every insert, update and delete; a write that takes them over ``max_bytes`` evicts
the least recently used rows down to :data:`EVICT_TO` of the bound (a sort of the use times, no
index to keep up). "Used" is the last write or read, to the minute (:data:`TOUCH_S`), kept in a
table of its own and written in batches — every :data:`TOUCH_BATCH` rows, before an eviction, at
``close`` and at exit — so reads never wait for a write. At exit, :data:`EXIT_WAIT_S` at most for
another process's write, then they are dropped (they only order evictions): a Jupyter kernel
stopping beside busy writers is killed after a few seconds, before the rest of its exit work. The
file does not shrink when rows go; ``clear`` vacuums.

Concurrency: WAL journal, a connection per thread, ``BEGIN IMMEDIATE`` writes with a 30 s busy
timeout: two processes writing at once queue rather than corrupt. A cache is an optimisation: a
read or write that fails (a locked or read-only file) is logged once and answered as nothing
found / nothing written (``None``), and the caller computes the values. A file that cannot be
opened (not a database, a layout it cannot be brought to) is tried again only after ``close``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypedDict

log = logging.getLogger(__name__)

#: bytes counted per row besides the value: the key twice, the space id, the use time, headers
ROW_OVERHEAD = 80
#: eviction brings the rows down to this share of the bound (so it does not run on every write)
EVICT_TO = 0.9
#: a row read again within this many seconds keeps its recorded use time (no write on a warm read)
TOUCH_S = 60
#: use times of rows read are written in batches: at this many, before an eviction, at close / exit
TOUCH_BATCH = 16384
#: how long a read or write waits for another process's write to end
BUSY_TIMEOUT_S = 30.0
#: how long the use times written at process exit wait for another process's write to end
EXIT_WAIT_S = 0.5
_BATCH = 500  # keys per ``IN (...)``: under SQLite's variable limit

#: the file's layout (``user_version``); another is emptied on open, but the vector cache's 3 is renamed
SCHEMA_VERSION = 4
#: a new file's page size: a 384-float vector (1,536 bytes) and its key fit ten to a page, inline
#: (a WITHOUT ROWID table spilled each onto an overflow page: 3.1× the vectors' bytes on disk)
PAGE_SIZE = 16384

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS spaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS entries (hash BLOB NOT NULL UNIQUE, space_id INTEGER NOT NULL, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS uses (hash BLOB PRIMARY KEY, used INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries BEGIN
    UPDATE totals SET rows = rows + 1, bytes = bytes + length(NEW.value) + {ROW_OVERHEAD} WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS entries_changed AFTER UPDATE OF value ON entries BEGIN
    UPDATE totals SET bytes = bytes + length(NEW.value) - length(OLD.value) WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
    UPDATE totals SET rows = rows - 1, bytes = bytes - length(OLD.value) - {ROW_OVERHEAD} WHERE id = 0;
    DELETE FROM uses WHERE hash = OLD.hash;
END;
"""

#: the vector cache's layout 3 (models / vectors): renamed into this one, its rows kept (tables of
#: this layout beside it are leftovers of a later version the file was opened with before: dropped)
_FROM_VECTOR_LAYOUT = """
DROP TABLE IF EXISTS entries;
DROP TABLE IF EXISTS spaces;
DROP TRIGGER IF EXISTS vectors_added;
DROP TRIGGER IF EXISTS vectors_removed;
ALTER TABLE models RENAME TO spaces;
ALTER TABLE spaces RENAME COLUMN model_key TO name;
ALTER TABLE vectors RENAME TO entries;
ALTER TABLE entries RENAME COLUMN model_id TO space_id;
ALTER TABLE entries RENAME COLUMN vec TO value;
"""


class SpaceStats(TypedDict):
    rows: int
    bytes: int


class StoreStats(TypedDict):
    """What :meth:`BlobStore.stats` reports."""

    path: str
    rows: int
    bytes: int
    max_bytes: int
    file_bytes: int
    spaces: dict[str, SpaceStats]
    reads: int
    writes: int
    evicted: int


def _statements(script: str) -> list[str]:
    """The SQL statements of ``script`` (``executescript`` would commit the open transaction)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A ``BEGIN IMMEDIATE`` write transaction: committed when the block ends, rolled back when
    it raises (anything, Ctrl-C included)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def use_wal(conn: sqlite3.Connection, wait_s: float) -> None:
    """Put ``conn``'s file in WAL mode within ``wait_s``: a switch beside another writer fails at once,
    without the busy timeout (SQLite's deadlock rule; two processes opening a new file), so it is retried."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _flush_at_exit(ref: weakref.ref[BlobStore]) -> None:
    store = ref()
    if store is not None:
        store.flush(wait_s=EXIT_WAIT_S)


class BlobStore:
    """Values by key in the SQLite file ``path``, at most ``max_bytes`` counted (module docstring);
    ``what`` names the cache in the one warning logged when a read or write fails."""

    def __init__(self, path: str | Path, max_bytes: int, what: str) -> None:
        if int(max_bytes) < 0:
            raise ValueError(f"{what}: max_bytes must be >= 0, got {max_bytes}")
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self.what = what
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self._warned = False
        self._open_error: sqlite3.Error | None = None  # why the file could not be opened, until ``close``
        self._touched: set[bytes] = set()  # rows read whose use time is not written yet
        atexit.register(_flush_at_exit, weakref.ref(self))
        #: rows read / written / evicted through this object (``stats`` adds the file's totals)
        self.reads = self.writes = self.evicted = 0

    # -- connections ------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._open_error is not None:  # the file could not be opened: not tried again by every call
            raise self._open_error
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file's; an existing one keeps its own
            use_wal(conn, BUSY_TIMEOUT_S)
            conn.execute("PRAGMA synchronous=NORMAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                with _immediate(conn):
                    self._set_layout(conn)
        except sqlite3.Error as exc:
            conn.close()
            self._open_error = type(exc)(f"{self.what} {self.path}: {exc}")
            raise self._open_error from exc
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        with self._lock:
            self._conns.append(conn)
        return conn

    @staticmethod
    def _set_layout(conn: sqlite3.Connection) -> None:
        """Bring the file to :data:`SCHEMA_VERSION` (inside the caller's transaction)."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:  # another process did it first
            return
        if version == 3:
            for statement in _statements(_FROM_VECTOR_LAYOUT):
                conn.execute(statement)
        else:  # a file of another layout: a cache, so it is started again
            for table in ("entries", "uses", "spaces", "totals", "vectors", "models"):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _statements(_SCHEMA):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Write pending use times and close the connections (the next call opens them again)."""
        self.flush()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(sqlite3.Error):
                c.close()
        self._local = threading.local()
        self._open_error = None

    def _failed(self, what: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            where = f"{self.what} {self.path}"
            reason = str(exc).removeprefix(f"{where}: ")
            log.warning("%s: %s failed (%s); values are computed instead", where, what, reason)

    # -- reads ------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes] | None:
        """The stored value of each key there is; ``None`` when the file cannot be read."""
        found: dict[bytes, bytes] = {}
        stale: list[bytes] = []
        now = int(time.time())
        try:
            conn = self._conn()
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                q = (
                    "SELECT e.hash, e.value, u.used FROM entries e LEFT JOIN uses u ON u.hash = e.hash "
                    f"WHERE e.hash IN ({_marks(len(part))})"
                )
                for h, value, used in conn.execute(q, part):
                    found[h] = value
                    if used is None or used < now - TOUCH_S:
                        stale.append(h)
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return None
        with self._lock:
            self._touched.update(stale)
            full = len(self._touched) >= TOUCH_BATCH
        if full:
            self.flush()
        self.reads += len(found)
        return found

    def has_many(self, keys: Sequence[bytes]) -> set[bytes] | None:
        """The keys that have a value (the values are not read); ``None`` when the file cannot be read."""
        present: set[bytes] = set()
        try:
            conn = self._conn()
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                present.update(
                    h for (h,) in conn.execute(f"SELECT hash FROM entries WHERE hash IN ({_marks(len(part))})", part)
                )
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return None
        return present

    def _take_touched(self) -> list[bytes]:
        with self._lock:
            keys, self._touched = list(self._touched), set()
        return keys

    @staticmethod
    def _touch(conn: sqlite3.Connection, keys: list[bytes], now: int) -> None:
        """Set the use time of ``keys`` (inside the caller's transaction)."""
        for i in range(0, len(keys), _BATCH):
            part = keys[i : i + _BATCH]
            conn.execute(f"UPDATE uses SET used = ? WHERE hash IN ({_marks(len(part))})", [now, *part])

    def flush(self, wait_s: float | None = None) -> None:
        """Write the use times of the rows read since the last write. With ``wait_s``, wait at most
        that long for another writer, then drop them (not a fault: they only order evictions)."""
        keys = self._take_touched()
        if not keys:
            return
        conn: sqlite3.Connection | None = None
        try:
            conn = self._conn()
            if wait_s is not None:
                conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
            with _immediate(conn):
                self._touch(conn, keys, int(time.time()))
        except sqlite3.Error as exc:
            if wait_s is None or getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY:
                self._failed("a write", exc)
            else:
                log.debug("%s %s: busy, %d use times dropped", self.what, self.path, len(keys))
        finally:
            if wait_s is not None and conn is not None:
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    # -- writes -----------------------------------------------------------------------------
    def put_many(self, space: str, rows: Sequence[tuple[bytes, bytes]], *, replace: bool = False) -> int | None:
        """Store ``(key, value)`` rows in ``space`` (a key there keeps its value, or with ``replace`` takes
        the new one); the rows added (``None``: the write failed). Evicts when the bound is passed."""
        if not rows:
            return 0
        now = int(time.time())
        keep = "DO UPDATE SET value = excluded.value, space_id = excluded.space_id" if replace else "DO NOTHING"
        try:
            with _immediate(self._conn()) as conn:
                conn.execute("INSERT OR IGNORE INTO spaces (name) VALUES (?)", (space,))
                (space_id,) = conn.execute("SELECT id FROM spaces WHERE name = ?", (space,)).fetchone()
                (before,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                conn.executemany(
                    f"INSERT INTO entries (hash, space_id, value) VALUES (?, ?, ?) ON CONFLICT(hash) {keep}",
                    [(h, space_id, value) for h, value in rows],
                )
                conn.executemany("INSERT OR REPLACE INTO uses (hash, used) VALUES (?, ?)", [(h, now) for h, _ in rows])
                (after,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                added = int(after) - int(before)
                self._evict(conn)
        except sqlite3.Error as exc:
            self._failed("a write", exc)
            return None
        self.writes += added
        return added

    def _evict(self, conn: sqlite3.Connection) -> None:
        n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()
        if n_bytes <= self.max_bytes or n_rows <= 0:
            return
        self._touch(conn, self._take_touched(), int(time.time()))  # what was read since stays longer
        target = int(self.max_bytes * EVICT_TO)
        while n_bytes > target and n_rows > 0:
            per_row = max(1, n_bytes // n_rows)
            n = max(1, -(-(n_bytes - target) // per_row))
            conn.execute("DELETE FROM entries WHERE hash IN (SELECT hash FROM uses ORDER BY used, hash LIMIT ?)", (n,))
            self.evicted += n
            n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()

    def clear(self, spaces: Callable[[str], bool] | None = None) -> int:
        """Remove every row (or those of the spaces ``spaces`` accepts by name), vacuum; the rows removed."""
        with _immediate(self._conn()) as conn:
            if spaces is None:
                n = conn.execute("DELETE FROM entries").rowcount
                conn.execute("DELETE FROM spaces")
                conn.execute("DELETE FROM uses")
            else:
                n = 0
                for i, name in conn.execute("SELECT id, name FROM spaces").fetchall():
                    if spaces(name):
                        n += conn.execute("DELETE FROM entries WHERE space_id = ?", (i,)).rowcount
                        conn.execute("DELETE FROM spaces WHERE id = ?", (i,))
        conn.execute("VACUUM")
        return int(n)

    # -- reporting --------------------------------------------------------------------------
    def stats(self) -> StoreStats:
        """Rows and bytes (all, per space), the bound, the file's size with its WAL, this object's counts."""
        conn = self._conn()
        n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()
        spaces: dict[str, SpaceStats] = {
            name: {"rows": int(r), "bytes": int(b) + ROW_OVERHEAD * int(r)}
            for name, r, b in conn.execute(
                "SELECT s.name, count(*), sum(length(e.value)) FROM entries e JOIN spaces s ON s.id = e.space_id "
                "GROUP BY s.name ORDER BY s.name"
            )
        }
        on_disk = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "path": str(self.path),
            "rows": int(n_rows),
            "bytes": int(n_bytes),
            "max_bytes": self.max_bytes,
            "file_bytes": on_disk,
            "spaces": spaces,
            "reads": self.reads,
            "writes": self.writes,
            "evicted": self.evicted,
        }

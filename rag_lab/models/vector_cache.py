"""The workspace's vector cache: float32 vectors by (embedding model, exact text), on disk.

One SQLite file (``<workspace>/vectors.sqlite``) shared by every process on the workspace. A row's
key is the SHA-256 of the model key and the text (``model_key``, a NUL byte, the UTF-8 text), so a
vector is only ever served for the very text and model it was computed with: a model whose key
changes (another model, another endpoint, a tokenizer whose hash is part of the key) misses. The
vector is stored as its little-endian float32 bytes and read back with ``numpy.frombuffer``, so a
cached vector equals the freshly computed one bit for bit (``tests/models/test_vector_cache.py``).

Bounded on disk: the rows' bytes (vector and :data:`ROW_OVERHEAD` bytes of keys and row fields
each) are counted in the same transaction as every insert and delete (triggers); when a write takes
them over ``max_bytes``, the least recently used rows go first until they are at
:data:`EVICT_TO` of the bound. "Used" is the time a row was last written or read, kept to the
minute (:data:`TOUCH_S`: a row read again within a minute is not rewritten). Use times live in a
table of their own (40-byte rows: updating one rewrites a small page, not the 1.5 KB vector's),
and those of rows read are written in batches — every :data:`TOUCH_BATCH` rows, before an
eviction, at ``close`` and at process exit — so reads never wait for a write. Eviction sorts the
use times (no index to keep up on every read); it runs when the bound is passed and frees a tenth
of it. The file itself is
larger than the count by SQLite's page slack and does not shrink when rows go; ``clear`` vacuums.

Concurrency: WAL journal, a connection per thread, writes in ``BEGIN IMMEDIATE`` transactions with a
30 s busy timeout, so two processes writing at once queue rather than corrupt. The cache is an
optimisation: a read or write that fails (a locked or read-only file) is logged once and skipped,
and the caller computes the vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import weakref

    import numpy.typing as npt

log = logging.getLogger(__name__)

#: the file's name inside the workspace
FILE_NAME = "vectors.sqlite"
#: default bound on the rows' bytes: about 650,000 MiniLM vectors (384 float32 + key)
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
#: bytes counted per row besides the vector: the 32-byte key twice (vector and use time), the model
#: id, the use time, the rows' headers
ROW_OVERHEAD = 80
#: eviction brings the rows down to this share of the bound (so it does not run on every write)
EVICT_TO = 0.9
#: a row read again within this many seconds keeps its recorded use time (no write on a warm read)
TOUCH_S = 60
#: use times of rows read are written in batches: at this many, before an eviction, at close / exit
TOUCH_BATCH = 16384
_BATCH = 500  # keys per ``IN (...)``: under SQLite's variable limit

#: the layout of the file (``PRAGMA user_version``); a file of another layout is emptied on open
SCHEMA_VERSION = 3
#: a new file's page size: a 384-float vector (1,536 bytes) and its key fit ten to a page, inline
#: (a WITHOUT ROWID table spilled each onto an overflow page: 3.1× the vectors' bytes on disk)
PAGE_SIZE = 16384

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, model_key TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vectors (hash BLOB NOT NULL UNIQUE, model_id INTEGER NOT NULL, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS uses (hash BLOB PRIMARY KEY, used INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
CREATE TRIGGER IF NOT EXISTS vectors_added AFTER INSERT ON vectors BEGIN
    UPDATE totals SET rows = rows + 1, bytes = bytes + length(NEW.vec) + {ROW_OVERHEAD} WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS vectors_removed AFTER DELETE ON vectors BEGIN
    UPDATE totals SET rows = rows - 1, bytes = bytes - length(OLD.vec) - {ROW_OVERHEAD} WHERE id = 0;
    DELETE FROM uses WHERE hash = OLD.hash;
END;
"""


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


def vector_key(model_key: str, text: str) -> bytes:
    """The row key of ``text`` embedded by the model ``model_key``."""
    return hashlib.sha256(model_key.encode("utf-8") + b"\x00" + text.encode("utf-8", "surrogatepass")).digest()


def _flush_at_exit(ref: weakref.ref[VectorCache]) -> None:
    cache = ref()
    if cache is not None:
        cache.flush()


class VectorCache:
    """Vectors by (model key, text) in the SQLite file ``path`` (see the module docstring)."""

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if int(max_bytes) < 0:
            raise ValueError(f"vector cache: max_bytes must be >= 0, got {max_bytes}")
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self._warned = False
        self._touched: set[bytes] = set()  # rows read whose use time is not written yet
        import atexit
        import weakref

        atexit.register(_flush_at_exit, weakref.ref(self))
        #: rows read / written / evicted by this object (``stats`` adds the file's totals)
        self.reads = 0
        self.writes = 0
        self.evicted = 0

    def __repr__(self) -> str:
        return f"VectorCache({str(self.path)!r}, max_bytes={self.max_bytes})"

    # -- connections ------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file's; an existing one keeps its own
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    conn.execute("BEGIN IMMEDIATE")
                    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                        # a file of another layout: a cache, so it is started again
                        for table in ("vectors", "uses", "models", "totals"):
                            conn.execute(f"DROP TABLE IF EXISTS {table}")
                        for statement in _statements(_SCHEMA):  # inside this transaction
                            conn.execute(statement)
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.close()
                raise
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        self.flush()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    def _failed(self, what: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            log.warning("vector cache %s: %s failed (%s); vectors are computed instead", self.path, what, exc)

    # -- reads ------------------------------------------------------------------------------
    def get_many(self, model_key: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text (read-only float32 arrays), ``None`` where there is none."""
        keys = [vector_key(model_key, t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        stale: list[bytes] = []
        now = int(time.time())
        try:
            conn = self._conn()
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                q = (
                    "SELECT v.hash, v.vec, u.used FROM vectors v LEFT JOIN uses u ON u.hash = v.hash "
                    f"WHERE v.hash IN ({','.join('?' * len(part))})"
                )
                for h, blob, used in conn.execute(q, part):
                    vec = np.frombuffer(blob, dtype="<f4")
                    found[h] = vec if vec.dtype == np.float32 else vec.astype(np.float32)
                    if used is None or used < now - TOUCH_S:
                        stale.append(h)
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return [None] * len(keys)
        with self._lock:
            self._touched.update(stale)
            full = len(self._touched) >= TOUCH_BATCH
        if full:
            self.flush()
        self.reads += len(found)
        return [found.get(k) for k in keys]

    def has_many(self, model_key: str, texts: Sequence[str]) -> list[bool]:
        """Whether each text has a cached vector (the vectors are not read)."""
        keys = [vector_key(model_key, t) for t in texts]
        present: set[bytes] = set()
        try:
            conn = self._conn()
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                q = f"SELECT hash FROM vectors WHERE hash IN ({','.join('?' * len(part))})"
                present.update(h for (h,) in conn.execute(q, part))
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return [False] * len(keys)
        return [k in present for k in keys]

    def _take_touched(self) -> list[bytes]:
        with self._lock:
            keys, self._touched = list(self._touched), set()
        return keys

    @staticmethod
    def _touch(conn: sqlite3.Connection, keys: list[bytes], now: int) -> None:
        """Set the use time of ``keys`` (inside the caller's transaction)."""
        for i in range(0, len(keys), _BATCH):
            part = keys[i : i + _BATCH]
            conn.execute(f"UPDATE uses SET used = ? WHERE hash IN ({','.join('?' * len(part))})", [now, *part])

    def flush(self) -> None:
        """Write the use times of the rows read since the last write."""
        keys = self._take_touched()
        if not keys:
            return
        try:
            with _immediate(self._conn()) as conn:
                self._touch(conn, keys, int(time.time()))
        except sqlite3.Error as exc:
            self._failed("a write", exc)

    # -- writes -----------------------------------------------------------------------------
    def put_many(self, model_key: str, texts: Sequence[str], vectors: npt.ArrayLike) -> int:
        """Store the vectors of ``texts`` (rows already there are kept); returns the rows added.
        Evicts the least recently used rows when the bound is passed."""
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(texts):
            raise ValueError(f"vector cache: {len(texts)} texts but vectors of shape {arr.shape}")
        if not len(texts):
            return 0
        little = arr.astype("<f4", copy=False)
        now = int(time.time())
        rows = [(vector_key(model_key, t), little[i].tobytes()) for i, t in enumerate(texts)]
        try:
            with _immediate(self._conn()) as conn:
                conn.execute("INSERT OR IGNORE INTO models (model_key) VALUES (?)", (model_key,))
                (model_id,) = conn.execute("SELECT id FROM models WHERE model_key = ?", (model_key,)).fetchone()
                (before,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                conn.executemany(
                    "INSERT OR IGNORE INTO vectors (hash, model_id, vec) VALUES (?, ?, ?)",
                    [(h, model_id, blob) for h, blob in rows],
                )
                conn.executemany("INSERT OR REPLACE INTO uses (hash, used) VALUES (?, ?)", [(h, now) for h, _ in rows])
                (after,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                added = int(after) - int(before)
                self._evict(conn)
        except sqlite3.Error as exc:
            self._failed("a write", exc)
            return 0
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
            conn.execute("DELETE FROM vectors WHERE hash IN (SELECT hash FROM uses ORDER BY used, hash LIMIT ?)", (n,))
            self.evicted += n
            n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()

    def clear(self, model_key: str | None = None) -> int:
        """Remove every row (or those of one model key, whatever code version filed them: see
        :func:`~rag_lab.models.embedding.vector_store_key`) and vacuum the file; returns the rows removed."""
        with _immediate(self._conn()) as conn:
            if model_key is None:
                n = conn.execute("DELETE FROM vectors").rowcount
                conn.execute("DELETE FROM models")
                conn.execute("DELETE FROM uses")
            else:  # the model key as given, and the store keys filed under it (``<key>|code:<tag>``)
                ids = [
                    i
                    for i, key in conn.execute("SELECT id, model_key FROM models")
                    if key == model_key or key.startswith(model_key + "|code:")
                ]
                n = 0
                for i in ids:
                    n += conn.execute("DELETE FROM vectors WHERE model_id = ?", (i,)).rowcount
                    conn.execute("DELETE FROM models WHERE id = ?", (i,))
        conn.execute("VACUUM")
        return int(n)

    # -- reporting --------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Rows and counted bytes (all models and per model key), the bound, the file's size on
        disk (with its WAL) and this object's reads, writes and evictions."""
        conn = self._conn()
        n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()
        per_model = {
            key: {"rows": int(r), "bytes": int(b) + ROW_OVERHEAD * int(r)}
            for key, r, b in conn.execute(
                "SELECT m.model_key, count(*), sum(length(v.vec)) FROM vectors v JOIN models m ON m.id = v.model_id "
                "GROUP BY m.model_key ORDER BY m.model_key"
            )
        }
        on_disk = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "path": str(self.path),
            "rows": int(n_rows),
            "bytes": int(n_bytes),
            "max_bytes": self.max_bytes,
            "file_bytes": on_disk,
            "models": per_model,
            "reads": self.reads,
            "writes": self.writes,
            "evicted": self.evicted,
        }

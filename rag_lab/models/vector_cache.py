"""The workspace's vector cache: float32 vectors by (embedding model, exact text), on disk.

One SQLite file (``<workspace>/vectors.sqlite``) shared by every process on the workspace. A row's
key is the SHA-256 of the model key and the text (``model_key``, a NUL byte, the UTF-8 text), so a
vector is only ever served for the very text and model it was computed with: a model whose key
changes (another model, another endpoint, a tokenizer whose hash is part of the key) misses. The
vector is stored as its little-endian float32 bytes and read back with ``numpy.frombuffer``, so a
cached vector equals the freshly computed one bit for bit (``tests/models/test_vector_cache.py``).

Bounded on disk: the rows' bytes (vector, 32-byte key and :data:`ROW_OVERHEAD` bytes of row fields
each) are counted in the same transaction as every insert and delete (triggers); when a write takes
them over ``max_bytes``, the least recently used rows go first until they are at
:data:`EVICT_TO` of the bound. "Used" is the time a row was last written or read, kept to the
minute (:data:`TOUCH_S`: a row read again within a minute is not rewritten). The file itself is
larger than the count by SQLite's page slack and does not shrink when rows go; ``clear`` vacuums.

Concurrency: WAL journal, a connection per thread, writes in ``BEGIN IMMEDIATE`` transactions with a
30 s busy timeout, so two processes writing at once queue rather than corrupt. The cache is an
optimisation: a read or write that fails (a locked or read-only file) is logged once and skipped,
and the caller computes the vectors.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: the file's name inside the workspace
FILE_NAME = "vectors.sqlite"
#: default bound on the rows' bytes: about 650,000 MiniLM vectors (384 float32 + key)
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
#: bytes counted per row besides the vector: the 32-byte key, the model id, the use time, the header
ROW_OVERHEAD = 48
#: eviction brings the rows down to this share of the bound (so it does not run on every write)
EVICT_TO = 0.9
#: a row read again within this many seconds keeps its recorded use time (no write on a warm read)
TOUCH_S = 60
_BATCH = 500  # keys per ``IN (...)``: under SQLite's variable limit

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, model_key TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vectors (
    hash BLOB PRIMARY KEY, model_id INTEGER NOT NULL, vec BLOB NOT NULL, used INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used);
CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 0), rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES (0, 0, 0);
CREATE TRIGGER IF NOT EXISTS vectors_added AFTER INSERT ON vectors BEGIN
    UPDATE totals SET rows = rows + 1, bytes = bytes + length(NEW.vec) + {ROW_OVERHEAD} WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS vectors_removed AFTER DELETE ON vectors BEGIN
    UPDATE totals SET rows = rows - 1, bytes = bytes - length(OLD.vec) - {ROW_OVERHEAD} WHERE id = 0;
END;
"""


def vector_key(model_key: str, text: str) -> bytes:
    """The row key of ``text`` embedded by the model ``model_key``."""
    return hashlib.sha256(model_key.encode("utf-8") + b"\x00" + text.encode("utf-8", "surrogatepass")).digest()


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
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
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
                q = f"SELECT hash, vec, used FROM vectors WHERE hash IN ({','.join('?' * len(part))})"
                for h, blob, used in conn.execute(q, part):
                    vec = np.frombuffer(blob, dtype="<f4")
                    found[h] = vec if vec.dtype == np.float32 else vec.astype(np.float32)
                    if used < now - TOUCH_S:
                        stale.append(h)
            if stale:
                self._touch(conn, stale, now)
        except sqlite3.Error as exc:
            self._failed("a read", exc)
            return [None] * len(keys)
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

    def _touch(self, conn: sqlite3.Connection, keys: list[bytes], now: int) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            for i in range(0, len(keys), _BATCH):
                part = keys[i : i + _BATCH]
                conn.execute(f"UPDATE vectors SET used = ? WHERE hash IN ({','.join('?' * len(part))})", [now, *part])
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- writes -----------------------------------------------------------------------------
    def put_many(self, model_key: str, texts: Sequence[str], vectors: Any) -> int:
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
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT OR IGNORE INTO models (model_key) VALUES (?)", (model_key,))
                (model_id,) = conn.execute("SELECT id FROM models WHERE model_key = ?", (model_key,)).fetchone()
                (before,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                conn.executemany(
                    "INSERT OR IGNORE INTO vectors (hash, model_id, vec, used) VALUES (?, ?, ?, ?)",
                    [(h, model_id, blob, now) for h, blob in rows],
                )
                (after,) = conn.execute("SELECT rows FROM totals WHERE id = 0").fetchone()
                added = int(after) - int(before)
                self._evict(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._failed("a write", exc)
            return 0
        self.writes += added
        return added

    def _evict(self, conn: sqlite3.Connection) -> None:
        n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()
        if n_bytes <= self.max_bytes or n_rows <= 0:
            return
        target = int(self.max_bytes * EVICT_TO)
        while n_bytes > target and n_rows > 0:
            per_row = max(1, n_bytes // n_rows)
            n = max(1, -(-(n_bytes - target) // per_row))
            conn.execute(
                "DELETE FROM vectors WHERE hash IN (SELECT hash FROM vectors ORDER BY used, hash LIMIT ?)", (n,)
            )
            self.evicted += n
            n_rows, n_bytes = conn.execute("SELECT rows, bytes FROM totals WHERE id = 0").fetchone()

    def clear(self, model_key: str | None = None) -> int:
        """Remove every row (or those of one model key) and vacuum the file; returns the rows removed."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if model_key is None:
                n = conn.execute("DELETE FROM vectors").rowcount
                conn.execute("DELETE FROM models")
            else:
                row = conn.execute("SELECT id FROM models WHERE model_key = ?", (model_key,)).fetchone()
                n = 0
                if row is not None:
                    n = conn.execute("DELETE FROM vectors WHERE model_id = ?", (row[0],)).rowcount
                    conn.execute("DELETE FROM models WHERE id = ?", (row[0],))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
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
